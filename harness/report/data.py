"""Frames derived from a :class:`~harness.records.RunTable` for plots and tables.

Everything here is pure pandas/numpy: group labels, the captions that name
env, budget, seeds and machine, eval curves on a common grid, throughput and
speed-up, bytes per generation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

GROUP = "group"


def _fmt_number(value: float) -> str:
    if value >= 1e6 and value % 1e5 == 0:
        return f"{value / 1e6:g}M"
    if value >= 1e3 and value % 100 == 0:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def budget_text(runs: pd.DataFrame) -> str:
    """The budgets of these runs in words, e.g. ``20k timesteps`` or ``600 s or return 200``."""
    texts: list[str] = []
    for _, row in runs.iterrows():
        parts = []
        if _present(row.get("budget_timesteps")):
            parts.append(f"{_fmt_number(float(row['budget_timesteps']))} timesteps")
        if _present(row.get("budget_generations")):
            parts.append(f"{_fmt_number(float(row['budget_generations']))} generations")
        if _present(row.get("budget_time_limit")):
            parts.append(f"{_fmt_number(float(row['budget_time_limit']))} s")
        if _present(row.get("budget_target_return")):
            parts.append(f"return {float(row['budget_target_return']):g}")
        text = " or ".join(parts) or "no budget recorded"
        if text not in texts:
            texts.append(text)
    return "; ".join(texts) if texts else "no runs"


def seeds_text(runs: pd.DataFrame) -> str:
    """``seeds 0, 1, 2`` (with runs per group when groups differ in size)."""
    if "seed" not in runs or runs.empty:
        return "no seeds"
    seeds = sorted({int(s) for s in runs["seed"].dropna()})
    listed = ", ".join(str(s) for s in seeds[:8]) + (", ..." if len(seeds) > 8 else "")
    word = "seed" if len(seeds) == 1 else "seeds"
    return f"{word} {listed}"


def _platform(row: pd.Series) -> str:
    platform = str(row.get("host_platform") or "")
    system = platform.split("-")[0] if platform else "unknown OS"
    arch = re.search(r"(x86_64|aarch64|arm64|amd64|i686)", platform)
    return f"{system} {arch.group(1)}" if arch else system


def machine_text(runs: pd.DataFrame) -> str:
    """The machines these runs ran on: OS, CPU model and CPU count from the host info."""
    if runs.empty:
        return "no machine"
    texts: list[str] = []
    for _, row in runs.iterrows():
        count = row.get("host_cpu_count")
        cpus = f"{int(count)} CPUs" if _present(count) else "CPU count not recorded"
        cpu = str(row.get("host_cpu") or "unknown CPU")
        text = f"{_platform(row)}, {cpu}, {cpus}"
        if text not in texts:
            texts.append(text)
    if len(texts) > 2:
        return f"{len(texts)} machines ({texts[0]}; ...)"
    return "; ".join(texts)


def env_text(runs: pd.DataFrame) -> str:
    names = []
    for env, gym_id in runs[["env", "gym_id"]].drop_duplicates().itertuples(index=False):
        text = str(env) if not gym_id or gym_id == env else f"{env} ({gym_id})"
        if text not in names:
            names.append(text)
    return ", ".join(names)


def caption(runs: pd.DataFrame, extra: str = "") -> str:
    """One line naming env, budget, seeds and machine of ``runs``."""
    parts = [env_text(runs), f"budget {budget_text(runs)}", seeds_text(runs), machine_text(runs)]
    if extra:
        parts.append(extra)
    return " · ".join(p for p in parts if p)


def varying(runs: pd.DataFrame, column: str) -> bool:
    return column in runs and runs[column].nunique(dropna=False) > 1


def add_groups(
    runs: pd.DataFrame, by: Iterable[str] = ("episodes_per_fitness", "workers")
) -> pd.DataFrame:
    """Add a ``group`` column: the algorithm, plus ``k=`` / ``w=`` / ``[sweep]`` where those
    vary among the runs of an env."""
    runs = runs.copy()
    labels = pd.Series("", index=runs.index, dtype=object)
    for _, env_runs in runs.groupby("env", sort=False):
        extra = [c for c in by if varying(env_runs, c)]
        for index, row in env_runs.iterrows():
            label = str(row["algo"])
            if "episodes_per_fitness" in extra:
                label += f" k={int(row['episodes_per_fitness'])}"
            if "workers" in extra:
                label += f" w={int(row['workers'])}"
            if varying(env_runs, "sweep"):
                label += f" [{row['sweep']}]"
            labels[index] = label
    runs[GROUP] = labels
    return runs


def eval_points(steps: pd.DataFrame, x: str) -> pd.DataFrame:
    """Rows where an evaluation was logged: run, x, eval_return_mean."""
    if "eval_return_mean" not in steps or x not in steps:
        return pd.DataFrame(columns=["run", x, "eval_return_mean"])
    rows = steps[steps["eval_return_mean"].notna() & steps[x].notna()]
    return rows[["run", x, "eval_return_mean"]]


def eval_curves(steps: pd.DataFrame, runs: pd.DataFrame, x: str, points: int = 60) -> pd.DataFrame:
    """Each run's eval return interpolated onto a common grid of ``x`` per (env, group).

    Runs log evaluations at different ``x`` (generations differ in length), so
    averaging across seeds needs a common grid. The grid of a group spans the
    range every one of its runs covers (latest first evaluation to earliest
    last one), so the mean never mixes different sets of runs and nothing is
    extrapolated. Where the runs of a group do not overlap, each keeps its own
    evaluation points. Returns columns run, env, group, seed, x, eval_return_mean.
    """
    evals = eval_points(steps, x)
    columns = ["run", "env", GROUP, "seed", x, "eval_return_mean"]
    frames = []
    for (env, group), group_runs in runs.groupby(["env", GROUP], sort=False):
        own = {run: evals[evals["run"] == run].sort_values(x) for run in group_runs["run"]}
        own = {run: frame for run, frame in own.items() if len(frame)}
        if not own:
            continue
        low = max(float(f[x].iloc[0]) for f in own.values())
        high = min(float(f[x].iloc[-1]) for f in own.values())
        grid = np.linspace(low, high, points) if high > low else None
        seeds = dict(zip(group_runs["run"], group_runs["seed"], strict=True))
        for run, frame in own.items():
            xs = frame[x].to_numpy(float)
            ys = frame["eval_return_mean"].to_numpy(float)
            if grid is not None and len(own) > 1:
                xs, ys = grid, np.interp(grid, xs, ys)
            frames.append(
                pd.DataFrame(
                    {
                        "run": run,
                        "env": env,
                        GROUP: group,
                        "seed": seeds[run],
                        x: xs,
                        "eval_return_mean": ys,
                    }
                )
            )
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def scaling_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Speed-up and parallel efficiency per run against the fewest workers of its group.

    Groups are (env, algo, episodes per fitness, backend); a group needs at
    least two worker counts. Throughput is training env steps per second of
    training wall-clock (``final_timesteps / final_wall_time_s``). With a
    baseline of ``w0`` workers (1 when present): speed-up = throughput /
    mean baseline throughput, efficiency = speed-up x ``w0`` / workers.
    """
    keys = ["env", "algo", "episodes_per_fitness", "backend"]
    frames = []
    usable = runs[runs["steps_per_s"].notna() & (runs["steps_per_s"] > 0)]
    for _, group in usable.groupby(keys, sort=False):
        if group["workers"].nunique() < 2:
            continue
        w0 = int(group["workers"].min())
        base = float(group.loc[group["workers"] == w0, "steps_per_s"].mean())
        frame = group.copy()
        frame["baseline_workers"] = w0
        frame["speedup"] = frame["steps_per_s"] / base
        frame["efficiency"] = frame["speedup"] * w0 / frame["workers"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def bytes_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean bytes per generation per run, long form: run, env, group, direction, bytes."""
    columns = {
        "bytes_to_workers_per_gen": "to workers",
        "bytes_from_workers_per_gen": "from workers",
    }
    present = [c for c in columns if c in runs]
    if not present:
        return pd.DataFrame()
    long = runs.melt(
        id_vars=["run", "env", GROUP, "algo", "workers", "n_params"],
        value_vars=present,
        var_name="direction",
        value_name="bytes",
    )
    long["direction"] = long["direction"].map(columns)
    return long[long["bytes"].notna()]
