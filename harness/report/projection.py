"""Wall-clock as cores grow: each algorithm's predicted time to one score at 1 to 1,440 cores.

Drawn wherever a report's runs on one env hold both families (ES and RL). The prediction
is :mod:`harness.bench.project`'s model applied to each run's own records (per-episode
time, the longest task, population, head update, message costs and bytes, rollout and
update seconds, evaluation); nothing is rerun. Per algorithm the curve follows its median
run (a run that never reached the score counts as the slowest), and each recorded worker
count's measured median is marked apart from the projection. The same module draws the
benchmark's page section (:func:`benchmark_section`): the best ES against the best RL per
task, and the fewest cores from which ES gets there first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from harness.bench import project as model
from harness.report.plots import (
    apply_style,
    finish,
    group_colors,
    legend_outside,
    save,
    widen_for_legends,
)
from harness.report.render import Section

TITLE = "Wall-clock as cores grow"
FIGURE = "time_to_score_cores.png"
#: The benchmark page's figure (beside its report.md).
BENCHMARK_FIGURE = "projection_cores.png"


@dataclass
class Panel:
    """One env's comparison: its score, its algorithms' projections, and the verdict."""

    env: str
    target: float
    source: str
    algorithms: list[model.AlgorithmProjection]
    cores: list[int]
    #: family -> the algorithm named its best before the table is drawn (the benchmark's
    #: leader row); a family not named here is its fastest algorithm per core count
    named: dict[str, str] = field(default_factory=dict)

    def best(self, family: str) -> list[tuple[int, float | None, str]]:
        algo = self.named.get(family)
        item = next((a for a in self.algorithms if a.algo == algo), None)
        if item is None:
            return model.best_of(self.algorithms, family, self.cores)
        return [(c, seconds, item.algo) for c, seconds, _ in item.median]

    def picks(self, family: str) -> list[str]:
        """At each core count, the population or n_envs :meth:`best`'s median run picked
        where it is not its own (from measured sample costs), else ""."""
        by_name = {a.algo: a for a in self.algorithms}
        return [
            point.setting if algo in by_name and (point := by_name[algo].median[i][2]) else ""
            for i, (_, _, algo) in enumerate(self.best(family))
        ]

    def band(self, family: str) -> list[tuple[float | None, float | None]]:
        """The 95% band of :meth:`best`'s time at each core count (its algorithm's)."""
        by_name = {a.algo: a for a in self.algorithms}
        return [
            by_name[algo].band[i] if algo in by_name else (None, None)
            for i, (_, _, algo) in enumerate(self.best(family))
        ]

    def machines(self, algos: Sequence[str]) -> str:
        """Where the runs of ``algos`` ran, when that keeps their times apart: "" where
        every run recorded a speed and the speeds agree within the speed record's
        tolerance, else what is known (CPU models, recorded speeds), not converted."""
        from harness.speed import TOLERANCE

        runs = [r.costs for a in self.algorithms if a.algo in algos for r in a.runs]
        speeds = [c.speed for c in runs if c.speed is not None]
        if runs and len(speeds) == len(runs) and max(speeds) <= min(speeds) * (1 + TOLERANCE):
            return ""
        cpus = ", ".join(sorted({c.cpu or "unnamed" for c in runs}))
        recorded = (
            f"speed recorded by {len(speeds)} of {len(runs)} runs, "
            f"{min(speeds):,.0f} to {max(speeds):,.0f} kernel rounds per CPU-second"
            if speeds
            else "no run recorded its speed"
        )
        return (
            f"times from each run's own machine (CPU {cpus}; {recorded}), not converted "
            "to one machine's speed"
        )

    @property
    def families(self) -> set[str]:
        return {a.family for a in self.algorithms}


def default_assumptions() -> model.Assumptions:
    """The model's assumptions in reports: 10 Gbit/s, the committed measured message costs
    (the ES head's, and RL env processes'), each run's population and n_envs fixed unless
    the committed sample costs measured others, evaluation spread over the cores for both
    families."""
    costs, source = model.message_costs()
    samples, samples_source = model.read_samples([model.SAMPLE_COSTS])
    return model.Assumptions(
        head_message_s=costs,
        head_message_source=source,
        machines=model.machines_of(),
        samples=samples,
        samples_source=samples_source,
    )


def panels(
    run_dirs: Sequence[Path],
    references: dict[str, tuple[float, str] | None] | None = None,
    cores: Sequence[int] = model.DEFAULT_CORES,
    assumptions: model.Assumptions | None = None,
    both_families: bool = True,
    groups: Mapping[Path, str] | None = None,
) -> list[Panel]:
    """One panel per env of ``run_dirs`` (with ``both_families``: only envs whose runs hold
    both families). ``references``: an env's reference score (default: its solved threshold).
    ``groups``: a run's configuration label (a report's group), so that runs of one
    algorithm in different configurations are projected apart; default: per algorithm."""
    assumptions = assumptions or default_assumptions()
    costs = []
    for run_dir in run_dirs:
        read = model.read_costs(run_dir)
        if not isinstance(read, str):
            read.group = (groups or {}).get(run_dir, "")
            costs.append(read)
    per_env: dict[str, list[model.RunCosts]] = {}
    for item in costs:
        per_env.setdefault(item.env, []).append(item)
    if both_families:
        per_env = {e: r for e, r in per_env.items() if {c.family for c in r} == {"es", "rl"}}
    out = []
    for env, runs in sorted(per_env.items()):
        targets, projections, _ = model.project_all(
            runs, list(cores), assumptions, references=references and {env: references.get(env)}
        )
        if env not in targets:
            continue
        value, source = targets[env]
        algorithms = model.by_algorithm(projections, list(cores))
        out.append(Panel(env, value, source, algorithms, list(cores)))
    return out


def _cores(count: int) -> str:
    return f"{count:,} core{'s' * (count > 1)}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "never"
    return f"{model.short_seconds(value)} s"


def _first_within_bands(
    cores: Sequence[int],
    es: Sequence[tuple[float | None, float | None]],
    rl: Sequence[tuple[float | None, float | None]],
) -> tuple[int | None, int | None]:
    """The fewest cores from which ES is first with the bands' ends in its favour (its low
    against RL's high) and against it (its high against RL's low); None: never."""
    favour = model.es_first_from(
        list(zip(cores, (lo for lo, _ in es), strict=True)),
        list(zip(cores, (hi for _, hi in rl), strict=True)),
    )
    against = model.es_first_from(
        list(zip(cores, (hi for _, hi in es), strict=True)),
        list(zip(cores, (lo for lo, _ in rl), strict=True)),
    )
    return favour, against


def _from(cores: int | None) -> str:
    return "never" if cores is None else f"{cores:,} core{'s' * (cores > 1)}"


def verdict(panel: Panel) -> str:
    """The fewest cores from which the best ES reaches the score first, with the range the
    95% bands allow and whether it lies beyond the measured worker counts, or why never."""
    es, rl = panel.best("es"), panel.best("rl")
    first = model.es_first_from([(c, s) for c, s, _ in es], [(c, s) for c, s, _ in rl])
    score = f"{panel.target:.4g}"
    es_bands, rl_bands = panel.band("es"), panel.band("rl")
    favour, against = _first_within_bands(panel.cores, es_bands, rl_bands)
    if favour == against == first:
        bands = "the same at both ends of the 95% bands"
    else:
        bands = f"within the 95% bands from {_from(favour)} to {_from(against)}"
    if first is not None:
        i = panel.cores.index(first)
        _, e, algo = es[i]
        _, r, rl_algo = rl[i]
        algo, rl_algo = _named(algo, panel.picks("es")[i]), _named(rl_algo, panel.picks("rl")[i])
        es_band, rl_band = model.band_text(es_bands[i]), model.band_text(rl_bands[i])
        against_text = f"{rl_algo} {_seconds(r)} {rl_band}" if r is not None else "RL never"
        beyond = (
            f"; projected, beyond the {max(model.VALIDATED_WORKERS)} cores the model was checked at"
            if first > max(model.VALIDATED_WORKERS)
            else ""
        )
        return (
            f"{panel.env}: ES reaches {score} first from {first:,} core{'s' * (first > 1)} on "
            f"({algo} {_seconds(e)} {es_band} against {against_text} there; {bands}{beyond})."
        )
    top = panel.cores[-1]
    _, e, algo = es[-1]
    _, r, rl_algo = rl[-1]
    if e is None:
        return (
            f"{panel.env}: never, because no ES algorithm's median run reaches {score} "
            "within its budget."
        )
    winner = next(a for a in panel.algorithms if a.algo == algo)
    point = winner.median[-1][2]
    reason = ""
    if point is not None:
        largest = max(model.TERMS, key=lambda t: point.terms[t])
        reason = (
            f"; {algo} uses {point.workers:,} worker(s) there and its largest term is "
            f"{model.TERM_HEADINGS[largest].removesuffix(' s')} ({point.terms[largest]:.1f} s)"
        )
        if point.workers < top and not point.setting:
            reason += f", its population capping its workers at {point.workers:,}"
    return (
        f"{panel.env}: never, because at {top:,} cores the best ES ({algo}, {_seconds(e)}) "
        f"is still slower than the best RL ({rl_algo}, {_seconds(r)}){reason}; {bands}."
    )


def _named(algo: str, setting: str) -> str:
    return f"{algo} at {setting}" if setting else algo


def gated_verdict(panel: Panel, gates: Mapping[str, str]) -> str:
    """:func:`verdict`, with the failed sanity gates of the algorithms it names: the
    comparison then says what it rests on instead of standing as a result."""
    named = {algo for family in ("es", "rl") for _, _, algo in panel.best(family) if algo}
    failed = [f"{gates[algo]}" for algo in sorted(named) if algo in gates]
    if not failed:
        return verdict(panel)
    return (
        f"{verdict(panel).removesuffix('.')}; not a verdict, as on the leader row: "
        f"{'; '.join(failed)}."
    )


def figure(chosen: Sequence[Panel], best_only: bool = False) -> Figure | None:
    """Time to each panel's score against cores, log-log: ES solid, RL dashed, the measured
    medians as large hollow markers apart from the projected points. ``best_only``: per
    family only its fastest algorithm at each core count (the benchmark page)."""
    drawable = [
        p for p in chosen if any(s is not None for a in p.algorithms for _, s, _ in a.median)
    ]
    if not drawable:
        return None
    apply_style()
    cols = min(len(drawable), 3)
    rows = math.ceil(len(drawable) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(5.4 * cols + 0.6, 4.3 * rows + 1.1), squeeze=False
    )
    flat = list(axes.ravel())
    for ax in flat[len(drawable) :]:
        ax.set_visible(False)
    for ax, panel in zip(flat, drawable, strict=False):
        if best_only:
            _draw_best(ax, panel)
        else:
            _draw_algorithms(ax, panel)
        ax.set_xscale("log")
        ax.set_yscale("log")
        label_every_tick(ax, panel.cores, ax.get_ylim())
        ax.set_xlabel("cores")
        ax.set_ylabel(f"seconds to reach {panel.target:.4g}")
        ax.set_title(f"{panel.env}: R = {panel.target:.4g}", fontsize=10)
        ax.plot([], [], color="#555555", linestyle="-", label="ES (projected)")
        ax.plot([], [], color="#555555", linestyle="--", label="RL (projected)")
        ax.plot(
            [], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none",
            markeredgecolor="#222222", markeredgewidth=1.8, label="measured median",
        )  # fmt: skip
        legend_outside(ax)  # a report's group labels are long: inside, they hide curves
    widen_for_legends(fig, flat[: len(drawable)])
    note = (
        (
            "Shaded: the 95% band of the median (bootstrap over the runs' seeds). "
            if best_only
            else ""
        )
        + "Lines: the model's prediction from each run's records (median run per algorithm; "
        "a run that never reached R counts as the slowest), at the fewest workers that run "
        "fastest up to each core count. Hollow circles: measured medians at the worker "
        "counts the runs used. ES: episodes over the workers, the longest task, one head's "
        "update and messages; RL: rollouts over min(cores, n_envs) envs, updates serial."
    )
    return finish(fig, f"{TITLE}: time to the same score", note)


def log_ticks(low: float, high: float, least: int = 4) -> list[float]:
    """Ticks for a log axis spanning ``low`` to ``high``: the sparsest of 1, 1-2-5,
    1-2-3-5-7 and 1-9 per decade giving at least ``least`` ticks from the one at or
    below ``low`` to the one at or above ``high`` (those two included)."""
    low, high = max(low, 1e-12), max(high, low)
    first, last = math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1
    inside: list[float] = []
    for subs in ((1,), (1, 2, 5), (1, 2, 3, 5, 7), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = sorted(m * 10.0**e for e in range(first, last + 1) for m in subs)
        below = max(t for t in ticks if t <= low * (1 + 1e-9))
        above = min(t for t in ticks if t >= high * (1 - 1e-9))
        inside = [t for t in ticks if below <= t <= above]
        if len(inside) >= least:
            break
    return inside


def label_every_tick(ax: Axes, cores: Sequence[int], seconds: tuple[float, float]) -> None:
    """Ticks of a cores (x) against seconds (y) log-log axis, each one labelled: every
    core count listed, and :func:`log_ticks` over ``seconds`` (the axis spans them); no
    minor ticks, which a log axis draws unlabelled."""
    ax.set_xticks(list(cores), [f"{c:,}" for c in cores], fontsize=8)
    ax.xaxis.set_minor_locator(NullLocator())
    ticks = log_ticks(*seconds)
    ax.set_ylim(ticks[0], ticks[-1])
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:.4g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def _style(family: str) -> str:
    return "-" if family == "es" else "--"


def _draw_algorithms(ax: Axes, panel: Panel) -> None:
    colors = group_colors(sorted({a.algo for a in panel.algorithms}))
    for item in panel.algorithms:
        xs = [c for c, s, _ in item.median if s is not None]
        ys = [s for _, s, _ in item.median if s is not None]
        color = colors[item.algo]
        if xs:
            ax.plot(
                xs, ys, _style(item.family), marker=".", color=color,
                label=f"{item.algo} ({item.reached}/{len(item.runs)} reached)",
            )  # fmt: skip
        elif not item.measured:
            ax.plot([], [], _style(item.family), color=color, label=f"{item.algo} (never)")
        for workers, seconds, _, _ in item.measured:
            ax.plot(
                [workers], [seconds], linestyle="none", marker="o", markersize=9,
                markerfacecolor="none", markeredgecolor=color, markeredgewidth=1.8,
            )  # fmt: skip


def _draw_best(ax: Axes, panel: Panel) -> None:
    colors = {"es": "#1f77b4", "rl": "#d62728"}
    for family, name in (("es", "best ES"), ("rl", "best RL")):
        best = panel.best(family)
        xs = [c for c, s, _ in best if s is not None]
        ys = [s for _, s, _ in best if s is not None]
        names = sorted({a for _, s, a in best if s is not None})
        ax.plot(
            xs, ys, _style(family), marker=".", color=colors[family],
            label=f"{name}: {', '.join(names) or 'never'}",
        )  # fmt: skip
        spans = [
            (c, lo, hi)
            for (c, _, _), (lo, hi) in zip(best, panel.band(family), strict=True)
            if lo is not None and hi is not None
        ]
        if spans:
            ax.fill_between(
                [c for c, _, _ in spans], [lo for _, lo, _ in spans], [hi for _, _, hi in spans],
                color=colors[family], alpha=0.15, linewidth=0,
            )  # fmt: skip
        fastest = {a for _, s, a in best[:1] if s is not None}
        for item in panel.algorithms:
            if item.algo in fastest:
                for workers, seconds, _, _ in item.measured:
                    ax.plot(
                        [workers], [seconds], linestyle="none", marker="o", markersize=9,
                        markerfacecolor="none", markeredgecolor=colors[family],
                        markeredgewidth=1.8,
                    )  # fmt: skip


def table(chosen: Sequence[Panel]) -> pd.DataFrame:
    """Per env and algorithm: the median run's predicted time at each core count, and the
    measured medians."""
    rows = []
    for panel in chosen:
        for item in panel.algorithms:
            row: dict[str, str] = {
                "env": panel.env,
                "algorithm": item.algo,
                "family": item.family,
                "reached R": f"{item.reached} of {len(item.runs)}",
            }
            for (c, seconds, point), band in zip(item.median, item.band, strict=True):
                cell = _seconds(seconds)
                if seconds is not None:
                    cell += f" {model.band_text(band)}"
                if point is not None and point.workers < c:
                    cell += f" ({point.workers:,} used)"
                if point is not None and point.setting:
                    cell += f" at {point.setting}"
                row[_cores(c)] = cell
            row["measured"] = (
                ", ".join(f"{_seconds(s)} at W={w}" for w, s, _, _ in item.measured) or "—"
            )
            row["start-up (least of runs)"] = (
                f"{item.startup:.2f} s" if item.startup is not None else "—"
            )
            rows.append(row)
    return pd.DataFrame(rows)


def _notes(chosen: Sequence[Panel]) -> list[str]:
    """What the records lacked, once each: the model's fallbacks, which bound the times."""
    notes = sorted({n for p in chosen for a in p.algorithms for n in a.notes})
    bounds = []
    if any("step cap" in n and "longest task" in n for n in notes):
        bounds.append(
            "Runs recorded before the longest task was (`longest_task_s`) bound their ES "
            "stragglers by the episode step cap: those ES times are upper bounds."
        )
    if any("split not recorded" in n for n in notes):
        bounds.append(
            "Runs recorded before RL's rollout/update split (`rollout_s`, `update_s`) count "
            "all of RL's learning as parallel rollout: those RL times are lower bounds."
        )
    return bounds


