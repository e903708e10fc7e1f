"""What each cell of a sweep will cost, before it is paid: the ETA of the sweep's bar.

Cells are not alike: PPO at SB3's defaults on a new env may take minutes per run where
an ES cell of the same sweep takes seconds, so an ETA that assumes every cell costs what
the first ones did is wrong by the ratio of the two. A cell's seconds are estimated from,
in order:

1. ``measured``: seconds per timestep of completed runs of the same algorithm and env,
   in this sweep (timed as the cells finish) or already in the runs directory (their
   ``run.json`` start and stop times), times the cell's timestep budget; a cell with no
   timestep budget takes the mean seconds of those runs;
2. ``plan``: the CPU-seconds per timestep the benchmark plan estimates for the algorithm
   on the env (``cost_cpu_s`` in ``experiments/benchmark.yaml``), shared out over the
   cell's workers;
3. ``mean``: no run of its kind has finished and the plan says nothing: the finished runs
   of every kind pooled (seconds per timestep times the budget, else seconds per run), a
   guess the bar says is one (``ppo guessed from other cells``);
4. ``default``: ``default_s`` per cell where one is given (none by default);
5. ``unknown``: nothing finished yet to compare with; the bar says ``ETA unknown`` rather
   than a figure that would be off by the ratio of the kinds' costs.

A ``time_limit`` caps every estimate; each cell adds :data:`START_S` for its process's
start-up. The ETA is the estimate of the cells not finished, less the time the running
ones have had, over the cells run at once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: A stated per-cell default some callers pass as ``default_s`` (the sweep's bar passes
#: none: a cell with nothing comparable finished has an unknown cost).
DEFAULT_CELL_S = 60.0
#: Seconds a cell's process takes to start (imports, the run record) besides training.
START_S = 3.0
#: The benchmark plan whose per-cell cost estimates serve cells without a measurement.
PLAN_FILE = Path(__file__).resolve().parents[2] / "experiments" / "benchmark.yaml"

Key = tuple[str, str]  # (algorithm, env)
#: The source of a cell's cost when nothing comparable has finished.
UNKNOWN = "unknown"
#: The source of a cost guessed from finished cells of other kinds.
MEAN = "mean"


@dataclass(frozen=True)
class CellCost:
    """A cell's estimated seconds and where the figure comes from."""

    seconds: float  # NaN where the source is "unknown"
    source: str  # "measured", "plan", "mean", "default" or "unknown"

    @property
    def known(self) -> bool:
        return self.source != UNKNOWN


@dataclass
class _Rate:
    """Measured runs of one (algorithm, env): their seconds, and timesteps where known."""

    seconds: float = 0.0  # of the runs whose timesteps are known
    timesteps: float = 0.0
    total_s: float = 0.0  # of all runs
    runs: int = 0

    def add(self, seconds: float, timesteps: float | None) -> None:
        self.runs += 1
        self.total_s += seconds
        if timesteps and timesteps > 0:
            self.seconds += seconds
            self.timesteps += timesteps

    @property
    def per_timestep(self) -> float | None:
        return self.seconds / self.timesteps if self.timesteps > 0 else None

    @property
    def per_run(self) -> float:
        return self.total_s / max(1, self.runs)

    def seconds_for(self, budget: float | None) -> float:
        """A run of ``budget`` timesteps (None: the mean run)."""
        rate = self.per_timestep
        return rate * budget if rate is not None and budget else self.per_run


def _key(config: Mapping[str, Any]) -> Key:
    return str(config.get("algo")), str(config.get("env"))


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


