"""The benchmark's report: per-task reports, the cross-task aggregate and ``BENCHMARK.md``.

Everything here is drawn from run archives (:func:`harness.rundir.write_run_archive`):
one per task, ``reports/benchmark/<task>/runs.tar.xz``, refreshed from a runs
directory when one is given, so the whole page can be redrawn by the current
code from committed files alone.

Scores (per run):

* **at equal timesteps**: the evaluation return interpolated at the task's common
  budget, the largest number of timesteps every run of the task reached;
* **at equal CPU-seconds**: the same at the largest CPU-seconds every run of the
  task reached (each run records the CPU-seconds of its whole process tree);
* **normalised**: ``(score - random) / (reference - random)``, 0 for uniformly random
  actions (measured on the benchmark's seeds) and 1 at the task's reference score.

The aggregate follows Agarwal et al. 2021 ("Deep Reinforcement Learning at the
Edge of the Statistical Precipice", rliable): the IQM of normalised scores over
runs and tasks with stratified-bootstrap 95% intervals, performance profiles, and
the probability of improvement of each ES algorithm over each RL algorithm.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from algorithms.registry import family_of
from harness import rundir
from harness.benchmark.carry import (
    ARCHIVE,
    archived_runs,
    task_slug,
    unfinished_runs,
    write_unfinished,
)
from harness.benchmark.fairness import TaskScores
from harness.benchmark.spec import (
    AGGREGATE_REPS,
    RANDOM_SCORES,
    Benchmark,
    Task,
    measured_random_scores,
)
from harness.report import data as d
from harness.report import stats
from harness.report.tables import fmt, interval, markdown_table, steps_text
from harness.sweep.identity import cell_identity, same_cell

#: The x axes scores are compared at: timesteps, and CPU-seconds of the run's processes.
AXES = {"timesteps": "timesteps", "cpu_seconds": "CPU-seconds"}
BOOTSTRAP_SEED = 0


# -- archives ------------------------------------------------------------------------------------


def refresh_archives(bench: Benchmark, runs_dir: Path | None, out: Path) -> dict[str, list[str]]:
    """Write each task's archive: its completed cells from ``runs_dir``, else those archived.

    A cell completed in ``runs_dir`` (its newest run there) replaces its archived copy; a
    cell archived earlier (another machine, another session) and absent from ``runs_dir``
    is kept.
    An archived run whose cell's settings changed since it ran stays too, after the
    cells, while its cell (algorithm, seed, budget kind) is missing: the page shows it
    labelled until the cell runs again, and no archived record is lost before then.
    Archived runs are renumbered 1, 2, ... in cell order so that labels do not clash.
    Returns the labels of the cells still missing, per task.
    """
    from harness.sweep.store import completed_runs

    # newest first: a cell run again (a pair's lead beside a new follower) is its newest run
    fresh = completed_runs(runs_dir)[::-1] if runs_dir is not None else []
    missing: dict[str, list[str]] = {}
    for task_index, task in enumerate(bench.tasks):
        archive = out / task_slug(task.env) / ARCHIVE
        archived = archived_runs(archive)
        chosen: list[rundir.RunHeader] = []
        waiting: set[tuple[str, int, bool]] = set()
        for cell in bench.sweep.cells:
            if bench._task_index[cell.index] != task_index:
                continue
            identity = cell_identity(cell.config)
            found = next(
                (
                    h
                    for source in (fresh, archived)
                    for h in source
                    if h.status == "COMPLETED" and same_cell(identity, cell_identity(h.config))
                ),
                None,
            )
            if found is None:
                missing.setdefault(task.env, []).append(cell.label)
                waiting.add(_cell_key(cell.config))
            else:
                chosen.append(found)
        chosen += [
            h
            for h in archived
            if h.status == "COMPLETED"
            and _cell_key(h.config) in waiting
            and not any(_same_run(h, c) for c in chosen)
        ]
        if runs_dir is None or not chosen:
            continue
        if [h.path for h in chosen] == [h.path for h in archived if h.status == "COMPLETED"]:
            continue  # the same runs in the same order: the same bytes (xz of ~100 MB: minutes)
        with tempfile.TemporaryDirectory(prefix="harness-benchmark-") as staging:
            numbered = []
            for number, header in enumerate(chosen, start=1):
                target = Path(staging) / str(number)
                shutil.copytree(header.path, target, ignore=_not_archived)
                numbered.append(target)
            rundir.write_run_archive(numbered, archive)
    return missing


def _cell_key(config: dict[str, Any]) -> tuple[str, int, bool]:
    """What a stale run stands in for: its algorithm, seed and whether it is an
    equal-compute cell (``cpu_limit``, or one side of a pair)."""
    equal = bool(config.get("cpu_limit") or config.get("paired_with"))
    return (str(config.get("algo")), int(config.get("seed") or 0), equal)


def _same_run(a: rundir.RunHeader, b: rundir.RunHeader) -> bool:
    """Whether two records are one run: a copy archived earlier, and the run itself
    (chosen for another cell, from the runs directory)."""
    return a.config == b.config and a.run.get("start_time") == b.run.get("start_time")


def _not_archived(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name not in rundir.ARCHIVED_FILES]


# -- scores --------------------------------------------------------------------------------------


def _first_crossing(frame: pd.DataFrame, x: str, threshold: float) -> float:
    crossed = frame[frame["eval_return_mean"] >= threshold]
    return float(crossed[x].iloc[0]) if len(crossed) else math.nan


def task_scores(task: Task, archive: Path, random_score: float) -> TaskScores | None:
    """Scores of every completed run of ``task`` in its archive (None when it has none)."""
    import warnings

    from harness.records import load_runs

    if not archive.is_file():
        return None
    from harness.benchmark.fairness import equal_compute_mask, robust_scores

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = load_runs([archive]).select(("COMPLETED",))
    # The task's equal-compute runs (trained to a CPU limit) are not cells of its grid.
    grid = table.runs[~equal_compute_mask(table.runs)]
    if len(grid) == 0:
        return None
    runs = grid.reset_index(drop=True)
    steps = d.carry_cpu_seconds(table.steps[table.steps["run"].isin(set(runs["run"]))])
    frame = pd.DataFrame(
        {
            "run": runs["run"],
            "algo": runs["algo"].astype(str),
            "seed": runs["seed"].astype(int),
            "family": [family_of(a) or "es" for a in runs["algo"]],
            "cpu_seconds_total": steps.groupby("run")["cpu_seconds"]
            .max()
            .reindex(runs["run"])
            .to_numpy(),
            "workers_most": np.fmax(
                pd.to_numeric(runs["workers"], errors="coerce"),
                pd.to_numeric(runs.get("workers_resumed_max", math.nan), errors="coerce"),
            ).to_numpy(),
            "started_on": [
                f"a {count:.0f}-CPU {cpu}" if count == count else str(cpu)
                for cpu, count in zip(runs["host_cpu"], runs["host_cpu_count"], strict=True)
            ],
        }
    )
    at: dict[str, float] = {}
    for axis in AXES:
        common = d.common_budget(steps, runs, axis)
        at[axis] = common.get(str(runs["env"].iloc[0]), math.nan)
        frame[f"score_{axis}"] = d.scores_at(steps, runs, axis, common).to_numpy()
        evals = d.eval_points(steps, axis).sort_values(["run", axis])
        crossings = {
            run: _first_crossing(group, axis, task.reference_score)
            for run, group in evals.groupby("run", sort=False)
        }
        frame[f"to_threshold_{axis}"] = [crossings.get(run, math.nan) for run in frame["run"]]
    final = d.eval_points(steps, "timesteps").sort_values(["run", "timesteps"])
    last = final.groupby("run")["eval_return_mean"].last()
    frame["score_final"] = [float(last.get(run, math.nan)) for run in frame["run"]]
    frame["gym_id"] = runs["gym_id"].to_numpy() if "gym_id" in runs else None
    scores = TaskScores(task, frame, at, random_score, table)
    robust_scores(scores)  # endpoints: the mean of the last evaluations up to the point
    return scores


# -- tables --------------------------------------------------------------------------------------


def _mean_ci(values: np.ndarray) -> tuple[str, stats.GroupStats]:
    group = stats.group_stats(values, seed=BOOTSTRAP_SEED)
    if group.n == 0:
        return "—", group
    text = fmt(group.mean)
    if group.n >= stats.MIN_RUNS_INTERVAL:
        text += " " + interval(group.mean_low, group.mean_high)
    return text, group


def leader_text(scores: TaskScores, axis: str, gated: dict[str, str] | None = None) -> str:
    """Who leads on ``axis`` at the common point; "inconclusive" where the 95% interval of
    the difference of the two best means spans 0.

    ``axis`` is one of :data:`AXES`, or ``final``: each run's last evaluations, at its own
    budget. ``gated``: algorithms that fail a sanity gate (too few runs, far below their
    published anchor: :class:`harness.benchmark.fairness.Gate`) and the gate's text; they
    are not ranked, and the text says why.
    """
    gated = gated or {}
    groups = []
    for algo, frame in scores.runs.groupby("algo", sort=True):
        if str(algo) in gated:
            continue
        values = frame[f"score_{axis}"].to_numpy(float)
        _, group = _mean_ci(values)
        if group.n:
            groups.append((group.mean, str(algo), group, values))
    ran = set(scores.runs["algo"])
    unscored = sorted(ran - {name for _, name, _, _ in groups} - set(gated))
    not_run = sorted(set(scores.task.algos) - ran)
    notes = (
        ([f"{', '.join(unscored)}: no evaluation near it"] if unscored else [])
        + [f"not ranked: {gated[algo]}" for algo in sorted(gated) if algo in ran]
        + ([f"{', '.join(not_run)}: no completed run yet"] if not_run else [])
    )
    absent = f" ({'; '.join(notes)})" if notes else ""
    if len(groups) < 2:
        return "—" + absent
    groups.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
    (_, best, first, x), (_, second_name, second, y) = groups[0], groups[1]
    described = f"**{best}** {fmt(first.mean)} (n={first.n}) over {second_name} {fmt(second.mean)}"
    if first.n < stats.MIN_RUNS_INTERVAL or second.n < stats.MIN_RUNS_INTERVAL:
        return f"inconclusive (n < {stats.MIN_RUNS_INTERVAL}): {described}{absent}"
    d = stats.difference(x, y, seed=BOOTSTRAP_SEED)
    text = f"difference {fmt(d.value)} {interval(d.low, d.high)}"
    if d.sign <= 0:
        return f"inconclusive: {described}; {text} spans 0{absent}"
    return f"{described}; {text}{absent}"


def _median_reached(values: np.ndarray) -> str:
    reached = values[np.isfinite(values)]
    if not len(reached):
        return f"0/{len(values)}"
    return f"{len(reached)}/{len(values)}, median {fmt(float(np.median(reached)), 0)}"


def task_table(scores: TaskScores) -> pd.DataFrame:
    """One row per algorithm: n, scores at both common points, final score, threshold times."""
    rows = []
    for algo in scores.task.algos:
        frame = scores.runs[scores.runs["algo"] == algo]
        if frame.empty:
            rows.append({"algorithm": algo, "n": 0})
            continue
        rows.append(
            {
                "algorithm": algo,
                "family": "ES" if frame["family"].iloc[0] == "es" else "RL",
                "n": len(frame),
                "seeds": ", ".join(str(s) for s in sorted(frame["seed"])),
                "at equal timesteps": _mean_ci(frame["score_timesteps"].to_numpy(float))[0],
                "at equal CPU-s": _mean_ci(frame["score_cpu_seconds"].to_numpy(float))[0],
                "final": _mean_ci(frame["score_final"].to_numpy(float))[0],
                "timesteps to reference": _median_reached(
                    frame["to_threshold_timesteps"].to_numpy(float)
                ),
                "CPU-s to reference": _median_reached(
                    frame["to_threshold_cpu_seconds"].to_numpy(float)
                ),
                "CPU-s per run": fmt(float(frame["cpu_seconds_total"].mean()), 0),
            }
        )
    return pd.DataFrame(rows).fillna("—")


def threshold_table(bench: Benchmark, all_scores: Sequence[TaskScores]) -> pd.DataFrame:
    """Per algorithm (rows) and task (columns): how many runs reached the task's reference
    score, and the median timesteps and CPU-seconds at their first evaluation above it.

    "·" where the algorithm is not planned on the task, "—" where it has no completed run.
    """
    by_env = {scores.task.env: scores for scores in all_scores}
    algos = list(dict.fromkeys(a for task in bench.tasks for a in task.algos))
    rows = []
    for algo in algos:
        row = {"algorithm": algo}
        for task in bench.tasks:
            scores = by_env.get(task.env)
            runs = scores.runs[scores.runs["algo"] == algo] if scores is not None else None
            if algo not in task.algos:
                row[task.env] = "·"
            elif runs is None or runs.empty:
                row[task.env] = "—"
            else:
                steps = runs["to_threshold_timesteps"].to_numpy(float)
                cpu = runs["to_threshold_cpu_seconds"].to_numpy(float)
                reached = np.isfinite(steps)
                text = f"{int(reached.sum())}/{len(steps)}"
                if reached.any():
                    text += f": {steps_text(float(np.median(steps[reached])))} steps"
                if np.isfinite(cpu).any():
                    text += f", {fmt(float(np.median(cpu[np.isfinite(cpu)])), 0)} CPU-s"
                row[task.env] = text
        rows.append(row)
    return pd.DataFrame(rows)


def budget_words(task: Task, timesteps: dict[str, float]) -> str:
    """The task's budget, with the algorithms that train to another number of timesteps."""
    words = d.budget_phrase(task.budget.get)
    others: dict[float, list[str]] = {}
    for algo in task.algos:
        own = timesteps.get(algo)
        if own is not None and own != task.budget.get("timesteps"):
            others.setdefault(own, []).append(algo)
    if not others:
        return words
    exceptions = "; ".join(
        f"{', '.join(algos)}: {d.fmt_number(steps)}"
        for steps, algos in sorted(others.items(), reverse=True)
    )
    return f"{words} ({exceptions})"


