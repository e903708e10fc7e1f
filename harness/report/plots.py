"""The report's figures (seaborn on matplotlib's Agg backend).

Every figure has a bold title saying what it shows and a caption line naming
env, budget, seeds and machine of the runs drawn (see
:func:`harness.report.data.caption`). A function returns ``None`` when its
data cannot support the figure; the report then says why in words.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from harness.report.data import GROUP, caption, eval_curves, eval_points

AXIS_LABELS = {"timesteps": "env timesteps (training)", "wall_time_s": "wall-clock seconds"}
MAX_COLUMNS = 3
#: Distinct hues for algorithms (colorblind's orange and vermillion are too alike).
PALETTE = "tab10"


def apply_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def finish(fig: Figure, title: str, text: str) -> Figure:
    """Title and caption at the top, layout tightened below them."""
    lines = textwrap.wrap(text, width=int(fig.get_figwidth() * 16)) or [""]
    height = fig.get_figheight()
    title_in, line_in = 0.38, 0.17
    top = 1 - (title_in + line_in * len(lines) + 0.02) / height
    fig.suptitle(title, fontsize=13, fontweight="bold", y=1 - 0.08 / height, va="top")
    fig.text(
        0.5,
        1 - (0.08 + title_in) / height,
        "\n".join(lines),
        ha="center",
        va="top",
        fontsize=8.5,
        color="#444444",
    )
    fig.tight_layout(rect=(0, 0, 1, top), pad=0.5)
    return fig


def _grid(n: int, width: float = 5.2, height: float = 3.9) -> tuple[Figure, list[Any]]:
    if n == 1:
        width = max(width, 7.2)
    cols = min(n, MAX_COLUMNS)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols + 0.6, height * rows + 1.0), squeeze=False
    )
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _errorbar(runs: pd.DataFrame) -> Any:
    """A 95% bootstrap interval across seeds where some group has two or more runs."""
    most = runs.groupby(["env", GROUP])["run"].nunique().max() if len(runs) else 0
    return ("ci", 95) if most and most >= 2 else None


BAND_REPS = 2000
LINESTYLES = ["-", "--", ":", "-."]


def mean_band(data: pd.DataFrame, x: str, seed: int = 0) -> pd.DataFrame | None:
    """Mean curve of a group's runs and a 95% percentile-bootstrap band over runs (seeds).

    ``data`` holds the group's runs on one shared grid (see
    :func:`~harness.report.data.eval_curves`); whole runs are resampled, so the
    band is an interval for the mean curve across seeds. None when the runs do
    not share a grid (or there is one run): then no band is drawn.
    """
    wide = data.pivot_table(index=x, columns="run", values="eval_return_mean")
    values = wide.to_numpy(dtype=float)
    if values.shape[1] < 2 or np.isnan(values).any():
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.shape[1], size=(BAND_REPS, values.shape[1]))
    boot = values[:, picks].mean(axis=2)
    low, high = np.percentile(boot, [2.5, 97.5], axis=1)
    return pd.DataFrame(
        {x: wide.index.to_numpy(float), "mean": values.mean(axis=1), "low": low, "high": high}
    )


def draw_group(
    ax: Any,
    data: pd.DataFrame,
    x: str,
    color: Any,
    label: str,
    linestyle: str = "-",
    faint: bool = True,
) -> None:
    """A group's mean curve with its band, or each run's curve when there is no band."""
    band = mean_band(data, x)
    if band is None:
        for i, (_, run) in enumerate(data.groupby("run", sort=True)):
            ax.plot(
                run[x],
                run["eval_return_mean"],
                color=color,
                linestyle=linestyle,
                linewidth=1.6,
                label=label if i == 0 else None,
            )
        return
    ax.fill_between(band[x], band["low"], band["high"], color=color, alpha=0.2, linewidth=0)
    ax.plot(band[x], band["mean"], color=color, linestyle=linestyle, linewidth=1.8, label=label)


def _raw_runs(ax: Any, raw: pd.DataFrame, x: str, colors: dict[str, Any], key: str) -> None:
    """Every run's own evaluations, faint, including beyond the range all seeds share."""
    for (_run, group), points in raw.groupby(["run", key]):
        ax.plot(
            points[x],
            points["eval_return_mean"],
            color=colors.get(group, "0.5"),
            alpha=0.25,
            linewidth=0.8,
        )


def _short_number(value: float, _position: Any = None) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _timestep_axis(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(_short_number))


def _log_wall_clock(ax: Any, data: pd.DataFrame, x: str) -> None:
    ends = data.groupby(GROUP)[x].max()
    if x == "wall_time_s" and (data[x] > 0).all() and ends.max() > 10 * ends.min():
        ax.set_xscale("log")
        ax.set_xlabel(AXIS_LABELS.get(x, x) + " (log scale)")


