"""Time to a confirmed target return, and where that time goes, per worker count, over seeds.

Each (W, seed) runs as its own ``harness run --target-return R`` subprocess, so
interpreter start, imports, worker start-up, every evaluation and the
confirmation are all on the clock. The target counts as reached when an
evaluation crosses it and a confirmation on ``confirm_episodes`` fresh episodes
(a run knob, 100 by default) also clears it (see :mod:`harness.runner`).

Per run the wall-clock is split into the parts of
:data:`harness.runner.TIME_PARTS`, read from the run's ``summary.json``, plus
two the bench measures from outside: ``process_start`` (subprocess launch to
the start of setup) and ``shutdown`` (end of training to process exit: final
artifacts, closing workers). ``time to target`` is launch to the end of the
passed confirmation. Episode work is ``rollouts + evaluation + confirmation``
(all of it on the workers for the ES family); the head-side share is everything
else within the time to target. Runs are kept (``--runs-dir``) for reports.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from algorithms.registry import get_algorithm
from evaluation.registry import BACKENDS
from harness import rundir, schema
from harness.bench import emit
from harness.runner import TIME_PARTS

#: Parts of a run that are episodes on the workers; the rest is the head's (or idle).
EPISODE_PARTS = ("rollouts", "evaluation", "confirmation")
#: Table rows: the run's parts, then what the bench measures around them.
ROWS = (*TIME_PARTS, "shutdown")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", default="optimes", help="algorithm (default: optimes)")
    parser.add_argument(
        "--env", default="LunarLanderContinuous", help="env (default: LunarLanderContinuous)"
    )
    parser.add_argument("--target", type=float, default=200.0, help="target eval return")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds, one run each (0 1 2)"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts")
    parser.add_argument("--backend", default="process", help=", ".join(BACKENDS))
    parser.add_argument("--timesteps", type=int, default=10_000_000, help="give-up budget")
    parser.add_argument("--runs-dir", type=Path, help="keep the runs here (default: temporary)")
    parser.add_argument("--out", dest="json", type=Path, help="same as --json")
    schema.add_set_flag(parser, "override a knob of every run (as `harness run --set`)")


def _command(args: argparse.Namespace, seed: int, workers: int, runs_dir: Path) -> list[str]:
    command = [
        sys.executable,
        "-P",
        "-m",
        "harness.cli",
        "run",
        "--algo",
        args.algo,
        "--env",
        args.env,
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--timesteps",
        str(args.timesteps),
        "--target-return",
        str(args.target),
        "--runs-dir",
        str(runs_dir),
        "--no-progress",
    ]
    if get_algorithm(args.algo).family == "es":
        # PPO/A2C have no evaluation backend: `harness run` refuses the flag for them.
        command += ["--backend", args.backend]
    for module in getattr(args, "imports", None) or []:
        command += ["--import", module]  # the user's word, recorded in the run
    for assignment in args.overrides:
        command += ["--set", assignment]
    return command


def measure_run(summary: dict[str, Any], launched: float, exited: float) -> dict[str, Any]:
    """One run's figures from its ``summary.json`` and the bench's launch and exit times.

    ``launched``/``exited`` are Unix times taken around the subprocess.
    """
    parts = {part: float(v) for part, v in (summary.get("time_breakdown") or {}).items()}
    started = summary.get("training_started_at")
    if started is None:
        raise ValueError("summary.json has no training_started_at: run with the current harness")
    setup_started = float(started) - parts.get("setup", 0.0)
    parts["process_start"] = setup_started - launched
    parts["shutdown"] = exited - (float(started) + float(summary["wall_time_s"]))
    target = summary.get("target") or {}
    first, confirmed = target.get("first_crossing"), target.get("confirmed")
    row: dict[str, Any] = {
        "total_s": exited - launched,
        "parts": {part: parts[part] for part in ROWS if part in parts},
        "first_crossing_s": None,
        "first_crossing_timesteps": None,
        "time_to_target_s": None,
        "timesteps": None,
        "confirm_return": None,
        "head_side_share": None,
        "head_side_share_training": None,
    }
    if first:
        row["first_crossing_s"] = float(started) + float(first["wall_time_s"]) - launched
        row["first_crossing_timesteps"] = int(first["timesteps"])
    episode_s = sum(parts.get(part, 0.0) for part in EPISODE_PARTS)
    wall = float(summary["wall_time_s"])
    row["head_side_share_training"] = (wall - episode_s) / wall if wall > 0 else None
    if confirmed:
        to_target = float(started) + float(confirmed["wall_time_s"]) - launched
        row["time_to_target_s"] = to_target
        row["timesteps"] = int(confirmed["timesteps"])
        row["confirm_return"] = float(confirmed["return_mean"])
        row["head_side_share"] = (to_target - episode_s) / to_target
    return row


def _run_one(
    args: argparse.Namespace, seed: int, workers: int, runs_dir: Path
) -> dict[str, Any] | None:
    before = {p.name for p in runs_dir.iterdir()} if runs_dir.exists() else set()
    launched = time.time()
    completed = subprocess.run(
        _command(args, seed, workers, runs_dir),
        capture_output=True,
        text=True,
        env={**os.environ, "HARNESS_PROGRESS": "0"},
    )
    exited = time.time()
    if completed.returncode != 0:
        print(completed.stderr[-2000:], file=sys.stderr)
        return None
    new = sorted(
        (p for p in rundir.run_dirs(runs_dir) if p.name not in before),
        key=lambda p: p.stat().st_mtime,
    )
    run_dir = new[-1]
    summary = json.loads((run_dir / rundir.SUMMARY).read_text())
    row = measure_run(summary, launched, exited)
    row.update(seed=seed, workers=workers, run_dir=str(run_dir))
    return row


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known and len(known) == len(values) else None


def table(workers: int, rows: list[dict[str, Any]]) -> str:
    """Seconds per part for each seed and their median, for one worker count."""
    header = ["part"] + [f"seed {r['seed']}" for r in rows] + ["median"]
    lines = [header]
    for part in ROWS:
        values = [r["parts"].get(part) for r in rows]
        if all(v is None for v in values):
            continue
        lines.append([part] + [_fmt(v) for v in values] + [_fmt(_median(values))])
    for label, key, digits in (
        ("total (launch to exit)", "total_s", 2),
        ("first crossing", "first_crossing_s", 2),
        ("time to target (confirmed)", "time_to_target_s", 2),
        ("timesteps at target", "timesteps", 0),
        ("confirmation return", "confirm_return", 1),
        ("head-side share of time to target", "head_side_share", 3),
        ("head-side share of training", "head_side_share_training", 3),
    ):
        values = [r[key] for r in rows]
        lines.append([label] + [_fmt(v, digits) for v in values] + [_fmt(_median(values), digits)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [f"W={workers} (seconds)"]
    for i, line in enumerate(lines):
        text.append(
            "  ".join(
                cell.ljust(w) if j == 0 else cell.rjust(w)
                for j, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if i == 0:
            text.append("  ".join("-" * w for w in widths))
    return "\n".join(text)


def run(args: argparse.Namespace) -> int:
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="bench-solve-"))
    load_before = round(os.getloadavg()[0], 2)
    per_w: dict[int, list[dict[str, Any]]] = {}
    failed = False
    for workers in args.workers:
        rows = per_w.setdefault(workers, [])
        for seed in args.seeds:
            row = _run_one(args, seed, workers, runs_dir)
            if row is None:
                failed = True
                continue
            rows.append(row)
            print(
                f"W={workers} seed {seed}: "
                + (
                    f"target confirmed in {row['time_to_target_s']:.1f}s at "
                    f"{row['timesteps']} timesteps"
                    if row["time_to_target_s"] is not None
                    else "target NOT reached"
                )
                + f" ({row['run_dir']})",
                flush=True,
            )
        print(table(workers, rows), flush=True)
    figures: dict[str, Any] = {
        "algo": args.algo,
        "env": args.env,
        "target": args.target,
        "backend": args.backend,
        "seeds": args.seeds,
        "workers": args.workers,
        "overrides": args.overrides,
        "cpu_count": os.cpu_count(),
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
    }
    medians: dict[int, float | None] = {}
    for workers, rows in per_w.items():
        reached = [r for r in rows if r["time_to_target_s"] is not None]
        figures[f"w{workers}.solved"] = f"{len(reached)}/{len(args.seeds)}"
        medians[workers] = _median([r["time_to_target_s"] for r in rows]) if rows else None
        if len(reached) == len(args.seeds):
            figures[f"w{workers}.median_time_to_target_s"] = round(medians[workers] or 0.0, 2)
            figures[f"w{workers}.median_timesteps"] = int(
                statistics.median(r["timesteps"] for r in rows)
            )
            figures[f"w{workers}.median_head_side_share"] = round(
                statistics.median(r["head_side_share"] for r in rows), 3
            )
    base = min(per_w) if per_w else None
    base_median = medians.get(base) if base is not None else None
    for workers, median in medians.items():
        if workers != base and median and base_median:
            figures[f"speedup_w{workers}_over_w{base}"] = round(base_median / median, 2)
    figures["runs_dir"] = str(runs_dir)
    figures["per_run"] = [r for rows in per_w.values() for r in rows]
    printed = {k: v for k, v in figures.items() if k != "per_run"}
    emit(printed, None)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    solved_all = all(r["time_to_target_s"] is not None for rows in per_w.values() for r in rows)
    return 0 if solved_all and not failed else 1
