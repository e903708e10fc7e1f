"""A trial's score, from its runs' evaluations: the objective and what the pruner sees.

A run's *robust score* is the mean of its last :data:`LAST_EVALUATIONS` evaluations
(``eval_return_mean``, each the mean return of ``eval_episodes`` fresh seeded
episodes; fewer when the run made fewer). A trial's objective is the mean of its
seeds' robust scores. Its intermediate value at step i (the i-th evaluation, counted
from 0) is the same mean taken over each run's evaluations 0..i, so the value the
pruner compares at the last step is the objective itself; a run that ended with
fewer evaluations contributes its final score to later steps.

With a target return R (``harness tune --target-return R``) the study tunes for speed
instead (:class:`Objective`): a run's value is minus the timesteps it took to a
*confirmed* R (the runner's ``target_return``: a crossing confirmed on fresh episodes),
or minus its timestep budget, the cap, when it never confirmed (minus the timesteps it
ran where its last generation went past the cap); the trial's value is the
mean over its seeds. Harness studies maximise, so the fewer timesteps, the higher. The
value at evaluation i is minus the timesteps of that evaluation while a run goes on (the
fewest it can still take), its final value once it has ended: a trial still short of the
target when the median trial had confirmed is pruned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import rundir

#: Evaluations a run's robust score averages.
LAST_EVALUATIONS = 3
#: The objective in words (printed, recorded in the study, quoted by the docs).
OBJECTIVE = (
    f"mean over the trial's seeds of each run's mean of its last {LAST_EVALUATIONS} "
    "evaluations (eval_return_mean)"
)


def eval_returns(metrics: Mapping[str, Any]) -> list[float]:
    """A run's ``eval_return_mean`` values in step order (NaN ones kept: a failed eval)."""
    series = metrics.get("eval_return_mean") or {}
    values = series.get("values") if isinstance(series, dict) else None
    return [float(v) if v is not None else math.nan for v in values or []]


def read_returns(run_dir: Path) -> list[float]:
    """The evaluations a run directory holds so far ([] while it has none or is unreadable)."""
    try:
        return eval_returns(rundir.read_metrics(run_dir))
    except (rundir.UnreadableRun, OSError):
        return []


#: How far over its CPU limit a run may go before ``harness tune`` warns (a share of it).
CPU_OVERRUN_WARN = 0.10


def _last(metrics: Mapping[str, Any], name: str) -> float | None:
    series = metrics.get(name)
    values = series.get("values") if isinstance(series, dict) else None
    if not isinstance(values, list) or not values:
        return None
    last = values[-1]
    if isinstance(last, bool) or not isinstance(last, (int, float)):
        return None
    return float(last) if math.isfinite(last) else None


def run_usage(run_dir: Path) -> dict[str, Any]:
    """What a run used, for a trial's ``usage`` record: its evaluations, its CPU-seconds
    (``summary.json``'s, else the last ``cpu_seconds`` metric), its steps (generations or
    RL chunks) and timesteps, and an RL run's chunk as SB3 learns it (``n_steps`` x
    ``n_envs`` x ``updates_per_step`` timesteps), whose granularity a CPU limit is checked
    at. Unreadable parts are None."""
    usage: dict[str, Any] = {"evaluations": 0, "cpu_seconds": None, "steps": None}
    usage.update({"timesteps": None, "chunk": None})
    try:
        metrics = rundir.read_metrics(run_dir)
    except (rundir.UnreadableRun, OSError):
        return usage
    usage["evaluations"] = len(eval_returns(metrics))
    usage["cpu_seconds"] = _last(metrics, "cpu_seconds")
    series = metrics.get("timesteps")
    steps = series.get("values") if isinstance(series, dict) else None
    usage["steps"] = len(steps) if isinstance(steps, list) else None
    timesteps = _last(metrics, "timesteps")
    usage["timesteps"] = None if timesteps is None else int(timesteps)
    try:
        summary = rundir.read_json(run_dir / rundir.SUMMARY)
        used = summary.get("cpu_seconds") if isinstance(summary, dict) else None
        if isinstance(used, (int, float)) and not isinstance(used, bool) and math.isfinite(used):
            usage["cpu_seconds"] = float(used)  # the final evaluation included
    except (rundir.UnreadableRun, OSError):
        pass  # not finished (pruned, interrupted): the last step's reading stands
    try:
        params = rundir.read_header(run_dir).config.get("params") or {}
    except (rundir.UnreadableRun, OSError):
        params = {}
    sizes = [params.get(k, 1) for k in ("n_steps", "n_envs", "updates_per_step")]
    if "n_steps" in params and all(_positive_int(v) for v in sizes):
        usage["chunk"] = math.prod(int(v) for v in sizes)
    return usage


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def usage_valid(value: Any) -> bool:
    """Whether a trial's stored ``usage`` (data, maybe another program's) is seed -> a
    :func:`run_usage` record."""
    if not isinstance(value, dict):
        return False
    for seed, record in value.items():
        if not (isinstance(seed, str) and seed.isdigit() and isinstance(record, dict)):
            return False
        for key in ("evaluations", "cpu_seconds", "steps", "timesteps", "chunk"):
            item = record.get(key)
            if item is not None and (
                isinstance(item, bool)
                or not isinstance(item, (int, float))
                or not math.isfinite(item)
                or item < 0
            ):
                return False
        if not isinstance(record.get("evaluations", 0), int):
            return False
    return True


