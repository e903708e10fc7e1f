"""The report's figures (seaborn on matplotlib's Agg backend).

Every figure has a bold title saying what it shows and a caption line naming
env, budget, seeds and machine of the runs drawn (see
:func:`harness.report.data.caption`). A function returns ``None`` when its
data cannot support the figure; the report then says why in words.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from harness.report.anchors import Anchor, anchors_for, draw_anchors, training_fitness_anchors
from harness.report.anchors import caption_text as anchor_caption
from harness.report.data import GROUP, caption, eval_curves, eval_points
from harness.report.stats import (
    MIN_RUNS_INTERVAL,
    MIN_RUNS_IQM,
    curve_band,
    global_numpy_seed,
    group_stats,
)
from harness.report.tables import steps_text

#: What the common point on each x axis is called in a figure's legend and caption.
AXIS_CUT_NAMES = {"timesteps": "budget", "wall_time_s": "wall-clock", "cpu_seconds": "CPU-seconds"}
AXIS_LABELS = {
    "timesteps": "env timesteps (training)",
    "wall_time_s": "wall-clock seconds",
    "cpu_seconds": "CPU-seconds (the run's process tree)",
}
MAX_COLUMNS = 3
#: Characters per legend line; longer group labels wrap.
LEGEND_WRAP = 56
#: Characters per line of a group name under a bar.
TICK_WRAP = 28
#: Distinct hues for algorithms (colorblind's orange and vermillion are too alike).
PALETTE = "tab10"
#: Two more hues after tab10's ten, so that each shipped algorithm has its own.
EXTRA_HUES = ("#000000", "#ff9896")


def builtin_algorithm_colors() -> dict[str, Any]:
    """One colour per shipped algorithm (by sorted name), the same in every figure."""
    from algorithms.registry import algorithm_names, algorithm_source

    names = [n for n in algorithm_names() if algorithm_source(n).startswith("module algorithms.")]
    hues = [*sns.color_palette(PALETTE, 10), *EXTRA_HUES]
    return {name: hues[i % len(hues)] for i, name in enumerate(names)}


def group_colors(groups: list[str]) -> dict[str, Any]:
    """A colour per group: where every group is a shipped algorithm's name, that algorithm's
    own colour (so an algorithm looks the same across tasks and reports); else the palette
    in the groups' order."""
    fixed = builtin_algorithm_colors()
    if groups and all(group in fixed for group in groups):
        return {group: fixed[group] for group in groups}
    return dict(zip(groups, sns.color_palette(PALETTE, len(groups)), strict=True))


def shades(color: Any, n: int) -> list[Any]:
    """``n`` shades of one hue, darkest first and the hue itself last. Groups of one
    algorithm that share every other style (colour by algorithm, dash by k) stay apart."""
    if n <= 1:
        return [color]
    base = np.asarray(to_rgb(color))
    # From 55% darker up to the hue itself, never lighter: some algorithms' hues are light
    # already, and a paler shade of them vanishes on the white grid.
    return [tuple(base * (1 - t)) for t in np.linspace(0.55, 0.0, n)]


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


LINESTYLES = ["-", "--", ":", "-."]


def group_band(data: pd.DataFrame, x: str) -> tuple[str, pd.DataFrame] | None:
    """A group's aggregate curve and 95% band over runs, following the n rule.

    ``data`` holds the group's runs on one shared grid (see
    :func:`~harness.report.data.eval_curves`). With 4 or more runs the IQM, with 3
    the mean, each with a stratified-bootstrap band over runs from
    ``rliable.library.get_interval_estimates``; None with fewer runs or no shared grid.
    """
    wide = data.pivot_table(index=x, columns="run", values="eval_return_mean")
    band = curve_band(wide.to_numpy(dtype=float).T)
    if band is None:
        return None
    kind, points, intervals = band
    return kind, pd.DataFrame(
        {
            x: wide.index.to_numpy(float),
            "point": points,
            "low": intervals[0],
            "high": intervals[1],
        }
    )


