"""Checkpoints: everything a run needs to continue, written atomically."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

CHECKPOINT_NAME = "checkpoint.pkl"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` through a temporary file and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".checkpoint-", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(state, stream, protocol=pickle.HIGHEST_PROTOCOL)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`."""
    with open(path, "rb") as stream:
        state: dict[str, Any] = pickle.load(stream)
    return state
