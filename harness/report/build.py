"""Assemble a comparison report from stored runs: figures, tables, Markdown, HTML, CSV."""

from __future__ import annotations

import contextlib
import copy
import math
import re
import shlex
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import rundir, speed
from harness.commands import terminal_text, warn
from harness.cputime import MIN_CPU_COMPARED_S
from harness.records import RunTable, flatten_config, load_runs, read_population
from harness.report import anchors as anchor_mod
from harness.report import answer as answer_mod
from harness.report import audit, diversity, frames, plots, scaling, settings, stats, tables
from harness.report import data as d
from harness.report import filters as filter_mod
from harness.report.escape import csv_frame, md_code, md_text
from harness.report.render import Document, Section, slug, to_html, to_markdown
from harness.report.stats import SCORE_CPU, SCORE_END, SCORE_T, SCORE_W

OUTPUTS = ("report.md", "report.html", "runs.csv", "summary.csv")
#: The run archive a committed report carries beside its outputs.
ARCHIVE_NAME = "runs.tar.xz"
#: Per-run score columns added to the runs frame.
SETTINGS_TITLE = "Settings behind every curve"
APPENDIX_SETTINGS = "Appendix A: every setting of every group"
APPENDIX_COMMANDS = "Appendix B: commands that reproduce each run"
RESULT_TITLE = "Result"
SCORES_TITLE = "Scores at the common budget"
CURVE_TITLE = "Evaluation return against timesteps"
THRESHOLD_TITLE = "Time to the threshold"
#: Config columns a grid of one hyperparameter never varies in (the report's own factors,
#: compared in their own sections, and identity).
NOT_GRID = frozenset({"algo", "env", "episodes_per_fitness", "workers", "n_params"})


class ReportError(ValueError):
    """Nothing to report on; the message is one line."""


def _code_list(items: Sequence[str]) -> str:
    return ", ".join(md_code(item) for item in items)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def _short(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.3g}"


