"""Scaling with workers: throughput and time-to-target against W, the ideal and a model.

A *series* is one cell run at several worker counts W (same env, algorithm, k,
backend and settings but W). Measured per run: training env steps per second
of training wall-clock, and, when the run had a target return, its time to
target from ``summary.json`` (the confirmed time when the run recorded a
confirmation, else the first crossing; the report says which).

Ideal: linear in W from the fewest workers of the series. Model: Amdahl's law
from the W=1 runs' wall-clock breakdown (``time_breakdown`` in ``summary.json``):
serial fraction s = 1 - (rollouts + evaluation + confirmation, the parts the
workers run) / (sum of the training parts: start-up, which precedes the training
wall-clock, is left out), everything else counted as serial; predicted speed-up
1 / (s + (1 - s) / W). Without a W=1 breakdown there is no model and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from harness.report.data import BREAKDOWN_PREFIX, GROUP, caption, episodes_knob_applies
from harness.report.plots import PALETTE, apply_style, finish
from harness.report.tables import fmt

SERIES_KEYS = ["env", "algo", "episodes_per_fitness", "backend"]
#: Parts the workers run: rollouts, and the evaluation and confirmation episodes, which the
#: evaluator spreads over the workers too. Everything else in training counts as serial.
PARALLEL_PARTS = ("rollouts", "evaluation", "confirmation")
#: Parts that precede training (``harness.runner.STARTUP_PARTS``): outside the training
#: wall-clock that throughput and time to target are measured on, so outside the model.
STARTUP_PARTS = ("process_start", "setup")


def training_parts(columns: Iterable[str]) -> list[str]:
    """The ``time.<part>`` columns of the training loop (start-up parts left out)."""
    return [
        c
        for c in columns
        if c.startswith(BREAKDOWN_PREFIX) and c.removeprefix(BREAKDOWN_PREFIX) not in STARTUP_PARTS
    ]


def scaling_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of series with two or more worker counts, with speed-up and efficiency.

    Speed-up = throughput / mean throughput at the fewest workers ``w0`` of the series;
    efficiency = speed-up x ``w0`` / W. Adds ``series`` (a label) and ``baseline_workers``.
    """
    usable = runs[runs["steps_per_s"].notna() & (runs["steps_per_s"] > 0)]
    keys = [k for k in SERIES_KEYS if k in runs]
    if GROUP in usable:
        # A speed-up compares one configuration at several worker counts: runs whose
        # groups differ in anything but W (policy, population, reward ...) are not a series.
        usable = usable.assign(_configuration=usable[GROUP].str.replace(r" w=\d+", "", regex=True))
        keys.append("_configuration")
    frames = []
    series_count = usable.groupby(keys, sort=False).ngroups
    for key, group in usable.groupby(keys, sort=False):
        if group["workers"].nunique() < 2:
            continue
        w0 = int(group["workers"].min())
        base = float(group.loc[group["workers"] == w0, "steps_per_s"].mean())
        frame = group.drop(columns="_configuration", errors="ignore")
        env, algo, k = key[0], key[1], int(key[2])
        label = f"{algo} k={k}" if episodes_knob_applies(algo) else str(algo)
        if usable["env"].nunique() > 1:
            label += f" {env}"
        if series_count > 1 and usable["backend"].nunique() > 1:
            label += f" {key[3]}"
        frame["series"] = label
        frame["baseline_workers"] = w0
        frame["speedup"] = frame["steps_per_s"] / base
        frame["efficiency"] = frame["speedup"] * w0 / frame["workers"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def serial_fraction(frame: pd.DataFrame) -> float:
    """Amdahl's serial fraction from the W=1 runs' breakdown; NaN without one."""
    ones = frame[frame["workers"] == 1]
    parts = training_parts(frame.columns)
    parallel = [BREAKDOWN_PREFIX + part for part in PARALLEL_PARTS]
    if ones.empty or parallel[0] not in parts:
        return math.nan
    totals = ones[parts].sum(axis=1, min_count=1)
    on_workers = ones[[c for c in parallel if c in parts]].sum(axis=1, min_count=1)
    fractions = 1.0 - on_workers / totals
    fractions = fractions[np.isfinite(fractions) & (totals > 0)]
    return float(fractions.mean()) if len(fractions) else math.nan


def amdahl(workers: np.ndarray | float, serial: float) -> np.ndarray:
    """Predicted speed-up over one worker: 1 / (s + (1 - s) / W)."""
    w = np.asarray(workers, dtype=float)
    return 1.0 / (serial + (1.0 - serial) / w)


def _median(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.median()) if len(values) else math.nan


def model_frame(scaling: pd.DataFrame) -> pd.DataFrame:
    """Per series and W: measured means, ideal and model (throughput and time-to-target)."""
    rows = []
    for series, frame in scaling.groupby("series", sort=True):
        serial = serial_fraction(frame)
        w0 = int(frame["baseline_workers"].iloc[0])
        base = frame[frame["workers"] == w0]
        base_rate = float(base["steps_per_s"].mean())
        base_ttt = _median(base["time_to_target_s"]) if "time_to_target_s" in base else math.nan
        for workers, at_w in frame.groupby("workers", sort=True):
            w = int(workers)
            speedup_model = (
                float(amdahl(w, serial)) if not math.isnan(serial) and w0 == 1 else math.nan
            )
            ttt = at_w["time_to_target_s"] if "time_to_target_s" in at_w else pd.Series(dtype=float)
            kinds = at_w.get("time_to_target_kind", pd.Series(dtype=object)).dropna().unique()
            rows.append(
                {
                    "series": series,
                    "workers": w,
                    "runs": len(at_w),
                    "steps_per_s": float(at_w["steps_per_s"].mean()),
                    "ideal_steps_per_s": base_rate * w / w0,
                    "model_steps_per_s": base_rate * speedup_model,
                    "speedup": float(at_w["speedup"].mean()),
                    "model_speedup": speedup_model,
                    "efficiency": float(at_w["efficiency"].mean()),
                    "serial_fraction": serial,
                    "reached": int(ttt.notna().sum()),
                    "targeted": int(at_w["target_value"].notna().sum())
                    if "target_value" in at_w
                    else 0,
                    "time_to_target_s": _median(ttt),
                    "time_to_target_kind": " / ".join(sorted(str(k) for k in kinds)),
                    "ideal_time_to_target_s": base_ttt * w0 / w,
                    "model_time_to_target_s": base_ttt / speedup_model,
                    "cores": float(at_w["host_cpu_count"].min()),
                }
            )
    return pd.DataFrame(rows)


def scaling_figure(scaling: pd.DataFrame, model: pd.DataFrame) -> Figure | None:
    """Steps/s, efficiency and (when recorded) time-to-target against W; ideal and model."""
    if scaling.empty:
        return None
    apply_style()
    has_ttt = bool(model["time_to_target_s"].notna().any())
    panels = 3 if has_ttt else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.4))
    series = sorted(model["series"].unique())
    colors = dict(zip(series, sns.color_palette(PALETTE, len(series)), strict=True))
    workers = np.array(sorted(scaling["workers"].unique()), dtype=float)
    rate_ax, eff_ax = axes[0], axes[1]
    for name in series:
        color = colors[name]
        runs = scaling[scaling["series"] == name]
        rows = model[model["series"] == name]
        rate_ax.scatter(runs["workers"], runs["steps_per_s"], color=color, alpha=0.4, s=16)
        rate_ax.plot(
            rows["workers"], rows["steps_per_s"], "o-", color=color, label=f"{name}: measured"
        )
        rate_ax.plot(
            rows["workers"], rows["ideal_steps_per_s"], "--", color=color, linewidth=1, alpha=0.7
        )
        if rows["model_steps_per_s"].notna().any():
            rate_ax.plot(
                rows["workers"],
                rows["model_steps_per_s"],
                ":",
                color=color,
                linewidth=1.6,
                label=f"{name}: Amdahl model (s={rows['serial_fraction'].iloc[0]:.2f})",
            )
        eff_ax.scatter(runs["workers"], runs["efficiency"], color=color, alpha=0.4, s=16)
        eff_ax.plot(rows["workers"], rows["efficiency"], "o-", color=color)
        if rows["model_speedup"].notna().any():
            eff_ax.plot(
                rows["workers"],
                rows["model_speedup"] / rows["workers"],
                ":",
                color=color,
                linewidth=1.6,
            )
        if has_ttt:
            ttt_ax = axes[2]
            reached = runs[runs["time_to_target_s"].notna()]
            ttt_ax.scatter(
                reached["workers"], reached["time_to_target_s"], color=color, alpha=0.4, s=16
            )
            ttt_ax.plot(
                rows["workers"],
                rows["time_to_target_s"],
                "o-",
                color=color,
                label=f"{name} ({rows['time_to_target_kind'].iloc[-1] or 'none reached'})",
            )
            ttt_ax.plot(
                rows["workers"],
                rows["ideal_time_to_target_s"],
                "--",
                color=color,
                linewidth=1,
                alpha=0.7,
            )
            if rows["model_time_to_target_s"].notna().any():
                ttt_ax.plot(
                    rows["workers"], rows["model_time_to_target_s"], ":", color=color, linewidth=1.6
                )
    rate_ax.plot([], [], "k--", linewidth=1, label="ideal (linear from fewest W)")
    rate_ax.set_ylabel("env steps per second (training)")
    rate_ax.legend(fontsize=7.5)
    eff_ax.axhline(1.0, color="k", linestyle="--", linewidth=1)
    eff_ax.set_ylabel("parallel efficiency")
    eff_ax.set_ylim(0, max(1.15, float(scaling["efficiency"].max()) * 1.1))
    if has_ttt:
        from matplotlib.ticker import ScalarFormatter

        ttt_ax = axes[2]
        ttt_ax.plot([], [], "k--", linewidth=1, label="ideal")
        if model["model_time_to_target_s"].notna().any():
            ttt_ax.plot([], [], "k:", linewidth=1.6, label="Amdahl model")
        ttt_ax.set_ylabel("time to target, s (median; log scale)")
        ttt_ax.set_yscale("log")
        for axis in (ttt_ax.yaxis,):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(ScalarFormatter())
        ttt_ax.legend(fontsize=7.5)
    for ax in axes:
        ax.set_xlabel("workers W")
        ax.set_xticks(workers)
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers, [str(int(w)) for w in workers])
    cores = scaling["host_cpu_count"].dropna()
    note = (
        "solid: measured (points: runs); dashed: ideal, linear from the fewest workers; "
        "dotted: Amdahl's law from the W=1 wall-clock breakdown (serial fraction s = "
        "everything but the worker-run parts (rollouts, evaluation, confirmation) over the "
        "training total, start-up left out), speed-up "
        "1/(s + (1-s)/W)"
    )
    if model["model_speedup"].isna().all():
        note += " (not drawn: no W=1 run recorded a time breakdown)"
    if has_ttt:
        note += "; time to target: confirmed time where recorded, else the first crossing"
    if len(cores) and workers.max() > cores.min():
        note += "; workers beyond the core count share cores"
    return finish(
        fig, "Scaling with workers: throughput and time to target", caption(scaling, note)
    )