def trial_evaluations(attrs: Mapping[str, Any], reported: int) -> int:
    """The fewest evaluations any run of a trial made: from its ``usage`` record (checked
    with :func:`usage_valid`), else ``reported`` (how many values the pruner was given,
    the most any of its runs made)."""
    usage = attrs.get("usage")
    if usage_valid(usage) and usage:
        return min(int(record.get("evaluations") or 0) for record in usage.values())
    return reported


def cpu_overruns(attrs: Mapping[str, Any], limit: float) -> list[dict[str, Any]]:
    """Each run of a trial (its ``usage``) over its CPU ``limit`` by more than
    :data:`CPU_OVERRUN_WARN`: seed, CPU-seconds used, the share over, the CPU-seconds of
    one of its steps on average, and its chunk (RL) where known."""
    usage = attrs.get("usage")
    if usage is None or not usage_valid(usage) or limit <= 0:
        return []
    over = []
    for seed, record in usage.items():
        used = record.get("cpu_seconds")
        if used is None or used <= limit * (1.0 + CPU_OVERRUN_WARN):
            continue
        steps = record.get("steps")
        over.append(
            {
                "seed": int(seed),
                "cpu_seconds": float(used),
                "over": float(used) / limit - 1.0,
                "step_cpu_s": float(used) / steps if steps else None,
                "chunk": record.get("chunk"),
            }
        )
    return over


def overrun_text(over: Mapping[str, Any], limit: float) -> str:
    """One run's overrun in words, naming the step granularity when it explains it: the
    limit is checked between steps, so a run may pass it by up to one step's CPU."""
    text = (
        f"seed {over['seed']} used {over['cpu_seconds']:.1f} CPU-s of its {limit:g} "
        f"(+{100 * over['over']:.0f}%)"
    )
    step_s = over.get("step_cpu_s")
    excess = over["cpu_seconds"] - limit
    if step_s is None or excess > 1.5 * step_s:
        return text
    chunk = over.get("chunk")
    if chunk:
        return text + (
            f": the RL chunk granularity: SB3 learns in chunks of n_steps x n_envs = "
            f"{chunk:,} timesteps (about {step_s:.1f} CPU-s each here), and the limit is "
            "checked between chunks"
        )
    return text + (
        f": the step granularity: a step (generation) took about {step_s:.1f} CPU-s here, "
        "and the limit is checked between steps"
    )


def robust_score(values: Sequence[float]) -> float | None:
    """The mean of the last :data:`LAST_EVALUATIONS` values (None: no evaluation)."""
    if not values:
        return None
    tail = list(values)[-LAST_EVALUATIONS:]
    return float(sum(tail) / len(tail))


RunValue = Callable[[Sequence[float]], float | None]


def trial_value(
    per_seed: Sequence[Sequence[float]], run_value: RunValue = robust_score
) -> float | None:
    """The objective: the mean of the seeds' ``run_value`` (by default the robust score;
    None if one has none)."""
    scores = [run_value(values) for values in per_seed]
    if not scores or any(score is None for score in scores):
        return None
    return float(sum(s for s in scores if s is not None) / len(scores))


def intermediate(
    per_seed: Sequence[tuple[Sequence[float], bool]],
    step: int,
    run_value: RunValue = robust_score,
) -> float | None:
    """The value at evaluation ``step``, or None while a running seed has not reached it.

    ``per_seed``: each run's series so far (:meth:`Objective.series`) and whether the run
    has ended.
    """
    if all(len(values) <= step for values, _ in per_seed):
        return None  # no run has reached this step (and ended runs never will)
    upto = []
    for values, ended in per_seed:
        if len(values) > step:
            upto.append(values[: step + 1])
        elif ended and values:
            upto.append(values)
        else:
            return None
    return trial_value(upto, run_value)


