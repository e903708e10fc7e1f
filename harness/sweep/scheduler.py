"""Running a sweep's cells: one subprocess each, ``jobs`` at once, one lock per cell.

Each cell runs as ``python -m harness.sweep --cell CONFIG.json`` (or, to
continue an interrupted run, ``harness resume``), its output appended to
``RUNS_DIR/_sweeps/<name>/logs/``; see "Concurrency" in :mod:`harness.sweep`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from harness import rundir
from harness.cputime import SWEEP_JOBS_ENV
from harness.progress import progress_bar
from harness.signals import interrupt_on_stop_signals
from harness.sweep.estimate import CostEstimator, plan_rates
from harness.sweep.spec import Cell, Sweep
from harness.sweep.store import completed_runs, find_completed, resumable_run
from harness.user_modules import import_flags

BOOKKEEPING_DIR = "_sweeps"


RESULT_PREFIX = "harness-sweep-cell:"
#: Status of a resume that ``harness resume`` refused (the cell then runs afresh).
REFUSED = "REFUSED"


@contextlib.contextmanager
def cell_lock(runs_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on this cell of this runs directory."""
    folder = runs_dir / BOOKKEEPING_DIR / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key}.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass
class CellOutcome:
    """What happened to one cell."""

    cell: Cell
    action: str  # "skipped" (already completed), "ran" (a new run) or "resumed"
    status: str  # COMPLETED, FAILED, INTERRUPTED, CRASHED (no run record)
    run_id: str | None = None
    log: Path | None = None
    detail: str = ""


@dataclass
class SweepResult:
    """Outcomes of every cell, in cell order."""

    sweep: Sweep
    outcomes: list[CellOutcome] = field(default_factory=list)

    def count(self, action: str, status: str | None = None) -> int:
        return sum(
            1
            for o in self.outcomes
            if o.action == action and (status is None or o.status == status)
        )

    @property
    def failed(self) -> list[CellOutcome]:
        return [o for o in self.outcomes if o.status != "COMPLETED"]


class _Children:
    """Live cell subprocesses, so an interrupt can stop them."""

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs
        self.lock = threading.Lock()
        self.procs: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def stop(self, timeout: float = 20.0) -> None:
        self.stopping = True
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(2)  # SIGINT: Sacred records the run as INTERRUPTED
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


@dataclass(frozen=True)
class Placement:
    """Where a cell's process runs: extra environment (a pair's file) and a core to pin it to."""

    env: dict[str, str] = field(default_factory=dict)
    core: int | None = None


def _run_logged(
    command: list[str],
    log_path: Path,
    header: str,
    children: _Children | None,
    placement: Placement | None = None,
) -> tuple[int, str]:
    """Run ``command`` with output appended to ``log_path``; its exit code and new output."""
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1"}
    if children is not None:
        env[SWEEP_JOBS_ENV] = str(children.jobs)  # recorded in the run (harness.cputime)
    if placement is not None:
        env.update(placement.env)
    with open(log_path, "ab") as log:
        start = log.tell()  # earlier attempts of this cell are above
        log.write(f"$ {' '.join(command)}\n# {header}\n".encode())
        log.flush()
        try:
            # Its own session: a terminal's Ctrl-C reaches the sweep, which stops cells once.
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            log.write(f"cannot start: {error}\n".encode())
            return -1, f"cannot start: {error}"
        if placement is not None and placement.core is not None:
            # before the run starts any worker (they inherit it): it is still importing
            with contextlib.suppress(OSError):
                os.sched_setaffinity(proc.pid, {placement.core})
        if children is not None:
            with children.lock:
                children.procs.add(proc)
        try:
            returncode = proc.wait()
        finally:
            if children is not None:
                with children.lock:
                    children.procs.discard(proc)
    with open(log_path, "rb") as stream:
        stream.seek(start)
        return returncode, stream.read().decode("utf-8", errors="replace")