class ReportBuilder:
    def __init__(
        self,
        table: RunTable,
        out: Path,
        map_runs: int,
        map_method: str = "pca",
        anchors: list[anchor_mod.Anchor] | None = None,
        threshold: float | None = None,
        compare: Sequence[str] = (),
    ) -> None:
        self.table = table
        self.threshold = threshold
        self.compare = tuple(compare)
        self.out = out
        self.map_runs = map_runs
        self.map_method = map_method
        self.anchors = anchors or []
        self.steps = d.carry_cpu_seconds(table.steps)
        configs = [record.config for record in table.records.values()]
        runs = d.run_extras(table.runs, table.records, table.steps)
        # A run stopped before it stored its final parameters has no parameter count: that
        # is a missing record, not a different configuration from its completed seeds.
        counted = set(runs.loc[runs["n_params"].notna(), "run"]) if "n_params" in runs else set()
        recorded = {
            label: [*flatten_config(record.config), *(["n_params"] if label in counted else [])]
            for label, record in table.records.items()
        }
        self.setting_columns = d.settings_columns(configs)
        self.recorded = recorded
        runs = d.add_groups(runs, [*self.setting_columns, "n_params"], recorded)
        self.until_t = d.common_budget(self.steps, runs, "timesteps")
        self.until_w = d.common_budget(self.steps, runs, "wall_time_s")
        # runs budgeted in CPU-seconds read the meter at every step: no least point needed
        least = 0.0 if answer_mod.cpu_led(runs) else MIN_CPU_COMPARED_S
        self.until_cpu = d.cpu_seconds_compared(self.steps, runs, least)
        runs[SCORE_T] = d.scores_at(self.steps, runs, "timesteps", self.until_t)
        runs[SCORE_W] = d.scores_at(self.steps, runs, "wall_time_s", self.until_w)
        runs[SCORE_CPU] = d.scores_at(self.steps, runs, "cpu_seconds", self.until_cpu)
        self.runs = runs
        self.stats_t = stats.score_frame(runs, SCORE_T)
        self.stats_w = stats.score_frame(runs, SCORE_W)
        self.stats_cpu = stats.score_frame(runs, SCORE_CPU)
        self.stats_end = stats.score_frame(runs, SCORE_END, "final_timesteps")
        self.settings = settings.group_settings(runs, table.records)
        self.drawn_anchors: list[anchor_mod.Anchor] = []
        self._reached: dict[float, dict[str, dict[str, float]]] = {}

    def figure(self, section: Section, fig: object, name: str, alt: str) -> bool:
        if fig is None:
            return False
        plots.save(fig, self.out / name)  # type: ignore[arg-type]
        section.images.append((name, alt))
        return True

    # -- helpers -------------------------------------------------------------------------
    def _group_scores(self, column: str, env: str) -> dict[str, np.ndarray]:
        """Per group of ``env``: its runs' ``column`` scores (NaN where a run has none)."""
        runs = self.runs[self.runs["env"] == env]
        return {str(g): f[column].to_numpy(float) for g, f in runs.groupby(d.GROUP, sort=True)}

    def _other_differences(self, env: str, x: str, y: str) -> str:
        """Headline settings besides the factor that differ between groups x and y."""
        table = self.settings[self.settings["env"] == env].set_index("group")
        skip = {"algorithm", "k", "W", "parameters"}
        if x not in table.index or y not in table.index:
            return ""
        keys = [
            key
            for key in settings.HEADLINE
            if key not in skip
            and table.at[x, key] != table.at[y, key]
            # CMA's covariance against an algorithm that has none is the algorithm itself
            and not (key == "covariance" and "—" in (table.at[x, key], table.at[y, key]))
        ]
        if table.at[x, "parameters"] != table.at[y, "parameters"]:
            keys.insert(
                0, f"parameters ({table.at[x, 'parameters']} vs {table.at[y, 'parameters']})"
            )
        return ", ".join(keys)

    # -- time to a return level ----------------------------------------------------------
    def _run_times_to(self, level: float) -> dict[str, dict[str, float]]:
        """Per run that reached ``level``: timesteps, wall-clock and CPU-seconds at its first
        evaluation at or above it, and ``confirmed`` (1.0 where one of the run's own
        confirmations, fresh episodes run at a crossing of its ``target_return``, had a
        mean at or above ``level`` with every episode finished; 0.0 where it ran some but
        none did; NaN where it ran none)."""
        if level in self._reached:
            return self._reached[level]
        steps = self.steps
        out: dict[str, dict[str, float]] = {}
        if "eval_return_mean" not in steps or "timesteps" not in steps:
            self._reached[level] = out
            return out
        evals = steps[steps["eval_return_mean"].notna() & steps["timesteps"].notna()]
        evals = evals.sort_values(["run", "timesteps"], kind="stable")
        for column in ("wall_time_s", "cpu_seconds"):
            if column not in evals:
                evals = evals.assign(**{column: math.nan})
        confirms = (
            steps[steps["confirm_return_mean"].notna()]
            if "confirm_return_mean" in steps
            else steps.iloc[0:0]
        )
        for run, frame in evals.groupby("run", sort=False):
            hit = frame[frame["eval_return_mean"] >= level]
            if hit.empty:
                continue
            first = hit.iloc[0]
            mine = confirms[confirms["run"] == run]
            confirmed = math.nan
            if len(mine):
                failed = (
                    mine["confirm_failed_episodes"].fillna(0)
                    if "confirm_failed_episodes" in mine
                    else pd.Series(0.0, index=mine.index)
                )
                confirmed = float(((mine["confirm_return_mean"] >= level) & (failed == 0)).any())
            out[str(run)] = {
                "timesteps": float(first["timesteps"]),
                "wall_s": float(first["wall_time_s"]),
                "cpu_seconds": float(first["cpu_seconds"]),
                "confirmed": confirmed,
            }
        self._reached[level] = out
        return out

    def time_to(self, env: str, level: float) -> dict[str, stats.TimeTo]:
        """Per group of ``env``: medians over its runs that reached ``level``, and counts."""
        reached = self._run_times_to(level)
        result = {}
        env_runs = self.runs[self.runs["env"] == env]
        for group, members in env_runs.groupby(d.GROUP, sort=True):
            hits = [reached[r] for r in members["run"] if r in reached]

            def median(key: str, hits: list[dict[str, float]] = hits) -> float:
                values = [h[key] for h in hits if not math.isnan(h[key])]
                return float(np.median(values)) if values else math.nan

            result[str(group)] = stats.TimeTo(
                timesteps=median("timesteps"),
                cpu_seconds=median("cpu_seconds"),
                wall_s=median("wall_s"),
                reached=len(hits),
                runs=len(members),
            )
        return result

    def level_for(self, env: str) -> tuple[float, str] | None:
        """The return level a tie on score is judged against on ``env``: ``--threshold``,
        else the env's solved threshold from the anchors, else the target return every
        run of the env shared; None when there is none."""
        if self.threshold is not None:
            return self.threshold, f"the threshold {self.threshold:g}"
        for anchor in anchor_mod.anchors_for(self.anchors, self.runs, env):
            if anchor.kind == "threshold":
                return anchor.value, f"the solved threshold {anchor.value:g}"
        column = "budget_target_return"
        if column in self.runs:
            targets = self.runs.loc[self.runs["env"] == env, column]
            if targets.notna().all() and targets.nunique() == 1:
                value = float(targets.iloc[0])
                return value, f"the target return {value:g}"
        return None

    def threshold_table(self, level_of: Mapping[str, float]) -> pd.DataFrame:
        """Per (env, group): runs that reached the env's level, how many confirmed it, and
        the medians (over those that reached it) of timesteps, wall-clock and CPU-seconds
        to the first evaluation at or above it."""
        rows = []
        for env, level in level_of.items():
            reached = self._run_times_to(level)
            env_runs = self.runs[self.runs["env"] == env]
            for group, members in env_runs.groupby(d.GROUP, sort=True):
                hits = [reached[r] for r in members["run"] if r in reached]
                ran = [h["confirmed"] for h in hits if not math.isnan(h["confirmed"])]

                def median(key: str, digits: int, hits: list[dict[str, float]] = hits) -> str:
                    values = [h[key] for h in hits if not math.isnan(h[key])]
                    if not values:
                        return "not reached" if not hits else "n/a"
                    value = float(np.median(values))
                    return _short(value) if key == "timesteps" else f"{value:.{digits}f}"

                rows.append(
                    {
                        "env": env,
                        "group": str(group),
                        "threshold": f"{level:g}",
                        "reached": f"{len(hits)} of {len(members)}",
                        "confirmed": (
                            f"{int(sum(ran))} of {len(hits)}"
                            if ran
                            else ("no confirmation" if hits else "—")
                        ),
                        "timesteps (median)": median("timesteps", 0),
                        "per run": ", ".join(
                            _short(v) for v in sorted(h["timesteps"] for h in hits)
                        )
                        or "—",
                        "wall-clock s (median)": median("wall_s", 1),
                        "CPU-s (median)": median("cpu_seconds", 1),
                    }
                )
        return pd.DataFrame(rows)

    THRESHOLD_TEXT = (
        "Per group, the runs whose evaluation return reached the level, and the medians "
        "over those runs of the training timesteps, wall-clock and CPU-seconds (the "
        "meter's last reading, taken once a second, before that evaluation) at their first "
        "evaluation at or above it. Compare medians only together with `reached`. "
        "`confirmed`: of the runs that reached it, those whose own confirmation (a "
        "re-evaluation on fresh episodes, `confirm_episodes`, which a run makes when it "
        "crosses its `target_return`) also scored at least the level; 'no confirmation': "
        "none of those runs had a target return, so one evaluation crossing is all there is."
    )

    def grids(self) -> list[tuple[str, str, str]]:
        """(env, algorithm, config column) where the algorithm's runs on the env differ in
        exactly one numeric setting, taking two or more values: a grid of it."""
        out = []
        columns = [c for c in self.setting_columns if c not in NOT_GRID and c in self.runs]
        for (env, algo), frame in self.runs.groupby(["env", "algo"], sort=True):
            if frame[d.GROUP].nunique() < 2:
                continue
            if any(d.varying(frame, c) for c in ("episodes_per_fitness", "workers")):
                continue
            varying = [c for c in columns if frame[c].astype(str).nunique() > 1]
            if len(varying) != 1:
                continue
            values = pd.to_numeric(frame[varying[0]], errors="coerce")
            if values.isna().any() or values.nunique() < 2:
                continue
            out.append((str(env), str(algo), varying[0]))
        return out

    def hyperparameter_sections(self) -> list[Section]:
        """One folded section per hyperparameter some algorithm's runs form a grid of: the
        score at the common budget against the value, one line per algorithm."""
        by_name: dict[str, list[tuple[str, str, str]]] = {}
        for env, algo, column in self.grids():
            by_name.setdefault(stats.setting_name(column), []).append((env, algo, column))
        sections = []
        for name, cells in by_name.items():
            frames = []
            for env, algo, column in cells:
                mine = self.runs[(self.runs["env"] == env) & (self.runs["algo"] == algo)]
                frames.append(
                    pd.DataFrame(
                        {
                            "env": env,
                            "algo": algo,
                            "value": pd.to_numeric(mine[column]).to_numpy(float),
                            "score": mine[SCORE_T].to_numpy(float),
                        }
                    )
                )
            points = pd.concat(frames, ignore_index=True)
            shown = self.runs[
                self.runs["run"].isin(
                    self.runs[
                        self.runs[["env", "algo"]]
                        .apply(tuple, axis=1)
                        .isin([(e, a) for e, a, _ in cells])
                    ]["run"]
                )
            ]
            section = Section(f"Score against {name}")
            drawn = self.figure(
                section,
                plots.hyperparameter_figure(
                    points, name, "eval return at the common budget", shown
                ),
                f"score_vs_{_safe(name)}.png",
                f"score at the common budget against {name}",
            )
            if not drawn:
                continue
            section.paragraphs.append(
                f"Runs of one algorithm that differ only in {name}: each run's score at the "
                "env's common budget (as in the scores table) against its value, one line per "
                "algorithm through the mean at each value, every run a point. "
                + "; ".join(
                    f"{md_text(algo)} on {md_text(env)}: "
                    + md_text(self.grid_text(env, algo, column))
                    for env, algo, column in cells
                )
                + "."
            )
            sections.append(section)
        return sections

    def grid_text(self, env: str, algo: str, column: str) -> str:
        """``best sigma=0.05 (mean 480.2, n=3) of 0.05, 0.2; difference to sigma=0.2 ...``
        for one grid: a best value only where the interval of the difference of its mean
        and the runner-up's excludes 0, else ``no setting is distinguishable``."""
        mine = self.runs[(self.runs["env"] == env) & (self.runs["algo"] == algo)]
        values = pd.to_numeric(mine[column])
        means = mine.groupby(values)[SCORE_T].agg(["mean", "count"]).dropna()
        name = stats.setting_name(column)
        listed = ", ".join(f"{v:g}" for v in sorted(values.unique()))
        if means.empty:
            return f"{name} of {listed}, no scores at the common budget"
        ranked = means.sort_values("mean", ascending=False)
        best, row = ranked.index[0], ranked.iloc[0]
        said = f"{name}={best:g} (mean {row['mean']:.1f}, n={int(row['count'])})"
        if len(ranked) < 2:
            return f"only {said} has scores, of {listed}"
        second = ranked.index[1]
        diff = stats.difference(
            mine.loc[values == best, SCORE_T], mine.loc[values == second, SCORE_T]
        )
        against = f"{diff.text()} to {name}={second:g} (mean {ranked.iloc[1]['mean']:.1f})"
        if diff.sign > 0:
            return f"best {said} of {listed}; {against} excludes 0"
        return f"no setting of {listed} is distinguishable: the highest mean is {said}, {against}"

    # -- sections ------------------------------------------------------------------------
    def result(self, curve: Section, cpu_curve: Section | None = None) -> Section:
        """The report's opening: the answer (:mod:`harness.report.answer`: the best ES
        against the best RL on every axis), one generated conclusion per env, the main
        curve beside the scores at the common budget (CPU-seconds where every run was
        budgeted in them); warnings and details follow it."""
        section = Section(RESULT_TITLE)
        answer_lines, answer_table = answer_mod.answer(self, self.compare)
        cpu_first = answer_mod.cpu_led(self.runs)
        section.paragraphs += [
            "**The answer, per env: the best ES against the best RL** (each family's group "
            "with the best mean score at equal "
            + ("CPU-seconds" if cpu_first else "timesteps")
            + ", families as their algorithms declare them), at equal "
            + ("CPU-seconds, timesteps" if cpu_first else "timesteps, CPU-seconds")
            + " and, where the pair's runs share a machine, wall-clock: each at the largest "
            "point every run of the pair reached (on CPU-seconds the cheapest run's whole "
            "budget), with the 95% interval of the difference of the means (bootstrap) and "
            "P(X > Y); inconclusive where the interval spans 0. A run with no evaluation "
            "close to a point is read at its first evaluation after it (more compute, in "
            "its favour): a lead it gains only so is not called.",
            "\n".join(answer_lines),
            "**Every group**, one line per env: who leads at equal timesteps (the common "
            "budget), wall-clock and CPU-seconds (where every run measured them"
            + ("" if cpu_first else f", from {MIN_CPU_COMPARED_S:g} CPU-seconds in common")
            + "), every group ranked. "
            "A group leads (bold) only where the 95% interval of the difference of its mean "
            f"and the runner-up's excludes 0 (none below {stats.MIN_RUNS_INTERVAL} runs); "
            "groups at or above the env's threshold tie on score, and the one that got there "
            "first is named. Wall-clock holds only for the machine and load named under "
            "Warnings.",
        ]
        if len(answer_table):
            section.tables.append(("The answer's numbers.", answer_table))
        lines = []
        for env in sorted(self.runs["env"].astype(str).unique()):
            parts = []
            found = self.level_for(env)
            level, level_name = found if found is not None else (None, "")

            def time_to(at: float, env: str = env) -> dict[str, stats.TimeTo]:
                return self.time_to(env, at)

            said: set[str] = set()  # the "got there first" clause is said once per env
            tie = {"level": level, "level_name": level_name, "time_to": time_to, "said": said}
            if env in self.until_t:
                parts.append(
                    stats.lead_text(
                        self._group_scores(SCORE_T, env),
                        f"at the common budget of {_short(self.until_t[env])} timesteps",
                        **tie,  # type: ignore[arg-type]
                    )
                )
            if env in self.until_w:
                parts.append(
                    stats.lead_text(
                        self._group_scores(SCORE_W, env),
                        f"at the common wall-clock of {self.until_w[env]:.1f} s",
                        **tie,  # type: ignore[arg-type]
                    )
                )
            if env in self.until_cpu:
                parts.append(
                    stats.lead_text(
                        self._group_scores(SCORE_CPU, env),
                        f"at the common {self.until_cpu[env]:.1f} CPU-seconds",
                        **tie,  # type: ignore[arg-type]
                    )
                )
            if cpu_first and env in self.until_cpu:
                parts.insert(0, parts.pop())
            if not parts:
                parts.append("no run logged an evaluation.")
            caveats = self._caveats(env)
            text = f"- **{md_text(env)}**: " + " ".join(p[0].upper() + p[1:] for p in parts)
            if caveats:
                text += " Caveats: " + "; ".join(caveats) + "."
            lines.append(text)
        grids = self.grids()
        if grids:
            lines += [
                f"- **{md_text(env)}**, {md_text(algo)} over "
                f"{md_text(stats.setting_name(column))}: "
                f"{md_text(self.grid_text(env, algo, column))} (see "
                f"[Score against {md_text(stats.setting_name(column))}]"
                f"(#{slug('Score against ' + stats.setting_name(column))}))."
                for env, algo, column in grids
            ]
        section.paragraphs.append("\n".join(lines))
        if cpu_first and cpu_curve is not None and cpu_curve.images:
            section.images += cpu_curve.images[:1]
            budgets = ", ".join(f"{env}: {v:.1f}" for env, v in self.until_cpu.items())
            section.tables.append(
                (
                    f"Scores at the common CPU-seconds ({budgets}): every run was budgeted in "
                    "CPU-seconds (a CPU limit, or its pair's CPU-seconds). " + d.caption(self.runs),
                    tables.score_table(self.stats_cpu),
                )
            )
        elif not self.stats_t.empty:
            section.images += curve.images[:1]
            section.tables.append(
                (
                    "Scores at the common budget (details in "
                    f"[{SCORES_TITLE}](#{slug(SCORES_TITLE)})). " + d.caption(self.runs),
                    tables.score_table(self.stats_t),
                )
            )
        else:
            section.images += curve.images[:1]
        if self.threshold is not None:
            envs = sorted(self.runs["env"].astype(str).unique())
            section.tables.append(
                (
                    f"Time to return {self.threshold:g} (`--threshold`). " + self.THRESHOLD_TEXT,
                    self.threshold_table({env: self.threshold for env in envs}),
                )
            )
        return section

    def _caveats(self, env: str) -> list[str]:
        env_runs = self.runs[self.runs["env"] == env]
        caveats = []
        params = env_runs.groupby(d.GROUP)["n_params"].mean().dropna()
        if params.nunique() > 1:
            sizes = params.groupby(params).groups
            caveats.append(
                "policies differ in size ("
                + "; ".join(
                    f"{tables.fmt(float(size), 0)} parameters: {', '.join(map(md_text, groups))}"
                    for size, groups in sizes.items()
                )
                + ")"
            )
        cpu = env_runs.groupby(d.GROUP)["cpu_seconds"].mean().dropna()
        if len(cpu) > 1 and cpu.min() > 0 and cpu.max() / cpu.min() > 1 + audit.TOLERANCE:
            caveats.append(
                f"CPU-seconds per run differ from {float(cpu.min()):.1f} "
                f"({md_text(cpu.idxmin())}) to {float(cpu.max()):.1f} "
                f"({md_text(cpu.idxmax())}), so equal wall-clock is not equal compute"
            )
        if any(f"**{env}**" in w for w in audit.budget_warnings(env_runs)):
            caveats.append("budgets are uneven (see the warnings)")
        if any(f"**{env}**" in w for w in audit.machine_warnings(self.runs)):
            caveats.append(
                "wall-clock comes from loaded or unlike machines (see the warnings), so a "
                "wall-clock lead is not a measurement of the algorithms"
            )
        seeds = env_runs.groupby(d.GROUP)["run"].nunique()
        if seeds.max() < stats.MIN_RUNS_INTERVAL:
            caveats.append(
                f"n={int(seeds.max())}: rerun with more seeds before drawing a conclusion"
            )
        return caveats

    def settings_section(self) -> Section:
        section = Section(SETTINGS_TITLE)
        shown = settings.differing(self.settings)
        section.paragraphs.append(
            "Per group, the settings that differ between groups (all of them when there is "
            f"one group); every key is in [{APPENDIX_SETTINGS}](#{slug(APPENDIX_SETTINGS)}) and "
            f"the command behind each run in [{APPENDIX_COMMANDS}](#{slug(APPENDIX_COMMANDS)}). "
            "Parameters: the size of the stored final parameter vector (for PPO/A2C the whole "
            "SB3 policy: actor and critic)."
        )
        section.tables.append(("", shown))
        return section

    def budgets(self) -> Section:
        section = Section("Budgets: requested and used")
        section.paragraphs.append(
            "Requested: the run's budget keys. Used: training env timesteps, generations "
            "(or RL update chunks), training wall-clock and CPU-seconds of the run's process "
            "tree (head and workers; n/a for runs recorded before the runner measured it), "
            "mean over the group's runs with the range in brackets. CPU-seconds cover the "
            "whole run process (start-up, env construction and the final evaluation "
            "included) while wall-clock covers the training loop, so on short runs CPU-seconds "
            "can exceed wall-clock times cores. Cores: the host's CPU count recorded by "
            "Sacred. Runs that shared cores (a sweep with `--jobs` > 1) are slower than alone."
        )
        section.tables.append((d.caption(self.runs), audit.budget_table(self.runs)))
        return section

    def machine_speed(self) -> Section | None:
        """Each run's speed record and reference CPU-seconds (None: no run has a record)."""
        if not any(name in self.steps for name in speed.METRICS):
            return None
        table, lines = audit.speed_table(self.steps, self.runs)
        section = Section("Machine speed")
        section.paragraphs.append(
            "Every run times a fixed reference workload at each evaluation, in CPU time "
            "(harness/speed.py): a 64x64 float32 tanh layer (kernel rounds per CPU-second) "
            "and its env stepped with random actions. A run's speed is the median of its "
            "kernel series; spread: (p90 - p10) / median. Where an env's runs differ in "
            f"speed by more than {speed.TOLERANCE:.0%}, CPU-seconds compare only as reference "
            "CPU-seconds (CPU-seconds x speed / "
            f"{speed.REFERENCE_SPEED:,.0f}, the fixed reference speed)."
        )
        section.paragraphs += [w.replace("**", "") for w in lines]
        section.tables.append(("", table))
        return section

    def scores_common(self) -> Section:
        section = Section(SCORES_TITLE)
        budgets = ", ".join(f"{env}: {_short(v)} timesteps" for env, v in self.until_t.items())
        section.paragraphs.append(
            "Score of a run: its evaluation return interpolated at the env's common budget "
            f"({budgets or 'none'}), the largest timesteps every run of the env reached, so "
            "no group is credited with steps another did not get. " + stats.RULE_TEXT
        )
        if self.stats_t.empty:
            section.paragraphs.append("No run logged an evaluation.")
            return section
        self.figure(
            section,
            plots.final_score_figure(self.runs, SCORE_T, "eval return at the common budget"),
            "scores_common_budget.png",
            "scores at the common budget",
        )
        section.tables.append((d.caption(self.runs), tables.score_table(self.stats_t)))
        poi = stats.probability_of_improvement(
            self.runs, SCORE_T, self._other_differences, settings=self.setting_columns
        )
        if poi.empty:
            section.paragraphs.append(
                "P(X > Y): no two groups on one env differ in exactly one of algorithm, k and "
                "W, or only in one hyperparameter, so no pair is listed."
            )
        else:
            section.tables.append(
                (
                    "P(X > Y): the chance that a run of X scores higher than a run of Y at the "
                    "common budget (Mann-Whitney U / nm, rliable), for pairs differing in one "
                    "factor (algorithm, k or W) or, those equal, only in one hyperparameter "
                    "(named in `differ in`); 0.5 means no difference. Other settings that "
                    "differ are named: such a pair is not a clean one-factor comparison.",
                    tables.improvement_table(poi),
                )
            )
        return section

    def thresholds(self) -> Section | None:
        """Samples, wall-clock and CPU-seconds to the env's solved threshold (from the
        anchors): the sample-efficiency table."""
        levels = {}
        for env in sorted(self.runs["env"].astype(str).unique()):
            marks = [
                a
                for a in anchor_mod.anchors_for(self.anchors, self.runs, env)
                if a.kind == "threshold"
            ]
            if marks:
                levels[env] = marks[0].value
        if not levels:
            return None
        section = Section("Samples to the solved threshold")
        section.paragraphs.append(
            "Sample efficiency read as the cost of a run's first evaluation at or above the "
            "env's solved threshold (from the anchors file), not as the samples consumed in "
            "a fixed time (`harness report --threshold R` gives the same table for a level "
            "of your own). " + self.THRESHOLD_TEXT
        )
        section.tables.append((d.caption(self.runs), self.threshold_table(levels)))
        return section

    def scores_end(self) -> Section:
        section = Section("Scores at the end of each run")
        section.paragraphs.append(
            "Each run's last evaluation, at the end of its own budget (the column "
            "`timesteps` is the mean used): this ranks unequal budgets when groups used "
            "different amounts, see Budgets."
        )
        if self.stats_end.empty:
            section.paragraphs.append("No run logged an evaluation.")
            return section
        section.tables.append(
            (d.caption(self.runs), tables.score_table(self.stats_end, x_label="timesteps"))
        )
        return section

    def curves(self, x: str, name: str, title: str) -> Section:
        section = Section(title)
        until = {"timesteps": self.until_t, "cpu_seconds": self.until_cpu}.get(x, self.until_w)
        anchors = self.anchors if x == "timesteps" else None
        runs = self.runs
        if x == "cpu_seconds" and not until:
            # no aggregate at a common point: each run's curve whole, and the answer compares
            # the families at the cheapest run's budget
            section.paragraphs.append(
                "No aggregate curve: " + self.cpu_not_drawn() + " Each run is drawn whole; "
                f"the answer in [{RESULT_TITLE}](#{slug(RESULT_TITLE)}) compares the best ES and "
                "the best RL at the cheapest run's budget."
            )
        elif x == "cpu_seconds":  # an env whose CPU-seconds are not compared has no panel
            runs = self.runs[self.runs["env"].isin(until)]
        fig = plots.eval_curve_figure(self.steps, runs, x, until=until, anchors=anchors)
        if not self.figure(section, fig, name, title):
            section.paragraphs.append("No run logged an evaluation.")
            return section
        if x == "timesteps":
            section.paragraphs.append(
                "Each run's evaluations are interpolated onto a common grid (no "
                "extrapolation past a run's last evaluation); the aggregate curves end at the "
                "common budget (a dash-dot line where some runs went further, drawn faint)."
            )
            drawn = []
            for env in self.runs["env"].astype(str).unique():
                drawn += anchor_mod.anchors_for(self.anchors, self.runs, env)
            if drawn:
                self.drawn_anchors = list(dict.fromkeys(drawn))
                section.tables.append(
                    (
                        "Published anchors drawn on this figure (from `experiments/anchors.yaml`); "
                        "compare with care: their training budgets, evaluation protocols and "
                        "measures differ from these runs'.",
                        anchor_mod.anchor_table(self.drawn_anchors),
                    )
                )
            else:
                section.paragraphs.append(
                    "No published anchor in `experiments/anchors.yaml` applies to these envs."
                )
        elif x == "cpu_seconds":
            section.paragraphs.append(
                "CPU-seconds of each run's process tree (head and workers, evaluation "
                "included) since it started: the compute each run spent, which, unlike "
                "wall-clock, does not grow when runs share cores. Aggregate curves end at "
                "the common CPU-seconds."
            )
        else:
            section.paragraphs.append(
                "Training wall-clock since the run started (evaluation included), on the "
                "machine named in the caption; aggregate curves end at the common wall-clock."
            )
            loaded = audit.machine_warnings(self.runs)
            if loaded:
                section.paragraphs.append(
                    "**Loaded or unlike machines:** "
                    + " ".join(w.replace("**", "") for w in loaded)
                    + " Read this figure as the record of those machines, not as a measured "
                    "difference between the algorithms."
                )
        return section

    def cpu_not_drawn(self) -> str:
        """Why no env has a CPU-seconds comparison, per env, from the runs themselves: runs
        that never measured CPU-seconds (recorded before the runner did), or a common point
        under the least compared because a run stopped early (its target return reached,
        or a short budget); the run that ended first and its stop reason are named."""
        reasons = []
        measured = (
            set(self.steps.loc[self.steps["cpu_seconds"].notna(), "run"])
            if "cpu_seconds" in self.steps
            else set()
        )
        common = d.common_budget(self.steps, self.runs, "cpu_seconds")
        for env, env_runs in self.runs.groupby("env", sort=True):
            unmeasured = sorted(set(env_runs["run"]) - measured)
            if unmeasured:
                listed = ", ".join(map(md_text, unmeasured[:3])) + (
                    ", ..." if len(unmeasured) > 3 else ""
                )
                reasons.append(
                    f"on {md_text(env)}, {len(unmeasured)} of {len(env_runs)} runs never measured "
                    f"CPU-seconds (recorded before the runner measured them: {listed})"
                )
                continue
            at = common.get(str(env))
            if at is None:
                reasons.append(f"on {md_text(env)}, no run logged an evaluation")
                continue
            ends = (
                d.eval_points(self.steps, "cpu_seconds")
                .groupby("run")["cpu_seconds"]
                .max()
                .reindex(env_runs["run"])
            )
            first = str(ends.idxmin())
            row = env_runs[env_runs["run"] == first].iloc[0]
            stop = md_text(row.get("stop_reason") or "no stop reason recorded")
            stop_col = env_runs.get("stop_reason", pd.Series("", index=env_runs.index))
            early = env_runs[stop_col.fillna("").astype(str).str.startswith("target return")]
            text = (
                f"on {md_text(env)}, every run's evaluations span only {at:.1f} CPU-seconds in "
                f"common, under the {MIN_CPU_COMPARED_S:g} compared (the meter is read once a "
                f"second): run {md_text(first)} ({md_text(row[d.GROUP])}) ended its "
                f"evaluations at {at:.1f} CPU-seconds ({stop})"
            )
            if len(early):
                algos = ", ".join(map(md_text, sorted(early["algo"].astype(str).unique())))
                text += (
                    f"; {len(early)} of {len(env_runs)} runs ({algos}) stopped early on "
                    "reaching their target return"
                )
            elif "budget" in stop:
                text += "; the budget was used before the meter read much"
            reasons.append(text)
        return "; ".join(reasons) + "." if reasons else "no run measured CPU-seconds."

    def fitness(self) -> Section:
        section = Section("Training fitness against timesteps")
        if not self.figure(
            section,
            plots.fitness_curve_figure(self.steps, self.runs, self.anchors, until=self.until_t),
            "fitness_vs_timesteps.png",
            "training fitness against timesteps",
        ):
            section.paragraphs.append("Not drawn: no run here logged a training fitness.")
            return section
        section.paragraphs.append(
            "What each run optimised, step by step: the mean training return of an ES "
            "generation's candidates, or of the training episodes PPO/A2C ended in a chunk "
            "(with their exploration noise). It moves before the evaluations do (an ES "
            "leaving a plateau, a shaped reward being learnt) and is read with the settings "
            "table: a run with a reward_transform is scored on that reward, not the env's."
        )
        # drawn, so some run logged a fitness
        fitted = self.runs[
            self.runs["run"].isin(self.steps.loc[self.steps["fitness_mean"].notna(), "run"])
        ]
        if "reward_transform" in fitted:
            for env, frame in fitted.groupby("env"):
                transforms = sorted(frame["reward_transform"].fillna("none").astype(str).unique())
                if len(transforms) > 1:
                    section.paragraphs.append(
                        f"{md_text(env)}: the groups differ in reward_transform "
                        f"({'; '.join(map(md_text, transforms))}): their fitness levels "
                        "compare only where those rewards agree; their evaluations always do."
                    )
        drawn = [
            a
            for env in self.runs["env"].astype(str).unique()
            for a in anchor_mod.training_fitness_anchors(self.anchors, self.runs, env)
        ]
        if drawn:
            section.tables.append(
                (
                    "Published training-fitness figures drawn on this figure (from "
                    "`experiments/anchors.yaml`); their episodes, populations and budgets "
                    "are in the table's measure column, not these runs'.",
                    anchor_mod.anchor_table(list(dict.fromkeys(drawn))),
                )
            )
        return section

    def profiles(self) -> Section | None:
        if self.runs["env"].nunique() < 2:
            return None
        section = Section("Performance profiles")
        solved = {}
        for env in self.runs["env"].astype(str).unique():
            for anchor in anchor_mod.anchors_for(self.anchors, self.runs, env):
                if anchor.kind == "threshold":
                    solved[env] = anchor.value
        prepared = stats.profile_scores(self.runs, SCORE_T, solved)
        if prepared is None:
            section.paragraphs.append("Not drawn: no group was run on every env of this report.")
            return section
        scores, taus, with_intervals, note = prepared
        band = (
            "bands: 95% stratified-bootstrap intervals (rliable)"
            if with_intervals
            else f"no bands: some group has fewer than {stats.MIN_RUNS_INTERVAL} runs"
        )
        self.figure(
            section,
            plots.performance_profile_figure(scores, taus, with_intervals, f"{note}; {band}"),
            "performance_profiles.png",
            "performance profiles across envs",
        )
        section.paragraphs.append(
            "Score distributions across envs (rliable's performance profiles) of scores at "
            "the common budget: the fraction of a group's runs, over all envs, whose "
            "normalised score exceeds τ; higher is better."
        )
        return section

    def episodes(self) -> Section:
        section = Section("Episodes per fitness evaluation")
        if not self.figure(
            section,
            plots.episodes_figure(self.steps, self.runs, SCORE_T),
            "episodes_per_fitness.png",
            "episodes per fitness compared",
        ):
            values = sorted({int(k) for k in self.runs["episodes_per_fitness"]})
            section.paragraphs.append(
                f"Not compared: every env here was run with one value of k "
                f"(episodes per fitness: {', '.join(map(str, values))})."
            )
        return section

    def scaling(self) -> Section:
        section = Section("Scaling with workers")
        frame = scaling.scaling_frame(self.runs)
        if frame.empty:
            section.paragraphs.append(
                "Not measured: no algorithm was run on one env with two or more worker "
                "counts (sweep `workers: [1, 2, ...]`)."
            )
            return section
        model = scaling.model_frame(frame)
        section.paragraphs.append(
            "Throughput is training env steps per second of training wall-clock; the ideal "
            "is linear in W from the fewest workers of each series; the model is Amdahl's "
            "law with the serial fraction s measured from the W=1 runs' wall-clock breakdown "
            "(everything but the worker-run parts: rollouts, evaluation and confirmation, over the "
            "training total; start-up, which precedes "
            "the training wall-clock, left out), predicting a speed-up of 1/(s + (1-s)/W). "
            "Time to "
            "target is the confirmed time where the run recorded a confirmation on fresh "
            "episodes, else the first evaluation that crossed the target (labelled). A "
            "machine with fewer cores than workers cannot scale."
        )
        self.figure(
            section,
            scaling.scaling_figure(frame, model),
            "scaling.png",
            "throughput and time to target against workers",
        )
        section.tables.append((d.caption(frame), scaling.scaling_table(model)))
        breakdown = scaling.breakdown_table(frame)
        if breakdown.empty:
            section.paragraphs.append(
                "No run recorded a wall-clock breakdown (`time_breakdown` in summary.json), "
                "so no model is drawn."
            )
        else:
            section.tables.append(
                (
                    "Where the wall-clock went: mean seconds per part (share of the total).",
                    breakdown,
                )
            )
        return section

    def projection(self) -> Section | None:
        """Wall-clock as cores grow (:mod:`harness.report.projection`), where an env's runs
        hold both families; the env's return level is the report's (:meth:`level_for`)."""
        from harness.report import projection

        dirs = [self.table.record(str(label)).path for label in self.runs["run"]]
        # the report's groups but for the worker count: the model projects one
        # configuration's runs at every W together (its median at the fewest, each W measured)
        settings = [c for c in (*self.setting_columns, "n_params") if c != "workers"]
        regrouped = d.add_groups(
            self.runs.drop(columns=["workers", d.GROUP], errors="ignore"), settings, self.recorded
        )
        groups = dict(zip(dirs, regrouped[d.GROUP].astype(str), strict=True))
        levels = {
            str(env): level
            for env in self.runs["env"].astype(str).unique()
            if (level := self.level_for(env)) is not None
        }
        return projection.report_section(dirs, self.out, levels, groups)

    def wire(self) -> Section:
        section = Section("Bytes over the wire")
        long = d.bytes_frame(self.runs)
        if not self.figure(
            section,
            plots.bytes_figure(long, self.runs),
            "bytes_per_generation.png",
            "bytes per generation",
        ):
            section.paragraphs.append(
                "No bytes recorded: none of these runs sent candidates to evaluation workers "
                "(the RL baselines step their envs in-process)."
            )
            return section
        section.paragraphs.append(
            "OpenAI-ES sends the centre once per generation (broadcast) or only (noise index, "
            "fitness) pairs (replicated mode) and gets back a few scalars per candidate; "
            "Nevergrad and CMA-ES send every candidate vector."
        )
        section.tables.append((d.caption(self.runs), tables.bytes_table(self.runs)))
        return section

    def model_map(self) -> Section:
        from harness.report import umap_map

        name = umap_map.METHOD_NAMES[self.map_method]
        section = Section(f"Map of the models visited ({name})")
        if self.map_runs <= 0:
            section.paragraphs.append("Skipped (`--map-runs 0`).")
            return section
        prefix = "umap" if self.map_method == "umap" else "map"
        with_log = self.runs[self.runs["has_population_log"]].sort_values(
            ["env", "algo", "seed", "run"]
        )
        chosen = with_log.groupby(["env", "algo"], sort=False).head(1).head(self.map_runs)
        drawn = 0
        for _, row in chosen.iterrows():
            record = self.table.record(row["run"])
            log = read_population(record.path)
            if log is None:
                continue
            same = self.runs[self.runs["run"] == row["run"]]
            fig = umap_map.population_figure(record, log, d.caption(same), method=self.map_method)
            if self.figure(
                section,
                fig,
                f"{prefix}_{_safe(str(row['env']))}_{_safe(str(row['algo']))}.png",
                f"{name} map of run {row['run']}",
            ):
                drawn += 1
        how = (
            "UMAP (random_state 0; neighbourhoods, not distances, are meaningful)"
            if self.map_method == "umap"
            else "PCA (the two leading principal components; `harness report --umap` draws "
            "UMAP instead)"
        )
        if drawn:
            section.paragraphs.append(
                f"Each point is one model the run evaluated, embedded in 2-D by {how}; circles "
                "joined by a line are the successive centres, the star the last one. Models of "
                "OpenAI-ES are rebuilt from the stored centres and noise indices; others from "
                "their stored vectors or centres."
            )
            return section
        section.paragraphs.append(
            "No run here stored a population log (`population.npz`), so the models visited "
            "cannot be rebuilt; the map below, when drawn, places each run's final "
            f"parameters instead, embedded by {how}."
        )
        for env, env_runs in self.runs.groupby("env", sort=True):
            if drawn >= self.map_runs:
                break
            fig = umap_map.final_params_figure(
                env_runs, self.table.records, d.caption(env_runs), method=self.map_method
            )
            if self.figure(
                section,
                fig,
                f"{prefix}_final_{_safe(str(env))}.png",
                f"{name} map of final models on {env}",
            ):
                drawn += 1
        if not drawn:
            section.paragraphs.append(
                "Too few runs of one env and policy (fewer than "
                f"{umap_map.MIN_POINTS}) to map final parameters."
            )
        return section

    def run_list(self, excluded: pd.DataFrame) -> Section:
        section = Section("Runs")
        frame = self.runs.sort_values(["env", d.GROUP, "seed"])
        listing = pd.DataFrame(
            {
                "run": frame["run"],
                "status": frame["status"],
                "group": frame[d.GROUP],
                "env": frame["env"],
                "seed": frame["seed"],
                "score at common budget": [tables.fmt(v) for v in frame[SCORE_T]],
                "final return": [tables.fmt(v) for v in frame[SCORE_END]],
                "timesteps": [tables.fmt(v, 0) for v in frame["final_timesteps"]],
                "wall-clock s": [tables.fmt(v, 1) for v in frame["final_wall_time_s"]],
                "CPU-s": [
                    "n/a" if math.isnan(v) else tables.fmt(v, 1) for v in frame["cpu_seconds"]
                ],
                "stopped": frame["stop_reason"].fillna(""),
            }
        )
        section.tables.append(("", listing))
        if len(excluded):
            section.paragraphs.append(
                f"{len(excluded)} run(s) not completed, left out of every figure and table: "
                + ", ".join(
                    f"{md_text(r)} ({_status_text(s, d)})"
                    for r, s, d in zip(
                        excluded["run"], excluded["status"], excluded["run_dir"], strict=True
                    )
                )
                + "."
            )
        return section

    def appendix_settings(self) -> Section:
        section = Section(APPENDIX_SETTINGS)
        section.paragraphs.append(
            "Every config key of every group (the seed aside), as stored in the runs' "
            "`config.json`; values joined with ` / ` where a group's runs disagree (only "
            "bookkeeping keys may). Policy and params keys are the algorithm's own names."
        )
        section.tables.append(("", settings.appendix(self.runs, self.table.records)))
        return section

    def appendix_commands(self) -> Section:
        section = Section(APPENDIX_COMMANDS)
        section.paragraphs.append(
            "Rebuilt from each run's `config.json`: `harness run` flags plus one `--set` for "
            "every knob whose value differs from the current defaults "
            "(`experiments/defaults.yaml` and the algorithm's own), so each line rebuilds the "
            "run's config exactly with this code; add `--runs-dir DIR` to choose where it "
            "goes. The ES family reproduces metrics bit for bit; PPO/A2C depend on torch's "
            "kernels."
        )
        lines = settings.commands(self.runs, self.table.records)
        section.code.append(
            ("", "\n".join(f"# {heading}\n{command}" for heading, command in lines))
        )
        return section


