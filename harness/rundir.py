"""The run-directory format: file names, the liveness lock, and how runs are read and written.

This module owns the layout of a run directory, writer and reader both. The
Sacred observer (:mod:`harness.experiment`), run records, sweeps, resume,
check-repro, reports and benches name files, take the lock and read statuses
only through it. It is the leaf layer: it imports nothing from the rest of the
harness (nor Sacred, pandas or numpy), so any layer may use it.

A run is a Sacred ``FileStorageObserver`` directory ``RUNS_DIR/<id>/``:

``config.json`` (:data:`CONFIG`)
    the completed run config: every knob that shaped the run.
``config.sig`` (:data:`CONFIG_SIGNATURE`)
    ``config.json``'s HMAC with the user's checkpoint key, written before it.
``run.json`` (:data:`RUN`)
    status (:data:`STATUSES`), start/stop time, ``heartbeat``, host info,
    ``head`` (the process writing the run: pid, hostname), ``result``,
    ``artifacts``, ``fail_trace``; after a resume a ``resumed`` list.
``metrics.json`` (:data:`METRICS`)
    ``{name: {"steps": [...], "values": [...], "timestamps": [...]}}``, each
    series sorted by step (:func:`merge_metrics`).
``cout.txt`` (:data:`COUT`)
    the captured output.
``checkpoint.pkl`` (:data:`CHECKPOINT`)
    the last checkpoint (format in :mod:`harness.checkpoint`: signed with the
    user's key; arrays and JSON, or a pickle), replaced atomically through
    temporaries named ``.checkpoint-*``.
``.run.lock`` (:data:`LOCK`)
    the liveness lock: an ``flock`` held by the process running the run, which
    the kernel drops when that process dies (SIGKILL included); the file holds
    ``PID HOST`` of the last holder.
artifacts
    ``final_params.npy``, ``policy_spec.json``, ``summary.json`` (CPU-seconds,
    time to target, the wall-clock breakdown) and ``population.npz`` (format
    in :mod:`harness.records`).

A runs directory's runs are its numeric sub-directories (Sacred's ids);
``_sources``, ``_sweeps`` and other names are bookkeeping.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import io
import json
import os
import secrets
import socket
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ARTIFACT_NAMES",
    "CHECKPOINT",
    "CHECKPOINT_TEMP_PREFIX",
    "CONFIG",
    "CONFIG_SIGNATURE",
    "COUT",
    "FINAL_PARAMS",
    "LOCK",
    "METRICS",
    "POLICY_SPEC",
    "POPULATION",
    "RUN",
    "STATUSES",
    "SUMMARY",
    "ArchiveLimits",
    "ArchiveRefused",
    "MissingRunFile",
    "RecordWriteError",
    "RunHeader",
    "RunRecord",
    "UnreadableRun",
    "append_cout",
    "append_no_follow",
    "archive_limits",
    "atomic_write",
    "find_run_dirs",
    "head_info",
    "heartbeat_age_s",
    "is_run_dir",
    "json_max_bytes",
    "json_max_values",
    "json_values",
    "limits_help",
    "lock_holder",
    "lock_run_dir",
    "merge_metrics",
    "metrics_look_complete",
    "open_regular",
    "overwrite_json_in_place",
    "read_header",
    "read_json",
    "read_json_bytes",
    "read_metrics",
    "read_run",
    "read_status",
    "remove_stale_extractions",
    "resumed_entry",
    "run_dirs",
    "run_is_dead",
    "scan_runs",
    "truncate_metrics",
    "write_json_atomic",
]

CONFIG = "config.json"
RUN = "run.json"
METRICS = "metrics.json"
COUT = "cout.txt"
CHECKPOINT = "checkpoint.pkl"
#: Temporaries of a checkpoint being written (a killed writer may leave one behind).
CHECKPOINT_TEMP_PREFIX = ".checkpoint-"
LOCK = ".run.lock"
#: HMAC of ``config.json`` with the user's checkpoint key (:mod:`harness.checkpoint`): a
#: run killed before its first checkpoint is restarted only from a config it signed.
CONFIG_SIGNATURE = "config.sig"
FINAL_PARAMS = "final_params.npy"
POLICY_SPEC = "policy_spec.json"
SUMMARY = "summary.json"
POPULATION = "population.npz"
#: Artifacts every finished run stores (``population.npz`` only when it logged one).
ARTIFACT_NAMES = (FINAL_PARAMS, POLICY_SPEC, SUMMARY)
STATUSES = ("RUNNING", "COMPLETED", "FAILED", "INTERRUPTED", "QUEUED")


class UnreadableRun(ValueError):
    """A run directory that cannot be read; the message is one line naming it."""


class MissingRunFile(UnreadableRun):
    """A run file that is not there (yet: a run being created writes them one by one)."""


class RecordWriteError(RuntimeError):
    """A file of a run record could not be written (a full disk, say); one line naming it.

    The run fails at once: it must not train on with metrics that never reach the disk.
    """

    def __init__(self, path: Path, error: OSError) -> None:
        reason = error.strerror or str(error) or type(error).__name__
        super().__init__(f"cannot write {path.name} of run {path.parent.name}: {reason}")
        self.path = path


# -- writing ----------------------------------------------------------------------------


def atomic_write(
    path: Path, chunks: Sequence[bytes], durable: bool = True, prefix: str | None = None
) -> None:
    """Write ``chunks`` to a new file beside ``path``, then rename it over ``path``.

    Readers, and a process killed at any instant, see the old file or the new
    one. ``durable`` also fsyncs the data and the directory (survives power loss).
    The file gets the usual permissions (0666 less the umask). The temporary is
    named ``prefix`` + random hex (default prefix: ``.NAME-``).
    """
    prefix = f".{path.name}-" if prefix is None else prefix
    while True:
        temporary = path.parent / f"{prefix}{secrets.token_hex(6)}"
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(handle, "wb") as stream:
            for chunk in chunks:
                stream.write(chunk)
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (best effort: not every filesystem allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON-ready ``data`` the way Sacred does (sorted, indented), through a rename.

    A head killed mid-write leaves the previous file intact, never half a file.
    Sacred's objects go through its ``flatten`` first (the observer does that).
    """
    text = json.dumps(data, sort_keys=True, indent=2)
    atomic_write(path, [text.encode("utf-8")], durable=False)


