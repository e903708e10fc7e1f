"""The report's replay sections: frames and behavioural diversity where runs stored their
final policies, skipped quietly where they did not (archives) or when asked (--no-replay)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import harness_cli

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

LANDER = "LunarLanderContinuous"
TINY = {
    "optimes": ["population=10"],
    "ppo": ["n_envs=2", "n_steps=128", "batch_size=64", "n_epochs=2"],
}


@pytest.fixture(scope="module")
def lander_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("replay") / "runs"
    for algo, knobs in TINY.items():
        for seed in (1, 2):
            sets = [arg for knob in knobs for arg in ("--set", knob)]
            harness_cli(
                "run", "--algo", algo, "--env", LANDER, "--timesteps", "1000", "--seed",
                str(seed), "--runs-dir", str(runs), "--set", "eval_episodes=2", *sets,
            )  # fmt: skip
    return runs


def _section(markdown: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", markdown, re.S | re.M)
    return match.group(1) if match else ""


def test_report_shows_frames_and_diversity_of_stored_policies(
    lander_runs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    harness_cli("report", str(lander_runs), "--out", str(out))
    markdown = (out / "report.md").read_text()
    frames = _section(markdown, "What the best final policies do")
    assert "frames_lunarlandercontinuous.png" in frames
    strip = np.asarray(Image.open(out / "frames_lunarlandercontinuous.png").convert("L"))
    assert strip.shape[0] > 300 and strip.std() > 10  # two rows of rendered frames, not blank
    diversity = _section(markdown, "Behavioural diversity of the final policies")
    assert (out / "diversity_lunarlandercontinuous.png").is_file()
    rows = [
        line
        for line in diversity.splitlines()
        if line.startswith("| optimes") or line.startswith("| ppo")
    ]
    assert len(rows) == 2 and all("| 2 |" in row for row in rows), diversity  # n runs per group
    assert re.search(r"ES minus RL [+-]\d", diversity), diversity
    assert "2 ES runs, 2 RL runs" in diversity


def test_report_skips_replay_without_policies_or_when_asked(
    lander_runs: Path, tmp_path: Path
) -> None:
    quick = tmp_path / "quick"
    harness_cli("report", str(lander_runs), "--out", str(quick), "--no-replay")
    markdown = (quick / "report.md").read_text()
    assert "What the best final policies do" not in markdown and "--no-replay" in markdown
    assert not list(quick.glob("frames_*.png")) and not list(quick.glob("diversity_*.png"))
    archive = tmp_path / "runs.tar.xz"
    from harness.rundir import run_dirs, write_run_archive

    write_run_archive(run_dirs(lander_runs), archive)  # what committed reports keep
    out = tmp_path / "archived"
    completed = harness_cli("report", str(archive), "--out", str(out))
    markdown = (out / "report.md").read_text()
    assert "What the best final policies do" not in markdown
    assert "Behavioural diversity" not in markdown and "warning" not in completed.stderr
