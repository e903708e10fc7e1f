"""Run configuration: the completed config of a run, and where each value came from.

Every command that starts or rebuilds a run (``harness run``, sweeps, ``resume``,
``check-repro``, benchmarks, Sacred's own command line) builds its config with
:func:`build_run_config`. The knobs are declared once in :mod:`harness.schema`;
an algorithm's hyperparameters are the fields of its config dataclass.

Precedence, lowest first: the built-in default (the schema's, or the
algorithm's dataclass for hyperparameters), the ``default`` entry of
``experiments/defaults.yaml``, that file's entry for the env's gymnasium id,
its entry for the short name when that differs (``PendulumPO`` refines
``Pendulum-v1``), the entries for the env of a defaults file an installed package
ships (entry-point group ``es_harness.defaults``), those of the user's own defaults
file (``--defaults FILE``, a sweep's ``defaults:``), then what the user gave (flags,
``--set``, a sweep file).
``harness run ... --print-config`` shows every value with its source.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from harness import schema
from harness.budget import LIMITS, Budget
from harness.schema import BUDGET_KEYS, BY_NAME, KNOBS, Knob

EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "experiments"
DEFAULTS_FILE = EXPERIMENTS_DIR / "defaults.yaml"

if TYPE_CHECKING:
    from algorithms.base import AlgorithmType

#: Run-level knobs (``--set``; per env in the ``run`` sections of defaults.yaml): type, doc.
RUN_KEYS: dict[str, tuple[type, str]] = {k.name: (k.type, k.doc) for k in schema.knobs("run")}
#: Policy knobs (``--set policy.KEY=...`` or ``--set KEY=...``): type, doc.
POLICY_KEYS: dict[str, tuple[type, str]] = {k.key: (k.type, k.doc) for k in schema.knobs("policy")}
SECTIONS = {"run", "policy", "budget"}
#: key of an algorithm's section naming the rl-baselines3-zoo entry its values carry
ZOO_KEY = "zoo"
BUILT_IN = "built-in default"

#: How user-given values of knobs that do not apply to the algorithm are treated:
#: ``given`` refuses every one (flags, ``--set``), ``changed`` refuses those that differ
#: from what the run would use anyway (Sacred's ``with``, whose config always holds some
#: value), ``never`` keeps them (stored configs, internal callers).
Refuse = Literal["given", "changed", "never"]


class ConfigError(ValueError):
    """A bad configuration value; the message is one line naming it."""


#: Largest integer a knob may hold (int64: frames, arrays and seeds hold no more).
INT64_MAX = 2**63 - 1
#: Deepest nesting of lists and mappings a YAML file or value may have: the composer
#: recurses once per level, so 5,000 ``[`` would end in a RecursionError traceback.
MAX_YAML_DEPTH = 100


class NumberLoader(yaml.SafeLoader):
    """The safe loader, reading ``1e5`` and ``3e-4`` as numbers as people write them, and
    refusing a key given twice in one mapping (YAML would keep the last silently), a
    complex key (``? [a]: 1``) and nesting deeper than :data:`MAX_YAML_DEPTH`.

    YAML 1.1 (PyYAML) takes a float only with a dot and a signed exponent, so ``3e-4``
    would arrive as a string; YAML 1.2 and JSON read it as a number.
    """

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested more than {MAX_YAML_DEPTH} levels deep",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                # `? [a]: 1`: a list or mapping as a key; no setting is named so
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "a key must be a plain value, not a list or mapping",
                    key_node.start_mark,
                )
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, typing.Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key must be a plain value, got {key!r}", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _not_plain_data(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"{node.tag.rsplit(':', 1)[-1]!r} values are not plain data", node.start_mark
    )


# Only what JSON holds: a date stays the text it was written as, and sets, binary and
# ordered pairs are refused (a config, a sweep file or a record has no use for them, and
# they reached code that expects JSON types as tracebacks).
def _as_text(loader: NumberLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


NumberLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
for _tag in ("set", "binary", "omap", "pairs"):
    NumberLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _not_plain_data)

NumberLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(stream: Any) -> Any:
    """YAML text or stream through :class:`NumberLoader`."""
    return yaml.load(stream, Loader=NumberLoader)  # a SafeLoader subclass: safe


def read_yaml(path: Path) -> Any:
    """Read YAML with the safe loader; a malformed file is a :class:`ConfigError`."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    return parse_yaml(raw, str(path))


@lru_cache(maxsize=4)
def _load_defaults(path: Path) -> dict[str, Any]:
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must map env ids to settings")
    return data


