"""What a reader may rely on in a stored run record: one check of every field it uses.

A run directory may come from someone else (docs/trust.md), so ``config.json``,
``run.json`` and ``metrics.json`` are data whose every field can be wrong: ``algo:
null``, ``seed: "x"``, ``eval_episodes: 0``, ``host: "x"``, string steps in the
metrics, a three-file run with no ``start_time``. Each reader (``harness report``,
``harness enjoy`` and :func:`harness.load_policy`, a sweep's "which cells are done")
checks a record here before using it; one that fails is unreadable, with one line
naming the file, the field and the value: a report skips that run with a warning, a
sweep runs its cell again, ``enjoy`` refuses it.

The checks are those of a run's own config (:func:`harness.config.check_knob`, the
policy's choices and maxima, the algorithm's parameter types), plus the shape of what
Sacred writes. Every committed run record passes them; a field a record lacks is
checked only where every run since the first has written it (:data:`REQUIRED_CONFIG`).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from harness import rundir, schema
from harness.rundir import UnreadableRun

__all__ = [
    "REQUIRED_CONFIG",
    "REQUIRED_POLICY",
    "check_config",
    "check_header",
    "check_metrics",
    "check_record",
    "check_run_entry",
]

#: Config keys every run has recorded since the harness began (those of the first committed
#: runs): a ``config.json`` without one was not written by a run.
REQUIRED_CONFIG = (
    "algo",
    "env",
    "seed",
    "episodes",
    "workers",
    "backend",
    "timesteps",
    "generations",
    "time_limit",
    "target_return",
    "eval_every_timesteps",
    "eval_episodes",
    "checkpoint_every",
    "max_episode_steps",
    "fail_on_env_error",
    "population_log_every",
    "population_per_worker",
    "sync",
    "ray_address",
    "sweep",
    "params",
    "policy",
)
#: Policy keys every run has recorded: a ``policy`` without one would match any policy.
REQUIRED_POLICY = ("kind", "hidden_sizes", "activation", "discretize")
#: Largest step index a metric may carry (int64, as the report's frames hold it).
MAX_STEP = 2**63 - 1
#: Fields of ``run.json``'s ``result`` that are numbers, and those that are text.
RESULT_NUMBERS = (
    "cpu_seconds",
    "episodes",
    "final_eval_return",
    "steps",
    "timesteps",
    "training_started_at",
    "wall_time_s",
)
RESULT_TEXTS = ("algo", "env", "stop_reason")
#: Fields of ``run.json``'s ``host`` and the types they hold.
HOST_FIELDS: dict[str, tuple[type, ...]] = {
    "hostname": (str,),
    "cpu": (str,),
    "python_version": (str,),
    "cpu_count": (int,),
    "os": (list,),
    "ENV": (dict,),
    "gpus": (dict,),
}


def _shown(value: Any) -> str:
    """``repr(value)`` cut to one short line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else f"{text[:57]}..."