def draw_group(
    ax: Any,
    data: pd.DataFrame,
    x: str,
    color: Any,
    label: str,
    linestyle: str = "-",
    use_rliable_plot: bool = False,
) -> None:
    """A group's IQM or mean curve with its band, or each run's curve when n < 3.

    ``use_rliable_plot`` draws the band with ``rliable.plot_utils.
    plot_sample_efficiency_curve`` (solid lines only); otherwise with matplotlib.
    """
    n = data["run"].nunique()
    result = group_band(data, x)
    if result is None:
        for i, (_, run) in enumerate(data.groupby("run", sort=True)):
            ax.plot(
                run[x],
                run["eval_return_mean"],
                color=color,
                linestyle=linestyle,
                linewidth=1.4,
                label=f"{label} (n={n}, each run)" if i == 0 else None,
            )
        return
    kind, band = result
    text = f"{label} ({kind}, n={n})"
    if use_rliable_plot and linestyle == "-":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from rliable import plot_utils

        plot_utils.plot_sample_efficiency_curve(
            band[x].to_numpy(),
            {text: band["point"].to_numpy()},
            {text: np.stack([band["low"].to_numpy(), band["high"].to_numpy()])},
            colors={text: color},
            ax=ax,
            marker="",
            linewidth=1.8,
            labelsize="medium",
            ticklabelsize="small",
            xlabel=ax.get_xlabel(),
            ylabel=ax.get_ylabel(),
            wrect=4,
            hrect=4,
        )
        return
    ax.fill_between(band[x], band["low"], band["high"], color=color, alpha=0.2, linewidth=0)
    ax.plot(band[x], band["point"], color=color, linestyle=linestyle, linewidth=1.8, label=text)


def _raw_runs(ax: Any, raw: pd.DataFrame, x: str, colors: dict[str, Any], key: str) -> None:
    """Every run's own evaluations, faint, including beyond the common budget."""
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
    if x in ("wall_time_s", "cpu_seconds") and (data[x] > 0).all() and ends.max() > 10 * ends.min():
        ax.set_xscale("log")
        ax.set_xlabel(AXIS_LABELS.get(x, x) + " (log scale)")


def legend_outside(ax: Any, anchor_handles: list[Any] | tuple[()] = ()) -> None:
    """The axes' curves, then ``anchor_handles`` (published figures, some drawn off the
    plot), in one legend right of the axes: inside, a long list of groups covers the
    curves it names. A group label lists every setting that tells it apart, so it can
    run to a hundred characters: wrapped, it widens the figure less and leaves the axes
    room."""
    own = [
        (handle, name)
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True)
        if handle not in anchor_handles
    ]
    labels = [*(name for _, name in own), *(h.get_label() for h in anchor_handles)]
    ax.legend(
        [*(handle for handle, _ in own), *anchor_handles],
        [textwrap.fill(label, LEGEND_WRAP, break_on_hyphens=False) for label in labels],
        fontsize=7.5,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )


def widen_for_legends(fig: Figure, axes: list[Any]) -> None:
    """Widen ``fig`` by each panel's outside legend (about 0.055 in per character at
    7.5 pt) and keep that much space before the next panel, so no legend covers a curve."""
    longest = max(
        (
            len(line)
            for a in axes
            for t in a.get_legend().get_texts()
            for line in t.get_text().splitlines()
        ),
        default=0,
    )
    legend_in = 0.06 * longest + 0.6
    cols = min(len(axes), MAX_COLUMNS)
    panel_in = fig.get_size_inches()[0] / cols
    fig.set_size_inches(cols * (panel_in + legend_in), fig.get_size_inches()[1])
    if len(axes) > 1:
        fig.subplots_adjust(wspace=(legend_in + 1.2) / panel_in)


#: On a clipped axis, a group with a run of fewer evaluations (the start included) up to the
#: cut is drawn faint only: an aggregate through two points would read as a learning curve.
#: (The scores at a common budget have a looser rule of their own: :data:`data.MAX_GAP_AT_CUT`.)
MIN_EVALUATIONS_CURVE = 3

#: A timesteps axis whose runs go past this multiple of the common budget is clipped ...
CLIP_PAST_CUT = 10.0
#: ... at this multiple: runs trained to a CPU limit can go on 28 times past an RL budget,
#: and a full axis leaves the comparison at that budget a sliver at its left edge (at 5
#: times, an ES at its own budget, the budget still has a fifth of the axis).
CLIP_AT = 1.25


def _fewest_evaluations(group_raw: pd.DataFrame, x: str, cut: float) -> int:
    """The fewest evaluations any run of ``group_raw`` logged up to ``cut``."""
    by_cut = group_raw[group_raw[x] <= cut * 1.001]
    counts = by_cut.groupby("run")[x].nunique()
    return int(counts.reindex(group_raw["run"].unique(), fill_value=0).min())


