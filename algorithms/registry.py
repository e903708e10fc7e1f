"""Names of algorithms. A name can be registered once; a lookup miss suggests close matches."""

from __future__ import annotations

import difflib
from collections.abc import Callable
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


def _load_builtin() -> None:
    # Import for the side effect of registration; kept lazy so `harness --help` is fast.
    import algorithms.optimes  # noqa: F401

    for module in ("algorithms.nevergrad_es", "algorithms.cma_es", "algorithms.sb3"):
        try:
            __import__(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise


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
