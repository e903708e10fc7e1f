"""Modules of the user's own code, imported by name so that they register envs or algorithms.

``harness run --import MODULE`` (and a sweep file's ``imports``) names them, and the run's
config records them. A recorded list is a note, not an instruction: commands that read a
stored run import its modules only on the user's word (:mod:`harness.user_modules`).

Modules are found on the Python path only. The current directory is not added: a module
planted beside a run (or in whatever directory a command happens to run in) must not run
code because a record names it. A user whose modules live in the current directory sets
``PYTHONPATH`` (docs/extending.md).

:data:`IMPORTS_ENV` is the internal channel from a process to the children it starts
(evaluation workers, Ray actors, the RL baselines' env processes, the ``harness resume``
of a sweep cell): :func:`import_modules` sets it to the modules this process imported on
the user's word, and :func:`~envs.registry.make_env` in a child imports them again. A user
never needs to set it; one who does gives their word as with ``--import``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterable, Iterator

#: Comma-separated modules a process imports before it builds an env; children inherit it.
IMPORTS_ENV = "ES_HARNESS_IMPORTS"

_imported: list[str] = []
#: While a command reads stored runs (:func:`only_modules`): the modules it may import.
_allowed: list[set[str]] = []


class PluginImportError(ValueError):
    """A module named for import cannot be found; the message is one line naming it."""


def import_modules(names: Iterable[str], what: str = "--import") -> None:
    """Import each module once (they register what they define as they are imported).

    ``what``: how the user named the module, for the message of :class:`PluginImportError`
    when it cannot be found; an error raised inside a module that exists propagates as it is.
    """
    for name in names:
        if not name or name in _imported:
            continue
        if _allowed and name not in _allowed[-1] and name not in environment_modules():
            raise PluginImportError(
                f"module {name!r} ({what}) is not imported: a stored record names it; pass "
                f"--import {name} to allow it"
            )
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            missing = error.name or ""
            if name != missing and not name.startswith(f"{missing}."):
                raise  # the module exists; something it imports is missing
            raise PluginImportError(f"cannot import module {name!r} ({what}): not found") from None
        _imported.append(name)
    if _imported:
        os.environ[IMPORTS_ENV] = ",".join(_imported)


@contextlib.contextmanager
def only_modules(allowed: Iterable[str]) -> Iterator[set[str]]:
    """Within the block, :func:`import_modules` imports only ``allowed`` (and modules
    imported already or passed down in :data:`IMPORTS_ENV`); yields the set, which the
    caller widens as it checks each record (:mod:`harness.user_modules`).

    For commands that rebuild configs from stored runs (``harness report`` completes every
    run's config): whatever path reaches an import, a recorded module nobody allowed is
    refused (:class:`PluginImportError`) rather than imported.
    """
    permitted = set(allowed)
    _allowed.append(permitted)
    try:
        yield permitted
    finally:
        _allowed.pop()  # blocks nest: the innermost is last


def allow_modules(names: Iterable[str]) -> None:
    """Widen the innermost :func:`only_modules` block (a no-op outside one)."""
    if _allowed:
        _allowed[-1].update(names)


def environment_modules() -> list[str]:
    """The modules the starting process passed down in :data:`IMPORTS_ENV`."""
    return [name for name in os.environ.get(IMPORTS_ENV, "").split(",") if name]


def import_from_environment() -> None:
    """Import the modules the starting process named in :data:`IMPORTS_ENV`, if any."""
    names = environment_modules()
    if names:
        import_modules(names, what=IMPORTS_ENV)


def imported_modules() -> list[str]:
    """The modules imported so far through :func:`import_modules`, in order."""
    return list(_imported)
