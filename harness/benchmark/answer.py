"""The benchmark page's answer and its fairness sections, from :mod:`harness.benchmark.fairness`.

BENCHMARK.md opens with one sentence per task: the best ES against the best RL (each
family's best mean score at equal timesteps) at each comparison point, with 95% intervals
or "inconclusive", and the sanity gate where the RL entry fails it. Below the leader table
(whose columns :func:`leader_columns` gives) come, folded: the time each family needs to a
share of the best RL's score (Salimans et al. 2017, Table 1 in form), the known defects,
the asymmetries between cells, and the family-against-family aggregate.

Every number here is computed from the run archives; the words around them are fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.benchmark.fairness import (
    ANCHOR_SHARE,
    FEW_GENERATIONS,
    LAST_EVALUATIONS,
    Crossing,
    EqualComputePoint,
    Provenance,
    TaskFacts,
    asymmetry_rows,
    equal_compute_point,
    number,
    steps_text,
    time_to_share,
)
from harness.report import stats
from harness.report.render import Section
from harness.report.tables import fmt, interval

#: The leader table's columns this module fills (after task, cells done and budget).
EQUAL_TIMESTEPS = "at equal timesteps"
EQUAL_CPU = "equal CPU at the cheapest run's budget: early in RL training"
FULL_BUDGET = "equal compute at the RL family's full budget"
ANCHORS = "RL against its published anchor"
DEFECTS = "known defects (below)"
SALIMANS = (
    'Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to Reinforcement '
    'Learning" (arXiv:1703.03864), Table 1'
)


# -- comparing two groups ------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Two algorithms' scores at one point, by the page's rule: a leader only where the 95%
    interval of the difference of the means (bootstrap of the difference, each side's runs
    resampled apart, n >= 3) lies above 0."""

    first: str  # the higher mean
    second: str
    a: stats.GroupStats
    b: stats.GroupStats
    difference: stats.Difference  # first's mean minus second's

    @property
    def conclusive(self) -> bool:
        return self.difference.sign > 0

    def difference_text(self) -> str:
        """``difference 2,657 [1,923, 3,361]`` (the leader's mean minus the other's)."""
        d = self.difference
        bounds = f" {ci(d.low, d.high)}" if d.has_interval else ""
        return f"difference {number(d.value)}{bounds}"

    def value(self, which: str) -> str:
        group = self.a if which == self.first else self.b
        if group.n >= stats.MIN_RUNS_INTERVAL:
            return f"{number(group.mean)} {ci(group.mean_low, group.mean_high)}"
        return f"{number(group.mean)} (n={group.n})"


def ci(low: float, high: float) -> str:
    """A 95% interval in a sentence: ``[5,135, 5,997]``."""
    return f"[{number(low)}, {number(high)}]"


