"""``harness bench overhead``: the worker's rollouts against the very same episodes on a bare
env, so the difference per step is what the rollout adds to the env's own work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from envs.policies import policy_spec_for
from envs.registry import make_env
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalTask
from evaluation.worker import TaskRunner
from harness.bench.overhead import record_actions


def test_the_bare_replay_plays_the_workers_very_episodes() -> None:
    """The recorded actions, replayed on the unwrapped env, give each episode's return bit
    for bit and end where the worker's did: the two timings cover the same env work."""
    env = "LunarLanderContinuous"
    probe = make_env(env)
    spec = policy_spec_for(probe, "linear", (), "tanh")
    probe.close()
    noise = NoiseTable.create(NoiseSpec(1 << 16, 0))
    runner = TaskRunner(env, spec, noise)
    rng = np.random.default_rng(0)
    centre = runner.rollout.policy.init_params(rng)
    runner.set_broadcast(
        Broadcast(0, centre, 0.02, np.zeros(8, np.float32), np.ones(8, np.float32))
    )
    tasks = [
        EvalTask(
            task_id=i,
            env_seeds=(int(rng.integers(2**31)),),
            max_steps=1000,
            noise_index=noise.sample_index(rng, centre.size),
            sign=1 - 2 * (i % 2),
        )
        for i in range(4)
    ]
    returns = [runner.run(task).returns[0] for task in tasks]
    episodes = record_actions(runner, tasks)
    assert "actor" not in vars(runner.rollout.policy)  # the recording is undone
    bare = make_env(env).unwrapped
    for task, actions, expected in zip(tasks, episodes, returns, strict=True):
        bare.reset(seed=task.env_seeds[0])
        total, ended = 0.0, False
        for action in actions:
            _, reward, terminated, truncated, _ = bare.step(action)
            total += float(reward)
            ended = terminated or truncated
        assert total == expected
        assert ended or len(actions) == task.max_steps
    bare.close()
    noise.close()


def test_overhead_reports_both_costs_from_one_command(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    command = [sys.executable, "-m", "harness.cli", "bench", "overhead"]
    command += ["--env", "LunarLanderContinuous", "--kind", "linear", "--hidden"]
    command += ["--tasks", "4", "--repeats", "1", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["steps"] > 4 and figures["us_per_step_env"] > 0
    total, env_alone = figures["us_per_step_total"], figures["us_per_step_env"]
    assert abs(figures["us_per_step_outside_env"] - (total - env_alone)) < 0.02  # rounding