def overwrite_json_in_place(path: Path, data: Any) -> None:
    """Rewrite ``path`` in place with compact JSON: the last resort on a full disk.

    A rename needs room for a second copy; overwriting the file's own blocks
    does not when the new text is no longer than the old. A process killed
    mid-write leaves a damaged file, which readers treat as such.
    """
    text = json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")
    with os.fdopen(os.open(path, os.O_RDWR | os.O_NOFOLLOW), "r+b") as stream:
        stream.write(text)
        stream.truncate(len(text))
        stream.flush()
        os.fsync(stream.fileno())


def append_cout(run_dir: Path, text: str) -> None:
    """Append a line of the harness's own to the run's captured output.

    Never through a link: a ``cout.txt`` that is one (planted in a run directory someone
    else wrote) is an ``OSError`` (ELOOP), not a write to the file it names.
    """
    append_no_follow(run_dir / COUT, text.encode("utf-8"))


#: Flags of every write to an existing file of a run directory: never through a link.
_WRITE_NO_FOLLOW = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW


def append_no_follow(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created 0666 less the umask), refusing a link (ELOOP)."""
    fd = os.open(path, _WRITE_NO_FOLLOW, 0o666)
    with os.fdopen(fd, "ab") as stream:
        stream.write(data)


# -- the liveness lock --------------------------------------------------------------------


def lock_run_dir(run_dir: Path) -> int | None:
    """Take the run's liveness lock: an fd (close it to release), or None when it is held.

    The kernel drops an ``flock`` when its holder dies, SIGKILL included, so a
    run whose lock can be taken is not running anywhere on this machine.
    """
    # O_NOFOLLOW: a planted link must not make the lock truncate the file it names
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
    return fd


def run_is_dead(run_dir: Path) -> bool:
    """True when the run's liveness lock is free: no process of this machine runs it.

    A run without the lock file (older records) is not known to be dead.
    """
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock if we took it
    return True


def lock_holder(run_dir: Path) -> str:
    """Who holds (or last held) the lock, for messages: ``pid P on HOST``."""
    try:
        pid, _, host = (run_dir / LOCK).read_text().strip().partition(" ")
    except OSError:
        return "another process"
    return f"pid {pid} on {host}" if pid else "another process"


def head_info() -> dict[str, Any]:
    """Which process writes the run (``run.json``'s ``head``; resume checks it)."""
    info: dict[str, Any] = {"pid": os.getpid(), "hostname": socket.gethostname()}
    node = os.environ.get("HARNESS_RAY_NODE")
    if node:  # a sweep cell run as Ray work: the node that ran it (harness.sweep.ray_cells)
        info["ray_node"] = node
    return info


# -- status ---------------------------------------------------------------------------------


def open_regular(path: Path) -> io.BufferedReader:
    """``path`` opened for binary reading when it is a regular file (a link to one is
    followed); :class:`MissingRunFile` or :class:`UnreadableRun` (one line naming it)
    otherwise. A FIFO is refused rather than waited on, a device (a link to ``/dev/zero``)
    rather than read until memory runs out: a run directory may come from someone else."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise MissingRunFile(f"{path.name} is missing") from None
    except OSError as error:
        raise UnreadableRun(f"cannot read {path.name}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableRun(f"{path.name} is not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_json_bytes(path: Path) -> bytes:
    """The bytes of a JSON file of a run, read within :func:`json_max_bytes`.

    The file is read only when it is a regular file of at most the limit
    (``HARNESS_JSON_MAX_BYTES``): a run directory may come from someone else, and a 1 GB
    ``metrics.json`` (or a link to ``/dev/zero``, or a FIFO) would otherwise take the
    reading command's memory, or hang it, before any check could say no. Raises
    :class:`MissingRunFile` or :class:`UnreadableRun`, one line naming the file.
    """
    limit = json_max_bytes(path.name)
    try:
        with open_regular(path) as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > limit:
                raise UnreadableRun(_json_too_big(path, size, limit))
            data = stream.read(limit + 1)  # the file may have grown since fstat
    except OSError as error:
        raise UnreadableRun(f"cannot read {path.name}: {error.strerror}") from None
    if len(data) > limit:
        raise UnreadableRun(_json_too_big(path, len(data), limit))
    _check_json_values(path, data)
    return data


#: What one value of a parsed JSON file may cost in memory, about (a float 32 bytes, a short
#: string 60, an empty object 72: measured): the bound on values is a bound on memory.
JSON_VALUE_BYTES = 64
#: A list or an object counts as this many values (with its first entry, up to ~200 bytes).
JSON_CONTAINER_VALUES = 2


def json_values(data: bytes) -> int:
    """An upper bound on the values parsing ``data`` makes, counted without parsing it: one
    per comma, per object key (``":``) and per bracket that opens a list or object (times
    :data:`JSON_CONTAINER_VALUES`). Characters inside strings count too: it never counts
    less than the parser makes."""
    containers = data.count(b"[") + data.count(b"{")
    return data.count(b",") + data.count(b'":') + 1 + JSON_CONTAINER_VALUES * containers


def _check_json_values(path: Path, data: bytes) -> None:
    """Refuse a file whose parse would make more values than :func:`json_max_values`: a
    4 MB ``[{},{},...]`` parses to a million dicts (72 MB), so bytes alone bound nothing."""
    limit = json_max_values()
    values = json_values(data)
    if values > limit:
        raise UnreadableRun(
            f"{path.name} holds about {values:,} values, over the {limit:,} limit for a run "
            f"file (set {JSON_MAX_VALUES_ENV} to read it)"
        )


def read_json(path: Path) -> Any:
    """A JSON file of a run, read within the size and value limits (:func:`read_json_bytes`);
    :class:`UnreadableRun` (one line naming the file) otherwise."""
    data = read_json_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:  # one stray byte: damaged like any other corruption
        raise UnreadableRun(
            f"{path.name} is corrupt (byte {data[error.start]:#04x} at offset "
            f"{error.start} is not UTF-8)"
        ) from None
    del data  # the text alone while the parser builds: a large file is held twice, not thrice
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UnreadableRun(
            f"{path.name} is truncated or corrupt ({error.msg} at line {error.lineno})"
        ) from None
    except RecursionError:  # [[[[...]]]] nested deeper than the parser's stack
        raise UnreadableRun(f"{path.name} is corrupt (nested too deeply)") from None
    except MemoryError:
        raise UnreadableRun(
            f"{path.name} does not fit in memory once parsed (set {JSON_MAX_BYTES_ENV} or "
            f"{JSON_MAX_VALUES_ENV} lower to refuse it sooner)"
        ) from None


def _json_too_big(path: Path, size: int, limit: int) -> str:
    if path.name != METRICS and limit == JSON_RECORD_MAX_BYTES:
        return (
            f"{path.name} is {format_size(size)}, over the {format_size(limit)} limit for a "
            f"run file other than {METRICS}"
        )
    return (
        f"{path.name} is {format_size(size)}, over the {format_size(limit)} limit for a run "
        f"file (set {JSON_MAX_BYTES_ENV} to read it)"
    )


def read_status(run_dir: Path) -> str | None:
    """The run's status from ``run.json``; None when it cannot be read."""
    try:
        entry = read_json(run_dir / RUN)
    except UnreadableRun:
        return None
    return str(entry.get("status", "UNKNOWN")) if isinstance(entry, dict) else None


def heartbeat_age_s(entry: Mapping[str, Any]) -> float | None:
    """Seconds since a ``run.json`` entry's heartbeat (or start); None when it has neither."""
    stamp = entry.get("heartbeat") or entry.get("start_time")
    if not stamp:
        return None
    try:
        beat = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return (now - beat).total_seconds()


def resumed_entry(
    entry: dict[str, Any], time: str, from_step: int, note: Mapping[str, Any]
) -> dict[str, Any]:
    """A stored ``run.json`` entry turned RUNNING again by a resume at ``time`` (ISO).

    Its stop time and failure trace move into a new element of its ``resumed``
    list, with the step it continues from, the status and heartbeat it had, the
    process continuing it and ``note``; its result is dropped.
    """
    previous = {key: entry.pop(key) for key in ("stop_time", "fail_trace") if key in entry}
    resumed = {
        "time": time,
        "from_step": from_step,
        "previous_status": entry.get("status"),
        "previous_heartbeat": entry.get("heartbeat"),
        **{f"previous_{key}": value for key, value in previous.items()},
        "head": head_info(),
        **note,
    }
    entry.setdefault("resumed", []).append(resumed)
    entry.setdefault("artifacts", [])
    entry.setdefault("resources", [])
    entry.update(status="RUNNING", heartbeat=time, head=head_info())
    entry.pop("result", None)
    return entry


# -- metrics ----------------------------------------------------------------------------------


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """``metrics.json`` as stored ({} when there is none); :class:`UnreadableRun` if damaged."""
    path = run_dir / METRICS
    if not path.exists():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise UnreadableRun(f"{METRICS} is not a JSON object")
    return data


def merge_metrics(
    saved: dict[str, Any], new: Mapping[str, Mapping[str, Sequence[Any]]]
) -> dict[str, Any]:
    """``saved`` with the ``new`` rows (steps, values, ISO timestamps) added, sorted by step.

    Rows stay sorted when two writers (the heartbeat thread and a checkpoint
    flush) append out of order. A row already saved (same step, timestamp and
    value) is not added again, so writing the same rows twice is harmless: a
    Ctrl-C that lands after a write but before the writer forgets its pending
    rows makes it write them again.
    """
    for name, series_new in new.items():
        series = saved.setdefault(name, {"values": [], "steps": [], "timestamps": []})
        rows = list(zip(series["steps"], series["values"], series["timestamps"], strict=True))
        added = list(
            zip(series_new["steps"], series_new["values"], series_new["timestamps"], strict=True)
        )
        # only rows at the new rows' steps can repeat them; repr: NaN is a value, NaN != NaN
        steps = {row[0] for row in added}
        seen = {(step, stamp, repr(value)) for step, value, stamp in rows if step in steps}
        for step, value, stamp in added:
            key = (step, stamp, repr(value))
            if key not in seen:
                seen.add(key)
                rows.append((step, value, stamp))
        rows.sort(key=lambda row: row[0])
        series["steps"] = [row[0] for row in rows]
        series["values"] = [row[1] for row in rows]
        series["timestamps"] = [row[2] for row in rows]
    return saved


def truncate_metrics(
    run_dir: Path,
    keep_through_step: int,
    drop_step: int | None = None,
    drop_names: Iterable[str] = (),
) -> None:
    """Keep the metrics up to ``keep_through_step``; drop ``drop_names``' rows at ``drop_step``.

    A resume re-does the steps after its checkpoint (and, when it extends a
    finished run, the final evaluation the old budget forced).
    """
    path = run_dir / METRICS
    if not path.exists():
        return
    dropped = frozenset(drop_names)
    saved = read_metrics(run_dir)
    for name, series in list(saved.items()):
        rows = [
            row
            for row in zip(series["steps"], series["values"], series["timestamps"], strict=True)
            if row[0] <= keep_through_step and not (row[0] == drop_step and name in dropped)
        ]
        if not rows:
            del saved[name]
            continue
        steps, values, stamps = zip(*rows, strict=True)
        series.update(steps=list(steps), values=list(values), timestamps=list(stamps))
    write_json_atomic(path, saved)


def metrics_look_complete(run_dir: str | Path) -> bool:
    """Cheap check that ``metrics.json`` exists and was written to the end (no parse)."""
    path = Path(run_dir) / METRICS
    try:
        with open(path, "rb") as stream:
            stream.seek(0, 2)
            size = stream.tell()
            stream.seek(max(0, size - 64))
            return stream.read().rstrip().endswith(b"}")
    except OSError:
        return False


# -- reading runs -------------------------------------------------------------------------------


@dataclass
class RunHeader:
    """The cheap part of a run: id, directory, status and config (no metrics)."""

    run_id: str
    path: Path
    status: str
    config: dict[str, Any]
    run: dict[str, Any]


@dataclass
class RunRecord(RunHeader):
    """A whole run directory as read from disk."""

    metrics: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    @property
    def artifacts(self) -> list[str]:
        return [str(name) for name in self.run.get("artifacts") or []]

    def artifact_path(self, name: str) -> Path | None:
        """Path of a stored artifact, or None when the run has no such file."""
        path = self.path / name
        return path if path.is_file() else None


def read_header(path: Path) -> RunHeader:
    """Status and config of one run directory; :class:`UnreadableRun` when damaged."""
    run = read_json(path / RUN)
    config = read_json(path / CONFIG)
    if not isinstance(run, dict) or not isinstance(config, dict):
        raise UnreadableRun(f"{RUN} or {CONFIG} is not a JSON object")
    status = str(run.get("status", "UNKNOWN"))
    return RunHeader(path.name, path, status, config, run)


def read_run(path: str | Path) -> RunRecord:
    """Read one run directory; raise :class:`UnreadableRun` (one line) when it is damaged."""
    path = Path(path)
    header = read_header(path)
    metrics: dict[str, dict[str, list[Any]]] = {}
    if (path / METRICS).exists():
        for name, series in read_metrics(path).items():
            if (
                not isinstance(series, dict)
                or not isinstance(series.get("steps", []), list)
                or not isinstance(series.get("values", []), list)
                or len(series.get("steps", [])) != len(series.get("values", []))
            ):
                raise UnreadableRun(f"metric {name!r} in {METRICS} is malformed")
            metrics[str(name)] = series
    elif header.status == "COMPLETED":
        raise UnreadableRun(f"COMPLETED run without {METRICS}")
    return RunRecord(header.run_id, header.path, header.status, header.config, header.run, metrics)


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is one run's directory (rather than a runs directory)."""
    return (path / RUN).exists() or (path / CONFIG).exists()


def run_dirs(runs_dir: Path) -> list[Path]:
    """The run directories of one runs directory (its numeric sub-directories), in id order."""
    if not runs_dir.is_dir():
        return []
    return sorted(
        (p for p in runs_dir.iterdir() if p.is_dir() and p.name.isdigit()),
        key=lambda p: int(p.name),
    )


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories under ``paths``: each a runs directory, one run directory or a run
    archive (:func:`write_run_archive`, unpacked to a temporary folder).

    A runs directory's run directories are its numeric sub-directories (Sacred's
    ids), in id order; ``_sources`` and other bookkeeping folders are ignored.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if is_run_archive(path):
            found += run_dirs(extract_run_archive(path))
            continue
        if not path.is_dir():
            raise UnreadableRun(f"{path} is not a directory")
        if is_run_dir(path):
            found.append(path)
            continue
        found += run_dirs(path)
    return found