def build_report(
    paths: Sequence[str | Path],
    out: str | Path,
    title: str | None = None,
    map_runs: int = 2,
    statuses: Sequence[str] = ("COMPLETED",),
    map_method: str = "pca",
    anchors_file: Path | None = None,
    note: str | None = None,
    replay: bool = True,
    imports: Sequence[str] = (),
    *,
    algos: Sequence[str] = (),
    env: str | None = None,
    sweep: str | None = None,
    where: Sequence[str] | Mapping[str, Any] = (),
    threshold: float | None = None,
    compare: Sequence[str] = (),
) -> Path:
    """Write the report for the runs under ``paths`` into ``out``; return ``report.md``'s path.

    Filters (:mod:`harness.report.filters`) narrow the runs read before anything is drawn:
    ``algos`` (any of these algorithms), ``env`` (short name or gymnasium id), ``sweep``
    (the sweep's name) and ``where`` (``["sigma=0.05"]`` or ``{"sigma": 0.05}``: config
    settings equal to typed values); one that leaves no run raises :class:`ReportError`
    naming it. ``threshold``: a return level of the user's own; the result then gives,
    per group, the timesteps, wall-clock and CPU-seconds to first reach it, and groups
    at or above it tie on score. ``compare``: two groups (labels, or algorithms with one
    group on an env) the answer also sets against each other on every axis.

    ``map_method`` is ``pca`` (default, fast) or ``umap``; ``note`` is a paragraph of the
    report's own (what the runs are, how they were made) placed after its result. ``replay``:
    draw the sections that play stored final policies (frames, behavioural diversity) where
    runs have them. ``imports``: modules the user allows (``--import``); a run's recorded
    imports are imported only on that word or when the run is the user's own
    (:mod:`harness.user_modules`). Raises :class:`ReportError` when there is nothing to
    report (then nothing is written).
    """
    from envs.plugins import only_modules

    try:
        chosen = filter_mod.make_filters(algos, env, sweep, where)
    except filter_mod.FilterError as error:
        raise ReportError(str(error)) from None
    if threshold is not None and not math.isfinite(float(threshold)):
        raise ReportError(f"--threshold {threshold}: expected a finite return level")
    if compare and len(compare) != 2:
        raise ReportError(f"--compare takes two groups, got {len(compare)}")

    # every run's config is completed again below: a module its record names is imported
    # only once import_recorded_modules has allowed it (harness.user_modules)
    with _one_blas_thread(), only_modules(imports), _warnings_escaped():
        return _build_report(
            paths,
            out,
            title,
            map_runs,
            statuses,
            map_method,
            anchors_file,
            note,
            replay,
            tuple(imports),
            chosen,
            None if threshold is None else float(threshold),
            tuple(compare),
        )


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread: a report's matrices are small, and a multi-threaded OpenBLAS
    spinning on a machine busy with runs made one 210 x 114 SVD take seconds."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a transitive dependency (scikit-learn, via umap-learn)
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def _warnings_escaped() -> Iterator[None]:
    """A library's warning that quotes a run's value (matplotlib naming a glyph it cannot
    draw, say) reaches the terminal with its control characters escaped."""
    with warnings.catch_warnings():
        show = warnings.showwarning

        def escaped(message: Warning | str, *args: Any, **kwargs: Any) -> None:
            show(terminal_text(message), *args, **kwargs)

        warnings.showwarning = escaped
        yield


