"""scripts/zoo_parity.py: the zoo's own runs packed, set beside the benchmark's, on the page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.benchmark import fairness
from tests.test_reports_redraw import load_script

ZOO_ARGS = """!!python/object/apply:collections.OrderedDict
- - - algo
    - ppo
  - - env
    - LunarLanderContinuous-v3
  - - eval_freq
    - 50000
  - - seed
    - {seed}
  - - n_timesteps
    - 1000000
"""
ZOO_CONFIG = """!!python/object/apply:collections.OrderedDict
- - - n_envs
    - 16
  - - policy
    - MlpPolicy
"""


def fake_zoo_run(folder: Path, index: int, seed: int, last: float, up_to: float = 1e6) -> None:
    run = folder / "ppo" / f"LunarLanderContinuous-v3_{index}"
    (run / "LunarLanderContinuous-v3").mkdir(parents=True)
    timesteps = np.arange(50_000, up_to + 1, 50_000)
    results = np.linspace(-200, last, len(timesteps))[:, None] + np.zeros((1, 10))
    np.savez(run / "evaluations.npz", timesteps=timesteps, results=results)
    (run / "LunarLanderContinuous-v3" / "args.yml").write_text(ZOO_ARGS.format(seed=seed))
    (run / "LunarLanderContinuous-v3" / "config.yml").write_text(ZOO_CONFIG)
    (run / "LunarLanderContinuous-v3" / "command.txt").write_text(
        f"python -m rl_zoo3.train --algo ppo --env LunarLanderContinuous-v3 --seed {seed}"
    )


def test_zoo_runs_are_packed_and_set_beside_the_benchmarks_cell(tmp_path: Path) -> None:
    parity = load_script("zoo_parity")
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    for index, (seed, last) in enumerate(((100, 250.0), (101, 260.0), (102, 270.0)), 1):
        fake_zoo_run(zoo, index, seed, last)
    fake_zoo_run(zoo, 4, 103, 0.0, up_to=500_000)  # stopped half-way: left out
    assert parity.main(["pack", "--zoo-dir", str(zoo), "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "zoo").glob("*.csv")) == [
        f"ppo-LunarLanderContinuous-v3-seed{s}.csv" for s in (100, 101, 102)
    ]
    assert parity.main(["report", "--out", str(out)]) == 0
    (entry,) = json.loads((out / "parity.json").read_text())["entries"]
    assert entry["zoo"]["seeds"] == [100, 101, 102]
    # the mean of the last 3 evaluations of each linear curve, as the benchmark scores runs
    expected = [last - (last + 200) / 19 for last in (250.0, 260.0, 270.0)]
    assert entry["zoo"]["finals"] == pytest.approx(expected, abs=1e-3)
    assert entry["harness"]["seeds"] == [100, 101, 102]  # the committed lander archive's ppo
    assert all(math.isfinite(v) for v in entry["harness"]["finals"])
    assert isinstance(entry["agree"], bool)
    assert (out / entry["figure"]).stat().st_size > 0
    assert "| ppo | LunarLanderContinuous-v3 | 100 |" in (out / "parity.md").read_text()

    gates = fairness.load_parity(out / "parity.json")
    text = gates[("LunarLanderContinuous", "ppo")].text()
    assert text.startswith("rl_zoo3's own train.py at these settings, seeds 100, 101, 102: 2")
    assert "the harness there:" in text


def test_a_planted_python_tag_in_a_zoo_file_is_refused(tmp_path: Path) -> None:
    parity = load_script("zoo_parity")
    planted = tmp_path / "args.yml"
    planted.write_text("!!python/object/apply:os.system ['touch planted']\n")
    with pytest.raises(SystemExit) as stopped:
        parity.read_zoo_yaml(planted)
    assert stopped.value.code == 2
    assert not (tmp_path / "planted").exists() and not Path("planted").exists()


def test_a_malformed_parity_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "parity.json"
    path.write_text('{"entries": [{"algo": "ppo"}]}')
    with pytest.raises(fairness.ProvenanceError, match="not a parity file"):
        fairness.load_parity(path)
    assert fairness.load_parity(tmp_path / "absent.json") == {}