@dataclass(frozen=True)
class Objective:
    """What a study maximises: the robust score, or with ``target`` the time to it (see
    the module docstring; ``cap``: the runs' timestep budget)."""

    target: float | None = None
    cap: int | None = None

    @classmethod
    def for_budget(cls, budget: Mapping[str, Any]) -> Objective:
        """The objective of runs with this budget: the time to its ``target_return`` where
        it has one (capped at its ``timesteps``), else the score."""
        target = budget.get("target_return")
        return cls() if target is None else cls(float(target), int(budget["timesteps"]))

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Objective:
        """The objective a study's user attributes record (the score where they name
        none, or name it in a form this version does not read)."""
        target, cap = record.get("objective_target"), record.get("objective_cap")
        if (
            isinstance(target, (int, float))
            and not isinstance(target, bool)
            and math.isfinite(target)
            and isinstance(cap, int)
            and not isinstance(cap, bool)
            and cap > 0
        ):
            return cls(float(target), cap)
        return cls()

    @property
    def to_target(self) -> bool:
        """Whether this is a time-to-target objective."""
        return self.target is not None

    @property
    def text(self) -> str:
        """The objective in words (printed, recorded in the study, quoted by its report)."""
        if self.target is None:
            return OBJECTIVE
        return (
            f"minus the mean over the trial's seeds of the timesteps each run took to a "
            f"confirmed return {self.target:g} (its budget, {self.cap:,}, if it never "
            "confirmed): higher is fewer timesteps"
        )

    @property
    def axis(self) -> str:
        """The objective in two lines, for a figure's axis."""
        if self.target is None:
            return "objective (mean over seeds of the\nmean of the last 3 evaluations)"
        return f"objective (minus the mean timesteps\nto a confirmed return {self.target:g})"

    def record(self) -> dict[str, Any]:
        """The study's user attributes for this objective."""
        return {"objective": self.text, "objective_target": self.target, "objective_cap": self.cap}

    @property
    def evaluations_needed(self) -> int:
        """Evaluations a run needs for its value to be what the objective means."""
        return 1 if self.to_target else LAST_EVALUATIONS

    def enough(self, evaluations: int) -> bool:
        """Whether a run with this many evaluations has what the objective needs."""
        return evaluations >= self.evaluations_needed

    def series(self, run_dir: Path) -> list[float]:
        """A run's values so far, one per evaluation (see the module docstring)."""
        if self.target is None:
            return read_returns(run_dir)
        try:
            metrics = rundir.read_metrics(run_dir)
        except (rundir.UnreadableRun, OSError):
            return []
        series = metrics.get("eval_timesteps") or {}
        steps = series.get("values") if isinstance(series, dict) else None
        values = [-float(t) for t in steps or [] if isinstance(t, (int, float))]
        final = self._final(run_dir)
        if final is not None:
            values[-1:] = [final]
        return values

    def _final(self, run_dir: Path) -> float | None:
        """An ended run's value from its ``summary.json``: minus its confirmed timesteps,
        else minus the cap or the timesteps it ran, the more (None while it has no
        summary)."""
        try:
            summary = rundir.read_json(run_dir / rundir.SUMMARY)
        except (rundir.UnreadableRun, OSError):
            return None
        target = summary.get("target") if isinstance(summary, dict) else None
        confirmed = target.get("confirmed") if isinstance(target, dict) else None
        reached = confirmed.get("timesteps") if isinstance(confirmed, dict) else None
        if isinstance(reached, (int, float)) and not isinstance(reached, bool):
            return -float(reached)
        # never confirmed: no better than a run that confirmed on its last step past the cap
        used = summary.get("timesteps") if isinstance(summary, dict) else None
        ran = float(used) if isinstance(used, (int, float)) and not isinstance(used, bool) else 0
        return -max(float(self.cap or 0), ran)

    def run_value(self, values: Sequence[float]) -> float | None:
        """A run's value from its series: the last (time to target) or the robust score."""
        if not self.to_target:
            return robust_score(values)
        return float(values[-1]) if values else None

    def trial_value(self, per_seed: Sequence[Sequence[float]]) -> float | None:
        """A trial's value from its runs' series."""
        return trial_value(per_seed, self.run_value)

    def intermediate(
        self, per_seed: Sequence[tuple[Sequence[float], bool]], step: int
    ) -> float | None:
        """A trial's value at evaluation ``step`` (see :func:`intermediate`)."""
        return intermediate(per_seed, step, self.run_value)
