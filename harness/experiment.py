"""The Sacred experiment behind every run.

Use it through ``harness run`` or Sacred's own command line::

    python -m harness.experiment with algo=optimes env=AntBulletEnv episodes=5
    python -m harness.experiment with lander algo=cma

The config scope is generated from :mod:`harness.schema` (every knob, its doc
in ``print_config``), and a config hook completes it with
:func:`harness.config.build_run_config`, as ``harness run`` does: missing knobs
come from ``experiments/defaults.yaml``, so the stored ``config.json`` of a run
holds every value that shaped it. Bad input is one ``harness: error:`` line and
exit status 2; Sacred's INFO log is off unless ``-l INFO`` (``harness run -v``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Before Sacred: it is imported without pandas (see the module).
import harness.sacred_import  # noqa: F401

# isort: split

from sacred import SETTINGS, Experiment
from sacred.config.config_dict import ConfigDict
from sacred.dependencies import get_digest
from sacred.host_info import host_info_gatherer
from sacred.observers import FileStorageObserver
from sacred.serializer import flatten
from sacred.utils import SacredError, apply_backspaces_and_linefeeds

from algorithms.es_common import ENDPOINT_METRICS
from harness import rundir, schema
from harness.checkpoint import write_config_signature
from harness.commands import ERROR_PREFIX, EXIT_USAGE, terminal_text
from harness.config import ConfigError, build_run_config
from harness.speed import METRICS as SPEED_METRICS

# Worker processes and tqdm write to the real stderr; "sys" capture keeps them out of cout.txt.
SETTINGS.CAPTURE_MODE = "sys"
SETTINGS.CONFIG.READ_ONLY_CONFIG = False
SETTINGS.DISCOVER_SOURCES = "none"


@host_info_gatherer("cpu_count")
def _cpu_count() -> int:
    """CPUs this run may use; reports name the machine with it."""
    return len(os.sched_getaffinity(0))


class HarnessExperiment(Experiment):
    """Sacred's Experiment whose command line reports bad input as one line, exit status 2.

    Sacred prints a traceback and exits 1 for any exception while it builds a
    run; on its command line (``python -m harness.experiment with ...``) a
    :class:`~harness.config.ConfigError` or Sacred's own complaint about the
    config (an unknown named config, say) is bad input like any other, so it
    gets the same ``harness: error: ...`` line as ``harness run``. Called from
    Python, the exception propagates.
    """

    command_line = False

    def run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().run(*args, **kwargs)
        except (ConfigError, SacredError) as error:
            if not self.command_line:
                raise
            first = next((line for line in str(error).splitlines() if line.strip()), "")
            print(f"{ERROR_PREFIX} {terminal_text(first)}", file=sys.stderr)
            raise SystemExit(EXIT_USAGE) from None


ex = HarnessExperiment("es-harness", save_git_info=False, additional_host_info=[_cpu_count])
ex.captured_out_filter = apply_backspaces_and_linefeeds  # type: ignore[assignment]


def _sacred_logger() -> logging.Logger:
    """Sacred's log, quiet unless asked: WARNING by default, INFO with ``-v`` (or ``-l INFO``).

    Sacred's default logger prints INFO lines (run started, the raw result dict)
    on stderr for every run; ``harness run`` prints its own one-line outcome.
    """
    logger = logging.getLogger("harness.sacred")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s - es-harness - %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.WARNING)
    return logger


ex.logger = _sacred_logger()  # type: ignore[assignment]


def set_verbose(verbose: bool) -> None:
    """Show Sacred's INFO lines (``harness run -v``) or only its warnings."""
    assert ex.logger is not None
    ex.logger.setLevel(logging.INFO if verbose else logging.WARNING)


class _SchemaConfig(ConfigDict):
    """Sacred's config scope generated from :mod:`harness.schema`, with each knob's doc."""

    def __init__(self, values: dict[str, Any], docs: dict[str, str]) -> None:
        super().__init__(values)
        self.docs = docs

    def __call__(self, fixed: Any = None, preset: Any = None, fallback: Any = None) -> Any:
        # Sacred fills a missing key with our own nested dict (``params``, ``policy``), and
        # the run's completed config then updates it in place: a copy per run keeps one
        # run's algorithm knobs out of the next run's defaults in the same process.
        pristine = self._conf
        self._conf = copy.deepcopy(pristine)
        try:
            summary = super().__call__(fixed, preset, fallback)
        finally:
            self._conf = pristine
        summary.docs.update(self.docs)
        return summary