def _clip_past_cut(ax: Any, cut: float, x_max: float) -> float:
    """End ``ax``'s x axis at ``CLIP_AT`` times ``cut`` and name, on the axes, how far the
    runs go; return the new right edge."""
    right = CLIP_AT * cut
    ax.set_xlim(-0.02 * right, right)
    ax.annotate(
        f"runs go on to {steps_text(x_max, decimals=1)} \u2192 (clipped)",
        xy=(0.99, 0.02),
        xycoords="axes fraction",
        ha="right",
        va="bottom",
        fontsize=8,
        color="0.3",
    )
    return right


def eval_curve_figure(
    steps: pd.DataFrame,
    runs: pd.DataFrame,
    x: str,
    until: dict[str, float] | None = None,
    anchors: list[Anchor] | None = None,
) -> Figure | None:
    """Eval return against ``x`` per env and group: IQM (n >= 4) or mean (n = 3) with a 95%
    band (rliable), single runs below that; truncated at the common budget ``until`` (a
    vertical line), faint full runs behind; published anchors where the env has some. A
    timesteps axis whose runs go past ``CLIP_PAST_CUT`` times the budget ends at ``CLIP_AT``
    times it, says how far they go, and draws faint only a group whose runs evaluated there
    fewer than ``MIN_EVALUATIONS_CURVE`` times."""
    curves = eval_curves(steps, runs, x, until=until)
    if curves.empty:
        return None
    apply_style()
    envs = list(dict.fromkeys(curves["env"]))
    fig, axes = _grid(len(envs))
    raw = eval_points(steps, x).merge(runs[["run", "env", GROUP]], on="run")
    drawn: list[Anchor] = []
    clipped = False
    for ax, env in zip(axes, envs, strict=True):
        data = curves[curves["env"] == env]
        env_raw = raw[raw["env"] == env]
        # Every group of the env gets a colour and a legend entry, also one whose first
        # evaluation comes after the common budget: its faint runs must be nameable.
        order = sorted(set(data[GROUP]) | set(env_raw[GROUP]))
        colors = group_colors(order)
        _raw_runs(ax, env_raw, x, colors, GROUP)
        ax.set_xlabel(AXIS_LABELS.get(x, x))
        ax.set_ylabel("eval return (mean of episodes)")
        cut = (until or {}).get(str(env))
        x_max = float(env_raw[x].max()) if len(env_raw) else 0.0
        # the budget the axis is clipped near, where runs go far past it
        clip_at = cut if x == "timesteps" and cut and x_max > CLIP_PAST_CUT * cut else None
        for group in order:
            members = data[data[GROUP] == group]
            group_raw = env_raw[env_raw[GROUP] == group]
            evaluated = _fewest_evaluations(group_raw, x, clip_at) if clip_at else None
            # on a clipped axis, a run with two evaluations by the cut would draw a straight
            # line, not a learning curve: it evaluates at a spacing set for its own budget
            if members.empty or (evaluated is not None and evaluated < MIN_EVALUATIONS_CURVE):
                why = (
                    "no evaluation by the cut"
                    if members.empty
                    else f"a run has {evaluated} evaluation{'s' * (evaluated != 1)} by the cut"
                )
                ax.plot(
                    [],
                    [],
                    color=colors[group],
                    alpha=0.5,
                    linewidth=1.4,
                    label=f"{group} (n={group_raw['run'].nunique()}, faint only: {why})",
                )
                continue
            draw_group(ax, members, x, colors[group], group, use_rliable_plot=True)
        if x == "timesteps":
            _timestep_axis(ax)
        _log_wall_clock(ax, env_raw if len(env_raw) else data, x)
        if cut is not None and len(env_raw) and float(env_raw[x].max()) > cut * 1.001:
            ax.axvline(
                cut,
                color="0.3",
                linestyle="-.",
                linewidth=1.0,
                label=f"common {AXIS_CUT_NAMES.get(x, x)}",
            )
        if clip_at:
            x_max = _clip_past_cut(ax, clip_at, x_max)
            clipped = True
        handles: list[Any] = []
        if anchors:
            env_anchors = anchors_for(anchors, runs, str(env))
            handles = draw_anchors(ax, env_anchors, x_max)
            drawn += env_anchors
        ax.set_title(str(env), fontsize=11)
        legend_outside(ax, handles)
    widen_for_legends(fig, axes)
    what = {"timesteps": "timesteps", "cpu_seconds": "CPU-seconds"}.get(x, "wall-clock")
    note = (
        f"lines: IQM (n >= {MIN_RUNS_IQM}) or mean (n = {MIN_RUNS_INTERVAL}) over runs where all "
        f"have evaluated, band: 95% stratified-bootstrap interval (rliable); groups of fewer "
        f"than {MIN_RUNS_INTERVAL} runs: each run, no band; faint: each run in full"
    )
    if until:
        note += f"; curves end at the common {AXIS_CUT_NAMES.get(x, x)}"
    if clipped:
        note += (
            f"; where runs go past {CLIP_PAST_CUT:g}x the common budget, the axis ends at "
            f"{CLIP_AT:g}x it, says how far they go, and a group with a run of fewer than "
            f"{MIN_EVALUATIONS_CURVE} evaluations by the budget is faint only"
        )
    if drawn:
        note += "; " + anchor_caption(list(dict.fromkeys(drawn)))
    return finish(fig, f"Evaluation return against {what}", caption(runs, note))