def _log_path(log_dir: Path, cell: Cell) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir / f"cell-{cell.index:03d}-{cell.key}.log"


def run_cell(
    cell: Cell,
    runs_dir: Path,
    log_dir: Path,
    children: _Children | None = None,
    python: str = sys.executable,
    placement: Placement | None = None,
) -> CellOutcome:
    """Run one cell as a new run, in a subprocess, its output appended to a log file."""
    log_path = _log_path(log_dir, cell)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cell.config, handle)
        config_path = Path(handle.name)
    # -P: the working folder stays off the cell's sys.path (a planted yaml.py; docs/trust.md)
    command = [python, "-P", "-m", "harness.sweep", "--cell", str(config_path)]
    command += ["--runs-dir", str(runs_dir)]
    try:
        returncode, output = _run_logged(command, log_path, cell.label, children, placement)
    finally:
        config_path.unlink(missing_ok=True)
    run_id, status = None, "CRASHED"
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            parts = line[len(RESULT_PREFIX) :].split()
            if len(parts) >= 2:
                run_id, status = parts[0], parts[1]
    if status == "CRASHED" and returncode == 1:
        status = "FAILED"
    detail = "" if status == "COMPLETED" else _tail(output)
    return CellOutcome(cell, "ran", status, run_id, log_path, detail)


def resume_cell(
    cell: Cell,
    run_dir: Path,
    log_dir: Path,
    children: _Children | None = None,
    python: str = sys.executable,
    trust_legacy: bool = False,
    placement: Placement | None = None,
) -> CellOutcome:
    """Continue an interrupted run of this cell with ``harness resume``.

    Status ``REFUSED`` when ``harness resume`` refuses it (a usage error: a
    damaged, planted or unsigned checkpoint, say; ``detail`` is its line); the
    caller then runs the cell afresh.
    """
    log_path = _log_path(log_dir, cell)
    command = [python, "-P", "-m", "harness.cli", "resume", str(run_dir), "--no-progress"]
    command += import_flags(cell.config)  # the sweep file's modules: the user's word
    if trust_legacy:
        command.append("--trust-legacy-checkpoint")
    returncode, output = _run_logged(command, log_path, f"resume {cell.label}", children, placement)
    if returncode == 2:
        refusal = [line for line in output.splitlines() if line.startswith("harness: error:")]
        reason = refusal[-1].removeprefix("harness: error:").strip() if refusal else _tail(output)
        return CellOutcome(cell, "resumed", REFUSED, run_dir.name, log_path, reason)
    status = rundir.read_status(run_dir) or "CRASHED"
    if returncode != 0 and status in ("COMPLETED", "RUNNING"):
        status = "CRASHED"
    detail = "" if status == "COMPLETED" else _tail(output)
    return CellOutcome(cell, "resumed", status, run_dir.name, log_path, detail)


def warn_damaged(path: Path, reason: str) -> None:
    """One line for a damaged run directory a sweep passes over (its cell runs again)."""
    print(f"harness: warning: skipping damaged run directory {path}: {reason}", file=sys.stderr)


class _Cores:
    """This process's cores, handed out two at a time to the pairs running at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    @contextlib.contextmanager
    def two(self) -> Iterator[tuple[int | None, int | None]]:
        """Two cores of their own for a pair's runs, or (None, None) when none are free."""
        with self.lock:
            taken = self.free[:2] if len(self.free) >= 2 else []
            del self.free[: len(taken)]
        try:
            yield (taken[0], taken[1]) if taken else (None, None)
        finally:
            with self.lock:
                self.free = sorted([*self.free, *taken])


def pair_file_of(runs_dir: Path, sweep_name: str, lead: Cell, follower: Cell) -> Path:
    """The pair's file (harness.pairing), beside the sweep's logs."""
    folder = runs_dir / BOOKKEEPING_DIR / sweep_name / "pairs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{lead.key}-{follower.key}.json"


