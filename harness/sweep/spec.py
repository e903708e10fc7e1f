"""The sweep file: its schema, its cells and their completed configs.

The file format is documented in :mod:`harness.sweep`. :func:`load_sweep`
validates the whole file, building every cell's config with
:func:`harness.config.build_run_config` as ``harness run`` does, before
anything runs.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import schema
from harness.config import BUDGET_KEYS, ConfigError, import_user_modules, read_yaml
from harness.sweep.identity import cell_key

SWEEP_KEYS = (
    "name",
    "description",
    "imports",
    "defaults",
    "grid",
    "budget",
    "backend",
    "jobs",
    "set",
    "overrides",
    "tuned",
    "pair_with",
)


#: Grid axes every sweep has, from the knob schema; one left out takes the knob's built-in
#: default. Any other grid key is a settable knob or an algorithm hyperparameter.
GRID_KEYS = schema.GRID_KEYS


GRID_DEFAULTS: dict[str, list[Any]] = {
    key: [schema.BY_NAME[key].default] for key in GRID_KEYS if key not in ("algo", "env")
}


class SweepError(ValueError):
    """A bad sweep file; the message is one line naming the file and the value."""


@dataclass
class Cell:
    """One combination of the grid and its completed, validated run config."""

    index: int
    config: dict[str, Any]
    #: the values of the grid's further keys (hyperparameters, knobs) this cell takes
    varied: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return cell_key(self.config)

    @property
    def label(self) -> str:
        from algorithms.registry import family_of

        c = self.config
        family = family_of(c["algo"])
        uses_k = family is None or schema.BY_NAME["episodes"].applies_to(family)
        episodes = f" episodes={c['episodes']}" if uses_k else ""
        varied = "".join(
            f" {key}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in self.varied.items()
        )
        return f"{c['algo']} {c['env']} seed={c['seed']}{episodes} workers={c['workers']}{varied}"


@dataclass
class Sweep:
    """A parsed sweep file."""

    name: str
    path: Path
    cells: list[Cell]
    description: str = ""
    jobs: int = 1
    #: equal-compute pairs (harness.pairing): (lead, follower) cell indices, run side by side
    pairs: list[tuple[int, int]] = field(default_factory=list)

    def partner_of(self, index: int) -> int:
        """The other cell of the pair that holds cell ``index``."""
        return next(b if a == index else a for a, b in self.pairs if index in (a, b))

    def whole_pairs(self, completed: Iterable[int]) -> set[int]:
        """The ``completed`` cell indices less each half of a pair whose other half is not
        completed: a pair's two runs share one machine and one time, so a half-done pair
        (its follower's settings changed, or it failed) runs again as a whole, unless the
        missing half has a run of its own to resume (:func:`harness.sweep.run_sweep`)."""
        done = set(completed)
        for lead, follower in self.pairs:
            if (lead in done) != (follower in done):
                done -= {lead, follower}
        return done


def _as_list(value: Any, key: str, path: Path, lists: bool = False) -> list[Any]:
    """A grid entry's values (a single value is a list of one); ``lists``: a value may
    itself be a list (``policy.hidden_sizes: [[32], [64, 64]]``)."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SweepError(f"{path}: grid.{key} is empty")
    for item in values:
        if isinstance(item, dict) or item is None or (isinstance(item, list) and not lists):
            raise SweepError(f"{path}: grid.{key} entries must be scalars, got {item!r}")
    return values


def _string_list(value: Any, where: str, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SweepError(f"{path}: {where} must be a list of key=value strings")
    return list(value)


#: Where a key misplaced at the top level of a sweep file belongs.
NESTED_HOMES = {**dict.fromkeys(GRID_KEYS, "grid"), **dict.fromkeys(BUDGET_KEYS, "budget")}


def _check_keys(data: dict[str, Any], known: tuple[str, ...], where: str, path: Path) -> None:
    for key in data:
        if key not in known:
            home = NESTED_HOMES.get(key) if not where else None
            hint = f"; did you mean {home}.{key}?" if home else ""
            raise SweepError(f"{path}: unknown key {where}{key!r}{hint}; known: {', '.join(known)}")


def build_cell_config(
    *,
    name: str,
    algo: str,
    env: str,
    seed: int,
    episodes: int,
    workers: Any,
    backend: str | None,
    budget: dict[str, Any],
    common: list[str],
    per_algo: list[str],
    imports: list[str] | None = None,
    varied: dict[str, Any] | None = None,
    tuned: str | None = None,
    defaults: str | None = None,
) -> dict[str, Any]:
    """A cell's completed run config, built by ``build_run_config`` as ``harness run`` does.

    File-wide settings (``backend``, the ``set`` list, the ``episodes`` axis)
    reach only the cells whose algorithm uses them; ``per_algo`` overrides are
    the user's word for this algorithm, so a knob it does not use is an error.
    ``varied``: the values of the grid's further keys, checked against this algorithm by
    :func:`grid_key_applies`. ``tuned``: the provenance of tuned settings in ``per_algo``
    (recorded as the run's ``tuned`` knob). ``defaults``: the file's ``defaults:``, a
    defaults file of the user's own (its path, and its digest, recorded in the config).
    """
    from algorithms.registry import family_of
    from harness.config import build_run_config, param_types, parse_assignment

    family = family_of(algo) or "es"
    given: dict[str, Any] = {"algo": algo, "env": env, "seed": seed, "workers": workers}
    sources = dict.fromkeys(given, "sweep grid")
    if imports:
        given["imports"] = list(imports)
        sources["imports"] = "sweep file imports"
    if defaults is not None:
        given["defaults"] = defaults
        sources["defaults"] = "sweep file defaults"
    if schema.BY_NAME["episodes"].applies_to(family):
        given["episodes"] = episodes
        sources["episodes"] = "sweep grid"
    if backend is not None and schema.BY_NAME["backend"].applies_to(family):
        given["backend"] = backend
        sources["backend"] = "sweep file backend"
    for key in BUDGET_KEYS:
        if budget.get(key) is not None:
            given[key] = budget[key]
            sources[key] = "sweep file budget"
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    try:
        params = param_types(get_algorithm(algo).Config)
    except UnknownAlgorithmError as error:
        raise ConfigError(str(error)) from None
    shared = []
    for assignment in common:
        path, _ = parse_assignment(assignment, params)
        knob = schema.BY_NAME.get(path)
        if knob is None or knob.applies_to(family):
            shared.append(assignment)
    set_by_file = {parse_assignment(a, params)[0] for a in [*shared, *per_algo]}
    set_by_file |= {key for key in BUDGET_KEYS if budget.get(key) is not None}
    for key, value in (varied or {}).items():
        config_path, typed = parse_assignment(f"{key}={json.dumps(value)}", params)
        if config_path in set_by_file:
            raise ConfigError(f"grid.{key} is also set in the file's budget, set or overrides")
        # not ``name``: that is the sweep's, which tags every cell (and so its identity)
        section, _, leaf = config_path.rpartition(".")
        holder = given.setdefault(section, {}) if section else given
        holder[leaf] = typed
        sources[section or leaf] = "sweep grid"
    resolved = build_run_config(
        given, source=sources, overrides=[*shared, *per_algo], override_source="sweep set"
    )
    config = resolved.config
    config["sweep"] = name
    if tuned is not None:
        config["tuned"] = tuned
    return config


def parse_grid_override(text: str) -> tuple[str, list[Any]]:
    """``--grid seed=0,1,2`` -> ``("seed", [0, 1, 2])`` (values parsed as YAML scalars)."""
    from harness.config import parse_value

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(
            f"--grid expects KEY=V1,V2,... (KEY an axis such as {', '.join(GRID_KEYS)}, a "
            f"--set key or a hyperparameter), got {text!r}"
        )
    try:
        values = [parse_value(part.strip()) for part in raw.split(",") if part.strip()]
    except ConfigError as error:
        raise SweepError(f"--grid {text!r}: {error}") from None
    if not values:
        raise SweepError(f"--grid {key} needs at least one value")
    return key, values


#: Cells a sweep may have without ``--force``: past it, building and validating every
#: cell's config alone takes minutes, and a grid that large is more likely a typo.
MAX_CELLS = 5000


def grid_key_applies(algo: str, key: str) -> bool:
    """Whether a further grid key (not an axis) applies to ``algo``: True for one of its
    hyperparameters or a ``--set`` knob its family uses, False for a knob its family does
    not use (one cell, not one per value, as the ``episodes`` axis for PPO). A key that
    is neither raises :class:`ConfigError` naming it and the algorithm."""
    from algorithms.registry import get_algorithm
    from harness.config import param_types, suggest_keys

    algo_cls = get_algorithm(algo)
    params = param_types(algo_cls.Config)
    section, _, name = key.rpartition(".")
    if section in ("", "params") and name in params:
        return True
    knob = None if section == "params" else schema.find(key)
    if knob is not None and knob.settable:
        return knob.applies_to(str(algo_cls.family))
    if knob is not None:
        how = f"give it as the file's {knob.name}" if knob.name == "backend" else "not a grid key"
        raise ConfigError(f"grid.{key}: {knob.name} is {how}")
    close = [*difflib.get_close_matches(key, GRID_KEYS, n=1), *suggest_keys(name, params)]
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise ConfigError(f"grid.{key}: {algo} has no hyperparameter or knob {name!r}{hint}")


def _integers(key: str, values: list[Any], path: Path) -> list[Any]:
    """The values of an integer axis; ``1e2`` is 100, a fraction is refused."""
    checked = []
    for value in values:
        if key == "workers" and value == "auto":
            checked.append(value)
            continue
        number = schema.integral(value)
        if number is None:
            raise SweepError(f"{path}: grid.{key} entries must be integers, got {value!r}")
        checked.append(number)
    return checked


def _tuned_settings(
    value: Any, algos: list[str], axes: dict[str, list[Any]], path: Path
) -> dict[str, Any]:
    """``tuned: {study: GROUP, storage: URL}``: each algorithm's best trial of the study
    ``GROUP-ALGO`` (:func:`harness.tune.best.load_best`), by algorithm name."""
    if value is None:
        return {}
    form = "tuned: {study: GROUP, storage: URL} (harness tune --study GROUP --storage URL)"
    if not isinstance(value, dict) or set(value) != {"study", "storage"}:
        raise SweepError(f"{path}: expected {form}, got {value!r}")
    group, url = value["study"], value["storage"]
    if not isinstance(group, str) or not isinstance(url, str):
        raise SweepError(f"{path}: expected {form}, got {value!r}")
    from harness.tune.best import TunedError, load_best, study_name

    found = {}
    for algo in algos:
        try:
            best = load_best(study_name(group, algo), url, algo)
        except TunedError as error:
            raise SweepError(f"{path}: tuned: {error}") from None
        episodes, _ = best.assignments()
        if episodes is not None and len(axes["episodes"]) > 1:
            raise SweepError(
                f"{path}: tuned: study {best.study} sets episodes per fitness; "
                "grid.episodes cannot vary it too"
            )
        found[algo] = best
    return found


def _check_tuned_env(best: Any, env: str, path: Path) -> None:
    """Refuse settings tuned on another env than the cell's (whose modules are imported by
    now). The study's env is data: a ``MODULE:ID`` naming a module not imported on the user's
    word is refused, never imported."""
    from envs.registry import UnknownEnvError, resolve_env_id
    from harness.user_modules import granted_modules

    tuned_env = str(best.record.get("env"))
    if tuned_env == env:
        return
    other = f"{path}: tuned: study {best.study} was tuned on {tuned_env!r}, not {env}"
    module = tuned_env.rpartition(":")[0]
    if module and module not in granted_modules():
        raise SweepError(f"{other} (its module {module!r} was not imported)")
    try:
        if resolve_env_id(tuned_env) == resolve_env_id(env):
            return
    except UnknownEnvError:
        pass
    raise SweepError(other)


def _defaults_file(value: Any, path: Path) -> str | None:
    """``defaults: FILE``: a defaults file of the user's own, relative to the sweep file's
    folder; read and checked here, so a bad one is one line before any cell is built."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SweepError(f"{path}: defaults must name a YAML file, got {value!r}")
    from harness.config import load_user_defaults

    file = Path(value).expanduser()
    try:
        return load_user_defaults(path.parent / file if not file.is_absolute() else file).path
    except ConfigError as error:
        raise SweepError(f"{path}: defaults: {error}") from None


def load_sweep(
    path: str | Path,
    extra_set: list[str] | None = None,
    grid_override: dict[str, list[Any]] | None = None,
    extra_imports: list[str] | None = None,
    max_cells: int | None = MAX_CELLS,
) -> Sweep:
    """Parse and validate a sweep file; raise :class:`SweepError` (one line) on bad input.

    ``extra_set`` (``--set``) is appended to the file's ``set`` list and
    ``grid_override`` (``--grid``) replaces or adds grid keys: a smaller budget or fewer
    seeds without editing the file. Changed configs are new cells (new runs).
    ``extra_imports`` (``--import``) are added to the file's ``imports``.
    """
    path = Path(path)
    try:
        data = read_yaml(path)
    except ConfigError as error:
        raise SweepError(str(error)) from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep file must be a mapping with name and grid")
    _check_keys(data, SWEEP_KEYS, "", path)
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise SweepError(f"{path}: name must be letters, digits, '_', '.' or '-', got {name!r}")
    try:
        # before any name is resolved: the modules register envs and algorithms
        listed = data.get("imports")
        if extra_imports and (listed is None or isinstance(listed, list)):
            listed = list(dict.fromkeys([*(listed or []), *extra_imports]))
        imports = import_user_modules(listed)
    except ConfigError as error:
        raise SweepError(f"{path}: {error}") from None
    defaults = _defaults_file(data.get("defaults"), path)
    grid = data.get("grid")
    if not isinstance(grid, dict):
        raise SweepError(
            f"{path}: grid must be a mapping of {', '.join(GRID_KEYS)} and further keys"
        )
    grid = {**grid, **(grid_override or {})}
    for required in ("algo", "env"):
        if required not in grid:
            raise SweepError(f"{path}: grid.{required} is required")
    axes = {key: _as_list(grid.get(key, GRID_DEFAULTS.get(key)), key, path) for key in GRID_KEYS}
    for key in ("seed", "episodes", "workers"):
        axes[key] = _integers(key, axes[key], path)
    further = {
        str(key): _as_list(values, str(key), path, lists=True)
        for key, values in grid.items()
        if key not in GRID_KEYS
    }
    budget = data.get("budget") or {}
    if not isinstance(budget, dict):
        raise SweepError(f"{path}: budget must be a mapping of {', '.join(BUDGET_KEYS)}")
    _check_keys(budget, BUDGET_KEYS, "budget.", path)
    backend = data.get("backend")
    jobs = schema.integral(data.get("jobs", 1))
    if jobs is None or jobs < 1:
        raise SweepError(f"{path}: jobs must be a positive integer, got {data.get('jobs')!r}")
    common = _string_list(data.get("set"), "set", path) + list(extra_set or [])
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise SweepError(f"{path}: overrides must map algorithm names to key=value lists")
    per_algo = {str(a): _string_list(v, f"overrides.{a}", path) for a, v in overrides.items()}
    from algorithms.registry import AlgorithmRegistryError, family_of, get_algorithm

    for algo in per_algo:
        # Overrides of algorithms left out of the grid (--grid algo=...) are unused, not wrong.
        try:
            get_algorithm(algo)
        except AlgorithmRegistryError as error:
            raise SweepError(f"{path}: overrides.{algo}: {error}") from None
    tuned = _tuned_settings(data.get("tuned"), [str(a) for a in axes["algo"]], axes, path)
    for algo, best in tuned.items():
        _, sets = best.assignments()
        tuned_keys = {a.partition("=")[0] for a in sets}
        given = {a.partition("=")[0].strip() for a in per_algo.get(algo, [])} | set(further)
        clash = sorted(tuned_keys & given)
        if clash:
            raise SweepError(
                f"{path}: {clash[0]} of {algo} is set both by tuned: (study {best.study}) and "
                "by the file's overrides or grid"
            )
    description = data.get("description") or ""
    combinations = math.prod(len(values) for values in [*axes.values(), *further.values()])
    if max_cells is not None and combinations > max_cells:
        raise SweepError(
            f"{path}: the grid has {combinations} cells, more than {max_cells}; "
            "pass --force to run them all"
        )
    for algo in axes["algo"]:
        for key in further:
            try:
                grid_key_applies(str(algo), key)
            except (AlgorithmRegistryError, ConfigError) as error:
                raise SweepError(f"{path}: {error}") from None

    pair_with = data.get("pair_with")
    if pair_with is not None and pair_with not in axes["algo"]:
        raise SweepError(f"{path}: pair_with must be an algorithm of grid.algo, got {pair_with!r}")
    pairs: list[tuple[int, int]] = []
    leads: dict[str, int] = {}
    cells: list[Cell] = []
    # Seeds outermost: a partly finished sweep already holds whole comparisons.
    for seed, env, episodes, workers, *values, algo in itertools.product(
        axes["seed"],
        axes["env"],
        axes["episodes"],
        axes["workers"],
        *further.values(),
        axes["algo"],
    ):
        family = family_of(algo)
        uses_k = family is None or schema.BY_NAME["episodes"].applies_to(family)
        if not uses_k and episodes != axes["episodes"][0]:
            continue  # episodes per fitness means nothing to PPO/A2C: one cell, not one per K
        try:
            applies = {key: family is None or grid_key_applies(str(algo), key) for key in further}
            # a key the algorithm's family does not use: one cell, at the first value
            if any(
                not applies[key] and value != further[key][0]
                for key, value in zip(further, values, strict=True)
            ):
                continue
            varied = {
                key: value for key, value in zip(further, values, strict=True) if applies[key]
            }
            if pair_with is not None and algo == pair_with:
                continue  # the lead runs beside each follower instead (pairs below)
            best = tuned.get(str(algo))
            tuned_episodes, tuned_sets = best.assignments() if best else (None, [])
            followed = {"target_return": budget.get("target_return"), "paired_with": pair_with}
            config = build_cell_config(
                name=name,
                algo=str(algo),
                env=str(env),
                seed=seed,
                episodes=tuned_episodes if tuned_episodes is not None else episodes,
                workers=workers,
                backend=None if backend is None else str(backend),
                budget=budget if pair_with is None else followed,
                common=common,
                per_algo=[*per_algo.get(str(algo), []), *tuned_sets],
                imports=imports,
                varied=varied,
                tuned=best.provenance() if best else None,
                defaults=defaults,
            )
            if best is not None:
                _check_tuned_env(best, str(env), path)
            if pair_with is not None:
                lead = _lead_config(
                    name, str(pair_with), str(algo), str(env), seed, episodes, workers, backend,
                    budget, common, per_algo, imports, varied, tuned, defaults,
                )  # fmt: skip
        except (AlgorithmRegistryError, ConfigError) as error:
            raise SweepError(f"{path}: cell algo={algo} env={env}: {error}") from None
        if pair_with is not None:
            lead_key = cell_key(lead)
            if lead_key not in leads:  # followers the lead cannot tell apart share its run
                leads[lead_key] = len(cells)
                cells.append(Cell(len(cells), lead, {"paired_with": str(algo)}))
            pairs.append((leads[lead_key], len(cells)))
        cells.append(Cell(len(cells), config, varied))
    keys = [cell.key for cell in cells]
    if len(set(keys)) != len(keys):
        raise SweepError(f"{path}: the grid has duplicate cells (a value listed twice?)")
    for best in tuned.values():
        if best.skipped:
            print(best.skipped, file=sys.stderr)
    return Sweep(name, path, cells, str(description).strip(), jobs, pairs)


def _lead_config(
    name: str,
    lead: str,
    follower: str,
    env: str,
    seed: int,
    episodes: int,
    workers: Any,
    backend: Any,
    budget: dict[str, Any],
    common: list[str],
    per_algo: dict[str, list[str]],
    imports: list[str],
    varied: dict[str, Any],
    tuned: dict[str, Any],
    defaults: str | None,
) -> dict[str, Any]:
    """The config of a pair's lead: ``lead`` at this grid point (the grid's further keys it
    uses), to the file's budget, ``paired_with`` its follower's algorithm."""
    best = tuned.get(lead)
    tuned_episodes, tuned_sets = best.assignments() if best else (None, [])
    return build_cell_config(
        name=name,
        algo=lead,
        env=env,
        seed=seed,
        episodes=tuned_episodes if tuned_episodes is not None else episodes,
        workers=workers,
        backend=None if backend is None else str(backend),
        budget=budget,
        common=[*common, f"paired_with={follower}"],
        per_algo=[*per_algo.get(lead, []), *tuned_sets],
        imports=imports,
        varied={k: v for k, v in varied.items() if grid_key_applies(lead, k)},
        tuned=best.provenance() if best else None,
        defaults=defaults,
    )