#: Generations in the trailing window that smooths a training-fitness curve.
FITNESS_WINDOW = 5


def fitness_curve_figure(
    steps: pd.DataFrame,
    runs: pd.DataFrame,
    anchors: list[Anchor] | None = None,
    until: dict[str, float] | None = None,
) -> Figure | None:
    """Each run's training fitness (``fitness_mean`` of every step) against timesteps.

    The fitness is what the optimiser saw, on the training reward (shaped where the run's
    ``reward_transform`` says so): for an ES the mean return of a generation's perturbed
    candidates, for PPO/A2C the mean return of the training episodes that ended in a
    chunk. It shows where a run stands before its evaluations move (leaving a plateau, a
    shaped phase), and it is not an evaluation: a faint line per step, a bold trailing
    mean over ``FITNESS_WINDOW`` steps. Published figures of training fitness among
    ``anchors`` (GoodAI's) are drawn beside the curves. Where an env's runs go past
    ``CLIP_PAST_CUT`` times its common timesteps budget in ``until``, its axis ends at
    ``CLIP_AT`` times the budget and says how far they go, as the evaluation figure's does.
    None when no run logged a fitness.
    """
    needed = {"fitness_mean", "timesteps", "run"}
    if not needed <= set(steps.columns):
        return None
    rows = steps[steps["fitness_mean"].notna() & steps["timesteps"].notna()]
    rows = rows[["run", "timesteps", "fitness_mean"]].merge(
        runs[["run", "env", "seed", GROUP]], on="run"
    )
    if rows.empty:
        return None
    apply_style()
    envs = list(dict.fromkeys(rows["env"]))
    fig, axes = _grid(len(envs))
    drawn: list[Anchor] = []
    clipped = False
    for ax, env in zip(axes, envs, strict=True):
        data = rows[rows["env"] == env].sort_values(["seed", "run", "timesteps"])
        order = sorted(set(data[GROUP]))
        colors = group_colors(order)
        for group in order:
            members = data[data[GROUP] == group]
            n = members["run"].nunique()
            for i, (_, run) in enumerate(members.groupby(["seed", "run"], sort=True)):
                smooth = run["fitness_mean"].rolling(FITNESS_WINDOW, min_periods=1).mean()
                ax.plot(
                    run["timesteps"],
                    run["fitness_mean"],
                    color=colors[group],
                    alpha=0.2,
                    linewidth=0.7,
                )
                ax.plot(
                    run["timesteps"],
                    smooth,
                    color=colors[group],
                    linestyle=LINESTYLES[i % len(LINESTYLES)],
                    linewidth=1.5,
                    label=f"{group} (n={n}, each run)" if i == 0 else None,
                )
        ax.set_xlabel(AXIS_LABELS["timesteps"])
        ax.set_ylabel("training fitness (mean return)")
        _timestep_axis(ax)
        x_max = float(data["timesteps"].max())
        cut = (until or {}).get(str(env))
        if cut and x_max > CLIP_PAST_CUT * cut:
            ax.axvline(cut, color="0.3", linestyle="-.", linewidth=1.0, label="common budget")
            x_max = _clip_past_cut(ax, cut, x_max)
            clipped = True
        ax.set_title(str(env), fontsize=11)
        env_anchors = training_fitness_anchors(anchors, runs, str(env)) if anchors else []
        handles = draw_anchors(ax, env_anchors, x_max)
        drawn += env_anchors
        legend_outside(ax, handles)
    widen_for_legends(fig, axes)
    note = (
        "training return on the training reward (shaped where the group's reward_transform "
        "is set, the env's own otherwise): ES, the mean over a generation's candidates; "
        "PPO/A2C, the mean over the training episodes that ended in a chunk; bold: trailing "
        f"mean over {FITNESS_WINDOW} generations or chunks, faint: each one; a group's runs "
        "solid, dashed, dotted, dash-dot in seed order; not an evaluation"
    )
    if clipped:
        note += (
            f"; where runs go past {CLIP_PAST_CUT:g}x the common timesteps budget, the axis "
            f"ends at {CLIP_AT:g}x it and says how far they go"
        )
    if drawn:
        note += "; " + anchor_caption(list(dict.fromkeys(drawn)))
    return finish(fig, "Training fitness against timesteps", caption(runs, note))