# Every knob, at its built-in default; per-env knobs at None (the hook fills them per env).
ex.configurations.append(_SchemaConfig(schema.sacred_defaults(), schema.sacred_docs()))

#: Fingerprint of the config ``start_run`` built and validated (the hook does not redo it).
_validated: str | None = None


def _fingerprint(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


@ex.config_hook
def fill_defaults(config: dict[str, Any], command_name: str, logger: Any) -> dict[str, Any]:
    """Complete and validate the config before any observer starts; return what it filled in.

    A config given through Sacred (``with KEY=VALUE``, named configs, ``ex.run``)
    is built as ``harness run`` builds one; a knob the algorithm does not use may
    hold only the value it would have anyway (Sacred's scope always holds one).
    """
    given = {key: value for key, value in config.items() if not key.startswith("__")}
    if _validated is not None and _fingerprint(given) == _validated:
        return {}
    resolved = build_run_config(
        given, source="Sacred config", refuse="changed", strict_keys=ex.command_line
    )
    return {key: value for key, value in resolved.config.items() if given.get(key) != value}


def start_run(
    config: dict[str, Any],
    observers: list[Any],
    command: str = "main",
    verbose: bool = False,
) -> Any:
    """Run a completed, validated config (``build_run_config``) as a Sacred run.

    ``observers`` replace the experiment's; returns the finished Sacred run.
    """
    global _validated
    ex.observers = list(observers)
    set_verbose(verbose)
    _validated = _fingerprint(config)
    try:
        # "--force": the config is complete; Sacred would note every key the hook filled in.
        return ex.run(command, config_updates=config, options={"--force": True})
    finally:
        _validated = None


# GoodAI study: LunarLanderContinuous with the 18-parameter linear policy.
@ex.named_config
def lander() -> None:
    env = "LunarLanderContinuous"
    policy = {"kind": "linear"}


# GoodAI study: AntBulletEnv with the 6536-parameter 64-64 ReLU MLP, discretised actions.
@ex.named_config
def ant() -> None:
    env = "AntBulletEnv"
    policy = {"kind": "mlp", "hidden_sizes": [64, 64], "activation": "relu", "discretize": 5}


# GoodAI study: Pendulum without velocity, LSTM of 16 cells (1361 parameters).
@ex.named_config
def pendulum_partial() -> None:
    env = "PendulumPO"
    policy = {"kind": "lstm", "hidden_sizes": [16]}


@ex.main
def main(
    _config: dict[str, Any], _run: Any, policy: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    """Train the configured algorithm to its budget.

    ``policy`` and ``params`` are named so that Sacred accepts keys that a
    named config or ``with params.KEY=...`` adds inside them.
    """
    from harness.runner import Trainer, process_started_at

    run_dir = _run_dir(_run)
    show_progress = os.environ.get("HARNESS_PROGRESS", "1") != "0"
    trainer = Trainer(
        dict(_config), _run, run_dir, show_progress, process_started_at=process_started_at()
    )
    try:
        return trainer.train()
    finally:
        trainer.close()


def _run_dir(run: Any) -> Path | None:
    for observer in run.observers:
        if isinstance(observer, FileStorageObserver) and observer.dir:
            return Path(observer.dir)
    return None


# -- run records (the format is harness.rundir's) ---------------------------------------


class RunStorageObserver(FileStorageObserver):
    """Sacred's FileStorageObserver, made safe to kill, to resume and to run out of disk.

    Same files and formats, plus: every JSON file is replaced atomically;
    metrics stay sorted by step when the heartbeat thread and a checkpoint
    flush write at once; artifacts are listed once; ``run.json`` names the head
    process; and the run directory holds an ``flock`` while the run lives.

    A failed write (a full disk) is never swallowed: Sacred would log it, stop
    calling the observer and drop the metrics it had drained, so training would
    go on with a hole in ``metrics.json``. Here the rows that did not reach the
    disk are kept for the next write, the first failure is kept in
    :attr:`write_failure` for the runner (which fails the run at once, before
    any checkpoint can get ahead of the metrics), and the final status is
    written by every means left (:meth:`_write_final_entry`).
    """

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        super().initialize(*args, **kwargs)
        self._io_lock = threading.RLock()
        self._run_lock: int | None = None
        #: the first write that failed (the runner raises it), None while all went to disk
        self.write_failure: rundir.RecordWriteError | None = None
        #: why the final status could not be recorded (None: it was)
        self.final_write_failure: str | None = None
        self._unwritten: dict[str, Any] = {}

    def _path(self, name: str) -> Path:
        return Path(str(self.dir)) / name

    def _entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = self.run_entry or {}
        return entry

    @contextlib.contextmanager
    def _recording_failures(self, name: str) -> Iterator[None]:
        """Keep an OSError of writing ``name`` in :attr:`write_failure` instead of raising."""
        try:
            yield
        except OSError as error:
            if self.write_failure is None:
                self.write_failure = rundir.RecordWriteError(self._path(name), error)

    # files (replaced by a rename or appended with O_NOFOLLOW: never written through a link)
    def save_json(self, obj: Any, filename: str) -> None:
        with self._io_lock:
            if filename != rundir.CONFIG:
                rundir.write_json_atomic(self._path(filename), flatten(obj))
                return
            # the config is signed first, so every config.json this harness wrote has its
            # signature: `harness resume` restarts a run without a checkpoint only from one
            data = json.dumps(flatten(obj), sort_keys=True, indent=2).encode("utf-8")
            write_config_signature(self._path(""), data)
            rundir.atomic_write(self._path(filename), [data], durable=False)

    def save_cout(self) -> None:
        with self._io_lock, self._recording_failures(rundir.COUT):
            text = self.cout[self.cout_write_cursor :]
            rundir.append_no_follow(self._path(rundir.COUT), text.encode("utf-8"))
            self.cout_write_cursor = len(self.cout)

    def save_file(self, filename: str, target_name: str | None = None) -> None:
        """An artifact copied into the run directory through a rename (Sacred's copy would
        write through a link planted under its name)."""
        target = target_name or os.path.basename(filename)
        if target in (rundir.RUN, rundir.CONFIG, rundir.COUT, rundir.METRICS):
            super().save_file(filename, target_name)  # Sacred refuses these names
            return
        data = Path(filename).read_bytes()
        rundir.atomic_write(self._path(target), [data], durable=False)

    def find_or_save(self, filename: Any, store_dir: Path) -> Any:
        """Sacred's copy of a source file, without a truncated copy left when it fails."""
        try:
            return super().find_or_save(filename, store_dir)
        except OSError:
            name, ext = os.path.splitext(os.path.basename(filename))
            partial = Path(store_dir) / f"{name}_{get_digest(filename)}{ext}"
            with contextlib.suppress(OSError):
                if get_digest(str(partial)) != get_digest(filename):
                    partial.unlink()
            raise

    def log_metrics(self, metrics_by_name: dict[str, Any], info: Any) -> None:
        new = {
            name: {
                "steps": list(series["steps"]),
                "values": list(series["values"]),
                "timestamps": [stamp.isoformat() for stamp in series["timestamps"]],
            }
            for name, series in metrics_by_name.items()
        }
        with self._io_lock:
            pending = rundir.merge_metrics(self._unwritten, new)
            if not pending:
                return
            with self._recording_failures(rundir.METRICS):
                saved = rundir.read_metrics(self._path(""))
                self.save_json(rundir.merge_metrics(saved, pending), rundir.METRICS)
                pending = {}
            self._unwritten = pending

    # liveness
    def _make_dir(self, _id: Any) -> None:
        super()._make_dir(_id)
        self._run_lock = rundir.lock_run_dir(self._path(""))

    def _release(self) -> None:
        if self._run_lock is not None:
            os.close(self._run_lock)
            self._run_lock = None

    # events
    def started_event(self, *args: Any, **kwargs: Any) -> Any:
        with self._io_lock:
            _id = super().started_event(*args, **kwargs)
            self._entry()["head"] = rundir.head_info()
            self.save_json(self.run_entry, rundir.RUN)
        return _id

    def heartbeat_event(self, *args: Any, **kwargs: Any) -> None:
        with self._io_lock, self._recording_failures(rundir.RUN):
            super().heartbeat_event(*args, **kwargs)

    def artifact_event(
        self, name: str, filename: str, metadata: Any = None, content_type: Any = None
    ) -> None:
        with self._io_lock, self._recording_failures(name):
            self.save_file(filename, name)
            artifacts = self._entry().setdefault("artifacts", [])
            if name not in artifacts:
                artifacts.append(name)
            self.save_json(self.run_entry, rundir.RUN)

    def _write_final_entry(self, **fields: Any) -> None:
        """Record the final status: atomically, else without the trace, else in place.

        On a full disk the rename of a new ``run.json`` needs room for a second
        copy; the compact entry rewritten over the old file's own blocks does
        not. Where even that fails, :attr:`final_write_failure` says why (the
        command prints it as its one line) and ``run.json`` keeps RUNNING, which
        ``harness resume`` and sweeps treat as dead once the lock is free.
        """
        entry = self.run_entry
        if entry is None or self.dir is None:  # the run never got its record
            return
        entry.update(fields)
        path = self._path(rundir.RUN)
        try:
            self.save_json(entry, rundir.RUN)
            return
        except OSError:
            pass
        trace = entry.get("fail_trace")
        if trace:  # the last line names the error; the whole trace is what did not fit
            entry["fail_trace"] = [str(trace[-1])]
        try:
            rundir.overwrite_json_in_place(path, flatten(entry))
        except OSError as error:
            self.final_write_failure = (
                f"{rundir.RUN} could not record {fields.get('status')}: "
                f"{error.strerror or error} (it still says RUNNING)"
            )

    def completed_event(self, stop_time: Any, result: Any) -> None:
        with self._io_lock:
            try:
                self._write_final_entry(
                    stop_time=stop_time.isoformat(), result=result, status="COMPLETED"
                )
            finally:
                self._release()

    def interrupted_event(self, interrupt_time: Any, status: Any) -> None:
        with self._io_lock:
            try:
                self._write_final_entry(stop_time=interrupt_time.isoformat(), status=status)
            finally:
                self._release()

    def failed_event(self, fail_time: Any, fail_trace: Any) -> None:
        with self._io_lock:
            try:
                self._write_final_entry(
                    stop_time=fail_time.isoformat(), status="FAILED", fail_trace=fail_trace
                )
            finally:
                self._release()


class ResumeObserver(RunStorageObserver):
    """Continues an existing run directory instead of creating one.

    ``started_event`` keeps the stored ``run.json`` (command, host, start time,
    artifacts), sets it RUNNING again, appends an entry to its ``resumed`` list,
    stores the config in force (a resumed budget may differ), drops the metrics
    logged after the checkpoint (they are re-done) and marks the resumption in
    ``cout.txt``. The later events are Sacred's, so the run ends COMPLETED,
    FAILED or INTERRUPTED as any other.
    """

    def __init__(
        self,
        run_dir: Path,
        state: dict[str, Any] | None,
        keep_through_step: int,
        drop_eval_step: int | None,
        run_lock: int,
        note: dict[str, Any],
    ) -> None:
        super().__init__(run_dir.parent)
        self.run_dir = run_dir
        self.state = state
        self.keep_through_step = keep_through_step
        self.drop_eval_step = drop_eval_step
        self.note = note
        self._run_lock = run_lock

    def started_event(
        self,
        ex_info: Any,
        command: Any,
        host_info: Any,
        start_time: Any,
        config: Any,
        meta_info: Any,
        _id: Any,
    ) -> Any:
        with self._io_lock:
            self.dir = str(self.run_dir)
            stored = rundir.read_json(self.run_dir / rundir.RUN)
            self.run_entry = rundir.resumed_entry(
                stored, start_time.isoformat(), self.keep_through_step, self.note
            )
            self.config = config
            self.info = {}
            self.cout = ""
            self.cout_write_cursor = 0
            # no checkpoint (state None): restarted from scratch, so no metric row is kept
            keep = self.keep_through_step if self.state is not None else -1
            rundir.truncate_metrics(self.run_dir, keep, self.drop_eval_step, EVAL_METRIC_NAMES)
            self.save_json(self.config, rundir.CONFIG)
            how = "from step" if self.state is not None else "from scratch (no checkpoint), step"
            rundir.append_cout(
                self.run_dir,
                f"--- resumed {start_time.isoformat()} {how} "
                f"{self.keep_through_step} (pid {os.getpid()}) ---\n",
            )
            self.save_json(self.run_entry, rundir.RUN)
        return self.run_dir.name


#: Metrics the runner logs with each evaluation (dropped with an undone final evaluation).
EVAL_METRIC_NAMES = (
    "eval_return_mean",
    "eval_return_std",
    "eval_timesteps",
    "eval_failed_episodes",
    "confirm_return_mean",
    "confirm_return_std",
    "confirm_timesteps",
    "confirm_passed",
    "confirm_failed_episodes",
    *ENDPOINT_METRICS,
    *SPEED_METRICS,
)


def make_observer(runs_dir: str | Path) -> RunStorageObserver:
    """The observer every ``harness`` run uses."""
    return RunStorageObserver(str(runs_dir))


def run_failure_message(error: BaseException) -> str | None:
    """One line for a run that started and failed (None if no run directory was made)."""
    for observer in ex.observers:
        if isinstance(observer, FileStorageObserver) and observer.dir:
            first = next((line for line in str(error).splitlines() if line.strip()), "")
            if isinstance(error, rundir.RecordWriteError):
                what = first  # already names the file and the reason
            else:
                what = f"{type(error).__name__}: {first}" if first else type(error).__name__
            unrecorded = getattr(observer, "final_write_failure", None)
            if unrecorded is not None:
                where = unrecorded
            elif isinstance(observer, RunStorageObserver) and observer.run_entry is None:
                where = "the run record could not be created"
            else:
                where = f"traceback in {Path(observer.dir) / rundir.RUN}"
            return f"run {Path(observer.dir).name} FAILED: {what} ({where})"
    return None


def unrecorded_outcome() -> str | None:
    """One line when a run ended but ``run.json`` could not record how (a full disk)."""
    for observer in ex.observers:
        failure = getattr(observer, "final_write_failure", None)
        if failure is not None and observer.dir:
            return f"run {Path(observer.dir).name}: {failure}"
    return None


@ex.command
def resume_run(
    _config: dict[str, Any], _run: Any, policy: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    """Continue a run from its checkpoint (started by ``harness resume RUN_DIR``)."""
    from harness.runner import Trainer, process_started_at

    observer = next((o for o in _run.observers if isinstance(o, ResumeObserver)), None)
    if observer is None:
        raise RuntimeError("resume_run continues a stored run: use `harness resume RUN_DIR`")
    show_progress = os.environ.get("HARNESS_PROGRESS", "1") != "0"
    trainer = Trainer(
        dict(_config),
        _run,
        observer.run_dir,
        show_progress,
        process_started_at=process_started_at(),
    )
    try:
        if observer.state is not None:  # None: no checkpoint, restarted from scratch
            trainer.restore(observer.state, reopen=bool(observer.note.get("reopened")))
        return trainer.train()
    finally:
        trainer.close()


def command_line(argv: list[str] | None = None) -> int:
    """``python -m harness.experiment [COMMAND] [with UPDATE...] [options]``: Sacred's CLI.

    Runs go to ``runs/`` unless an observer option is given; bad input is one
    ``harness: error:`` line and exit status 2; ``-l INFO`` shows Sacred's log.
    """
    argv = list(sys.argv if argv is None else argv)
    if not any(flag in argv for flag in ("-F", "--file_storage", "-m", "--mongo_db")):
        ex.observers.append(make_observer("runs"))
    ex.command_line = True
    run = ex.run_commandline(argv)
    return 0 if run is None or run.status == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(command_line())
