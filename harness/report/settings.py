"""The settings behind every curve: per-group tables and the command that reproduces each run.

A report's main settings table shows, per (env, group), the knobs a reader needs
to judge a comparison (algorithm, policy and its parameter count, population,
sigma, learning rate, k, W, backend, episode cap, normalisation, parallel envs of
the RL baselines, reward transform, evaluation and budget), keeping only the
columns whose values differ between groups. The appendix lists every config key of
every group. Each run's command is rebuilt from its ``config.json``: the flags of
``harness run`` plus one ``--set`` for every knob whose value differs from what the
current defaults (``experiments/defaults.yaml`` and the algorithm's dataclass) would
give, so running it reproduces the run's config exactly, as rl-baselines3-zoo
records the command and hyperparameters behind each of its results.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.report.data import GROUP, NOT_SETTINGS, budget_phrase, defaults_older_runs_followed
from harness.user_modules import recorded_modules

if TYPE_CHECKING:
    from algorithms.base import AlgorithmType

#: Columns of the main settings table, in order (identity columns come first).
HEADLINE = (
    "algorithm",
    "policy",
    "parameters",
    "population",
    "sigma",
    "learning rate",
    "ES update",
    "covariance",
    "k",
    "W",
    "backend",
    "episode cap",
    "normalisation",
    "n_envs (RL)",
    "reward transform",
    "evaluation",
    "budget",
    "tuned",
)
#: Top-level config keys ``harness run`` takes as flags (everything else goes through --set).
FLAG_KEYS = (
    "imports",
    "algo",
    "env",
    "seed",
    "episodes",
    "workers",
    "backend",
    "ray_address",
    "timesteps",
    "generations",
    "time_limit",
    "cpu_limit",
    "target_return",
)
#: Flags not spelled as their key.
FLAG_SPELLINGS = {"imports": "--import"}
#: Never part of a command: the sweep name and a tuning study's provenance are labels, not
#: knobs of ``harness run``; a user's defaults file may be gone, so its values are --set.
NOT_COMMAND = ("sweep", "tuned", "defaults", "defaults_sha256")


def import_recorded_modules(
    records: Mapping[str, Any], named: Sequence[str] = ()
) -> tuple[list[str], set[str]]:
    """Import the modules the runs imported (``imports``), so their algorithms describe
    themselves and their policies replay; the warnings, and the runs left unplayable.

    A recorded module is imported only on the user's word (``--import``) or when the run
    is the user's own (its checkpoint signed with their key; :mod:`harness.user_modules`):
    a run directory or archive from elsewhere is data, and importing runs code. Runs whose
    modules are not allowed are shown as recorded, not replayed, with one line per set of
    modules naming the ``--import`` that allows them; a module that cannot be found is one
    line too. ``records``: run label -> record (``config``, ``path``).
    """
    from envs.plugins import allow_modules
    from harness.config import ConfigError, import_user_modules
    from harness.user_modules import refusal

    problems: list[str] = []
    refused: dict[tuple[str, ...], list[str]] = {}
    unplayable: set[str] = set()
    allowed: list[tuple[str, ...]] = []
    for label, record in records.items():
        config = record.config
        granted = allowed_modules(Path(record.path), config, named)
        missing = tuple(m for m in recorded_modules(config) if m not in granted)
        if missing:
            refused.setdefault(missing, []).append(str(record.path))
            unplayable.add(label)
            continue
        allowed.append(tuple(config.get("imports") or ()))
        allow_modules(recorded_modules(config))  # the report's guard (build_report)
    for missing, paths in refused.items():
        what = f"run {paths[0]}" if len(paths) == 1 else f"{len(paths)} runs ({paths[0]}, ...)"
        problems.append(refusal(what, missing) + "; shown as recorded, not replayed")
    for modules in dict.fromkeys(allowed):
        try:
            import_user_modules(list(modules))
        except ConfigError as error:
            problems.append(str(error))
    return problems, unplayable


def allowed_modules(run_dir: Path, config: Mapping[str, Any], named: Sequence[str]) -> set[str]:
    """The modules of ``config`` this process may import for the run at ``run_dir``."""
    from harness.user_modules import granted_modules, own_run_modules

    needed = recorded_modules(config)
    allowed = granted_modules(named) & set(needed)
    if set(needed) - allowed:
        allowed |= set(own_run_modules(run_dir))
    return allowed


def algorithm_class(algo: Any) -> AlgorithmType | None:
    """The class of a run's algorithm, or None where this process does not know it."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    try:
        return get_algorithm(str(algo))
    except AlgorithmRegistryError:
        return None


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> str:
    if not _present(value):
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        number = float(value)
        if number.is_integer() and abs(number) >= 1:
            return f"{int(number):,}" if abs(number) >= 10000 else str(int(number))
        return f"{number:g}"
    return str(value)


