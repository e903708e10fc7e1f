"""Sweep cells as Ray work: ``harness sweep FILE --ray-address ADDR`` spreads a study out.

Each cell becomes one Ray task that reserves the CPUs the cell will use
(:func:`cell_cpus`: its ES evaluation workers, or its RL envs when they step in
subprocesses) and runs wherever Ray places it. The task runs the cell exactly as a
local sweep does, as ``python -m harness.sweep --cell`` (or ``harness resume``) in
a subprocess, but into a runs directory of its own node, and ships the run
directory back to the driver as it goes:

* a :class:`RunStore` actor, pinned to the driver's node, owns the driver's runs
  directory: it gives each cell its run directory there (a new Sacred-style id,
  or the interrupted run the sweep continues) and writes what the cells ship;
* every ``ship_every_s`` and when the cell ends, the task sends the files that
  changed: the checkpoint read first and written last, so the driver never holds
  a checkpoint ahead of its metrics (the runner's own rule);
* so a cell whose node is lost is retried by Ray (``max_retries``) on another node,
  and its retry asks the store for the run directory and continues it with
  ``harness resume`` from the last checkpoint that reached the driver.

Nothing relies on a shared filesystem: on one, the shipped files simply land
where they would have been written. The population log is shipped only with
``ship_population``. Ctrl-C or SIGTERM on the driver cancels the tasks; each
forwards SIGINT to its run, which records INTERRUPTED and ships its last state.
Each run records the Ray node that ran it last (``run.json``: ``head.ray_node``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from harness import rundir
from harness.sweep.scheduler import (
    BOOKKEEPING_DIR,
    RESULT_PREFIX,
    CellOutcome,
    SweepResult,
    cell_lock,
)
from harness.sweep.spec import Cell, Sweep
from harness.sweep.store import completed_runs, find_completed, resumable_run
from harness.user_modules import import_flags

#: Files a cell ships to the driver, read in this order (checkpoint before metrics: see above).
SHIPPED = (
    rundir.CHECKPOINT,
    rundir.METRICS,
    rundir.CONFIG,
    rundir.CONFIG_SIGNATURE,
    rundir.RUN,
    rundir.COUT,
    rundir.FINAL_PARAMS,
    rundir.POLICY_SPEC,
    rundir.SUMMARY,
)
#: Retries of a cell whose node or worker died (Ray's ``max_retries``).
DEFAULT_RETRIES = 3
NODE_ENV = "HARNESS_RAY_NODE"


def cell_cpus(config: dict[str, Any]) -> int:
    """CPUs a cell reserves: its ES evaluation workers, or its RL envs in subprocesses."""
    from algorithms.registry import family_of

    workers = int(config.get("workers") or 1)
    if (family_of(config.get("algo")) or "es") == "es":
        return max(1, workers)
    if workers <= 1:
        return 1
    n_envs = (config.get("params") or {}).get("n_envs")
    return max(1, min(workers, int(n_envs or workers)))


class RunStore:
    """The driver's runs directory, as a Ray actor on the driver's node (see module doc)."""

    def __init__(self, runs_dir: str, resume_from: dict[str, str], log_dir: str) -> None:
        self.runs_dir = Path(runs_dir)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir)
        #: cell key -> the driver's run directory of that cell (set on its first shipment)
        self.cells: dict[str, Path] = {k: Path(v) for k, v in resume_from.items()}
        self.running: dict[str, str] = {}  # cell key -> node id
        #: The liveness lock of each run in flight, held here on the driver's machine: when
        #: the driver (and with it this actor) dies, the runs read as dead, so a rerun of the
        #: sweep continues them, as it does a local run whose head died.
        self.locks: dict[str, int] = {}

    def _hold(self, key: str, path: Path) -> None:
        if key not in self.locks:
            fd = rundir.lock_run_dir(path)
            if fd is not None:
                self.locks[key] = fd

    def begin(self, key: str, node: str) -> tuple[str | None, dict[str, bytes]]:
        """The cell's run so far (its driver id and files), or ``(None, {})`` for a new run."""
        self.running[key] = node
        path = self.cells.get(key)
        if path is not None:
            self._hold(key, path)
        if path is None or not (path / rundir.CHECKPOINT).is_file():
            return (path.name if path else None), {}
        files = {name: (path / name).read_bytes() for name in SHIPPED if (path / name).is_file()}
        return path.name, files

    def _new_run_dir(self) -> Path:
        # Sacred's FileStorageObserver rule: max id + 1, created with mkdir (atomic).
        while True:
            ids = [int(p.name) for p in self.runs_dir.iterdir() if p.name.isdigit()]
            path = self.runs_dir / str(max(ids, default=0) + 1)
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue

    def ship(self, key: str, files: dict[str, bytes]) -> str:
        """Write a cell's changed files into its driver run directory; return its id."""
        path = self.cells.get(key)
        if path is None:
            path = self.cells[key] = self._new_run_dir()
        self._hold(key, path)
        # The checkpoint, read first, is written last: a driver killed in between holds
        # metrics ahead of its checkpoint (a resume drops them), never behind it.
        for name in sorted(files, key=lambda name: name == rundir.CHECKPOINT):
            rundir.atomic_write(path / name, [files[name]], prefix=f".{name}-")
        return path.name

    def end(self, key: str, label: str, node: str, log: bytes) -> str:
        """The cell's attempt is over: append its output to the sweep's log of the cell."""
        self.running.pop(key, None)
        fd = self.locks.pop(key, None)
        if fd is not None:
            os.close(fd)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"cell-{key}.log"
        with open(path, "ab") as stream:
            stream.write(f"# {label} on Ray node {node}\n".encode() + log)
        return str(path)

    def status(self) -> dict[str, str]:
        """Cells in flight: cell key -> node id."""
        return dict(self.running)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _die_with_parent() -> None:
    # A lost node takes its Ray worker down; the run it started must not live on, orphaned.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _changed(run_dir: Path, seen: dict[str, tuple[int, int]], population: bool) -> list[str]:
    names = [*SHIPPED, *([rundir.POPULATION] if population else [])]
    changed = []
    for name in names:
        try:
            stat = (run_dir / name).stat()
        except OSError:
            continue
        mark = (stat.st_mtime_ns, stat.st_size)
        if seen.get(name) != mark:
            seen[name] = mark
            changed.append(name)
    return changed


