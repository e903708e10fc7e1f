"""``harness report RUNS_DIR... --out DIR``: a comparison report drawn from stored runs.

Writes into ``DIR``: ``report.md`` (with the PNGs beside it), a self-contained
``report.html`` (the same content, images embedded as base64), ``runs.csv``
(the tidy per-step data of :func:`harness.records.load_runs`) and
``summary.csv`` (one row per run). Figures: eval return against timesteps
and against wall-clock (mean and 95% interval across seeds), episodes per
fitness compared, speed-up and parallel efficiency against workers, bytes per
generation, final scores with IQM and stratified-bootstrap intervals and
probability of improvement (rliable), and a UMAP map of the models visited.
Every figure names its env, budget, seeds and machine.

The plotting stack (matplotlib, seaborn, rliable, umap-learn) is imported only
when the command runs, so ``harness --help`` stays fast.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness report``."""
    parser.add_argument(
        "runs_dirs",
        nargs="+",
        metavar="RUNS_DIR",
        help="runs directories (or single run directories) to read",
    )
    parser.add_argument("--out", required=True, help="output directory for the report")
    parser.add_argument("--title", default=None, help="report title (default: from the runs)")
    parser.add_argument(
        "--umap-runs",
        type=int,
        default=2,
        metavar="N",
        help="draw the UMAP map for up to N runs (one per env and algorithm; 0: none)",
    )
    parser.add_argument(
        "--all-statuses",
        action="store_true",
        help="also use FAILED, INTERRUPTED and RUNNING runs (default: COMPLETED only)",
    )


def run(args: argparse.Namespace) -> int:
    """``harness report``: 0 on success; a usage error when there is nothing to report."""
    from pathlib import Path

    from harness.cli import UsageError
    from harness.records import STATUSES, UnreadableRun

    for raw in args.runs_dirs:
        if not Path(raw).is_dir():
            raise UsageError(f"runs directory {raw!r} does not exist")
    if args.umap_runs < 0:
        raise UsageError(f"--umap-runs must be 0 or more, got {args.umap_runs}")
    from harness.report.build import ReportError, build_report

    statuses = STATUSES if args.all_statuses else ("COMPLETED",)
    try:
        path = build_report(
            args.runs_dirs, args.out, title=args.title, umap_runs=args.umap_runs, statuses=statuses
        )
    except (ReportError, UnreadableRun) as error:
        raise UsageError(str(error)) from None
    print(f"report: {path} and {path.with_suffix('.html')} ({path.parent})")
    return 0
