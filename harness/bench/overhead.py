"""What a worker's rollout costs beyond the env's own step, both measured in one command.

Runs the real worker path (:class:`~evaluation.worker.TaskRunner`: perturbation rebuilt
from the noise table, policy forward, observation normalisation and bookkeeping, the
wrappers) on real tasks; then replays the very same episodes on a bare env (its own
``reset`` and ``step`` with the actions the policy took, no wrapper, no policy). The
difference per step is everything that is not the env's own work. Both are timed
``--repeats`` times, interleaved, and the fastest of each is kept (a busy neighbour only
ever slows a pass down).
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
    parser.add_argument(
        "--repeats", type=int, default=7, help="timed passes of each; the fastest is kept (7)"
    )


def run(args: argparse.Namespace) -> int:
    from harness.commands import UsageError

    if args.repeats < 1 or args.tasks < 1:
        raise UsageError(f"--repeats and --tasks must be >= 1, got {args.repeats}, {args.tasks}")
    probe = make_env(args.env)
    spec = policy_spec_for(probe, args.kind, tuple(args.hidden), args.activation)
    probe.close()
    noise = NoiseTable.create(NoiseSpec(1 << 22, 0))
    runner = TaskRunner(args.env, spec, noise)
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
    episodes = record_actions(runner, tasks)
    bare: Any = make_env(args.env).unwrapped
    steps = sum(len(actions) for actions in episodes)
    worker_s, env_s = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        for task in tasks:
            runner.run(task)
        worker_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        for task, actions in zip(tasks, episodes, strict=True):
            bare.reset(seed=task.env_seeds[0])
            step = bare.step
            for action in actions:
                step(action)
        env_s.append(time.perf_counter() - started)
    total, inside = min(worker_s), min(env_s)
    outside = total - inside
    emit(
        {
            "env": args.env,
            "policy": spec.describe(),
            "parameters": spec.num_params,
            "steps": steps,
            "repeats": args.repeats,
            "steps_per_s": round(steps / total, 1),
            "env_alone_steps_per_s": round(steps / inside, 1),
            "us_per_step_total": round(1e6 * total / steps, 2),
            "us_per_step_env": round(1e6 * inside / steps, 2),
            "us_per_step_outside_env": round(1e6 * outside / steps, 2),
            "outside_over_env_pct": round(100 * outside / inside, 1),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
        args.json,
    )
    bare.close()
    noise.close()
    return 0


def record_actions(runner: TaskRunner, tasks: list[EvalTask]) -> list[list[np.ndarray]]:
    """The actions the worker's policy takes in each task's episode (a first, untimed pass)."""
    episodes: list[list[np.ndarray]] = []
    policy: Any = runner.rollout.policy
    actor = policy.actor

    def recording_actor() -> Any:
        act = actor()

        def recording(obs: np.ndarray, noise: np.ndarray | None = None) -> Any:
            action = act(obs, noise)
            episodes[-1].append(np.array(action))
            return action

        return recording

    policy.actor = recording_actor
    try:
        for task in tasks:
            episodes.append([])
            runner.run(task)
    finally:
        del policy.actor
    return episodes