def scan_runs(
    runs_dir: str | Path, on_damaged: Callable[[Path, str], None] | None = None
) -> list[RunHeader]:
    """Headers of the readable runs in one runs directory, skipping the rest.

    Used by sweeps to find completed cells. A run being created by another
    process at this moment may lack a file and is quietly not listed; a damaged
    one (corrupt JSON, bytes that are not UTF-8) is also reported to
    ``on_damaged(path, reason)``.
    """
    headers = []
    for path in run_dirs(Path(runs_dir)):
        try:
            headers.append(read_header(path))
        except MissingRunFile:
            continue
        except UnreadableRun as error:
            if on_damaged is not None:
                on_damaged(path, str(error))
    return headers


# -- compact run archives -----------------------------------------------------------------------

#: A committed report's run records: one ``.tar.xz`` of run directories, no checkpoints.
ARCHIVE_SUFFIX = ".tar.xz"
#: What a run keeps in an archive: its records and the small artifacts a report reads.
ARCHIVED_FILES = (CONFIG, RUN, METRICS, SUMMARY, POLICY_SPEC)


def is_run_archive(path: Path) -> bool:
    """Whether ``path`` names a run archive (a file ending in :data:`ARCHIVE_SUFFIX`)."""
    return path.name.endswith(ARCHIVE_SUFFIX) and path.is_file()


