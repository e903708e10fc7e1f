"""``harness sweep FILE.yaml``, and ``python -m harness.sweep --cell CONFIG.json`` (one cell)."""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness import schema
from harness.checkpoint import ensure_checkpoint_key
from harness.commands import (
    OVERSUBSCRIBE_FACTOR,
    UsageError,
    add_import_flag,
    check_run_resources,
    check_runs_dir,
)
from harness.signals import latch_stop_signals
from harness.sweep.scheduler import RESULT_PREFIX, SweepResult, run_sweep, warn_damaged
from harness.sweep.spec import (
    GRID_KEYS,
    MAX_CELLS,
    SweepError,
    load_sweep,
    parse_grid_override,
)
from harness.sweep.store import completed_runs, find_completed, resumable_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness sweep``."""
    parser.add_argument("file", help="sweep file (YAML), e.g. experiments/demo.yaml")
    parser.add_argument("--runs-dir", default="runs", help="Sacred FileStorage directory")
    parser.add_argument(
        "--jobs",
        type=schema.integer_type("jobs"),
        default=None,
        help="cells run at once (default: the file's jobs, else 1); more jobs "
        "than cores distorts wall-clock comparisons",
    )
    add_import_flag(parser, "first, for every cell (added to the file's imports)")
    schema.add_set_flag(
        parser,
        "override a knob in every cell (as `harness run --set`), e.g. timesteps=200000 for a "
        "smaller budget",
    )
    parser.add_argument(
        "--grid",
        dest="grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help=f"replace or add a grid key: an axis ({', '.join(GRID_KEYS)}), a --set knob or "
        "an algorithm hyperparameter, e.g. seed=0,1 or sigma=0.02,0.05",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells and whether each would run or be skipped",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="run interrupted cells afresh instead of continuing them from their checkpoint",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="run every cell as Ray work on the cluster at ADDR (default: $RAY_ADDRESS if "
        "set; 'local' starts a private Ray instance); each cell reserves its workers' CPUs",
    )
    parser.add_argument(
        "--ray-retries",
        type=int,
        default=3,
        help="with --ray-address: times a cell is retried when its node or worker dies (3)",
    )
    parser.add_argument(
        "--ship-every",
        type=float,
        default=30.0,
        metavar="SEC",
        help="with --ray-address: seconds between shipments of a cell's run directory "
        "(checkpoints, metrics) to this machine's runs directory (30)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"run a grid of more than {MAX_CELLS} cells",
    )
    parser.add_argument(
        "--oversubscribe",
        action="store_true",
        help=f"allow cells with more workers than {OVERSUBSCRIBE_FACTOR}x this machine's CPUs",
    )
    parser.add_argument(
        "--trust-legacy-checkpoints",
        action="store_true",
        help="continue interrupted runs whose checkpoints are unsigned pickles of an "
        "earlier harness version (see docs/trust.md); without it they run afresh",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """``harness sweep``: 0 when every cell is completed, 1 when some failed."""
    return run_command(args)[0]


def run_command(args: argparse.Namespace) -> tuple[int, SweepResult | None]:
    """``harness sweep`` with its outcome: the exit status and every cell's outcome
    (None for ``--dry-run``); :func:`harness.sweep_runs` reads the outcomes."""
    try:
        grid = dict(parse_grid_override(text) for text in args.grid)
        sweep = load_sweep(
            args.file,
            extra_set=args.overrides,
            grid_override=grid,
            extra_imports=args.imports,
            max_cells=None if args.force else MAX_CELLS,
        )
    except SweepError as error:
        raise UsageError(str(error)) from None
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be a positive integer, got {args.jobs}")
    jobs = args.jobs if args.jobs is not None else sweep.jobs
    runs_dir = Path(args.runs_dir)
    check_runs_dir(runs_dir)
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    if address is not None and sweep.pairs:
        raise UsageError(f"{args.file}: pair_with runs each pair on this machine, not on Ray")
    for cell in sweep.cells if address is None else []:  # a cluster's CPUs are not ours
        try:
            check_run_resources(cell.config, allow_oversubscribe=args.oversubscribe)
        except UsageError as error:
            raise UsageError(f"{args.file}: cell {cell.label}: {error}") from None
    print(f"sweep {sweep.name}: {len(sweep.cells)} cells", flush=True)
    if args.dry_run:
        done = completed_runs(runs_dir, warn_damaged)
        for cell in sweep.cells:
            existing = find_completed(cell, done, warn_damaged)
            if existing is not None:
                state = f"skip (run {existing})"
            else:
                interrupted = None if args.no_resume else resumable_run(runs_dir, cell)
                state = "run" if interrupted is None else f"resume (run {interrupted.name})"
            print(f"{cell.index:3d} {state:<16} {cell.label}")
        return 0, None
    ensure_checkpoint_key()  # once here rather than failing in every cell
    if address is not None:
        result = _run_on_ray(args, sweep, runs_dir, address)
        return _summarise(sweep, result, runs_dir), result
    most_workers = max(int(c.config["workers"]) for c in sweep.cells)
    cores = os.cpu_count() or 1
    if jobs * most_workers > cores:
        print(
            f"harness: note: {jobs} jobs x {most_workers} workers on {cores} cores; "
            f"wall-clock figures of these runs share cores",
            file=sys.stderr,
        )
    result = run_sweep(
        sweep,
        runs_dir,
        jobs,
        progress=not args.no_progress,
        resume=not args.no_resume,
        trust_legacy=args.trust_legacy_checkpoints,
    )
    return _summarise(sweep, result, runs_dir), result


def _summarise(sweep: Any, result: Any, runs_dir: Path) -> int:
    skipped = result.count("skipped")
    ran_ok = result.count("ran", "COMPLETED")
    resumed = result.count("resumed", "COMPLETED")
    failed = result.failed
    print(
        f"sweep {sweep.name}: {len(sweep.cells)} cells, {skipped} already completed, "
        f"{ran_ok} ran, {resumed} resumed, {len(failed)} not completed; runs in {runs_dir}"
    )
    for outcome in failed:
        print(
            f"  cell {outcome.cell.index} {outcome.cell.label}: {outcome.status}, log {outcome.log}"
        )
    return 1 if failed else 0


def _run_on_ray(args: argparse.Namespace, sweep: Any, runs_dir: Path, address: str) -> SweepResult:
    """``harness sweep --ray-address``: the cells as Ray work (harness.sweep.ray_cells)."""
    from harness.commands import check_ray_address
    from harness.sweep.ray_cells import run_sweep_on_ray

    if args.ray_retries < 0:
        raise UsageError(f"--ray-retries must be 0 or more, got {args.ray_retries}")
    if not args.ship_every > 0:
        raise UsageError(
            f"--ship-every must be a positive number of seconds, got {args.ship_every}"
        )
    if address != "local":
        check_ray_address(address)
    result = run_sweep_on_ray(
        sweep,
        runs_dir,
        None if address == "local" else address,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        resume=not args.no_resume,
        retries=args.ray_retries,
        ship_every_s=args.ship_every,
    )
    return result


def cell_main(argv: list[str]) -> int:
    """``python -m harness.sweep --cell CONFIG.json --runs-dir DIR``: run one cell."""
    parser = argparse.ArgumentParser(prog="python -m harness.sweep")
    parser.add_argument("--cell", required=True, help="JSON file with a completed run config")
    parser.add_argument("--runs-dir", required=True)
    args = parser.parse_args(argv)
    latch_stop_signals()  # a stop (the sweep stopping its cells) interrupts once resumable
    from harness.experiment import make_observer, start_run

    config = json.loads(Path(args.cell).read_text(encoding="utf-8"))
    try:
        # Sacred's INFO lines (run id, result) belong in the cell's log file.
        run = start_run(copy.deepcopy(config), [make_observer(args.runs_dir)], verbose=True)
    except BaseException as error:
        # Sacred has recorded the run as FAILED or INTERRUPTED; name it for the sweep.
        from harness.experiment import ex

        current = ex.current_run
        if current is not None and current._id is not None:
            status = "INTERRUPTED" if isinstance(error, KeyboardInterrupt) else "FAILED"
            print(f"{RESULT_PREFIX} {current._id} {status}", flush=True)
        raise
    print(f"{RESULT_PREFIX} {run._id} {run.status}", flush=True)
    return 0 if run.status == "COMPLETED" else 1