def _status_text(status: str, run_dir: str) -> str:
    """A run's recorded status, and whether a RUNNING one still has a process behind it."""
    if status == "RUNNING" and rundir.run_is_dead(Path(run_dir)):
        return "RUNNING in its record, but no process runs it: `harness resume` continues it"
    return md_text(status)


def _replay_sections(builder: ReportBuilder, unplayable: set[str]) -> tuple[Any, ...]:
    """The frames and diversity sections, played by the runs whose modules were allowed.

    A run whose recorded imports were not allowed (:func:`settings.import_recorded_modules`)
    cannot build its env or algorithm here: it is left out of the replay, not played.
    """
    view = builder
    if unplayable:
        view = copy.copy(builder)
        view.runs = builder.runs[~builder.runs["run"].isin(sorted(unplayable))]
    return frames.frames_section(view), diversity.diversity_section(view)


def _report_command(
    paths: Sequence[str | Path],
    out: Path,
    title: str | None,
    map_runs: int,
    statuses: Sequence[str],
    map_method: str,
    note: str | None = None,
    replay: bool = True,
    imports: Sequence[str] = (),
    chosen: filter_mod.Filters | None = None,
    threshold: float | None = None,
    compare: Sequence[str] = (),
) -> str:
    """The ``harness report`` command line that draws this report again, every flag given
    (the filters and the threshold included: without them it draws other runs)."""
    parts = ["harness report", *map(str, paths), f"--out {out}"]
    parts += [f"--import {module}" for module in imports]
    if chosen:
        parts += chosen.flags()
    if threshold is not None:
        parts.append(f"--threshold {threshold:g}")
    if compare:
        parts.append("--compare " + " ".join(map(shlex.quote, compare)))
    if title:
        parts.append(f"--title {shlex.quote(title)}")
    if note:
        parts.append("--note NOTE")
    if map_runs != 2:
        parts.append(f"--map-runs {map_runs}")
    if map_method == "umap":
        parts.append("--umap")
    if tuple(statuses) != ("COMPLETED",):
        parts.append("--all-statuses")
    if not replay:
        parts.append("--no-replay")
    return " ".join(parts)


