"""A trial's score, from its runs' evaluations: the objective and what the pruner sees.

A run's *robust score* is the mean of its last :data:`LAST_EVALUATIONS` evaluations
(``eval_return_mean``, each the mean return of ``eval_episodes`` fresh seeded
episodes; fewer when the run made fewer). A trial's objective is the mean of its
seeds' robust scores. Its intermediate value at step i (the i-th evaluation, counted
from 0) is the same mean taken over each run's evaluations 0..i, so the value the
pruner compares at the last step is the objective itself; a run that ended with
fewer evaluations contributes its final score to later steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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


def enough_evaluations(evaluations: int) -> bool:
    """Whether a run with this many evaluations has the :data:`LAST_EVALUATIONS` the
    objective averages."""
    return evaluations >= LAST_EVALUATIONS


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


def trial_value(per_seed: Sequence[Sequence[float]]) -> float | None:
    """The objective: the mean of the seeds' robust scores (None if one has none)."""
    scores = [robust_score(values) for values in per_seed]
    if not scores or any(score is None for score in scores):
        return None
    return float(sum(s for s in scores if s is not None) / len(scores))


def intermediate(per_seed: Sequence[tuple[Sequence[float], bool]], step: int) -> float | None:
    """The value at evaluation ``step``, or None while a running seed has not reached it.

    ``per_seed``: each run's evaluations so far and whether the run has ended.
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
    return trial_value(upto)