def _bad(where: str, what: str, value: Any) -> UnreadableRun:
    return UnreadableRun(f"{where} must be {what}, got {_shown(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_time(where: str, value: Any, required: bool) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise _bad(where, "a date and time (ISO 8601 text)", value)
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        raise _bad(where, "a date and time (ISO 8601 text)", value) from None


# -- config.json ------------------------------------------------------------------------------


def check_config(config: Any) -> None:
    """Refuse (:class:`UnreadableRun`) a ``config.json`` whose fields a reader cannot use."""
    from harness.config import ConfigError, check_knob, check_policy_values

    where = rundir.CONFIG
    if not isinstance(config, dict):
        raise UnreadableRun(f"{where} is not a JSON object")
    for key in REQUIRED_CONFIG:
        if key not in config:
            raise UnreadableRun(f"{where} has no {key!r}: not the record of a run")
    for key in ("algo", "env"):
        if not isinstance(config[key], str) or not config[key].strip():
            raise _bad(f"{where}: {key}", "a name", config[key])
    policy, params = config["policy"], config["params"]
    if not isinstance(policy, dict):
        raise _bad(f"{where}: policy", "a mapping", policy)
    if not isinstance(params, dict):
        raise _bad(f"{where}: params", "a mapping", params)
    for key in REQUIRED_POLICY:
        if key not in policy:
            raise UnreadableRun(f"{where} has no 'policy.{key}': not the record of a run")
    try:
        for knob in schema.KNOBS:
            section, _, name = knob.name.rpartition(".")
            holder = policy if section == "policy" else config
            if name in holder:
                _check_type(knob, holder[name])
                check_knob(knob, holder[name])
        check_policy_values(policy)
    except ConfigError as error:
        raise UnreadableRun(f"{where}: {error}") from None
    imports = config.get("imports")
    if imports is not None and not (
        isinstance(imports, list) and all(isinstance(m, str) for m in imports)
    ):
        raise _bad(f"{where}: imports", "a list of module names", imports)
    _check_params(config["algo"], params)


def _check_type(knob: schema.Knob, value: Any) -> None:
    """The type :func:`harness.config.check_knob` leaves to the parser: text and lists."""
    from harness.config import ConfigError

    if value is None:
        return  # check_knob judges null
    if knob.type is str and not isinstance(value, str):
        raise ConfigError(f"{knob.name} must be text, got {_shown(value)}")
    if knob.type is list and not isinstance(value, list):
        raise ConfigError(f"{knob.name} must be a list, got {_shown(value)}")
    if knob.type is bool and not isinstance(value, bool):
        raise ConfigError(f"{knob.name} must be true or false, got {_shown(value)}")
    if knob.type is float and not _is_number(value):
        raise ConfigError(f"{knob.name} must be a number, got {_shown(value)}")


def _check_params(algo: str, params: Mapping[str, Any]) -> None:
    """Each parameter the algorithm declares has its declared type (an algorithm not
    installed here, or a parameter it no longer has, is shown as recorded)."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm
    from harness.config import ConfigError, allows_none, coerce, param_types, type_name

    try:
        config_type = get_algorithm(algo).Config
    except AlgorithmRegistryError:
        return
    types = param_types(config_type)
    known: dict[str, Any] = {}
    for key, value in params.items():
        if key not in types:
            continue
        where = f"{rundir.CONFIG}: params.{key}"
        if value is None:
            if not allows_none(types[key]):
                raise _bad(where, type_name(types[key]), value)
            known[key] = value
            continue
        try:
            known[key] = coerce(key, value, types[key])
        except ConfigError:
            raise _bad(where, type_name(types[key]), value) from None
        if isinstance(known[key], float) and not math.isfinite(known[key]):
            raise _bad(where, "a finite number", value)
    # the algorithm's own checks (choices, ranges), as a run's config passes them
    try:
        validate = getattr(config_type(**known), "validate", None)
        if validate is not None:
            validate()
    except (ValueError, TypeError) as error:
        reason = " ".join(str(error).split())
        raise UnreadableRun(f"{rundir.CONFIG}: params: {reason}") from None


# -- run.json ---------------------------------------------------------------------------------


def check_run_entry(entry: Any) -> None:
    """Refuse (:class:`UnreadableRun`) a ``run.json`` whose fields a reader cannot use."""
    where = rundir.RUN
    if not isinstance(entry, dict):
        raise UnreadableRun(f"{where} is not a JSON object")
    status = entry.get("status")
    if status not in rundir.STATUSES:
        raise _bad(f"{where}: status", f"one of {', '.join(rundir.STATUSES)}", status)
    _check_time(f"{where}: start_time", entry.get("start_time"), required=True)
    for key in ("stop_time", "heartbeat"):
        _check_time(f"{where}: {key}", entry.get(key), required=False)
    host = entry.get("host")
    if host is not None:
        if not isinstance(host, dict):
            raise _bad(f"{where}: host", "a mapping", host)
        for key, kinds in HOST_FIELDS.items():
            value = host.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise _bad(f"{where}: host.{key}", kinds[0].__name__, value)
        if not all(isinstance(part, str) for part in host.get("os") or []):
            raise _bad(f"{where}: host.os", "a list of text", host["os"])
        if isinstance(host.get("cpu_count"), int) and host["cpu_count"] < 1:
            raise _bad(f"{where}: host.cpu_count", "positive", host["cpu_count"])
    for key in ("artifacts", "resources", "resumed", "carried"):
        value = entry.get(key)
        if value is not None and not isinstance(value, list):
            raise _bad(f"{where}: {key}", "a list", value)
    if not all(isinstance(name, str) for name in entry.get("artifacts") or []):
        raise _bad(f"{where}: artifacts", "a list of file names", entry["artifacts"])
    if not all(isinstance(item, dict) for item in entry.get("resumed") or []):
        raise _bad(f"{where}: resumed", "a list of mappings", entry["resumed"])
    result = entry.get("result")
    if result is not None and not isinstance(result, dict):
        raise _bad(f"{where}: result", "a mapping", result)
    for key in RESULT_NUMBERS:
        value = (result or {}).get(key)
        if value is not None and not _is_number(value):
            raise _bad(f"{where}: result.{key}", "a number", value)
    for key in RESULT_TEXTS:
        value = (result or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise _bad(f"{where}: result.{key}", "text", value)


# -- metrics.json -----------------------------------------------------------------------------


def check_metrics(metrics: Any) -> None:
    """Refuse (:class:`UnreadableRun`) metrics whose steps are not step indices, values not
    numbers (or null), timestamps not text, or whose lists differ in length."""
    where = rundir.METRICS
    if not isinstance(metrics, dict):
        raise UnreadableRun(f"{where} is not a JSON object")
    for name, series in metrics.items():
        at = f"{where}: metric {_shown(name)}"
        if not isinstance(series, dict):
            raise _bad(at, "a mapping of steps, values and timestamps", series)
        steps, values = series.get("steps"), series.get("values")
        stamps = series.get("timestamps", [])
        for key, value in (("steps", steps), ("values", values), ("timestamps", stamps)):
            if not isinstance(value, list):
                raise _bad(f"{at} {key}", "a list", value)
        assert isinstance(steps, list) and isinstance(values, list) and isinstance(stamps, list)
        if len(steps) != len(values) or (stamps and len(stamps) != len(steps)):
            raise UnreadableRun(f"{at}: steps, values and timestamps differ in length")
        for step in steps:
            if not _is_int(step) or not 0 <= step <= MAX_STEP:
                raise _bad(f"{at} steps", "integers from 0", step)
        for value in values:
            if value is not None and not (
                _is_number(value) and (isinstance(value, float) or abs(value) <= MAX_STEP)
            ):
                raise _bad(f"{at} values", "numbers (integers within int64)", value)
        for stamp in stamps:
            if not isinstance(stamp, str):
                raise _bad(f"{at} timestamps", "text", stamp)


# -- whole records ----------------------------------------------------------------------------


def check_header(header: rundir.RunHeader) -> None:
    """``config.json`` and ``run.json`` of a run read by :func:`harness.rundir.read_header`."""
    check_config(header.config)
    check_run_entry(header.run)


def check_record(record: rundir.RunRecord) -> None:
    """A whole run read by :func:`harness.rundir.read_run`: config, run entry and metrics."""
    check_header(record)
    check_metrics(record.metrics)
