"""Probe: would stepping K lander episodes side by side, one batched policy forward per
step, bring the rollout's cost outside the env under 10% of the env's own step?

Hypothesis: the per-step cost outside the env is mostly per-call numpy overhead of the
policy (five calls a step), which a batched forward shares among K episodes.
Stopping rule: one sitting; if K = 16 is not clearly under 10%, or the chunks the
scheduler hands a worker are far smaller than the K that needs, the side-by-side loop is
not built. Log: docs/performance.md ("Episodes side by side: a probe").

The loop is the linear policy's arithmetic (float32 observation normalisation, clip, the
augmented matrix product, tanh), K envs of the harness's own ``make_env`` stepped through
their own ``step`` (as the rollout does); the env alone is the same episodes replayed on a
bare env with the recorded actions, as ``harness bench overhead`` does. Each timed
``--repeats`` times, the fastest kept.

    python reports/benchmarks/side_by_side_probe.py --k 1 4 8 16 32
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from envs.registry import make_env
from envs.rollout import own_step
from evaluation.backends import chunk_size


def side_by_side(k: int, weights: np.ndarray, seeds: list[int], record: dict | None) -> int:
    """Play every (weights[j], seeds[j]) episode, k at a time; the steps played."""
    envs = [make_env("LunarLanderContinuous") for _ in range(k)]
    steppers = [own_step(env) for env in envs]
    mats = np.zeros((k, 2, 9), np.float32)
    inputs = np.ones((k, 9), np.float32)
    x = inputs[:, :8]
    y = np.zeros((k, 2), np.float32)
    obs_rows = np.zeros((k, 8), np.float32)
    mean, std = np.zeros(8, np.float32), np.ones(8, np.float32)
    hi = np.full(8, 5, np.float32)
    lo = -hi
    bufs = [np.zeros((1000, 8)) for _ in range(k)]
    queue = list(range(len(seeds)))[::-1]
    task_of, t_of, ret_of = [-1] * k, [0] * k, [0.0] * k

    def start(i: int) -> None:
        task = queue.pop()
        task_of[i], t_of[i], ret_of[i] = task, 0, 0.0
        mats[i] = weights[task]
        obs_rows[i] = envs[i].reset(seed=seeds[task])[0]
        if record is not None:
            record[task] = []

    active = []
    for i in range(k):
        if queue:
            start(i)
            active.append(i)
    isfinite, played = math.isfinite, 0
    while active:
        np.subtract(obs_rows, mean, x)
        np.divide(x, std, x)
        np.clip(x, lo, hi, out=x)
        np.matmul(mats, inputs[:, :, None], out=y[:, :, None])
        np.tanh(y, out=y)
        ended = []
        for i in active:
            step, limit = steppers[i]
            t = t_of[i]
            bufs[i][t] = obs_rows[i]
            if record is not None:
                record[task_of[i]].append(y[i].copy())
            obs, reward, terminated, truncated, _ = step(y[i])
            obs_rows[i] = obs
            r = float(reward)
            if not isfinite(r):
                raise ValueError(f"reward {r}")
            ret_of[i] += r
            t_of[i] = t + 1
            if terminated or truncated or t + 1 >= (limit or 1000):
                ended.append(i)
        played += len(active)
        for i in ended:
            if queue:
                start(i)
            else:
                active.remove(i)
    for env in envs:
        env.close()
    return played


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    seeds = [int(s) for s in rng.integers(2**31, size=args.tasks)]
    weights = (rng.standard_normal((args.tasks, 2, 9)) * 0.3).astype(np.float32)
    record: dict[int, list[np.ndarray]] = {}
    side_by_side(1, weights, seeds, record)
    bare = make_env("LunarLanderContinuous").unwrapped
    for k in args.k:
        total, alone = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            steps = side_by_side(k, weights, seeds, None)
            total.append(time.perf_counter() - started)
            started = time.perf_counter()
            for task, seed in enumerate(seeds):
                bare.reset(seed=seed)
                step = bare.step
                for action in record[task]:
                    step(action)
            alone.append(time.perf_counter() - started)
        t, e = min(total), min(alone)
        print(
            f"K={k:2d} steps={steps} us/step: total {1e6 * t / steps:.2f} env "
            f"{1e6 * e / steps:.2f} outside {1e6 * (t - e) / steps:.2f} "
            f"({100 * (t - e) / e:.1f}% of the env step)"
        )
    # what the scheduler hands a worker: optimes on the lander, population 40, W = 2
    remaining, chunks = 40, []
    while remaining:
        chunks.append(chunk_size(remaining, 2, 4))
        remaining -= chunks[-1]
    print(f"chunks of a generation (40 tasks, W=2, 4 chunks per worker): {chunks}")


if __name__ == "__main__":
    main()