def scaling_table(model: pd.DataFrame) -> pd.DataFrame:
    """Per series and W: measured, ideal and model throughput; time to target."""
    rows = []
    for _, row in model.iterrows():
        over = not math.isnan(row["cores"]) and row["workers"] > row["cores"]
        rows.append(
            {
                "series": row["series"],
                "W": f"{row['workers']}{' (> cores)' if over else ''}",
                "runs": row["runs"],
                "env steps/s": fmt(row["steps_per_s"], 0),
                "ideal": fmt(row["ideal_steps_per_s"], 0),
                "model": fmt(row["model_steps_per_s"], 0),
                "speed-up": fmt(row["speedup"], 2),
                "model speed-up": fmt(row["model_speedup"], 2),
                "efficiency": fmt(row["efficiency"], 2),
                "reached target": f"{row['reached']} / {row['targeted']}"
                if row["targeted"]
                else "no target",
                "time to target s (median)": fmt(row["time_to_target_s"], 1)
                + (f" ({row['time_to_target_kind']})" if row["time_to_target_kind"] else ""),
                "model time to target s": fmt(row["model_time_to_target_s"], 1),
            }
        )
    return pd.DataFrame(rows)


def breakdown_table(scaling: pd.DataFrame) -> pd.DataFrame:
    """Mean seconds per part of the wall-clock breakdown, per series and W (empty without one);
    shares are of the training total (start-up parts shown, outside the total)."""
    parts = [c for c in scaling.columns if c.startswith(BREAKDOWN_PREFIX)]
    if not parts or scaling[parts].isna().all().all():
        return pd.DataFrame()
    training = set(training_parts(parts))
    rows: list[dict[str, Any]] = []
    for (series, workers), frame in scaling.groupby(["series", "workers"], sort=True):
        means = frame[parts].mean()
        total = float(means[list(training)].sum())
        row: dict[str, Any] = {"series": series, "W": int(workers)}
        for part in parts:
            value = float(means[part])
            share = (
                f" ({value / total:.0%})"
                if part in training and total > 0 and not math.isnan(value)
                else ""
            )
            row[part.removeprefix(BREAKDOWN_PREFIX)] = fmt(value, 2) + share
        row["training total s"] = fmt(total, 2)
        rows.append(row)
    return pd.DataFrame(rows)