def defaults_layers(
    gym_id: str,
    algo: str,
    env_name: str | None = None,
    path: Path = DEFAULTS_FILE,
    *,
    data: Mapping[str, Any] | None = None,
    source: str | None = None,
) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """The entries of ``defaults.yaml`` that apply, lowest precedence first.

    Each is ``(label, {"run": .., "policy": .., "budget": .., "params": ..})``;
    the label (``defaults.yaml CartPole-v1``) is what ``--print-config`` shows.
    An algorithm's section may hold ``run``, ``policy`` and ``budget`` mappings of its
    own: settings of the env that apply only when that algorithm runs (optimes trains
    AntBulletEnv on a shaped reward with a linear policy, PPO at the zoo's settings on
    the env's own reward), and ``params``: hyperparameters that are the harness's own beside
    a ``zoo`` entry's (SAC's ``library`` where the zoo's settings use gSDE). They form a
    layer just above their entry.

    A section holding ``zoo: ENTRY`` carries that entry of the algorithm's rl-baselines3-zoo
    hyperparameter file (:attr:`~algorithms.base.Algorithm.zoo_hyperparams`): its
    hyperparameters form a layer of their own, labelled with the zoo entry
    (``defaults.yaml Hopper-v5 entry: rl-baselines3-zoo hyperparams/ppo.yml Hopper-v4``).

    ``data`` and ``source``: the content of a user's defaults file (:class:`UserDefaults`)
    and how labels name it (``defaults file my.yaml (MyEnv-v0)``), instead of ``path``.
    """
    data = _load_defaults(path) if data is None else data

    def named(entry_name: str, extra: str = "") -> str:
        if source is None:
            return f"{path.name} {entry_name} entry{extra}"
        return f"{source} ({entry_name}{extra})"

    entries = ["default", gym_id] + ([env_name] if env_name and env_name != gym_id else [])
    layers = []
    section_name = defaults_section(algo)
    for entry_name in entries:
        sections: dict[str, dict[str, Any]] = {"run": {}, "policy": {}, "budget": {}, "params": {}}
        own: dict[str, dict[str, Any]] = {"run": {}, "policy": {}, "budget": {}, "params": {}}
        zoo_entry = None
        for section, values in (data.get(entry_name) or {}).items():
            if section in SECTIONS:
                sections[section].update(values or {})
            elif section == section_name:
                for key, value in (values or {}).items():
                    if (
                        key in SECTIONS or key == "params"
                    ):  # params: the harness's own beside a zoo entry
                        own[key].update(value or {})
                    elif key == ZOO_KEY:
                        zoo_entry = value
                    else:
                        sections["params"][key] = value
        label = named(entry_name)
        if zoo_entry is None:
            layers.append((label, copy.deepcopy(sections)))
        else:
            # the zoo's hyperparameters, named as such, above the entry's own knobs
            zoo_params = {"run": {}, "policy": {}, "budget": {}, "params": sections["params"]}
            sections["params"] = {}
            layers.append((label, copy.deepcopy(sections)))
            where = f"{source or path.name} {entry_name}"
            zoo_label = f"{label}: {zoo_source(algo, zoo_entry, where)}"
            layers.append((zoo_label, copy.deepcopy(zoo_params)))
        if any(own.values()):
            label = named(entry_name, f", {section_name} section")
            layers.append((label, copy.deepcopy(own)))
    return layers


def zoo_source(algo: str, entry: Any, where: str) -> str:
    """How ``--print-config`` names the rl-baselines3-zoo entry ``entry`` of ``algo``'s
    hyperparameter file (``rl-baselines3-zoo hyperparams/ppo.yml Hopper-v4``); a
    :class:`ConfigError` naming ``where`` when the algorithm has no zoo file."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    try:
        zoo_file = get_algorithm(algo).zoo_hyperparams
    except AlgorithmRegistryError:
        zoo_file = None
    if zoo_file is None or not isinstance(entry, str) or not entry:
        raise ConfigError(
            f"{where}: {ZOO_KEY}: {entry!r} names an rl-baselines3-zoo entry, which needs an "
            f"entry name and an algorithm with a zoo hyperparameter file ({algo} has "
            f"{zoo_file or 'none'})"
        )
    return f"rl-baselines3-zoo hyperparams/{zoo_file} {entry}"


def defaults_section(algo: str) -> str:
    """The section of a ``defaults.yaml`` entry holding ``algo``'s settings, as the
    algorithm declares it (``nevergrad-es`` and ``ng:NAME`` share ``nevergrad``)."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    try:
        return get_algorithm(algo).section_in_defaults()
    except AlgorithmRegistryError:
        return algo  # reported where the config is built


# -- the user's own defaults: a file (--defaults) and installed packages (entry points) ------

#: Entry-point group through which an installed package ships per-env defaults: the entry
#: names a path (a ``str``, ``pathlib.Path`` or ``importlib.resources`` file) of a YAML file
#: in the format of ``experiments/defaults.yaml`` (docs/extending.md).
DEFAULTS_ENTRY_POINT_GROUP = "es_harness.defaults"
#: Largest defaults file read (the repository's is about 40 kB).
MAX_DEFAULTS_BYTES = 1 << 20


@dataclass(frozen=True)
class UserDefaults:
    """A defaults file of the user's own, read and checked."""

    #: absolute path (what the run's ``defaults`` records)
    path: str
    #: sha256 of its bytes (the run's ``defaults_sha256``)
    digest: str
    #: env id -> sections, as in ``experiments/defaults.yaml``
    data: dict[str, Any]
    #: how ``--print-config`` names it (``defaults file my.yaml``)
    source: str


def _read_bounded(path: Path) -> bytes:
    """A regular file's bytes, at most :data:`MAX_DEFAULTS_BYTES` (a FIFO or device named as
    a defaults file is refused, not read until it ends)."""
    import stat

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError(f"defaults file {path} is not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_DEFAULTS_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read defaults file {path}: {error.strerror}") from None
    if len(raw) > MAX_DEFAULTS_BYTES:
        raise ConfigError(f"defaults file {path} is larger than {MAX_DEFAULTS_BYTES:,} bytes")
    return raw


