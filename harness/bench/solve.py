"""Time to a target return: wall-clock (process start included) and timesteps, over seeds.

Each seed runs as its own ``harness run`` subprocess with ``--target-return``;
the wall-clock is measured around the whole subprocess, so interpreter start,
imports, worker start-up and every evaluation are included. Runs are stored as
usual, so a report can be drawn from them afterwards.
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

from harness.bench import emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", default="optimes")
    parser.add_argument("--env", default="LunarLanderContinuous")
    parser.add_argument("--target", type=float, default=200.0, help="target eval return")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default="process")
    parser.add_argument("--timesteps", type=int, default=10_000_000, help="give-up budget")
    parser.add_argument("--runs-dir", type=Path, help="keep the runs here (default: temporary)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])


def _read_run(run_dir: Path) -> dict[str, Any]:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    status = json.loads((run_dir / "run.json").read_text())["status"]
    evals = metrics.get("eval_return_mean", {"values": [], "steps": []})
    ts = metrics.get("eval_timesteps", {"values": []})["values"]
    return {"status": status, "evals": evals["values"], "eval_timesteps": ts}


def run(args: argparse.Namespace) -> int:
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="bench-solve-"))
    rows = []
    for seed in args.seeds:
        command = [
            sys.executable,
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
            str(args.workers),
            "--backend",
            args.backend,
            "--timesteps",
            str(args.timesteps),
            "--target-return",
            str(args.target),
            "--runs-dir",
            str(runs_dir),
            "--no-progress",
        ]
        for assignment in args.overrides:
            command += ["--set", assignment]
        before = {p.name for p in runs_dir.iterdir()} if runs_dir.exists() else set()
        started = time.perf_counter()
        completed = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "HARNESS_PROGRESS": "0"}
        )
        elapsed = time.perf_counter() - started
        if completed.returncode != 0:
            print(completed.stderr[-2000:], file=sys.stderr)
            return 1
        new = sorted(
            (p for p in runs_dir.iterdir() if p.name not in before and p.is_dir()),
            key=lambda p: p.stat().st_mtime,
        )
        record = _read_run(new[-1])
        solved = [i for i, v in enumerate(record["evals"]) if v >= args.target]
        timesteps = record["eval_timesteps"][solved[0]] if solved else None
        rows.append(
            {
                "seed": seed,
                "solved": bool(solved),
                "wall_s": elapsed,
                "timesteps": timesteps,
                "run_dir": str(new[-1]),
            }
        )
        print(
            f"seed {seed}: {'solved' if solved else 'NOT solved'} in {elapsed:.1f}s, "
            f"{timesteps} timesteps ({new[-1]})",
            flush=True,
        )
    solved_rows = [r for r in rows if r["solved"]]
    figures: dict[str, Any] = {
        "algo": args.algo,
        "env": args.env,
        "target": args.target,
        "workers": args.workers,
        "backend": args.backend,
        "seeds": args.seeds,
        "solved": f"{len(solved_rows)}/{len(rows)}",
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if len(solved_rows) == len(rows):
        figures["median_wall_s"] = round(statistics.median(r["wall_s"] for r in rows), 1)
        figures["median_timesteps"] = int(statistics.median(r["timesteps"] for r in rows))
    figures["per_seed"] = [{k: r[k] for k in ("seed", "wall_s", "timesteps")} for r in rows]
    emit(figures, args.json)
    return 0 if len(solved_rows) == len(rows) else 1
