"""Budgets audited: what each group asked for, what it used, and warnings when they disagree.

Requested: the run's budget keys (``timesteps``, ``generations``, ``time_limit``,
``cpu_limit``, ``target_return``). Used: final training timesteps, generations (steps), training
wall-clock, and CPU-seconds of the run's process tree (``cpu_seconds`` in
``summary.json``; runs recorded before the runner measured it show "n/a"), with the
host's core count. Warnings (shown at the top of a report):

* the groups of one env used timesteps, or wall-clock, differing by more than
  :data:`TOLERANCE` (10%) between the smallest and the largest group mean;
* the groups of one env asked for different budgets;
* a run used more than 10% beyond its requested timesteps, time limit or CPU limit (an ES
  generation finishes before the budget is checked, so a large population on a
  small budget overruns);
* an ES run whose population scored alike in most generations (fitness max - min
  within :data:`FLAT_RELATIVE` of the mean's size) and whose evaluations never rose
  above the first: the ranks carried no signal, so the run stayed where it started
  whatever its budget (a discretised policy whose
  perturbations do not change one action, or an env that ends every episode alike).
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
import pandas as pd

from algorithms.registry import family_of
from harness import speed
from harness.report.data import GROUP, budget_text
from harness.report.tables import fmt

TOLERANCE = 0.10
#: a generation is flat when its fitness range is below this fraction of max(1, |mean|)
FLAT_RELATIVE = 0.01
#: a run is named when at least this fraction of its generations were flat
FLAT_SHARE = 0.5


def _spread(values: pd.Series) -> float:
    """(max - min) / min of positive values; NaN when undefined."""
    values = values.dropna()
    values = values[values > 0]
    if len(values) < 2:
        return math.nan
    return float(values.max() / values.min() - 1.0)


def _range_text(values: pd.Series, digits: int = 0) -> str:
    values = values.dropna()
    if values.empty:
        return "n/a"
    low, high = float(values.min()), float(values.max())
    mean = float(values.mean())
    if math.isclose(low, high, rel_tol=1e-9, abs_tol=1e-9):
        return fmt(mean, digits)
    return f"{fmt(mean, digits)} ({fmt(low, digits)}–{fmt(high, digits)})"


def budget_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Requested and used budget per (env, group), with CPU-seconds and cores."""
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        requested = budget_text(frame)
        ask = frame["budget_timesteps"] if "budget_timesteps" in frame else pd.Series(dtype=float)
        ratio = frame["final_timesteps"] / pd.to_numeric(ask, errors="coerce")
        cpu = frame["cpu_seconds"] if "cpu_seconds" in frame else pd.Series(dtype=float)
        cores = frame["host_cpu_count"].dropna().astype(int).unique()
        rows.append(
            {
                "env": env,
                "group": group,
                "runs": len(frame),
                "requested": requested,
                "timesteps used": _range_text(frame["final_timesteps"]),
                "used / requested": "—"
                if ratio.dropna().empty
                else f"{float(ratio.max()):.0%}" + (" (max)" if ratio.nunique() > 1 else ""),
                "generations": _range_text(frame["generations"]),
                "wall-clock s": _range_text(frame["final_wall_time_s"], 1),
                "CPU-seconds": _range_text(cpu, 1) if cpu.notna().any() else "n/a",
                "cores": ", ".join(str(c) for c in sorted(cores)) or "n/a",
            }
        )
    return pd.DataFrame(rows)


def _short(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.3g}"


