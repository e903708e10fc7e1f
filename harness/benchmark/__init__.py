"""``harness benchmark``: the ES-against-RL benchmark, planned, run and reported by one file.

``plan`` lists the cells of ``experiments/benchmark.yaml`` with their estimated
CPU cost and which are done; ``run`` runs the missing cells as one resumable
sweep (task by task, cheapest first within a task; ``--task``, ``--algo`` and ``--seed``
pick a part, say the Ant cells for a larger machine) and measures each task's
random-policy score; ``report`` archives the completed runs and writes ``reports/benchmark/`` and
``BENCHMARK.md``, from a runs directory or from the committed archive alone.

The committed report folder is the benchmark's state across machines and sessions
(:mod:`harness.benchmark.carry`): ``plan`` and ``run`` count the cells completed in its
archives as done, ``report`` also keeps the unfinished runs with their checkpoints, and
``run --adopt-unfinished`` continues them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from harness import rundir
from harness.benchmark.carry import (
    ARCHIVE,
    UNFINISHED,
    adopt_unfinished,
    archived_completed,
    archived_runs,
    carried_ahead,
    cost_left,
    cpu_seconds_per_timestep,
    task_folder,
    unfinished_here,
    unfinished_runs,
)
from harness.benchmark.spec import (
    AGGREGATE_REPS,
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    RANDOM_SCORES,
    Benchmark,
    BenchmarkError,
    load_benchmark,
    measured_random_scores,
)
from harness.commands import UsageError, check_runs_dir, check_writable_dir, warn
from harness.sweep.spec import Cell

DEFAULT_FILE = Path("experiments/benchmark.yaml")
DEFAULT_OUT = Path("reports/benchmark")
#: Episodes per seed of the random-policy reference score.
RANDOM_EPISODES = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness benchmark``."""
    sub = parser.add_subparsers(dest="benchmark_command", required=True)
    for name, help_text in (
        ("plan", "the cells, their estimated CPU cost and which are completed"),
        ("run", "run every cell not yet completed (resumes interrupted ones)"),
        ("report", "archive completed runs; write reports/benchmark/ and BENCHMARK.md"),
    ):
        command = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=rundir.limits_help(),  # the committed archives are read within them
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_argument(
            "--file", type=Path, default=DEFAULT_FILE, help=f"benchmark file ({DEFAULT_FILE})"
        )
        command.add_argument(
            "--runs-dir",
            type=Path,
            default=None if name == "report" else Path("runs/benchmark"),
            help="Sacred FileStorage directory of the benchmark's runs"
            + ("" if name != "report" else " (none: the committed archive alone)"),
        )
        if name != "report":
            command.add_argument(
                "--task",
                action="append",
                default=[],
                metavar="ENV",
                help="only this task's cells (repeatable; default: every task)",
            )
            command.add_argument(
                "--algo",
                action="append",
                default=[],
                metavar="NAME",
                help="only this algorithm's cells (repeatable; default: every algorithm)",
            )
            command.add_argument(
                "--seed",
                action="append",
                type=int,
                default=[],
                metavar="N",
                help="only this seed's cells (repeatable; default: every seed), say to split "
                "a task between machines",
            )
        if name != "report":
            command.add_argument(
                "--archive-dir",
                type=Path,
                default=DEFAULT_OUT,
                help="committed report folder: a cell completed in its archives is done "
                f"and its unfinished runs can be continued ({DEFAULT_OUT})",
            )
        if name == "run":
            command.add_argument(
                "--rerun-archived",
                action="store_true",
                help="run the cells completed in the committed archives again",
            )
            command.add_argument(
                "--adopt-unfinished",
                action="store_true",
                help="continue the unfinished runs the committed folder carries "
                "(unfinished.tar.xz) from their checkpoints, signing them with your key: "
                "only for a repository you trust (RL and CMA checkpoints hold pickles)",
            )
            command.add_argument("--jobs", type=int, default=1, help="cells at once (1)")
            command.add_argument(
                "--ray-address",
                default=None,
                metavar="ADDR",
                help="run the cells as Ray work on this cluster (docs/cluster.md)",
            )
            command.add_argument("--no-progress", action="store_true", help="hide the bar")
        if name == "report":
            command.add_argument(
                "--out", type=Path, default=DEFAULT_OUT, help=f"report folder ({DEFAULT_OUT})"
            )
            command.add_argument(
                "--summary",
                type=Path,
                default=Path("BENCHMARK.md"),
                help="the one-page summary (BENCHMARK.md)",
            )
            command.add_argument(
                "--resamples",
                type=int,
                default=None,
                metavar="N",
                help=f"bootstrap resamples of the aggregate intervals ({AGGREGATE_REPS:,}; "
                "profiles and P(X > Y) use a tenth): fewer draw a quick draft, which the "
                "page then names",
            )
        command.set_defaults(benchmark_run=globals()[f"cmd_{name}"])


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; a damaged or hostile archive (or run record) is a usage error.

    As in ``harness report``: one line naming the archive (:class:`rundir.UnreadableRun`,
    size limits included), exit status 2, and the archives are read before anything is
    written, so a refused one leaves the runs directory and the report folder as they were.
    """
    try:
        result: int = args.benchmark_run(args)
    except rundir.UnreadableRun as error:
        raise UsageError(str(error)) from None
    return result


def _check_archives(bench: Benchmark, folder: Path) -> None:
    """Read every archive the committed folder holds for ``bench``'s tasks, up front.

    Unpacking is cached per process, so the later reads cost nothing; a damaged or
    over-limit archive raises :class:`rundir.UnreadableRun` before anything is written.
    """
    for task in bench.tasks:
        for name in (ARCHIVE, UNFINISHED):
            archived_runs(task_folder(folder, task.env) / name)


def _load(args: argparse.Namespace) -> Benchmark:
    try:
        bench = load_benchmark(args.file)
        return bench.only(
            getattr(args, "task", []), getattr(args, "algo", []), getattr(args, "seed", [])
        )
    except BenchmarkError as error:
        raise UsageError(str(error)) from None


def cmd_plan(args: argparse.Namespace) -> int:
    """Print per task: cells, completed cells, their measured CPU-hours, and the rest's.

    A cell not yet completed is costed at the median CPU-seconds its task and algorithm
    measured in completed cells, or at the file's ``cost_cpu_s`` where none completed. A
    task's equal-compute cells (trained to a CPU limit) have a row of their own, costed
    apart from the task's other cells: at their limit until some complete.
    """
    import statistics

    from harness.sweep.store import completed_runs, find_completed

    bench = _load(args)
    _check_archives(bench, args.archive_dir)
    done = completed_runs(args.runs_dir) if args.runs_dir.is_dir() else []
    archived = archived_completed(bench, args.archive_dir)
    measured: dict[tuple[str, str, bool], list[float]] = {}
    pending = []
    rows: dict[str, list[float]] = {}

    def row_name(cell: Cell) -> str:
        env = bench.task_of(cell).env
        return f"{env} (equal CPU)" if bench.is_equal_compute(cell) else env

    for cell in bench.sweep.cells:
        task = bench.task_of(cell)
        row = rows.setdefault(row_name(cell), [0, 0, 0.0, 0.0])
        row[0] += 1
        run_id = find_completed(cell, done)
        if run_id is not None:
            run_dir = args.runs_dir / run_id
        elif cell.index in archived:
            run_dir = archived[cell.index]
        else:
            pending.append(cell)
            continue
        try:
            summary = rundir.read_json(run_dir / rundir.SUMMARY)  # bounded: may be anyone's
            cpu_s = float(summary["cpu_seconds"])
        except (rundir.UnreadableRun, ValueError, KeyError, TypeError):  # an older harness's
            cpu_s = bench.cost_of(cell)
        kind = (task.env, str(cell.config["algo"]), bench.is_equal_compute(cell))
        measured.setdefault(kind, []).append(cpu_s)
        row[1] += 1
        row[2] += cpu_s
    started = {u.cell.index: u for u in unfinished_runs(bench, args.archive_dir)}
    carried = set(started)  # until a further run in the runs directory replaces one
    for item in unfinished_here(bench, args.runs_dir):
        if item.timesteps >= getattr(started.get(item.cell.index), "timesteps", -1.0):
            started[item.cell.index] = item
            carried.discard(item.cell.index)
    rates: dict[tuple[str, str, bool], list[float]] = {}
    for item in started.values():
        rate = cpu_seconds_per_timestep(item.path)
        if rate is not None:
            cell = item.cell
            key = (bench.task_of(cell).env, str(cell.config["algo"]), bench.is_equal_compute(cell))
            rates.setdefault(key, []).append(rate)
    for cell in pending:
        env = bench.task_of(cell).env
        key = (env, str(cell.config["algo"]), bench.is_equal_compute(cell))
        budget = float(cell.config.get("timesteps") or 0.0)
        equal = bench.task_of(cell).equal_compute
        if not measured.get(key) and equal is not None and equal.paired and key[2]:
            key = (env, equal.against, False)  # either side of a pair: its lead's compute
            budget = 0.0
        if measured.get(key):
            whole = statistics.median(measured[key])
        elif rates.get(key) and budget:
            whole = statistics.median(rates[key]) * budget
        else:
            whole = bench.cost_of(cell)
        rows[row_name(cell)][3] += cost_left(cell, whole, started.get(cell.index))
    width = max(24, *(len(name) + 2 for name in rows))
    print(f"{'task':<{width}}{'cells':>6}{'done':>6}{'CPU-h done':>12}{'CPU-h left':>12}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for name, row in rows.items():
        print(
            f"{name:<{width}}{row[0]:>6.0f}{row[1]:>6.0f}"
            f"{row[2] / 3600:>12.1f}{row[3] / 3600:>12.1f}"
        )
        totals = [a + b for a, b in zip(totals, row, strict=True)]
    print(
        f"{'total':<{width}}{totals[0]:>6.0f}{totals[1]:>6.0f}"
        f"{totals[2] / 3600:>12.1f}{totals[3] / 3600:>12.1f}"
    )
    print(
        "CPU-h done: measured by the completed runs (here and in the committed archives). "
        "CPU-h left: the median a task and algorithm measured in completed runs, else the "
        "CPU-seconds per timestep its unfinished runs measured, else the file's cost_cpu_s; "
        "an unfinished cell only for the timesteps (or, to a CPU limit, the CPU-seconds) it "
        "has left. (equal CPU): ES cells trained to the CPU-seconds the task's RL entry "
        "spends on its budget (--cpu-limit), costed at that limit, or run as pairs beside a run of "
        "that RL entry, each side costed at its median."
    )
    waiting = {cell.index for cell in pending}
    for index, item in sorted(started.items()):
        if index in waiting:
            planned = item.cell.config.get("timesteps")
            print(
                f"unfinished: {item.cell.label} at {item.timesteps:,.0f}"
                + (f" of {float(planned):,.0f} timesteps" if planned else " timesteps")
                + (
                    " (carried: benchmark run --adopt-unfinished continues it)"
                    if index in carried
                    else f" (in {args.runs_dir})"
                )
            )
    return 0


def random_scores(bench: Benchmark) -> dict[str, dict[str, float]]:
    """Mean return of uniformly random actions per task, on seeded episodes of every seed."""
    import numpy as np

    from algorithms.es_common import eval_seeds
    from envs.registry import make_env, quiet_output

    scores: dict[str, dict[str, float]] = {}
    for task in bench.tasks:
        env = make_env(task.env)
        returns: list[float] = []
        for seed in bench.seeds:
            env.action_space.seed(seed)
            for episode_seed in eval_seeds(seed, 0, RANDOM_EPISODES):
                with quiet_output():
                    env.reset(seed=episode_seed)
                total, done = 0.0, False
                while not done:
                    _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                    total += float(reward)
                    done = bool(terminated or truncated)
                returns.append(total)
        env.close()
        scores[task.env] = {
            "mean": float(np.mean(returns)),
            "std": float(np.std(returns)),
            "episodes": float(len(returns)),
        }
    return scores


def cmd_run(args: argparse.Namespace) -> int:
    """Measure the random-policy scores once, then run the missing cells."""
    from harness.sweep.scheduler import run_sweep

    bench = _load(args)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be a positive integer, got {args.jobs}")
    check_runs_dir(args.runs_dir)
    _check_archives(bench, args.archive_dir)  # a refused archive: nothing written yet
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    reference = measured_random_scores(args.runs_dir)
    if not reference.is_file():
        reference.parent.mkdir(parents=True, exist_ok=True)
        print("benchmark: measuring random-policy scores", file=sys.stderr)
        scores = random_scores(bench)
        tmp = reference.with_suffix(".tmp")
        tmp.write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, reference)
    archived = {} if args.rerun_archived else archived_completed(bench, args.archive_dir)
    if archived:
        print(
            f"benchmark: {len(archived)} cells completed in the archives under "
            f"{args.archive_dir} are not run again (--rerun-archived runs them)",
            file=sys.stderr,
        )
    todo = [cell for cell in bench.sweep.cells if cell.index not in archived]
    carried = carried_ahead(bench, args.archive_dir, args.runs_dir, todo)
    if carried and args.adopt_unfinished:
        adopted, refused = adopt_unfinished(carried, args.runs_dir)
        for line in refused:
            warn(f"not continued, {line}")
        for item, target in adopted:
            print(
                f"benchmark: {item.cell.label} continues from {item.timesteps:,.0f} timesteps "
                f"(carried into {target})",
                file=sys.stderr,
            )
    elif carried:
        print(
            f"benchmark: {len(carried)} unfinished runs under {args.archive_dir} are not "
            "continued (--adopt-unfinished continues them from their checkpoints)",
            file=sys.stderr,
        )
    sweep = replace(bench.sweep, cells=todo)
    waiting = {cell.index for cell in todo}
    if args.ray_address and any(waiting & set(pair) for pair in sweep.pairs):
        raise UsageError(
            "the equal-compute pairs run on one machine, not on Ray: --task or --algo "
            "another part for the cluster"
        )
    if args.ray_address:
        from harness.commands import check_ray_address
        from harness.sweep.ray_cells import run_sweep_on_ray

        if args.ray_address != "local":
            check_ray_address(args.ray_address)
        result = run_sweep_on_ray(
            sweep,
            args.runs_dir,
            None if args.ray_address == "local" else args.ray_address,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    else:
        result = run_sweep(sweep, args.runs_dir, args.jobs, progress=not args.no_progress)
    failed = result.failed
    print(
        f"benchmark {bench.name}: {len(bench.sweep.cells)} cells, "
        f"{len(archived) + result.count('skipped')} already completed, "
        f"{result.count('ran', 'COMPLETED')} ran, "
        f"{result.count('resumed', 'COMPLETED')} resumed, {len(failed)} not completed"
    )
    for outcome in failed:
        print(f"  {outcome.cell.label}: {outcome.status}, log {outcome.log}")
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    """Archive the completed runs and write the benchmark report and BENCHMARK.md."""
    from harness.benchmark.report import read_random_scores, write_benchmark_report

    bench = _load(args)
    if args.runs_dir is not None and not args.runs_dir.is_dir():
        raise UsageError(f"runs directory {str(args.runs_dir)!r} does not exist")
    check_writable_dir(args.out, "--out")
    check_writable_dir(args.summary.parent, "--summary's folder")
    if args.summary.exists() and not os.access(args.summary, os.W_OK):
        raise UsageError(f"--summary {str(args.summary)!r} is not writable")
    if args.resamples is not None and not MIN_RESAMPLES <= args.resamples <= MAX_RESAMPLES:
        raise UsageError(
            f"--resamples {args.resamples} is outside {MIN_RESAMPLES:,}..{MAX_RESAMPLES:,}"
        )
    _check_archives(bench, args.out)  # a refused archive: nothing written yet
    from harness.benchmark import fairness

    try:  # likewise a malformed provenance or parity file
        fairness.load_provenance()
        fairness.load_parity()
    except fairness.ProvenanceError as error:
        raise UsageError(str(error)) from None
    if (args.out / RANDOM_SCORES).is_file():  # likewise the folder's random-policy scores
        read_random_scores(args.out / RANDOM_SCORES)
    try:
        carried = write_benchmark_report(
            bench, args.runs_dir, args.out, args.summary, resamples=args.resamples
        )
    except OSError as error:  # a file of the folder read-only, the disk full
        where = f" {error.filename}" if error.filename else ""
        raise UsageError(
            f"cannot write the benchmark report{where}: {error.strerror or error}"
        ) from None
    if any(carried.values()):
        print(
            "benchmark: unfinished runs carried in the report folder: "
            + ", ".join(f"{env} {count}" for env, count in carried.items() if count),
            file=sys.stderr,
        )
    return 0
