"""Ctrl-C while the ``harness`` command starts ends it quietly: one line, exit status 130.

Importing the command line and building its parser take about a second (the
algorithm registry, every sub-command's module), and until a command latches stop
signals (:mod:`harness.signals`) a Ctrl-C raised KeyboardInterrupt wherever the import
happened to be, printing a traceback. :mod:`harness.cli` imports this module before
anything else, and when this process *is* the ``harness`` command (``python -m
harness.cli`` or the console script) a SIGINT then prints ``harness: interrupted`` and
exits 130: nothing has been written yet, so there is nothing to save.
:func:`harness.cli.main` puts Python's own handler back (:func:`restore`) as its first
act; from there its ``except KeyboardInterrupt`` and each command's latch take over.

Only a SIGINT that Python's default handler would have turned into KeyboardInterrupt is
changed: one inherited as ignored (a background job) stays ignored, and a program that
imports :mod:`harness.cli` as a library keeps its own handling.
"""

from __future__ import annotations

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
    """Whether this process runs the ``harness`` command (not a library import of it)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "harness.cli":  # python -m harness.cli
        return True
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