def own_budget_text(scores: TaskScores, timesteps: dict[str, float]) -> str | None:
    """Who leads at each algorithm's own budget, for a task whose algorithms' budgets differ.

    Its equal-timesteps point is then the smallest budget, so the larger budgets show only
    here. None where every algorithm of the task trains to the same number of timesteps, or
    where only one algorithm has completed runs.
    """
    if len({timesteps.get(algo) for algo in scores.task.algos}) < 2:
        return None
    if scores.runs["algo"].nunique() < 2:
        return None  # one algorithm so far: nothing to compare, the budget column says it
    return (
        f"{scores.task.env} trains its algorithms to different budgets, "
        f"{budget_words(scores.task, timesteps)}; its equal-timesteps column compares them at "
        f"{steps_text(scores.at['timesteps'])} timesteps. At each algorithm's own budget "
        f"(its last evaluation): {leader_text(scores, 'final')}."
    )


def compute_span_text(all_scores: Sequence[TaskScores]) -> str:
    """How far the equal-CPU point lies below what the costliest algorithm spends."""
    spans = []
    for scores in all_scores:
        per_algo = scores.runs.groupby("algo")["cpu_seconds_total"].mean().dropna()
        if len(per_algo) < 2:
            continue  # nothing is compared on a task with one algorithm so far
        costliest = str(per_algo.idxmax())
        spans.append(
            f"{scores.task.env} {fmt(scores.at['cpu_seconds'], 0)} "
            f"({costliest}: {fmt(float(per_algo.max()), 0)} per run)"
        )
    return (
        "Equal CPU at the cheapest run's budget is a point of small compute: a task's common "
        "CPU-seconds is the least any of its runs spent on the whole budget, against the mean "
        "of its costliest algorithm: " + "; ".join(spans) + ". An algorithm that is cheap per "
        "timestep would train for many more timesteps on the CPU-seconds of an expensive one; "
        "the equal-compute column gives it that budget (`harness run --cpu-limit SEC`: the "
        "`equal_compute` cells of experiments/benchmark.yaml), so the equal-CPU column ranks "
        "algorithms early in training."
    )


