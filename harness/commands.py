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
import contextlib
import math
import os
import re
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "ERROR_PREFIX",
    "EXIT_USAGE",
    "OVERSUBSCRIBE_FACTOR",
    "WARNING_PREFIX",
    "OneLineErrorParser",
    "UsageError",
    "bounded",
    "check_ray_address",
    "check_run_resources",
    "check_runs_dir",
    "check_writable_dir",
    "positive",
    "print_outcome",
    "terminal_text",
    "warn",
]

#: Exit status of bad input (argparse's too).
EXIT_USAGE = 2
#: The one prefix of every usage error line.
ERROR_PREFIX = "harness: error:"


#: The one prefix of every warning line.
WARNING_PREFIX = "harness: warning:"
#: Characters a terminal acts on rather than shows: C0 controls but newline and tab (ESC
#: starts colour, cursor and title sequences; CR rewrites the line), DEL, C1 controls
#: (CSI) and the bidirectional overrides that reorder what is shown.
_TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: object) -> str:
    """``text`` for a terminal: each control character shown escaped as Python writes it
    (``\\x1b``, ``\\r``), so that a value from a run directory (``algo``, ``imports``)
    cannot colour, move, retitle or rewrite the user's terminal."""
    return _TERMINAL_CONTROL.sub(lambda m: repr(m.group(0))[1:-1], str(text))


def warn(message: object) -> None:
    """Print one ``harness: warning:`` line on stderr, its control characters escaped."""
    print(f"{WARNING_PREFIX} {terminal_text(message)}", file=sys.stderr)


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2, nothing written."""


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), the one ``harness: error:`` prefix."""

    def error(self, message: str) -> NoReturn:
        line = terminal_text(f"{message} (see `{self.prog} --help`)")
        self.exit(EXIT_USAGE, f"{ERROR_PREFIX} {line}\n")


def add_import_flag(parser: argparse.ArgumentParser, why: str) -> None:
    """``--import MODULE`` (repeatable, into ``imports``) with one help text for every command.

    ``why``: what the module is for in this command. A module is found on the Python path,
    never in the current directory, so that a file planted beside a run cannot be imported.
    """
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"import a module of your own: {why}; found on the Python path, not in the "
        "current directory (set PYTHONPATH)",
    )


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


def bounded(
    kind: type, name: str, least: float, most: float, least_open: bool = False
) -> Callable[[str], Any]:
    """An argparse type: a finite ``kind`` (int or float) from ``least`` to ``most``.

    An integer may be written as people write one (``1e3``); ``least_open``: the value must
    be above ``least``. Errors are one line naming the flag and the value.
    """
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        value: Any = None
        shown_text = repr(text) if len(text) <= 40 else f"{text[:40]!r}..."
        if kind is int:
            # exact (past 4,300 digits Python refuses: then read as a float)
            with contextlib.suppress(ValueError):
                value = int(text)
        if value is None:
            try:
                value = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{name} must be {noun}, got {shown_text}"
                ) from None
            if not math.isfinite(value):
                raise argparse.ArgumentTypeError(
                    f"{name} must be a finite number, got {shown_text}"
                )
            if kind is int:
                if not value.is_integer():
                    raise argparse.ArgumentTypeError(f"{name} must be an integer, got {shown_text}")
                value = int(value)
        if value < least or (least_open and value == least):
            word = "above" if least_open else "at least"
            raise argparse.ArgumentTypeError(f"{name} must be {word} {least:g}, got {shown_text}")
        if value > most:
            shown = f"{int(most):,}" if float(most).is_integer() else f"{most:g}"
            raise argparse.ArgumentTypeError(f"{name} must be at most {shown}, got {shown_text}")
        return value

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def check_writable_dir(path: Path, what: str) -> None:
    """Refuse a directory (``what`` names it) this user cannot create or write, up front."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what} {str(path)!r} is a file, not a directory")
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{what} {str(path)!r} is under {str(probe)!r}, which is a file")
    writable = os.access(probe, os.W_OK | os.X_OK)
    if writable:  # os.access says yes to root everywhere: try it (a file, removed at once)
        try:
            with tempfile.TemporaryFile(dir=probe, prefix=".harness-probe-"):
                pass
        except OSError:
            writable = False
    if not writable:
        raise UsageError(f"{what} {str(path)!r} is not writable")


def check_runs_dir(path: Path) -> None:
    """Refuse a runs directory this user cannot write, before anything is created."""
    check_writable_dir(path, "runs directory")


#: Workers per available CPU above which a run needs ``--oversubscribe``: each worker
#: is a process (or a Ray actor) of a few hundred MB, and past a few per core they only
#: queue for the CPU while filling memory (100,000 would start until the machine gives out).
OVERSUBSCRIBE_FACTOR = 4
#: Bytes the head holds per candidate of a generation at the least (task, result, fitness).
BYTES_PER_CANDIDATE = 64


def available_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def check_run_resources(config: dict[str, Any], allow_oversubscribe: bool = False) -> None:
    """Refuse, before anything starts, a run this machine cannot hold.

    A worker count far above the CPUs (``--oversubscribe`` allows it), and a
    population whose first generation cannot fit the timestep budget (each
    candidate plays at least one step per episode) or memory. A Ray cluster's
    CPUs are checked when the run connects to it (the address alone does not say).
    """
    workers = config.get("workers")
    cpus = available_cpus()
    local = config.get("backend") != "ray" or not config.get("ray_address")
    if (
        isinstance(workers, int)
        and local
        and not allow_oversubscribe
        and workers > OVERSUBSCRIBE_FACTOR * cpus
    ):
        raise UsageError(
            f"workers {workers} is more than {OVERSUBSCRIBE_FACTOR}x the {cpus} CPUs "
            "available here; pass --oversubscribe to start them anyway"
        )
    population = (config.get("params") or {}).get("population")
    if not isinstance(population, int) or isinstance(population, bool) or population <= 0:
        return
    episodes = int(config.get("episodes") or 1)
    timesteps = config.get("timesteps")
    if isinstance(timesteps, int) and population * episodes > timesteps:
        raise UsageError(
            f"population {population} needs at least {population * episodes} timesteps for "
            f"its first generation ({episodes} episode(s) each), more than the budget of "
            f"{timesteps} timesteps"
        )
    import psutil

    memory = psutil.virtual_memory().available
    if population * BYTES_PER_CANDIDATE > memory:
        raise UsageError(
            f"population {population} cannot fit in memory: its first generation needs "
            f"over {population * BYTES_PER_CANDIDATE / 2**30:.0f} GiB, "
            f"{memory / 2**30:.1f} GiB is available"
        )


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
