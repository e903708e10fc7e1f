"""Which modules a command that reads a stored run may import, and on whose word.

A run's ``config.json`` records ``imports`` (the user's modules that registered its env
or algorithm), and an env named ``MODULE:ID`` names a module too. Importing a module
runs its code, while a run directory is only data: copied from another machine,
unpacked from an archive, edited, or planted. So a recorded list is a note, not an
instruction. ``harness resume``, ``report``, ``enjoy``, ``check-repro`` (from a golden
file) and :func:`harness.load_policy` import a run's recorded module only when

* the user named it: ``--import MODULE`` on the command line, ``imports=[...]`` of
  ``load_policy``, the ``imports`` of a sweep or check-repro file the user passed; or
  this process already imported it on such word, or the parent command that started
  this one did (:data:`envs.plugins.IMPORTS_ENV`, how sweep cells and workers inherit
  their command's word); or
* the run is the user's own: its checkpoint verifies with this user's checkpoint key
  (:func:`harness.checkpoint.signed_by_user`) and the module is recorded in the config
  inside that signed checkpoint. ``config.json`` beside it is not signed, so editing it
  cannot add a module; a run without a checkpoint, a format-1 (unsigned) one or one
  signed on another machine needs ``--import``.

Anything else is refused before a module is imported, in one line that names the
modules and the ``--import`` that allows them. The current directory is never searched
(:mod:`envs.plugins`), so a module planted beside a run is not found by name either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.plugins import environment_modules, imported_modules

__all__ = [
    "UntrustedImportError",
    "check_run_modules",
    "granted_modules",
    "import_flags",
    "import_named",
    "load_run_modules",
    "own_run_modules",
    "recorded_modules",
    "refusal",
]


class UntrustedImportError(ValueError):
    """A stored run names modules the user has not allowed; one line says how to allow them."""


def recorded_modules(config: Mapping[str, Any] | None) -> list[str]:
    """The modules a run config would import: its ``imports`` and a ``MODULE:ID`` env's module.

    Entries that are not strings are kept as text, so they are refused (never imported)
    rather than silently dropped.
    """
    if not isinstance(config, Mapping):
        return []
    listed = config.get("imports") or []
    names = [str(m) for m in (listed if isinstance(listed, list) else [listed])]
    env = config.get("env")
    if isinstance(env, str) and ":" in env:
        module = env.rpartition(":")[0]
        if module:
            names.append(module)
    return list(dict.fromkeys(names))


def granted_modules(named: Iterable[str] = ()) -> set[str]:
    """Modules this process may import on the user's word: ``named`` (``--import``), those
    it imported already, and those its parent command passed down."""
    return {*named, *imported_modules(), *environment_modules()}


def own_run_modules(run_dir: Path) -> list[str]:
    """The modules recorded in the run's checkpoint when it is signed with this user's key
    (the run is the user's own), else none.

    The signature is checked before a byte of the payload is decoded; a signed pickle is
    the user's own file, so decoding it is what ``harness resume`` does anyway.
    """
    from harness.checkpoint import (
        CHECKPOINT_NAME,
        CheckpointError,
        load_checkpoint,
        signed_by_user,
    )

    path = Path(run_dir) / CHECKPOINT_NAME
    if not signed_by_user(path):
        return []
    try:
        state = load_checkpoint(path)
    except CheckpointError:
        return []
    return recorded_modules(state.get("config"))


def refusal(what: str, missing: Sequence[str], flag: str = "--import") -> str:
    """The one-line refusal: what named the modules, and how to allow them."""
    allow = " ".join(f"{flag} {name}" for name in missing)
    return (
        f"{what} was made with imports: {', '.join(missing)}; pass {allow} to load it "
        "(nothing was imported: a recorded import runs code, so it needs your word)"
    )


def check_run_modules(
    run_dir: Path | None,
    config: Mapping[str, Any] | None,
    named: Iterable[str] = (),
    *,
    what: str | None = None,
    flag: str = "--import",
) -> list[str]:
    """The modules ``config`` needs, once each is allowed; raise :class:`UntrustedImportError`.

    ``run_dir``: the run the config belongs to (None: a record with no run, such as a
    golden file, is never the user's own). ``what`` names it in the refusal (default
    ``run <id>``); ``flag`` is how the caller's user names a module.
    """
    needed = recorded_modules(config)
    allowed = granted_modules(named)
    missing = [name for name in needed if name not in allowed]
    if missing and run_dir is not None:
        own = set(own_run_modules(run_dir))
        missing = [name for name in missing if name not in own]
    if missing:
        label = what or (f"run {Path(run_dir).name}" if run_dir is not None else "the record")
        raise UntrustedImportError(refusal(label, missing, flag))
    return needed


def import_flags(config: Mapping[str, Any] | None) -> list[str]:
    """``--import MODULE`` for each module of ``config``: how a command started on the
    user's word (a sweep's cell, check-repro's runs) hands that word to ``harness resume``."""
    return [flag for name in recorded_modules(config) for flag in ("--import", name)]


def import_named(named: Iterable[str]) -> None:
    """Import the modules the user named (``--import``); raises ``ConfigError`` (one line)."""
    from harness.config import import_user_modules

    names = list(named)
    if names:
        import_user_modules(names)


def load_run_modules(
    run_dir: Path | None,
    config: Mapping[str, Any] | None,
    named: Iterable[str] = (),
    *,
    what: str | None = None,
    flag: str = "--import",
) -> list[str]:
    """:func:`check_run_modules`, then import the named modules and the run's ``imports``.

    A ``MODULE:ID`` env's module is imported when the env is resolved, which the check
    has allowed. Raises :class:`UntrustedImportError` or ``ConfigError`` (a module that
    cannot be found), each one line.
    """
    names = list(named)
    check_run_modules(run_dir, config, names, what=what, flag=flag)
    import_named(names)
    listed = (config or {}).get("imports")
    if listed:
        import_named(listed if isinstance(listed, list) else [listed])
    return recorded_modules(config)