def write_run_archive(runs: Sequence[Path], out: Path, also: Sequence[str] = ()) -> None:
    """Write ``runs`` (run directories) to ``out`` as ``runs/<id>/<file>``, atomically.

    Only :data:`ARCHIVED_FILES` travel, plus the files named in ``also`` (a report whose
    figures replay stored policies keeps them): enough for ``harness report`` to redraw
    every figure but the map of visited models. Members are added in a fixed order with
    fixed owners and times, so the same runs give the same bytes.
    """
    import io
    import lzma
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for run_dir in sorted(runs, key=lambda p: int(p.name) if p.name.isdigit() else p.name):
            for name in dict.fromkeys([*ARCHIVED_FILES, *also]):
                path = run_dir / name
                if not path.is_file():
                    continue
                data = path.read_bytes()
                info = tarfile.TarInfo(f"runs/{run_dir.name}/{name}")
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    packed = lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, [packed], prefix=f".{out.name}-")


# -- reading limits ---------------------------------------------------------------------------
#
# An archive or a run directory may come from someone else (a pull request, a download), and
# reading it must not be able to fill the memory or the disk: a 156 KB ``.tar.xz`` can hold
# a 1 GB ``metrics.json``. The defaults are far above what real records need (the committed
# archives under reports/ unpack to at most 31 MB, 200 members, 4.7 MB for the largest
# member; a metrics row takes about 70 bytes, so 128 MiB is about two million rows) and
# each can be raised through its environment variable (a byte count, or with K, M or G).