def report_section(
    run_dirs: Sequence[Path],
    out: Path,
    levels: dict[str, tuple[float, str]],
    groups: Mapping[Path, str] | None = None,
) -> Section | None:
    """The report's section for the runs in ``run_dirs``; None unless some env's runs hold
    both families. ``levels``: the report's return level per env (its threshold), tried
    first; an env whose runs do not reach it gets a score they do (see
    :func:`harness.bench.project.choose_target`). ``groups``: each run's group in the
    report, so the curves are the report's groups (one algorithm trained to a timesteps
    budget and to a CPU limit is two)."""
    assumptions = default_assumptions()
    chosen = panels(run_dirs, dict(levels), assumptions=assumptions, groups=groups)
    if not chosen:
        return None
    section = Section(TITLE)
    section.paragraphs.append(
        "Salimans et al. (2017, arXiv:1703.03864) report that evolution strategies reach a "
        "score sooner in "
        "wall-clock because they parallelise. Here each run's own records (episode times, the "
        "longest task, population, head update, message costs and bytes; RL's rollout and "
        "update seconds; evaluation) predict its time from launch to the score at 1 to "
        "1,440 cores (`harness bench project`, the model in docs/scaling.md). "
        + " ".join(f"{p.env}: R = {p.target:.4g}, {p.source}." for p in chosen)
    )
    section.paragraphs.append(" ".join(verdict(p) for p in chosen))
    fig = figure(chosen)
    if fig is not None:
        save(fig, out / FIGURE)
        section.images.append((FIGURE, f"{TITLE}: time to the same score against cores"))
    section.tables.append(("", table(chosen)))
    section.after += [*assumptions.lines(), *_notes(chosen)]
    return section


