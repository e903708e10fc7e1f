"""A study's best trial as settings to run: for a sweep's ``tuned:`` and for ``best.yaml``.

Reads the storage only (nothing here imports the sweep machinery, which imports this).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from harness.commands import UsageError
from harness.tune import scores
from harness.tune.space import SearchSpace, SpaceError, parse_space, split_values
from harness.tune.storage import check_url, shown


def study_name(group: str, algo: str) -> str:
    """The optuna study of ``algo`` in the group ``group`` (the tag of its runs too)."""
    return f"{group}-{algo.replace(':', '_')}"


class TunedError(ValueError):
    """A study that cannot give its best trial; the message is one line."""


@dataclass(frozen=True)
class Tuned:
    """The best trial of a study and what made it."""

    study: str
    storage: str
    trial: int
    score: float
    #: config key -> value of the best trial
    values: dict[str, Any]
    #: the study's user attributes that were checked (algorithm, env, seeds, budget, ...)
    record: dict[str, Any]
    #: one warning line naming the trials skipped (records that do not check), or ""
    skipped: str = ""
    #: one warning line when no completed trial has the evaluations its objective averages
    #: (the best is then taken among those that have fewer), or ""
    warning: str = ""

    @property
    def algo(self) -> str:
        return str(self.record.get("algo"))

    @property
    def recheck(self) -> dict[str, Any] | None:
        """The re-evaluation of this trial on fresh tuning seeds, if it was made."""
        recheck = self.record.get("recheck")
        if isinstance(recheck, dict) and recheck.get("trial") == self.trial:
            return recheck
        return None

    def provenance(self) -> str:
        """One line for a run made at these settings (its ``tuned`` knob)."""
        seeds = " ".join(str(s) for s in self.record.get("seeds") or [])
        text = (
            f"study {self.study} trial {self.trial} (budget {self.record.get('budget', '?')}; "
            f"tuning seeds {seeds}; score {self.score:.1f})"
        )
        recheck = self.recheck
        if recheck is not None and recheck.get("score") is not None:
            again = " ".join(str(s) for s in recheck.get("seeds") or [])
            text += f", rechecked on seeds {again}: {float(recheck['score']):.1f}"
        return text

    def assignments(self) -> tuple[int | None, list[str]]:
        """Episodes per fitness (None: not tuned) and the ``--set`` assignments."""
        return split_values(self.values)


def _run_ids(value: Any) -> bool:
    """A trial's (or recheck's) ``runs``: seed -> run id, both digits."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) and v.isdigit()
        for k, v in value.items()
    )


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


#: What a trial's user attributes may hold, each checked before it is read.
_TRIAL_ATTRS: dict[str, Any] = {
    "runs": _run_ids,
    "runs_dir": lambda v: isinstance(v, str),
    "scores": lambda v: (
        isinstance(v, dict)
        and all(isinstance(k, str) and k.isdigit() and _number_or_none(s) for k, s in v.items())
    ),
    "pruned_at_evaluation": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "failure": lambda v: isinstance(v, str),
    "process": lambda v: isinstance(v, str),
    "set": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
    "usage": scores.usage_valid,
}


def check_trial(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """A stored trial's values, checked against ``space`` (and its other attributes against
    their types); :class:`TunedError` names what is wrong. A study is data, maybe someone
    else's: nothing in it is imported or run."""
    from optuna.trial import TrialState

    attrs = trial.user_attrs
    for key, valid in _TRIAL_ATTRS.items():
        if key in attrs and not valid(attrs[key]):
            raise TunedError(f"trial {trial.number}: {key}={attrs[key]!r:.80} is no harness record")
    if "values" not in attrs and trial.state != TrialState.COMPLETE:
        return {}
    try:
        return space.check(attrs.get("values"))
    except SpaceError as error:
        raise TunedError(f"trial {trial.number}: {error}") from None


def checked_trials(study: Any, space: SearchSpace) -> tuple[list[tuple[Any, dict[str, Any]]], str]:
    """The study's trials whose records check (each with its values), and one line naming
    those skipped ("" if none)."""
    kept, skipped = [], []
    for trial in study.get_trials(deepcopy=False):
        try:
            kept.append((trial, check_trial(trial, space)))
        except TunedError as error:
            skipped.append(str(error))
    if not skipped:
        return kept, ""
    return kept, (
        f"harness: warning: study {study.study_name}: {len(skipped)} trial(s) skipped, their "
        f"records are not a harness study's: {skipped[0]}"
        + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else "")
    )


