"""Running one trial's runs, one per seed, side by side: as local subprocesses or as Ray work.

A trial's run for one seed is a sweep cell (:class:`harness.sweep.Cell`) and runs as a
sweep runs its cells: under the cell's lock, a COMPLETED run of the same cell is taken
as it is, an INTERRUPTED one (or a RUNNING one whose process died) is continued with
``harness resume``, and otherwise the cell runs afresh as ``python -m harness.sweep
--cell`` (:func:`harness.sweep.run_cell`), its output in the study's log folder. With
a Ray address the cell is a Ray task instead (:mod:`harness.sweep.ray_cells`): it
reserves its workers' CPUs wherever Ray places it and ships its run directory to this
machine's runs directory as it goes.

:meth:`Cells.stop` stops the trial's runs as Ctrl-C would (SIGINT: each records
INTERRUPTED after writing its last complete step as a checkpoint), for a pruned or an
interrupted trial. While the runs go on, :attr:`SeedJob.run_dir` is found by the
cell's identity among the run directories that appeared after the trial started, so
the study can read each run's evaluations as they are logged.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import rundir
from harness.sweep.identity import cell_identity, same_cell
from harness.sweep.scheduler import (
    REFUSED,
    CellOutcome,
    _Children,
    cell_lock,
    resume_cell,
    run_cell,
)
from harness.sweep.spec import Cell
from harness.sweep.store import completed_runs, find_completed, resumable_run

#: Seconds a stopped run may take to record INTERRUPTED before it is killed.
STOP_TIMEOUT_S = 60.0


@dataclass
class SeedJob:
    """One seed of a trial: its cell, its run directory once known, its outcome once ended."""

    cell: Cell
    run_dir: Path | None = None
    outcome: CellOutcome | None = None
    ended: threading.Event = field(default_factory=threading.Event)

    @property
    def seed(self) -> int:
        return int(self.cell.config["seed"])


def _max_id(runs_dir: Path) -> int:
    return max((int(p.name) for p in rundir.run_dirs(runs_dir)), default=0)


class Cells:
    """A trial's runs, one per seed; see the module docstring."""

    def __init__(self, runs_dir: Path, log_dir: Path, trust_legacy: bool = False) -> None:
        self.runs_dir = runs_dir
        self.log_dir = log_dir
        self.trust_legacy = trust_legacy
        self.jobs: list[SeedJob] = []
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._baseline = 0
        self._not_ours: set[str] = set()

    def start(self, cells: list[Cell]) -> list[SeedJob]:
        """Start every cell in a thread of its own; return their jobs at once."""
        self._baseline = _max_id(self.runs_dir)
        self.jobs = [SeedJob(cell) for cell in cells]
        for job in self.jobs:
            thread = threading.Thread(
                target=self._guarded, args=(job,), name=f"tune-seed-{job.seed}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self.jobs

    def _guarded(self, job: SeedJob) -> None:
        try:
            self._attempt(job)
        except Exception as error:  # a crash of the machinery, not of the run: say it
            job.outcome = CellOutcome(job.cell, "ran", "CRASHED", detail=repr(error))
        finally:
            job.ended.set()

    def _settled(self, job: SeedJob) -> bool:
        """Whether ``job`` needs no run (call under its cell's lock): its trial was stopped,
        or a completed run of its cell exists; sets its outcome then."""
        cell = job.cell
        if self.stopping.is_set():
            job.outcome = CellOutcome(cell, "ran", "INTERRUPTED", detail="trial stopped")
            return True
        done = find_completed(cell, completed_runs(self.runs_dir))
        if done is not None:
            job.run_dir = self.runs_dir / done
            job.outcome = CellOutcome(cell, "skipped", "COMPLETED", done)
            return True
        return False

    def _attempt(self, job: SeedJob) -> None:
        raise NotImplementedError

    def running(self) -> bool:
        return any(not job.ended.is_set() for job in self.jobs)

    def locate(self) -> None:
        """Find the run directory of each started job that has none yet."""
        missing = [job for job in self.jobs if job.run_dir is None]
        if not missing:
            return
        for path in rundir.run_dirs(self.runs_dir):
            if int(path.name) <= self._baseline or path.name in self._not_ours:
                continue
            try:
                header = rundir.read_header(path)
            except (rundir.UnreadableRun, OSError):
                continue  # being created: its config.json may not be there yet
            for job in missing:
                if same_cell(cell_identity(job.cell.config), cell_identity(header.config)):
                    job.run_dir = path
                    missing.remove(job)
                    break
            else:
                self._not_ours.add(path.name)
            if not missing:
                return

    def stop(self) -> None:
        """Stop the trial's runs as Ctrl-C does and wait for them to end."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every job to end; whether they all did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in self.jobs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not job.ended.wait(left):
                return False
        return True


class LocalCells(Cells):
    """Each seed as a subprocess of this machine (``python -m harness.sweep --cell``)."""

    def __init__(self, runs_dir: Path, log_dir: Path, trust_legacy: bool = False) -> None:
        super().__init__(runs_dir, log_dir, trust_legacy)
        self.children = _Children(1)

    def _attempt(self, job: SeedJob) -> None:
        cell = job.cell
        with cell_lock(self.runs_dir, cell.key):
            if self._settled(job):
                return
            interrupted = resumable_run(self.runs_dir, cell)
            if interrupted is not None:
                job.run_dir = interrupted
                outcome = resume_cell(
                    cell,
                    interrupted,
                    self.log_dir,
                    self.children,
                    sys.executable,
                    self.trust_legacy,
                )
                if outcome.status != REFUSED:
                    job.outcome = outcome
                    return
                job.run_dir = None  # the checkpoint was refused: the cell runs afresh
            outcome = run_cell(cell, self.runs_dir, self.log_dir, self.children, sys.executable)
            if outcome.run_id is not None:
                job.run_dir = self.runs_dir / outcome.run_id
            job.outcome = outcome

    def stop(self) -> None:
        self.stopping.set()
        self.children.stopping = True
        signalled: set[int] = set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.running():
            with self.children.lock:
                procs: list[subprocess.Popen[bytes]] = list(self.children.procs)
            for proc in procs:
                if proc.pid in signalled:
                    continue
                signalled.add(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)  # recorded INTERRUPTED, with a checkpoint
            if time.monotonic() > deadline:
                for proc in procs:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            self.wait(0.2)


class RayCells(Cells):
    """Each seed as a Ray task (:func:`harness.sweep.ray_cells.run_cell_task`)."""

    def __init__(
        self,
        runs_dir: Path,
        log_dir: Path,
        ship_every_s: float,
        retries: int,
    ) -> None:
        super().__init__(runs_dir, log_dir)
        self.ship_every_s = ship_every_s
        self.retries = retries
        self.refs: dict[str, Any] = {}
        self.store: Any = None
        self.lock = threading.Lock()

    def start(self, cells: list[Cell]) -> list[SeedJob]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from harness.sweep.ray_cells import RunStore

        resume_from: dict[str, str] = {}
        for cell in cells:
            interrupted = resumable_run(self.runs_dir, cell)
            if interrupted is not None:
                resume_from[cell.key] = str(interrupted.resolve())
        here = ray.get_runtime_context().get_node_id()
        self.store = (
            ray.remote(RunStore)
            .options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
            )
            .remote(str(self.runs_dir.resolve()), resume_from, str(self.log_dir.resolve()))
        )
        return super().start(cells)

    def _attempt(self, job: SeedJob) -> None:
        import ray

        from harness.sweep.ray_cells import cell_cpus, run_cell_task

        cell = job.cell
        with cell_lock(self.runs_dir, cell.key):
            if self._settled(job):
                return
            task = ray.remote(run_cell_task).options(
                num_cpus=cell_cpus(cell.config), max_retries=self.retries, retry_exceptions=False
            )
            with self.lock:
                ref = task.remote(
                    cell.config, cell.key, cell.label, self.store, self.ship_every_s, False
                )
                self.refs[cell.key] = ref
            try:
                status, run_id, node, tail = ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                job.outcome = CellOutcome(cell, "ran", "INTERRUPTED", detail="trial stopped")
                return
            except ray.exceptions.RayError as error:
                lines = str(error).strip().splitlines()
                job.outcome = CellOutcome(cell, "ran", "CRASHED", detail=lines[-1] if lines else "")
                return
            if run_id is not None:
                job.run_dir = self.runs_dir / run_id
            detail = f"Ray node {node[:8]}" + ("" if status == "COMPLETED" else f": {tail}")
            log = self.log_dir / f"cell-{cell.key}.log"
            job.outcome = CellOutcome(cell, "ran", status, run_id, log, detail)

    def stop(self) -> None:
        import ray

        self.stopping.set()
        with self.lock:
            refs = list(self.refs.values())
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref)  # KeyboardInterrupt in the task: its run records INTERRUPTED
        self.wait(STOP_TIMEOUT_S)

    def release(self) -> None:
        """The trial is over: end its run store."""
        import ray

        if self.store is not None:
            with contextlib.suppress(Exception):
                ray.kill(self.store)
            self.store = None