def eval_curve_figure(steps: pd.DataFrame, runs: pd.DataFrame, x: str) -> Figure | None:
    """Mean eval return (95% interval band across seeds) against ``x`` per env and group."""
    curves = eval_curves(steps, runs, x)
    if curves.empty:
        return None
    apply_style()
    envs = list(dict.fromkeys(curves["env"]))
    fig, axes = _grid(len(envs))
    errorbar = _errorbar(runs)
    raw = eval_points(steps, x).merge(runs[["run", "env", GROUP]], on="run")
    for ax, env in zip(axes, envs, strict=True):
        data = curves[curves["env"] == env]
        order = sorted(data[GROUP].unique())
        colors = dict(zip(order, sns.color_palette(PALETTE, len(order)), strict=True))
        if errorbar is not None:
            _raw_runs(ax, raw[raw["env"] == env], x, colors, GROUP)
        for group in order:
            draw_group(ax, data[data[GROUP] == group], x, colors[group], group)
        ax.set_xlabel(AXIS_LABELS.get(x, x))
        if x == "timesteps":
            _timestep_axis(ax)
        _log_wall_clock(ax, data, x)
        ax.set_ylabel("eval return (mean of episodes)")
        ax.set_title(str(env), fontsize=11)
        ax.legend(fontsize=9, loc="best")
    what = "timesteps" if x == "timesteps" else "wall-clock"
    band = (
        "mean across seeds where all have evaluated, band: 95% bootstrap interval over seeds, "
        "faint: single runs"
        if errorbar
        else "one run per group: no interval"
    )
    return finish(fig, f"Evaluation return against {what}", caption(runs, band))


def episodes_figure(steps: pd.DataFrame, runs: pd.DataFrame) -> Figure | None:
    """Episodes per fitness compared: curves by k, and final return against k."""
    envs = [
        env
        for env, frame in runs.groupby("env", sort=False)
        if frame["episodes_per_fitness"].nunique() > 1
    ]
    if not envs:
        return None
    apply_style()
    subset = runs[runs["env"].isin(envs)].copy()
    subset["k"] = subset["episodes_per_fitness"].astype(int)
    # Curves per (algorithm, k): the group label says both.
    subset[GROUP] = subset["algo"].astype(str) + " k=" + subset["k"].astype(str)
    curves = eval_curves(steps, subset, "timesteps").merge(subset[["run", "algo", "k"]], on="run")
    fig, axes = plt.subplots(len(envs), 2, figsize=(12.5, 4.2 * len(envs) + 1.0), squeeze=False)
    errorbar = _errorbar(subset)
    algos = sorted(subset["algo"].unique())
    colors = dict(zip(algos, sns.color_palette(PALETTE, len(algos)), strict=True))
    ks = sorted(subset["k"].unique())
    styles = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(ks)}
    for row, env in enumerate(envs):
        left, right = axes[row]
        data = curves[curves["env"] == env]
        for (algo, k), frame in data.groupby(["algo", "k"], sort=True):
            draw_group(left, frame, "timesteps", colors[algo], f"{algo} k={k}", styles[k])
        left.set_xlabel(AXIS_LABELS["timesteps"])
        _timestep_axis(left)
        left.set_ylabel("eval return")
        left.set_title(f"{env}: learning curves", fontsize=11)
        left.legend(fontsize=8, loc="best")
        finals = subset[(subset["env"] == env) & subset["final_eval_return"].notna()]
        sns.pointplot(
            data=finals,
            x="episodes_per_fitness",
            y="final_eval_return",
            hue="algo",
            hue_order=algos,
            palette=colors,
            ax=right,
            errorbar=errorbar,
            n_boot=1000,
            seed=0,
            dodge=0.3,
            markers="o",
            linestyles="-",
        )
        sns.stripplot(
            data=finals,
            x="episodes_per_fitness",
            y="final_eval_return",
            hue="algo",
            hue_order=algos,
            palette=colors,
            ax=right,
            dodge=True,
            alpha=0.35,
            legend=False,
            size=4,
        )
        right.set_xlabel("episodes per fitness evaluation (k)")
        right.set_ylabel("final eval return")
        right.set_title(f"{env}: final return by k (same timestep budget)", fontsize=11)
        legend = right.get_legend()
        if legend is not None:
            legend.set_title(None)
    note = "k episodes per fitness cost k times the timesteps per generation"
    if errorbar:
        note += "; bands and bars: 95% bootstrap intervals over seeds"
    return finish(fig, "Episodes per fitness evaluation compared", caption(subset, note))


