"""Share of a worker's time spent outside ``env.step``/``env.reset``.

Runs the real worker path (:class:`~evaluation.worker.TaskRunner`:
perturbation rebuilt from the noise table, policy forward, observation
bookkeeping) on real tasks, with the env's ``step`` and ``reset`` wrapped by a
timer. Everything not inside those two calls is harness overhead.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from envs.policies import policy_spec_for
from envs.registry import make_env
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalTask
from evaluation.worker import TaskRunner
from harness.bench import emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", default="AntBulletEnv", help="env to roll out (default: AntBulletEnv)"
    )
    parser.add_argument(
        "--kind", default="mlp", help="policy kind: linear, mlp or lstm (default: mlp)"
    )
    parser.add_argument(
        "--hidden",
        type=int,
        nargs="*",
        default=[64, 64],
        help="hidden layer sizes of the policy (default: 64 64)",
    )
    parser.add_argument(
        "--activation", default="relu", help="hidden activation: tanh or relu (default: relu)"
    )
    parser.add_argument("--tasks", type=int, default=50, help="candidates to evaluate")
    parser.add_argument("--max-steps", type=int, default=1000, help="episode step cap")
    parser.add_argument(
        "--sigma", type=float, default=0.02, help="noise std of the perturbed candidates (0.02)"
    )


def run(args: argparse.Namespace) -> int:
    probe = make_env(args.env)
    spec = policy_spec_for(probe, args.kind, tuple(args.hidden), args.activation)
    probe.close()
    noise = NoiseTable.create(NoiseSpec(1 << 22, 0))
    runner = TaskRunner(args.env, spec, noise)
    env: Any = runner.rollout.env
    inside = [0.0]
    real_step, real_reset = env.step, env.reset

    def timed_step(action: Any) -> Any:
        started = time.perf_counter()
        try:
            return real_step(action)
        finally:
            inside[0] += time.perf_counter() - started

    def timed_reset(**kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real_reset(**kwargs)
        finally:
            inside[0] += time.perf_counter() - started

    env.step, env.reset = timed_step, timed_reset
    rng = np.random.default_rng(0)
    centre = runner.rollout.policy.init_params(rng)
    obs_mean = np.zeros(spec.obs_dim, np.float32)
    obs_std = np.ones(spec.obs_dim, np.float32)
    runner.set_broadcast(Broadcast(0, centre, args.sigma, obs_mean, obs_std))
    tasks = [
        EvalTask(
            task_id=i,
            env_seeds=(int(rng.integers(2**31)),),
            max_steps=args.max_steps,
            noise_index=noise.sample_index(rng, centre.size),
            sign=1 - 2 * (i % 2),
            collect_obs=(i % 10 == 0),
        )
        for i in range(args.tasks)
    ]
    runner.run(tasks[0])  # warm-up: first-call costs are not the steady state
    inside[0] = 0.0
    steps = 0
    started = time.perf_counter()
    for task in tasks:
        steps += runner.run(task).steps
    total = time.perf_counter() - started
    outside = total - inside[0]
    emit(
        {
            "env": args.env,
            "policy": spec.describe(),
            "parameters": spec.num_params,
            "steps": steps,
            "steps_per_s": round(steps / total, 1),
            "us_per_step_total": round(1e6 * total / steps, 2),
            "us_per_step_env": round(1e6 * inside[0] / steps, 2),
            "us_per_step_outside_env": round(1e6 * outside / steps, 2),
            "share_outside_env_pct": round(100 * outside / total, 2),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
        args.json,
    )
    noise.close()
    return 0