def cpu_spread_text(all_scores: Sequence[TaskScores]) -> str | None:
    """Per task, the widest spread of CPU-seconds per run within one algorithm.

    Runs of one algorithm on one task do nearly the same work per timestep, so a wide
    spread says the CPU-seconds also measure the machines (cells run in several sessions,
    on machines whose speed differs).
    """
    parts = []
    for scores in all_scores:
        totals = scores.runs.dropna(subset=["cpu_seconds_total"])
        widest: tuple[float, str] | None = None
        for algo, group in totals.groupby("algo", sort=True):
            if len(group) >= 2 and group["cpu_seconds_total"].min() > 0:
                ratio = float(group["cpu_seconds_total"].max() / group["cpu_seconds_total"].min())
                if widest is None or ratio > widest[0]:
                    widest = (ratio, str(algo))
        if widest is not None:
            parts.append(f"{scores.task.env} {widest[0]:.1f}x ({widest[1]})")
    if not parts:
        return None
    return (
        "CPU-seconds per run differ between seeds of one algorithm by up to: "
        + "; ".join(parts)
        + ". Seeds differ in work (episode lengths, resets), and the cells ran in several "
        "sessions on machines whose per-core speed differs (AntBulletEnv-v0: "
        "docs/benchmark.md), so CPU-seconds compare to within that spread."
    )