def scaling_figure(scaling: pd.DataFrame) -> Figure | None:
    """Speed-up and parallel efficiency against workers, with the ideal lines."""
    if scaling.empty:
        return None
    apply_style()
    data = scaling.copy()
    data["series"] = (
        data["algo"]
        + data["episodes_per_fitness"].astype(int).map(lambda k: f" k={k}")
        + (" " + data["env"] if data["env"].nunique() > 1 else "")
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    errorbar = ("ci", 95) if data.groupby(["series", "workers"]).size().max() > 1 else None
    workers = np.array(sorted(data["workers"].unique()), dtype=float)
    w0 = float(data["baseline_workers"].min())
    sns.lineplot(
        data=data,
        x="workers",
        y="speedup",
        hue="series",
        marker="o",
        ax=left,
        errorbar=errorbar,
        err_style="bars",
        n_boot=1000,
        seed=0,
    )
    left.plot(workers, workers / w0, "k--", linewidth=1, label="ideal (linear)")
    left.set_ylabel(f"speed-up over {int(w0)} worker{'s' if w0 > 1 else ''} (env steps/s)")
    left.legend(fontsize=8)
    sns.lineplot(
        data=data,
        x="workers",
        y="efficiency",
        hue="series",
        marker="o",
        ax=right,
        errorbar=errorbar,
        err_style="bars",
        n_boot=1000,
        seed=0,
        legend=False,
    )
    right.axhline(1.0, color="k", linestyle="--", linewidth=1)
    right.set_ylabel("parallel efficiency")
    right.set_ylim(0, max(1.15, float(data["efficiency"].max()) * 1.1))
    for ax in (left, right):
        ax.set_xlabel("workers")
        ax.set_xticks(workers)
    cpus = data["host_cpu_count"].dropna()
    note = "throughput: env steps per second of training; efficiency = speed-up x w0 / workers"
    if errorbar:
        note += "; bars: 95% bootstrap intervals over seeds"
    if len(cpus) and workers.max() > cpus.min():
        note += "; workers beyond the core count share cores"
    return finish(fig, "Speed-up and parallel efficiency against workers", caption(data, note))


def bytes_figure(long: pd.DataFrame, runs: pd.DataFrame) -> Figure | None:
    """Mean bytes moved per generation, head to workers and back, per algorithm."""
    if long.empty or not (long["bytes"] > 0).any():
        return None
    apply_style()
    envs = list(dict.fromkeys(long["env"]))
    fig, axes = _grid(len(envs), width=5.6)
    for ax, env in zip(axes, envs, strict=True):
        data = long[(long["env"] == env) & (long["bytes"] > 0)]
        if data.empty:
            ax.set_visible(False)
            continue
        sns.barplot(
            data=data,
            x=GROUP,
            y="bytes",
            hue="direction",
            ax=ax,
            errorbar=None,
            order=sorted(data[GROUP].unique()),
        )
        ax.set_yscale("log")
        ax.set_xlabel("")
        ax.set_ylabel("bytes per generation (log)")
        params = data["n_params"].dropna()
        dim = f", {int(params.iloc[0])} parameters" if len(params) else ""
        ax.set_title(f"{env}{dim}", fontsize=11)
        ax.tick_params(axis="x", rotation=20)
        legend = ax.get_legend()
        if legend is not None:
            legend.set_title(None)
    return finish(
        fig, "Bytes over the wire per generation", caption(runs, "mean over generations and runs")
    )


def final_score_figure(scores: pd.DataFrame, runs: pd.DataFrame) -> Figure | None:
    """Each run's final return, and the group IQM with its 95% stratified-bootstrap interval."""
    finals = runs[runs["final_eval_return"].notna()]
    if scores.empty or finals.empty:
        return None
    apply_style()
    envs = list(dict.fromkeys(scores["env"]))
    fig, axes = _grid(len(envs), width=5.0, height=0.55 * scores.groupby("env").size().max() + 1.8)
    for ax, env in zip(axes, envs, strict=True):
        table = scores[scores["env"] == env].sort_values(GROUP)
        order = list(table[GROUP])
        sns.stripplot(
            data=finals[finals["env"] == env],
            y=GROUP,
            x="final_eval_return",
            order=order,
            ax=ax,
            color="0.55",
            size=5,
            alpha=0.7,
            jitter=0.15,
        )
        y = np.arange(len(order))
        low = (table["iqm"] - table["iqm_low"]).fillna(0).to_numpy()
        high = (table["iqm_high"] - table["iqm"]).fillna(0).to_numpy()
        ax.errorbar(
            table["iqm"], y, xerr=[low, high], fmt="D", color="C3", capsize=4, label="IQM, 95% CI"
        )
        ax.set_ylabel("")
        ax.set_xlabel("final eval return")
        ax.set_title(str(env), fontsize=11)
        ax.legend(fontsize=8, loc="best")
    return finish(
        fig,
        "Final scores: runs and interquartile mean",
        caption(runs, "grey: one run each; red: IQM with stratified-bootstrap 95% CI (rliable)"),
    )


def save(fig: Figure, path: Any) -> None:
    fig.savefig(path, dpi=110)
    plt.close(fig)
