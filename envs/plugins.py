"""Modules of the user's own code, imported by name so that they register envs or algorithms.

``harness run --import MODULE`` (and a sweep file's ``imports``) names them; the run's
config records them, so every process that rebuilds the run imports them again: sweep
cells, ``harness resume`` and ``check-repro`` through the config, and every process
that builds an env (evaluation workers, Ray actors, the RL baselines' env processes)
through :data:`IMPORTS_ENV`, which :func:`import_modules` sets for the children this
process starts and :func:`~envs.registry.make_env` reads.

Modules are found on the Python path, then in the current directory (as ``python -m``
finds them; the ``harness`` console script alone would not).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable

#: Comma-separated modules a process imports before it builds an env; children inherit it.
IMPORTS_ENV = "ES_HARNESS_IMPORTS"

_imported: list[str] = []


class PluginImportError(ValueError):
    """A module named for import cannot be found; the message is one line naming it."""


def _find_in_working_directory() -> None:
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.append(cwd)


def import_modules(names: Iterable[str], what: str = "--import") -> None:
    """Import each module once (they register what they define as they are imported).

    ``what``: how the user named the module, for the message of :class:`PluginImportError`
    when it cannot be found; an error raised inside a module that exists propagates as it is.
    """
    for name in names:
        if not name or name in _imported:
            continue
        _find_in_working_directory()
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


def import_from_environment() -> None:
    """Import the modules the starting process named in :data:`IMPORTS_ENV`, if any."""
    names = os.environ.get(IMPORTS_ENV, "")
    if names:
        import_modules(names.split(","), what=IMPORTS_ENV)


def imported_modules() -> list[str]:
    """The modules imported so far through :func:`import_modules`, in order."""
    return list(_imported)
