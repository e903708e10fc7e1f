"""Run configuration: per-env defaults as data, and typed ``--set key=value`` overrides.

Precedence, lowest first: the algorithm's dataclass defaults, the ``default``
entry of ``experiments/defaults.yaml``, that file's entry for the env's
gymnasium id, then the user's overrides.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "experiments"
DEFAULTS_FILE = EXPERIMENTS_DIR / "defaults.yaml"

#: Run-level knobs with their one-line docs (shown by ``harness run --help`` and ``harness list``).
RUN_KEYS: dict[str, tuple[type, str]] = {
    "eval_every_timesteps": (int, "evaluate the current policy every this many training steps"),
    "eval_episodes": (int, "fresh seeded episodes per evaluation"),
    "checkpoint_every": (int, "write a checkpoint every this many steps (generations/updates)"),
    "max_episode_steps": (int, "episode step cap for training (null: the env's own limit)"),
    "fail_on_env_error": (bool, "stop on an env exception or NaN; false scores it as worst"),
    "population_log_every": (
        int,
        "log each generation's fitness and candidates, and the centre every N generations "
        "(0: no log; feeds the report's UMAP map)",
    ),
    "sync": (str, "broadcast (centre sent each generation) or seeds (replicated, Algorithm 2)"),
    "reward_transform": (
        str,
        "training reward: none, shift:C or locomotion:alive=A,costs=C,fall=F "
        "(envs/reward_shaping.py; evaluation always uses the env's reward)",
    ),
}
POLICY_KEYS: dict[str, tuple[type, str]] = {
    "kind": (str, "linear, mlp or lstm"),
    "hidden_sizes": (list, "hidden layer sizes (LSTM: one entry, the number of cells)"),
    "activation": (str, "tanh or relu"),
    "discretize": (int, "0 for continuous actions, N>1 rounds each action to N levels"),
}
BUDGET_KEYS = ("timesteps", "generations", "time_limit", "target_return")
SECTIONS = {"run", "policy", "budget"}


class ConfigError(ValueError):
    """A bad configuration value; the message is one line naming it."""


def read_yaml(path: Path) -> Any:
    """Read YAML with the safe loader; a malformed file is a :class:`ConfigError`."""
    try:
        with open(path, encoding="utf-8") as stream:
            return yaml.safe_load(stream)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", error)
        raise ConfigError(f"malformed YAML in {path}{where}: {problem}") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None


@lru_cache(maxsize=4)
def _load_defaults(path: Path) -> dict[str, Any]:
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must map env ids to settings")
    return data


def env_defaults(
    gym_id: str, algo: str, env_name: str | None = None, path: Path = DEFAULTS_FILE
) -> dict[str, Any]:
    """Merged ``run``, ``policy``, ``budget`` and algorithm sections for one env.

    Entries apply in order ``default``, the gymnasium id, then the short name
    when it differs (``PendulumPO`` refines ``Pendulum-v1``).
    """
    data = _load_defaults(path)
    merged: dict[str, Any] = {"run": {}, "policy": {}, "budget": {}, "params": {}}
    entries = ["default", gym_id] + ([env_name] if env_name and env_name != gym_id else [])
    for entry_name in entries:
        entry = data.get(entry_name) or {}
        for section, values in entry.items():
            if section in SECTIONS:
                merged[section].update(values or {})
            elif section == algo_section(algo):
                merged["params"].update(values or {})
    return copy.deepcopy(merged)


def algo_section(algo: str) -> str:
    """YAML section of an algorithm: ``nevergrad-es`` and ``ng:NAME`` share ``nevergrad``."""
    return "nevergrad" if algo.startswith("ng:") or algo == "nevergrad-es" else algo


def parse_value(text: str) -> Any:
    """A ``--set`` value as YAML scalar/list: ``0.1`` -> float, ``true`` -> bool, ``[64,64]``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError(f"cannot parse value {text!r}") from None


def _base_type(annotation: Any) -> Any:
    if isinstance(annotation, str):
        annotation = {"int": int, "float": float, "bool": bool, "str": str}.get(annotation, str)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(args[0])
    if origin in (list, tuple):
        return list
    return annotation


