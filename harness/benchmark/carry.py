"""What the committed report folder carries from one machine or session to the next.

A benchmark outlives the machine it runs on: its cells are spread over sessions and
machines, and one cell (optimes on AntBulletEnv at 10M timesteps) can take longer than
a machine is held. Two archives per task, beside each other in ``reports/benchmark/<task>/``,
make the committed folder the benchmark's state:

* ``runs.tar.xz``: the completed cells' records. ``benchmark run`` and ``plan`` count a
  cell completed there as done, so a fresh runs directory does not run it again.
* ``unfinished.tar.xz``: for each cell not yet completed, the furthest run that has a
  checkpoint (records and ``checkpoint.pkl``), written by ``benchmark report``.
  ``benchmark run --adopt-unfinished`` puts each into the runs directory, signs its
  checkpoint with this user's key (:func:`harness.checkpoint.adopt_checkpoint`, the act
  of trust: docs/trust.md) and the sweep resumes it from there.

Only this module reads or writes ``unfinished.tar.xz``; reports never read it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness import rundir
from harness.benchmark.spec import Benchmark
from harness.sweep.identity import cell_identity, same_cell
from harness.sweep.spec import Cell
from harness.sweep.store import RESUMABLE

#: Completed runs of a task (what its report draws).
ARCHIVE = "runs" + rundir.ARCHIVE_SUFFIX
#: Runs of a task's missing cells that can continue, with their checkpoints.
UNFINISHED = "unfinished" + rundir.ARCHIVE_SUFFIX
#: A checkpoint larger than this is not carried in the report folder (an off-policy run's
#: holds its replay buffer: SAC's is about 200 MB at 500k steps); its run goes on only on
#: the machine that has it.
CARRY_MAX_BYTES = 20 * 2**20


def task_slug(env: str) -> str:
    """A task's folder name under the report: the env name in lower case."""
    return env.lower()


def task_folder(out: Path, env: str) -> Path:
    """Where a task's report and archives live under the report folder ``out``."""
    return out / task_slug(env)


def archived_runs(archive: Path) -> list[rundir.RunHeader]:
    """Headers of the runs in one run archive ([] when there is none)."""
    if not archive.is_file():
        return []
    return rundir.scan_runs(rundir.extract_run_archive(archive))


def _matching(cell: Cell, headers: Iterable[rundir.RunHeader]) -> list[rundir.RunHeader]:
    identity = cell_identity(cell.config)
    return [h for h in headers if same_cell(identity, cell_identity(h.config))]


def archived_completed(bench: Benchmark, out: Path) -> dict[int, Path]:
    """Cell index -> its completed run in the committed archives under ``out``; a pair's
    cell only with its partner's (a half-done pair runs again as a pair)."""
    found: dict[int, Path] = {}
    for task in bench.tasks:
        headers = [
            h
            for h in archived_runs(task_folder(out, task.env) / ARCHIVE)
            if h.status == "COMPLETED"
        ]
        for cell in bench.sweep.cells:
            if bench.task_of(cell) is task:
                match = _matching(cell, headers)
                if match:
                    found[cell.index] = match[0].path
    whole = bench.sweep.whole_pairs(found)
    return {index: path for index, path in found.items() if index in whole}


def progress(run_dir: Path) -> float:
    """Timesteps a run had logged (0 when unreadable): how far it got."""
    try:
        values = rundir.read_metrics(run_dir).get("timesteps", {}).get("values", [])
        return float(values[-1]) if values else 0.0
    except (rundir.UnreadableRun, TypeError, ValueError, AttributeError):
        return 0.0


def _continuable(headers: Iterable[rundir.RunHeader]) -> list[rundir.RunHeader]:
    return [h for h in headers if h.status in RESUMABLE and (h.path / rundir.CHECKPOINT).is_file()]


@dataclass(frozen=True)
class Unfinished:
    """A run of a missing cell that the committed folder carries."""

    cell: Cell
    path: Path  # the run directory, unpacked from the archive
    timesteps: float


