"""Helpers of the ``harness`` sub-commands, below the command line.

``harness.cli`` assembles the parser and dispatches; every sub-command module
(``sweep``, ``report``, ``resume``, ``check-repro``, ``bench``) raises
:class:`UsageError` for bad input and uses these checks, so none of them
imports ``harness.cli``. This module imports nothing from the harness.

A sub-command module defines ``add_arguments(parser)`` and ``run(args) -> int``;
``harness.cli.main`` prints a :class:`UsageError` as one ``harness: error:``
line and exits with :data:`EXIT_USAGE`.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "ERROR_PREFIX",
    "EXIT_USAGE",
    "OneLineErrorParser",
    "UsageError",
    "check_ray_address",
    "check_runs_dir",
    "positive",
    "print_outcome",
]

#: Exit status of bad input (argparse's too).
EXIT_USAGE = 2
#: The one prefix of every usage error line.
ERROR_PREFIX = "harness: error:"


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2, nothing written."""


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), the one ``harness: error:`` prefix."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{ERROR_PREFIX} {message} (see `{self.prog} --help`)\n")


def positive(kind: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` that must be > 0; errors name the flag and the value."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {noun}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {value}")
        return value

    return parse


def check_runs_dir(path: Path) -> None:
    """Refuse a runs directory this user cannot write, before anything is created."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    writable = probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
    if writable:  # os.access says yes to root everywhere: try it (a file, removed at once)
        try:
            with tempfile.TemporaryFile(dir=probe, prefix=".harness-probe-"):
                pass
        except OSError:
            writable = False
    if not writable:
        raise UsageError(f"runs directory {str(path)!r} is not writable")


def check_ray_address(address: str | None, timeout_s: float = 3.0) -> None:
    """Refuse a Ray address that nothing answers on, before anything is created.

    Forms: ``HOST:PORT`` (GCS, default port 6379), ``ray://HOST:PORT`` (Ray
    client, default 10001), ``auto`` (the cluster recorded by ``ray start`` on
    this machine) and ``local`` / none (a new local instance, always fine).
    """
    if not address or address == "local":
        return
    target = address
    if address == "auto":
        folder = Path(os.environ.get("RAY_TMPDIR") or "/tmp/ray")
        try:
            target = (folder / "ray_current_cluster").read_text().strip()
        except OSError:
            target = ""
        if not target:
            raise UsageError(
                "ray address 'auto': no running Ray cluster on this machine "
                "(start one with `ray start --head`)"
            )
    scheme, sep, rest = target.partition("://")
    if not sep:
        scheme, rest = "", target
    if scheme not in ("", "ray"):
        raise UsageError(f"ray address {address!r}: unknown scheme {scheme + '://'!r}")
    rest = rest.split("/", 1)[0]
    host, colon, port_text = rest.rpartition(":")
    if not colon or host.endswith(":"):  # no port (or a bare IPv6 address)
        host, port_text = rest, "10001" if scheme == "ray" else "6379"
    host = host.strip("[]")
    if not host:
        raise UsageError(f"ray address {address!r} names no host")
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"ray address {address!r}: port {port_text!r} is not a number") from None
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise UsageError(
            f"ray address {address!r} is unreachable ({host}:{port}: {reason})"
        ) from None


def print_outcome(run: Any, run_dir: Path) -> None:
    """One line for a finished Sacred run, one for its result."""
    result = run.result or {}
    print(f"run {run_dir.name} {run.status}: {run_dir}")
    if result:
        final = result.get("final_eval_return")
        print(
            f"  {result['timesteps']} timesteps, {result['wall_time_s']:.1f}s, "
            f"final eval return {final if final is None else round(final, 2)} "
            f"({result['stop_reason']})"
        )