def budget_warnings(runs: pd.DataFrame) -> list[str]:
    """One-line warnings about unequal or overrun budgets (empty when all is even)."""
    warnings: list[str] = []
    for env, env_runs in runs.groupby("env", sort=True):
        means = env_runs.groupby(GROUP)[["final_timesteps", "final_wall_time_s"]].mean()
        time_budget = (
            "budget_time_limit" in env_runs and env_runs["budget_time_limit"].notna().any()
        )
        for column, what, unit, where in (
            (
                "final_timesteps",
                "timesteps",
                "",
                "scores are compared at the common budget (the largest timesteps all runs "
                "reached); the at-end table ranks unequal budgets",
            ),
            (
                "final_wall_time_s",
                "training wall-clock",
                " s",
                "wall-clock comparisons are made at the common wall-clock (the least any run "
                "trained)"
                + ("" if time_budget else "; the budget was not wall-clock, so this is a result")
                + ", and runs that shared cores ran slower",
            ),
        ):
            spread = _spread(means[column])
            if not math.isnan(spread) and spread > TOLERANCE:
                low, high = means[column].idxmin(), means[column].idxmax()
                warnings.append(
                    f"**{env}**: groups used {what} differing by {spread:+.0%} "
                    f"({low}: {_short(float(means[column][low]))}{unit}, "
                    f"{high}: {_short(float(means[column][high]))}{unit}); {where}."
                )
        asked = {budget_text(frame) for _, frame in env_runs.groupby(GROUP)}
        if len(asked) > 1:
            warnings.append(
                f"**{env}**: groups asked for different budgets ({'; '.join(sorted(asked))})."
            )
        warnings += _overruns(env, env_runs)
    return warnings


def _overruns(env: Any, env_runs: pd.DataFrame) -> list[str]:
    out = []
    for group, frame in env_runs.groupby(GROUP, sort=True):
        for column, used_column, unit in (
            ("budget_timesteps", "final_timesteps", "timesteps"),
            ("budget_time_limit", "final_wall_time_s", "s"),
            ("budget_cpu_limit", "cpu_seconds", "CPU-s"),
        ):
            if column not in frame or used_column not in frame:
                continue
            asked = pd.to_numeric(frame[column], errors="coerce")
            over = frame[used_column] / asked - 1.0
            bad = over[over > TOLERANCE]
            if bad.empty:
                continue
            worst = bad.idxmax()
            out.append(
                f"**{env}**: {len(bad)} of {len(frame)} run(s) of {group} overran their "
                f"{_short(float(asked[worst]))}-{unit} budget by up to {float(bad.max()):+.0%} "
                f"(run {frame.loc[worst, 'run']}: {_short(float(frame.loc[worst, used_column]))} "
                f"{unit})."
            )
    return out


