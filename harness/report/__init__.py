"""``harness report RUNS_DIR... --out DIR``: a comparison report drawn from stored runs.

Writes into ``DIR``: ``report.md`` (with the PNGs beside it), a self-contained
``report.html`` (the same content, images embedded as base64), ``runs.csv``
(the tidy per-step data of :func:`harness.records.load_runs`) and
``summary.csv`` (one row per run, with its group and scores).

Which runs: every run read, narrowed by ``--algo A`` (repeatable), ``--env E``,
``--sweep NAME`` and ``--where KEY=VALUE`` (a config knob or hyperparameter compared
as the config's typed value; repeatable) before anything is drawn
(:mod:`harness.report.filters`); ``--threshold R`` adds, per group, the timesteps,
wall-clock and CPU-seconds to first reach return R, with the runs that reached it and
those whose own confirmation evaluations confirmed it.

What a report holds, in order: a title line with the runs per group and the
budget; its result: a generated, caveated conclusion per env (who leads at
equal timesteps, at equal wall-clock and CPU-seconds, every group ranked, and
whether the intervals allow saying so; groups at or above the env's threshold tie
on score and the one that got there first is named) with the main curve, the
scores at the common budget and the time-to-threshold table; warnings
when the runs come from unlike machines or ran side by side with more workers
than cores (wall-clock then is the machine's load), when groups' used budgets
differ by more than 10% or a run overran its budget; the report's own note
(``--note``); the settings behind every curve; requested and used budgets
(timesteps, wall-clock, CPU-seconds, cores); scores at the common budget (with
P(X > Y) and, for a grid of one hyperparameter, score against its value) and
at the end of each run; eval return against timesteps (with published anchors
from ``experiments/anchors.yaml``) and against wall-clock; performance profiles
when several envs are compared; episodes per fitness; scaling with workers
(ideal and Amdahl model); bytes over the wire; a PCA (or, with ``--umap``,
UMAP) map of the models visited; the runs; and appendices with every setting
and the command that reproduces each run. Everything after the result, the
warnings and the introduction is folded (``<details>``, in the Markdown and the
HTML), so the page reads in two minutes and every detail is one click away.

Statistics follow the number of runs (:mod:`harness.report.stats`): intervals
only with >= 3 runs per group, the IQM only with >= 4, otherwise "n too
small"; P(X > Y) only for pairs of groups differing in one factor
(algorithm, k or W), or only in one hyperparameter, on one env. Intervals, IQM,
probability of improvement, sample-efficiency bands and performance profiles come
from rliable.

The plotting stack (matplotlib, seaborn, rliable; umap-learn with ``--umap``)
is imported only when the command runs, so ``harness --help`` stays fast.
"""

from __future__ import annotations

import argparse

from harness import schema
from harness.commands import add_import_flag

__all__ = ["add_arguments", "build_report", "run"]


def build_report(*args: object, **kwargs: object) -> object:
    """:func:`harness.report.build.build_report` (imported on call, so ``harness --help``
    does not import the plotting stack): the report of the runs under ``paths`` into
    ``out``, with the filters ``algos``, ``env``, ``sweep``, ``where`` and ``threshold``
    as keyword arguments; returns the path of ``report.md``."""
    from harness.report.build import build_report as build

    return build(*args, **kwargs)  # type: ignore[arg-type]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness report``; the epilog names the reading limits (they refuse a
    hostile archive, and a user with huge genuine runs must find how to raise them)."""
    from harness.rundir import limits_help

    parser.epilog = limits_help()
    parser.add_argument(
        "runs_dirs",
        nargs="+",
        metavar="RUNS_DIR",
        help="runs directories, single run directories or run archives (RUNS.tar.xz, as "
        "committed reports carry) to read",
    )
    parser.add_argument("--out", required=True, help="output directory for the report")
    parser.add_argument(
        "--title",
        default=None,
        help="report title (default: from the runs); runs per group and budget are appended",
    )
    parser.add_argument(
        "--note",
        default=None,
        metavar="TEXT",
        help="a paragraph of the report's own (what the runs are, how they were made), "
        "placed after its result",
    )
    parser.add_argument(
        "--map-runs",
        "--umap-runs",
        dest="map_runs",
        type=schema.integer_type("map-runs"),
        default=2,
        metavar="N",
        help="draw the map of visited models for up to N runs (one per env and algorithm; 0: none)",
    )
    parser.add_argument(
        "--umap",
        action="store_true",
        help="map the visited models with UMAP (slow: numba compiles for ~15 s) instead of "
        "the default PCA",
    )
    parser.add_argument(
        "--no-replay",
        action="store_true",
        help="skip the sections that play stored final policies (frames, behavioural "
        "diversity): faster",
    )
    add_import_flag(
        parser,
        "a run's recorded imports are imported only when named here or when its checkpoint "
        "is signed with your key, else it is shown as recorded",
    )
    parser.add_argument(
        "--algo",
        dest="algos",
        action="append",
        default=[],
        metavar="A",
        help="only runs of algorithm A (repeatable: any of them)",
    )
    parser.add_argument(
        "--env", default=None, metavar="E", help="only runs on env E (short name or gym id)"
    )
    parser.add_argument("--sweep", default=None, metavar="NAME", help="only runs of the sweep NAME")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs whose config has KEY = VALUE (a run knob or hyperparameter, e.g. "
        "sigma=0.05 or policy.hidden_sizes=[32]; compared as typed values; repeatable: all "
        "must hold)",
    )
    parser.add_argument(
        "--threshold",
        type=_finite_float,
        default=None,
        metavar="R",
        help="per group, the timesteps, wall-clock and CPU-seconds to first reach evaluation "
        "return R (and how many runs reached and confirmed it); groups at or above R tie on "
        "score",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        default=(),
        metavar=("A", "B"),
        help="also answer group A against group B (labels as the report names its groups, or "
        "algorithms with one group on an env) at equal timesteps, CPU-seconds and wall-clock, "
        "as the report answers the best ES against the best RL",
    )
    parser.add_argument(
        "--all-statuses",
        action="store_true",
        help="also use FAILED, INTERRUPTED and RUNNING runs (default: COMPLETED only)",
    )


def _finite_float(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a return level, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite return level, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """``harness report``: 0 on success; a usage error when there is nothing to report."""
    from pathlib import Path

    from harness.commands import UsageError
    from harness.records import STATUSES, UnreadableRun
    from harness.rundir import is_run_archive

    for raw in args.runs_dirs:
        if not Path(raw).is_dir() and not is_run_archive(Path(raw)):
            raise UsageError(f"runs directory {raw!r} does not exist")
    if args.map_runs < 0:
        raise UsageError(f"--map-runs must be 0 or more, got {args.map_runs}")
    from harness.commands import check_writable_dir

    check_writable_dir(Path(args.out), "--out")
    from harness.config import ConfigError
    from harness.user_modules import import_named

    try:
        import_named(args.imports)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    from harness.report.build import ReportError, build_report

    statuses = STATUSES if args.all_statuses else ("COMPLETED",)
    try:
        path = build_report(
            args.runs_dirs,
            args.out,
            title=args.title,
            map_runs=args.map_runs,
            statuses=statuses,
            map_method="umap" if args.umap else "pca",
            note=args.note,
            replay=not args.no_replay,
            imports=args.imports,
            algos=args.algos,
            env=args.env,
            sweep=args.sweep,
            where=args.where,
            threshold=args.threshold,
            compare=args.compare,
        )
    except (ReportError, UnreadableRun) as error:
        raise UsageError(str(error)) from None
    print(f"report: {path} and {path.with_suffix('.html')} ({path.parent})")
    return 0
