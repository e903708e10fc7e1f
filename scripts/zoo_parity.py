"""Parity with rl-baselines3-zoo: the zoo's own ``train.py`` beside the benchmark's RL cells.

    python scripts/zoo_parity.py pack --zoo-dir DIR [--out reports/zoo_parity]
    python scripts/zoo_parity.py report [--out reports/zoo_parity]

1. pack: every completed run of the zoo's trainer under ``DIR`` (``DIR/ALGO/ENV_N/``, as
   ``python -m rl_zoo3.train --log-folder DIR`` lays them out) into ``--out/zoo/``: its
   evaluations (``evaluations.npz``, read without pickles) as ``ALGO-ENV-seedS.csv`` and its
   command and hyperparameters as ``ALGO-ENV-seedS.yml``. Only runs that reached their
   ``n_timesteps`` count.
2. report: for each zoo (algorithm, env) with runs, the benchmark's cells of the same
   algorithm and env at the same seeds (from the committed archives
   ``reports/benchmark/TASK/runs.tar.xz``), each run scored as the benchmark scores a final
   endpoint (the mean of its last 3 evaluations), each side's mean with its 95% bootstrap
   interval; ``parity.json`` (what ``harness benchmark report`` prints beside the anchors),
   ``parity.md`` and one figure of curves per env.

Reading the zoo's YAML files: its ``args.yml`` and ``config.yml`` are ordered dicts dumped
with a Python tag; the loader here turns that one tag into a mapping and constructs nothing
else, so a planted file cannot run code.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ZOO_VERSION_FILE = "versions.yml"
ZOO_PACKAGES = ("rl_zoo3", "stable-baselines3", "sb3-contrib", "gymnasium", "mujoco", "torch")
#: zoo env id -> the benchmark task that runs it (the harness's env name)
TASKS = {
    "LunarLanderContinuous-v3": "LunarLanderContinuous",
    "HalfCheetah-v5": "HalfCheetah-v5",
    "Hopper-v5": "Hopper-v5",
}
ORDERED_DICT_TAG = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"


def fail(message: str) -> NoReturn:
    print(f"zoo_parity: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class _ZooLoader(yaml.SafeLoader):
    """The safe loader plus the one tag the zoo writes: an OrderedDict as a list of pairs."""


def _ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
    assert isinstance(node, yaml.SequenceNode)
    (pairs,) = loader.construct_sequence(node, deep=True)
    return {str(key): value for key, value in pairs}


_ZooLoader.add_constructor(ORDERED_DICT_TAG, _ordered_dict)


def read_zoo_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_ZooLoader)
    except (OSError, yaml.YAMLError) as error:
        fail(f"{path}: {error}")
    if not isinstance(data, dict):
        fail(f"{path}: not a mapping")
    return data


# -- pack ----------------------------------------------------------------------------------------


def zoo_runs(zoo_dir: Path) -> list[dict[str, Any]]:
    """Every completed run under ``zoo_dir``: algo, env, seed, evaluations and settings."""
    runs = []
    for evaluations in sorted(zoo_dir.glob("*/*_*/evaluations.npz")):
        run_dir = evaluations.parent
        algo = run_dir.parent.name
        env = run_dir.name.rsplit("_", 1)[0]
        args = read_zoo_yaml(run_dir / env / "args.yml")
        config = read_zoo_yaml(run_dir / env / "config.yml")
        with np.load(evaluations, allow_pickle=False) as data:
            timesteps = data["timesteps"].astype(float)
            results = data["results"].astype(float)
        budget = float(args.get("n_timesteps") or config.get("n_timesteps") or 0)
        if not len(timesteps) or timesteps[-1] + float(args.get("eval_freq", 0)) <= budget:
            print(f"zoo_parity: skipping {run_dir}: evaluated to {timesteps[-1:]} of {budget:,.0f}")
            continue
        conf = args.get("conf_file")
        runs.append(
            {
                "conf_file": Path(str(conf)) if conf else None,
                "algo": algo,
                "env": env,
                "seed": int(args["seed"]),
                "timesteps": timesteps,
                "results": results,
                "command": (run_dir / env / "command.txt").read_text(encoding="utf-8").strip(),
                "hyperparams": config,
                "budget": budget,
                "folder": str(run_dir),
            }
        )
    return runs


def cmd_pack(args: argparse.Namespace) -> int:
    if not args.zoo_dir.is_dir():
        fail(f"--zoo-dir {args.zoo_dir} is not a directory")
    runs = zoo_runs(args.zoo_dir)
    if not runs:
        fail(f"no completed run of rl_zoo3.train under {args.zoo_dir}")
    out = args.out / "zoo"
    out.mkdir(parents=True, exist_ok=True)
    for run in runs:
        stem = f"{run['algo']}-{run['env']}-seed{run['seed']}"
        columns = {f"episode_{i}": run["results"][:, i] for i in range(run["results"].shape[1])}
        frame = pd.DataFrame(
            {"timesteps": run["timesteps"], "eval_return_mean": run["results"].mean(axis=1)}
            | columns
        )
        frame.to_csv(out / f"{stem}.csv", index=False)
        settings = {
            "command": run["command"],
            "n_timesteps": run["budget"],
            "hyperparams": {
                k: (v if isinstance(v, (int, float, bool, type(None))) else str(v))
                for k, v in run["hyperparams"].items()
            },
        }
        if run["conf_file"] is not None:  # the hyperparameter file the command names
            conf = out / f"{run['algo']}-{run['env']}.conf.yml"
            conf.write_bytes(run["conf_file"].read_bytes())
            settings["conf_file_copy"] = conf.name
        (out / f"{stem}.yml").write_text(yaml.safe_dump(settings, sort_keys=False))
        print(f"zoo_parity: packed {run['folder']} as {stem}")
    if args.zoo_python is not None:
        probe = (
            "import importlib.metadata as m, platform; print(platform.python_version()); "
            f"[print(p, m.version(p)) for p in {list(ZOO_PACKAGES)!r}]"
        )
        lines = subprocess.run(
            [str(args.zoo_python), "-c", probe], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        versions = {"python": lines[0]} | dict(line.split(" ", 1) for line in lines[1:])
        (out / ZOO_VERSION_FILE).write_text(yaml.safe_dump(versions, sort_keys=False))
    return 0


# -- report --------------------------------------------------------------------------------------


def zoo_side(out: Path) -> dict[tuple[str, str], dict[int, pd.DataFrame]]:
    """(algo, zoo env id) -> seed -> evaluations (timesteps, eval_return_mean)."""
    sides: dict[tuple[str, str], dict[int, pd.DataFrame]] = {}
    for csv in sorted((out / "zoo").glob("*-seed*.csv")):
        algo, rest = csv.stem.split("-", 1)
        env, seed = rest.rsplit("-seed", 1)
        frame = pd.read_csv(csv)[["timesteps", "eval_return_mean"]]
        sides.setdefault((algo, env), {})[int(seed)] = frame
    return sides


def harness_side(
    task: str, algo: str, seeds: list[int], runs_dir: Path | None = None
) -> dict[int, pd.DataFrame]:
    """The benchmark's completed runs of ``algo`` on ``task`` at ``seeds`` (its committed
    archive, and ``runs_dir``'s runs that ``harness benchmark report`` has not archived
    yet; equal-compute runs left out; of two runs of a seed, the later): seed ->
    evaluations."""
    import warnings

    from harness.benchmark.carry import ARCHIVE
    from harness.benchmark.fairness import equal_compute_mask, evaluations
    from harness.benchmark.report import task_slug
    from harness.records import load_runs

    archive = ROOT / "reports" / "benchmark" / task_slug(task) / ARCHIVE
    sources = [p for p in (archive, runs_dir) if p is not None and p.exists()]
    if not sources:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = load_runs(sources).select(("COMPLETED",))
    runs = table.runs[~equal_compute_mask(table.runs)]
    runs = runs[
        (runs["algo"].astype(str) == algo)
        & (runs["env"].astype(str) == task)
        & runs["seed"].astype(int).isin(seeds)
    ]
    runs = runs.sort_values("start_time", kind="stable").drop_duplicates("seed", keep="last")
    evals = evaluations(table.steps[table.steps["run"].isin(set(runs["run"]))])
    return {
        int(seed): evals[evals["run"] == run][["timesteps", "eval_return_mean"]]
        for run, seed in zip(runs["run"], runs["seed"], strict=True)
    }


def side_summary(curves: dict[int, pd.DataFrame]) -> dict[str, Any]:
    from harness.benchmark.fairness import mean_of_last
    from harness.report import stats

    finals = {seed: mean_of_last(frame, "timesteps") for seed, frame in sorted(curves.items())}
    group = stats.group_stats(list(finals.values()))
    return {
        "seeds": list(finals),
        "finals": [round(v, 3) for v in finals.values()],
        "last_timesteps": [float(curves[s]["timesteps"].max()) for s in finals],
        "mean": group.mean,
        "low": group.mean_low,
        "high": group.mean_high,
    }


def _interval(side: dict[str, Any]) -> str:
    from harness.report.tables import interval

    return interval(side["low"], side["high"])


def draw(
    path: Path, title: str, zoo: dict[int, pd.DataFrame], ours: dict[int, pd.DataFrame]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, curves, color in (
        ("rl_zoo3 train.py", zoo, "tab:orange"),
        ("harness", ours, "tab:blue"),
    ):
        for index, (seed, frame) in enumerate(sorted(curves.items())):
            ax.plot(
                frame["timesteps"] / 1e6,
                frame["eval_return_mean"],
                color=color,
                alpha=0.8,
                linestyle=("-", "--", ":", "-.")[index % 4],
                label=f"{label}, seed {seed}",
            )
    ax.set_xlabel("timesteps (millions)")
    ax.set_ylabel("evaluation return (mean of 10 episodes)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.tables import fmt

    sides = zoo_side(args.out)
    if not sides:
        fail(f"no packed zoo run under {args.out / 'zoo'}: run the pack step first")
    entries: list[dict[str, Any]] = []
    lines = [
        "# Parity with rl-baselines3-zoo's own trainer",
        "",
        "Drawn by `python scripts/zoo_parity.py report` from the zoo runs packed in `zoo/` and "
        "the benchmark's committed archives (`reports/benchmark/TASK/runs.tar.xz`). A run's "
        "final score is the benchmark's endpoint: the mean of its last 3 evaluations (10 "
        "episodes each); each side's mean with its 95% bootstrap interval over seeds. The two "
        "agree where the intervals overlap.",
        "",
        "| algorithm | env | seeds | rl_zoo3 train.py | interval | harness | interval | agree |",
        "|---|---|---|---:|---|---:|---|---|",
    ]
    commands = []
    for (algo, env), zoo in sorted(sides.items()):
        task = TASKS.get(env)
        if task is None:
            fail(f"zoo env {env} has no benchmark task here (known: {', '.join(TASKS)})")
        ours = harness_side(task, algo, sorted(zoo), args.runs_dir)
        both = sorted(set(zoo) & set(ours))
        zoo_stats = side_summary({s: zoo[s] for s in sorted(zoo)})
        our_stats = side_summary({s: ours[s] for s in both}) if both else None
        agree = None
        if our_stats and math.isfinite(zoo_stats["low"]) and math.isfinite(our_stats["low"]):
            agree = zoo_stats["low"] <= our_stats["high"] and our_stats["low"] <= zoo_stats["high"]
        figure = f"parity_{algo}_{env}.png"
        draw(args.out / figure, f"{algo} on {env}: rl_zoo3 train.py against the harness", zoo, ours)
        settings = yaml.safe_load(
            (args.out / "zoo" / f"{algo}-{env}-seed{min(zoo)}.yml").read_text()
        )
        commands.append(settings["command"])
        entries.append(
            {
                "algo": algo,
                "env": task,
                "zoo_env": env,
                "zoo": zoo_stats,
                "harness": our_stats,
                "agree": agree,
                "figure": figure,
            }
        )
        agree_text = {True: "yes", False: "**no**", None: "—"}[agree]
        lines.append(
            f"| {algo} | {env} | zoo {', '.join(map(str, zoo_stats['seeds']))}; harness "
            f"{', '.join(map(str, our_stats['seeds'])) if our_stats else 'none'} | "
            f"{fmt(zoo_stats['mean'])} | {_interval(zoo_stats)} | "
            f"{fmt(our_stats['mean']) if our_stats else '—'} | "
            f"{_interval(our_stats) if our_stats else '—'} | {agree_text} |"
        )
    lines += ["", "Per seed (final score: the mean of the last 3 evaluations):", ""]
    lines += ["| algorithm | env | seed | rl_zoo3 train.py | harness |", "|---|---|---|---:|---:|"]
    for entry in entries:
        ours_by_seed = (
            dict(zip(entry["harness"]["seeds"], entry["harness"]["finals"], strict=True))
            if entry["harness"]
            else {}
        )
        for seed, final in zip(entry["zoo"]["seeds"], entry["zoo"]["finals"], strict=True):
            lines.append(
                f"| {entry['algo']} | {entry['zoo_env']} | {seed} | {fmt(final)} | "
                f"{fmt(ours_by_seed.get(seed, math.nan))} |"
            )
    versions = args.out / "zoo" / ZOO_VERSION_FILE
    if versions.is_file():
        found = yaml.safe_load(versions.read_text())
        lines += ["", "The zoo's environment: " + ", ".join(f"{k} {v}" for k, v in found.items())]
    lines += ["", "The zoo's commands (one per seed; `--seed` varies):", "", "```bash"]
    lines += [shlex.join(shlex.split(c)) for c in commands] + ["```", ""]
    for entry in entries:
        lines += [f"![{entry['algo']} on {entry['zoo_env']}]({entry['figure']})", ""]
    (args.out / "parity.md").write_text("\n".join(lines))
    (args.out / "parity.json").write_text(json.dumps({"entries": entries}, indent=1) + "\n")
    print(f"zoo_parity: wrote {args.out / 'parity.md'} and parity.json ({len(entries)} pairs)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    pack = sub.add_parser("pack", help="copy the zoo's completed runs into OUT/zoo")
    pack.add_argument("--zoo-dir", type=Path, required=True, help="rl_zoo3.train's --log-folder")
    pack.add_argument(
        "--zoo-python", type=Path, help="the zoo's Python: its package versions go to versions.yml"
    )
    report = sub.add_parser("report", help="write parity.json, parity.md and the figures")
    report.add_argument(
        "--runs-dir",
        type=Path,
        help="the benchmark's runs directory: its runs not archived yet count too",
    )
    for p in (pack, report):
        p.add_argument(
            "--out", type=Path, default=ROOT / "reports" / "zoo_parity", help="report folder"
        )
    args = parser.parse_args(argv)
    return cmd_pack(args) if args.step == "pack" else cmd_report(args)


if __name__ == "__main__":
    raise SystemExit(main())