def parse_yaml(raw: bytes, where: str) -> Any:
    """YAML bytes through the bounded safe loader; one-line :class:`ConfigError` otherwise."""
    try:
        return load_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{where} is not a text file (byte {error.object[error.start]:#04x} at offset "
            f"{error.start} is not UTF-8)"
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        # one line: a ReaderError (a control character) has no `problem`, and its text spans
        # two lines
        problem = " ".join(str(getattr(error, "problem", None) or error).split())
        raise ConfigError(f"malformed YAML in {where}{line}: {problem}") from None


def _section_owners() -> dict[str, list[AlgorithmType]]:
    """Section name of ``defaults.yaml`` entries -> the algorithms whose settings it holds."""
    from algorithms.registry import algorithm_names, get_algorithm

    owners: dict[str, list[AlgorithmType]] = {}
    for name in algorithm_names():
        cls = get_algorithm(name)
        owners.setdefault(cls.section_in_defaults(), []).append(cls)
    return owners


def _check_knob_section(section: str, values: Any, where: str) -> None:
    """A ``run``, ``policy`` or ``budget`` mapping: schema knobs of that section, values
    of their types and ranges."""
    if values is None:
        return
    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a mapping of knobs, got {values!r}")
    for key, value in values.items():
        name = f"policy.{key}" if section == "policy" else str(key)
        knob = BY_NAME.get(name)
        if knob is None or knob.section != section:
            known = [k.key for k in KNOBS if k.section == section]
            close = difflib.get_close_matches(str(key), known, n=3)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"{where}: {key!r} is not a {section} knob{hint}")
        try:
            check_knob(knob, coerce(knob.name, value, knob.type))
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None


def check_defaults_data(data: Any, where: str, *, allow_default: bool = True) -> dict[str, Any]:
    """Check a defaults file as ``experiments/defaults.yaml`` is checked: env ids mapping
    to ``run``, ``policy`` and ``budget`` sections (schema knobs, valid values) and
    algorithm sections (their hyperparameters, ``zoo``, and ``run``/``policy``/``budget``
    of their own). ``allow_default``: whether a ``default`` entry (every env) may appear.
    Returns the data; raises :class:`ConfigError` naming the file and the bad entry."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must map env ids to settings, got {type(data).__name__}")
    owners = _section_owners()
    for entry, sections in data.items():
        if not isinstance(entry, str) or not entry:
            raise ConfigError(f"{where}: entry {entry!r} must be an env id")
        if entry == "default" and not allow_default:
            raise ConfigError(
                f"{where}: a package's defaults name its envs; a `default` entry (every env) "
                "belongs in a file given with --defaults"
            )
        if sections is None:
            continue
        if not isinstance(sections, dict):
            raise ConfigError(f"{where}: {entry} must be a mapping of sections")
        for section, values in sections.items():
            here = f"{where}: {entry}.{section}"
            if section in SECTIONS:
                _check_knob_section(str(section), values, here)
                continue
            if section not in owners:
                known = sorted([*SECTIONS, *owners])
                close = difflib.get_close_matches(str(section), known, n=3)
                hint = f"did you mean: {', '.join(close)}?" if close else f"known: {known}"
                raise ConfigError(
                    f"{here} is not a section (run, policy, budget or an algorithm's); {hint}"
                )
            if values is None:
                continue
            if not isinstance(values, dict):
                raise ConfigError(f"{here} must be a mapping of settings")
            types_: dict[str, Any] = {}
            for cls in owners[str(section)]:
                types_ = {**param_types(cls.Config), **types_}
            for key, value in values.items():
                if key in SECTIONS:
                    _check_knob_section(str(key), value, f"{here}.{key}")
                elif key == ZOO_KEY:
                    zoo_source(owners[str(section)][0].name, value, here)
                elif key not in types_:
                    close = suggest_keys(str(key), types_, knobs=False)
                    hint = f"; did you mean: {', '.join(close)}?" if close else ""
                    raise ConfigError(f"{here}: {section} has no hyperparameter {key!r}{hint}")
                elif value is not None:
                    try:
                        coerce(str(key), value, types_[key])
                    except ConfigError as error:
                        raise ConfigError(f"{here}: {error}") from None
    return data


def load_user_defaults(path: str | os.PathLike[str]) -> UserDefaults:
    """Read and check a defaults file of the user's own (``--defaults FILE``, a sweep's
    ``defaults:``); a :class:`ConfigError` (one line) for a bad one."""
    if not isinstance(path, (str, os.PathLike)) or not str(os.fspath(path)).strip():
        raise ConfigError(f"defaults must name a YAML file, got {path!r}")
    file = Path(os.fspath(path)).expanduser().absolute()
    raw = _read_bounded(file)
    data = check_defaults_data(parse_yaml(raw, str(file)), str(file))
    digest = hashlib.sha256(raw).hexdigest()
    return UserDefaults(str(file), digest, data, f"defaults file {file.name}")


@lru_cache(maxsize=1)
def package_defaults() -> tuple[UserDefaults, ...]:
    """The defaults files installed packages ship (:data:`DEFAULTS_ENTRY_POINT_GROUP`),
    by entry-point name; each may name only envs (no ``default`` entry)."""
    import importlib.metadata

    found = []
    entries = importlib.metadata.entry_points(group=DEFAULTS_ENTRY_POINT_GROUP)
    for entry in sorted(entries, key=lambda e: e.name):
        dist = entry.dist.name if entry.dist is not None else None
        what = f"defaults entry point {entry.name} = {entry.value}" + (
            f" of package {dist}" if dist else ""
        )
        try:
            target = entry.load()
        except (ImportError, AttributeError) as error:
            raise ConfigError(f"cannot load {what}: {error}") from None
        if isinstance(target, (str, os.PathLike)):
            raw = _read_bounded(Path(os.fspath(target)))
        elif hasattr(target, "read_bytes") and hasattr(target, "name"):
            raw = target.read_bytes()  # an importlib.resources file inside the package
            if len(raw) > MAX_DEFAULTS_BYTES:
                raise ConfigError(f"{what}: larger than {MAX_DEFAULTS_BYTES:,} bytes")
        else:
            raise ConfigError(f"{what} must name a YAML file's path, got {target!r}")
        data = check_defaults_data(parse_yaml(raw, what), what, allow_default=False)
        file = Path(str(getattr(target, "name", target))).name
        source = f"defaults file {file} of package {dist or entry.name}"
        found.append(UserDefaults(str(target), hashlib.sha256(raw).hexdigest(), data, source))
    return tuple(found)


def user_defaults_layers(
    gym_id: str, algo: str, env_name: str | None, user: UserDefaults | None
) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """The layers above the repository's: installed packages' entries for the env, then the
    user's file (each labelled with its source); two packages naming the env are refused."""
    names = {gym_id, env_name} - {None}
    packages = [d for d in package_defaults() if names & set(d.data)]
    if len(packages) > 1:
        raise ConfigError(
            f"env {env_name or gym_id} has defaults from two packages ({packages[0].source} "
            f"and {packages[1].source}); give the ones to use with --defaults FILE"
        )
    layers = []
    for found in [*packages, *([user] if user is not None else [])]:
        layers += defaults_layers(gym_id, algo, env_name, data=found.data, source=found.source)
    return layers