#: Largest file read from a run directory (config, run, metrics, summary JSON).
JSON_MAX_BYTES = 128 * 2**20
JSON_MAX_BYTES_ENV = "HARNESS_JSON_MAX_BYTES"
#: Largest JSON file of a run other than ``metrics.json`` (config, run, summary, policy spec:
#: a few KB in real runs; a large Box space's bounds a few MB).
JSON_RECORD_MAX_BYTES = 16 * 2**20
#: Most values one JSON file may parse to (:func:`json_values`): about 256 MiB of Python
#: objects at worst. The largest committed ``metrics.json`` (37 MB) holds 1.6 million.
JSON_MAX_VALUES = 4_000_000
JSON_MAX_VALUES_ENV = "HARNESS_JSON_MAX_VALUES"
#: Largest unpacked size of one member of a run archive.
ARCHIVE_MAX_MEMBER_BYTES = 128 * 2**20
ARCHIVE_MAX_MEMBER_BYTES_ENV = "HARNESS_ARCHIVE_MAX_MEMBER_BYTES"
#: Largest unpacked size of a whole run archive.
ARCHIVE_MAX_TOTAL_BYTES = 2**30  # the benchmark page reads 496 MB of archives in one command
ARCHIVE_MAX_TOTAL_BYTES_ENV = "HARNESS_ARCHIVE_MAX_TOTAL_BYTES"
#: Most members (files and folders) of a run archive.
ARCHIVE_MAX_MEMBERS = 10_000
ARCHIVE_MAX_MEMBERS_ENV = "HARNESS_ARCHIVE_MAX_MEMBERS"
#: Most memory the xz decoder may take (the dictionary of ``xz -9`` needs 65 MiB; a
#: hostile header can ask for 1.5 GiB).
XZ_MEMORY_LIMIT = 256 * 2**20