def run_cell_task(
    config: dict[str, Any],
    key: str,
    label: str,
    store: Any,
    ship_every_s: float,
    ship_population: bool,
) -> tuple[str, str | None, str, str]:
    """The body of a cell's Ray task: run or resume it here, shipping its run directory.

    Returns ``(status, driver run id, node id, the tail of its output)``.
    """
    import ray

    node = ray.get_runtime_context().get_node_id()
    run_id, files = ray.get(store.begin.remote(key, node))
    local = Path(tempfile.mkdtemp(prefix="harness-cell-"))
    runs = local / "runs"
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1", NODE_ENV: node}
    if files:
        run_dir = runs / "1"
        run_dir.mkdir(parents=True)
        for name, data in files.items():
            (run_dir / name).write_bytes(data)
        # --force: Ray runs a cell's retry only once its earlier attempt is dead, whatever
        # heartbeat the shipped run.json still shows.
        command = [sys.executable, "-P", "-m", "harness.cli", "resume", str(run_dir)]
        command += ["--no-progress", "--force"]
        command += import_flags(config)  # the sweep file's modules: the user's word
    else:
        run_dir = runs / "1"  # the first run of an empty runs directory
        cell_file = local / "cell.json"
        cell_file.write_text(json.dumps(config))
        command = [sys.executable, "-P", "-m", "harness.sweep", "--cell", str(cell_file)]
        command += ["--runs-dir", str(runs)]
    log = open(local / "cell.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        preexec_fn=_die_with_parent,
    )
    seen: dict[str, tuple[int, int]] = {}

    def ship() -> None:
        nonlocal run_id
        names = _changed(run_dir, seen, ship_population)
        if names:
            payload = {name: (run_dir / name).read_bytes() for name in names}
            run_id = ray.get(store.ship.remote(key, payload))

    try:
        while True:
            try:
                proc.wait(timeout=ship_every_s)
                break
            except subprocess.TimeoutExpired:
                ship()
    except (KeyboardInterrupt, ray.exceptions.TaskCancelledError):
        proc.send_signal(signal.SIGINT)  # the run records INTERRUPTED and writes its last step
        proc.wait()
    finally:
        log.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        ship()
        output_bytes = (local / "cell.log").read_bytes()
        ray.get(store.end.remote(key, label, node, output_bytes))
    status = rundir.read_status(run_dir) or "CRASHED"
    output = output_bytes.decode(errors="replace")
    if status == "RUNNING":
        status = "CRASHED"
    if RESULT_PREFIX in output and status == "CRASHED":
        status = output.split(RESULT_PREFIX)[-1].split()[1]
    shutil.rmtree(local, ignore_errors=True)
    tail = " | ".join(line.strip() for line in output.strip().splitlines()[-3:])
    return status, run_id, node, tail