def shown_text(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to about ``limit`` characters for a one-line message."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def parse_value(text: str) -> Any:
    """A ``--set`` value as YAML scalar/list: ``0.1`` -> float, ``true`` -> bool, ``[64,64]``."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as error:
        problem = " ".join(str(getattr(error, "problem", None) or "").split())
        reason = f" ({problem})" if problem else ""
        raise ConfigError(f"cannot parse value {shown_text(text)}{reason}") from None


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


def allows_none(annotation: Any) -> bool:
    """Whether a hyperparameter's annotation admits None (``float | None``, ``Optional``)."""
    if isinstance(annotation, str):
        return "None" in annotation or "Optional" in annotation
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def type_name(annotation: Any) -> str:
    """How a message names a hyperparameter's type (``a float``, ``a list``)."""
    base = _base_type(annotation)
    name = getattr(base, "__name__", str(base))
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


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


def validate_params(params: dict[str, Any], params_type: type, where: str) -> Any:
    """Build the algorithm's config object from a dict, naming unknown keys and bad types."""
    types_ = param_types(params_type)
    #: knobs the algorithm no longer has, with the one value it accepted: an older record
    #: holding that value is read as it ran; another value is refused, saying why
    retired: dict[str, Any] = getattr(params_type, "RETIRED", {})
    checked = {}
    for key, value in params.items():
        if key in retired and key not in types_:
            if value == retired[key]:
                continue
            raise ConfigError(
                f"{key} in {where} is not a knob of this algorithm any more (only "
                f"{retired[key]!r} was ever accepted), got {value!r}"
            )
        if key not in types_:
            close = suggest_keys(key, types_, knobs=False)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown key {key!r} in {where}{hint}")
        if value is None and not allows_none(types_[key]):
            # a null from a sweep file or defaults.yaml would reach the algorithm's own
            # checks (`0 < None`) as a TypeError traceback
            raise ConfigError(f"{key} in {where} needs {type_name(types_[key])}, got null")
        checked[key] = coerce(key, value, types_[key])
        if isinstance(checked[key], float) and not math.isfinite(checked[key]):
            raise ConfigError(f"{key} must be a finite number, got {checked[key]!r}")
    instance = params_type(**checked)
    validate = getattr(instance, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as error:
            raise ConfigError(str(error)) from None
    return instance


# -- --set KEY=VALUE ------------------------------------------------------------------------


def suggest_keys(name: str, params: Mapping[str, Any], knobs: bool = True) -> list[str]:
    """Names to offer for an unknown key: known aliases first, then close spellings.

    ``params``: the algorithm's hyperparameter names; ``knobs``: offer run knobs too.
    """
    offered: list[str] = []
    for target in schema.ALIASES.get(name.lower(), ()):
        knob = BY_NAME.get(target)
        if target in params:
            offered.append(target)
        elif knob is not None and knobs:
            offered.append(knob.name if knob.settable else f"{knob.flag} (a flag)")
    settable = [k.key if k.section == "policy" else k.name for k in KNOBS if k.settable]
    offered += difflib.get_close_matches(name, [*params, *(settable if knobs else [])], n=3)
    return list(dict.fromkeys(offered))


def family_members(family: str) -> str:
    """The algorithms of one family, as a refusal names them (``optimes, cma, ...``)."""
    from algorithms.registry import family_names

    return ", ".join(family_names(family))


def _families_text(knob: Knob) -> str:
    return " and ".join(family_members(f) for f in sorted(knob.families))


def parse_assignment(assignment: str, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (dotted config path, typed value).

    A bare key is looked up among the algorithm's hyperparameters (``params``:
    name -> type), then the settable knobs; ``policy.KEY`` and ``params.KEY``
    may be spelled out. Unknown keys name known aliases and close matches.
    """
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {assignment!r}")
    if not raw.strip():
        # YAML reads an empty value as null: `--set sigma=` is a slip, not a request for null
        raise ConfigError(f"--set {key}= has no value; give one after '='")
    value = parse_value(raw)
    section, _, name = key.rpartition(".")
    if section in ("", "params") and name in params:
        if value is None and not allows_none(params[name]):
            raise ConfigError(
                f"--set {assignment.strip()}: {name} needs a value "
                f"({type_name(params[name])}), not null"
            )
        return f"params.{name}", coerce(key, value, params[name])
    knob = None if section == "params" else BY_NAME.get(key)
    if knob is None and section == "":
        knob = BY_NAME.get(f"policy.{name}")
    if knob is not None:
        if not knob.settable:
            how = f"give it as {knob.flag}" if knob.flag else "it is set by the harness"
            raise ConfigError(f"{key!r} is not a --set key: {how}")
        if value == "auto" and knob.allow_auto:
            return knob.name, value
        return knob.name, coerce(key, value, knob.type)
    hint = suggest_keys(name, params)
    shown = f"; did you mean: {', '.join(hint)}?" if hint else ""
    raise ConfigError(f"unknown --set key {key!r}{shown}")


def _set_path(config: dict[str, Any], path: str, value: Any) -> None:
    section, _, name = path.rpartition(".")
    if section:
        config.setdefault(section, {})
        if config[section] is None:
            config[section] = {}
        config[section][name] = value
    else:
        config[name] = value


# -- checking values ------------------------------------------------------------------------


def check_knob(knob: Knob, value: Any) -> None:
    """Range and choice checks of one knob's completed value (None passes for nullable)."""
    if value is None:
        if knob.nullable:
            return
        raise ConfigError(f"{knob.name} needs a value, got null")
    if knob.type is int and (isinstance(value, bool) or not isinstance(value, int)):
        what = "a positive integer" if knob.least == 1 else "an integer"
        raise ConfigError(f"{knob.name} must be {what}, got {value!r}")
    if knob.type is int and abs(value) > INT64_MAX:
        # past int64 no record column, array size or seed holds it
        raise ConfigError(f"{knob.name} must be at most {INT64_MAX:,}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{knob.name} must be a finite number, got {value!r}")
    if knob.most is not None and isinstance(value, (int, float)) and value > knob.most:
        raise ConfigError(
            f"{knob.name} must be at most {schema.show_limit(knob.most)}, got {value!r}"
        )
    if knob.least is not None and (value <= knob.least if knob.positive else value < knob.least):
        if knob.positive or knob.least == 1:
            least = "positive" if knob.type is not int else "a positive integer"
        elif knob.least == 0:
            least = "zero or more"
        else:
            least = f"at least {knob.least}"
        if knob.section == "identity" and knob.type is int and knob.least == 0:
            least = "an integer >= 0"
        raise ConfigError(f"{knob.name} must be {least}, got {value!r}")
    if knob.choices and value not in knob.choices:
        raise ConfigError(
            f"{knob.name} must be {' or '.join(knob.choices)}, got {value!r}"
            if len(knob.choices) == 2
            else f"{knob.name} must be one of {', '.join(knob.choices)}, got {value!r}"
        )


def check_values(config: dict[str, Any]) -> None:
    """Range checks of every knob, so a bad value fails before a run starts."""
    for knob in KNOBS:
        section, _, name = knob.name.rpartition(".")
        holder = (config.get(section) or {}) if section else config
        if name in holder:
            check_knob(knob, holder[name])
    from envs.reward_shaping import RewardTransform, RewardTransformError

    try:
        transform = RewardTransform.parse(config.get("reward_transform"))
        if "env" in config:
            from envs.registry import resolve_env_id

            transform.check_env(resolve_env_id(str(config["env"])))
    except RewardTransformError as error:
        raise ConfigError(str(error)) from None
    check_policy_values(config.get("policy") or {})


def check_policy_values(policy: Mapping[str, Any]) -> None:
    """Choices and maxima of the ``policy`` section (its knobs' types are checked by
    :func:`check_knob`): kind, activation, hidden sizes, discretize."""
    from envs.policies import MAX_DISCRETIZE, Activation, PolicyKind, check_hidden_sizes

    kinds, activations = typing.get_args(PolicyKind), typing.get_args(Activation)
    if "kind" in policy and policy["kind"] not in kinds:
        raise ConfigError(f"policy.kind must be one of {', '.join(kinds)}, got {policy['kind']!r}")
    if "activation" in policy and policy["activation"] not in activations:
        raise ConfigError(
            f"policy.activation must be one of {', '.join(activations)}, "
            f"got {policy['activation']!r}"
        )
    sizes = policy.get("hidden_sizes") or []
    if not isinstance(sizes, list):
        raise ConfigError(f"policy.hidden_sizes must be a list of integers, got {sizes!r}")
    try:
        check_hidden_sizes(sizes)
    except ValueError as error:
        raise ConfigError(
            f"policy.hidden_sizes {str(error).removeprefix('hidden sizes ')}"
        ) from None
    discretize = policy.get("discretize", 0)
    if discretize is None:
        return
    if isinstance(discretize, bool) or not isinstance(discretize, int):
        raise ConfigError(f"policy.discretize must be an integer, got {discretize!r}")
    if discretize < 0 or discretize == 1:
        raise ConfigError(f"policy.discretize must be 0 or at least 2, got {discretize!r}")
    if discretize > MAX_DISCRETIZE:
        raise ConfigError(f"policy.discretize must be at most {MAX_DISCRETIZE}, got {discretize!r}")


# -- the completed config --------------------------------------------------------------------


def cpu_count() -> int:
    """CPUs this process may use (what ``workers: auto`` means)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


@dataclass
class ResolvedConfig:
    """A completed, validated run config and the source of every value in it."""

    config: dict[str, Any]
    #: dotted key (``params.sigma``) -> where the value came from
    sources: dict[str, str] = field(default_factory=dict)
    family: str = "es"

    def rows(self) -> list[tuple[str, Any, str, bool]]:
        """(dotted key, value, source, applies) for every knob, in display order."""
        from algorithms.registry import get_algorithm

        rows: list[tuple[str, Any, str, bool]] = []
        seen = set()
        for knob in KNOBS:
            section, _, name = knob.name.rpartition(".")
            holder = (self.config.get(section) or {}) if section else self.config
            if name not in holder:
                continue
            seen.add(knob.name)
            source = self.sources.get(knob.name, BUILT_IN)
            rows.append((knob.name, holder[name], source, knob.applies_to(self.family)))
        for key, value in sorted((self.config.get("policy") or {}).items()):
            if f"policy.{key}" not in seen:
                rows.append((f"policy.{key}", value, self.sources.get(f"policy.{key}", "?"), True))
        class_name = get_algorithm(str(self.config["algo"])).Config.__name__
        for key, value in (self.config.get("params") or {}).items():
            source = self.sources.get(f"params.{key}", f"{class_name} default")
            rows.append((f"params.{key}", value, source, True))
        for key in sorted(self.config):
            if key not in BY_NAME and key not in ("policy", "params"):
                rows.append((key, self.config[key], self.sources.get(key, "?"), True))
        return rows

    def describe(self) -> str:
        """The config as aligned ``key  value  source`` lines (``--print-config``)."""
        algo = self.config["algo"]
        rows = self.rows()
        width = max(len(key) for key, *_ in rows)
        values = [_show(value) for _, value, _, _ in rows]
        value_width = min(max(len(v) for v in values), 28)
        lines = [f"# {algo} on {self.config['env']}: every knob, its value and where it came from"]
        for (key, _, source, applies), shown in zip(rows, values, strict=True):
            note = "" if applies else f"  (not used by {algo})"
            lines.append(f"{key:<{width}}  {shown:<{value_width}}  {source}{note}")
        return "\n".join(lines)


def _check_backend(backend: Any) -> None:
    from evaluation.registry import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


@dataclass
class _Draft:
    """A run config while :func:`build_run_config` completes it, phase by phase."""

    config: dict[str, Any]
    policy: dict[str, Any]
    params: dict[str, Any]
    #: dotted key -> where its value came from
    sources: dict[str, str]
    #: the label of every value the caller gave (a string, or one per top-level key)
    given_source: str | Mapping[str, str]
    #: keys the user set to null on purpose (``--set max_episode_steps=null``)
    explicit_null: set[str] = field(default_factory=set)
    #: defaults.yaml layers of the env, lowest precedence first (see :func:`defaults_layers`)
    layers: list[tuple[str, dict[str, dict[str, Any]]]] = field(default_factory=list)

    def label(self, key: str) -> str:
        source = self.given_source
        return source if isinstance(source, str) else source.get(key, "given")

    def from_layers(self, section: str, name: str) -> tuple[bool, Any, str]:
        """(found, value, layer label) of the highest defaults layer that sets ``name``."""
        for layer_label, sections in reversed(self.layers):
            if name in sections[section]:
                return True, sections[section][name], layer_label
        return False, None, ""


def _draft(given: Mapping[str, Any], source: str | Mapping[str, str]) -> _Draft:
    """What the caller gave, copied, with a source for every value."""
    config = {k: copy.deepcopy(v) for k, v in given.items() if k not in ("policy", "params")}
    draft = _Draft(
        config=config,
        policy={k: v for k, v in (given.get("policy") or {}).items() if v is not None},
        params=copy.deepcopy(dict(given.get("params") or {})),
        sources={},
        given_source=source,
    )
    draft.sources = {k: draft.label(k) for k, v in config.items() if v is not None}
    draft.sources.update({f"policy.{k}": draft.label("policy") for k in draft.policy})
    draft.sources.update({f"params.{k}": draft.label("params") for k in draft.params})
    return draft


def _refuse_unknown_keys(config: Mapping[str, Any]) -> None:
    for key in config:
        if key not in BY_NAME:
            top = [k.name for k in KNOBS if "." not in k.name]
            close = difflib.get_close_matches(key, top, n=3)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown config key {key!r}{hint}")


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def import_user_modules(imports: Any) -> list[str]:
    """Check and import the modules of the ``imports`` knob (they register envs and
    algorithms); the checked list. Runs before any name is resolved."""
    from envs.plugins import PluginImportError, import_modules

    if imports is None:
        return []
    if not isinstance(imports, list) or not all(isinstance(m, str) for m in imports):
        raise ConfigError(f"imports must be a list of module names, got {imports!r}")
    for module in imports:
        if not _MODULE_NAME.fullmatch(module):
            raise ConfigError(f"imports: {module!r} is not a module name")
    from algorithms.registry import AlgorithmRegistryError

    try:
        import_modules(imports)
    except (PluginImportError, AlgorithmRegistryError) as error:
        raise ConfigError(str(error)) from None
    return list(imports)


def _algorithm(draft: _Draft) -> AlgorithmType:
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    algo = draft.config.get("algo")
    if algo is None:
        algo = BY_NAME["algo"].default
    elif not isinstance(algo, str) or not algo.strip():
        # an empty name is a slip (an unset shell variable), not a request for the default
        raise ConfigError(f"algo must be an algorithm name (see `harness list`), got {algo!r}")
    try:
        algo_cls = get_algorithm(str(algo))
    except AlgorithmRegistryError as error:
        raise ConfigError(str(error)) from None
    draft.config["algo"] = algo
    return algo_cls


def _apply_assignments(
    draft: _Draft, overrides: Sequence[str], types_: Mapping[str, Any], override_source: str
) -> None:
    """``KEY=VALUE`` strings on top of what was given (``--set``, a sweep's ``set``)."""
    for assignment in overrides:
        path, value = parse_assignment(assignment, types_)
        section, _, name = path.rpartition(".")
        if section == "params":
            draft.params[name] = value
        elif section == "policy":
            draft.policy[name] = value
        else:
            draft.config[name] = value
        draft.sources[path] = override_source
        if value is None:
            draft.explicit_null.add(path)
            if section == "policy":
                draft.policy.pop(name, None)


def _set_aside_foreign(draft: _Draft, family: str, refuse: Refuse) -> dict[str, Any]:
    """Knobs the algorithm's family does not use: refused (``given``) or set aside, to be
    completed without and judged by :func:`_judge_foreign`."""
    foreign: dict[str, Any] = {}
    for knob in KNOBS:
        if knob.applies_to(family):
            continue
        section, _, name = knob.name.rpartition(".")
        holder = draft.policy if section == "policy" else draft.config
        if knob.name in draft.sources and (
            holder.get(name) is not None or knob.name in draft.explicit_null
        ):
            if refuse == "given":
                algo = str(draft.config["algo"])
                raise ConfigError(knob.not_applicable(algo, _families_text(knob)))
            foreign[knob.name] = holder.pop(name, None)
            draft.sources.pop(knob.name)
    return foreign


def _complete_identity(draft: _Draft) -> None:
    """What runs: algorithm, env, seed, k, workers, backend; then the env's defaults layers."""
    config, sources = draft.config, draft.sources
    for knob in schema.knobs("identity"):
        value = config.get(knob.name)
        if value is None:
            config[knob.name] = copy.deepcopy(knob.default)
            if knob.default is not None:
                sources[knob.name] = BUILT_IN
            continue
        if value == "auto" and knob.allow_auto:
            config[knob.name] = cpu_count()
            sources[knob.name] = f"{sources.get(knob.name, 'given')} (auto: this machine's CPUs)"
            continue
        check_knob(knob, value)
    _check_backend(config["backend"])
    from envs.registry import UnknownEnvError, resolve_env_id

    try:
        gym_id = resolve_env_id(str(config["env"]))
    except UnknownEnvError as error:
        raise ConfigError(str(error)) from None
    draft.layers = defaults_layers(gym_id, str(config["algo"]), str(config["env"]))
    user = _user_defaults(draft)
    draft.layers += user_defaults_layers(gym_id, str(config["algo"]), str(config["env"]), user)


def _user_defaults(draft: _Draft) -> UserDefaults | None:
    """The user's defaults file (``defaults``), read and checked, its digest recorded.

    A config that records a digest is a stored one being rebuilt (resume, a sweep cell):
    its values are complete, so a file changed or gone since is not read again and the
    recorded digest stays the provenance of those values.
    """
    config = draft.config
    path, recorded = config.get("defaults"), config.get("defaults_sha256")
    if isinstance(path, os.PathLike):
        path = config["defaults"] = os.fspath(path)  # harness.run(defaults=Path(...))
    if path is None:
        config["defaults"] = config["defaults_sha256"] = None
        draft.sources.pop("defaults_sha256", None)
        return None
    if recorded is not None:
        try:
            user = load_user_defaults(path)
        except ConfigError:
            return None
        return user if user.digest == recorded else None
    user = load_user_defaults(path)
    config["defaults"], config["defaults_sha256"] = user.path, user.digest
    draft.sources["defaults_sha256"] = f"sha256 of {user.source}"
    return user


def _complete_run_knobs(draft: _Draft) -> None:
    config = draft.config
    for knob in schema.knobs("run"):
        # An explicit null keeps None where None means something (no step cap); elsewhere
        # it asks for the default.
        if config.get(knob.name) is not None or (
            knob.name in draft.explicit_null and knob.nullable
        ):
            config[knob.name] = coerce(knob.name, config.get(knob.name), knob.type)
            continue
        found, value, where = draft.from_layers("run", knob.name)
        config[knob.name] = coerce(knob.name, value if found else knob.default, knob.type)
        draft.sources[knob.name] = where if found else BUILT_IN


def _complete_budget(draft: _Draft) -> None:
    """The env's default budget applies only when the user gave none (a pair's follower,
    ``paired_with`` without a limit, has its partner's)."""
    config = draft.config
    budget_given = any(config.get(k) is not None for k in LIMITS) or bool(config.get("paired_with"))
    for knob in schema.knobs("budget"):
        value = config.get(knob.name)
        if value is None and not budget_given and knob.name not in draft.explicit_null:
            found, value, where = draft.from_layers("budget", knob.name)
            if found and value is not None:
                draft.sources[knob.name] = where
        config[knob.name] = coerce(knob.name, value, knob.type)


def _complete_policy(draft: _Draft) -> None:
    for key in draft.policy:
        if key not in POLICY_KEYS:
            raise ConfigError(f"unknown policy key {key!r}; known: {', '.join(POLICY_KEYS)}")
    completed: dict[str, Any] = {}
    for knob in schema.knobs("policy"):
        if knob.key in draft.policy:
            value = draft.policy[knob.key]
        else:
            found, value, where = draft.from_layers("policy", knob.key)
            if not found:
                value, where = knob.default, BUILT_IN
            draft.sources[knob.name] = where
        completed[knob.key] = coerce(knob.name, copy.deepcopy(value), knob.type)
    draft.config["policy"] = completed


def _complete_params(draft: _Draft, algo_cls: AlgorithmType) -> None:
    """The algorithm's hyperparameters: its dataclass, the defaults layers, what was given."""
    config, algo = draft.config, str(draft.config["algo"])
    merged: dict[str, Any] = {}
    layer_of: dict[str, str] = {}
    for layer_label, sections in draft.layers:
        for key, value in sections["params"].items():
            merged[key], layer_of[key] = value, layer_label
    merged.update(draft.params)
    if config.get("target_return") is None:
        config["confirm_episodes"] = None  # nothing to confirm
        draft.sources["confirm_episodes"] = "no target_return: nothing to confirm"
    per_worker = config.get("population_per_worker")
    if per_worker is not None:
        if "population" not in param_types(algo_cls.Config):
            raise ConfigError(f"population_per_worker is for ES algorithms, not {algo}")
        check_knob(BY_NAME["population_per_worker"], per_worker)
        merged["population"] = per_worker * config["workers"]
        draft.sources["params.population"] = "population_per_worker x workers"
    instance = validate_params(merged, algo_cls.Config, f"params of {algo}")
    config["params"] = dataclasses.asdict(instance)
    class_default = f"{algo_cls.Config.__name__} default"
    #: a config class may say where a default comes from (SB3's network defaults)
    default_sources: Mapping[str, str] = getattr(algo_cls.Config, "DEFAULT_SOURCES", {})
    for key in config["params"]:
        source = layer_of.get(key) or default_sources.get(key, class_default)
        draft.sources.setdefault(f"params.{key}", source)


def _judge_foreign(draft: _Draft, foreign: Mapping[str, Any], refuse: Refuse) -> None:
    """Knobs set aside, judged against what the run uses without them."""
    for name, value in foreign.items():
        knob = BY_NAME[name]
        section, _, key = name.rpartition(".")
        holder = draft.config["policy"] if section == "policy" else draft.config
        if value is not None and value != "auto":
            value = coerce(name, value, knob.type)
        if refuse == "changed" and value != holder.get(key):
            algo = str(draft.config["algo"])
            raise ConfigError(knob.not_applicable(algo, _families_text(knob)))
        if refuse == "never" and value is not None:
            holder[key] = value
            draft.sources[name] = draft.label(name)


def _check_completed(config: dict[str, Any], algo_cls: AlgorithmType) -> None:
    """Checks of the whole completed config: ranges, the algorithm's own, the budget."""
    _check_backend(config["backend"])
    check_values(config)
    try:
        algo_cls.check_config(config)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    try:
        Budget(**{k: config[k] for k in BUDGET_KEYS}).validate()
    except ValueError as error:
        raise ConfigError(str(error)) from None


def build_run_config(
    given: Mapping[str, Any],
    *,
    source: str | Mapping[str, str] = "command line",
    overrides: Sequence[str] = (),
    override_source: str = "--set",
    refuse: Refuse = "given",
    strict_keys: bool = False,
) -> ResolvedConfig:
    """The completed, validated config of one run, and where each value came from.

    ``given``: top-level knobs (None: not given, take the default), optionally
    ``policy`` and ``params`` dicts. ``source``: a label for all given values, or
    one per key. ``overrides``: ``KEY=VALUE`` strings applied on top (labelled
    ``override_source``). ``refuse``: see :data:`Refuse`. ``strict_keys``: refuse
    top-level keys the schema does not know (Sacred's ``with``); otherwise they
    are kept as they are (a stored config from an older harness).

    The user's modules (``imports``) are imported first, so the envs and algorithms
    they register resolve. Raises :class:`ConfigError` with one line naming the bad value.
    """
    draft = _draft(given, source)
    if strict_keys:
        _refuse_unknown_keys(draft.config)
    draft.config["imports"] = import_user_modules(draft.config.get("imports"))
    algo_cls = _algorithm(draft)
    family = str(algo_cls.family)
    _apply_assignments(draft, overrides, param_types(algo_cls.Config), override_source)
    foreign = _set_aside_foreign(draft, family, refuse)
    _complete_identity(draft)
    _complete_run_knobs(draft)
    _complete_budget(draft)
    _complete_policy(draft)
    _complete_params(draft, algo_cls)
    _judge_foreign(draft, foreign, refuse)
    _check_completed(draft.config, algo_cls)
    draft.config.setdefault("sweep", None)
    draft.config.setdefault("ray_address", None)
    return ResolvedConfig(draft.config, draft.sources, family)


def complete_config(config: dict[str, Any]) -> dict[str, Any]:
    """Fill every ``None``/missing knob from the defaults and validate the whole config.

    For callers that build a config themselves (benchmarks, reports, stored
    configs): knobs that do not apply to the algorithm are kept, not refused.
    Raises :class:`ConfigError` naming a bad value.
    """
    return build_run_config(config, source="given", refuse="never").config
