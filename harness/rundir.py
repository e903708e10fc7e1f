"""The run-directory format: file names, the liveness lock, and how runs are read and written.

This module owns the layout of a run directory, writer and reader both. The
Sacred observer (:mod:`harness.experiment`), run records, sweeps, resume,
check-repro, reports and benches name files, take the lock and read statuses
only through it. It is the leaf layer: it imports nothing from the rest of the
harness (nor Sacred, pandas or numpy), so any layer may use it.

A run is a Sacred ``FileStorageObserver`` directory ``RUNS_DIR/<id>/``:

``config.json`` (:data:`CONFIG`)
    the completed run config: every knob that shaped the run.
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
import json
import os
import secrets
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ARTIFACT_NAMES",
    "CHECKPOINT",
    "CHECKPOINT_TEMP_PREFIX",
    "CONFIG",
    "COUT",
    "FINAL_PARAMS",
    "LOCK",
    "METRICS",
    "POLICY_SPEC",
    "POPULATION",
    "RUN",
    "STATUSES",
    "SUMMARY",
    "MissingRunFile",
    "RecordWriteError",
    "RunHeader",
    "RunRecord",
    "UnreadableRun",
    "append_cout",
    "atomic_write",
    "find_run_dirs",
    "head_info",
    "heartbeat_age_s",
    "is_run_dir",
    "lock_holder",
    "lock_run_dir",
    "merge_metrics",
    "metrics_look_complete",
    "overwrite_json_in_place",
    "read_header",
    "read_json",
    "read_metrics",
    "read_run",
    "read_status",
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
    with open(path, "r+b") as stream:
        stream.write(text)
        stream.truncate(len(text))
        stream.flush()
        os.fsync(stream.fileno())


def append_cout(run_dir: Path, text: str) -> None:
    """Append a line of the harness's own to the run's captured output."""
    with open(run_dir / COUT, "a", encoding="utf-8") as cout:
        cout.write(text)


# -- the liveness lock --------------------------------------------------------------------


def lock_run_dir(run_dir: Path) -> int | None:
    """Take the run's liveness lock: an fd (close it to release), or None when it is held.

    The kernel drops an ``flock`` when its holder dies, SIGKILL included, so a
    run whose lock can be taken is not running anywhere on this machine.
    """
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
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


def read_json(path: Path) -> Any:
    """A JSON file of a run; :class:`UnreadableRun` (one line naming the file) otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingRunFile(f"{path.name} is missing") from None
    except OSError as error:
        raise UnreadableRun(f"cannot read {path.name}: {error.strerror}") from None
    except UnicodeDecodeError as error:  # one stray byte: damaged like any other corruption
        raise UnreadableRun(
            f"{path.name} is corrupt (byte {error.object[error.start]:#04x} at offset "
            f"{error.start} is not UTF-8)"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UnreadableRun(
            f"{path.name} is truncated or corrupt ({error.msg} at line {error.lineno})"
        ) from None


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
            if not isinstance(series, dict) or len(series.get("steps", [])) != len(
                series.get("values", [])
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


_EXTRACTED: dict[tuple[Path, int, int], Path] = {}


def extract_run_archive(path: Path) -> Path:
    """Unpack a run archive once per process into a temporary folder; return its runs dir.

    The runs dir is named after the archive (``NAME.tar.xz`` -> ``.../NAME``), so run
    labels read ``NAME/<id>``; members are extracted with tarfile's ``data`` filter
    (no links out, no absolute paths, no special files).
    """
    import atexit
    import shutil
    import tarfile
    import tempfile

    stat = path.stat()
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)  # a rewritten archive is new
    if key in _EXTRACTED:
        return _EXTRACTED[key]
    root = Path(tempfile.mkdtemp(prefix="harness-archive-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    staging = root / ".staging"
    try:
        with tarfile.open(path, mode="r:xz") as tar:
            tar.extractall(staging, filter="data")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise UnreadableRun(f"{path} is not a readable run archive: {error}") from None
    target = root / path.name.removesuffix(ARCHIVE_SUFFIX)
    if (staging / "runs").is_dir():
        (staging / "runs").rename(target)
    else:
        target.mkdir()
    _EXTRACTED[key] = target
    _ARCHIVE_OF[target] = path
    return target


_ARCHIVE_OF: dict[Path, Path] = {}


def stored_location(run_dir: Path) -> str:
    """Where a run is stored, for tables: its directory, or ``ARCHIVE#<id>`` for a run read
    from an archive (not the temporary folder it was unpacked to, which changes per process)."""
    archive = _ARCHIVE_OF.get(run_dir.parent)
    return f"{archive}#{run_dir.name}" if archive is not None else str(run_dir)