def _stat_errorbar(ax: Any, x: float, scores: np.ndarray, color: Any, label: str | None) -> None:
    """The n rule on one axis: IQM with interval (n >= 4), mean with interval (n = 3),
    nothing for fewer runs (their points are drawn by the caller)."""
    stats = group_stats(scores)
    if not stats.has_interval:
        return
    point, low, high, marker = (
        (stats.iqm, stats.iqm_low, stats.iqm_high, "D")
        if stats.n >= MIN_RUNS_IQM
        else (stats.mean, stats.mean_low, stats.mean_high, "o")
    )
    ax.errorbar(
        [x],
        [point],
        yerr=[[point - low], [high - point]],
        fmt=marker,
        color=color,
        capsize=4,
        markersize=7,
        markeredgecolor="black",
        label=label,
    )


def episodes_figure(
    steps: pd.DataFrame, runs: pd.DataFrame, score: str = "final_eval_return"
) -> Figure | None:
    """Episodes per fitness compared: each group's curve (colour: algorithm, shaded where
    an algorithm has several groups at one k; line: k), and each group's score against k.
    Groups are the report's own, so runs of different configurations (workers, policy,
    ...) are never pooled."""
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
    curves = eval_curves(steps, subset, "timesteps")
    fig, axes = plt.subplots(len(envs), 2, figsize=(12.5, 4.2 * len(envs) + 1.0), squeeze=False)
    algos = sorted(subset["algo"].unique())
    colors = group_colors(algos)
    ks = sorted(subset["k"].unique())
    styles = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(ks)}
    group_algo = dict(zip(subset[GROUP], subset["algo"], strict=False))
    group_k = dict(zip(subset[GROUP], subset["k"], strict=False))
    # Groups of one algorithm at one k (a shipped and a tuned setting, say) would share
    # colour and dash; each gets its own shade of the algorithm's hue.
    group_color: dict[str, Any] = {}
    for (algo, _k), members in subset.groupby(["algo", "k"], sort=True)[GROUP]:
        names = sorted(members.unique())
        group_color.update(zip(names, shades(colors[algo], len(names)), strict=True))
    several = {algo for algo, members in subset.groupby("algo")[GROUP] if members.nunique() > 1}
    for row, env in enumerate(envs):
        left, right = axes[row]
        data = curves[curves["env"] == env]
        for group, frame in data.groupby(GROUP, sort=True):
            draw_group(
                left, frame, "timesteps", group_color[group], str(group), styles[group_k[group]]
            )
        left.set_xlabel(AXIS_LABELS["timesteps"])
        _timestep_axis(left)
        left.set_ylabel("eval return")
        left.set_title(f"{env}: learning curves", fontsize=11)
        left.legend(fontsize=8, loc="best")
        finals = subset[(subset["env"] == env) & subset[score].notna()]
        groups = sorted(finals[GROUP].unique())
        positions = {k: i for i, k in enumerate(ks)}
        width = 0.3
        per_k = {k: [g for g in groups if group_k[g] == k] for k in ks}
        labelled: set[str] = set()
        for k, members in per_k.items():
            if not members:  # this k's runs have no score here (none reached the budget)
                continue
            offsets = np.linspace(-width, width, len(members)) if len(members) > 1 else [0.0]
            for offset, group in zip(offsets, members, strict=True):
                algo = group_algo[group]
                # An algorithm with one group is named once; one with several, per group.
                name = str(group) if algo in several else algo
                values = finals.loc[finals[GROUP] == group, score].to_numpy(float)
                x = positions[k] + offset
                right.scatter(
                    np.full(values.size, x),
                    values,
                    color=group_color[group],
                    alpha=0.45,
                    s=18,
                    label=None if name in labelled else name,
                )
                labelled.add(name)
                _stat_errorbar(right, x, values, group_color[group], None)
        right.set_xticks(range(len(ks)), [str(k) for k in ks])
        right.set_xlim(-0.6, len(ks) - 0.4)
        right.set_xlabel("episodes per fitness evaluation (k)")
        right.set_ylabel(
            "eval return at the common budget"
            if score != "final_eval_return"
            else "final eval return"
        )
        right.set_title(f"{env}: return by k (equal timesteps)", fontsize=11)
        right.legend(fontsize=8, loc="best")
    note = (
        "k episodes per fitness cost k times the timesteps per generation; right: one point "
        "per run, side by side per group; " + _RULE_NOTE
    )
    return finish(fig, "Episodes per fitness evaluation compared", caption(subset, note))


