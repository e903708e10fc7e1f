"""Names of algorithms. A name can be registered once; a lookup miss suggests close matches.

Algorithms are discovered, not listed: every module of the ``algorithms``
package is imported on the first lookup, and a module defining an algorithm
registers it with ``@register("name")``. Adding an algorithm is adding its
module; two modules claiming one name is an error at that first lookup.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from algorithms.base import Algorithm

A = TypeVar("A", bound=type[Algorithm])

_REGISTRY: dict[str, type[Algorithm]] = {}
_PREFIX_FACTORIES: dict[str, Callable[[str], type[Algorithm]]] = {}


class UnknownAlgorithmError(ValueError):
    """The name is not registered; the message lists close matches."""


def register(name: str) -> Callable[[A], A]:
    """Class decorator: make an algorithm available under ``name``."""

    def decorate(cls: A) -> A:
        if name in _REGISTRY:
            raise ValueError(f"algorithm name {name!r} is already registered")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def register_prefix(prefix: str, factory: Callable[[str], type[Algorithm]]) -> None:
    """Names ``prefix:REST`` resolve through ``factory(REST)`` (e.g. ``ng:CMA``)."""
    if prefix in _PREFIX_FACTORIES:
        raise ValueError(f"algorithm prefix {prefix!r} is already registered")
    _PREFIX_FACTORIES[prefix] = factory


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


def _load_builtin() -> None:
    # Import for the side effect of registration; lazy so `harness --help` is fast. By name,
    # not by an import statement: this module imports no algorithm (they import it).
    global _loaded
    if _loaded:
        return
    for module in algorithm_modules():
        importlib.import_module(module)
    _loaded = True


def get_algorithm(name: str) -> type[Algorithm]:
    """The algorithm class for ``name``, or :class:`UnknownAlgorithmError`."""
    _load_builtin()
    if name in _REGISTRY:
        return _REGISTRY[name]
    prefix, sep, rest = name.partition(":")
    if sep and prefix in _PREFIX_FACTORIES:
        return _PREFIX_FACTORIES[prefix](rest)
    close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.4)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise UnknownAlgorithmError(
        f"unknown algorithm {name!r}{hint} known: {', '.join(sorted(_REGISTRY))}"
    )


def algorithm_names() -> list[str]:
    """Every registered name, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)
