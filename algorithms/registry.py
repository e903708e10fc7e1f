"""Names of algorithms. A name can be registered once; a lookup miss suggests close matches.

Algorithms are discovered, not listed: every module of the ``algorithms``
package is imported on the first lookup, and a module defining an algorithm
registers it with ``@register("name")``. Adding an algorithm is adding its
module; two modules claiming one name is an error at that first lookup.

Algorithms from the user's own code arrive the same way: an installed package
declares an entry point in the group :data:`ENTRY_POINT_GROUP` (its name the
algorithm's name, its object the :class:`~algorithms.base.Algorithm` subclass, an ES from
``register_es``, or a module that registers), loaded at that first lookup; or a module
named with ``harness run --import MODULE`` registers as it is imported. A name
claimed twice is refused with both sources named.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from algorithms.base import Algorithm, AlgorithmType

A = TypeVar("A", bound=type[Algorithm])

#: Entry-point group of algorithms from installed packages (``[project.entry-points]``).
ENTRY_POINT_GROUP = "es_harness.algorithms"

_REGISTRY: dict[str, AlgorithmType] = {}
#: name -> where it was registered (``module algorithms.cma_es``, ``entry point ...``)
_SOURCES: dict[str, str] = {}
#: prefix -> (factory, the family of what it builds)
_PREFIX_FACTORIES: dict[str, tuple[Callable[[str], AlgorithmType], str]] = {}


class AlgorithmRegistryError(ValueError):
    """An algorithm name that cannot be resolved; the message is one line."""


class UnknownAlgorithmError(AlgorithmRegistryError):
    """The name is not registered; the message lists close matches."""


def register(name: str, source: str | None = None) -> Callable[[A], A]:
    """Class decorator: make an algorithm available under ``name``.

    ``source``: where the name comes from, for the refusal of a name claimed twice
    (default: the class's module).
    """

    def decorate(cls: A) -> A:
        cls.name = name
        _claim(name, cast(AlgorithmType, cls), source or f"module {cls.__module__}")
        return cls

    return decorate


def register_definition(definition: Any, source: str | None = None) -> None:
    """Register an algorithm given as data (an ES: ``algorithms.es_engine.register_es``)."""
    where = source or f"module {sys._getframe(1).f_globals.get('__name__')}"
    _claim(definition.name, definition, where)


def _claim(name: str, algorithm: AlgorithmType, where: str) -> None:
    if name in _REGISTRY and _REGISTRY[name] is not algorithm:
        raise AlgorithmRegistryError(
            f"algorithm name {name!r} is claimed twice: by {_SOURCES[name]} and by {where}"
        )
    _REGISTRY[name] = algorithm
    _SOURCES.setdefault(name, where)


def register_prefix(
    prefix: str, factory: Callable[[str], AlgorithmType], family: str = "es"
) -> None:
    """Names ``prefix:REST`` resolve through ``factory(REST)`` (e.g. ``ng:CMA``), all of
    ``family``."""
    if prefix in _PREFIX_FACTORIES:
        raise AlgorithmRegistryError(f"algorithm prefix {prefix!r} is already registered")
    _PREFIX_FACTORIES[prefix] = (factory, family)


def algorithm_modules() -> list[str]:
    """The modules of the ``algorithms`` package, found on disk (no list to keep).

    Every public module (not a sub-package, not ``_private``) is imported once
    by the first lookup; those that define an algorithm register it with
    :func:`register` as they are imported.
    """
    folder = Path(__file__).parent
    return [
        f"{__package__}.{info.name}"
        for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda info: info.name)
        if not info.ispkg and not info.name.startswith("_")
    ]


_loaded = False


def _load_entry_points() -> None:
    """Register the algorithms installed packages declare (:data:`ENTRY_POINT_GROUP`)."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = f" of package {entry.dist.name}" if entry.dist is not None else ""
        source = f"entry point {entry.name} = {entry.value}{package}"
        try:
            loaded = entry.load()
        except (ImportError, AttributeError) as error:
            raise AlgorithmRegistryError(f"cannot load algorithm {source}: {error}") from None
        if _REGISTRY.get(entry.name) is loaded:  # registered as its module was imported
            _SOURCES[entry.name] = source
        elif inspect.isclass(loaded) and issubclass(loaded, Algorithm):
            register(entry.name, source)(loaded)
        elif not inspect.ismodule(loaded):
            raise AlgorithmRegistryError(
                f"algorithm {source} is neither an Algorithm subclass, an ES registered with "
                "register_es, nor a module"
            )


def _load_builtin() -> None:
    # Import for the side effect of registration; lazy so `harness --help` is fast. By name,
    # not by an import statement: this module imports no algorithm (they import it).
    global _loaded
    if _loaded:
        return
    for module in algorithm_modules():
        importlib.import_module(module)
    _load_entry_points()  # after the built-in ones, so a clash names the built-in first
    _loaded = True


def get_algorithm(name: str) -> AlgorithmType:
    """The algorithm class for ``name``, or :class:`UnknownAlgorithmError`."""
    _load_builtin()
    if name in _REGISTRY:
        return _REGISTRY[name]
    prefix, sep, rest = name.partition(":")
    if sep and prefix in _PREFIX_FACTORIES:
        return _PREFIX_FACTORIES[prefix][0](rest)
    close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.4)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise UnknownAlgorithmError(
        f"unknown algorithm {name!r}{hint} known: {', '.join(sorted(_REGISTRY))}"
    )


def algorithm_names() -> list[str]:
    """Every registered name, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def algorithm_source(name: str) -> str:
    """Where a registered name comes from (``module algorithms.cma_es``, an entry point)."""
    _load_builtin()
    return _SOURCES[name]


def prefix_names(family: str | None = None) -> list[str]:
    """The ``PREFIX:NAME`` forms (``ng:NAME``), optionally of one family."""
    _load_builtin()
    return [f"{p}:NAME" for p, (_, f) in _PREFIX_FACTORIES.items() if family in (None, f)]


def family_names(family: str) -> list[str]:
    """The algorithms of one family, as a refusal names them (``optimes, cma, ng:NAME``)."""
    names = [n for n in algorithm_names() if _REGISTRY[n].family == family]
    return names + prefix_names(family)


def family_of(name: object) -> str | None:
    """The family of an algorithm name, or None for a name this process does not know."""
    try:
        return str(get_algorithm(str(name)).family)
    except UnknownAlgorithmError:
        return None