def sample_costs_text(panel: Panel, algos: Sequence[str], assumptions: model.Assumptions) -> str:
    """Per named algorithm, the sample costs the projection could pick from on this task
    (``--sample-costs``), or that none were measured, so its setting stays its own."""
    parts = []
    for item in (a for a in panel.algorithms if a.algo in algos):
        costs = item.runs[0].costs
        knob = model.setting_name(item.family)
        measured = model.sample_costs(assumptions.samples, costs, panel.target)
        parts.append(
            f"{item.algo}: {model.sample_text(measured, item.family)}"
            if measured
            else f"{item.algo}: none measured, its {knob} ({model.setting_of(costs):,}) kept"
        )
    return f"{panel.env}, sample costs to {panel.target:.4g}: " + "; ".join(parts) + "."


def _trained_to_budget(run_dir: Path) -> bool:
    """Whether the run trained to a timesteps budget, not to a CPU limit (``cpu_limit``) nor
    as one side of an equal-compute pair (``paired_with``: the grid's run is the cell)."""
    from harness import rundir

    try:
        config = rundir.read_header(run_dir).config
        return not config.get("cpu_limit") and not config.get("paired_with")
    except rundir.UnreadableRun:
        return True  # read_costs names what it cannot read


def benchmark_section(
    tasks: Sequence[tuple[str, Path, tuple[float, str]]],
    out: Path,
    gates: Mapping[str, Mapping[str, str]] | None = None,
    named: Mapping[str, Mapping[str, str]] | None = None,
) -> Section:
    """The benchmark page's section: per task (env, its run archive, its reference score),
    the best ES's and the best RL's predicted time to the same score at 1 to 1,440 cores,
    the fewest cores from which ES gets there first (or why never), the figure and the
    model's assumptions. ``gates``: per env, algorithm -> the text of its failed sanity
    gate; a verdict against such an algorithm says so and is not one. ``named``: per env,
    family -> its best algorithm as the leader row named it, drawn at every core count (a
    family not named: its fastest algorithm per core count). The runs are the
    grid's, trained to the task's budget: a run to a CPU limit (an equal-compute cell) is
    another configuration, and its median run and final score would shift the algorithm's
    and the common target's."""
    from harness import rundir

    (out / BENCHMARK_FIGURE).unlink(missing_ok=True)
    section = Section(TITLE)
    assumptions = default_assumptions()
    chosen: list[Panel] = []
    for env, archive, reference in tasks:
        if not archive.is_file():
            continue
        dirs = [d for d in rundir.find_run_dirs([archive]) if _trained_to_budget(d)]
        for panel in panels(dirs, {env: reference}, assumptions=assumptions):
            panel.named = dict((named or {}).get(env, {}))
            chosen.append(panel)
    if not chosen:
        section.paragraphs.append(
            "Not drawn yet: no task has completed runs of both an ES and an RL algorithm."
        )
        return section
    section.paragraphs.append(
        "Per task, the best ES's and the best RL's predicted wall-clock from launch to the "
        "same score (the task's reference where both families' median runs reach it, else "
        "0.9 of the way from the first evaluation to the lower of the two families' best "
        "median final score), predicted from the held-out grid runs' own records (not the "
        "equal-compute runs, trained to a CPU limit) at 1 to 1,440 "
        "cores (`harness bench project`; the model is in docs/scaling.md). Salimans et al. "
        "(2017, arXiv:1703.03864) report that ES reaches a score sooner because it "
        "parallelises; this asks "
        "from how many cores that holds here. The best ES and the best RL are the leader "
        "row's (each family's best mean score at equal timesteps), named before any time is "
        "predicted; each time is the median run's, with the 95% band of that median "
        f"(bootstrap over the runs' seeds, {model.BAND_RESAMPLES:,} resamples). The model "
        "was checked against measured runs at "
        + " and ".join(str(w) for w in model.VALIDATED_WORKERS)
        + " cores (docs/scaling.md); the other columns are projected."
    )
    fig = figure(chosen, best_only=True)
    if fig is not None:
        save(fig, out / BENCHMARK_FIGURE)
        section.images.append((BENCHMARK_FIGURE, f"{TITLE}: best ES and best RL per task"))
    rows = []
    for panel in chosen:
        for family, label in (("es", "best ES"), ("rl", "best RL")):
            row: dict[str, str] = {"task": panel.env, "score": f"{panel.target:.4g}", "": label}
            for (c, seconds, algo), band, setting in zip(
                panel.best(family), panel.band(family), panel.picks(family), strict=True
            ):
                row[_cores(c)] = (
                    f"{_seconds(seconds)} {model.band_text(band)} {_named(algo, setting)}"
                    if seconds
                    else "never"
                )
            rows.append(row)
    section.tables.append(("", pd.DataFrame(rows)))
    for panel in chosen:
        text = gated_verdict(panel, (gates or {}).get(panel.env, {}))
        named_algos = [algo for f in ("es", "rl") for _, _, algo in panel.best(f)[:1]]
        machines = panel.machines(named_algos)
        section.after.append(f"{text.removesuffix('.')}; {machines}." if machines else text)
        section.after.append(sample_costs_text(panel, named_algos, assumptions))
    section.after += [*assumptions.lines(), *_notes(chosen)]
    return section
