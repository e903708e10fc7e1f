"""A study's best trial as settings to run: for a sweep's ``tuned:`` and for ``best.yaml``.

Reads the storage only (nothing here imports the sweep machinery, which imports this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.commands import UsageError
from harness.tune.space import split_values
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
    #: the study's user attributes (its record: algorithm, seeds, budget, ...)
    record: dict[str, Any]

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


def load_best(name: str, url: str) -> Tuned:
    """The best completed trial of the study ``name`` in the storage at ``url``."""
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
    try:
        best = study.best_trial
    except ValueError:
        raise TunedError(f"study {name} in {shown(url)} has no completed trial") from None
    values = best.user_attrs.get("values")
    if not isinstance(values, dict):
        raise TunedError(f"study {name}: trial {best.number} records no values")
    return Tuned(
        study=name,
        storage=shown(url),
        trial=best.number,
        score=float(best.value if best.value is not None else float("nan")),
        values=dict(values),
        record=dict(study.user_attrs),
    )
