"""Run-store queries of a sweep: which cells are done, which can be continued.

A sweep sees its runs directory through :mod:`harness.rundir`: the readable
runs' headers, whether ``metrics.json`` was written to the end, whether a
RUNNING run's liveness lock is free (its process is gone).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness import rundir
from harness.record_check import check_header, check_metrics
from harness.rundir import RunHeader, UnreadableRun, metrics_look_complete, scan_runs
from harness.sweep.identity import cell_identity, same_cell
from harness.sweep.spec import Cell

#: Statuses of a run a sweep may continue with ``harness resume`` (RUNNING: when dead).
RESUMABLE = ("INTERRUPTED", "RUNNING")


#: Told about a damaged run directory: its path and a one-line reason.
OnDamaged = Callable[[Path, str], None]


def completed_runs(runs_dir: Path, on_damaged: OnDamaged | None = None) -> list[RunHeader]:
    """The COMPLETED runs of ``runs_dir`` whose ``metrics.json`` was written to the end.

    Damaged run directories, and those with a field a reader cannot use (a planted
    three-file run: :func:`harness.record_check.check_header`), are left out
    (``on_damaged`` hears of each): their cells run again.
    """
    done = []
    for header in scan_runs(runs_dir, on_damaged):
        if header.status != "COMPLETED" or not metrics_look_complete(header.path):
            continue
        if _readable(header, on_damaged):
            done.append(header)
    return done


def _readable(header: RunHeader, on_damaged: OnDamaged | None) -> bool:
    try:
        check_header(header)
    except UnreadableRun as error:
        if on_damaged is not None:
            on_damaged(header.path, str(error))
        return False
    return True


def find_completed(
    cell: Cell, done: list[RunHeader], on_damaged: OnDamaged | None = None
) -> str | None:
    """Id of a completed run of this cell among ``done`` whose metrics read whole, or None.

    A matching run whose ``metrics.json`` does not parse (a stray byte inside)
    does not count: the cell runs again, as for any other damage.
    """
    identity = cell_identity(cell.config)
    for header in done:
        if not same_cell(identity, cell_identity(header.config)):
            continue
        try:
            check_metrics(rundir.read_metrics(header.path))
        except UnreadableRun as error:
            if on_damaged is not None:
                on_damaged(header.path, str(error))
            continue
        return header.run_id
    return None


def resumable_run(runs_dir: Path, cell: Cell) -> Path | None:
    """The newest INTERRUPTED (or dead RUNNING) run of this cell that has a checkpoint."""
    identity = cell_identity(cell.config)
    found: list[tuple[int, Path]] = []
    for header in scan_runs(runs_dir):
        if header.status not in RESUMABLE:
            continue
        if not _readable(header, None) or not same_cell(identity, cell_identity(header.config)):
            continue
        if not (header.path / rundir.CHECKPOINT).is_file():
            continue
        if header.status == "RUNNING" and not rundir.run_is_dead(header.path):
            continue
        found.append((int(header.run_id), header.path))
    return max(found)[1] if found else None