_RULE_NOTE = (
    f"bands and bars: 95% stratified-bootstrap intervals (rliable) of the IQM (n >= "
    f"{MIN_RUNS_IQM}) or mean (n = {MIN_RUNS_INTERVAL}); fewer runs: points only"
)


def bytes_figure(long: pd.DataFrame, runs: pd.DataFrame) -> Figure | None:
    """Mean bytes moved per generation, head to workers and back, per algorithm."""
    if long.empty or not (long["bytes"] > 0).any():
        return None
    apply_style()
    envs = list(dict.fromkeys(long["env"]))
    # Group names label the bars; a long one wraps, and the panels grow to hold it.
    wrapped = {g: textwrap.fill(str(g), TICK_WRAP) for g in long[GROUP].unique()}
    lines = max(text.count("\n") + 1 for text in wrapped.values())
    most = int(long.groupby("env")[GROUP].nunique().max())
    width = 5.6 if lines == 1 else max(5.6, 0.075 * TICK_WRAP * most + 1.0)
    fig, axes = _grid(len(envs), width=width, height=3.9 + 0.15 * (lines - 1))
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
        ax.set_xticks(ax.get_xticks(), [wrapped[t.get_text()] for t in ax.get_xticklabels()])
        ax.tick_params(axis="x", rotation=20 if lines == 1 else 0)
        legend = ax.get_legend()
        if legend is not None:
            legend.set_title(None)
    return finish(
        fig, "Bytes over the wire per generation", caption(runs, "mean over generations and runs")
    )


def final_score_figure(runs: pd.DataFrame, score: str, what: str) -> Figure | None:
    """Each run's score, and per group the IQM (n >= 4) or mean (n = 3) with its 95% interval."""
    finals = runs[runs[score].notna()]
    if finals.empty:
        return None
    apply_style()
    envs = list(dict.fromkeys(finals["env"]))
    most = int(finals.groupby("env")[GROUP].nunique().max())
    # Group names label the rows; a long one wraps, and the figure makes room for it.
    wrapped = {g: textwrap.fill(str(g), LEGEND_WRAP) for g in finals[GROUP].unique()}
    lines = max(text.count("\n") + 1 for text in wrapped.values())
    longest = max(len(line) for text in wrapped.values() for line in text.splitlines())
    fig, axes = _grid(len(envs), width=5.4, height=(0.3 + 0.2 * lines) * most + 1.8)
    cols = min(len(envs), MAX_COLUMNS)
    fig.set_size_inches(fig.get_figwidth() + cols * 0.065 * longest, fig.get_figheight())
    for ax, env in zip(axes, envs, strict=True):
        data = finals[finals["env"] == env]
        order = sorted(data[GROUP].unique())
        with global_numpy_seed(0):  # seaborn jitters the points with numpy's global RNG
            sns.stripplot(
                data=data,
                y=GROUP,
                x=score,
                order=order,
                ax=ax,
                color="0.55",
                size=5,
                alpha=0.75,
                jitter=0.15,
            )
        labelled: set[str] = set()
        for i, group in enumerate(order):
            values = data.loc[data[GROUP] == group, score].to_numpy(float)
            stats = group_stats(values)
            if not stats.has_interval:
                ax.text(
                    ax.get_xlim()[1],
                    i,
                    f" n={stats.n}: too small",
                    va="center",
                    ha="left",
                    fontsize=7.5,
                    color="0.35",
                    clip_on=False,
                )
                continue
            iqm = stats.n >= MIN_RUNS_IQM
            point, low, high = (
                (stats.iqm, stats.iqm_low, stats.iqm_high)
                if iqm
                else (stats.mean, stats.mean_low, stats.mean_high)
            )
            name = "IQM, 95% CI" if iqm else "mean, 95% CI (n=3)"
            ax.errorbar(
                [point],
                [i],
                xerr=[[point - low], [high - point]],
                fmt="D" if iqm else "o",
                color="C3" if iqm else "C0",
                capsize=4,
                label=None if name in labelled else name,
            )
            labelled.add(name)
        ax.set_yticks(range(len(order)), [wrapped[g] for g in order], fontsize=8)
        ax.set_ylabel("")
        ax.set_xlabel(what)
        ax.set_title(str(env), fontsize=11)
        if labelled:
            ax.legend(fontsize=8, loc="best")
    return finish(
        fig,
        f"Scores: {what}",
        caption(runs, "grey: one run each; " + _RULE_NOTE),
    )


