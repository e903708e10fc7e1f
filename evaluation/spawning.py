"""Start ``spawn`` processes that do not run the program's ``__main__`` again.

A process started with multiprocessing's ``spawn`` method imports the parent's main
module first (by ``__main__.__spec__.name``, else by ``__main__.__file__``), so that
objects defined there can be unpickled. A worker of the harness needs none: it is
given a function of this package and plain data (names, dicts, specs). And importing
the main module again runs a script's top level again: a script that calls
``harness.run(...)`` without an ``if __name__ == "__main__":`` guard then starts a run
in each worker, and a script read from standard input (``python - < script.py``) has
a ``__file__`` of ``<stdin>`` that no child can open. Processes started inside
:func:`main_module_hidden` see a main module without a file or spec, which
multiprocessing leaves alone, so they start from this package only.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Iterator

#: Held while the stand-in is in place: two threads starting workers at once restore
#: the real module, not each other's stand-in.
_LOCK = threading.RLock()


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Within the block, ``sys.modules["__main__"]`` is an empty module of that name.

    Start (``Process.start()``) the processes in the block; nothing else belongs there.
    A target or argument that lives in ``__main__`` then fails to pickle here, with
    pickle's message, instead of failing in every child.
    """
    with _LOCK:
        main = sys.modules.get("__main__")
        if main is None or (
            getattr(main, "__spec__", None) is None and getattr(main, "__file__", None) is None
        ):
            yield  # nothing a child would import (python -c, a notebook's kernel)
            return
        stand_in = types.ModuleType("__main__")
        sys.modules["__main__"] = stand_in
        try:
            yield
        finally:
            if sys.modules.get("__main__") is stand_in:
                sys.modules["__main__"] = main