def more_workers_text(all_scores: Sequence[TaskScores], workers: int) -> str | None:
    """The runs that a resume gave more workers than the benchmark's (a long cell moved to a
    larger machine for part of its budget: docs/benchmark.md), named with where they started."""
    groups: dict[tuple[str, str, int, str], list[int]] = {}
    for scores in all_scores:
        if "workers_most" not in scores.runs:
            continue
        moved = scores.runs[scores.runs["workers_most"] > workers]
        for row in moved.itertuples():
            key = (scores.task.env, str(row.algo), int(row.workers_most), str(row.started_on))
            groups.setdefault(key, []).append(int(row.seed))
    if not groups:
        return None
    parts = [
        f"{algo} on {env} seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, sorted(seeds)))} (up to {most} workers; started on {where})"
        for (env, algo, most, where), seeds in sorted(groups.items())
    ]
    return (
        f"Not on {workers} core throughout: " + "; ".join(parts) + ". These ran part of their "
        "budget with more workers on a larger machine and the rest here; no result of the ES "
        "family depends on the worker count, and their CPU-seconds add both machines' process "
        "trees."
    )


# -- aggregate -----------------------------------------------------------------------------------


@dataclass
class Aggregate:
    """The (runs x tasks) normalised-score matrix of each algorithm in the aggregate."""

    matrix: dict[str, np.ndarray]
    envs: list[str]
    #: algorithm -> why it is not in the aggregate (run on only some of its tasks)
    left_out: dict[str, str]


