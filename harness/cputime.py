"""CPU-seconds a run used: the head process and every process it started.

Wall-clock alone cannot say whether two runs had the same resources: a PPO run
on one process and an ES run on two worker processes may take the same time on
very different amounts of CPU. The meter sums user + system time of the head
and of all its live descendants (pool workers, SB3 subprocess envs, a private
Ray instance's workers), remembering each process's last reading so that a
worker that exits still counts.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import psutil

#: The runner reads the meter at most this often (a read scans /proc), and at each evaluation.
CPU_SAMPLE_PERIOD_S = 1.0
#: The least common CPU-seconds at which reports compare runs: at ten sample periods a
#: reading that lags by one period is off by at most a tenth (records made before the
#: runner read the meter at each evaluation lag by up to a period).
MIN_CPU_COMPARED_S = 10 * CPU_SAMPLE_PERIOD_S


class CpuMeter:
    """Cumulative CPU-seconds of this process tree since the meter was created."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self._process = psutil.Process()
        self._offset_s = offset_s
        self._last_seen: dict[int, float] = {}
        self._baseline_s = self._own_seconds()

    def _own_seconds(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def seconds(self) -> float:
        """CPU-seconds used since creation, plus the offset (a resumed run's earlier total)."""
        try:
            children = self._process.children(recursive=True)
        except psutil.Error:
            children = []
        for child in children:
            try:
                times = child.cpu_times()
            except psutil.Error:
                continue  # exited between listing and reading: its last reading stands
            self._last_seen[child.pid] = float(times.user + times.system)
        total = self._own_seconds() - self._baseline_s + sum(self._last_seen.values())
        return self._offset_s + total


#: Set by a sweep for its cells: how many cells it runs at once on this machine.
SWEEP_JOBS_ENV = "HARNESS_SWEEP_JOBS"


class MachineLoad:
    """What else the machine did while a run trained: the 1-minute load average, sampled.

    A wall-clock figure is the run's own only when the load stayed near the cores the
    run used; ``summary.json`` keeps these samples' summary (``machine_load``) so that
    reports can label wall-clock from loaded machines.
    """

    def __init__(self) -> None:
        self._samples: list[float] = []
        self.sample()

    def sample(self) -> None:
        with contextlib.suppress(OSError):  # not every platform has a load average
            self._samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, Any]:
        jobs = os.environ.get(SWEEP_JOBS_ENV)
        samples = self._samples
        return {
            "cpu_count": os.cpu_count(),
            # the cores the run was allowed (a pair's runs are pinned to one each)
            "cpu_affinity": sorted(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else None,
            "loadavg_1m_start": samples[0] if samples else None,
            "loadavg_1m_mean": sum(samples) / len(samples) if samples else None,
            "loadavg_1m_max": max(samples, default=None),
            "samples": len(self._samples),
            "sweep_jobs": int(jobs) if jobs and jobs.isdigit() else None,
        }