def policy_text(config: dict[str, Any], sb3_policy: Any = None) -> str:
    """``linear``, ``mlp 64-64 relu, 5 action levels, torch init``, ``lstm 16``; SB3's net_arch.

    PPO/A2C train SB3's own network (``net_arch``), not the harness policy named in
    ``policy.kind``, so for them only the SB3 network is shown.
    """
    if sb3_policy:  # recorded only by runs of stable-baselines3's algorithms
        activation = (config.get("params") or {}).get("activation")
        suffix = f" {activation}" if activation else ""
        return f"SB3 MLP {sb3_policy}{suffix} (actor and critic)"
    policy = config.get("policy") or {}
    kind = str(policy.get("kind", "?"))
    parts = [kind]
    hidden = policy.get("hidden_sizes") or []
    if kind != "linear" and hidden:
        parts[0] += " " + "-".join(str(h) for h in hidden)
        if kind == "mlp" and policy.get("activation"):
            parts[0] += f" {policy['activation']}"
    if policy.get("discretize"):
        parts.append(f"{policy['discretize']} action levels")
    if policy.get("init", "normc") != "normc":
        parts.append(f"{policy['init']} init")
    return ", ".join(parts)


def budget_text(config: dict[str, Any]) -> str:
    """``40k timesteps``, ``2 generations or 600 s``: one run's budget in words."""
    return budget_phrase(config.get) or "none"


def headline(
    config: dict[str, Any], n_params: Any = None, sb3_policy: Any = None, covariance: Any = None
) -> dict[str, str]:
    """The main table's settings of one run, as display strings. ``covariance``: what a
    CMA run recorded it used (full, or diagonal sep-CMA when d is too large), which its
    config alone does not say."""
    params = config.get("params") or {}
    algo = str(config.get("algo"))
    algo_cls = algorithm_class(algo)
    rl = algo_cls is not None and algo_cls.family == "rl"
    described = algo_cls.describe_population(params) if algo_cls is not None else None
    population_text = described or ("—" if rl else _number(params.get("population")))
    update = algo_cls.describe_update(params) if algo_cls is not None else None
    sigma = params.get("sigma", params.get("sigma0"))
    cap = config.get("max_episode_steps")
    cap_text = "env's own limit" if not _present(cap) else f"{_number(cap)} steps"
    if params.get("episode_cap") == "adaptive":
        cap_text += ", adaptive (2x mean length)"
    if "obs_norm" in params:
        norm = "observations (running mean/std)" if params["obs_norm"] else "none"
    elif "normalize" in params:
        norm = "observations and rewards (VecNormalize)" if params["normalize"] else "none"
    else:
        norm = "none"
    if rl:
        n_envs = params.get("n_envs", config.get("workers"))
        n_envs_text = _number(n_envs) + ("" if "n_envs" in params else " (= W)")
    else:
        n_envs_text = "—"
    transform = config.get("reward_transform", params.get("reward_transform"))
    return {
        "algorithm": algo,
        "policy": policy_text(config, sb3_policy),
        "parameters": _number(n_params),
        "population": population_text,
        "sigma": _number(sigma),
        "learning rate": _number(params.get("learning_rate")),
        "ES update": update or "—",
        "covariance": _covariance_text(covariance, n_params, params),
        "k": _number(config.get("episodes")),
        "W": _number(config.get("workers")),
        "backend": str(config.get("backend")),
        "episode cap": cap_text,
        "normalisation": norm,
        "n_envs (RL)": n_envs_text,
        "reward transform": str(transform) if _present(transform) else "none",
        "evaluation": f"{_number(config.get('eval_episodes'))} episodes every "
        + (
            f"{_number(config.get('eval_every_cpu_seconds'))} CPU-s"
            if _present(config.get("eval_every_cpu_seconds"))
            else f"{_number(config.get('eval_every_timesteps'))} timesteps"
        ),
        "budget": budget_text(config),
        # provenance of settings taken from a tuning study (a sweep file's `tuned:`)
        "tuned": str(config["tuned"]) if _present(config.get("tuned")) else "—",
    }


