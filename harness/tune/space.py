"""Search spaces as data: each parameter's range, its checks, and what a trial samples.

The format is documented at the top of ``experiments/search_spaces.yaml``. A space is
found, for algorithm A, in this order: ``--space FILE`` (the same format: A's entry),
the algorithm class's own ``search_space`` attribute (a plugin's: a mapping of the same
per-parameter form, declared on the class as it declares its ``Config`` and
``defaults_section``), then the shipped file's entry for A's name, then for its
``experiments/defaults.yaml`` section (``nevergrad`` serves every ``ng:NAME``).

Checked before anything runs (:func:`load_space`), each failure one line naming the
file, the algorithm and the parameter: a key that is neither a hyperparameter of the
algorithm's config dataclass, nor a ``--set`` knob its family uses, nor ``episodes``
for the ES family; an empty or inverted range; a log range that reaches zero; a value
the key's type refuses; a reference (``at_most``, ``same_as``) to a key not defined
above it. This module imports no optuna: a trial is anything with optuna's
``suggest_float``, ``suggest_int`` and ``suggest_categorical``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from harness import schema
from harness.config import EXPERIMENTS_DIR, ConfigError, param_types, parse_assignment, read_yaml

#: The shipped search spaces.
SPACES_FILE = EXPERIMENTS_DIR / "search_spaces.yaml"
#: The key of the episodes-per-fitness flag (ES family), tunable like a hyperparameter.
EPISODES = "episodes"
Kind = Literal["float", "int", "choice", "same_as"]
Transform = Literal["none", "one_minus", "pow2"]
_SPEC_KEYS = ("float", "int", "choice", "same_as", "log", "step", "transform", "at_most")
_AT_MOST = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:-\s*(\d+))?\s*$")


class SpaceError(ValueError):
    """A bad search space; the message is one line naming the file, algorithm and key."""


class Suggests(Protocol):
    """What a space samples from: an optuna trial."""

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = ..., log: bool = ...
    ) -> float: ...

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = ..., log: bool = ...
    ) -> int: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


@dataclass(frozen=True)
class Param:
    """One parameter of a space: the config key it sets and how its value is drawn."""

    key: str
    kind: Kind
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    #: what optuna draws among (labels), and the value each sets
    labels: tuple[Any, ...] = ()
    values: tuple[Any, ...] = ()
    transform: Transform = "none"
    #: (other key, n): HIGH is also at most that key's drawn value minus n
    at_most: tuple[str, int] | None = None
    #: the key whose value this one takes (not drawn)
    same_as: str | None = None

    @property
    def name(self) -> str:
        """optuna's name of the parameter (the zoo's for transformed ones)."""
        if self.transform == "one_minus":
            return f"one_minus_{self.key}"
        if self.transform == "pow2":
            return f"{self.key}_pow"
        return self.key

    def value_of(self, drawn: Any) -> Any:
        """The config value a drawn optuna value sets."""
        if self.kind == "choice":
            return self.values[self.labels.index(drawn)]
        if self.transform == "one_minus":
            return 1.0 - float(drawn)
        if self.transform == "pow2":
            return 2 ** int(drawn)
        return drawn

    def extremes(self) -> list[Any]:
        """The config values at the ends of the range (every value of a choice)."""
        if self.kind == "choice":
            return list(self.values)
        if self.kind == "same_as":
            return []
        ends = [self.low, self.high] if self.kind == "float" else [int(self.low), int(self.high)]
        return [self.value_of(end) for end in ends]

    def holds(self, value: Any, point: Mapping[str, Any]) -> bool:
        """Whether this parameter can set ``value`` (in a ``point`` of its space)."""
        if self.kind == "same_as":
            return value == point.get(str(self.same_as))
        if self.kind == "choice":
            return any(type(value) is type(v) and value == v for v in self.values)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if not math.isfinite(value) or (self.kind == "int" and value != int(value)):
            return False
        ends = self.extremes()
        return bool(min(ends) <= value <= max(ends))

    def describe(self) -> dict[str, Any]:
        """The parameter as data (a study records its space, to refuse a changed one)."""
        if self.kind == "same_as":
            return {"same_as": self.same_as}
        if self.kind == "choice":
            mapped = list(self.labels) != list(self.values)
            return {
                "choice": dict(zip(self.labels, self.values, strict=True))
                if mapped
                else list(self.values)
            }
        out: dict[str, Any] = {self.kind: [self.low, self.high]}
        if self.log:
            out["log"] = True
        if self.step is not None:
            out["step"] = self.step
        if self.transform != "none":
            out["transform"] = self.transform
        if self.at_most is not None:
            other, minus = self.at_most
            out["at_most"] = f"{other} - {minus}" if minus else other
        return out


@dataclass(frozen=True)
class SearchSpace:
    """An algorithm's search space and where it was read from."""

    algo: str
    params: tuple[Param, ...]
    #: where the space comes from, for messages and the study's record
    source: str

    def sample(self, trial: Suggests) -> dict[str, Any]:
        """Draw one point: config key -> value, in the space's order."""
        drawn: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        for param in self.params:
            if param.kind == "same_as":
                assert param.same_as is not None
                drawn[param.key] = drawn[param.same_as]
                continue
            if param.kind == "choice":
                raw[param.key] = trial.suggest_categorical(param.name, list(param.labels))
            else:
                high = param.high
                if param.at_most is not None:
                    other, minus = param.at_most
                    high = min(high, float(drawn[other]) - minus)
                if param.kind == "float":
                    raw[param.key] = trial.suggest_float(
                        param.name, param.low, high, step=param.step, log=param.log
                    )
                else:
                    step = int(param.step) if param.step is not None else 1
                    raw[param.key] = trial.suggest_int(
                        param.name, int(param.low), int(high), step=step, log=param.log
                    )
            drawn[param.key] = param.value_of(raw[param.key])
        return drawn

    def values_from(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The config values of a trial from optuna's drawn ``params`` (its own names)."""
        values: dict[str, Any] = {}
        for param in self.params:
            if param.kind == "same_as":
                assert param.same_as is not None
                values[param.key] = values[param.same_as]
            elif param.name in params:
                values[param.key] = param.value_of(params[param.name])
        return values

    def describe(self) -> dict[str, Any]:
        """The space as data, in its order."""
        return {param.key: param.describe() for param in self.params}

    def check(self, values: Any) -> dict[str, Any]:
        """``values`` read from a study (data of a database, maybe someone else's) as a point
        of this space: its keys, each value one the space can draw and the key's type takes.
        :class:`SpaceError` says, in one line, what is not."""
        if not isinstance(values, Mapping):
            raise SpaceError(f"values are not a mapping: {values!r:.80}")
        keys = [param.key for param in self.params]
        if sorted(map(str, values)) != sorted(keys):
            raise SpaceError(f"values set {sorted(map(str, values))!r:.120}, not {keys}")
        for param in self.params:
            value = values[param.key]
            if not param.holds(value, values):
                raise SpaceError(f"{param.key}={value!r:.80} is outside the space")
            _check_value(self.algo, param.key, value, param.key)
        return {key: values[key] for key in keys}


def assignment(key: str, value: Any) -> str:
    """``KEY=VALUE`` that ``--set`` reads back as ``value`` (JSON is YAML; no spaces)."""
    return f"{key}={json.dumps(value, separators=(',', ':'))}"


def split_values(values: Mapping[str, Any]) -> tuple[int | None, list[str]]:
    """A point's episodes per fitness (None: not tuned) and its ``--set`` assignments."""
    episodes = values.get(EPISODES)
    sets = [assignment(key, value) for key, value in values.items() if key != EPISODES]
    return (None if episodes is None else int(episodes)), sets


# -- reading ----------------------------------------------------------------------------------


def _number(value: Any, where: str, integer: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpaceError(f"{where}: bounds must be numbers, got {value!r}")
    if not math.isfinite(value):
        raise SpaceError(f"{where}: bounds must be finite, got {value!r}")
    if integer and schema.integral(value) is None:
        raise SpaceError(f"{where}: int bounds must be integers, got {value!r}")
    return float(value)


def parse_param(key: str, spec: Any, where: str, earlier: Mapping[str, Param]) -> Param:
    """One parameter from its YAML form; :class:`SpaceError` names what is wrong."""
    if not isinstance(spec, dict):
        raise SpaceError(
            f"{where}: expected a mapping such as {{float: [LOW, HIGH]}}, got {spec!r}"
        )
    unknown = [k for k in spec if k not in _SPEC_KEYS]
    if unknown:
        raise SpaceError(f"{where}: unknown field {unknown[0]!r}; known: {', '.join(_SPEC_KEYS)}")
    kinds = [k for k in ("float", "int", "choice", "same_as") if k in spec]
    if len(kinds) != 1:
        raise SpaceError(f"{where}: give exactly one of float, int, choice or same_as")
    kind: Kind = kinds[0]  # type: ignore[assignment]
    if kind == "same_as":
        other = spec["same_as"]
        if len(spec) != 1:
            raise SpaceError(f"{where}: same_as takes no other field")
        if other not in earlier:
            raise SpaceError(f"{where}: same_as names {other!r}, which is not a key above it")
        return Param(key, "same_as", same_as=str(other))
    if kind == "choice":
        choice = spec["choice"]
        extra = [k for k in spec if k != "choice"]
        if extra:
            raise SpaceError(f"{where}: a choice takes no {extra[0]!r}")
        if isinstance(choice, dict):
            labels, values = tuple(choice), tuple(choice.values())
        elif isinstance(choice, list):
            labels = values = tuple(choice)
        else:
            raise SpaceError(f"{where}: choice must be a list or a mapping, got {choice!r}")
        if not labels:
            raise SpaceError(f"{where}: the choice is empty")
        for label in labels:
            if label is not None and not isinstance(label, (bool, int, float, str)):
                raise SpaceError(
                    f"{where}: choice {label!r} is not a scalar; give a mapping of labels "
                    "to values, e.g. {small: [64, 64]}"
                )
        if len(set(map(repr, labels))) != len(labels):
            raise SpaceError(f"{where}: the choice lists a value twice")
        return Param(key, "choice", labels=labels, values=values)
    bounds = spec[kind]
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise SpaceError(f"{where}: {kind} must be [LOW, HIGH], got {bounds!r}")
    low, high = (_number(b, where, kind == "int") for b in bounds)
    if low > high:
        raise SpaceError(f"{where}: the range [{bounds[0]}, {bounds[1]}] is inverted (LOW > HIGH)")
    if low == high:
        raise SpaceError(
            f"{where}: the range [{bounds[0]}, {bounds[1]}] is empty (LOW = HIGH: set the "
            "value with --set instead)"
        )
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise SpaceError(f"{where}: log must be true or false, got {log!r}")
    if log and low <= 0:
        raise SpaceError(f"{where}: a log range must be above 0, got LOW {bounds[0]}")
    step = spec.get("step")
    if step is not None:
        step = _number(step, where, kind == "int")
        if step <= 0 or log:
            raise SpaceError(f"{where}: step must be positive and not with log, got {step!r}")
    transform = spec.get("transform", "none")
    allowed = {"float": ("none", "one_minus"), "int": ("none", "pow2")}[kind]
    if transform not in allowed:
        raise SpaceError(
            f"{where}: transform {transform!r} does not apply to a {kind} range "
            f"(one_minus: float, pow2: int)"
        )
    at_most = None
    if "at_most" in spec:
        match = _AT_MOST.match(str(spec["at_most"]))
        if match is None or match.group(1) not in earlier:
            raise SpaceError(
                f"{where}: at_most must be 'KEY' or 'KEY - N' naming a key above it, "
                f"got {spec['at_most']!r}"
            )
        other = earlier[match.group(1)]
        if other.kind not in ("int", "float") or other.transform != "none":
            raise SpaceError(f"{where}: at_most names {other.key!r}, which is not a plain range")
        minus = int(match.group(2) or 0)
        if other.low - minus < low:
            raise SpaceError(
                f"{where}: at_most {spec['at_most']!r} can fall below LOW {bounds[0]} "
                f"({other.key} starts at {other.low:g})"
            )
        at_most = (other.key, minus)
    return Param(
        key,
        kind,
        low=low,
        high=high,
        log=log,
        step=step,
        transform=transform,
        at_most=at_most,
    )


def _check_key(algo: str, key: str, where: str) -> None:
    """Refuse a key that the algorithm's config schema does not know."""
    from algorithms.registry import get_algorithm
    from harness.config import suggest_keys

    algo_cls = get_algorithm(algo)
    family = str(algo_cls.family)
    if key == EPISODES:
        if not schema.BY_NAME["episodes"].applies_to(family):
            raise SpaceError(f"{where}: episodes per fitness does not apply to {algo} ({family})")
        return
    params = param_types(algo_cls.Config)
    section, _, name = key.rpartition(".")
    if section in ("", "params") and name in params:
        return
    knob = None if section == "params" else schema.find(key)
    if knob is not None and knob.settable and knob.section != "budget":
        if not knob.applies_to(family):
            raise SpaceError(f"{where}: {knob.name} does not apply to {algo} ({family})")
        return
    if knob is not None and knob.section == "budget":
        raise SpaceError(f"{where}: {key} is the budget, which a study fixes, not a parameter")
    close = suggest_keys(name, params)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise SpaceError(
        f"{where}: unknown parameter {key!r}: not a hyperparameter of "
        f"{algo_cls.Config.__name__} nor a --set knob of {algo}{hint}"
    )


def _check_value(algo: str, key: str, value: Any, where: str) -> None:
    """Refuse a value the key's type does not take (``--set`` reads it as a run would)."""
    from algorithms.registry import get_algorithm

    if key == EPISODES:
        if schema.integral(value) is None or int(value) < 1:
            raise SpaceError(f"{where}: episodes must be a positive integer, got {value!r}")
        return
    try:
        parse_assignment(assignment(key, value), param_types(get_algorithm(algo).Config))
    except ConfigError as error:
        raise SpaceError(f"{where}: {error}") from None


def parse_space(algo: str, entry: Any, source: str) -> SearchSpace:
    """An algorithm's space from its entry (a mapping of keys to parameters)."""
    if not isinstance(entry, Mapping) or not entry:
        raise SpaceError(f"{source}: {algo}: a space must map parameter names to ranges")
    params: dict[str, Param] = {}
    for key, spec in entry.items():
        where = f"{source}: {algo}.{key}"
        if not isinstance(key, str):
            raise SpaceError(f"{where}: parameter names are strings")
        _check_key(algo, key, where)
        param = parse_param(key, spec, where, params)
        for value in param.extremes():
            _check_value(algo, key, value, where)
        params[key] = param
    return SearchSpace(algo, tuple(params.values()), source)


def _entry_in(data: Any, algo: str, source: str, section: str | None) -> Any:
    if not isinstance(data, dict):
        raise SpaceError(f"{source}: a search-space file maps algorithm names to spaces")
    for name in (algo, section):
        if name is not None and name in data:
            return data[name]
    return None


def load_space(algo: str, space_file: Path | None = None) -> SearchSpace:
    """The checked search space of ``algo`` (see the module docstring for where from)."""
    from algorithms.registry import algorithm_source, get_algorithm

    algo_cls = get_algorithm(algo)
    section = algo_cls.section_in_defaults()
    if space_file is not None:
        try:
            data = read_yaml(space_file)
        except ConfigError as error:
            raise SpaceError(str(error)) from None
        entry = _entry_in(data, algo, str(space_file), section)
        if entry is None:
            raise SpaceError(f"{space_file}: no search space for {algo}")
        return parse_space(algo, entry, str(space_file))
    declared = getattr(algo_cls, "search_space", None)
    if declared is not None:
        where = f"the search_space of {algo} ({algorithm_source(algo)})"
        return parse_space(algo, declared, where)
    try:
        data = read_yaml(SPACES_FILE)
    except ConfigError as error:
        raise SpaceError(str(error)) from None
    shown = f"{SPACES_FILE.parent.name}/{SPACES_FILE.name}"
    entry = _entry_in(data, algo, shown, section)
    if entry is None:
        raise SpaceError(
            f"no search space for {algo}: give one with --space FILE, or declare "
            f"search_space on its class (see {shown})"
        )
    return parse_space(algo, entry, shown)
