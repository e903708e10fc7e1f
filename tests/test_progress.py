"""Progress in a log: plain lines at a low rate where the stream is not a terminal, never
tqdm's ``\\r`` redraws (a sweep cell's log, CI); a terminal keeps the tqdm bar."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from tqdm import tqdm

from harness.progress import LineProgress, progress_bar
from tests.conftest import ROOT


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_each_tenth_or_minute_and_at_the_end() -> None:
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(total=100.0, desc="optimes CartPole", file=out, clock=clock)
    for _ in range(50):  # 1% a step, a second apart
        clock.now += 1.0
        bar.set_postfix(gen=int(bar.n), refresh=False)
        bar.update(1.0)
    clock.now += 70.0  # a minute with no progress: one line
    bar.set_postfix(gen=50, refresh=False)
    bar.update(0.0)
    bar.update(49.5)
    bar.close()
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 7, lines  # 10..50%, the minute, the end
    assert lines[0] == "optimes CartPole:  10% [00:10, gen=9]"
    assert lines[5].startswith("optimes CartPole:  50% [02:00")
    assert lines[-1].startswith("optimes CartPole: 100% [02:00")


def test_a_terminal_gets_tqdm_and_anything_else_lines() -> None:
    assert isinstance(progress_bar(total=1, file=_Terminal(), disable=True), tqdm)
    assert isinstance(progress_bar(total=1, file=io.StringIO()), LineProgress)
    assert isinstance(progress_bar(total=1, file=None), LineProgress)
    quiet = io.StringIO()
    off = progress_bar(total=4, file=quiet, disable=True)
    off.update(4)
    off.close()
    assert quiet.getvalue() == ""


def test_a_run_with_stderr_piped_writes_no_carriage_returns(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("HARNESS_PROGRESS", None)  # unset: progress on, as a user's CI has it
    env.pop("RAY_ADDRESS", None)
    flags = ["--algo", "optimes", "--env", "CartPole", "--backend", "inline"]
    flags += ["--generations", "3", "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\r" not in done.stdout
    shown = [line for line in done.stderr.splitlines() if line.startswith("optimes CartPole:")]
    assert shown and shown[-1].startswith("optimes CartPole: 100%"), done.stderr
    assert "gen=3" in shown[-1], shown