def _build_report(
    paths: Sequence[str | Path],
    out: str | Path,
    title: str | None,
    map_runs: int,
    statuses: Sequence[str],
    map_method: str,
    anchors_file: Path | None,
    note: str | None = None,
    replay: bool = True,
    imports: tuple[str, ...] = (),
    chosen: filter_mod.Filters | None = None,
    threshold: float | None = None,
    compare: tuple[str, ...] = (),
) -> Path:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_runs(paths)
    for warning in caught:
        if issubclass(warning.category, (DeprecationWarning, FutureWarning)):
            continue  # a library's notice to its callers, nothing a reader can act on
        warn(warning.message)
    problems, unplayable = settings.import_recorded_modules(table.records, imports)
    for problem in problems:
        warn(problem)
    if len(table) == 0:
        raise ReportError(f"no readable runs under {', '.join(map(str, paths))}")
    if chosen:
        try:
            table = filter_mod.apply(table, chosen)
        except filter_mod.FilterError as error:
            raise ReportError(str(error)) from None
    selected = table.select(statuses)
    excluded = table.runs[~table.runs["status"].isin(list(statuses))]
    if len(selected) == 0:
        raise ReportError(
            f"none of the {len(table)} runs under {', '.join(map(str, paths))} "
            f"has status {' or '.join(statuses)}"
        )
    try:
        anchors = anchor_mod.load_anchors(anchors_file or anchor_mod.ANCHORS_FILE)
    except anchor_mod.AnchorError as error:
        raise ReportError(str(error)) from None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    archived = any(rundir.is_run_archive(Path(p)) for p in paths)
    if (out / "report.md").exists():
        for stale in out.glob("*.png"):
            stale.unlink()
    builder = ReportBuilder(selected, out, map_runs, map_method, anchors, threshold, compare)
    runs = builder.runs
    for name in compare:
        envs = runs["env"].astype(str).unique()
        if all(answer_mod.resolve(builder, env, name) is None for env in envs):
            raise ReportError(
                f"--compare {name}: no group of that label, nor an algorithm with one group on "
                f"an env (groups: {', '.join(sorted(runs[d.GROUP].astype(str).unique()))})"
            )

    command = _report_command(
        paths,
        out,
        title,
        map_runs,
        statuses,
        map_method,
        note,
        replay,
        imports,
        chosen,
        threshold,
        compare,
    )
    intro = [
        *([note] if note else []),
        f"Generated by {md_code(command)} from "
        f"{len(runs)} stored run(s); every figure and table is drawn from the run records "
        "(Sacred FileStorage directories"
        + (" packed in a run archive" if archived else "")
        + "), none from a rerun."
        + (" NOTE is the paragraph above." if note else ""),
        "- Environments: " + _code_list(sorted(runs["env"].astype(str).unique())) + "\n"
        "- Groups: " + str(runs.groupby(["env", d.GROUP]).ngroups) + " (" + d.n_text(runs) + ")\n"
        "- Algorithms: " + _code_list(sorted(runs["algo"].astype(str).unique())) + "\n"
        "- Budget: " + md_text(d.budget_text(runs)) + "\n"
        "- Seeds: " + d.seeds_text(runs).removeprefix("seeds ").removeprefix("seed ") + "\n"
        "- Machine: " + md_text(d.machine_text(runs)) + "\n"
        "- Sweeps: "
        + (_code_list(sorted(runs["sweep"].dropna().astype(str).unique())) or "none (single runs)"),
        stats.RULE_TEXT,
        "Data: [summary.csv](summary.csv) (one row per run, with its group, scores and "
        "CPU-seconds) and runs.csv (tidy, one row per run and step: config columns and every "
        "metric; evaluations are sparse, NaN between them), written beside this file"
        + (
            "; the run records themselves are in [runs.tar.xz](runs.tar.xz) (config, run, "
            "metrics and summary of every run; `harness report runs.tar.xz --out DIR` reads it)."
            if (out / ARCHIVE_NAME).is_file()
            else "."
        ),
    ]
    rebuilt = sorted(
        {
            str(record.run.get("rebuilt_from_tables", {}).get("by"))
            for record in selected.records.values()
            if isinstance(record.run.get("rebuilt_from_tables"), dict)
        }
    )
    if rebuilt:
        intro.append(
            "These run records were rebuilt from the tables (runs.csv, summary.csv) of an "
            f"earlier drawing of this report by {md_code(', '.join(rebuilt))}, the original run "
            "directories being gone: configs, metrics, statuses, hosts, times and summaries as "
            "those tables held them. They hold no population logs or final parameters, so no "
            "map of visited models is drawn, and runs the earlier report left out are absent; "
            "each run's earlier label is in its `run.json` (`rebuilt_from_tables`)."
        )
    if table.skipped:
        intro.append(
            "Skipped damaged run directories: " + "; ".join(map(md_text, table.skipped)) + "."
        )

    curve = builder.curves("timesteps", "eval_vs_timesteps.png", CURVE_TITLE)
    cpu_curve = builder.curves(
        "cpu_seconds", "eval_vs_cpu_seconds.png", "Evaluation return against CPU-seconds"
    )
    sections = [
        builder.scores_common(),
        *builder.hyperparameter_sections(),
        builder.settings_section(),
        builder.budgets(),
        builder.machine_speed(),
        builder.thresholds(),
        builder.scores_end(),
        curve,
        builder.curves(
            "wall_time_s", "eval_vs_wallclock.png", "Evaluation return against wall-clock"
        ),
        cpu_curve,
        builder.fitness(),
        builder.profiles(),
        builder.episodes(),
        builder.scaling(),
        builder.projection(),
        builder.wire(),
        builder.model_map(),
        *(_replay_sections(builder, unplayable) if replay else ()),
        builder.run_list(excluded),
        builder.appendix_settings(),
        builder.appendix_commands(),
    ]
    drawn = [s for s in sections if s is not None]
    for section in drawn:
        # the page reads as its result; every detail is one click away (render.py)
        section.folded = True
    doc = Document(
        title_line(title or _default_title(runs), runs),
        intro,
        drawn,
        warnings=audit.machine_warnings(runs)
        + audit.budget_warnings(runs)
        + audit.flat_fitness_warnings(selected.steps, runs),
        lead=[builder.result(curve, cpu_curve)],
    )
    (out / "report.md").write_text(to_markdown(doc), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc, out), encoding="utf-8")
    csv_frame(selected.steps).to_csv(out / "runs.csv", index=False)
    csv_frame(runs).to_csv(out / "summary.csv", index=False)
    return out / "report.md"


def title_line(title: str, runs: pd.DataFrame) -> str:
    """The title with the number of runs per group and the budget, as every report states."""
    return f"{title} ({d.n_text(runs)}, budget {d.budget_text(runs)})"


def _default_title(runs: pd.DataFrame) -> str:
    sweeps = sorted(runs["sweep"].dropna().astype(str).unique())
    envs = ", ".join(sorted(runs["env"].astype(str).unique()))
    algos = " vs ".join(sorted(runs["algo"].astype(str).unique()))
    name = f"{', '.join(sweeps)}: " if sweeps else ""
    return f"{name}{algos} on {envs}"
