"""Progress for a terminal and for a log: a tqdm bar, or plain lines at a low rate.

A tqdm bar redraws itself with ``\\r`` every few seconds: right in a terminal, noise
in a file (a sweep cell's log, CI's output), where every redraw is kept. Where the
stream is not a terminal, :func:`progress_bar` gives a :class:`LineProgress` instead:
one plain line each time another :data:`LINE_STEP_PERCENT` of the total is done or
:data:`LINE_EVERY_S` have passed, and one at the end. ``HARNESS_PROGRESS=0`` turns
both off (the callers read it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

from tqdm import tqdm

#: A line each time another this much of the total is done ...
LINE_STEP_PERCENT = 10.0
#: ... or this many seconds have passed since the last line.
LINE_EVERY_S = 60.0


class ProgressBar(Protocol):
    """What the harness asks of a bar (tqdm's names)."""

    n: float

    def update(self, n: float = 1) -> Any: ...

    def set_postfix(
        self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any
    ) -> None: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...

    def write(self, s: str, file: Any = None) -> Any: ...

    def close(self) -> None: ...


def is_terminal(stream: IO[str] | None) -> bool:
    """Whether ``stream`` is a terminal (False for None, a file, a pipe)."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress:
    """tqdm's interface as plain lines, for a stream that is not a terminal."""

    def __init__(
        self,
        total: float,
        initial: float = 0.0,
        desc: str = "",
        unit: str = "",
        file: IO[str] | None = None,
        disable: bool = False,
        step_percent: float = LINE_STEP_PERCENT,
        every_s: float = LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = float(total)
        self.n = float(initial)
        self.desc = desc
        self.unit = unit
        self.file = file
        self.disable = disable or file is None
        self.step_percent = step_percent
        self.every_s = every_s
        self._clock = clock
        self._started = self._last_at = clock()
        self._last_percent = self._percent()
        self._postfix = ""
        self._closed = False

    def _percent(self) -> float:
        return 100.0 * self.n / self.total if self.total > 0 else 0.0

    def _line(self) -> str:
        elapsed = tqdm.format_interval(self._clock() - self._started)
        count = "" if self.unit in ("", "it") else f" {self.n:g}/{self.total:g} {self.unit}s"
        postfix = f", {self._postfix}" if self._postfix else ""
        return f"{self.desc}: {self._percent():3.0f}%{count} [{elapsed}{postfix}]"

    def _emit(self) -> None:
        self._last_at = self._clock()
        self._last_percent = self._percent()
        if self.file is not None:
            print(self._line(), file=self.file, flush=True)

    def _maybe_emit(self) -> None:
        if self.disable or self._closed:
            return
        step = self._percent() // self.step_percent > self._last_percent // self.step_percent
        if step or self._clock() - self._last_at >= self.every_s:
            self._emit()

    def update(self, n: float = 1) -> None:
        self.n += n
        self._maybe_emit()

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**dict(ordered_dict or {}), **kwargs}
        self._postfix = ", ".join(f"{key}={value}" for key, value in items.items())
        self._maybe_emit()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self._postfix = s
        self._maybe_emit()

    def write(self, s: str, file: IO[str] | None = None) -> None:
        """A message line, where ``tqdm.write`` puts it (standard output by default)."""
        print(s, file=file or sys.stdout, flush=True)

    def close(self) -> None:
        """The last line, unless the last one said the same share."""
        if not self.disable and not self._closed and self._percent() != self._last_percent:
            self._emit()
        self._closed = True


def progress_bar(
    *,
    total: float,
    initial: float = 0.0,
    desc: str = "",
    file: IO[str] | None,
    disable: bool = False,
    unit: str = "it",
    bar_format: str | None = None,
) -> ProgressBar:
    """A tqdm bar where ``file`` is a terminal, else :class:`LineProgress`."""
    if is_terminal(file):
        bar: ProgressBar = tqdm(
            total=total,
            initial=initial,
            desc=desc,
            file=file,
            disable=disable,
            unit=unit,
            bar_format=bar_format,
            dynamic_ncols=True,
        )
        return bar
    return LineProgress(total, initial, desc=desc, unit=unit, file=file, disable=disable)
