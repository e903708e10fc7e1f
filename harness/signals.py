"""Stop signals as KeyboardInterrupt, so that every way of stopping takes Ctrl-C's path.

``kill`` (SIGTERM; also what batch schedulers and the end of a shell session send)
would otherwise end a run head with no checkpoint of its last steps and its record
left at RUNNING, and end a sweep while its cells, each in its own session, run on.
Raised as KeyboardInterrupt instead, it has the head write its last complete step
and record INTERRUPTED, and the sweep stop its cells first, as Ctrl-C does.

Start-up. A head spends seconds before its first step (imports, Sacred's run
record, starting workers or Ray). A stop signal raised as KeyboardInterrupt there
would cut the record or the workers' start short. So a command *latches* stop
signals from its first line (:func:`latch_stop_signals`): one that arrives is
remembered, and the runner acts on it once the run can be resumed, right after it
wrote its step-0 checkpoint (:func:`take_latched`): the run is then INTERRUPTED
with a checkpoint, and ``harness resume`` or a sweep continues it like any other.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_latched: list[int] = []


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _remember(signum: int, frame: FrameType | None) -> None:
    _latched.append(signum)


def _is_default(handler: object) -> bool:
    """SIG_DFL, or a handler that only tidies up before acting as it (the removal of
    unpacked run archives, :mod:`harness.rundir`)."""
    return handler is signal.SIG_DFL or bool(getattr(handler, "stands_for_default", False))


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def latch_stop_signals() -> None:
    """Remember SIGINT and SIGTERM from now on instead of acting on them (main thread only).

    A SIGINT inherited as ignored (a head started as a shell's background job) is
    latched too: a sweep's SIGINT to a cell it stops must not be lost. A handler
    someone else installed for SIGTERM is kept.
    """
    if not _in_main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.default_int_handler):
        signal.signal(signal.SIGINT, _remember)
    if _is_default(signal.getsignal(signal.SIGTERM)):
        signal.signal(signal.SIGTERM, _remember)


def take_latched() -> str | None:
    """The name of the first stop signal latched so far (None: none), forgetting them all."""
    if not _latched:
        return None
    name = signal.Signals(_latched[0]).name
    _latched.clear()
    return name


def interrupt_on_stop_signals() -> None:
    """Make SIGINT and SIGTERM raise KeyboardInterrupt in this (main-thread) process.

    A head started by a background job of a shell (``nohup harness sweep ... &``)
    inherits SIGINT as ignored, and Python then installs no handler: a sweep's SIGINT
    to a cell it stops would be lost, so the default handler is put back. A latch
    (:func:`latch_stop_signals`) gives way; a handler someone else installed for
    SIGTERM is kept.
    """
    if not _in_main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, _remember):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    handler = signal.getsignal(signal.SIGTERM)
    if _is_default(handler) or handler is _remember:
        signal.signal(signal.SIGTERM, _interrupt)
