"""Import Sacred without the pandas it imports only in case a run stores a DataFrame.

Sacred 0.8.7 tries ``import pandas`` when it is first imported
(``sacred/optional.py``) for one use: registering jsonpickle's handlers so that a
pandas object in a config or a result can be serialised (``sacred/serializer.py``).
A harness run stores plain numbers, strings and lists there, and pandas takes a
third of a second to import, a fifth of a one-generation CartPole run. So the
first import of Sacred is made with pandas hidden, unless something in the
process has imported pandas already (a notebook, a report), in which case Sacred
sees it as usual. pandas imports normally afterwards. Importing this module does it.
"""

from __future__ import annotations

import sys


def import_sacred_without_pandas() -> None:
    """Import ``sacred`` (once) with pandas unavailable to it, when pandas is not loaded."""
    if "sacred" in sys.modules or "pandas" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # an ImportError for Sacred
    try:
        import sacred  # noqa: F401
    finally:
        if sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]


import_sacred_without_pandas()