def aggregate_matrix(all_scores: Sequence[TaskScores], axis: str) -> Aggregate:
    """Normalised scores over the tasks whose cross-task algorithms have scores on the same seeds.

    rliable needs a complete matrix: one run count per algorithm and every algorithm on every
    task. So the aggregate takes the complete tasks, the algorithms run on all of them, and the
    seeds they share; an algorithm run on only some of those tasks, or not run yet, is left
    out and named. A task is complete when each of its started algorithms that is also
    planned on another task is scored on at least ``MIN_RUNS_INTERVAL`` common seeds: an
    algorithm planned on one task only (a recurrent baseline for the partially observed task)
    can never enter a cross-task aggregate, so its missing runs do not keep the task's others
    out.
    """
    planned_on = Counter(a for scores in all_scores for a in scores.task.algos)
    started = {a for scores in all_scores for a in scores.runs["algo"]}
    cross_task = {
        a for a, tasks in planned_on.items() if (tasks > 1 or len(all_scores) == 1) and a in started
    }
    usable: list[TaskScores] = []
    shared_seeds: list[set[int]] = []
    for scores in all_scores:
        scored = scores.runs[np.isfinite(scores.runs[f"score_{axis}"].to_numpy(float))]
        gating = [a for a in scores.task.algos if a in cross_task]
        seed_sets = [set(scored.loc[scored["algo"] == a, "seed"]) for a in gating]
        shared = set.intersection(*seed_sets) if seed_sets else set()
        if len(shared) >= stats.MIN_RUNS_INTERVAL:
            usable.append(scores)
            shared_seeds.append(shared)
    common_seeds = set.intersection(*shared_seeds) if shared_seeds else set()
    if len(common_seeds) < stats.MIN_RUNS_INTERVAL:
        return Aggregate({}, [], {})
    envs = [s.task.env for s in usable]
    algos = [
        a
        for a in usable[0].task.algos
        if a in cross_task and all(a in s.task.algos for s in usable)
    ]
    left_out = {
        a: (
            "run on " + ", ".join(s.task.env for s in usable if a in s.task.algos) + " only"
            if a in started
            else "not run yet"
        )
        for a in dict.fromkeys(a for s in usable for a in s.task.algos)
        if a not in algos
    }
    seeds = sorted(common_seeds)
    matrix: dict[str, np.ndarray] = {}
    for algo in algos:
        columns = []
        for scores in usable:
            frame = scores.runs[scores.runs["algo"] == algo].set_index("seed")
            raw = frame.loc[seeds, f"score_{axis}"].to_numpy(float)
            columns.append(scores.normalise(raw))
        matrix[algo] = np.stack(columns, axis=1)
    return Aggregate(matrix, envs, left_out)


