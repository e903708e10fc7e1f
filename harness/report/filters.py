"""Choosing which runs a report draws: ``--algo``, ``--env``, ``--sweep`` and ``--where``.

A researcher's runs directory holds more than one question (a sweep beside older
runs, a grid of which only one value matters now), and a report draws every run it
reads. The filters narrow the runs read (run directories, runs directories, archives)
before any group, budget or figure is computed, so the common budget and the
statistics are those of the runs shown. ``--where KEY=VALUE`` compares against the
run's ``config.json`` with types: the value is read as YAML, as ``--set`` reads it
(:func:`harness.config.parse_value`), and numbers compare as numbers, so
``sigma=0.05`` matches a stored ``0.05`` and ``population=20`` a stored ``20.0``.
A filter that leaves no run is an error naming the filter and what the runs hold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.records import RunTable

#: Config sections a bare ``--where`` key is looked up in, after the top level.
SECTIONS = ("params", "policy")
#: Names a reader uses for top-level keys, as the report's tables show them.
ALIASES = {"k": "episodes", "episodes_per_fitness": "episodes", "w": "workers", "W": "workers"}


class FilterError(ValueError):
    """A filter that cannot be read or leaves no run; the message is one line."""


@dataclass(frozen=True)
class Filters:
    """What to keep: algorithms (any of), one env, one sweep, settings equal to values."""

    algos: tuple[str, ...] = ()
    env: str | None = None
    sweep: str | None = None
    where: tuple[tuple[str, Any, str], ...] = field(default=())  # (key, value, as typed)

    def __bool__(self) -> bool:
        return bool(self.algos or self.env or self.sweep or self.where)

    def flags(self) -> list[str]:
        """The command-line flags that give these filters (for the regenerate command)."""
        import shlex

        out = [f"--algo {shlex.quote(a)}" for a in self.algos]
        if self.env:
            out.append(f"--env {shlex.quote(self.env)}")
        if self.sweep:
            out.append(f"--sweep {shlex.quote(self.sweep)}")
        out += [f"--where {shlex.quote(f'{key}={text}')}" for key, _, text in self.where]
        return out


def parse_where(items: Sequence[str] | Mapping[str, Any]) -> tuple[tuple[str, Any, str], ...]:
    """``["sigma=0.05"]`` (or ``{"sigma": 0.05}``) as (key, typed value, text) triples."""
    from harness.config import ConfigError, parse_value

    if isinstance(items, Mapping):
        return tuple((str(k), v, _text(v)) for k, v in items.items())
    out = []
    for item in items:
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise FilterError(f"--where {item!r}: expected KEY=VALUE, e.g. sigma=0.05")
        try:
            value = parse_value(text)
        except ConfigError:
            raise FilterError(f"--where {item!r}: cannot read the value {text!r}") from None
        out.append((key.strip(), value, text))
    return tuple(out)


def make_filters(
    algos: Sequence[str] = (),
    env: str | None = None,
    sweep: str | None = None,
    where: Sequence[str] | Mapping[str, Any] = (),
) -> Filters:
    """:class:`Filters` from the keyword arguments of :func:`harness.report.build.build_report`."""
    if isinstance(algos, str):
        algos = (algos,)
    return Filters(tuple(algos), env or None, sweep or None, parse_where(where))


def _text(value: Any) -> str:
    from harness.report.settings import _yaml_value

    return _yaml_value(value)


def same_value(stored: Any, wanted: Any) -> bool:
    """Whether a stored config value equals the wanted one: numbers as numbers (``20`` is
    ``20.0``; booleans only equal booleans), lists item by item, the rest by ``==``."""
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return isinstance(stored, bool) and isinstance(wanted, bool) and stored == wanted
    if isinstance(stored, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(float(stored), float(wanted), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(stored, (list, tuple)) and isinstance(wanted, (list, tuple)):
        return len(stored) == len(wanted) and all(
            same_value(a, b) for a, b in zip(stored, wanted, strict=True)
        )
    return bool(stored == wanted)


_MISSING = object()


def lookup(config: Mapping[str, Any], key: str) -> Any:
    """The config's value for ``key``: a top-level key (``workers``, or ``k``/``W`` as the
    tables name them), ``section.key`` (``params.sigma``) or a bare key of the algorithm's
    hyperparameters or of the policy; a sentinel when the run has no such setting."""
    key = ALIASES.get(key, key)
    section, dot, name = key.partition(".")
    if dot:
        inner = config.get(section)
        return inner.get(name, _MISSING) if isinstance(inner, Mapping) else _MISSING
    if key in config and not isinstance(config[key], Mapping):
        return config[key]
    for section in SECTIONS:
        inner = config.get(section)
        if isinstance(inner, Mapping) and key in inner:
            return inner[key]
    return _MISSING


def _listing(values: Sequence[Any], limit: int = 8) -> str:
    texts = list(dict.fromkeys(_text(v) if not isinstance(v, str) else v for v in values))
    texts.sort()
    return ", ".join(texts[:limit]) + (", ..." if len(texts) > limit else "")


def _keep(table: RunTable, labels: set[str]) -> RunTable:
    runs = table.runs[table.runs["run"].isin(labels)].reset_index(drop=True)
    steps = table.steps[table.steps["run"].isin(labels)].reset_index(drop=True)
    records = {k: v for k, v in table.records.items() if k in labels}
    return RunTable(steps, runs, records, list(table.skipped))


def apply(table: RunTable, filters: Filters) -> RunTable:
    """The runs of ``table`` that pass every filter, applied in the order algorithm, env,
    sweep, settings; raises :class:`FilterError` naming the first filter left with no run."""
    if not filters or len(table) == 0:
        return table
    runs = table.runs
    if filters.algos:
        present = sorted(runs["algo"].astype(str).unique())
        kept = runs[runs["algo"].astype(str).isin(filters.algos)]
        if kept.empty:
            names = ", ".join(filters.algos)
            raise FilterError(
                f"--algo {names}: no run of the {len(runs)} read ran it "
                f"(algorithms: {', '.join(present)})"
            )
        runs = kept
    if filters.env:
        ids = runs["gym_id"].astype(str) if "gym_id" in runs else runs["env"].astype(str)
        match = (runs["env"].astype(str) == filters.env) | (ids == filters.env)
        if not match.any():
            raise FilterError(
                f"--env {filters.env}: no run of the {len(runs)} left ran it "
                f"(envs: {_listing(list(runs['env'].astype(str)))})"
            )
        runs = runs[match]
    if filters.sweep:
        sweeps = runs["sweep"] if "sweep" in runs else pd.Series(None, index=runs.index)
        match = sweeps.astype(str) == filters.sweep
        if not match.any():
            named = [str(s) for s in sweeps.dropna()]
            raise FilterError(
                f"--sweep {filters.sweep}: no run of the {len(runs)} left came from it "
                f"(sweeps: {_listing(named) if named else 'none, single runs'})"
            )
        runs = runs[match]
    for key, wanted, text in filters.where:
        stored = {
            label: lookup(table.records[label].config, key)
            for label in runs["run"]
            if label in table.records
        }
        having = {label: v for label, v in stored.items() if v is not _MISSING}
        if not having:
            raise FilterError(
                f"--where {key}={text}: none of the {len(runs)} runs left has a setting {key!r}"
            )
        kept_labels = {label for label, v in having.items() if same_value(v, wanted)}
        if not kept_labels:
            raise FilterError(
                f"--where {key}={text}: no run left has {key} = {text} "
                f"(values: {_listing(list(having.values()))})"
            )
        runs = runs[runs["run"].isin(kept_labels)]
    return _keep(table, set(runs["run"]))
