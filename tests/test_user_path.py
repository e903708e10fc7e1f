"""A researcher's path with an env of their own, end to end, as they would type it.

The env lives in a module of the user's (a noisy point mass written to a temporary
folder, found through PYTHONPATH and named with ``--import``); a sweep with a
hyperparameter grid runs it, ``harness report`` reports it, ``harness enjoy`` films a
run, ``load_policy`` replays one, and the Python API runs and reads it from a fresh
interpreter. No environment variable but PYTHONPATH is set, and no output may hold a
traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

ENV_MODULE = '''
"""A point mass pushed towards the origin, with noisy observations."""
import gymnasium as gym
import numpy as np


class NoisyPoint(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.state = np.zeros(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.uniform(-1.0, 1.0, size=2)
        return self._obs(), {}

    def _obs(self):
        noise = self.np_random.normal(0.0, 0.01, size=2)
        return (self.state + noise).astype(np.float32)

    def step(self, action):
        push = float(np.clip(action, -1.0, 1.0)[0])
        position, velocity = self.state
        velocity = 0.9 * velocity + 0.1 * push
        position = position + 0.1 * velocity
        self.state = np.array([position, velocity])
        return self._obs(), -float(position**2), False, False, {}

    def render(self):
        frame = np.zeros((32, 32, 3), np.uint8)
        column = int(np.clip((self.state[0] + 2.0) / 4.0 * 31, 0, 31))
        frame[12:20, column] = 255
        return frame


gym.register("NoisyPoint-v0", entry_point=NoisyPoint, max_episode_steps=40)
'''

SWEEP = """
name: point-grid
imports: [pointmass]
grid:
  algo: [optimes, cma]
  env: [NoisyPoint-v0]
  seed: [0, 1]
budget:
  generations: 2
backend: inline
jobs: 2
set: [eval_episodes=2, policy.kind=linear]
overrides:
  optimes: [population=6]
  cma: [population=6]
"""


def _harness(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return _python(["-m", "harness.cli", *args], env, cwd)


def _python(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh process; it must succeed with no traceback."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == 0, output
    return done


@pytest.mark.timeout(300)
def test_a_researchers_own_env_from_sweep_to_video(tmp_path: Path) -> None:
    (tmp_path / "pointmass.py").write_text(ENV_MODULE, encoding="utf-8")
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(SWEEP, encoding="utf-8")
    # only PYTHONPATH: the interpreter's own PATH/HOME as a user's shell would have them
    env = {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env["HOME"] = os.environ.get("HOME", str(tmp_path))
    runs = tmp_path / "runs"

    # a grid over optimes' sigma, then cma (a grid key must apply to every algorithm of the
    # grid, and cma's step size is sigma0), two seeds each, into one runs directory
    sweep = ["sweep", str(sweep_file), "--runs-dir", str(runs)]
    _harness([*sweep, "--grid", "algo=optimes", "--grid", "sigma=0.05,0.1"], env, tmp_path)
    _harness([*sweep, "--grid", "algo=cma"], env, tmp_path)
    configs = [json.loads(p.read_text()) for p in sorted(runs.glob("*/config.json"))]
    assert len(configs) == 6  # optimes: 2 sigmas x 2 seeds; cma: 2 seeds
    assert {c["algo"] for c in configs} == {"optimes", "cma"}
    assert {c["params"]["sigma"] for c in configs if c["algo"] == "optimes"} == {0.05, 0.1}
    assert all(c["imports"] == ["pointmass"] for c in configs)

    help_text = _harness(["report", "--help"], env, tmp_path).stdout
    extra = ["--algo", "optimes"] if "--algo" in help_text else []
    extra += ["--threshold", "-5"] if "--threshold" in help_text else []
    out = tmp_path / "report"
    _harness(
        ["report", str(runs), "--out", str(out), "--import", "pointmass", "--no-replay", *extra],
        env,
        tmp_path,
    )
    assert (out / "report.md").is_file()

    run_dir = runs / "1"
    video = tmp_path / "x.mp4"
    _harness(["enjoy", str(run_dir), "--import", "pointmass", "--video", str(video)], env, tmp_path)
    assert video.is_file() and video.stat().st_size > 0

    code = textwrap.dedent(
        f"""
        import harness
        policy = harness.load_policy({str(run_dir)!r}, imports=["pointmass"])
        obs, _ = policy.make_env().reset(seed=0)
        print("action", policy(obs))
        result = harness.run(algo="optimes", env="NoisyPoint-v0", imports=["pointmass"],
                             generations=1, backend="inline", population=6, sigma=0.05,
                             runs_dir={str(tmp_path / "api")!r}, progress=False)
        print("run", result.status, len(result.metrics))
        table = harness.load_runs({str(runs)!r}, algo="optimes")
        print("runs", len(table), sorted(set(table["params.sigma"])))
        """
    )
    done = _python(["-c", code], env, tmp_path)
    assert "run COMPLETED" in done.stdout
    assert "runs 4 [0.05, 0.1]" in done.stdout