def run_sweep_on_ray(
    sweep: Sweep,
    runs_dir: Path,
    address: str | None,
    progress: Callable[[str], None] = print,
    resume: bool = True,
    retries: int = DEFAULT_RETRIES,
    ship_every_s: float = 30.0,
    ship_population: bool = False,
    status_every_s: float = 30.0,
) -> SweepResult:
    """Run every cell not yet completed in ``runs_dir`` as Ray tasks on the cluster at ``address``.

    The same semantics as :func:`harness.sweep.scheduler.run_sweep`: completed cells
    are skipped, interrupted ones continued from their checkpoint, each cell's lock
    is held while it runs, and an interrupt stops every cell (recorded INTERRUPTED).
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from evaluation.ray_backend import connect
    from harness.signals import interrupt_on_stop_signals

    interrupt_on_stop_signals()  # kill stops the cells first, as Ctrl-C does
    runs_dir.mkdir(parents=True, exist_ok=True)
    done = completed_runs(runs_dir)
    outcomes: dict[int, CellOutcome] = {}
    todo: list[Cell] = []
    resume_from: dict[str, str] = {}
    for cell in sweep.cells:
        existing = find_completed(cell, done)
        if existing is not None:
            outcomes[cell.index] = CellOutcome(cell, "skipped", "COMPLETED", existing)
            continue
        todo.append(cell)
        interrupted = resumable_run(runs_dir, cell) if resume else None
        if interrupted is not None:
            resume_from[cell.key] = str(interrupted.resolve())
    if not todo:
        return SweepResult(sweep, [outcomes[i] for i in sorted(outcomes)])
    started_here = connect(
        address,
        num_cpus=os.cpu_count() or 1,
        object_store_bytes=0,
        py_modules=("harness", "algorithms", "evaluation", "envs"),
    )
    if threading.current_thread() is threading.main_thread():
        # ray.init installs a SIGTERM handler that exits at once: a kill must stop the cells
        # first (each records INTERRUPTED and ships its last state), as Ctrl-C does.
        signal.signal(signal.SIGTERM, _raise_interrupt)
    here = ray.get_runtime_context().get_node_id()
    log_dir = runs_dir / BOOKKEEPING_DIR / sweep.name / "logs"
    store: Any = (
        ray.remote(RunStore)
        .options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
        )
        .remote(str(runs_dir.resolve()), resume_from, str(log_dir.resolve()))
    )
    task = ray.remote(run_cell_task)
    refs: dict[int, Any] = {}
    lock = threading.Lock()
    stopping = threading.Event()
    counts = {"done": 0, "failed": 0}

    def attempt(cell: Cell) -> CellOutcome:
        with cell_lock(runs_dir, cell.key):
            if stopping.is_set():
                return CellOutcome(cell, "ran", "INTERRUPTED", detail="sweep interrupted")
            again = find_completed(cell, completed_runs(runs_dir))
            if again is not None:
                return CellOutcome(cell, "skipped", "COMPLETED", again)
            action = "resumed" if cell.key in resume_from else "ran"
            ref = task.options(
                num_cpus=cell_cpus(cell.config), max_retries=retries, retry_exceptions=False
            ).remote(cell.config, cell.key, cell.label, store, ship_every_s, ship_population)
            with lock:
                refs[cell.index] = ref
            try:
                status, run_id, node, tail = ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                return CellOutcome(cell, action, "INTERRUPTED", detail="sweep interrupted")
            except ray.exceptions.RayError as error:  # the task failed, or nodes kept dying
                lines = str(error).strip().splitlines()
                return CellOutcome(cell, action, "CRASHED", detail=lines[-1] if lines else "")
            detail = f"node {node[:8]}" + ("" if status == "COMPLETED" else f": {tail}")
            log = log_dir / f"cell-{cell.key}.log"
            return CellOutcome(cell, action, status, run_id, log, detail)

    def report_status() -> None:
        while not stopping.wait(status_every_s):
            with contextlib.suppress(Exception):
                running: dict[str, str] = ray.get(store.status.remote(), timeout=10)
                per_node: dict[str, int] = {}
                for node in running.values():
                    per_node[node[:8]] = per_node.get(node[:8], 0) + 1
                nodes = ", ".join(f"{n}: {c}" for n, c in sorted(per_node.items())) or "none"
                progress(
                    f"sweep {sweep.name}: {counts['done']} done, {len(running)} running "
                    f"(per node: {nodes}), {counts['failed']} not completed, "
                    f"{len(todo) - counts['done'] - counts['failed'] - len(running)} queued"
                )

    reporter = threading.Thread(target=report_status, daemon=True)
    reporter.start()
    pool = ThreadPoolExecutor(
        max_workers=max(1, min(len(todo), 256)), thread_name_prefix="ray-cell"
    )
    try:
        pending = {pool.submit(attempt, cell) for cell in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                outcomes[outcome.cell.index] = outcome
                key = "done" if outcome.status == "COMPLETED" else "failed"
                counts[key] += 1
                progress(
                    f"cell {outcome.cell.index} {outcome.cell.label}: {outcome.status}"
                    f" (run {outcome.run_id}, {outcome.detail})"
                )
    except KeyboardInterrupt:
        stopping.set()
        with lock:
            for ref in refs.values():
                ray.cancel(ref)  # KeyboardInterrupt in each task: its run records INTERRUPTED
        for future in pending:
            future.cancel()
        wait(pending, timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # each task ships its run's last state, then ends
            with contextlib.suppress(Exception):
                if not ray.get(store.status.remote(), timeout=10):
                    break
            time.sleep(0.5)
        raise
    finally:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if started_here:
            ray.shutdown()
    return SweepResult(sweep, [outcomes[i] for i in sorted(outcomes)])