def unfinished_runs(bench: Benchmark, out: Path) -> list[Unfinished]:
    """The runs ``unfinished.tar.xz`` carries for the cells of ``bench`` (one per cell)."""
    carried = []
    for task in bench.tasks:
        headers = _continuable(archived_runs(task_folder(out, task.env) / UNFINISHED))
        for cell in bench.sweep.cells:
            if bench.task_of(cell) is not task:
                continue
            match = _matching(cell, headers)
            if match:
                carried.append(Unfinished(cell, match[0].path, progress(match[0].path)))
    return carried


def unfinished_here(bench: Benchmark, runs_dir: Path) -> list[Unfinished]:
    """Per cell of ``bench``, the furthest run in ``runs_dir`` that could continue."""
    if not runs_dir.is_dir():
        return []
    here = _continuable(rundir.scan_runs(runs_dir))
    found = []
    for cell in bench.sweep.cells:
        paths = [h.path for h in _matching(cell, here)]
        if paths:
            path = max(paths, key=progress)
            found.append(Unfinished(cell, path, progress(path)))
    return found


def cpu_seconds_per_timestep(run_dir: Path) -> float | None:
    """CPU-seconds the run spent per timestep, from its last CPU meter reading."""
    try:
        metrics = rundir.read_metrics(run_dir)
        cpu, timesteps = metrics["cpu_seconds"], metrics["timesteps"]
        at = dict(zip(timesteps["steps"], timesteps["values"], strict=False))
        step, spent = cpu["steps"][-1], float(cpu["values"][-1])
        done = float(at[step])
    except (rundir.UnreadableRun, KeyError, IndexError, TypeError, ValueError):
        return None
    return spent / done if done > 0 and spent > 0 else None


def cpu_seconds_spent(run_dir: Path) -> float | None:
    """CPU-seconds the run had spent at its last CPU meter reading."""
    try:
        spent = float(rundir.read_metrics(run_dir)["cpu_seconds"]["values"][-1])
    except (rundir.UnreadableRun, KeyError, IndexError, TypeError, ValueError):
        return None
    return spent if spent > 0 else None


def cost_left(cell: Cell, whole: float, started: Unfinished | None) -> float:
    """CPU-seconds ``cell`` has left of ``whole``: all of it where it has not started; for a
    run to a timesteps budget, the share of timesteps it has left; for a run to a CPU limit,
    what its CPU meter has not yet read."""
    if started is None:
        return whole
    budget = float(cell.config.get("timesteps") or 0.0)
    if budget:
        return whole * max(0.0, 1.0 - started.timesteps / budget)
    spent = cpu_seconds_spent(started.path) if cell.config.get("cpu_limit") else None
    return max(0.0, whole - spent) if spent else whole


def _checkpoint_bytes(run_dir: Path) -> int:
    try:
        return (run_dir / rundir.CHECKPOINT).stat().st_size
    except OSError:
        return 0


def write_unfinished(bench: Benchmark, runs_dir: Path, out: Path, missing: set[str]) -> None:
    """Refresh each task's ``unfinished.tar.xz`` for the cells labelled in ``missing``.

    ``missing``: the cells completed neither in ``runs_dir`` nor in the committed
    ``runs.tar.xz`` (what :func:`harness.benchmark.report.refresh_archives` returns). For
    each, the run with a checkpoint that got furthest, from ``runs_dir`` or the archive's
    copy, is kept. A live run is taken as it stands (its checkpoint is written atomically;
    the metrics logged after it are dropped at resume). A task with none loses the file.
    """
    here = {u.cell.index: u for u in unfinished_here(bench, runs_dir)}
    before = {u.cell.index: u for u in unfinished_runs(bench, out)}
    for task in bench.tasks:
        chosen: list[Path] = []
        for cell in bench.sweep.cells:
            if bench.task_of(cell) is not task or cell.label not in missing:
                continue
            candidates = [u for u in (here.get(cell.index), before.get(cell.index)) if u]
            heavy = [u for u in candidates if _checkpoint_bytes(u.path) > CARRY_MAX_BYTES]
            for item in heavy:
                print(
                    f"benchmark: {cell.label} at {item.timesteps:,.0f} timesteps is not carried: "
                    f"its checkpoint ({_checkpoint_bytes(item.path) / 2**20:,.0f} MB) exceeds "
                    f"{CARRY_MAX_BYTES / 2**20:.0f} MB; it goes on only where it ran",
                    file=sys.stderr,
                )
            candidates = [u for u in candidates if u not in heavy]
            if candidates:
                chosen.append(max(candidates, key=lambda u: u.timesteps).path)
        archive = task_folder(out, task.env) / UNFINISHED
        if not chosen:
            archive.unlink(missing_ok=True)
            continue
        with tempfile.TemporaryDirectory(prefix="harness-unfinished-") as staging:
            numbered = []
            for number, path in enumerate(chosen, start=1):
                numbered.append(Path(staging) / str(number))
                numbered[-1].mkdir()
                _copy_carried_files(path, numbered[-1])
            rundir.write_run_archive(numbered, archive, also=[rundir.CHECKPOINT])