def coerce(key: str, value: Any, expected: Any) -> Any:
    """Check ``value`` against ``expected`` (int, float, bool, str, list); ints widen to float."""
    expected = _base_type(expected)
    if value is None:
        return None
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if expected is list and isinstance(value, (list, tuple)):
        return list(value)
    if expected in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{key} expects {expected.__name__}, got {value!r}")
    if isinstance(value, expected):
        return value
    raise ConfigError(f"{key} expects {expected.__name__}, got {value!r}")


def param_types(config_type: type) -> dict[str, Any]:
    """Field name -> annotation of an algorithm's config dataclass."""
    hints = typing.get_type_hints(config_type)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_type)}


def apply_overrides(
    config: dict[str, Any], assignments: list[str], params_type: type
) -> dict[str, Any]:
    """Apply ``key=value`` strings to a resolved config; unknown keys name close matches.

    A bare key is looked up among the algorithm's hyperparameters, then the run
    and budget keys; ``policy.KEY`` and ``params.KEY`` may be spelled out.
    """
    config = copy.deepcopy(config)
    params = param_types(params_type)
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {assignment!r}")
        value = parse_value(raw)
        section, _, name = key.rpartition(".")
        if section in ("", "params") and name in params:
            config["params"][name] = coerce(key, value, params[name])
        elif section in ("", "policy") and name in POLICY_KEYS:
            config["policy"][name] = coerce(key, value, POLICY_KEYS[name][0])
        elif section == "" and name in RUN_KEYS:
            config[name] = coerce(key, value, RUN_KEYS[name][0])
        elif section == "" and name in BUDGET_KEYS:
            config[name] = coerce(key, value, float if name != "timesteps" else int)
        else:
            known = [*params, *POLICY_KEYS, *RUN_KEYS, *BUDGET_KEYS]
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown --set key {key!r}{hint}")
    return config


def validate_params(params: dict[str, Any], params_type: type, where: str) -> Any:
    """Build the algorithm's config object from a dict, naming unknown keys and bad types."""
    types_ = param_types(params_type)
    checked = {}
    for key, value in params.items():
        if key not in types_:
            close = difflib.get_close_matches(key, list(types_), n=3)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown key {key!r} in {where}{hint}")
        checked[key] = coerce(key, value, types_[key])
    instance = params_type(**checked)
    validate = getattr(instance, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as error:
            raise ConfigError(str(error)) from None
    return instance


#: Top-level knobs of a run and their one-line docs. ``None`` means "take the default".
TOP_LEVEL_DOCS: dict[str, str] = {
    "algo": "algorithm name (see `harness list`)",
    "env": "environment short name or any gymnasium id",
    "seed": "run seed: every random choice derives from it",
    "episodes": "episodes per fitness evaluation (ES family)",
    "workers": "parallel evaluation workers (RL: parallel envs)",
    "backend": "inline, process or ray",
    "ray_address": "address of a Ray cluster (null: a local instance, or RAY_ADDRESS)",
    "timesteps": "budget: training env steps",
    "generations": "budget: generations (RL: rollout/update chunks)",
    "time_limit": "budget: training wall-clock seconds",
    "target_return": "stop once an evaluation's mean return reaches this",
    "sweep": "name of the sweep that launched this run, if any",
}


def check_values(config: dict[str, Any]) -> None:
    """Range checks of run and policy knobs, so a bad value fails before a run starts."""
    from envs.policies import Activation, PolicyKind

    def positive(key: str, value: Any, allow_zero: bool = False, allow_none: bool = False) -> None:
        if value is None and allow_none:
            return
        if value is None or value < (0 if allow_zero else 1):
            least = "zero or more" if allow_zero else "positive"
            raise ConfigError(f"{key} must be {least}, got {value!r}")

    positive("eval_every_timesteps", config.get("eval_every_timesteps"))
    positive("eval_episodes", config.get("eval_episodes"))
    positive("checkpoint_every", config.get("checkpoint_every"), allow_zero=True)
    positive("max_episode_steps", config.get("max_episode_steps"), allow_none=True)
    if config.get("sync") not in ("broadcast", "seeds"):
        raise ConfigError(f"sync must be broadcast or seeds, got {config.get('sync')!r}")
    from envs.reward_shaping import RewardTransform, RewardTransformError

    try:
        transform = RewardTransform.parse(config.get("reward_transform"))
        if "env" in config:
            from envs.registry import resolve_env_id

            transform.check_env(resolve_env_id(str(config["env"])))
    except RewardTransformError as error:
        raise ConfigError(str(error)) from None
    policy = config.get("policy") or {}
    kinds, activations = typing.get_args(PolicyKind), typing.get_args(Activation)
    if "kind" in policy and policy["kind"] not in kinds:
        raise ConfigError(f"policy.kind must be one of {', '.join(kinds)}, got {policy['kind']!r}")
    if "activation" in policy and policy["activation"] not in activations:
        raise ConfigError(
            f"policy.activation must be one of {', '.join(activations)}, "
            f"got {policy['activation']!r}"
        )
    sizes = policy.get("hidden_sizes") or []
    if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in sizes):
        raise ConfigError(f"policy.hidden_sizes must be positive integers, got {sizes!r}")
    discretize = policy.get("discretize", 0)
    if discretize is not None and (discretize < 0 or discretize == 1):
        raise ConfigError(f"policy.discretize must be 0 or at least 2, got {discretize!r}")


