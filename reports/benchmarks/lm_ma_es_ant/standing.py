"""What the AntBulletEnv study's final policies do: one episode each, its return, length
and where the torso ended.

    python reports/benchmarks/lm_ma_es_ant/standing.py runs/lm_ma_es_ant \
        > reports/benchmarks/lm_ma_es_ant/standing.txt

Reads each run directory's final policy (``harness.load_policy``; the report's archive
keeps records only) and replays it with :func:`harness.replay.play` on evaluation seed
1000, the same for every run. A reset puts the torso within 1 cm of the origin, so its
final (x, y) is how far it moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import harness
from harness.replay import play

SEED = 1000


def main(runs_dir: Path) -> None:
    print(f"one episode per run on seed {SEED}; the torso's final position in metres (x, y)")
    for run in sorted(runs_dir.glob("[0-9]*"), key=lambda p: int(p.name)):
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        (episode,) = play(harness.load_policy(run), [SEED])
        assert episode.position is not None
        x, y = episode.position
        print(
            f"{config['algo']:9s} seed {config['seed']}: return {episode.episode_return:7.1f}, "
            f"{episode.length} steps, torso at x {x:+.2f}, y {y:+.2f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
