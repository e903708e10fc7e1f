"""A run's recorded ``imports`` are a note, not an instruction (harness.user_modules).

Real subprocesses on a tiny real run of an env of the user's own module (``trustwalk``,
written to ``tmp_path/src`` and found through ``PYTHONPATH``). A module of the same name
that writes a marker file is planted beside the run, in its runs directory and in the
current directory of the command (``python -m`` puts that first on ``sys.path``):
``resume``, ``report``, ``check-repro`` and ``enjoy`` never import it; they refuse in one
line or work, and work when ``--import`` names the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import harness_cli, only_run_dir

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

MODULE = "trustwalk"

USER_ENV = """
import gymnasium as gym
import numpy as np


class Walk(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    observation_space = gym.spaces.Box(-10, 10, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.x = 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-1, 1))
        return np.array([self.x], dtype=np.float32), {}

    def step(self, action):
        self.x += 0.1 if action == 1 else -0.1
        return np.array([self.x], dtype=np.float32), -abs(self.x), False, False, {}

    def render(self):
        frame = np.zeros((16, 16, 3), dtype=np.uint8)
        frame[:, int(np.clip(8 + 4 * self.x, 0, 15))] = 255
        return frame


gym.register("TrustWalk-v0", entry_point="trustwalk:Walk", max_episode_steps=20)
"""

TINY = ("--algo", "cma", "--env", "TrustWalk-v0", "--generations", "2")
TINY_SET = ("--set", "policy.kind=linear", "--set", "population=6")


def planted(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').write('imported')\n"


def make_run(tmp: Path, key: Path) -> Path:
    """A tiny COMPLETED run made with ``--import trustwalk``, signed with ``key``."""
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / f"{MODULE}.py").write_text(USER_ENV)
    runs = tmp / "runs"
    harness_cli(
        "run",
        "--import",
        MODULE,
        *TINY,
        *TINY_SET,
        "--runs-dir",
        str(runs),
        env={"PYTHONPATH": str(src), "HARNESS_CHECKPOINT_KEY_FILE": str(key)},
    )
    return only_run_dir(runs)


@pytest.fixture(scope="module")
def foreign_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run made by someone else: its checkpoint is signed with another user's key."""
    tmp = tmp_path_factory.mktemp("foreign")
    return make_run(tmp, tmp / "their.key")


def cli_in(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli`` in ``cwd`` (so ``cwd`` is ``sys.path[0]``), no PYTHONPATH."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ES_HARNESS_IMPORTS")}
    full.update({"HARNESS_PROGRESS": "0", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full,
        timeout=300,
    )


def one_line_refusal(result: subprocess.CompletedProcess[str], *named: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in named:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def plant_everywhere(run_dir: Path, cwd: Path, marker: Path) -> None:
    for folder in (run_dir, run_dir.parent, cwd):
        (folder / f"{MODULE}.py").write_text(planted(marker))


def test_planted_modules_are_never_imported(foreign_run: Path, tmp_path: Path) -> None:
    marker, cwd = tmp_path / "MARKER", tmp_path / "work"
    cwd.mkdir()
    plant_everywhere(foreign_run, cwd, marker)
    how = f"pass --import {MODULE}"

    resumed = cli_in(cwd, "resume", str(foreign_run), "--generations", "3")
    one_line_refusal(resumed, f"run {foreign_run.name}", f"imports: {MODULE}", how)
    assert not marker.exists()

    enjoyed = cli_in(cwd, "enjoy", str(foreign_run), "--episodes", "1")
    one_line_refusal(enjoyed, f"imports: {MODULE}", how)
    assert not marker.exists()

    reported = cli_in(cwd, "report", str(foreign_run), "--out", str(tmp_path / "report"))
    assert reported.returncode == 0, reported.stderr
    assert f"imports: {MODULE}; {how}" in reported.stderr
    assert (tmp_path / "report" / "report.md").is_file()
    assert not marker.exists()

    golden = tmp_path / "golden.json"
    spec: dict[str, Any] = {
        "imports": [MODULE],
        "algo": "cma",
        "env": "TrustWalk-v0",
        "budget": {"generations": 2},
        "set": [],
    }
    golden.write_text(json.dumps({"spec": spec, "metrics": {}}))
    checked = cli_in(cwd, "check-repro", "--golden", str(golden))
    one_line_refusal(checked, f"golden file {golden}", f"imports: {MODULE}", how)
    # a MODULE:ID env names a module too
    spec_env = {**spec, "imports": [], "env": f"{MODULE}:TrustWalk-v0"}
    golden.write_text(json.dumps({"spec": spec_env, "metrics": {}}))
    one_line_refusal(cli_in(cwd, "check-repro", "--golden", str(golden)), how)
    assert not marker.exists()


def test_naming_the_module_replays_the_run(foreign_run: Path, tmp_path: Path) -> None:
    src = {"PYTHONPATH": str(foreign_run.parent.parent / "src")}
    video = tmp_path / "walk.mp4"
    enjoyed = harness_cli(
        "enjoy",
        str(foreign_run),
        "--import",
        MODULE,
        "--episodes",
        "1",
        "--video",
        str(video),
        env=src,
    )
    assert "episode 1:" in enjoyed.stdout and video.stat().st_size > 0

    script = (
        "import harness, sys\n"
        "from harness.policy_io import PolicyLoadError\n"
        "try:\n"
        f"    harness.load_policy({str(foreign_run)!r})\n"
        "except PolicyLoadError as error:\n"
        "    print('refused:', error)\n"
        f"policy = harness.load_policy({str(foreign_run)!r}, imports=[{MODULE!r}])\n"
        "env = policy.make_env()\n"
        "obs, _ = env.reset(seed=0)\n"
        "print('action', policy(obs))\n"
    )
    played = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **src},
        timeout=300,
    )
    assert played.returncode == 0, played.stderr
    refused, action = played.stdout.strip().splitlines()
    assert f"imports: {MODULE}; pass --import {MODULE}" in refused
    assert action.startswith("action")


def test_an_env_nobody_registered_is_one_line_naming_it(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, tmp_path / "mine.key")
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "imports": []}))
    line = one_line_refusal(
        cli_in(tmp_path, "enjoy", str(run_dir)),
        "'TrustWalk-v0'",
        "--import MODULE",
    )
    assert "Traceback" not in line


def test_the_users_own_run_is_trusted_but_not_an_edited_record(tmp_path: Path) -> None:
    key = tmp_path / "mine.key"
    run_dir = make_run(tmp_path, key)
    mine = {"PYTHONPATH": str(tmp_path / "src"), "HARNESS_CHECKPOINT_KEY_FILE": str(key)}
    # its checkpoint is signed with this user's key: its recorded imports are honoured
    resumed = harness_cli("resume", str(run_dir), "--generations", "3", env=mine)
    assert "COMPLETED" in resumed.stdout
    again = harness_cli("resume", str(run_dir), "--generations", "4", "--import", MODULE, env=mine)
    assert "COMPLETED" in again.stdout
    # config.json is not signed: a module added to it is refused, nothing imported
    marker = tmp_path / "MARKER"
    (tmp_path / "src" / "planted.py").write_text(planted(marker))
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "imports": [MODULE, "planted"]}))
    for command in (("resume", str(run_dir), "--generations", "5"), ("enjoy", str(run_dir))):
        result = harness_cli(*command, env=mine, check=False)
        one_line_refusal(result, "imports: planted;", "pass --import planted")
    assert not marker.exists()
