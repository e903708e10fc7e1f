"""The report's answer, first on its page: per env, the best ES against the best RL.

Each family (``family`` as its algorithm declares it in the registry, never its name) is
represented by its group with the best mean score on the report's leading axis: CPU-seconds
where every run was budgeted in them (``cpu_limit``, or a pair's: ``pair_with``), else
timesteps. The pair is compared
at equal timesteps, at equal CPU-seconds and, where all its runs share a machine, at equal
wall-clock: each at the largest point every run of the pair reached on that axis (on
CPU-seconds, the cheapest run's whole budget, as the benchmark page's "equal CPU at the
cheapest run's budget"), with the 95% interval of the difference of the means
(:func:`harness.report.stats.difference`) and "inconclusive" where it spans 0. A run with
no evaluation close enough to the point (the costlier family's first evaluation may come
after the cheaper family's whole budget) is read at its first evaluation after it: more
compute than the point, in its favour, so a lead it gains that way is not called.

Then the time to a return level: the env's own (``--threshold``, a solved threshold, the
runs' shared target) or a default above the evaluation noise
(:func:`harness.report.stats.default_level`), with confirmations counted where the runs
made them and a warning where the level is inside the noise. ``harness report --compare A
B`` gives the same answer for two groups the user names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from harness.report import audit, stats
from harness.report import data as d
from harness.report.escape import md_text
from harness.report.stats import SCORE_CPU, SCORE_END, SCORE_T
from harness.report.tables import fmt, interval


class ReportBuilder(Protocol):
    """What the answer reads of :class:`harness.report.build.ReportBuilder` (which imports
    this module, so it is named here by its shape)."""

    runs: pd.DataFrame
    steps: pd.DataFrame

    def level_for(self, env: str) -> tuple[float, str] | None: ...

    def _run_times_to(self, level: float) -> dict[str, dict[str, float]]: ...


AXES = {"timesteps": "timesteps", "cpu_seconds": "CPU-seconds", "wall_time_s": "wall-clock"}
UNITS = {"timesteps": "timesteps", "cpu_seconds": "CPU-s", "wall_time_s": "s wall-clock"}
#: The default level's share of the way from the first evaluations to the final scores.
TARGET_FRACTION = 0.9


def family(algo: object) -> str | None:
    """``es`` or ``rl`` as the algorithm declares it; None for one this process does not know."""
    from algorithms.registry import family_of

    declared = family_of(algo)
    return None if declared is None else ("es" if declared == "es" else "rl")


def cpu_led(runs: pd.DataFrame) -> bool:
    """Whether every run was budgeted in CPU-seconds (``cpu_limit``) or ran in an
    equal-compute pair (``paired_with``: the follower stopped at its lead's CPU-seconds)."""
    if not len(runs):
        return False
    budgeted = pd.Series(False, index=runs.index)
    for column in ("budget_cpu_limit", "budget_paired_with"):
        if column in runs:
            budgeted |= runs[column].notna()
    return bool(budgeted.all())


def axes_order(runs: pd.DataFrame) -> list[str]:
    return ["cpu_seconds", "timesteps", "wall_time_s"] if cpu_led(runs) else list(AXES)


def _at(axis: str, value: float) -> str:
    """A point on ``axis``: ``5.12k timesteps``, ``4.3 CPU-s``, ``13.9 s wall-clock``."""
    shown = stats._compact(value) if axis == "timesteps" else f"{value:.1f}"
    return f"{shown} {UNITS[axis]}"


@dataclass
class Point:
    """Two groups' scores at one point of one axis."""

    axis: str
    at: float
    x: str
    y: str
    scores: dict[str, np.ndarray]
    #: group -> where its runs without an evaluation close to the point were read instead
    later: dict[str, list[float]] = field(default_factory=dict)

    @property
    def diff(self) -> stats.Difference:
        return stats.difference(self.scores[self.x], self.scores[self.y])

    def verdict(self) -> str:
        sign = self.diff.sign
        if sign == 0:
            n = min(self.diff.n_x, self.diff.n_y)
            why = "the interval spans 0" if self.diff.has_interval else f"no interval at n={n}"
            return f"inconclusive ({why})"
        ahead = self.x if sign > 0 else self.y
        if self.later.get(ahead):
            return (
                f"not decided: {md_text(ahead)} is ahead only as read at its first evaluation "
                "after the point (more compute than the point)"
            )
        return f"**{md_text(ahead)}** ahead"

    def late_text(self) -> str:
        return "".join(
            f"; {md_text(g)}: {len(xs)} run(s) with no evaluation by then read at their first "
            f"after it (median {_at(self.axis, float(np.median(xs)))}, in their favour)"
            for g, xs in self.later.items()
            if xs
        )


def compare_at(builder: ReportBuilder, env: str, x: str, y: str, axis: str) -> Point | str:
    """The :class:`Point` of groups ``x`` and ``y`` on ``axis``, or why there is none."""
    runs = builder.runs
    pair = runs[(runs["env"] == env) & runs[d.GROUP].isin([x, y])]
    if axis == "wall_time_s":
        machines = pair.apply(audit.machine_key, axis=1).nunique()
        if machines > 1:
            return "not compared: the runs come from unlike machines (host, CPU or CPU count)"
    at = d.common_budget(builder.steps, pair, axis).get(env)
    if at is None or not d.every_run_has(builder.steps, pair, axis):
        return f"not compared: not every run measured {AXES[axis]} at an evaluation"
    values = d.scores_at(builder.steps, pair, axis, {env: at})
    evals = d.eval_points(builder.steps, axis)
    later: dict[str, list[float]] = {}
    for index in values.index[values.isna()]:
        run, group = pair.at[index, "run"], str(pair.at[index, d.GROUP])
        after = evals[(evals["run"] == run) & (evals[axis] >= at)].sort_values(axis)
        if len(after):
            values[index] = float(after["eval_return_mean"].iloc[0])
            later.setdefault(group, []).append(float(after[axis].iloc[0]))
    scores = {g: values[pair[d.GROUP] == g].to_numpy(float) for g in (x, y)}
    return Point(axis, at, x, y, scores, later)


def best_pair(builder: ReportBuilder, env: str) -> tuple[str, str] | str:
    """(best ES group, best RL group) on ``env``, or why there is no pair."""
    runs = builder.runs[builder.runs["env"] == env]
    best: dict[str, tuple[float, str]] = {}
    unknown = []
    for group, frame in runs.groupby(d.GROUP, sort=True):
        kind = family(frame["algo"].iloc[0])
        if kind is None:
            unknown.append(str(group))
            continue
        for column in (SCORE_CPU, SCORE_END) if cpu_led(runs) else (SCORE_T, SCORE_END):
            values = frame[column].to_numpy(float)
            if np.isfinite(values).any():
                mean = float(np.nanmean(values))
                break
        else:
            continue
        if kind not in best or mean > best[kind][0]:
            best[kind] = (mean, str(group))
    if "es" in best and "rl" in best:
        return best["es"][1], best["rl"][1]
    have = {"es": "ES runs", "rl": "RL runs"}.get(next(iter(best), ""), "no scored runs")
    extra = f" (family unknown: {', '.join(map(md_text, unknown))})" if unknown else ""
    return f"only {have} here{extra}, no ES against RL"


def level_of(builder: ReportBuilder, env: str, groups: Sequence[str]) -> list[str]:
    """The time-to-a-level clauses of ``groups`` on ``env`` and, where the level is inside
    the evaluation noise, a warning."""
    runs = builder.runs[(builder.runs["env"] == env) & builder.runs[d.GROUP].isin(groups)]
    evals = d.eval_points(builder.steps, "timesteps").sort_values(["run", "timesteps"])
    evals = evals[evals["run"].isin(set(runs["run"]))]
    first = float(evals.groupby("run")["eval_return_mean"].first().median())
    noise = stats.evaluation_noise(builder.steps, runs)
    found = builder.level_for(env)
    warnings: list[str] = []
    if found is not None:
        level, name = found
    else:
        finals = runs.groupby(d.GROUP)[SCORE_END].median()
        best = float(finals.min()) if finals.notna().all() else math.nan
        level = stats.default_level(first, best, noise, TARGET_FRACTION)
        if math.isnan(level):
            return ["time to a level: none, the final scores are not above the first evaluations"]
        name = (
            f"R = {level:.4g}, the default: {TARGET_FRACTION:g} of the way from the first "
            f"evaluations (median {first:.4g}) to the lower median final score ({best:.4g}), "
            f"at least {stats.NOISE_UNITS:g} x the evaluation noise ({noise:.3g}) above the first"
        )
        warning = stats.noisy_level_warning(best, first, noise, "the lower median final score")
        if warning:
            warnings.append(warning)
    reached = builder._run_times_to(level)
    parts = []
    for group in groups:
        members = runs.loc[runs[d.GROUP] == group, "run"]
        hits = [reached[r] for r in members if r in reached]
        confirmed = [h["confirmed"] for h in hits if not math.isnan(h["confirmed"])]
        said = f"{md_text(group)} {len(hits)} of {len(members)} runs"
        if hits:
            steps = float(np.median([h["timesteps"] for h in hits]))
            cpu = [h["cpu_seconds"] for h in hits if not math.isnan(h["cpu_seconds"])]
            said += f", median {stats._compact(steps)} timesteps" + (
                f" / {float(np.median(cpu)):.1f} CPU-s" if cpu else ""
            )
            said += (
                f", {int(sum(confirmed))} of {len(hits)} confirmed on fresh episodes"
                if confirmed
                else ", unconfirmed first crossings"
            )
        parts.append(said)
    lines = [f"time to {name}: " + "; ".join(parts)]
    warning = stats.noisy_level_warning(level, first, noise, "the level")
    return lines + [f"**Warning:** {md_text(w)}" for w in [*warnings, warning] if w]


def pair_line(builder: ReportBuilder, env: str, x: str, y: str, roles: tuple[str, str]) -> str:
    """One line: ``x`` against ``y`` on every axis, then the time to a level."""
    runs = builder.runs[builder.runs["env"] == env]
    parts = []
    for axis in axes_order(runs[runs[d.GROUP].isin([x, y])]):
        point = compare_at(builder, env, x, y, axis)
        if isinstance(point, str):
            parts.append(f"at equal {AXES[axis]}: {point}")
            continue
        diff = point.diff
        parts.append(
            f"at {_at(axis, point.at)} each {point.verdict()}: "
            f"{md_text(x)} {fmt(diff.mean_x)} against {md_text(y)} {fmt(diff.mean_y)}, "
            f"{diff.text()}, P({md_text(x)} > {md_text(y)}) {diff.poi_text()}{point.late_text()}"
        )
    label = f"{md_text(x)}{roles[0]} against {md_text(y)}{roles[1]}"
    return f"- On **{md_text(env)}**, {label}: " + "; ".join(parts + level_of(builder, env, [x, y]))


def table(builder: ReportBuilder, pairs: Sequence[tuple[str, str, str]]) -> pd.DataFrame:
    """Per (env, pair, axis): both groups' means with intervals, the difference and P(X > Y)."""
    rows = []
    for env, x, y in pairs:
        runs = builder.runs[(builder.runs["env"] == env) & builder.runs[d.GROUP].isin([x, y])]
        for axis in axes_order(runs):
            point = compare_at(builder, env, x, y, axis)
            if isinstance(point, str):
                continue

            def shown(group: str, point: Point = point) -> str:
                s = stats.group_stats(point.scores[group])
                if not s.has_interval:
                    return f"{fmt(s.mean)} (n={s.n})"
                return f"{fmt(s.mean)} {interval(s.mean_low, s.mean_high)} (n={s.n})"

            diff = point.diff
            rows.append(
                {
                    "env": env,
                    "X against Y": f"{x} against {y}",
                    "at equal": _at(axis, point.at),
                    "X mean": shown(x),
                    "Y mean": shown(y),
                    "X - Y (95% CI)": diff.text().removeprefix("difference "),
                    "P(X > Y)": diff.poi_text(),
                    "verdict": point.verdict().replace("**", ""),
                }
            )
    return pd.DataFrame(rows)


def resolve(builder: ReportBuilder, env: str, name: str) -> str | None:
    """The group ``name`` names on ``env``: a group label, or an algorithm with one group."""
    groups = builder.runs.loc[builder.runs["env"] == env, [d.GROUP, "algo"]].drop_duplicates()
    if name in set(groups[d.GROUP].astype(str)):
        return name
    mine = groups[groups["algo"].astype(str) == name]
    return str(mine[d.GROUP].iloc[0]) if len(mine) == 1 else None


def answer(builder: ReportBuilder, compare: Sequence[str] = ()) -> tuple[list[str], pd.DataFrame]:
    """The answer's lines (one per env, and per env where both ``compare`` groups ran) and
    its table."""
    lines, pairs = [], []
    for env in sorted(builder.runs["env"].astype(str).unique()):
        found = best_pair(builder, env)
        if isinstance(found, str):
            lines.append(f"- On **{md_text(env)}**: {found}.")
            continue
        pairs.append((env, *found))
        lines.append(pair_line(builder, env, *found, roles=(" (best ES)", " (best RL)")) + ".")
    if compare:
        named = False
        for env in sorted(builder.runs["env"].astype(str).unique()):
            x, y = (resolve(builder, env, name) for name in compare)
            if x is None or y is None or x == y:
                continue
            named = True
            pairs.append((env, x, y))
            lines.append(pair_line(builder, env, x, y, roles=("", "")) + " (`--compare`).")
        if not named:
            lines.append(
                f"- `--compare {' '.join(map(md_text, compare))}`: no env has both as groups "
                "(a group label, or an algorithm with one group there)."
            )
    return lines, table(builder, list(dict.fromkeys(pairs)))
