"""Stop signals as KeyboardInterrupt, so that every way of stopping takes Ctrl-C's path.

``kill`` (SIGTERM; also what batch schedulers and the end of a shell session send)
would otherwise end a run head with no checkpoint of its last steps and its record
left at RUNNING, and end a sweep while its cells, each in its own session, run on.
Raised as KeyboardInterrupt instead, it has the head write its last complete step
and record INTERRUPTED, and the sweep stop its cells first, as Ctrl-C does.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def interrupt_on_stop_signals() -> None:
    """Make SIGINT and SIGTERM raise KeyboardInterrupt in this (main-thread) process.

    A head started by a background job of a shell (``nohup harness sweep ... &``)
    inherits SIGINT as ignored, and Python then installs no handler: a sweep's SIGINT
    to a cell it stops would be lost, so the default handler is put back. A handler
    someone else installed for SIGTERM is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
