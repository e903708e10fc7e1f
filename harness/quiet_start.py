"""Ctrl-C while the ``harness`` command starts ends it quietly: one line, exit status 130.

Importing the command line and building its parser take about a second (the
algorithm registry, every sub-command's module), and until a command latches stop
signals (:mod:`harness.signals`) a Ctrl-C raised KeyboardInterrupt wherever the import
happened to be, printing a traceback. The ``harness`` package imports this module as
its first act (and :mod:`harness.cli` before anything else), and when this process
*is* the ``harness`` command (``python -m harness.cli`` or the console script) a SIGINT
then prints ``harness: interrupted`` and exits 130: nothing has been written yet, so
there is nothing to save. Only the interpreter's own start (before the first line of
the ``harness`` package runs, some tens of milliseconds) is out of its reach.
:func:`harness.cli.main` puts Python's own handler back (:func:`restore`) as its first
act; from there its ``except KeyboardInterrupt`` and each command's latch take over.

Only a SIGINT that Python's default handler would have turned into KeyboardInterrupt is
changed: one inherited as ignored (a background job) stays ignored, and a program that
imports :mod:`harness.cli` as a library keeps its own handling.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
from types import FrameType

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
#: The one line it prints.
MESSAGE = "harness: interrupted"


def _quiet(signum: int, frame: FrameType | None) -> None:
    print(MESSAGE, file=sys.stderr, flush=True)
    raise SystemExit(EXIT_INTERRUPTED)


def started_as_command() -> bool:
    """Whether this process runs the ``harness`` command (not a library import of it).

    Asked first while ``python -m harness.cli`` imports the ``harness`` package, before
    ``__main__`` is the command's module: the interpreter's own arguments say it then.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "harness.cli":  # python -m harness.cli
        return True
    arguments = list(getattr(sys, "orig_argv", []))[1:]
    if "-mharness.cli" in arguments or any(
        first == "-m" and second == "harness.cli" for first, second in itertools.pairwise(arguments)
    ):
        return True  # python -m harness.cli, while it imports the package
    return os.path.basename(getattr(main, "__file__", None) or "") == "harness"


def install() -> None:
    """Make SIGINT end the starting command quietly (see the module docstring)."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        and started_as_command()
    ):
        signal.signal(signal.SIGINT, _quiet)


def restore() -> None:
    """Python's own SIGINT handling again (KeyboardInterrupt), where :func:`install` put ours."""
    if signal.getsignal(signal.SIGINT) is _quiet:
        signal.signal(signal.SIGINT, signal.default_int_handler)


install()
