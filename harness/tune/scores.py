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