def compare(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> Comparison | None:
    """:class:`Comparison` of two groups' finite scores; None where either has none."""
    ga, gb = stats.group_stats(a), stats.group_stats(b)
    if not ga.n or not gb.n:
        return None
    if gb.mean > ga.mean:
        name_a, name_b, ga, gb, a, b = name_b, name_a, gb, ga, b, a
    return Comparison(name_a, name_b, ga, gb, stats.difference(a, b))


def sentence_part(comparison: Comparison | None, es: str, rl: str, gate: str | None) -> str:
    """``ppo leads, optimes 1,827 [578, 2,974] against ppo 5,600 [5,117, 6,036]``, or
    ``inconclusive, ...``, or (a cell of the pair fails its gate, which the sentence names
    once) the values alone; ES first."""
    if comparison is None:
        return "no scores yet"
    values = f"{es} {comparison.value(es)} against {rl} {comparison.value(rl)}"
    if gate:
        return values
    values += f", {comparison.difference_text()}"
    if comparison.conclusive:
        return f"{comparison.first} leads, {values}"
    return f"inconclusive, {values}"


def cell_text(comparison: Comparison | None) -> str:
    """The leader table's form: ``**ppo** 5,600 (n=5) over optimes 1,827; intervals ...``."""
    if comparison is None:
        return "—"
    a, b = comparison.a, comparison.b
    described = (
        f"**{comparison.first}** {fmt(a.mean)} (n={a.n}) over {comparison.second} {fmt(b.mean)}"
    )
    if min(a.n, b.n) < stats.MIN_RUNS_INTERVAL:
        return f"inconclusive (n < {stats.MIN_RUNS_INTERVAL}): {described}"
    d = comparison.difference
    difference = f"difference {fmt(d.value)} {interval(d.low, d.high)}"
    if comparison.conclusive:
        return f"{described}; {difference}"
    return f"inconclusive: {described}; {difference} spans 0"


def _run_cost(facts: TaskFacts, es: str, rl: str) -> str:
    """`` (CPU-s a run to its budget: optimes 110, ppo 850)``: each side's median over its
    grid runs, as off-policy RL buys its samples with compute; empty where either is
    unknown."""
    grid = facts.facts
    costs = [float(grid.loc[grid["algo"] == algo, "cpu_seconds"].median()) for algo in (es, rl)]
    if not all(math.isfinite(cost) for cost in costs):
        return ""
    return f" (CPU-s a run to its budget: {es} {costs[0]:,.0f}, {rl} {costs[1]:,.0f})"


def _scores(facts: TaskFacts, algo: str, axis: str) -> np.ndarray:
    runs = facts.scores.runs
    return runs.loc[runs["algo"] == algo, f"score_{axis}"].to_numpy(float)


def _unscored(facts: TaskFacts, axis: str, *algos: str) -> str:
    """Why a point compares nothing: who of ``algos`` has no score there, and why."""
    missing = [a for a in algos if not np.isfinite(_scores(facts, a, axis)).any()]
    if not missing or len(missing) == len(algos):
        return "no scores yet"
    return (
        f"not compared: {' and '.join(missing)} had no evaluation close to it (none by "
        "then, or the nearest either side further apart than the point itself)"
    )


def _gate(facts: TaskFacts, *algos: str) -> str | None:
    flagged = facts.flagged_gates()
    texts = [flagged[a] for a in algos if a in flagged]
    return "; ".join(texts) if texts else None


# -- where RL is at the cheapest run's CPU-seconds -----------------------------------------------


def rl_progress(facts: TaskFacts, cpu_seconds: float) -> float:
    """The share of its budget the RL family-best had trained at ``cpu_seconds`` (the
    median over its runs of the timesteps interpolated there, over its budget)."""
    rl = facts.best.get("rl")
    table = facts.scores.table
    if rl is None or table is None or not math.isfinite(cpu_seconds):
        return math.nan
    frame = facts.facts[facts.facts["algo"] == rl]
    steps = table.steps
    reached = []
    for run in frame.index:
        rows = steps[(steps["run"] == run) & steps["cpu_seconds"].notna()]
        rows = rows[rows["timesteps"].notna()].sort_values("cpu_seconds")
        if len(rows):
            reached.append(
                float(
                    np.interp(cpu_seconds, rows["cpu_seconds"].to_numpy(float), rows["timesteps"])
                )
            )
    budget = float(frame["timesteps"].median()) if len(frame) else math.nan
    if not reached or not math.isfinite(budget) or budget <= 0:
        return math.nan
    return float(np.median(reached)) / budget


# -- the full-budget point -----------------------------------------------------------------------


def full_budget_text(point: EqualComputePoint | None, facts: TaskFacts, *, cell: bool) -> str:
    """The equal-compute point: the best ES's comparison with the RL there (and, where that
    ES has fewer runs than an interval needs, each ES of the pair with more), then what is
    not run yet (cells and CPU-hours, from the archive's CPU-seconds)."""
    if point is None:
        return "—"
    parts = []
    known = {a: v for a, v in point.scores.items() if np.isfinite(v).any()}
    ranked = sorted(known, key=lambda a: float(np.nanmean(known[a])), reverse=True)

    def runs(algo: str) -> int:
        return int(np.isfinite(known[algo]).sum())

    # the best ES by mean, and where it has too few runs for an interval, each ES of the
    # pair with more: a lead of one run must not hide a comparison that has its runs
    shown = ranked[:1] + [
        a
        for a in ranked[1:]
        if runs(ranked[0]) < stats.MIN_RUNS_INTERVAL and runs(a) > runs(ranked[0])
    ]
    for es in shown:
        comparison = compare(es, known[es], point.rl, point.rl_scores)
        gate = _gate(facts, point.rl, es)
        if cell:
            # a gated pair still shows its values, as the sentence does, but ranks neither
            gated = f"{sentence_part(comparison, es, point.rl, gate)} (not ranked: {gate})"
            parts.append(gated if gate else cell_text(comparison))
        else:
            parts.append(sentence_part(comparison, es, point.rl, gate))
    if point.cells_missing:
        algos = ", ".join(a for a in point.es if point.missing.get(a))
        limit = point.planned_limit if point.planned_limit is not None else point.cpu_seconds
        if point.paired:
            planned = f"planned as pairs of {algos} each beside a run of {point.rl}"
        elif point.planned_limit is not None:
            planned = f"planned as {algos} with --cpu-limit {limit:,.0f}"
        else:
            planned = f"not planned: {algos} with --cpu-limit {point.cpu_seconds:,.0f}"
        parts.append(
            f"not run yet: {point.cells_missing} cells, ~{point.cpu_hours_missing:.1f} "
            f"CPU-hours ({planned})"
        )
        if point.planned_limit is not None and not math.isclose(
            point.planned_limit, point.cpu_seconds, rel_tol=0.05
        ):
            parts.append(
                f"{point.rl}'s median is now {point.cpu_seconds:,.0f} CPU-s: the planned "
                "limit needs updating"
            )
    return "; ".join(parts) if parts else "—"


# -- the answer ----------------------------------------------------------------------------------


def answer_sentence(facts: TaskFacts, own_budgets: dict[str, float]) -> str:
    """One sentence: the best ES against the best RL at each comparison point."""
    task = facts.task
    es, rl = facts.best.get("es"), facts.best.get("rl")
    if es is None or rl is None:
        have = es or rl
        return f"**{task.env}**: only {have or 'no'} runs so far; no comparison yet."
    gate = _gate(facts, es, rl)
    at = facts.scores.at
    parts = [
        f"at equal timesteps ({steps_text(at['timesteps'])}) "
        + sentence_part(
            compare(es, _scores(facts, es, "timesteps"), rl, _scores(facts, rl, "timesteps")),
            es,
            rl,
            gate,
        )
        + _run_cost(facts, es, rl)
    ]
    progress = rl_progress(facts, at["cpu_seconds"])
    early = f", {rl} {progress:.0%} into its training" if math.isfinite(progress) else ""
    cheapest = compare(es, _scores(facts, es, "cpu_seconds"), rl, _scores(facts, rl, "cpu_seconds"))
    parts.append(
        f"at equal CPU at the cheapest run's budget ({at['cpu_seconds']:,.0f} CPU-s{early}) "
        + (
            sentence_part(cheapest, es, rl, gate)
            if cheapest is not None
            else _unscored(facts, "cpu_seconds", es, rl)
        )
    )
    point = equal_compute_point(facts)
    if point is not None:
        from_runs = [a for a, source in point.source.items() if source == "archive"]
        note = f"; {', '.join(from_runs)} from its runs up to there" if from_runs else ""
        if point.paired:
            note += (
                f"; each ES run stopped at the CPU-seconds of a {point.rl} run beside it on "
                "the same machine at the same time, "
                + (
                    "every pair on a CPU named "
                    if len(point.machines) == 1
                    else "pairs on CPUs named "
                )
                + " and ".join(point.machines)
                + " (a name that can cover machines of different speed; a pair's two runs "
                "share one)"
                + (f", but {point.split} pairs name two CPU models" if point.split else "")
            )
        parts.append(
            f"at equal compute at {point.rl}'s full budget ({point.cpu_seconds:,.0f} CPU-s{note}) "
            + full_budget_text(point, facts, cell=False)
        )
    if own_budgets.get(es) != own_budgets.get(rl):
        parts.append(
            f"each at its own budget ({es} {steps_text(own_budgets.get(es, math.nan))}, "
            f"{rl} {steps_text(own_budgets.get(rl, math.nan))}) "
            + sentence_part(
                compare(es, _scores(facts, es, "final"), rl, _scores(facts, rl, "final")),
                es,
                rl,
                gate,
            )
        )
    ran = set(facts.scores.runs["algo"])
    not_run = [a for a in task.algos if a not in ran]
    pending = f" Not run yet: {', '.join(not_run)}." if not_run else ""
    on_policy_only = not any(_is_off_policy(a) for a in ran if _is_rl(a))
    flaws = {
        algo: [d.short for d in facts.defects if d.algo == algo and d.kind != "generations"]
        for algo in (es, rl)
    }
    pair = ", ".join(f"{algo} ({'; '.join(f)})" for algo, f in flaws.items() if f)
    if pair:
        pending = f" Known defects of the pair: {pair}." + pending
    verdict = f", no verdict ({gate})" if gate else ""
    scope = ", on-policy RL only" if on_policy_only else ""
    return (
        f"**{task.env}**, {es} (best ES) against {rl} (best RL{scope}){verdict}: "
        + "; ".join(parts)
        + "."
    ) + pending


def _endpoint_words(all_facts: Sequence[TaskFacts], priced: dict[str, EqualComputePoint]) -> str:
    """Which final scores are endpoint evaluations (``endpoint_episodes``: the final policy
    on episodes every run shares) and which the mean of the last evaluations."""
    whole = [f.task.env for f in all_facts if f.scores.endpoints]
    pairs = [env for env, p in priced.items() if p.endpoints]
    if not whole and not pairs:
        return (
            " A final score (each at its own budget, and at equal compute) is the mean of "
            f"the run's last {LAST_EVALUATIONS} evaluations: no task has an endpoint "
            "evaluation (the final policy on episodes the same for every run, "
            "`endpoint_episodes`) from every one of its runs yet."
        )

    counts = sorted(
        {
            int(v)
            for f in all_facts
            if f.scores.table is not None and "endpoint_episodes" in f.scores.table.steps
            for v in f.scores.table.steps["endpoint_episodes"].dropna()
        }
    )
    episodes = "/".join(map(str, counts))
    where = [f"on {', '.join(whole)} at their own budgets"] if whole else []
    where += [f"on {', '.join(pairs)} at equal compute"] if pairs else []
    return (
        f" Final scores are endpoint evaluations (the final policy on {episodes} episodes whose "
        f"seeds are the same for every run and algorithm) {' and '.join(where)}; elsewhere "
        f"the mean of the run's last {LAST_EVALUATIONS} evaluations (a task's runs made "
        "before endpoints were recorded have none, and the two are not mixed)."
    )


def opening(
    all_facts: Sequence[TaskFacts],
    own_budgets: dict[str, dict[str, float]],
    confirmed: bool,
    tasks: Sequence[str] = (),
) -> list[str]:
    """The page's first paragraphs: the answer per task, what each point measures, how a
    score is taken. ``tasks``: every task of the benchmark, also those without runs (an
    equal-compute limit is priced only once both families have runs there)."""
    answer = "\n".join(
        f"- {answer_sentence(f, own_budgets.get(f.task.env, {}))}" for f in all_facts
    )
    progress = [
        f"{f.task.env} {rl_progress(f, f.scores.at['cpu_seconds']):.0%}"
        for f in all_facts
        if f.best.get("rl") and math.isfinite(rl_progress(f, f.scores.at["cpu_seconds"]))
    ]
    priced = {f.task.env: p for f in all_facts if (p := equal_compute_point(f)) is not None}
    cells = sum(p.cells_missing for p in priced.values())
    hours = sum(p.cpu_hours_missing for p in priced.values())
    unpriced = [env for env in tasks if env not in priced]
    points = "\n".join(
        [
            "- **At equal timesteps**: every algorithm after the same number of env steps "
            "(the task's budget; where budgets differ, the smallest): sample efficiency.",
            "- **Equal CPU at the cheapest run's budget** (early in RL training): the "
            "CPU-seconds the task's cheapest run spent on its whole budget. The ES have "
            "finished there; the best RL had trained this share of its timesteps: "
            + (", ".join(progress) if progress else "—")
            + ". It ranks what each family does with little compute, not what it reaches.",
            "- **Equal compute at the RL family's full budget**: optimes and the best other "
            "ES given the CPU-seconds the RL spends on its whole budget (the `equal_compute` "
            "cells of experiments/benchmark.yaml), against that RL at its full budget: what "
            "the same compute buys each family. Where the task runs them as pairs, each ES "
            "run ran beside a run of that RL on the same machine at the same time, each on a "
            "core of its own, and stopped at the CPU-seconds that run used (harness/pairing.py); "
            "elsewhere the ES trained to a fixed CPU limit (`harness run --cpu-limit`), the "
            "RL's median CPU-seconds per run in the archive. "
            + (
                f"Not run yet: {cells} cells, ~{hours:.1f} CPU-hours."
                if cells
                else f"Not priced yet on {', '.join(unpriced)}: its CPU limit is the RL "
                "family's CPU-seconds there, and that needs completed runs of both families."
                if unpriced
                else "Every cell it needs has run."
            ),
            "- **Each at its own budget** (where budgets differ): each algorithm after its "
            "published budget.",
        ]
    )
    endpoints = (
        f"A score at equal timesteps, at equal compute or at an algorithm's own budget is the "
        f"mean of the run's last {LAST_EVALUATIONS} evaluations up to that point (the last "
        "interpolated at the point where the run went past it); at equal CPU at the "
        "cheapest run's budget, the one return interpolated there (RL is early in training: a "
        "mean would reach back to its start). No score is read off the line between two "
        "evaluations further apart than the point itself (an RL run's first evaluation "
        "after its start can come minutes of CPU later). The best ES and the best RL of a task are "
        "each family's best mean score at equal timesteps. An RL cell scoring below half the "
        "way from the random policy to its published anchor (rl-baselines3-zoo "
        "benchmark.md), or any cell with fewer runs than seeds, fails its sanity gate and "
        "is named instead of ranked."
        + _endpoint_words(all_facts, priced)
        + " Times to a level are each run's first evaluation at or above it: unconfirmed "
        "first crossings ("
        + (
            "a run's confirmation episodes check its own target, not these levels"
            if confirmed
            else "no run of the benchmark recorded confirmation episodes"
        )
        + ")."
    )
    return ["**The answer, per task.**", answer, "**The comparison points.**", points, endpoints]


# -- the leader table ----------------------------------------------------------------------------


def _defect_summary(facts: TaskFacts) -> str:
    grouped: dict[str, list[str]] = {}
    generations = []
    for defect in facts.defects:
        if defect.kind == "generations":
            generations.append(f"{defect.algo} {defect.short.split()[0]}")
        else:
            grouped.setdefault(defect.short, []).append(defect.algo)
    parts = [f"{', '.join(dict.fromkeys(a))}: {short}" for short, a in grouped.items()]
    if generations:
        parts.append(f"under {FEW_GENERATIONS} generations: {', '.join(generations)}")
    return "; ".join(parts) if parts else "none found"


def leader_columns(facts: TaskFacts | None, leader: Any) -> dict[str, str]:
    """The leader table's columns for one task. ``leader``: the report's ``leader_text``
    (who leads at equal timesteps and at equal CPU, the gated cells not ranked)."""
    if facts is None:
        return dict.fromkeys((EQUAL_TIMESTEPS, EQUAL_CPU, FULL_BUDGET, ANCHORS, DEFECTS), "—")
    gated = facts.flagged_gates()
    anchors = "; ".join(
        f"{algo} {gate.anchor_text()}"
        + (" — **below its anchor**" if gate.below_anchor else "")
        + gate.parity_text()
        for algo, gate in facts.gates.items()
        if _is_rl(algo)
    )
    return {
        EQUAL_TIMESTEPS: leader(facts.scores, "timesteps", gated),
        EQUAL_CPU: leader(facts.scores, "cpu_seconds", gated),
        FULL_BUDGET: full_budget_text(equal_compute_point(facts), facts, cell=True),
        ANCHORS: anchors or "—",
        DEFECTS: _defect_summary(facts),
    }


def _is_rl(algo: str) -> bool:
    from algorithms.registry import family_of

    return (family_of(algo) or "es") != "es"


def _is_off_policy(algo: str) -> bool:
    """Whether the algorithm declares that it learns off-policy (SAC, TD3, TQC)."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    try:
        return bool(getattr(get_algorithm(algo), "off_policy", False))
    except AlgorithmRegistryError:
        return False


def gates_paragraph() -> str:
    """The rule of the sanity gates, under the leader table."""
    return (
        f"Sanity gates: each RL cell is set beside its algorithm's published score on the "
        "same env (rl-baselines3-zoo benchmark.md, one training run, at the zoo's budget; "
        "MuJoCo rows are on v3) and is not ranked where its mean final score is below "
        f"{ANCHOR_SHARE:.0%} of the way from the random policy's score to that anchor, or "
        "where it has fewer completed runs than the benchmark has seeds (any cell). The "
        "anchors are in experiments/anchors.yaml with their sources. Where a cell was also "
        "trained by rl-baselines3-zoo's own train.py at the same settings and seeds "
        "(reports/zoo_parity/parity.md, drawn by scripts/zoo_parity.py), its anchor column "
        "sets that run beside the harness's: a gap to the anchor that the zoo's own trainer "
        "shows too is the settings' or the env version's, not the harness's."
    )


# -- folded sections -----------------------------------------------------------------------------


def _times(value: float, crossing: Crossing, fmt: Any) -> str:
    if crossing.n == 0:
        return "—"
    count = f"{crossing.reached}/{crossing.n}"
    if crossing.extended:
        count += f", {crossing.extended} in equal-compute runs"
    if not math.isfinite(value):
        return f"not within its budget ({count})"
    return f"{fmt(value)} ({count})"


def _ratio(value: float) -> str:
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "not within the budget"
    return f"{value:.2f}"


def salimans_section(all_facts: Sequence[TaskFacts]) -> Section:
    """Per task and share of the best RL's learning progress: the timesteps and CPU-seconds
    the best ES and the best RL need to get there, and their ratio (ES over RL)."""
    rows = []
    for facts in all_facts:
        gate = _gate(facts, facts.best.get("rl", ""), facts.best.get("es", ""))
        for row in time_to_share(facts):
            rows.append(
                {
                    "task": facts.task.env,
                    "ES against RL": f"{row.es.algo} against {row.rl.algo}"
                    + (" (RL fails its gate)" if gate else ""),
                    "share of RL's progress": f"{row.share:.0%}",
                    "level": number(row.level),
                    "ES timesteps": _times(row.es.timesteps, row.es, steps_text),
                    "RL timesteps": _times(row.rl.timesteps, row.rl, steps_text),
                    "ES/RL timesteps": _ratio(row.ratio("timesteps")),
                    "ES CPU-s": _times(row.es.cpu_seconds, row.es, lambda v: f"{v:,.0f}"),
                    "RL CPU-s": _times(row.rl.cpu_seconds, row.rl, lambda v: f"{v:,.0f}"),
                    "ES/RL CPU-s": _ratio(row.ratio("cpu_seconds")),
                }
            )
    return Section(
        "Time to a share of the best RL's score",
        paragraphs=[
            f"In the form of {SALIMANS} (ES timesteps over TRPO timesteps to reach 25%, 50% "
            "and 75% of TRPO's learning progress): per task, the best ES against the best RL; "
            "a level is the random policy's score plus that share of the way to the best RL's "
            f"mean final score (the mean of its runs' last {LAST_EVALUATIONS} evaluations). "
            "Each side: the median over its runs of the first evaluation at or above the "
            "level (an unconfirmed first crossing; a run that stopped at its budget below the "
            "level is continued by its seed's equal-compute run where there is one, trained on "
            "to the RL's CPU-seconds and evaluated more sparsely; one that got there in "
            "neither counts as not there within its budget, and so does the median once half "
            "its runs did not get there), with how many runs got there. A ratio below 1 says the "
            "ES got there first. The resolution is the evaluation interval (50k timesteps; "
            "200k on AntBulletEnv)."
        ],
        tables=[("", pd.DataFrame(rows))] if rows else [],
        folded=True,
    )


def defects_section(all_facts: Sequence[TaskFacts]) -> Section:
    """Every known defect found in the runs' recorded configs and metrics, per cell."""
    rows = [
        {"task": d.env, "algorithm": d.algo, "found in the archive": d.text}
        for facts in all_facts
        for d in facts.defects
    ]
    matching = [line for facts in all_facts for line in facts.matching]
    return Section(
        "Known defects, until the reruns land",
        paragraphs=[
            "Found in what each archived run recorded (its config.json, policy_spec.json and "
            "metrics), not in the settings files, so a fix in the settings leaves these runs "
            "labelled until they are run again: an RL run whose SB3 network equals the ES "
            "policy section; on MuJoCo tasks, an ES without observation normalisation or "
            "with statistics from a share of its rollouts; an ES of under "
            f"{FEW_GENERATIONS} generations at its budget (budget / (population x episodes "
            "x mean episode length)); settings that differ from the published ones a cell is "
            "compared with (experiments/provenance.yaml, reference_settings); a reward "
            "transform used in training; archived runs whose cell the shipped settings no "
            "longer build (they changed since the runs ran)."
        ],
        tables=[("", pd.DataFrame(rows))] if rows else [],
        after=[f"Checked: {' '.join(matching)}"] if matching else [],
        folded=True,
    )


def asymmetries_section(all_facts: Sequence[TaskFacts], provenance: Provenance) -> Section:
    """Per task and algorithm: what differs between cells besides the algorithm."""
    rows = [row for facts in all_facts for row in asymmetry_rows(facts, provenance)]
    return Section(
        "Asymmetries between cells",
        paragraphs=[
            "Per task and algorithm, from the runs' records: parameters trained (ES: the "
            "policy's; RL: SB3's count for actor, critic and log-std), the network, the "
            "reward trained on (every evaluation is on the env's own), observation "
            "normalisation, and who chose the settings, on what and on which seeds "
            "(experiments/provenance.yaml, with its sources). Held-out seeds start at 100."
        ],
        tables=[("", pd.DataFrame(rows))] if rows else [],
        folded=True,
    )


@dataclass
class FamilyAggregate:
    """The family-against-family aggregate's inputs."""

    matrix: dict[str, np.ndarray]
    envs: list[str]
    picks: dict[str, tuple[str, str]]  # env -> (best ES, best RL)
    left_out: dict[str, str] = field(default_factory=dict)  # env -> why
    pending: dict[str, str] = field(default_factory=dict)  # env -> algorithms not run yet


ES_FAMILY, RL_FAMILY = "ES family-best", "RL family-best"


def family_matrix(all_facts: Sequence[TaskFacts], axis: str = "timesteps") -> FamilyAggregate:
    """Normalised scores of each family's best per task and the seeds they share, over the
    tasks where every algorithm that has started completed on every seed, both families have
    one, and neither family's best is below its sanity gate (then the task has no verdict).
    An algorithm with no run yet is named in ``pending``, not waited for."""
    usable, picks, left_out, pending = [], {}, {}, {}
    for facts in all_facts:
        runs = facts.scores.runs
        counts = runs.groupby("algo").size()
        short = [
            f"{a}: {int(counts.get(a, 0))} of {facts.planned_runs} runs"
            for a in facts.task.algos
            if 0 < int(counts.get(a, 0)) < facts.planned_runs
        ]
        es, rl = facts.best.get("es"), facts.best.get("rl")
        gated = [a for a in (es, rl) if a in facts.flagged_gates()]
        if short or es is None or rl is None or gated:
            why = short or [f"{a} below its sanity gate" for a in gated] or ["one family only"]
            left_out[facts.task.env] = "; ".join(why)
            continue
        usable.append(facts)
        picks[facts.task.env] = (es, rl)
        waiting = [a for a in facts.task.algos if int(counts.get(a, 0)) == 0]
        if waiting:
            pending[facts.task.env] = ", ".join(waiting)
    matrix: dict[str, np.ndarray] = {}
    if usable:
        seeds = set.intersection(
            *[
                set(f.scores.runs.loc[f.scores.runs["algo"] == algo, "seed"])
                for f in usable
                for algo in picks[f.task.env]
            ]
        )
        ordered = sorted(seeds)
        if len(ordered) >= stats.MIN_RUNS_INTERVAL:
            for name, index in ((ES_FAMILY, 0), (RL_FAMILY, 1)):
                columns = []
                for f in usable:
                    algo = picks[f.task.env][index]
                    frame = f.scores.runs[f.scores.runs["algo"] == algo].set_index("seed")
                    columns.append(
                        f.scores.normalise(frame.loc[ordered, f"score_{axis}"].to_numpy(float))
                    )
                matrix[name] = np.stack(columns, axis=1)
    return FamilyAggregate(matrix, [f.task.env for f in usable], picks, left_out, pending)


def family_section(
    all_facts: Sequence[TaskFacts],
    out: Path,
    reps: int,
    draft: str,
    aggregate_figures: Callable[..., Any],
    improvement_rows: Callable[..., Any],
) -> Section:
    """Family against family: each represented per task by what it really runs, drawn by
    the report's own ``aggregate_figures`` and ``improvement_rows`` (passed in: the report
    imports this module)."""

    aggregate = family_matrix(all_facts)
    title = "Family against family at equal timesteps"
    left = "; ".join(f"{env} ({why})" for env, why in aggregate.left_out.items())
    if not aggregate.matrix:
        return Section(
            title,
            paragraphs=[
                "Not drawn yet: no task has every algorithm of both families completed on "
                f"every seed. Left out: {left or '—'}."
            ],
        )
    table, images = aggregate_figures(aggregate.matrix, out, "family_timesteps", reps)
    families = {ES_FAMILY: "es", RL_FAMILY: "rl"}

    def pick(env: str, es: str, rl: str) -> str:
        waiting = aggregate.pending.get(env)
        return f"{env}: {es} against {rl}" + (f" (not run yet: {waiting})" if waiting else "")

    picks = "; ".join(pick(env, es, rl) for env, (es, rl) in aggregate.picks.items())
    n_runs = next(iter(aggregate.matrix.values())).shape[0]
    used = [f for f in all_facts if f.task.env in aggregate.envs]
    es_counts = sorted({sum(1 for a in f.task.algos if not _is_rl(a)) for f in used})
    rl_counts = sorted({sum(1 for a in f.task.algos if _is_rl(a)) for f in used})

    def span(counts: list[int]) -> str:
        return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}"

    return Section(
        title,
        paragraphs=[
            "Each family represented on each task by its best algorithm there (its best mean "
            f"score at equal timesteps): {picks}. Normalised scores over the "
            f"{len(aggregate.envs)} task(s) complete for both families and {n_runs} seeds "
            f"each: IQM and mean with 95% stratified-bootstrap intervals (rliable{draft}), "
            "the probability that the ES family-best beats the RL family-best on a run, and "
            "performance profiles. Picking each family's best on the same runs favours the "
            f"family with more algorithms per task (here {span(es_counts)} ES against "
            f"{span(rl_counts)} RL). "
            f"Left out: {left or 'none'}."
        ],
        images=[(images[0], "IQM and mean of each family's best at equal timesteps")],
        tables=[
            ("", table),
            ("Probability of improvement", improvement_rows(aggregate.matrix, families, reps)),
        ],
        after=[f"![performance profiles of each family's best at equal timesteps]({images[1]})"],
    )
