"""Evaluation backends by name: the table ``--backend`` offers and its help is made from.

Each entry names a backend, says in one line what it is, and where its class
lives; the class is imported only when a run builds it (``ray`` imports Ray, which
takes seconds and hundreds of MB). This module imports nothing heavy, so
``harness --help`` can list the backends.

Add a backend: an :class:`~evaluation.backends.Evaluator` subclass with a
:meth:`~evaluation.backends.Evaluator.create` classmethod, and one line in
:data:`BACKENDS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluation.backends import Evaluator, EvaluatorSettings


@dataclass(frozen=True)
class Backend:
    """One backend: its name, a one-line doc, and its class as ``module:Class``."""

    name: str
    #: one line, shown by ``harness run --help``
    doc: str
    #: where the class lives: ``package.module:ClassName`` (imported on :meth:`load`)
    target: str

    def load(self) -> type[Evaluator]:
        """The backend's class (imports its module)."""
        module, _, name = self.target.partition(":")
        cls: type[Evaluator] = getattr(importlib.import_module(module), name)
        return cls


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend(
            "inline",
            "this process, one task after another (tests, debugging)",
            "evaluation.backends:InlineEvaluator",
        ),
        Backend(
            "process",
            "a pool of processes on this machine, the noise table once in shared memory",
            "evaluation.backends:ProcessEvaluator",
        ),
        Backend(
            "ray",
            "Ray actors on a local instance or a cluster (--ray-address), the noise table "
            "once per node",
            "evaluation.ray_backend:RayEvaluator",
        ),
    )
}


class UnknownBackendError(ValueError):
    """The backend name is not in :data:`BACKENDS`; the message lists the known ones."""


def get_backend(name: str) -> type[Evaluator]:
    """The class of backend ``name``, or :class:`UnknownBackendError`."""
    if name not in BACKENDS:
        raise UnknownBackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name].load()


def make_evaluator(backend: str, settings: EvaluatorSettings) -> Evaluator:
    """Build the evaluator a run asked for (backend ``backend``) from its settings."""
    return get_backend(backend).create(settings)