@dataclass
class CostEstimator:
    """Estimates of cells' seconds (see the module); :meth:`observe` adds a measured run."""

    #: (algorithm, env) -> estimated CPU-seconds per timestep (the plan)
    plan: dict[Key, float] = field(default_factory=dict)
    #: seconds for a cell nothing else estimates; None: its cost is unknown
    default_s: float | None = None
    start_s: float = START_S
    _measured: dict[Key, _Rate] = field(default_factory=dict)
    _pooled: _Rate = field(default_factory=_Rate)

    def observe(self, config: Mapping[str, Any], seconds: float, timesteps: Any = None) -> None:
        """A run of this config took ``seconds`` for ``timesteps`` (None: its budget)."""
        if not seconds > 0:
            return
        used = _positive(timesteps) or _positive(config.get("timesteps"))
        self._measured.setdefault(_key(config), _Rate()).add(seconds, used)
        self._pooled.add(seconds, used)

    def estimate(self, config: Mapping[str, Any]) -> CellCost:
        """The seconds one cell with this (completed) config is expected to take."""
        key = _key(config)
        budget = _positive(config.get("timesteps"))
        measured = self._measured.get(key)
        cost: CellCost | None = None
        if measured is not None:
            cost = CellCost(measured.seconds_for(budget), "measured")
        elif key in self.plan and budget:
            workers = _positive(config.get("workers")) or 1.0
            cost = CellCost(self.plan[key] * budget / workers + self.start_s, "plan")
        elif self._pooled.runs:
            cost = CellCost(self._pooled.seconds_for(budget), MEAN)
        elif self.default_s is not None:
            cost = CellCost(self.default_s, "default")
        if cost is None:
            return CellCost(math.nan, UNKNOWN)
        limit = _positive(config.get("time_limit"))
        if limit is not None and cost.seconds > limit + self.start_s:
            cost = CellCost(limit + self.start_s, cost.source)
        return cost

    def remaining(
        self,
        waiting: Iterable[Mapping[str, Any]],
        running: Iterable[tuple[Mapping[str, Any], float]],
        jobs: int,
    ) -> float | None:
        """Seconds until the sweep ends: the waiting cells' estimates plus what the running
        ones (config, seconds so far) have left, over ``jobs`` cells at once; None while
        any of those cells' cost is unknown."""
        total = 0.0
        for config, elapsed in [(c, 0.0) for c in waiting] + list(running):
            cost = self.estimate(config)
            if not cost.known:
                return None
            total += max(0.0, cost.seconds - elapsed)
        return total / max(1, jobs)

    def describe(
        self,
        waiting: Iterable[Mapping[str, Any]],
        running: Iterable[tuple[Mapping[str, Any], float]],
        jobs: int,
    ) -> str:
        """The bar's ETA text: ``ETA ~4m05s (measured/plan)``, ``ETA ~2m (measured; ppo
        guessed from other cells)``, ``ETA unknown (no cell finished yet)`` or
        ``ETA ~0s (done)``."""
        waiting, running = list(waiting), list(running)
        eta = self.remaining(waiting, running, jobs)
        if eta is None:
            return "ETA unknown (no cell finished yet)"
        configs = waiting + [config for config, _ in running]
        costs = [(config, self.estimate(config)) for config in configs]
        sources = sorted({cost.source for _, cost in costs if cost.source != MEAN})
        guessed = sorted({_key(config)[0] for config, cost in costs if cost.source == MEAN})
        said = "/".join(sources)
        if guessed:
            said += ("; " if said else "") + f"{', '.join(guessed)} guessed from other cells"
        return f"ETA ~{format_eta(eta)} ({said or 'done'})"

    def observe_runs(self, headers: Iterable[Any]) -> None:
        """Measured rates from completed runs already stored (:class:`RunHeader`)."""
        for header in headers:
            run = header.run or {}
            with contextlib.suppress(TypeError, ValueError):
                start = datetime.fromisoformat(str(run["start_time"]))
                stop = datetime.fromisoformat(str(run["stop_time"]))
                result = run.get("result") or {}
                seconds = (stop - start).total_seconds() + self.start_s
                self.observe(header.config, seconds, result.get("timesteps"))


def plan_rates(path: Path = PLAN_FILE) -> dict[Key, float]:
    """CPU-seconds per timestep per (algorithm, env) from the benchmark plan's
    ``cost_cpu_s``; empty when the file is missing or unreadable (estimates only)."""
    rates: dict[Key, float] = {}
    if not path.is_file():
        return rates
    try:
        from harness.config import read_yaml

        data = read_yaml(path)
    except Exception:  # an estimate must never stop a sweep
        return rates
    tasks = data.get("tasks") if isinstance(data, dict) else None
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        budget = _positive((task.get("budget") or {}).get("timesteps"))
        costs = task.get("cost_cpu_s") or {}
        overrides = task.get("overrides") or {}
        if not isinstance(costs, dict) or not isinstance(overrides, dict):
            continue
        for algo, cost in costs.items():
            steps = budget
            for assignment in overrides.get(algo) or []:
                key, _, value = str(assignment).partition("=")
                if key.strip() == "timesteps":
                    with contextlib.suppress(ValueError):
                        steps = _positive(float(value))
            seconds = _positive(cost)
            if steps and seconds:
                rates[(str(algo), str(task.get("env")))] = seconds / steps
    return rates


def format_eta(seconds: float) -> str:
    """``1h02m``, ``4m05s`` or ``12s``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
