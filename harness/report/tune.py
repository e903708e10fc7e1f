"""The report of one tuning study (``harness tune``): history, importances, the best trial.

Written into the study's folder (``RUNS_DIR/_tune/<study>/``) as ``report.md`` beside its
PNGs and a self-contained ``report.html``, as every report is (:mod:`harness.report.render`).
It is drawn from what the study recorded (trials, their reported values) and from the
best trial's run directories (read through :mod:`harness.rundir`), never from a rerun:

* the optimisation history: each trial's objective (pruned trials at the last value the
  pruner saw, failed ones marked along the bottom) and the best so far;
* parameter importances (optuna's fANOVA, computed by the caller);
* the best trial's evaluation curves on its tuning seeds, beside those of its
  re-evaluation on fresh tuning seeds, with both scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness import rundir
from harness.report import plots
from harness.report.render import Document, Section, to_html, to_markdown

HISTORY_PNG = "tune_history.png"
IMPORTANCE_PNG = "tune_importances.png"
BEST_PNG = "tune_best_curves.png"


@dataclass
class TrialRow:
    """One trial as the report shows it."""

    number: int
    state: str
    value: float | None
    #: evaluation index -> the value reported to the pruner
    intermediate: dict[int, float] = field(default_factory=dict)
    #: config key -> value
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class TuneReport:
    """What a study's report shows; built by :mod:`harness.tune.outputs`."""

    study: str
    algo: str
    env: str
    storage: str
    objective: str
    #: the objective on the history figure's axis
    objective_axis: str
    effort: str
    trials: list[TrialRow]
    importances: dict[str, float]
    importance_note: str
    best: int | None = None
    best_value: float | None = None
    best_values: dict[str, Any] = field(default_factory=dict)
    #: seed -> run directory of the best trial, and of its re-evaluation
    best_runs: dict[int, Path] = field(default_factory=dict)
    recheck_runs: dict[int, Path] = field(default_factory=dict)
    recheck_value: float | None = None
    notes: list[str] = field(default_factory=list)


def _caption(report: TuneReport) -> str:
    return f"{report.algo} on {report.env}; study {report.study}; {report.effort}"


def history_figure(report: TuneReport) -> Any:
    """Objective against trial number, with the best so far; None without any trial."""
    import matplotlib.pyplot as plt

    if not report.trials:
        return None
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    color = plots.builtin_algorithm_colors().get(report.algo, "C0")
    done = [t for t in report.trials if t.state == "COMPLETE" and t.value is not None]
    done_values = [float(t.value) for t in done if t.value is not None]
    pruned = [t for t in report.trials if t.state == "PRUNED" and t.intermediate]
    failed = [t for t in report.trials if t.state == "FAIL"]
    if done:
        ax.scatter(
            [t.number for t in done],
            done_values,
            color=color,
            s=36,
            label="completed: objective",
            zorder=3,
        )
        best, xs, ys = -math.inf, [], []
        for trial in sorted(done, key=lambda t: t.number):
            best = max(best, float(trial.value or -math.inf))
            xs.append(trial.number)
            ys.append(best)
        ax.step(xs, ys, where="post", color="black", linewidth=1.4, label="best so far")
    if pruned:
        ax.scatter(
            [t.number for t in pruned],
            [t.intermediate[max(t.intermediate)] for t in pruned],
            marker="x",
            color="#888888",
            s=36,
            label="pruned: last value seen",
            zorder=2,
        )
    if failed:
        ax.scatter(
            [t.number for t in failed],
            [0.0] * len(failed),
            marker="|",
            color="#d62728",
            s=120,
            transform=ax.get_xaxis_transform(),
            label="failed or interrupted",
            clip_on=False,
        )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial number")
    ax.set_ylabel(report.objective_axis)
    ax.legend(fontsize=8, loc="best")
    counts = ", ".join(
        f"{sum(t.state == s for t in report.trials)} {s.lower()}"
        for s in ("COMPLETE", "PRUNED", "FAIL")
    )
    return plots.finish(fig, "Optimisation history", f"{_caption(report)}; trials: {counts}")


def importance_figure(report: TuneReport) -> Any:
    """fANOVA importance per parameter, largest on top; None without importances."""
    import matplotlib.pyplot as plt

    if not report.importances:
        return None
    plots.apply_style()
    items = sorted(report.importances.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(items) + 1.8))
    color = plots.builtin_algorithm_colors().get(report.algo, "C0")
    ax.barh([name for name, _ in items], [value for _, value in items], color=color)
    for index, (_, value) in enumerate(items):
        ax.text(value, index, f" {value:.2f}", va="center", fontsize=8)
    ax.set_xlabel("importance (fANOVA, share of the objective's variance)")
    ax.set_xlim(0, max(1.0, max(v for _, v in items) * 1.15))
    return plots.finish(
        fig, "Parameter importances", f"{_caption(report)}; {report.importance_note}"
    )


def _curve(run_dir: Path) -> tuple[list[float], list[float]]:
    """(timesteps, eval_return_mean) of one run, read from its ``metrics.json``."""
    try:
        metrics = rundir.read_metrics(run_dir)
    except (rundir.UnreadableRun, OSError):
        return [], []
    returns = metrics.get("eval_return_mean") or {}
    at = metrics.get("eval_timesteps") or {}
    by_step = dict(zip(at.get("steps", []), at.get("values", []), strict=False))
    xs, ys = [], []
    for step, value in zip(returns.get("steps", []), returns.get("values", []), strict=False):
        if step in by_step and value is not None:
            xs.append(float(by_step[step]))
            ys.append(float(value))
    return xs, ys