def _covariance_text(covariance: Any, n_params: Any, params: dict[str, Any]) -> str:
    """The recorded covariance; a diagonal one recorded without its reason (a run from
    before the summary held it) gets the size bound it exceeded, where that explains it."""
    if not _present(covariance):
        return "—"
    text = str(covariance)
    bound = params.get("diagonal_threshold")
    known = text == "diagonal (sep-CMA)" and _present(n_params) and _present(bound)
    if known and float(n_params) > float(bound or 0):
        text += f": d={int(float(n_params))} exceeds diagonal_threshold={_number(bound)}"
    return text


def _joined(values: Iterable[str]) -> str:
    unique = list(dict.fromkeys(values))
    return " / ".join(unique)


def group_settings(runs: pd.DataFrame, records: dict[str, Any]) -> pd.DataFrame:
    """One row per (env, group): runs and the :func:`headline` settings (values joined with
    `` / `` where a group's runs disagree, which only bookkeeping keys may)."""
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        none = pd.Series([None] * len(frame), index=frame.index)
        texts = [
            headline(records[r].config, n, s, c)
            for r, n, s, c in zip(
                frame["run"],
                frame.get("n_params", none),
                frame.get("sb3_policy", none),
                frame.get("covariance", none),
                strict=True,
            )
        ]
        row: dict[str, Any] = {"env": env, "group": group, "runs": len(frame)}
        for key in HEADLINE:
            row[key] = _joined(t[key] for t in texts)
        rows.append(row)
    return pd.DataFrame(rows)


def differing(table: pd.DataFrame) -> pd.DataFrame:
    """The settings table with only the columns that differ between its rows (all of them
    when there is a single row)."""
    if len(table) <= 1:
        return table
    keep = ["env", "group", "runs"] + [
        c for c in HEADLINE if table[c].nunique() > 1 or _always_shown(c, table[c])
    ]
    return table[keep]


def _always_shown(column: str, values: pd.Series) -> bool:
    """A diagonal CMA is named even when every group ran it: it is not the CMA-ES a reader
    assumes (sep-CMA learns no correlations between parameters)."""
    return column == "covariance" and values.astype(str).str.startswith("diagonal").any()


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            for sub, sub_value in value.items():
                flat[f"{key}.{sub}"] = sub_value
        else:
            flat[key] = value
    return flat


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    if value is None:
        return "null"
    return _number(value) if isinstance(value, (int, float)) else str(value)


def appendix(runs: pd.DataFrame, records: dict[str, Any]) -> pd.DataFrame:
    """Every config key (rows) of every group (columns), bookkeeping keys included."""
    groups = list(runs.groupby(["env", GROUP], sort=True))
    several_envs = runs["env"].nunique() > 1
    columns: dict[str, dict[str, str]] = {}
    keys: dict[str, None] = {}
    for (env, group), frame in groups:
        flats = [_flat(records[r].config) for r in frame["run"]]
        for flat in flats:
            for key in flat:
                if key not in ("seed",):
                    keys.setdefault(key, None)
        name = f"{group} ({env})" if several_envs else str(group)
        columns[name] = {
            key: _joined(_cell(f[key]) if key in f else "—" for f in flats) for key in keys
        }
    ordered = sorted(keys, key=lambda k: (k.count("."), k.split(".")[0] if "." in k else "", k))
    table = pd.DataFrame({"setting": ordered})
    for name, values in columns.items():
        table[name] = [values.get(key, "—") for key in ordered]
    bookkeeping = [k in NOT_SETTINGS for k in ordered]
    table["setting"] = [
        f"{k} (bookkeeping)" if b else k for k, b in zip(ordered, bookkeeping, strict=True)
    ]
    return table


# -- reproduce commands -----------------------------------------------------------------