def hyperparameter_figure(
    points: pd.DataFrame, name: str, what: str, runs: pd.DataFrame
) -> Figure | None:
    """Score against one hyperparameter's value: per env a panel, per algorithm a line
    through the mean at each value, and each run as a point (a grid's shape, not only its
    best cell, is what tells a reader whether the range was wide enough).

    ``points``: one row per run with ``env``, ``algo``, ``value`` (the hyperparameter)
    and ``score``. The x axis is logarithmic where every value is positive and they span
    a factor of 4 or more (grids of step sizes are geometric)."""
    points = points[np.isfinite(points["score"].to_numpy(float))]
    if points.empty or points["value"].nunique() < 2:
        return None
    apply_style()
    envs = list(dict.fromkeys(points["env"]))
    fig, axes = _grid(len(envs), width=5.4, height=3.9)
    colors = group_colors(sorted(points["algo"].astype(str).unique()))
    values = points["value"].to_numpy(float)
    log_x = bool((values > 0).all() and values.max() / values.min() >= 4)
    for ax, env in zip(axes, envs, strict=True):
        data = points[points["env"] == env]
        for algo, frame in data.groupby("algo", sort=True):
            color = colors[str(algo)]
            means = frame.groupby("value")["score"].mean().sort_index()
            ax.plot(means.index, means.to_numpy(), "-o", color=color, label=f"{algo} (mean)")
            ax.scatter(
                frame["value"], frame["score"], color=color, alpha=0.6, s=30, edgecolor="white"
            )
        if log_x:
            ax.set_xscale("log")
        ticks = sorted(data["value"].unique())
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.minorticks_off()
        ax.set_xlabel(name)
        ax.set_ylabel(what)
        ax.set_title(str(env), fontsize=11)
        ax.legend(fontsize=8, loc="best")
    note = "lines: mean per value; points: one run each"
    return finish(fig, f"Score against {name}", caption(runs, note))


def performance_profile_figure(
    scores: dict[str, np.ndarray], taus: np.ndarray, with_intervals: bool, note: str
) -> Figure | None:
    """rliable performance profiles: fraction of runs (over envs) above each normalised score."""
    if not scores:
        return None
    apply_style()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from rliable import library, plot_utils

        profiles, intervals = library.create_performance_profile(
            scores, taus, reps=1000 if with_intervals else 1
        )
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    colors = dict(zip(scores, sns.color_palette(PALETTE, len(scores)), strict=True))
    plot_utils.plot_performance_profiles(
        profiles,
        taus,
        performance_profile_cis=intervals if with_intervals else None,
        colors=colors,
        ax=ax,
        xlabel="normalised score τ (0: worst run of the env, 1: solved threshold or best run)",
        ylabel="fraction of runs with score > τ",
        labelsize="medium",
        ticklabelsize="small",
        wrect=4,
        hrect=4,
    )
    ax.legend(fontsize=8, loc="best")
    return finish(fig, "Performance profiles across envs", note)


def save(fig: Figure, path: Any) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