def complete_config(config: dict[str, Any]) -> dict[str, Any]:
    """Fill every ``None``/missing knob from the defaults and validate the whole config.

    Returns a new dict in which every knob has a concrete value (the record of
    a run shows all of them). Raises :class:`ConfigError` naming a bad value.
    """
    from algorithms.registry import UnknownAlgorithmError, get_algorithm
    from envs.registry import UnknownEnvError, resolve_env_id
    from harness.parallel.backends import BACKENDS

    config = copy.deepcopy(config)
    try:
        algo_cls = get_algorithm(str(config["algo"]))
    except UnknownAlgorithmError as error:
        raise ConfigError(str(error)) from None
    try:
        gym_id = resolve_env_id(str(config["env"]))
    except UnknownEnvError as error:
        raise ConfigError(str(error)) from None
    for key in ("episodes", "workers"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{key} must be a positive integer, got {value!r}")
    if config.get("backend") not in BACKENDS:
        raise ConfigError(
            f"unknown backend {config.get('backend')!r}; choose one of {', '.join(BACKENDS)}"
        )
    defaults = env_defaults(gym_id, str(config["algo"]), str(config["env"]))

    for key, (expected, _) in RUN_KEYS.items():
        value = config.get(key)
        if value is None:
            value = defaults["run"].get(key)
        config[key] = coerce(key, value, expected)

    budget_given = any(config.get(k) is not None for k in BUDGET_KEYS[:3])
    for key in BUDGET_KEYS:
        if config.get(key) is None and not budget_given:
            config[key] = defaults["budget"].get(key)
        config.setdefault(key, None)
        if config[key] is not None:
            config[key] = coerce(
                key, config[key], int if key in ("timesteps", "generations") else float
            )

    given_policy = {k: v for k, v in (config.get("policy") or {}).items() if v is not None}
    policy = {**defaults["policy"], **given_policy}
    for key, value in policy.items():
        if key not in POLICY_KEYS:
            raise ConfigError(f"unknown policy key {key!r}; known: {', '.join(POLICY_KEYS)}")
        policy[key] = coerce(f"policy.{key}", value, POLICY_KEYS[key][0])
    config["policy"] = policy

    params = {**defaults["params"], **(config.get("params") or {})}
    instance = validate_params(params, algo_cls.Config, f"params of {config['algo']}")
    config["params"] = dataclasses.asdict(instance)

    check_values(config)
    try:
        algo_cls.check_config(config)
    except ValueError as error:
        raise ConfigError(str(error)) from None

    from harness.budget import Budget

    budget = Budget(*(config[k] for k in BUDGET_KEYS))
    try:
        budget.validate()
    except ValueError as error:
        raise ConfigError(str(error)) from None
    config.setdefault("sweep", None)
    config.setdefault("ray_address", None)
    return config