_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def format_size(size: int) -> str:
    """A byte count for messages: ``512 MiB``, ``1.5 GiB``, ``900 bytes``."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:.4g} {unit}"
    return f"{size} bytes"


def _limit_from_env(name: str, default: int) -> int:
    """A limit from the environment (``1000000``, ``512M``, ``2G``, ``2GiB``), else ``default``.

    A value that is not a positive size is refused (one line naming the variable): silently
    falling back would hide that the user's limit is not in force.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    text = raw.upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in _SIZE_UNITS and not text[-1:].isdigit() else ""
    number = text[: len(text) - len(unit)].strip()
    if not number.isdigit() or int(number) <= 0:
        raise UnreadableRun(f"{name}={raw!r} is not a size (a positive byte count, or 512M, 2G)")
    return int(number) * _SIZE_UNITS[unit]


def json_max_bytes(name: str = METRICS) -> int:
    """The size limit of JSON file ``name`` of a run: :data:`JSON_MAX_BYTES` (or the
    environment's) for ``metrics.json``, at most :data:`JSON_RECORD_MAX_BYTES` for the rest."""
    limit = _limit_from_env(JSON_MAX_BYTES_ENV, JSON_MAX_BYTES)
    return limit if name == METRICS else min(limit, JSON_RECORD_MAX_BYTES)


def json_max_values() -> int:
    """The most values one JSON file of a run may parse to (:data:`JSON_MAX_VALUES`, or the
    environment's)."""
    return _limit_from_env(JSON_MAX_VALUES_ENV, JSON_MAX_VALUES)


@dataclass(frozen=True)
class ArchiveLimits:
    """How much one run archive may unpack to (see :func:`archive_limits`)."""

    member_bytes: int = ARCHIVE_MAX_MEMBER_BYTES
    total_bytes: int = ARCHIVE_MAX_TOTAL_BYTES
    members: int = ARCHIVE_MAX_MEMBERS


def archive_limits() -> ArchiveLimits:
    """The limits in force: the module's defaults, or the environment's variables."""
    return ArchiveLimits(
        _limit_from_env(ARCHIVE_MAX_MEMBER_BYTES_ENV, ARCHIVE_MAX_MEMBER_BYTES),
        _limit_from_env(ARCHIVE_MAX_TOTAL_BYTES_ENV, ARCHIVE_MAX_TOTAL_BYTES),
        _limit_from_env(ARCHIVE_MAX_MEMBERS_ENV, ARCHIVE_MAX_MEMBERS),
    )


def limits_help() -> str:
    """The reading limits and how to raise them, for a command's ``--help`` epilog."""
    return "\n".join(
        [
            "reading limits (stored runs and archives may come from someone else); set the",
            "variable (bytes, or 512M, 2G) to raise one:",
            f"  {JSON_MAX_BYTES_ENV}={format_size(JSON_MAX_BYTES)}: one JSON file of a run "
            f"(other than {METRICS}: at most {format_size(JSON_RECORD_MAX_BYTES)})",
            f"  {JSON_MAX_VALUES_ENV}={JSON_MAX_VALUES}: values one JSON file parses to",
            f"  {ARCHIVE_MAX_TOTAL_BYTES_ENV}={format_size(ARCHIVE_MAX_TOTAL_BYTES)}: "
            "the run archives of one command, unpacked",
            f"  {ARCHIVE_MAX_MEMBER_BYTES_ENV}={format_size(ARCHIVE_MAX_MEMBER_BYTES)}: "
            "one member of a run archive",
            f"  {ARCHIVE_MAX_MEMBERS_ENV}={ARCHIVE_MAX_MEMBERS}: members of a run archive",
        ]
    ).replace(" MiB", "M")


class _XzReader(io.RawIOBase):
    """The decompressed bytes of an xz (or legacy lzma) file, read as a stream.

    Unlike :class:`lzma.LZMAFile`, the decoder has a memory limit (:data:`XZ_MEMORY_LIMIT`)
    and no read ever returns more than was asked for. Data after the first stream is
    ignored (the harness writes one stream; tar's end marker comes before it anyway).
    """

    CHUNK = 64 * 2**10

    def __init__(self, raw: Any) -> None:
        import lzma

        super().__init__()
        self._raw = raw
        self._decoder = lzma.LZMADecompressor(lzma.FORMAT_AUTO, memlimit=XZ_MEMORY_LIMIT)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._decoder.eof:
            if self._decoder.needs_input:
                chunk = self._raw.read(self.CHUNK)
                if not chunk:
                    raise EOFError("the compressed data ends early (a truncated archive)")
            else:
                chunk = b""
            data = self._decoder.decompress(chunk, len(view))
            if data:
                view[: len(data)] = data
                return len(data)
        return 0