def _yaml_value(value: Any) -> str:
    """A --set value that ``harness.config.parse_value`` (YAML) reads back as ``value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, sep, exponent = text.partition("e")
        if sep and "." not in mantissa:  # YAML 1.1 reads "1e-05" as a string
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return str(value)


@lru_cache(maxsize=64)
def _defaults(frozen: str) -> dict[str, Any] | None:
    """The completed config ``harness run`` builds from flags alone (no --set)."""
    from harness.config import ConfigError, complete_config

    base = json.loads(frozen)
    try:
        return complete_config({**base, "policy": {}, "params": {}})
    except (ConfigError, KeyError, TypeError, ValueError):
        return None


@lru_cache(maxsize=16)
def _family(algo: str) -> str | None:
    try:
        from algorithms.registry import get_algorithm

        return str(get_algorithm(algo).family)
    except (ImportError, KeyError, ValueError):
        return None


@lru_cache(maxsize=1)
def _knob_families() -> dict[str, frozenset[str]]:
    """Config key -> algorithm families that use it, from the knob schema when there is one."""
    try:
        from harness import schema
    except ImportError:
        return {}
    return {knob.name: frozenset(knob.families) for knob in schema.knobs()}


def _applies(key: str, family: str | None) -> bool:
    """Whether ``harness run`` accepts ``key`` for an algorithm of ``family`` (a knob the
    family does not use is refused when given)."""
    families = _knob_families().get(key)
    return family is None or families is None or family in families


def _clashing_names() -> set[str]:
    """Knob names a bare ``--set NAME=`` would resolve to before the algorithm's params."""
    from harness.config import POLICY_KEYS, RUN_KEYS
    from harness.schema import BUDGET_KEYS

    return {*POLICY_KEYS, *RUN_KEYS, *BUDGET_KEYS}


def reproduce_command(config: dict[str, Any]) -> str:
    """``harness run ...`` that rebuilds ``config`` exactly (under the current defaults)."""
    family = _family(str(config.get("algo")))
    flags = ["harness", "run"]
    for key in FLAG_KEYS:
        value = config.get(key)
        if not _present(value) or not _applies(key, family):
            continue
        flag = FLAG_SPELLINGS.get(key, "--" + key.replace("_", "-"))
        for one in value if isinstance(value, list) else [value]:  # a list: one flag each
            flags += [flag, _yaml_value(one) if isinstance(one, float) else str(one)]
    base = _defaults(json.dumps({k: config.get(k) for k in FLAG_KEYS}, sort_keys=True))
    base_flat = _flat(base) if base is not None else {}
    clash = _clashing_names()
    for key, value in _flat(config).items():
        if key in FLAG_KEYS or key in NOT_COMMAND or not _applies(key, family):
            continue
        if base is not None and key in base_flat and base_flat[key] == value:
            continue
        section, _, name = key.rpartition(".")
        if section == "params" and name not in clash:
            key = name  # bare names are looked up among the algorithm's hyperparameters first
        elif section == "" and not _present(value) and key not in base_flat:
            continue
        flags += ["--set", f"{key}={_yaml_value(value)}"]
    return " ".join(shlex.quote(part) for part in flags)


def unrecorded_keys(config: dict[str, Any]) -> list[str]:
    """Knobs today's code has that ``config`` lacks (a run recorded before they existed):
    its command gets today's defaults for them, which may not be what the run used."""
    base = _defaults(json.dumps({k: config.get(k) for k in FLAG_KEYS}, sort_keys=True))
    if base is None:
        return []
    have = _flat(config)
    followed = defaults_older_runs_followed()  # no warning: the run did what they default to
    return [
        key
        for key in _flat(base)
        if key not in have and key not in NOT_COMMAND and key not in followed
    ]


def commands(runs: pd.DataFrame, records: dict[str, Any]) -> list[tuple[str, str]]:
    """(heading, command) per run, in env, group, seed order; the heading names knobs the
    run did not record."""
    out = []
    for _, row in runs.sort_values(["env", GROUP, "seed", "run"]).iterrows():
        config = records[row["run"]].config
        heading = f"{row['env']} · {row[GROUP]} · seed {int(row['seed'])} · run {row['run']}"
        missing = unrecorded_keys(config)
        if missing:
            heading += (
                f" (recorded before {', '.join(missing)} existed: today's defaults apply, "
                "which may differ from what it ran with)"
            )
        out.append((heading, reproduce_command(config)))
    return out