def run_pair(
    lead: Cell,
    follower: Cell,
    runs_dir: Path,
    sweep_name: str,
    cores: _Cores,
    attempt: Callable[[Cell, Placement], CellOutcome],
    lead_afresh: bool = False,
) -> list[CellOutcome]:
    """Run an equal-compute pair side by side, each on a core of its own where two are free:
    the lead to its budget, the follower to the lead's CPU-seconds (:mod:`harness.pairing`).

    Each side is run, resumed or skipped as a lone cell would be (their locks held). A lead
    completed earlier gives its recorded CPU-seconds at once; a lead that ends otherwise
    tells the follower to stop (interrupted, so the pair resumes together). With
    ``lead_afresh`` the lead runs again beside a follower that has no run to go on with.
    """
    from harness.pairing import PAIR_FILE_ENV, LeadState, write_state

    path = pair_file_of(runs_dir, sweep_name, lead, follower)
    path.unlink(missing_ok=True)  # a stale state of an earlier attempt must not pace this one
    done = None if lead_afresh else find_completed(lead, completed_runs(runs_dir))
    if done is not None:
        summary = rundir.read_json(runs_dir / done / rundir.SUMMARY)
        write_state(path, LeadState(float(summary["cpu_seconds"]), done=True, run_id=done))
    with cores.two() as (lead_core, follower_core), ThreadPoolExecutor(2) as pool:
        env = {PAIR_FILE_ENV: str(path)}
        ahead = pool.submit(attempt, lead, Placement(env, lead_core))
        behind = pool.submit(attempt, follower, Placement(env, follower_core))
        lead_outcome = ahead.result()
        if lead_outcome.status != "COMPLETED":
            write_state(path, LeadState(0.0, stopped=lead_outcome.status))
        return [lead_outcome, behind.result()]