class ArchiveRefused(UnreadableRun):
    """A run archive over a reading limit; the message names the archive, the member, the
    limit and the variable that raises it."""


#: Largest extended header (a PAX record set, a GNU long name or link) of a run archive.
#: tarfile reads one whole into memory while it parses the member it belongs to, before any
#: other check could run; a real one holds a path and a few times (bytes, not kilobytes).
ARCHIVE_MAX_HEADER_BYTES = 2**20
#: Most extended headers in a row before a member: each is held while the next is parsed.
ARCHIVE_MAX_HEADER_CHAIN = 8
_EXTENDED_HEADERS = (b"x", b"g", b"X", b"L", b"K")


def _unpack_bounded(path: Path, staging: Path, limits: ArchiveLimits, already: int = 0) -> int:
    """Unpack run archive ``path`` into ``staging``, member by member, within ``limits``.

    Streamed: each member's header is checked (count, declared size, running total) before
    its data is read, and the bytes actually written are counted too, so no member can
    write more than its header said. Extended headers (PAX records, GNU long names) count
    as members and against the total too, and each is refused past
    :data:`ARCHIVE_MAX_HEADER_BYTES` before tarfile reads it; sparse members (whose maps
    tarfile reads unbounded) are refused. ``already``: bytes that archives unpacked earlier
    by this process took, counted against the same total (the limit is per command).
    tarfile's ``data`` filter judges every member (no absolute paths, nothing outside
    ``staging``, no devices); only regular files and folders are created (a run archive
    holds nothing else, so links are skipped). Returns the bytes this archive took.
    """
    import tarfile

    staging.mkdir()
    state = {"members": 0, "total": already, "chain": 0}

    def refuse(what: str) -> ArchiveRefused:
        return ArchiveRefused(f"{path}: refused, {what}")

    def count_member(name: str, size: int) -> None:
        state["members"] += 1
        if state["members"] > limits.members:
            raise refuse(
                f"it holds more than {limits.members:,} members "
                f"(set {ARCHIVE_MAX_MEMBERS_ENV} to read it)"
            )
        if state["total"] + size > limits.total_bytes:
            before = "it" if not already else "with the archives read before it, it"
            raise refuse(
                f"{before} unpacks to more than {format_size(limits.total_bytes)} "
                f"(at member {name!r}; set {ARCHIVE_MAX_TOTAL_BYTES_ENV} to read it)"
            )

    class BoundedInfo(tarfile.TarInfo):
        """tarfile's member header, checked before tarfile reads what the header announces."""

        def _proc_member(self, tar: Any) -> Any:
            kind = self.type
            if kind in _EXTENDED_HEADERS:
                what = f"an extended header (type {kind.decode()!r}) at byte {self.offset}"
                if self.size > ARCHIVE_MAX_HEADER_BYTES:
                    raise refuse(
                        f"{what} is {format_size(self.size)}, over the "
                        f"{format_size(ARCHIVE_MAX_HEADER_BYTES)} limit for a header"
                    )
                state["chain"] += 1
                if state["chain"] > ARCHIVE_MAX_HEADER_CHAIN:
                    raise refuse(f"{what} follows {ARCHIVE_MAX_HEADER_CHAIN} others in a row")
                count_member(what, self.size)
                state["total"] += self.size
            elif kind == tarfile.GNUTYPE_SPARSE:
                raise refuse(f"member {self.name!r} is a sparse file")
            else:
                state["chain"] = 0
            return super()._proc_member(tar)  # type: ignore[misc]

        def _proc_gnusparse_10(self, next: Any, pax_headers: Any, tar: Any) -> None:
            raise refuse(f"member {next.name!r} is a sparse file")

    with open(path, "rb") as raw, _XzReader(raw) as xz:
        buffered = io.BufferedReader(xz, buffer_size=_XzReader.CHUNK)
        with tarfile.open(fileobj=buffered, mode="r|", tarinfo=BoundedInfo) as tar:
            while (member := tar.next()) is not None:
                tar.members.clear()  # type: ignore[attr-defined]  # read once: keep no list
                if member.sparse is not None:
                    raise refuse(f"member {member.name!r} is a sparse file")
                if member.size > limits.member_bytes:
                    raise refuse(
                        f"member {member.name!r} unpacks to {format_size(member.size)}, over "
                        f"the {format_size(limits.member_bytes)} limit per member "
                        f"(set {ARCHIVE_MAX_MEMBER_BYTES_ENV} to read it)"
                    )
                count_member(member.name, member.size)
                checked = tarfile.data_filter(member, str(staging))
                target = staging / checked.name
                if checked.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not checked.isreg():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                written = 0
                with open(target, "wb") as out:
                    while chunk := source.read(_XzReader.CHUNK):
                        written += len(chunk)
                        if written > member.size or state["total"] + written > limits.total_bytes:
                            raise refuse(
                                f"member {member.name!r} unpacks to more than it declares "
                                f"({format_size(member.size)}) or past the archive's limit"
                            )
                        out.write(chunk)
                state["total"] += written
    return state["total"] - already


