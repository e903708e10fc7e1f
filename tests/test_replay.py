"""Stored policies: reloaded with ``harness.load_policy``, opened by plain SB3, played by
``harness enjoy`` (returns and videos), from final policies and from checkpoints.

Runs are real Sacred run directories on real envs (LunarLanderContinuous, AntBulletEnv).
The action check records, inside the run, every action the env received during the
run's last evaluation, and asks the reloaded policy for the same observations.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from algorithms.es_common import eval_seeds
from harness import cli
from harness.video import read_video
from tests.conftest import ROOT, harness_cli, only_run_dir, read_run

LANDER = "LunarLanderContinuous"
#: Knobs that keep each LunarLanderContinuous run to a few seconds.
TINY: dict[str, list[str]] = {
    "optimes": ["population=10"],
    "cma": ["population=8"],
    "nevergrad-es": ["population=8"],
    "ppo": ["n_envs=2", "n_steps=128", "batch_size=64", "n_epochs=2"],
    "a2c": ["n_envs=2", "updates_per_step=20"],  # keeps the zoo's normalize: true
}
EVAL_EPISODES = 2


class EnvTap:
    """Records (seed, observation, action) of every LunarLander step in this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from gymnasium.envs.box2d.lunar_lander import LunarLander

        self.episodes: list[dict[str, Any]] = []
        original_reset, original_step = LunarLander.reset, LunarLander.step
        tap = self

        def reset(env: Any, *args: Any, **kwargs: Any) -> Any:
            env._tap_resetting = True  # LunarLander.reset takes a step of its own
            try:
                obs, info = original_reset(env, *args, **kwargs)
            finally:
                env._tap_resetting = False
            tap.episodes.append({"seed": kwargs.get("seed"), "obs": [], "actions": []})
            env._tap_obs = obs
            return obs, info

        def step(env: Any, action: Any) -> Any:
            if getattr(env, "_tap_resetting", False):
                return original_step(env, action)
            episode = tap.episodes[-1]
            episode["obs"].append(np.array(env._tap_obs, copy=True))
            episode["actions"].append(np.array(action, copy=True))
            result = original_step(env, action)
            env._tap_obs = result[0]
            return result

        monkeypatch.setattr(LunarLander, "reset", reset)
        monkeypatch.setattr(LunarLander, "step", step)