def flat_fitness_warnings(steps: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Runs whose population fitness was flat in most generations (ES only)."""
    needed = {"fitness_min", "fitness_max", "fitness_mean", "run"}
    if not needed <= set(steps.columns):
        return []
    warnings = []
    groups = runs.set_index("run")[GROUP] if GROUP in runs else pd.Series(dtype=str)
    for run, frame in steps.groupby("run", sort=True):
        frame = frame.dropna(subset=["fitness_min", "fitness_max", "fitness_mean"])
        if frame.empty or family_of(frame["algo"].iloc[0]) == "rl":
            continue
        spread = frame["fitness_max"] - frame["fitness_min"]
        scale = frame["fitness_mean"].abs().clip(lower=1.0)
        flat = spread <= FLAT_RELATIVE * scale
        evals = steps.loc[steps["run"] == run, "eval_return_mean"].dropna()
        moved = len(evals) > 1 and float(evals.max() - evals.iloc[0]) > FLAT_RELATIVE * max(
            1.0, abs(float(evals.iloc[0]))
        )
        if flat.mean() < FLAT_SHARE or moved:  # a population that all solves it is flat too
            continue
        env = frame["env"].iloc[0]
        group = groups.get(run, "")
        mean = _short(float(frame["fitness_mean"].mean()))
        warnings.append(
            f"**{env}**: run {run} ({group}) scored its whole population alike "
            f"(fitness max - min within {FLAT_RELATIVE:.0%} of the mean) in {int(flat.sum())} "
            f"of its {len(frame)} generations (mean fitness {mean}): "
            "the ranks carried no signal, so it says nothing about what the algorithm can learn "
            "from this start; another seed, a larger sigma or an undiscretised policy may."
        )
    return warnings


def _moment(stamp: Any) -> float | None:
    """An ISO time as seconds since the epoch; None when absent or unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _most_at_once(frame: pd.DataFrame) -> tuple[int, int]:
    """The most runs, and the most workers, of ``frame`` running at one moment."""
    events: list[tuple[float, int, int]] = []
    for _, row in frame.iterrows():
        start, stop = _moment(row.get("start_time")), _moment(row.get("stop_time"))
        if start is None or stop is None or stop <= start:
            continue
        workers = row.get("workers")
        width = int(workers) if isinstance(workers, (int, float)) and workers == workers else 1
        events += [(start, 1, max(1, width)), (stop, -1, -max(1, width))]
    runs = workers = most_runs = most_workers = 0
    for _, step, width in sorted(events, key=lambda e: (e[0], e[1])):
        runs += step
        workers += width
        most_runs, most_workers = max(most_runs, runs), max(most_workers, workers)
    return most_runs, most_workers


def machine_key(row: pd.Series) -> str:
    """A machine as the runs recorded it: host name, CPU model and CPU count."""
    count = row.get("host_cpu_count")
    cpus = f"{int(count)} CPUs" if isinstance(count, float) and count == count else "? CPUs"
    return f"{row.get('host_name') or '?'} ({row.get('host_cpu') or '?'}, {cpus})"


def machine_warnings(runs: pd.DataFrame) -> list[str]:
    """Wall-clock and CPU-seconds that do not measure the algorithms alone, per env.

    Named when the env's runs come from unlike machines (host, CPU model or CPU count
    differ), or when runs of this report ran side by side on one machine with more
    workers at once than it has cores (a sweep's jobs x workers above the cores, say).
    Load from anything outside the report (other studies, other users) leaves no trace
    in these records, so no warning is no proof of an idle machine.
    """
    out: list[str] = []
    all_keys = runs.apply(machine_key, axis=1) if len(runs) else pd.Series(dtype=str)
    for env, env_runs in runs.groupby("env", sort=True):
        keys = all_keys[env_runs.index]
        if keys.nunique() > 1:
            out.append(
                f"**{env}**: runs come from unlike machines ({'; '.join(sorted(keys.unique()))}): "
                "wall-clock and CPU-seconds compare only between runs of one machine."
            )
        for key, frame in env_runs.groupby(keys, sort=True):
            cores = frame["host_cpu_count"].dropna()
            if cores.empty:
                continue
            most_runs, most_workers = _most_at_once(runs[all_keys == key])
            if most_runs > 1 and most_workers > int(cores.max()):
                out.append(
                    f"**{env}**: up to {most_runs} runs of this report ran at once on {key} "
                    f"with {most_workers} workers on {int(cores.max())} cores: its wall-clock, "
                    "time-to-target and CPU-second figures are a loaded machine's, not a "
                    "measurement of the algorithms; compare at equal timesteps."
                )
    return out


def _unexplained_rates(steps: pd.DataFrame, frame: pd.DataFrame) -> list[tuple[str, float]]:
    """Algorithms whose runs' own training steps per CPU-second (their last row of ``steps``),
    each divided by its run's speed, differ by more than :data:`harness.speed.RATE_TOLERANCE`
    (max / min - 1): where the record explains a speed difference, these agree. Runs without
    both numbers are left out."""
    if not {"timesteps", "cpu_seconds"} <= set(steps.columns) or "algo" not in frame:
        return []
    last = steps.dropna(subset=["timesteps", "cpu_seconds"]).groupby("run").last()
    found = []
    for algo, group in frame.groupby("algo", sort=True):
        used = last.reindex(group["run"])
        rate = (used["timesteps"] / used["cpu_seconds"]).to_numpy(float)
        rate = pd.Series(rate / group["speed"].to_numpy(float))
        rate = rate[np.isfinite(rate) & (rate > 0)]
        if len(rate) > 1 and float(rate.max() / rate.min()) - 1.0 > speed.RATE_TOLERANCE:
            found.append((str(algo), float(rate.max() / rate.min()) - 1.0))
    return found


def speed_table(steps: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Each run's speed record (harness.speed) and, per env, how its CPU-seconds compare.

    A run's speed: the median of its kernel series, with the spread (p90 - p10) / median;
    the median of its env series beside it. Where an env's runs differ in speed by more
    than :data:`harness.speed.TOLERANCE`, their CPU-seconds are converted to reference
    CPU-seconds (CPU-seconds x speed / :data:`harness.speed.REFERENCE_SPEED`) in the table,
    unless a run has no record or spreads by more than the tolerance within itself: then a
    line says so and nothing is converted.
    """

    def medians(run: Any, metric: str) -> tuple[float, float]:
        if metric not in steps:
            return math.nan, math.nan
        return speed.run_speed(steps.loc[steps["run"] == run, metric].dropna().tolist())

    rows, lines = [], []
    for env, env_runs in runs.groupby("env", sort=True):
        frame = env_runs.assign(
            speed=[medians(r, speed.KERNEL_METRIC)[0] for r in env_runs["run"]],
            spread=[medians(r, speed.KERNEL_METRIC)[1] for r in env_runs["run"]],
            env_speed=[medians(r, speed.ENV_METRIC)[0] for r in env_runs["run"]],
        )
        speeds = frame["speed"].dropna()
        differ = len(speeds) > 1 and float(speeds.max() / speeds.min()) - 1.0 > speed.TOLERANCE
        missing = frame.loc[frame["speed"].isna(), "run"].astype(str).tolist()
        wide = frame.loc[frame["spread"] > speed.TOLERANCE, "run"].astype(str).tolist()
        unexplained = _unexplained_rates(steps, frame) if differ and not missing else []
        convert = differ and not missing and not wide and not unexplained
        if differ and not convert:
            why = ([f"run(s) {', '.join(missing)} have no speed record"] if missing else []) + (
                [f"run(s) {', '.join(wide)} spread above it within the run"] if wide else []
            )
            why += [
                f"{algo}'s own steps per CPU-second, divided by each run's speed, still differ "
                f"by {gap:+.0%} between its runs (tolerance {speed.RATE_TOLERANCE:.0%}): the "
                "record does not explain their rates"
                for algo, gap in unexplained
            ]
            lines.append(
                f"**{env}**: run speeds differ by {float(speeds.max() / speeds.min()) - 1:+.0%} "
                f"(tolerance {speed.TOLERANCE:.0%}), but CPU-seconds are not converted to "
                f"reference CPU-seconds: {'; '.join(why)}. Compare these runs at equal "
                "timesteps, not CPU-seconds."
            )
        elif convert:
            lines.append(
                f"**{env}**: run speeds differ by {float(speeds.max() / speeds.min()) - 1:+.0%} "
                f"(tolerance {speed.TOLERANCE:.0%}): compare their CPU-seconds as reference "
                f"CPU-seconds (CPU-seconds x speed / {speed.REFERENCE_SPEED:,.0f})."
            )
        for _, row in frame.iterrows():
            cpu = float(row.get("cpu_seconds", math.nan))
            rows.append(
                {
                    "env": env,
                    "group": row.get(GROUP, ""),
                    "run": row["run"],
                    "machine": machine_key(row),
                    "speed (kernel/CPU-s)": "no record"
                    if math.isnan(row["speed"])
                    else f"{row['speed']:,.0f}",
                    "spread": "—" if math.isnan(row["spread"]) else f"{row['spread']:.0%}",
                    "env steps/CPU-s": "—"
                    if math.isnan(row["env_speed"])
                    else f"{row['env_speed']:,.0f}",
                    "CPU-seconds": fmt(cpu, 1),
                    "reference CPU-seconds": fmt(cpu * row["speed"] / speed.REFERENCE_SPEED, 1)
                    if convert and cpu == cpu
                    else "—",
                }
            )
    return pd.DataFrame(rows), lines