_EXTRACTED: dict[tuple[Path, int, int], Path] = {}
#: Prefix of the temporary folders archives are unpacked to; the unpacking process's id
#: follows, so folders left by a killed process can be told apart (see below).
EXTRACT_PREFIX = "harness-archive-"
#: Age after which a dead process's unpacked archive is removed by the next unpacking.
STALE_EXTRACTION_S = 3600.0


def remove_stale_extractions(folder: Path | None = None) -> list[Path]:
    """Remove the unpacked archives of processes that are gone; return what was removed.

    A process removes its own at exit, but not when it is SIGKILLed. A folder counts as
    stale only when the process id in its name is not alive here and it has not changed
    for :data:`STALE_EXTRACTION_S` (a process of another PID namespace sharing ``/tmp``
    keeps its folder fresh while it unpacks; after that it reads, not writes, so the age
    is a guard, not a proof). Folders of older harness versions (no id) are left alone.
    """
    import shutil
    import tempfile
    import time

    folder = Path(tempfile.gettempdir()) if folder is None else folder
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(folder.glob(f"{EXTRACT_PREFIX}p*-*"))
    except OSError:
        return removed
    for entry in entries:
        pid_text = entry.name[len(EXTRACT_PREFIX) + 1 :].partition("-")[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # alive (or reused: then it stays, which is safe)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue  # another user's live process; or a name no process can have
        try:
            if now - entry.lstat().st_mtime < STALE_EXTRACTION_S or entry.is_symlink():
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def extract_run_archive(path: Path) -> Path:
    """Unpack a run archive once per process into a temporary folder; return its runs dir.

    The runs dir is named after the archive (``NAME.tar.xz`` -> ``.../NAME``), so run
    labels read ``NAME/<id>``. Unpacking is bounded (:func:`archive_limits`) and every
    member goes through tarfile's ``data`` filter (no links out, no absolute paths, no
    special files); an archive over a limit or damaged raises :class:`UnreadableRun` (one
    line) and leaves nothing behind. The folder is removed at exit; folders that killed
    processes left are removed by a later unpacking (:func:`remove_stale_extractions`).
    """
    import atexit
    import lzma
    import shutil
    import tarfile
    import tempfile

    limits = archive_limits()
    info = path.stat()
    key = (path.resolve(), info.st_mtime_ns, info.st_size)  # a rewritten archive is new
    if key in _EXTRACTED:
        return _EXTRACTED[key]
    remove_stale_extractions()
    root = Path(tempfile.mkdtemp(prefix=f"{EXTRACT_PREFIX}p{os.getpid()}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    _EXTRACTION_ROOTS.append(root)
    _remove_extractions_on_sigterm()
    staging = root / ".staging"
    try:
        _UNPACKED[0] += _unpack_bounded(path, staging, limits, already=_UNPACKED[0])
    except UnreadableRun:
        shutil.rmtree(root, ignore_errors=True)
        raise
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as error:
        shutil.rmtree(root, ignore_errors=True)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise UnreadableRun(f"{path} is not a readable run archive: {reason}") from None
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    name = path.name.removesuffix(ARCHIVE_SUFFIX)
    # an archive named `.tar.xz` (or `..tar.xz`) has no name of its own: not the folder itself
    target = root / (name if name.strip(".") else "runs")
    if (staging / "runs").is_dir():
        (staging / "runs").rename(target)
    else:
        target.mkdir()
    _EXTRACTED[key] = target
    _ARCHIVE_OF[target] = path
    return target


_ARCHIVE_OF: dict[Path, Path] = {}
#: Bytes the archives this process unpacked take (the total limit is per command).
_UNPACKED = [0]
#: Folders this process unpacked archives to (removed at exit, or on SIGTERM).
_EXTRACTION_ROOTS: list[Path] = []


def _sigterm_removes_extractions(signum: int, frame: Any) -> None:
    """SIGTERM's default action (the process ends), after removing the unpacked archives."""
    import shutil
    import signal

    mine = f"{EXTRACT_PREFIX}p{os.getpid()}-"  # a forked child inherits the handler, not them
    for root in _EXTRACTION_ROOTS:
        if root.name.startswith(mine):
            shutil.rmtree(root, ignore_errors=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


#: :mod:`harness.signals` treats this handler as the default action it stands for.
_sigterm_removes_extractions.stands_for_default = True  # type: ignore[attr-defined]


def _remove_extractions_on_sigterm() -> None:
    """Have SIGTERM remove the unpacked archives first, where it would end the process at
    once (its default action; atexit does not run then). A handler the command installed
    (one raising KeyboardInterrupt) is kept: the process then unwinds and atexit removes
    them. Main thread only, as Python allows."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm_removes_extractions)


def stored_location(run_dir: Path) -> str:
    """Where a run is stored, for tables: its directory, or ``ARCHIVE#<id>`` for a run read
    from an archive (not the temporary folder it was unpacked to, which changes per process)."""
    archive = _ARCHIVE_OF.get(run_dir.parent)
    return f"{archive}#{run_dir.name}" if archive is not None else str(run_dir)