def _copy_carried_files(source: Path, target: Path) -> None:
    """The files a carried run needs; the checkpoint first, so the metrics read after it
    are at least as far."""
    for name in (rundir.CHECKPOINT, *rundir.ARCHIVED_FILES):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)


def _new_run_dir(runs_dir: Path) -> Path:
    """A new run directory with the next free numeric id (as Sacred numbers runs)."""
    ids = [int(p.name) for p in runs_dir.iterdir() if p.name.isdigit()]
    number = max(ids, default=0) + 1
    while True:
        target = runs_dir / str(number)
        try:
            target.mkdir()
            return target
        except FileExistsError:  # another sweep took this id
            number += 1


def carried_ahead(
    bench: Benchmark, archive_dir: Path, runs_dir: Path, cells: Iterable[Cell]
) -> list[Unfinished]:
    """The carried runs of ``cells`` that got further than every run of theirs in ``runs_dir``.

    A cell completed in ``runs_dir``, or whose own continuable run there got as far, keeps
    its own run: only the rest are worth adopting (or worth a warning when not adopted).
    """
    wanted = {cell.index for cell in cells}
    completed = [h for h in rundir.scan_runs(runs_dir) if h.status == "COMPLETED"]
    own = {u.cell.index: u.timesteps for u in unfinished_here(bench, runs_dir)}
    return [
        item
        for item in unfinished_runs(bench, archive_dir)
        if item.cell.index in wanted
        and not _matching(item.cell, completed)
        and item.timesteps > own.get(item.cell.index, -1.0)
    ]


def adopt_unfinished(
    carried: Iterable[Unfinished], runs_dir: Path
) -> tuple[list[tuple[Unfinished, Path]], list[str]]:
    """Put each carried run into ``runs_dir`` to be resumed (see :func:`carried_ahead`).

    Returns the copies, and a line for each run refused (its checkpoint damaged: that
    cell runs afresh).

    Each copy's checkpoint is signed with this user's key and its run marked stopped (a
    free liveness lock), so the sweep's resume picks it up like any interrupted run.
    """
    from harness.checkpoint import CheckpointError, adopt_checkpoint

    adopted, refused = [], []
    for item in carried:
        target = _new_run_dir(runs_dir)
        _copy_carried_files(item.path, target)
        try:
            adopt_checkpoint(target / rundir.CHECKPOINT)
        except CheckpointError as error:  # damaged in transit: the cell runs afresh
            shutil.rmtree(target)
            refused.append(f"{item.cell.label}: {error}")
            continue
        (target / rundir.LOCK).touch()  # nobody holds it: the run is known to be stopped
        _note_carried(target)
        adopted.append((item, target))
    return adopted, refused


def _note_carried(run_dir: Path) -> None:
    """Record in ``run.json`` that the run was carried here from another machine."""
    path = run_dir / rundir.RUN
    run = json.loads(path.read_text(encoding="utf-8"))
    run.setdefault("carried", []).append(
        {"to_host": os.uname().nodename, "from_host": run.get("host", {}).get("hostname")}
    )
    rundir.atomic_write(path, [json.dumps(run, indent=2).encode("utf-8")])
