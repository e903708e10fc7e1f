"""The speed record: a small fixed reference workload timed in CPU time at every evaluation.

A one-off probe at a run's start scattered 2x within minutes on one machine
(docs/benchmark.md), so every run measures its machine throughout instead: at each
evaluation the runner times two fixed workloads in CPU time of its own process
(:func:`time.process_time`) and logs their rates as metrics at the evaluation's step:

``speed_ref_env_steps_per_cpu_s``
    the run's own env (a separate instance, built once) stepped :data:`ENV_STEPS` times with
    random actions from :data:`SEED` (reset with the same seed whenever an episode ends);
``speed_ref_kernel_per_cpu_s``
    :data:`KERNEL_ROUNDS` rounds of a 64x64 float32 tanh layer (``x = tanh(x @ w)``), the kind
    of small dense algebra an ES update or an MLP policy spends its CPU on; single-threaded
    at this size, and the same on every env, so it is the machine's speed.

The run's speed is the median of the kernel series (:func:`run_speed`); the env series is
stated beside it. The CPU model is Sacred's ``host.cpu`` in ``run.json``. Cost, measured on a
2-core AMD EPYC: about 15 ms of CPU per evaluation on CartPole and 27 ms on
LunarLanderContinuous or HalfCheetah (13 ms of it the kernel); a slow env costs more (300
steps of AntBulletEnv at ~2.5k steps/s: ~120 ms, against its 10-episode evaluation's 10k
steps). The probe is part of the run: its CPU-seconds are in ``cpu_seconds`` and its
wall-clock is booked to the "evaluation" part, like the evaluation it accompanies. It draws
from its own env and generators only, so a run's results do not depend on it; the rates
end in ``_s``, so ``harness check-repro`` and resumes leave them out of every comparison,
and a resume drops them with an undone final evaluation (``EVAL_METRIC_NAMES``).

Reference CPU-seconds (``harness report``): CPU-seconds x run speed / :data:`REFERENCE_SPEED`,
the CPU-seconds the same work would have taken on a machine whose kernel speed is
:data:`REFERENCE_SPEED` (a fixed constant: the kernel speed of the 2-core AMD EPYC the noise
was measured on, rounded). Measured noise: docs/benchmark.md ("The speed record").
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

ENV_STEPS = 300
KERNEL_ROUNDS = 2000
KERNEL_SIZE = 64
KERNEL_WARMUP = 20
SEED = 12345
ENV_METRIC = "speed_ref_env_steps_per_cpu_s"
KERNEL_METRIC = "speed_ref_kernel_per_cpu_s"
METRICS = (ENV_METRIC, KERNEL_METRIC)
#: Kernel rounds per CPU-second of the reference machine (fixed; see the module docstring).
REFERENCE_SPEED = 150_000.0
#: Runs whose speeds differ by more than this are converted to reference CPU-seconds; a run
#: whose kernel series spreads by more than this ((p90 - p10) / median) is not converted.
TOLERANCE = 0.15
#: Where an algorithm's runs' own training steps per CPU-second, divided by their speeds,
#: still differ by more than this, the record does not explain the runs' rates and a report
#: does not convert. Wider than TOLERANCE: seeds of one algorithm differ in what a step costs
#: (episode lengths, early ends) on any machine; CPU-seconds per run of one algorithm spread
#: up to 1.4x between seeds on one machine (docs/benchmark.md).
RATE_TOLERANCE = 0.5


class SpeedProbe:
    """The reference workload of one run: ``env`` (or None: the kernel alone)."""

    def __init__(self, env: Any | None) -> None:
        self.env = env
        rng = np.random.default_rng(SEED)
        self._x0 = rng.standard_normal((KERNEL_SIZE, KERNEL_SIZE)).astype(np.float32)
        self._w = (rng.standard_normal((KERNEL_SIZE, KERNEL_SIZE)) / KERNEL_SIZE**0.5).astype(
            np.float32
        )

    @staticmethod
    def _env_seconds(env: Any) -> float:
        env.action_space.seed(SEED)
        env.reset(seed=SEED)
        started = time.process_time()
        for _ in range(ENV_STEPS):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset(seed=SEED)
        return time.process_time() - started

    def _kernel_seconds(self) -> float:
        x, w = self._x0.copy(), self._w
        for _ in range(KERNEL_WARMUP):  # untimed: the first calls pay one-off costs
            x = np.tanh(x @ w)
        started = time.process_time()
        for _ in range(KERNEL_ROUNDS):
            x = np.tanh(x @ w)
        return time.process_time() - started

    def measure(self) -> dict[str, float]:
        """One reading: the rates of the metrics :data:`METRICS` (env absent: kernel only)."""
        out = {KERNEL_METRIC: KERNEL_ROUNDS / max(self._kernel_seconds(), 1e-9)}
        if self.env is not None:
            try:
                out[ENV_METRIC] = ENV_STEPS / max(self._env_seconds(self.env), 1e-9)
            except Exception:  # an env that fails is the run's business, not the probe's
                self.close()
                self.env = None  # from here on the kernel alone
        return out

    def close(self) -> None:
        if self.env is not None:
            with contextlib.suppress(Exception):
                self.env.close()


def run_speed(series: Sequence[float]) -> tuple[float, float]:
    """A run's speed (the median of its series) and spread ((p90 - p10) / median); NaN if empty."""
    values = [float(v) for v in series if v == v and v > 0]
    if not values:
        return float("nan"), float("nan")
    median = statistics.median(values)
    low, high = np.percentile(values, [10, 90])
    return median, float((high - low) / median)