def _checked_recheck(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    seeds = value.get("seeds")
    if (
        not isinstance(value.get("trial"), int)
        or not isinstance(seeds, list)
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or not _number_or_none(value.get("score"))
        or ("runs" in value and not _run_ids(value["runs"]))
        or not isinstance(value.get("runs_dir", ""), str)
        or not isinstance(value.get("failure", ""), str)
    ):
        return None
    return value


def best_of(study: Any, url: str, algo: str, trials: list[tuple[Any, dict[str, Any]]]) -> Tuned:
    """The best completed trial among ``trials`` (checked: :func:`checked_trials`), with the
    study's record checked: its algorithm must be ``algo``, its env a string (compared
    with the run's by the caller, never imported here)."""
    import optuna
    from optuna.trial import TrialState

    name = study.study_name
    record = study.user_attrs
    if record.get("algo") != algo:
        raise TunedError(f"study {name} tuned {record.get('algo')!r:.80}, not {algo}")
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise TunedError(f"study {name} in {shown(url)} minimises; harness studies maximise")
    env, seeds = record.get("env"), record.get("seeds") or []
    if not isinstance(env, str) or not env:
        raise TunedError(f"study {name} in {shown(url)} records no env: {env!r:.80}")
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise TunedError(f"study {name} in {shown(url)}: seeds {seeds!r:.80} are not integers")
    objective = scores.Objective.from_record(record)
    done = [
        (trial, values)
        for trial, values in trials
        if trial.state == TrialState.COMPLETE
        and isinstance(trial.value, (int, float))
        and math.isfinite(trial.value)
    ]
    if not done:
        raise TunedError(f"study {name} in {shown(url)} has no completed trial")
    # a trial whose runs made fewer evaluations than the objective averages scored on what
    # it had (a lucky one or two): it is the best only when no trial has enough
    enough = [
        pair
        for pair in done
        if objective.enough(
            scores.trial_evaluations(pair[0].user_attrs, len(pair[0].intermediate_values))
        )
    ]
    warning = ""
    if not enough:
        warning = (
            f"harness: warning: study {name}: no completed trial has the "
            f"{objective.evaluations_needed} evaluations per run its objective averages; the best "
            "is taken among trials with fewer (give a larger budget or more --evaluations)"
        )
    best, values = max(enough or done, key=lambda pair: (pair[0].value, -pair[0].number))
    checked: dict[str, Any] = {
        "algo": algo,
        "env": env,
        "seeds": seeds,
        "budget": str(record.get("budget", "?")),
        "objective": str(record.get("objective", objective.text)),
    }
    recheck = _checked_recheck(record.get("recheck"))
    if recheck is not None:
        checked["recheck"] = recheck
    return Tuned(
        study=name,
        storage=shown(url),
        trial=best.number,
        score=float(best.value),
        values=values,
        record=checked,
        warning=warning,
    )


def load_best(name: str, url: str, algo: str) -> Tuned:
    """The best completed trial of the study ``name`` of ``algo`` in the storage at ``url``.

    A study is data: its values are checked against the search space it records (itself
    checked against ``algo``'s parameters), trials whose records do not check are left out
    (``skipped`` names them in one line), and nothing it names is imported.
    """
    import optuna

    from harness.tune.storage import open_storage

    try:
        check_url(url, creating=False)
        storage = open_storage(url)
    except UsageError as error:
        raise TunedError(str(error)) from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage))
        raise TunedError(
            f"no study {name!r} in {shown(url)}; it holds: {', '.join(names) or 'none'}"
        ) from None
    if study.user_attrs.get("algo") != algo:
        raise TunedError(f"study {name} tuned {study.user_attrs.get('algo')!r:.80}, not {algo}")
    try:
        space = parse_space(algo, study.user_attrs.get("space"), f"study {name}")
    except SpaceError as error:
        raise TunedError(f"{shown(url)}: {error}") from None
    trials, skipped = checked_trials(study, space)
    return dataclasses.replace(best_of(study, url, algo, trials), skipped=skipped)