def best_curves_figure(report: TuneReport) -> Any:
    """The best trial's evaluation curves: tuning seeds solid, re-evaluation seeds dashed."""
    import matplotlib.pyplot as plt

    if not report.best_runs:
        return None
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    drawn = 0
    for label, runs, style, marker in (
        ("tuning seed", report.best_runs, "-", "o"),
        ("recheck seed", report.recheck_runs, "--", "s"),
    ):
        for seed, path in sorted(runs.items()):
            xs, ys = _curve(path)
            if xs:
                ax.plot(
                    xs,
                    ys,
                    style,
                    color=f"C{drawn % 10}",
                    alpha=0.9,
                    marker=marker,
                    markersize=4,
                    label=f"{label} {seed} (run {path.name})",
                )
                drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel(plots.AXIS_LABELS["timesteps"])
    ax.set_ylabel("eval return (mean of the evaluation's episodes)")
    plots._timestep_axis(ax)
    ax.legend(fontsize=8, loc="best")
    score = f"tuning score {report.best_value:.1f}" if report.best_value is not None else ""
    if report.recheck_value is not None:
        score += f", recheck score {report.recheck_value:.1f}"
    return plots.finish(
        fig, f"Best trial ({report.best}): evaluation return", f"{_caption(report)}; {score}"
    )


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def trials_table(report: TuneReport) -> pd.DataFrame:
    """One row per trial: number, state, objective, the pruned-at step, its values."""
    keys = list(dict.fromkeys(k for t in report.trials for k in t.values))
    rows = []
    for trial in sorted(report.trials, key=lambda t: t.number):
        row = {"trial": str(trial.number), "state": trial.state, "objective": _cell(trial.value)}
        if trial.state == "PRUNED" and trial.intermediate:
            step = max(trial.intermediate)
            row["objective"] = f"pruned at eval {step}: {trial.intermediate[step]:.4g}"
        for key in keys:
            row[key] = _cell(trial.values.get(key))
        rows.append(row)
    return pd.DataFrame(rows)


def tune_sections(report: TuneReport, out: Path) -> tuple[Section, list[Section]]:
    """The lead (result) and the sections of the study's report; PNGs written to ``out``."""
    lead = Section("Result")
    if report.best is None:
        lead.paragraphs.append("No trial completed: there is no best trial yet.")
    else:
        text = (
            f"Best trial **{report.best}** of study `{report.study}`: tuning score "
            f"**{report.best_value:.2f}** ({report.objective})."
        )
        if report.recheck_value is not None:
            seeds = ", ".join(str(s) for s in sorted(report.recheck_runs))
            text += (
                f" Re-evaluated on fresh tuning seeds {seeds} at the same budget: "
                f"**{report.recheck_value:.2f}**; the gap to the tuning score is the optimism "
                "of picking the best of many noisy trials."
            )
        lead.paragraphs.append(text)
        lead.tables.append(
            (
                "Its settings (`best.yaml` beside this report holds them for `harness run "
                "--set` and a sweep's `tuned:`):",
                pd.DataFrame(
                    {
                        "setting": list(report.best_values),
                        "value": [_cell(v) for v in report.best_values.values()],
                    }
                ),
            )
        )
    lead.paragraphs += report.notes
    sections = []
    for title, fig, name, empty in (
        ("Optimisation history", history_figure(report), HISTORY_PNG, "No trial yet."),
        (
            "Parameter importances",
            importance_figure(report),
            IMPORTANCE_PNG,
            f"Not drawn: {report.importance_note}.",
        ),
        (
            "The best trial's curves",
            best_curves_figure(report),
            BEST_PNG,
            "Not drawn: the best trial's runs hold no evaluation.",
        ),
    ):
        section = Section(title)
        if fig is None:
            section.paragraphs.append(empty)
        else:
            plots.save(fig, out / name)
            section.images.append((name, title))
        sections.append(section)
    every = Section("Every trial", folded=True)
    every.paragraphs.append(
        "State COMPLETE: every seed's run completed; PRUNED: stopped by the median pruner at "
        "the evaluation shown; FAIL: a run failed (see `failure` in `trials.csv`) or the trial "
        "was interrupted and queued again under a new number."
    )
    every.tables.append(("", trials_table(report)))
    sections.append(every)
    return lead, sections


def write_tune_report(report: TuneReport, out: Path) -> Path:
    """Write ``report.md`` (PNGs beside it) and ``report.html`` into ``out``; the .md path."""
    out.mkdir(parents=True, exist_ok=True)
    lead, sections = tune_sections(report, out)
    doc = Document(
        title=f"Tuning {report.algo} on {report.env} (study {report.study})",
        intro=[
            f"Storage `{report.storage}`; budget {report.effort}; objective: {report.objective}. "
            "Live view: `optuna-dashboard` on the storage (docs/tuning.md)."
        ],
        sections=sections,
        lead=[lead],
    )
    path = out / "report.md"
    rundir.atomic_write(path, [to_markdown(doc).encode()])
    rundir.atomic_write(out / "report.html", [to_html(doc, out).encode()])
    return path
