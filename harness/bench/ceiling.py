"""The machine's own ceiling on parallel speed-up: W independent processes stepping an env.

No harness code runs in the timed part: each process makes the env, then steps it with
zero actions for ``--seconds`` (resetting at episode ends) and reports its step count.
The ceiling at W is the W processes' total steps per second over one process's. On a
machine whose cores are real and idle it is close to W; on a virtual machine, shared
caches, memory bandwidth, frequency scaling and the host's other tenants pull it below.
A worker-count speed-up the harness measures (``harness bench solve``, ``bench scaling``)
cannot exceed this figure, so read those beside it.

``--vec-envs N`` also measures what an RL run pays to step its envs in subprocesses
(stable-baselines3's ``SubprocVecEnv``, as the harness uses at ``--workers`` > 1): N envs
stepped in this process (``DummyVecEnv``) and in one process each, zero actions, no policy.
Per env step, ``subproc_message_s = 1 / rate_subproc - 1 / (rate_dummy x min(cores, N))``
is the serial cost of the messages (the head pickles, sends and waits for each env in
turn), which ``harness bench project --machine FILE`` adds to RL rollouts at W > 1. That
cost grows with the head's own work between steps (the policy's forward pass), during
which the env processes fall asleep and must be woken: ``subproc_message_s_by_gap`` gives
it with the head busy for each of ``head_gap_ms`` between steps (only ``step`` timed).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from typing import Any

from evaluation.spawning import main_module_hidden
from harness.bench import emit, format_table

#: The head's busy time between vectorised steps (ms) at which the message cost is measured.
HEAD_GAPS_MS = (0.0, 1.0, 3.0, 10.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", default="LunarLanderContinuous", help="env (default: LunarLanderContinuous)"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="process counts")
    parser.add_argument("--seconds", type=float, default=5.0, help="stepping time per process")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per process count")
    parser.add_argument(
        "--vec-envs",
        type=int,
        default=0,
        help="also time N envs stepped in-process and in subprocesses (SB3), 0: skip",
    )
    parser.add_argument(
        "--head-gaps-ms",
        type=float,
        nargs="+",
        default=list(HEAD_GAPS_MS),
        help="with --vec-envs: the head's busy milliseconds between steps at which the "
        "message cost is also measured (default: 0 1 3 10)",
    )


def step_for(env_id: str, seconds: float, ready: Any, go: Any, out: Any) -> None:
    """Make the env, wait for the start signal, then count steps for ``seconds``."""
    import numpy as np

    from envs.registry import make_env

    env = make_env(env_id)
    env.reset(seed=0)
    action = np.asarray(env.action_space.sample()) * 0
    ready.release()
    go.wait()
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        _, _, terminated, truncated, _ = env.step(action)
        steps += 1
        if terminated or truncated:
            env.reset()
    out.put(steps / (time.perf_counter() - started))


def throughput(env_id: str, workers: int, seconds: float) -> float:
    """Total steps per second of ``workers`` processes stepping at the same time."""
    context = mp.get_context("spawn")
    ready, go, out = context.Semaphore(0), context.Event(), context.Queue()
    processes = [
        context.Process(target=step_for, args=(env_id, seconds, ready, go, out))
        for _ in range(workers)
    ]
    with main_module_hidden():  # a script calling this is not run again in each process
        for process in processes:
            process.start()
    for _ in processes:
        ready.acquire()
    go.set()
    rates = [out.get() for _ in processes]
    for process in processes:
        process.join()
    return float(sum(rates))


def vec_env_rates(
    env_id: str, n_envs: int, seconds: float, gaps_ms: tuple[float, ...] = (0.0,)
) -> dict[str, list[float]]:
    """Seconds of ``step`` per env step of ``n_envs`` envs in this process ("dummy") and in
    one process each ("subproc"), the head busy ``gap`` ms before each step, per gap."""
    import numpy as np
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from algorithms.sb3 import _SUBPROC_START
    from envs.registry import make_env

    factories = [lambda: make_env(env_id) for _ in range(n_envs)]
    out: dict[str, list[float]] = {}
    for name, vec in (
        ("dummy", DummyVecEnv(factories)),
        ("subproc", SubprocVecEnv(factories, start_method=_SUBPROC_START)),
    ):
        vec.seed(0)
        vec.reset()
        shape = tuple(vec.action_space.shape or ())
        actions = np.zeros((n_envs, *shape), dtype=np.float32)
        out[name] = []
        for gap in gaps_ms:
            steps, stepping, started = 0, 0.0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                busy = time.perf_counter()
                while time.perf_counter() - busy < gap / 1000:
                    pass  # the head's own work: the env processes wait, as under a policy
                begun = time.perf_counter()
                vec.step(actions)
                stepping += time.perf_counter() - begun
                steps += n_envs
            out[name].append(stepping / steps)
        vec.close()
    return out


def run(args: argparse.Namespace) -> int:
    from envs.registry import UnknownEnvError, resolve_env_id
    from harness.commands import UsageError

    if any(w < 1 for w in args.workers):
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if not args.seconds > 0:
        raise UsageError(f"--seconds must be positive, got {args.seconds}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    if args.vec_envs < 0:
        raise UsageError(f"--vec-envs must be >= 0, got {args.vec_envs}")
    if any(not gap >= 0 for gap in args.head_gaps_ms):
        raise UsageError(f"--head-gaps-ms must be >= 0, got {args.head_gaps_ms}")
    try:
        env_id = resolve_env_id(args.env)
    except UnknownEnvError as error:
        raise UsageError(str(error)) from None
    counts = sorted(set(args.workers) | {1})
    measured = {
        w: [throughput(env_id, w, args.seconds) for _ in range(args.repeats)] for w in counts
    }
    best_one = max(measured[1])
    rows = [
        {
            "workers": w,
            "rate": max(rates),
            "ceiling": max(rates) / best_one,
            "low": min(rates) / best_one,
        }
        for w, rates in measured.items()
    ]
    print(
        format_table(
            rows,
            [
                ("workers", "processes", "d"),
                ("rate", "steps/s (best)", ",.0f"),
                ("ceiling", "over one (best)", ".2f"),
                ("low", "over one (worst)", ".2f"),
            ],
        )
    )
    figures: dict[str, Any] = {"env": env_id, "seconds": args.seconds, "repeats": args.repeats}
    for w, rates in measured.items():
        figures[f"w{w}.steps_per_s"] = [round(r, 1) for r in rates]
        figures[f"w{w}.ceiling_best"] = round(max(rates) / best_one, 3)
        figures[f"w{w}.ceiling_worst"] = round(min(rates) / best_one, 3)
    if args.vec_envs:
        cores = os.cpu_count() or 1
        gaps = tuple(sorted({0.0, *args.head_gaps_ms}))
        step_s = vec_env_rates(env_id, args.vec_envs, args.seconds, gaps)
        spread = min(cores, args.vec_envs)
        messages = [
            max(0.0, sub - dummy / spread)
            for sub, dummy in zip(step_s["subproc"], step_s["dummy"], strict=True)
        ]
        figures |= {
            "vec_envs": args.vec_envs,
            "cores": cores,
            "dummy_steps_per_s": round(1 / step_s["dummy"][0], 1),
            "subproc_steps_per_s": round(1 / step_s["subproc"][0], 1),
            "subproc_message_s": messages[0],
            "head_gap_ms": list(gaps),
            "subproc_message_s_by_gap": messages,
        }
    emit(figures, args.json)
    return 0