def _train(runs_dir: Path, algo: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_PROGRESS", "0")
    sets = [arg for knob in TINY[algo] for arg in ("--set", knob)]
    argv = [
        "run",
        "--algo",
        algo,
        "--env",
        LANDER,
        "--timesteps",
        "1500",
        "--seed",
        "3",
        "--runs-dir",
        str(runs_dir),
        "--no-progress",
        "--set",
        f"eval_episodes={EVAL_EPISODES}",
        "--set",
        "eval_every_timesteps=1000",
        *sets,
    ]
    if algo not in ("ppo", "a2c"):
        argv += ["--backend", "inline"]
    assert cli.main(argv) == 0
    return only_run_dir(runs_dir)


PLAIN_SB3 = """
import json, sys
import gymnasium as gym
import numpy as np
import stable_baselines3
import torch
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

folder, name, obs_file = sys.argv[1:4]
model = getattr(stable_baselines3, name).load(folder + "/model.zip", device="cpu")
observations = np.load(obs_file)
try:
    venv = DummyVecEnv([lambda: gym.make("LunarLanderContinuous-v3")])
    observations = VecNormalize.load(folder + "/vecnormalize.pkl", venv).normalize_obs(observations)
except FileNotFoundError:
    pass
torch.set_num_threads(1)  # as the run evaluated, one observation at a time
actions = np.stack([model.predict(o, deterministic=True)[0] for o in observations])
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("harness", "algorithms", "envs"))
print(json.dumps({"actions": actions.tolist(), "harness_modules": ours}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["optimes", "cma", "nevergrad-es", "ppo", "a2c"])
def test_load_policy_takes_the_actions_of_the_runs_own_evaluation(
    algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tap = EnvTap(monkeypatch)
    run_dir = _train(tmp_path / "runs", algo, monkeypatch)
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    evaluations = record["metrics"]["eval_return_mean"]["values"]
    seeds = eval_seeds(3, len(evaluations) - 1, EVAL_EPISODES)
    # The run's last evaluation is the last thing that stepped an env.
    last = tap.episodes[-EVAL_EPISODES:]
    assert [e["seed"] for e in last] == seeds
    observations = np.concatenate([np.stack(e["obs"]) for e in last])
    recorded = np.concatenate([np.stack(e["actions"]) for e in last])
    assert len(observations) >= EVAL_EPISODES

    spec = json.loads((run_dir / "policy_spec.json").read_text())
    params = np.load(run_dir / "final_params.npy")
    policy = harness.load_policy(run_dir)
    assert policy.source == "final" and policy.status == "COMPLETED"
    replayed = np.stack([np.asarray(policy(obs), dtype=recorded.dtype) for obs in observations])
    np.testing.assert_array_equal(replayed, recorded)
    from_checkpoint = harness.load_policy(run_dir, source="checkpoint")
    assert from_checkpoint.source == "checkpoint" and from_checkpoint.step is not None
    again = np.stack([np.asarray(from_checkpoint(o), dtype=recorded.dtype) for o in observations])
    np.testing.assert_array_equal(again, recorded)

    if algo in ("ppo", "a2c"):
        # The spec names the SB3 policy and describes final_params.npy exactly.
        assert spec["format"] == "stable-baselines3" and spec["sb3_class"] == algo.upper()
        assert spec["num_params"] == params.size
        assert (run_dir / "vecnormalize.pkl").exists() == (algo == "a2c")
        np.save(tmp_path / "obs.npy", observations)
        completed = subprocess.run(
            [
                sys.executable,
                "-c",
                PLAIN_SB3,
                str(run_dir),
                algo.upper(),
                str(tmp_path / "obs.npy"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,  # not the repository: nothing of ours is importable by accident
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
        assert completed.returncode == 0, completed.stderr
        answer = json.loads(completed.stdout.strip().splitlines()[-1])
        assert answer["harness_modules"] == []
        np.testing.assert_array_equal(np.asarray(answer["actions"], dtype=recorded.dtype), recorded)
    else:
        from envs.policies import PolicySpec

        assert PolicySpec.from_dict(spec).num_params == params.size
        obs_norm = json.loads((run_dir / "obs_norm.json").read_text())
        assert (obs_norm is not None) == (algo == "optimes")


def _enjoy_numbers(stdout: str) -> tuple[list[int], list[float], str]:
    lengths = [int(m) for m in re.findall(r"length (\d+)$", stdout, re.MULTILINE)]
    returns = [float(m) for m in re.findall(r"return (-?[\d.]+), length", stdout)]
    difference = re.search(r"\(difference ([^)]+)\)", stdout)
    assert difference is not None, stdout
    return lengths, returns, difference.group(1)


def _last_eval(run_dir: Path) -> float:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return float(metrics["eval_return_mean"]["values"][-1])


@pytest.mark.parametrize(
    ("env", "video", "size", "sets"),
    [
        (LANDER, "lander.mp4", (400, 600), ["population=10"]),
        (
            "AntBulletEnv",
            "ant.gif",
            (240, 320),
            ["population=4", "top_directions=2", "max_episode_steps=40"],
        ),
    ],
)
@pytest.mark.slow
def test_enjoy_reproduces_the_last_evaluation_and_records_a_video(
    env: str, video: str, size: tuple[int, int], sets: list[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    knobs = [arg for knob in sets for arg in ("--set", knob)]
    harness_cli(
        "run", "--algo", "optimes", "--env", env, "--generations", "2", "--seed", "5",
        "--backend", "inline", "--runs-dir", str(runs), "--set", "eval_episodes=2", *knobs,
    )  # fmt: skip
    run_dir = only_run_dir(runs)
    out = tmp_path / video
    completed = harness_cli("enjoy", str(run_dir), "--video", str(out))
    assert "final policy" in completed.stdout
    lengths, returns, difference = _enjoy_numbers(completed.stdout)
    assert difference == "+0", completed.stdout  # the same returns, to the last bit
    assert np.mean(returns) == pytest.approx(_last_eval(run_dir), abs=0.006)
    frames = list(read_video(out))
    assert len(frames) == sum(n + 1 for n in lengths)  # the reset state and every step
    assert {f.shape for f in frames} == {(*size, 3)}
    assert len({f.tobytes() for f in frames}) > 1
    assert f"({len(frames)} frames, {size[1]}x{size[0]}," in completed.stdout


def test_enjoy_plays_an_interrupted_runs_last_checkpoint(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "HARNESS_PROGRESS": "0", "HARNESS_INTERRUPT_AT_STEP": "2"}
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--algo", "optimes", "--env", LANDER,
         "--generations", "5", "--backend", "inline", "--runs-dir", str(runs), "--set",
         "population=10", "--set", "eval_every_timesteps=1", "--set", "eval_episodes=2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    run_dir = only_run_dir(runs)
    assert read_run(run_dir)["run"]["status"] == "INTERRUPTED"
    assert not (run_dir / "final_params.npy").exists()
    completed = harness_cli("enjoy", str(run_dir))
    assert "last checkpoint (step 2)" in completed.stdout and "INTERRUPTED" in completed.stdout
    assert "of this policy" in completed.stdout
    _, _, difference = _enjoy_numbers(completed.stdout)
    assert difference == "+0", completed.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["{tmp}/nowhere"], "nowhere"),
        (["{run}", "--video", "{tmp}/clip.avi"], "clip.avi"),
        (["{run}", "--video", "{tmp}/missing/clip.mp4"], "missing' does not exist"),
        (["{run}", "--episodes", "0"], "--episodes"),
        (["{run}", "--fps", "-3"], "--fps"),
    ],
)
def test_enjoy_refuses_bad_input_with_one_line(args: list[str], named: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    argv = [a.format(tmp=tmp_path, run=run_dir) for a in args]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    completed = harness_cli("enjoy", *argv, check=False)
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], completed.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