def aggregate_figures(
    matrix: dict[str, np.ndarray], out: Path, suffix: str, reps: int = AGGREGATE_REPS
) -> tuple[pd.DataFrame, list[str]]:
    """IQM and mean with intervals (a figure and a table) and performance profiles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.report.plots import group_colors, save

    library, metrics = stats.quiet_rliable()
    from rliable import plot_utils

    def aggregates(scores: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])

    with stats.seeded_bootstrap(BOOTSTRAP_SEED):
        points, intervals = library.get_interval_estimates(
            matrix,
            aggregates,
            reps=reps,
            random_state=np.random.RandomState(BOOTSTRAP_SEED),
        )
    algos = sorted(matrix, key=lambda a: points[a][0])
    # One colour per algorithm in both figures (rliable would colour each by its own order).
    colors = group_colors(list(matrix))
    fig, axes = plot_utils.plot_interval_estimates(
        points,
        intervals,
        metric_names=["IQM", "Mean"],
        algorithms=algos,
        colors=colors,
        xlabel="",
        row_height=0.6,
    )
    # Each panel labels its own axis: rliable's one figure-level label sits at a fixed
    # height that lands on the ticks or far below them, depending on the number of rows.
    for ax in np.ravel(axes):
        ax.set_xlabel("Normalised score", fontsize="xx-large")
    fig.subplots_adjust(wspace=0.3)  # the panels' end ticks would touch
    interval_png = f"aggregate_{suffix}.png"
    save(fig, out / interval_png)
    plt.close(fig)

    taus = np.linspace(-0.5, 1.5, 81)
    with stats.seeded_bootstrap(BOOTSTRAP_SEED):
        profiles, profile_cis = library.create_performance_profile(
            matrix, taus, reps=max(reps // 10, 1)
        )
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_utils.plot_performance_profiles(
        profiles,
        taus,
        performance_profile_cis=profile_cis,
        colors=colors,
        ax=ax,
        xlabel=r"Normalised score $\tau$",
        ylabel=r"Fraction of runs with score $> \tau$",
    )
    ax.legend(loc="upper right", fontsize=8)
    profile_png = f"profiles_{suffix}.png"
    save(fig, out / profile_png)
    plt.close(fig)

    table = pd.DataFrame(
        [
            {
                "algorithm": algo,
                "IQM": fmt(points[algo][0], 2),
                "IQM 95% interval": interval(intervals[algo][0, 0], intervals[algo][1, 0], 2),
                "mean": fmt(points[algo][1], 2),
                "mean 95% interval": interval(intervals[algo][0, 1], intervals[algo][1, 1], 2),
            }
            for algo in reversed(algos)
        ]
    )
    return table, [interval_png, profile_png]


def improvement_rows(
    matrix: dict[str, np.ndarray], families: dict[str, str], reps: int = AGGREGATE_REPS
) -> pd.DataFrame:
    """P(ES algorithm > RL algorithm) over runs and tasks, with stratified-bootstrap intervals."""
    library, metrics = stats.quiet_rliable()
    rows = []
    es = [a for a in sorted(matrix) if families.get(a) == "es"]
    rl = [a for a in sorted(matrix) if families.get(a) != "es"]
    for x in es:
        for y in rl:
            pair = {f"{x},{y}": (matrix[x], matrix[y])}
            with stats.seeded_bootstrap(BOOTSTRAP_SEED):
                points, intervals = library.get_interval_estimates(
                    pair,
                    metrics.probability_of_improvement,
                    reps=max(reps // 10, 1),
                    random_state=np.random.RandomState(BOOTSTRAP_SEED),
                )
            key = f"{x},{y}"
            rows.append(
                {
                    "X (ES)": x,
                    "Y (RL)": y,
                    "P(X > Y)": fmt(float(np.ravel(points[key])[0]), 2),
                    "95% interval": interval(
                        float(np.ravel(intervals[key][0])[0]),
                        float(np.ravel(intervals[key][1])[0]),
                        2,
                    ),
                }
            )
    return pd.DataFrame(rows)


# -- the page ------------------------------------------------------------------------------------


def _random_scores(bench: Benchmark, runs_dir: Path | None, out: Path) -> dict[str, Any]:
    committed = out / RANDOM_SCORES
    measured = measured_random_scores(runs_dir) if runs_dir is not None else None
    if measured is not None and measured.is_file():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(measured, committed)
    if not committed.is_file():
        return {}
    return read_random_scores(committed)


def read_random_scores(path: Path) -> dict[str, dict[str, float]]:
    """The random-policy scores of a benchmark folder (``random_scores.json``): per task,
    numbers (``mean``, ``std``, ``episodes``). Read as a run's JSON files are
    (:func:`harness.rundir.read_json`, within ``HARNESS_JSON_MAX_BYTES``): the folder may
    come from someone else. :class:`rundir.UnreadableRun`, one line naming the file."""
    try:
        data = rundir.read_json(path)
    except rundir.UnreadableRun as error:
        message = str(error)  # names the file by its name: say which folder's it is
        if message.startswith(path.name):
            message = f"{path}{message.removeprefix(path.name)}"
        else:
            message = f"{path}: {message}"
        raise rundir.UnreadableRun(message.splitlines()[0]) from None

    def numbers(value: Any) -> bool:
        return isinstance(value, dict) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value.values()
        )

    if not isinstance(data, dict) or not all(numbers(v) for v in data.values()):
        raise rundir.UnreadableRun(
            f"{path}: not random-policy scores (an object of task -> {{mean, std, episodes}})"
        )
    return {str(task): {str(k): float(x) for k, x in v.items()} for task, v in data.items()}


def write_benchmark_report(
    bench: Benchmark,
    runs_dir: Path | None,
    out: Path,
    summary: Path,
    resamples: int | None = None,
) -> dict[str, int]:
    """Refresh the archives, redraw every task's report, write the report and the summary.

    ``resamples``: bootstrap resamples of the aggregate intervals (None: :data:`AGGREGATE_REPS`);
    a page drawn with another number says so beside its intervals.

    Returns the number of unfinished runs the folder carries per task (from ``runs_dir``
    when given, :func:`harness.benchmark.carry.write_unfinished`)."""
    from harness.report.build import build_report
    from harness.report.render import Document, Section, to_html, to_markdown

    out.mkdir(parents=True, exist_ok=True)
    drawn_since = time.time()  # a figure older than this at the end was not redrawn
    missing = refresh_archives(bench, runs_dir, out)
    if runs_dir is not None:
        write_unfinished(bench, runs_dir, out, {label for v in missing.values() for label in v})
    carried = {item.cell.label: item for item in unfinished_runs(bench, out)}
    from harness.benchmark.fairness import split_missing

    missing, _ = split_missing(bench, missing)  # equal-compute cells: the answer counts them

    def missing_label(label: str) -> str:
        item = carried.get(label)
        if item is None:
            return label
        budget = item.cell.config.get("timesteps")
        return f"{label} (unfinished: carried at {steps_text(item.timesteps)}" + (
            f" of {steps_text(float(budget))} timesteps)" if budget else " timesteps)"
        )

    random = _random_scores(bench, runs_dir, out)
    from harness.benchmark import answer, fairness
    from harness.report.anchors import load_anchors

    anchors, provenance = load_anchors(), fairness.load_provenance()
    parity = fairness.load_parity()
    all_facts: list[fairness.TaskFacts] = []
    all_scores: list[TaskScores] = []
    task_rows = []
    own_budget_texts: list[str] = []
    per_task_sections = []
    for task in bench.tasks:
        folder = out / task_slug(task.env)
        archive = folder / ARCHIVE
        random_score = float(random.get(task.env, {}).get("mean", math.nan))
        scores = task_scores(task, archive, random_score)
        done = len(bench.seeds) * len(task.algos) - len(missing.get(task.env, []))
        link = f"{task_slug(task.env)}/report.md"
        if scores is not None:
            build_report(
                [archive],
                folder,
                title=f"Benchmark task {task.env}: ES and RL at shipped settings, held-out seeds",
                map_runs=0,
            )
            all_scores.append(scores)
            lacking = fairness.missing_cells(bench, task, missing.get(task.env, []))
            all_facts.append(
                fairness.task_facts(scores, anchors, provenance, len(bench.seeds), lacking, parity)
            )
            own_budget = own_budget_text(scores, bench.timesteps_of(task))
            if own_budget:
                own_budget_texts.append(own_budget)
        task_rows.append(
            {
                "task": f"[{task.env}]({link})" if scores is not None else task.env,
                "cells done": f"{done}/{len(bench.seeds) * len(task.algos)}",
                "budget": budget_words(task, bench.timesteps_of(task)),
                **answer.leader_columns(all_facts[-1] if scores else None, leader_text),
            }
        )
        if scores is None:
            labels = [missing_label(label) for label in missing.get(task.env, [])]
            per_task_sections.append(
                Section(
                    f"{task.env}",
                    paragraphs=[
                        f"Budget {budget_words(task, bench.timesteps_of(task))}; no completed "
                        f"run yet. Missing cells: {'; '.join(labels)}."
                    ],
                )
            )
            continue
        section = Section(
            f"{task.env}",
            paragraphs=[
                f"Budget {budget_words(task, bench.timesteps_of(task))}; common points: "
                f"{fmt(scores.at['timesteps'], 0)} timesteps, "
                f"{fmt(scores.at['cpu_seconds'], 0)} CPU-seconds. Reference score "
                f"{fmt(task.reference_score)} ({task.reference_source}); random policy "
                f"{fmt(random_score)}. {task.note} Full report: [{link}]({link}).",
            ],
            tables=[("", task_table(scores))],
        )
        if missing.get(task.env):
            labels = [missing_label(label) for label in missing[task.env]]
            section.after.append("Missing cells: " + "; ".join(labels) + ".")
        per_task_sections.append(section)

    families = {algo: (family_of(algo) or "es") for task in bench.tasks for algo in task.algos}
    reps = AGGREGATE_REPS if resamples is None else resamples
    draft = "" if reps == AGGREGATE_REPS else f"; a draft of {reps:,} resamples"
    aggregate_sections = []
    for axis, label in AXES.items():
        aggregate = aggregate_matrix(all_scores, axis)
        matrix, envs = aggregate.matrix, aggregate.envs
        if not matrix:
            aggregate_sections.append(
                Section(
                    f"Aggregate at equal {label}",
                    paragraphs=[
                        "Not drawn yet: no task has each of its algorithms that are planned on "
                        f"other tasks too completed on at least {stats.MIN_RUNS_INTERVAL} common "
                        "seeds."
                    ],
                )
            )
            continue
        table, images = aggregate_figures(matrix, out, axis, reps)
        n_runs = next(iter(matrix.values())).shape[0]
        aggregate_sections.append(
            Section(
                f"Aggregate at equal {label}",
                paragraphs=[
                    f"Normalised scores at each task's common {label} over {len(envs)} task(s) "
                    f"({', '.join(envs)}) and {n_runs} seeds each: IQM and mean with 95% "
                    f"stratified-bootstrap intervals (rliable{draft}), then performance profiles "
                    "(the fraction of runs above each normalised score)."
                    + (
                        " Not in the aggregate: "
                        + "; ".join(f"{a} ({why})" for a, why in aggregate.left_out.items())
                        + "."
                        if aggregate.left_out
                        else ""
                    )
                ],
                images=[(images[0], f"IQM and mean at equal {label}")],
                tables=[
                    ("", table),
                    ("Probability of improvement", improvement_rows(matrix, families, reps)),
                ],
                after=[f"![performance profiles at equal {label}]({images[1]})"],
            )
        )

    thresholds = Section(
        "Timesteps and CPU-seconds to the reference score",
        paragraphs=[
            "Per algorithm and task: the runs whose evaluation return reached the task's "
            "reference score (the normalised score 1), and the medians, over those runs, of "
            "the timesteps and CPU-seconds of their first evaluation at or above it (so the "
            "resolution is the evaluation interval). · not planned on the task; — no "
            "completed run yet."
        ],
        tables=[("", threshold_table(bench, all_scores))],
    )

    total = sum(len(bench.seeds) * len(t.algos) for t in bench.tasks)
    n_missing = sum(len(v) for v in missing.values())
    status = f"{total - n_missing} of {total} cells complete" + (
        "; missing: "
        + ", ".join(
            f"{env} {len(v)}"
            + (f" ({n} of them half-done, carried)" if (n := sum(x in carried for x in v)) else "")
            for env, v in missing.items()
        )
        if n_missing
        else ""
    )
    own_budgets = {task.env: bench.timesteps_of(task) for task in bench.tasks}
    seen = provenance.seen_seeds(min(bench.seeds))
    intro = [
        f"Seeds {', '.join(map(str, bench.seeds))} (held out: no setting was tuned on a seed "
        f"from {min(bench.seeds)} on"
        + (
            f"; chosen or checked on them: {', '.join(seen)}, as the table of asymmetries says"
            if seen
            else ""
        )
        + f"); every cell on {bench.workers} core; each algorithm at its shipped "
        "per-env settings (experiments/defaults.yaml, listed in each task's report appendix). "
        f"{status}.",
        *answer.opening(
            all_facts,
            own_budgets,
            fairness.confirmations_recorded(all_scores),
            [task.env for task in bench.tasks],
        ),
        "Scores are evaluation returns on fresh seeded episodes (the same seeds for every "
        "algorithm), taken at each task's common point: the most timesteps, or "
        "CPU-seconds, that every run of the task reached. A leader is named only where the 95% "
        "interval of the difference of the two means (a bootstrap of the difference, each "
        "side's runs resampled apart, n >= 3) lies above 0; the difference is given with it. "
        "Normalised "
        "score: 0 for uniformly random actions, 1 at the task's reference score.",
        "Wall-clock is not compared here: these runs shared a 2-core machine with other work. "
        "CPU-seconds are each run's own process tree.",
        *filter(None, [more_workers_text(all_scores, bench.workers)]),
        *([bench.description] if bench.description else []),
    ]
    leaders = Section(
        "Who leads, per task",
        tables=[("", pd.DataFrame(task_rows))],
        after=[
            *own_budget_texts,
            answer.gates_paragraph(),
            *([compute_span_text(all_scores)] if all_scores else []),
            *filter(None, [cpu_spread_text(all_scores)]),
        ],
    )
    fair_sections = [
        answer.family_section(all_facts, out, reps, draft, aggregate_figures, improvement_rows),
        answer.salimans_section(all_facts),
        answer.defects_section(all_facts),
        answer.asymmetries_section(all_facts, provenance),
    ]
    for detail in [*aggregate_sections, thresholds]:
        detail.folded = True  # the answer and the leader table first; detail on demand
    cores = cores_section(
        bench,
        out,
        {f.task.env: f.flagged_gates() for f in all_facts},
        {f.task.env: dict(f.best) for f in all_facts},
    )
    command = "harness benchmark report"
    title = f"Benchmark: ES against RL on {len(bench.tasks)} tasks, held-out seeds"
    doc = Document(
        title,
        [*intro, f"Generated by `{command}` from the run archives under `{out}`."],
        [leaders, *fair_sections, *aggregate_sections, thresholds, cores, *per_task_sections],
    )
    (out / "report.md").write_text(to_markdown(doc), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc, out), encoding="utf-8")
    _write_summary(
        summary,
        out,
        title,
        intro,
        leaders,
        [*fair_sections, *aggregate_sections, thresholds, cores],
    )
    counts = Counter(item.cell.config["env"] for item in carried.values())
    for stale in [*out.glob("aggregate_*.png"), *out.glob("profiles_*.png")]:
        if stale.stat().st_mtime < drawn_since:
            stale.unlink()  # a figure this redraw did not draw must not linger
    return {task.env: counts.get(task.env, 0) for task in bench.tasks}


def cores_section(
    bench: Benchmark,
    out: Path,
    gates: Mapping[str, Mapping[str, str]] | None = None,
    named: Mapping[str, Mapping[str, str]] | None = None,
) -> Any:
    """The section "Wall-clock as cores grow": per task, the best ES's and the best RL's time
    to the same score predicted at 1 to 1,440 cores from the task's run archive, the fewest
    cores from which ES gets there first (or why never), its figure and the model's
    assumptions (:func:`harness.report.projection.benchmark_section`). ``gates``: per env,
    the algorithms failing their sanity gate and its text, repeated beside any verdict
    that rests on one of them, as the leader row does. ``named``: per env, each family's
    best algorithm as the leader row named it (drawn at every core count)."""
    from harness.report.projection import benchmark_section

    tasks = [
        (
            task.env,
            out / task_slug(task.env) / ARCHIVE,
            (task.reference_score, f"the task's reference score ({task.reference_source})"),
        )
        for task in bench.tasks
    ]
    return benchmark_section(tasks, out, gates=gates, named=named)


def _write_summary(
    summary: Path,
    out: Path,
    title: str,
    intro: list[str],
    leaders: Any,
    sections: list[Any],
) -> None:
    """BENCHMARK.md: the report's first table, its aggregates and threshold table, its links
    made relative to it."""
    from os.path import relpath

    base = Path(relpath(out.resolve(), summary.resolve().parent))
    lines = [f"# {title}", "", *[p for par in intro for p in (par, "")]]

    def relink(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.replace(r"\]\(([^)]+)\)", rf"]({base.as_posix()}/\1)", regex=True)

    lines += ["## Who leads, per task", "", markdown_table(relink(leaders.tables[0][1])), ""]
    lines += [p for par in leaders.after for p in (par, "")]
    for section in sections:
        heading = [f"## {section.title}", ""]
        if getattr(section, "folded", False):  # closed <details>, as the report draws it
            heading = ["<details>", "<summary>", "", *heading, "</summary>", ""]
        lines += heading
        lines += [p for par in section.paragraphs for p in (par, "")]
        for name, alt in section.images:
            lines += [f"![{alt}]({base.as_posix()}/{name})", ""]
        for caption, table in section.tables:
            lines += ([f"*{caption}*", ""] if caption else []) + [markdown_table(table), ""]
        for par in section.after:
            lines += [par.replace("](", f"]({base.as_posix()}/"), ""]
        if getattr(section, "folded", False):
            lines += ["</details>", ""]
    lines += [
        f"Full report, per-task tables and missing cells: [{base}/report.md]({base}/report.md)."
    ]
    summary.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
