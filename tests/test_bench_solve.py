"""``harness bench solve`` launches runs the CLI accepts, for every algorithm family."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from harness.bench.solve import _command, add_arguments


@pytest.mark.parametrize(("algo", "has_backend"), [("optimes", True), ("ppo", False)])
def test_the_run_command_is_one_harness_run_accepts(
    tmp_path: Path, algo: str, has_backend: bool
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--algo", algo, "--env", "CartPole", "--target", "475"])
    command = _command(args, seed=1, workers=2, runs_dir=tmp_path / "runs")
    assert ("--backend" in command) is has_backend
    # --print-config validates every flag as the real run would, and writes nothing
    done = subprocess.run([*command, "--print-config"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "runs").exists()
