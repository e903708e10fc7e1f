"""The equal-effort study of experiments/tune_lander.yaml: tune, hold out, report.

    python scripts/tune_lander.py [--file experiments/tune_lander.yaml] [--runs-dir DIR]
        [--out reports/tune_lander] [--step tune|holdout|report|all] [--trials N]
        [--timesteps T] [--jobs J] [--dry-run]

1. tune: ``harness tune`` of every algorithm of the file, the same budget each (trials x
   seeds x timesteps), their studies in ``DIR/_tune/tune.db``;
2. holdout: two sweeps into ``DIR/holdout``, every algorithm on the held-out seeds (from
   100 on) at the same per-run budget: at its shipped settings, and at its study's best
   trial (the sweep's ``tuned:``, which records the study, its budget and seeds in each run);
3. report: ``harness report DIR/holdout`` into ``--out``;
4. pack: into ``--out``, the held-out runs' archive (``runs.tar.xz`` with their policies,
   what ``make reports`` redraws from), each study's outputs (``studies/STUDY/``:
   ``best.yaml``, ``trials.csv``, its report as ``study.md`` and its figures) and
   ``costs.csv``/``costs.md``: runs, timesteps, CPU-seconds and wall-clock per study, per
   re-check and per held-out group, summed from each run's ``summary.json``.

Each step is a ``harness`` command and resumes where it stopped (the study's trial target,
the sweeps' completed cells). ``--trials``/``--timesteps`` shrink the study without
editing the file (the held-out runs then use the same ``--timesteps``).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
KEYS = {
    "study",
    "env",
    "algos",
    "trials",
    "seeds",
    "budget",
    "check_seeds",
    "evaluations",
    "jobs",
    "set",
    "holdout",
}


def fail(message: str) -> None:
    print(f"tune_lander: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_plan(path: Path) -> dict[str, Any]:
    """The study file, read with the safe loader and checked key by key."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        fail(f"cannot read {path}: {error}")
    if not isinstance(data, dict):
        fail(f"{path}: expected a mapping")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        fail(f"{path}: unknown key {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    missing = sorted({"study", "env", "algos", "trials", "seeds", "budget", "holdout"} - set(data))
    if missing:
        fail(f"{path}: {missing[0]} is required")
    budget = data["budget"]
    if (
        not isinstance(budget, dict)
        or len(budget) != 1
        or not set(budget)
        <= {
            "timesteps",
            "cpu_limit",
        }
    ):
        fail(f"{path}: budget must be {{timesteps: T}} or {{cpu_limit: SEC}}, got {budget!r}")
    held = data["holdout"]
    if not isinstance(held, dict) or not held.get("seeds") or not held.get("budget"):
        fail(f"{path}: holdout needs seeds and budget")
    if any(not isinstance(s, int) or s < 100 for s in held["seeds"]):
        fail(f"{path}: held-out seeds must be integers from 100 on, got {held['seeds']!r}")
    return data


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def tune_command(plan: dict[str, Any], runs_dir: Path) -> list[str]:
    ((key, value),) = plan["budget"].items()
    command = [
        sys.executable,
        "-m",
        "harness.cli",
        "tune",
        "--algo",
        *plan["algos"],
        "--env",
        plan["env"],
        "--study",
        plan["study"],
        "--trials",
        str(plan["trials"]),
        "--seeds",
        *map(str, plan["seeds"]),
        flag(key),
        str(value),
        "--runs-dir",
        str(runs_dir),
        "--jobs",
        str(plan.get("jobs", 1)),
        "--evaluations",
        str(plan.get("evaluations", 10)),
    ]
    if "check_seeds" in plan:
        command += ["--check-seeds", *map(str, plan["check_seeds"] or [])]
    for assignment in plan.get("set") or []:
        command += ["--set", str(assignment)]
    return command


def storage_url(runs_dir: Path) -> str:
    return f"sqlite:///{(runs_dir / '_tune' / 'tune.db').absolute()}"


def holdout_sweeps(plan: dict[str, Any], runs_dir: Path, write: bool = True) -> list[Path]:
    """The two held-out sweep files (shipped and tuned settings), in the runs directory."""
    held = plan["holdout"]
    budget = dict(held["budget"])
    common = list(plan.get("set") or [])
    if "timesteps" in budget and not any(a.startswith("eval_every_timesteps=") for a in common):
        # the studies' evaluation interval, so the held-out scores are read as the tuning ones
        every = max(1, int(budget["timesteps"]) // int(plan.get("evaluations", 10)))
        common.append(f"eval_every_timesteps={every}")
    folder = runs_dir / "_tune" / f"{plan['study']}-holdout"
    if write:
        folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in ("shipped", "tuned"):
        name = f"{plan['study']}-holdout-{kind}"
        sweep: dict[str, Any] = {
            "name": name,
            "description": f"{', '.join(plan['algos'])} on {plan['env']} at their {kind} "
            f"settings, held-out seeds {held['seeds'][0]}-{held['seeds'][-1]}",
            "grid": {"algo": plan["algos"], "env": [plan["env"]], "seed": held["seeds"]},
            "budget": budget,
            "set": common,
        }
        if kind == "tuned":
            sweep["tuned"] = {"study": plan["study"], "storage": storage_url(runs_dir)}
        path = folder / f"{name}.yaml"
        if write:
            path.write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/tune_lander.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--file", type=Path, default=ROOT / "experiments" / "tune_lander.yaml")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "tune_lander")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "tune_lander")
    parser.add_argument(
        "--step", choices=("tune", "holdout", "report", "pack", "all"), default="all"
    )
    parser.add_argument("--trials", type=int, default=None, help="trials per algorithm")
    parser.add_argument("--timesteps", type=int, default=None, help="per run, tuning and held out")
    parser.add_argument("--jobs", type=int, default=None, help="trials at once")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    plan = read_plan(args.file)
    if args.trials is not None:
        plan["trials"] = args.trials
    if args.timesteps is not None:
        plan["budget"] = {"timesteps": args.timesteps}
        plan["holdout"]["budget"] = {"timesteps": args.timesteps}
    if args.jobs is not None:
        plan["jobs"] = args.jobs
    steps = ("tune", "holdout", "report", "pack") if args.step == "all" else (args.step,)
    commands: list[list[str]] = []
    if "tune" in steps:
        commands.append(tune_command(plan, args.runs_dir))
    if "holdout" in steps:
        for path in holdout_sweeps(plan, args.runs_dir, write=not args.dry_run):
            commands.append(
                [
                    sys.executable,
                    "-m",
                    "harness.cli",
                    "sweep",
                    str(path),
                    "--runs-dir",
                    str(args.runs_dir / "holdout"),
                ]
            )
    if "report" in steps:
        note = (
            f"{', '.join(plan['algos'])} on {plan['env']}, each at its shipped settings and at "
            f"the best trial of its study ({plan['study']}-ALGO: {plan['trials']} trials x "
            f"{len(plan['seeds'])} seeds x {next(iter(plan['budget'].values()))} "
            f"{next(iter(plan['budget']))}, the same for every algorithm), on held-out seeds "
            f"{', '.join(map(str, plan['holdout']['seeds']))}. The settings table names each "
            "tuned group's study, budget and seeds."
        )
        commands.append(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "report",
                str(args.runs_dir / "holdout"),
                "--out",
                str(args.out),
                "--title",
                f"{plan['study']}: tuned against shipped settings",
                "--note",
                note,
            ]
        )
    for command in commands:
        print("$", shlex.join(command), flush=True)
        if args.dry_run:
            continue
        done = subprocess.run(command, cwd=ROOT)
        if done.returncode != 0:
            return done.returncode
    if "pack" in steps:
        print(f"$ pack {args.runs_dir} -> {args.out}", flush=True)
        if not args.dry_run:
            pack(plan, args.runs_dir, args.out)
    return 0


#: A run's policy files that the report's archive keeps beside its records.
POLICY_FILES = ("final_params.npy", "policy_spec.json", "obs_norm.json", "vec_normalize.json")
#: What a study folder keeps in the report (its HTML embeds the same figures again).
STUDY_FILES = ("best.yaml", "trials.csv", "report.md")


def pack(plan: dict[str, Any], runs_dir: Path, out: Path) -> None:
    """The held-out runs' archive, each study's outputs and the costs, into ``out``."""
    import shutil

    from harness import rundir

    held = runs_dir / "holdout"
    completed = [h.path for h in rundir.scan_runs(held) if h.status == "COMPLETED"]
    if not completed:
        fail(f"no completed held-out runs in {held}: run the holdout step first")
    out.mkdir(parents=True, exist_ok=True)
    # the policies travel too, so that the redrawn report replays them (frames, diversity)
    rundir.write_run_archive(
        sorted(completed, key=lambda p: int(p.name)), out / "runs.tar.xz", also=POLICY_FILES
    )
    for algo in plan["algos"]:
        study = f"{plan['study']}-{algo}"
        source = runs_dir / "_tune" / study
        if not source.is_dir():
            fail(f"no outputs of study {study} in {source}: run the tune step first")
        target = out / "studies" / study
        target.mkdir(parents=True, exist_ok=True)
        for item in sorted(source.iterdir()):
            if item.name in STUDY_FILES or item.suffix == ".png":
                # study.md: a report.md in the folder would read as a report of runs
                name = "study.md" if item.name == "report.md" else item.name
                shutil.copyfile(item, target / name)
    rows = cost_rows([runs_dir, held])
    header = ["group", "runs", "timesteps", "cpu_seconds", "wall_seconds"]
    lines = [",".join(header)] + [",".join(str(row[k]) for k in header) for row in rows]
    (out / "costs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = [
        "| group | runs | timesteps | CPU-seconds | wall-clock s |",
        "|---|---:|---:|---:|---:|",
    ]
    table += [
        f"| {r['group']} | {r['runs']} | {r['timesteps']:,} | {r['cpu_seconds']:,.0f} | "
        f"{r['wall_seconds']:,.0f} |"
        for r in rows
    ]
    (out / "costs.md").write_text(
        "# Costs of the study\n\nSummed from each run's `summary.json` (CPU-seconds of the "
        "run's process tree; wall-clock on a 2-core machine shared with other jobs), per "
        "study (its trials), per re-check of a study's best trial on fresh tuning seeds, "
        "and per held-out sweep. Written by `scripts/tune_lander.py --step pack`.\n\n"
        + "\n".join(table)
        + "\n",
        encoding="utf-8",
    )


def cost_rows(folders: list[Path]) -> list[dict[str, Any]]:
    """Per sweep name (a study, its re-check, a held-out sweep): runs, timesteps,
    CPU-seconds and wall-clock seconds, from the runs' ``config.json``/``summary.json``."""
    from harness import rundir

    totals: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for run in sorted(p for p in folder.iterdir() if p.name.isdigit()):
            try:
                config = rundir.read_json(run / "config.json")
                summary = rundir.read_json(run / "summary.json")
            except rundir.UnreadableRun:
                continue  # a run that never finished writing: no cost to read
            group = str(config.get("sweep") or "unnamed")
            row = totals.setdefault(
                group, {"group": group, "runs": 0, "timesteps": 0, "cpu_seconds": 0.0,
                        "wall_seconds": 0.0},
            )  # fmt: skip
            row["runs"] += 1
            row["timesteps"] += int(summary.get("timesteps") or 0)
            row["cpu_seconds"] += float(summary.get("cpu_seconds") or 0.0)
            row["wall_seconds"] += float(summary.get("wall_time_s") or 0.0)
    return [totals[k] for k in sorted(totals)]


if __name__ == "__main__":
    sys.exit(main())