def run_sweep(
    sweep: Sweep,
    runs_dir: Path,
    jobs: int = 1,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    python: str = sys.executable,
    resume: bool = True,
    trust_legacy: bool = False,
) -> SweepResult:
    """Run every cell not yet completed in ``runs_dir``; ``jobs`` cells at once.

    With ``resume``, a cell whose last run was INTERRUPTED (or is RUNNING with
    its process gone) and left a checkpoint continues that run with
    ``harness resume``; FAILED runs and runs without a checkpoint run afresh. A pair's
    completed half runs again beside its partner where that has no run to go on with.
    """
    runs_dir.mkdir(parents=True, exist_ok=True)
    log_dir = runs_dir / BOOKKEEPING_DIR / sweep.name / "logs"
    done = completed_runs(runs_dir, warn_damaged)
    outcomes: dict[int, CellOutcome] = {}
    for cell in sweep.cells:
        existing = find_completed(cell, done, warn_damaged)
        if existing is not None:
            outcomes[cell.index] = CellOutcome(cell, "skipped", "COMPLETED", existing)
    cells = {cell.index: cell for cell in sweep.cells}
    afresh: set[int] = set()  # completed halves of pairs that run again beside a new partner
    for index in set(outcomes) - sweep.whole_pairs(outcomes):
        if not (resume and resumable_run(runs_dir, cells[sweep.partner_of(index)])):
            del outcomes[index]
            afresh.add(index)
    todo = [cell for cell in sweep.cells if cell.index not in outcomes]
    # tqdm's own rate assumes every cell costs what the finished ones did: the bar shows
    # the estimator's ETA instead (harness.sweep.estimate). Not on a terminal: plain lines
    # at a low rate (harness.progress).
    bar = progress_bar(
        total=len(sweep.cells),
        initial=len(outcomes),
        unit="run",
        desc=f"sweep {sweep.name}",
        disable=not progress,
        file=sys.stderr,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs "
        "[{elapsed}{postfix}]",
    )
    say = echo or bar.write
    children = _Children(max(1, jobs))
    estimator = CostEstimator(plan_rates())
    estimator.observe_runs(done)
    started: dict[int, float] = {}  # cell index -> monotonic start, while it runs
    last = ""

    def show_eta() -> None:
        now = time.monotonic()
        running = [(c.config, now - started[c.index]) for c in todo if c.index in started]
        waiting = [c.config for c in todo if c.index not in started and c.index not in outcomes]
        shown = estimator.describe(waiting, running, max(1, jobs))
        bar.set_postfix_str(f"{shown}; {last}" if last else shown)

    def attempt_locked(cell: Cell, placement: Placement | None = None) -> CellOutcome:
        """Run, resume or skip one cell whose lock is held."""
        if children.stopping:
            return CellOutcome(cell, "ran", "INTERRUPTED", detail="sweep interrupted")
        # Another sweep may have completed this cell while we waited for the lock.
        again = None if cell.index in afresh else find_completed(cell, completed_runs(runs_dir))
        if again is not None:
            return CellOutcome(cell, "skipped", "COMPLETED", again)
        interrupted = resumable_run(runs_dir, cell) if resume else None
        if interrupted is not None:
            outcome = resume_cell(
                cell, interrupted, log_dir, children, python, trust_legacy, placement
            )
            if outcome.status != REFUSED:
                return outcome
            say(
                f"harness: warning: cell {cell.index} {cell.label}: run {outcome.run_id} "
                f"not resumed ({outcome.detail}); running the cell afresh"
            )
        return run_cell(cell, runs_dir, log_dir, children, python, placement)

    def attempt(cell: Cell) -> list[CellOutcome]:
        started[cell.index] = time.monotonic()
        with cell_lock(runs_dir, cell.key):
            return [attempt_locked(cell)]

    def attempt_pair(lead: Cell, follower: Cell) -> list[CellOutcome]:
        started[lead.index] = started[follower.index] = time.monotonic()
        with cell_lock(runs_dir, lead.key), cell_lock(runs_dir, follower.key):
            return run_pair(
                lead, follower, runs_dir, sweep.name, cores, attempt_locked, lead.index in afresh
            )

    by_index = {cell.index: cell for cell in todo}
    paired = [
        (by_index[lead], by_index[follower])
        for lead, follower in sweep.pairs
        if lead in by_index and follower in by_index
    ]
    in_pairs = {cell.index for pair in paired for cell in pair}
    cores = _Cores()

    interrupt_on_stop_signals()  # kill stops the cells first, as Ctrl-C does
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="sweep-cell")
    pending: set[Future[list[CellOutcome]]] = set()
    try:
        # in the sweep's order: a pair where its first cell stands
        first_of_pair = {min(a.index, b.index): (a, b) for a, b in paired}
        for cell in todo:
            if cell.index in first_of_pair:
                pending.add(pool.submit(attempt_pair, *first_of_pair[cell.index]))
            elif cell.index not in in_pairs:
                pending.add(pool.submit(attempt, cell))
        show_eta()
        while pending:
            finished, pending = wait(pending, timeout=2.0, return_when=FIRST_COMPLETED)
            for outcome in (o for future in finished for o in future.result()):
                outcomes[outcome.cell.index] = outcome
                began = started.pop(outcome.cell.index, None)
                if began is not None and outcome.status == "COMPLETED":
                    estimator.observe(outcome.cell.config, time.monotonic() - began)
                if outcome.status != "COMPLETED":
                    where = f" (run {outcome.run_id})" if outcome.run_id else ""
                    say(
                        f"cell {outcome.cell.index} {outcome.cell.label}: {outcome.status}"
                        f"{where}; log {outcome.log}: {outcome.detail}"
                    )
                last = (
                    f"last: {outcome.cell.config['algo']} "
                    f"seed {outcome.cell.config['seed']} {outcome.status}"
                )
                show_eta()  # before the update, which draws it (or writes the line)
                bar.update(1)
            show_eta()
    except KeyboardInterrupt:
        children.stop()
        for future in pending:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return SweepResult(sweep, [outcomes[i] for i in sorted(outcomes)])
