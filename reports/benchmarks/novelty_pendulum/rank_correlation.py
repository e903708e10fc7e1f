"""Diagnostic (tuning seed, not a reported run): how alike are NSR-ES's two rankings?

Runs ``harness run --algo nsr-es --env PendulumPO`` in this process with the tell wrapped
so that, each generation, before the update, it prints

* the correlation of the candidates' centred reward ranks with their centred novelty ranks,
* the same for the mirrored pairs' rank differences (plus minus minus: what the gradient
  uses), and
* the spread (std over the 40 candidates) of their BCs' mean cos and mean |omega|/8 next to
  the spread of the novelty archive (the centres' BCs), to compare the seed-to-seed noise
  of a one-episode BC with the distances novelty measures.

    python reports/novelty_pendulum/rank_correlation.py --seed 0 --timesteps 200000 \\
        > reports/novelty_pendulum/rank_correlation.txt

(nothing in algorithms/ is changed; the wrapper only reads the algorithm's state.)
"""

from __future__ import annotations

import sys
import tempfile

import numpy as np

import algorithms.novelty_es as novelty_es
from algorithms.es_core import centered_ranks

_tell = novelty_es.NoveltySearchES._tell
ROWS: list[tuple[float, ...]] = []


def tell(self, candidates, fitness):  # type: ignore[no-untyped-def]
    novelty = self.archive.novelty(self._behaviours)
    reward_ranks, novelty_ranks = centered_ranks(fitness), centered_ranks(novelty)
    both = np.corrcoef(reward_ranks, novelty_ranks)[0, 1]
    pairs = np.corrcoef(
        reward_ranks[0::2] - reward_ranks[1::2], novelty_ranks[0::2] - novelty_ranks[1::2]
    )[0, 1]
    bcs, archive = self._behaviours, self.archive.points
    ROWS.append((both, pairs))
    print(
        f"gen {self.generation:3d} centre {self.current}  rank corr {both:+.2f}  "
        f"pair-difference corr {pairs:+.2f}  candidates' BC std: cos {bcs[:, 0].std():.3f} "
        f"speed {bcs[:, 2].std():.3f}  archive ({len(archive)}) std: cos "
        f"{archive[:, 0].std():.3f} speed {archive[:, 2].std():.3f}",
        flush=True,
    )
    return _tell(self, candidates, fitness)


def main() -> int:
    from harness.cli import main as harness

    novelty_es.NoveltySearchES._tell = tell
    args = sys.argv[1:] or ["--seed", "0", "--timesteps", "200000"]
    with tempfile.TemporaryDirectory() as runs:
        code = harness(
            [
                "run",
                "--algo",
                "nsr-es",
                "--env",
                "PendulumPO",
                "--backend",
                "inline",
                "--runs-dir",
                runs,
                "--no-progress",
                "--set",
                "eval_every_timesteps=1000000",
                *args,
            ]
        )
    both, pairs = np.array(ROWS).T
    print(
        f"mean over {len(ROWS)} generations: rank corr {both.mean():+.2f}, "
        f"pair-difference corr {pairs.mean():+.2f} "
        f"(positive in {(pairs > 0).mean():.0%} of generations)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
