"""Checkpoints: everything a run needs to continue, written atomically.

A checkpoint file is a one-line header (magic, format version, SHA-256 of the
payload) followed by a pickle. It is written to a temporary file in the same
directory, flushed and fsynced, then renamed over the old one, so a reader
(or a head killed mid-write) only ever sees the previous checkpoint or the new
one, never half of one. A damaged file (truncated, bit-flipped, not a
checkpoint) is reported as :class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
from pathlib import Path
from typing import Any

from harness import rundir
from harness.rundir import atomic_write

#: The checkpoint's file name in a run directory (:mod:`harness.rundir` owns the names).
CHECKPOINT_NAME = rundir.CHECKPOINT
#: Testing hook (``harness check-repro``): a run delivers itself a real SIGINT after this step.
INTERRUPT_ENV = "HARNESS_INTERRUPT_AT_STEP"
MAGIC = b"es-harness-checkpoint"
FORMAT_VERSION = 1
_TEMP_PREFIX = rundir.CHECKPOINT_TEMP_PREFIX


class CheckpointError(ValueError):
    """A checkpoint file is missing, damaged or not a checkpoint; one line names it."""


def encode_state(state: dict[str, Any]) -> bytes:
    """Serialise a state (a deep copy frozen in bytes: later mutation cannot reach it)."""
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def write_checkpoint_payload(path: Path, payload: bytes) -> None:
    """Write an :func:`encode_state` payload to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(payload).hexdigest().encode("ascii")
    header = b"%s %d %s\n" % (MAGIC, FORMAT_VERSION, digest)
    atomic_write(path, [header, payload], prefix=_TEMP_PREFIX)


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` through a temporary file and an atomic rename."""
    write_checkpoint_payload(path, encode_state(state))


def remove_stale_temporaries(folder: Path) -> None:
    """Delete temporary files a killed writer left behind (never the checkpoint itself)."""
    for leftover in folder.glob(f"{_TEMP_PREFIX}*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read and verify a checkpoint written by :func:`save_checkpoint`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error.strerror}") from None
    header, newline, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != MAGIC:
        raise CheckpointError(f"checkpoint {path} is damaged: not an es-harness checkpoint")
    if parts[1] != str(FORMAT_VERSION).encode():
        raise CheckpointError(
            f"checkpoint {path} has format {parts[1].decode(errors='replace')!r}; "
            f"this version reads {FORMAT_VERSION}"
        )
    if hashlib.sha256(payload).hexdigest().encode("ascii") != parts[2]:
        raise CheckpointError(
            f"checkpoint {path} is damaged: checksum mismatch ({len(data)} bytes)"
        )
    try:
        state = pickle.loads(payload)
    except Exception as error:  # a valid checksum of an unreadable pickle: wrong code version
        raise CheckpointError(f"checkpoint {path} cannot be read: {error}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} is damaged: unexpected content")
    return state
