"""Checkpoints: everything a run needs to continue, written atomically and signed.

A checkpoint file (still named ``checkpoint.pkl``, the name older records use)
is a one-line header followed by a payload::

    es-harness-checkpoint 2 ENCODING SHA256 HMAC

``ENCODING`` is ``arrays`` or ``pickle``. An ``arrays`` payload is the
state's structure (dicts, lists, ints, floats, strings, tuples) as JSON, then
the raw bytes of its arrays (float32 centre, optimizer moments, RNG key
arrays...), each named by a numpy dtype string and a shape, so reading it runs
no code. A state holding objects with no such form (a pycma or Nevergrad
optimizer, stable-baselines3's normalisation statistics) is a ``pickle``
payload. Both restore exactly what was saved: dtypes, numpy scalar types and
tuples come back as they were, so a resume stays bitwise.

``SHA256`` is the payload's digest: a mismatch means damage (truncated,
bit-flipped). ``HMAC`` is HMAC-SHA256 of the payload keyed by the user's
checkpoint key (:func:`key_path`: a file created with mode 0600 on the first
write), so it tells *authorship*: a file this user's harness did not write
(a planted pickle with a recomputed digest) is refused before a byte of its
payload is decoded. Pickled bytes the algorithms keep inside their state
(pycma's optimizer, SB3's ``model.save`` zip) sit under the same signature.
docs/trust.md says what is and is not protected.

Format 1 files (a SHA-256 header and a pickle, written before signing
existed) carry no authorship: they are read only when the caller passes
``trust_legacy`` (``harness resume --trust-legacy-checkpoint``).

A file is written to a temporary file in the same directory, flushed and
fsynced, then renamed over the old one, so a reader (or a head killed
mid-write) only ever sees the previous checkpoint or the new one. A damaged,
foreign or unreadable file is reported as :class:`CheckpointError` naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import pickle
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness import rundir
from harness.commands import UsageError
from harness.rundir import atomic_write

#: The checkpoint's file name in a run directory (:mod:`harness.rundir` owns the names).
CHECKPOINT_NAME = rundir.CHECKPOINT
#: Testing hook (``harness check-repro``): a run delivers itself a real SIGINT after this step.
INTERRUPT_ENV = "HARNESS_INTERRUPT_AT_STEP"
#: Where the checkpoint key lives when set (tests and CI point it at a temporary file).
KEY_ENV = "HARNESS_CHECKPOINT_KEY_FILE"
MAGIC = b"es-harness-checkpoint"
FORMAT_VERSION = 2
#: Unsigned checkpoints (SHA-256 and a pickle) of earlier versions.
LEGACY_FORMAT = 1
ARRAYS, PICKLE = "arrays", "pickle"
_TEMP_PREFIX = rundir.CHECKPOINT_TEMP_PREFIX
#: Marks a tagged value in an ``arrays`` payload's JSON structure.
_TAG = "__checkpoint__"
_KEY_BYTES = 32


class CheckpointError(ValueError):
    """A checkpoint file is missing, damaged, foreign or not a checkpoint; one line names it."""


@dataclass(frozen=True)
class EncodedState:
    """A state frozen in bytes (later mutation of the state cannot reach it)."""

    encoding: str
    data: bytes


# -- the key ------------------------------------------------------------------------------


def key_path() -> Path:
    """The user's checkpoint key: ``$HARNESS_CHECKPOINT_KEY_FILE``, else under the config dir."""
    explicit = os.environ.get(KEY_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "es-harness" / "checkpoint.key"


def _read_key(path: Path) -> bytes:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < _KEY_BYTES:
        raise CheckpointError(
            f"checkpoint key {path} is malformed (expected {_KEY_BYTES} hex bytes)"
        )
    return key


def checkpoint_key(create: bool = False) -> bytes:
    """The user's checkpoint key; ``create`` makes one (mode 0600) when there is none.

    Two processes creating it at once agree: the key is written to a temporary
    file and hard-linked into place, so only one of them wins and both read it.
    """
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            raise CheckpointError(
                f"no checkpoint key at {path}: this user has written no signed checkpoint "
                f"here (set {KEY_ENV} to the key of the user who wrote it)"
            ) from None
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint key {path}: {error.strerror}") from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.parent / f".{path.name}-{secrets.token_hex(6)}"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(handle, "w", encoding="ascii") as stream:
            stream.write(secrets.token_hex(_KEY_BYTES) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return _read_key(path)


def ensure_checkpoint_key() -> None:
    """Refuse (a usage error, before anything is written) a run that could not sign its
    checkpoints."""
    try:
        checkpoint_key(create=True)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(
            f"cannot create the checkpoint key {key_path()}: {error.strerror} "
            f"(set {KEY_ENV} to a writable path)"
        ) from None


def _signature(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).hexdigest().encode("ascii")


# -- encoding -----------------------------------------------------------------------------


class _NotArrays(TypeError):
    """A value with no arrays-and-JSON form (the state is pickled instead)."""


class _ArrayWriter:
    """Collects the raw bytes of a state's arrays; JSON nodes point into them by offset."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def add(self, data: bytes) -> int:
        offset = self.size
        self.chunks.append(data)
        self.size += len(data)
        return offset


def _to_structure(value: Any, blob: _ArrayWriter) -> Any:
    """``value`` as JSON-ready structure; its arrays, numpy scalars and bytes go to ``blob``."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is np.ndarray or isinstance(value, np.generic):
        array = np.asarray(value)  # tobytes() below is C order whatever the strides
        if array.dtype.hasobject or array.dtype.kind == "V":
            raise _NotArrays(f"array of {array.dtype}")
        return {
            _TAG: "array" if kind is np.ndarray else "scalar",
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "offset": blob.add(array.tobytes()),
        }
    if kind is bytes:
        return {_TAG: "bytes", "offset": blob.add(value), "size": len(value)}
    if kind is list:
        return [_to_structure(item, blob) for item in value]
    if kind is tuple:
        return {_TAG: "tuple", "items": [_to_structure(item, blob) for item in value]}
    if kind is dict:
        if not all(type(key) is str for key in value) or _TAG in value:
            raise _NotArrays("dict keys")
        return {key: _to_structure(item, blob) for key, item in value.items()}
    raise _NotArrays(kind.__name__)


def _from_structure(node: Any, blob: bytes) -> Any:
    if isinstance(node, list):
        return [_from_structure(item, blob) for item in node]
    if not isinstance(node, dict):
        return node
    tag = node.get(_TAG)
    if tag is None:
        return {key: _from_structure(item, blob) for key, item in node.items()}
    if tag == "tuple":
        return tuple(_from_structure(item, blob) for item in node["items"])
    offset = int(node["offset"])
    if tag == "bytes":
        return blob[offset : offset + int(node["size"])]
    dtype = np.dtype(node["dtype"])
    if dtype.hasobject or dtype.kind == "V":  # a numpy dtype string never names code
        raise ValueError(f"dtype {node['dtype']!r} is not allowed")
    shape = tuple(int(n) for n in node["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(blob, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
    if tag == "array":
        return array
    if tag == "scalar":
        return array[()]
    raise ValueError(f"unknown tag {tag!r}")


def encode_state(state: dict[str, Any]) -> EncodedState:
    """Freeze a state in bytes: arrays plus JSON where it has that form, else a pickle.

    An ``arrays`` payload is the JSON structure's length (8 bytes, little-endian),
    the structure, then the arrays' raw bytes, which its nodes locate by offset,
    dtype string and shape.
    """
    blob = _ArrayWriter()
    try:
        structure = _to_structure(state, blob)
    except _NotArrays:
        return EncodedState(PICKLE, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    text = json.dumps(structure, separators=(",", ":")).encode("utf-8")
    return EncodedState(ARRAYS, b"".join([len(text).to_bytes(8, "little"), text, *blob.chunks]))


def _decode_arrays(payload: bytes) -> Any:
    length = int.from_bytes(payload[:8], "little")
    structure = json.loads(payload[8 : 8 + length].decode("utf-8"))
    return _from_structure(structure, payload[8 + length :])


# -- files ----------------------------------------------------------------------------------


def write_checkpoint_payload(path: Path, encoded: EncodedState) -> None:
    """Write an :func:`encode_state` result to ``path`` atomically, signed with the user's key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = encoded.data
    digest = hashlib.sha256(payload).hexdigest().encode("ascii")
    signature = _signature(checkpoint_key(create=True), payload)
    header = b"%s %d %s %s %s\n" % (
        MAGIC,
        FORMAT_VERSION,
        encoded.encoding.encode("ascii"),
        digest,
        signature,
    )
    atomic_write(path, [header, payload], prefix=_TEMP_PREFIX)


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` through a temporary file and an atomic rename."""
    write_checkpoint_payload(path, encode_state(state))


def remove_stale_temporaries(folder: Path) -> None:
    """Delete temporary files a killed writer left behind (never the checkpoint itself)."""
    for leftover in folder.glob(f"{_TEMP_PREFIX}*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _read_checkpoint(path: Path) -> tuple[list[bytes], bytes]:
    """A checkpoint file's header fields and payload, nothing of it decoded.

    Only a regular file is read (a FIFO or a link to ``/dev/zero`` is refused, not waited
    on or read until memory runs out), and only when its first line is a checkpoint's.
    """
    try:
        with rundir.open_regular(path) as stream:
            data = stream.readline(256)
            if data.startswith(MAGIC + b" ") and data.endswith(b"\n"):
                data += stream.read()
    except rundir.MissingRunFile:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except rundir.UnreadableRun as error:
        raise CheckpointError(f"checkpoint {path} cannot be read: {error}") from None
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error.strerror}") from None
    header, newline, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) < 3 or parts[0] != MAGIC:
        raise CheckpointError(f"checkpoint {path} is damaged: not an es-harness checkpoint")
    return parts, payload


def _whole_payload(path: Path, parts: list[bytes], payload: bytes) -> tuple[str, str]:
    """Check a format-2 header and its payload's SHA-256; return (encoding, signature)."""
    version = parts[1].decode("ascii", errors="replace")
    if version != str(FORMAT_VERSION) or len(parts) != 5:
        raise CheckpointError(
            f"checkpoint {path} has format {version!r}; this version reads {FORMAT_VERSION}"
        )
    encoding, digest, signature = (part.decode("ascii", errors="replace") for part in parts[2:])
    if hashlib.sha256(payload).hexdigest() != digest:
        size = len(payload) + sum(len(part) + 1 for part in parts)
        raise CheckpointError(f"checkpoint {path} is damaged: checksum mismatch ({size} bytes)")
    return encoding, signature


def load_checkpoint(path: Path, trust_legacy: bool = False) -> dict[str, Any]:
    """Read, verify and decode a checkpoint written by :func:`save_checkpoint`.

    Nothing of the payload is decoded before its signature verifies with this
    user's key; ``trust_legacy`` also reads an unsigned format-1 file.
    """
    parts, payload = _read_checkpoint(path)
    if parts[1] == b"%d" % LEGACY_FORMAT and len(parts) == 3:
        return _load_legacy(path, parts[2], payload, trust_legacy)
    encoding, signature = _whole_payload(path, parts, payload)
    key = checkpoint_key(create=False)
    if not hmac.compare_digest(_signature(key, payload), signature.encode("ascii")):
        raise CheckpointError(
            f"checkpoint {path} was not written with this user's checkpoint key "
            f"({key_path()}): refused unread (planted, or from another user or machine)"
        )
    try:
        if encoding == ARRAYS:
            state = _decode_arrays(payload)
        elif encoding == PICKLE:
            state = pickle.loads(payload)
        else:
            raise ValueError(f"unknown encoding {encoding!r}")
    except Exception as error:  # a signed file this code cannot read: another code version
        raise CheckpointError(f"checkpoint {path} cannot be read: {error}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} is damaged: unexpected content")
    return state


def signed_by_user(path: Path) -> bool:
    """Whether ``path`` is a whole format-2 checkpoint signed with this user's key.

    Nothing of the payload is decoded: this is the test of authorship that lets a run's
    recorded ``imports`` count as the user's word (:mod:`harness.user_modules`). False for
    a missing, damaged, unsigned (format 1) or foreign file, and when there is no key.
    """
    try:
        parts, payload = _read_checkpoint(path)
        _, signature = _whole_payload(path, parts, payload)
        key = checkpoint_key(create=False)
    except CheckpointError:
        return False
    return hmac.compare_digest(_signature(key, payload), signature.encode("ascii"))


# -- the signed config ----------------------------------------------------------------------
#
# ``config.json`` is a record anyone who can write the runs directory can edit. A run killed
# before its first checkpoint has nothing else to restart from, so the observer signs the
# exact bytes of every ``config.json`` it writes (``config.sig``, written first) and
# ``harness resume`` restarts such a run only when they verify with this user's key.

#: First bytes of ``config.sig``; also what the HMAC covers before the config's bytes, so a
#: config signature can never pass for a checkpoint's or the other way round.
CONFIG_MAGIC = b"es-harness-config 1"


def _config_signature_line(key: bytes, config_bytes: bytes) -> bytes:
    return b"%s %s\n" % (CONFIG_MAGIC, _signature(key, CONFIG_MAGIC + b"\n" + config_bytes))


def write_config_signature(run_dir: Path, config_bytes: bytes) -> None:
    """Sign ``config_bytes`` (what is about to become ``run_dir/config.json``) with the
    user's key, atomically, in ``run_dir/config.sig``."""
    line = _config_signature_line(checkpoint_key(create=True), config_bytes)
    atomic_write(run_dir / rundir.CONFIG_SIGNATURE, [line], durable=False)


def config_signed_by_user(run_dir: Path) -> bool:
    """Whether ``run_dir/config.json`` is byte for byte a config this user's harness signed.

    False for a missing, edited or foreign config or signature, a signature that is not a
    regular file, and when there is no key. Nothing of the config is parsed here.
    """
    try:
        config_bytes = rundir.read_json_bytes(run_dir / rundir.CONFIG)
        fd = os.open(run_dir / rundir.CONFIG_SIGNATURE, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return False
            line = stream.read(256)
        key = checkpoint_key(create=False)
    except (rundir.UnreadableRun, CheckpointError, OSError):
        return False
    return hmac.compare_digest(line, _config_signature_line(key, config_bytes))


def _load_legacy(path: Path, digest: bytes, payload: bytes, trust_legacy: bool) -> dict[str, Any]:
    if not trust_legacy:
        raise CheckpointError(
            f"checkpoint {path} is an unsigned pickle of an earlier version (format "
            f"{LEGACY_FORMAT}): reading it could run code; if you wrote it, resume it once "
            "with --trust-legacy-checkpoint (its next checkpoint is signed)"
        )
    if hashlib.sha256(payload).hexdigest().encode("ascii") != digest:
        raise CheckpointError(
            f"checkpoint {path} is damaged: checksum mismatch ({len(payload)} bytes)"
        )
    try:
        state = pickle.loads(payload)
    except Exception as error:  # a valid checksum of an unreadable pickle: wrong code version
        raise CheckpointError(f"checkpoint {path} cannot be read: {error}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} is damaged: unexpected content")
    return state


def adopt_checkpoint(path: Path) -> str:
    """Sign a format-2 checkpoint written elsewhere with this user's key; return its encoding.

    The act of trust behind ``harness benchmark run --adopt-unfinished``: a run carried
    from another machine (a committed archive of unfinished runs) was signed with that
    machine's key, which never travels. The file must be whole (its SHA-256 verifies);
    its payload is not decoded here, only re-signed, so whatever a pickle in it would do
    happens at the resume the caller asked for, as with ``--trust-legacy-checkpoint``.
    """
    parts, payload = _read_checkpoint(path)
    encoding, _ = _whole_payload(path, parts, payload)
    if encoding not in (ARRAYS, PICKLE):
        raise CheckpointError(f"checkpoint {path} has an unknown encoding {encoding!r}")
    write_checkpoint_payload(path, EncodedState(encoding, payload))
    return encoding
