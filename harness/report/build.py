"""Assemble a comparison report from stored runs: figures, tables, Markdown, HTML, CSV."""

from __future__ import annotations

import contextlib
import copy
import math
import re
import shlex
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness import rundir
from harness.cputime import MIN_CPU_COMPARED_S
from harness.records import RunTable, flatten_config, load_runs, read_population
from harness.report import anchors as anchor_mod
from harness.report import audit, diversity, frames, plots, scaling, settings, stats, tables
from harness.report import data as d
from harness.report.render import Document, Section, slug, to_html, to_markdown

OUTPUTS = ("report.md", "report.html", "runs.csv", "summary.csv")
#: The run archive a committed report carries beside its outputs.
ARCHIVE_NAME = "runs.tar.xz"
#: Per-run score columns added to the runs frame.
SCORE_T = "score_common_timesteps"
SCORE_W = "score_common_wall"
SCORE_CPU = "score_common_cpu_seconds"
SCORE_END = "final_eval_return"
SETTINGS_TITLE = "Settings behind every curve"
APPENDIX_SETTINGS = "Appendix A: every setting of every group"
APPENDIX_COMMANDS = "Appendix B: commands that reproduce each run"
RESULT_TITLE = "Result"
SCORES_TITLE = "Scores at the common budget"
CURVE_TITLE = "Evaluation return against timesteps"


class ReportError(ValueError):
    """Nothing to report on; the message is one line."""


def _code_list(items: Sequence[str]) -> str:
    return ", ".join(f"`{item}`" for item in items)


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
    ) -> None:
        self.table = table
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
        runs = d.add_groups(runs, [*d.settings_columns(configs), "n_params"], recorded)
        self.until_t = d.common_budget(self.steps, runs, "timesteps")
        self.until_w = d.common_budget(self.steps, runs, "wall_time_s")
        self.until_cpu = d.cpu_seconds_compared(self.steps, runs, MIN_CPU_COMPARED_S)
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

    def figure(self, section: Section, fig: object, name: str, alt: str) -> bool:
        if fig is None:
            return False
        plots.save(fig, self.out / name)  # type: ignore[arg-type]
        section.images.append((name, alt))
        return True

    # -- helpers -------------------------------------------------------------------------
    def _group_stats(self, frame: pd.DataFrame, env: str) -> dict[str, stats.GroupStats]:
        rows = frame[frame["env"] == env] if len(frame) else frame
        fields = list(stats.GroupStats.__dataclass_fields__)
        result = {
            str(row[d.GROUP]): stats.GroupStats(**{f: row[f] for f in fields})
            for _, row in rows.iterrows()
        }
        for group in self.runs.loc[self.runs["env"] == env, d.GROUP].unique():
            result.setdefault(str(group), stats.group_stats([]))
        return result

    def _other_differences(self, env: str, x: str, y: str) -> str:
        """Headline settings besides the factor that differ between groups x and y."""
        table = self.settings[self.settings["env"] == env].set_index("group")
        skip = {"algorithm", "k", "W", "parameters"}
        if x not in table.index or y not in table.index:
            return ""
        keys = [
            key
            for key in settings.HEADLINE
            if key not in skip and table.at[x, key] != table.at[y, key]
        ]
        if table.at[x, "parameters"] != table.at[y, "parameters"]:
            keys.insert(
                0, f"parameters ({table.at[x, 'parameters']} vs {table.at[y, 'parameters']})"
            )
        return ", ".join(keys)

    # -- sections ------------------------------------------------------------------------
    def result(self, curve: Section) -> Section:
        """The report's opening: one generated conclusion per env, the main curve beside
        the scores at the common budget; warnings and details follow it."""
        section = Section(RESULT_TITLE)
        section.paragraphs.append(
            "Generated from the numbers below, one line per env: who leads at equal "
            "timesteps (the common budget), at equal wall-clock and at equal CPU-seconds "
            "(where every run measured them), with the number of runs and whether the 95% "
            "intervals of the mean overlap. A lead is called only when they do not; groups of "
            f"fewer than {stats.MIN_RUNS_INTERVAL} runs have no interval, so their comparison "
            "is inconclusive by rule. Wall-clock leads hold only for the machine and load "
            "named under Warnings; CPU-seconds do not grow when runs share cores."
        )
        lines = []
        for env in sorted(self.runs["env"].astype(str).unique()):
            parts = []
            if env in self.until_t:
                parts.append(
                    stats.lead_text(
                        self._group_stats(self.stats_t, env),
                        f"at the common budget of {_short(self.until_t[env])} timesteps",
                    )
                )
            if env in self.until_w:
                parts.append(
                    stats.lead_text(
                        self._group_stats(self.stats_w, env),
                        f"at the common wall-clock of {self.until_w[env]:.1f} s",
                    )
                )
            if env in self.until_cpu:
                parts.append(
                    stats.lead_text(
                        self._group_stats(self.stats_cpu, env),
                        f"at the common {self.until_cpu[env]:.1f} CPU-seconds",
                    )
                )
            if not parts:
                parts.append("no run logged an evaluation.")
            caveats = self._caveats(env)
            text = f"- **{env}**: " + " ".join(p[0].upper() + p[1:] for p in parts)
            if caveats:
                text += " Caveats: " + "; ".join(caveats) + "."
            lines.append(text)
        section.paragraphs.append("\n".join(lines))
        section.images += curve.images[:1]
        if not self.stats_t.empty:
            section.tables.append(
                (
                    "Scores at the common budget (details in "
                    f"[{SCORES_TITLE}](#{slug(SCORES_TITLE)})). " + d.caption(self.runs),
                    tables.score_table(self.stats_t),
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
                    f"{tables.fmt(float(size), 0)} parameters: {', '.join(map(str, groups))}"
                    for size, groups in sizes.items()
                )
                + ")"
            )
        cpu = env_runs.groupby(d.GROUP)["cpu_seconds"].mean().dropna()
        if len(cpu) > 1 and cpu.min() > 0 and cpu.max() / cpu.min() > 1 + audit.TOLERANCE:
            caveats.append(
                f"CPU-seconds per run differ from {float(cpu.min()):.1f} ({cpu.idxmin()}) to "
                f"{float(cpu.max()):.1f} ({cpu.idxmax()}), so equal wall-clock is not equal compute"
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
        poi = stats.probability_of_improvement(self.runs, SCORE_T, self._other_differences)
        if poi.empty:
            section.paragraphs.append(
                "P(X > Y): no two groups on one env differ in exactly one of algorithm, k and "
                "W, so no pair is listed."
            )
        else:
            section.tables.append(
                (
                    "P(X > Y): the chance that a run of X scores higher than a run of Y at the "
                    "common budget (Mann-Whitney U / nm, rliable), for pairs differing in one "
                    "factor; 0.5 means no difference. Other settings that differ are named: "
                    "such a pair is not a clean one-factor comparison.",
                    tables.improvement_table(poi),
                )
            )
        return section

    def thresholds(self) -> Section | None:
        """Samples and wall-clock to the env's solved threshold: the sample-efficiency figure."""
        rows = []
        steps = self.steps
        if "eval_return_mean" not in steps or "timesteps" not in steps:
            return None
        evals = steps[steps["eval_return_mean"].notna() & steps["timesteps"].notna()]
        if "wall_time_s" not in evals:
            evals = evals.assign(wall_time_s=math.nan)
        evals = evals.sort_values(["run", "timesteps"])
        by_run = {run: frame for run, frame in evals.groupby("run", sort=False)}
        for env in sorted(self.runs["env"].astype(str).unique()):
            marks = [
                a
                for a in anchor_mod.anchors_for(self.anchors, self.runs, env)
                if a.kind == "threshold"
            ]
            if not marks:
                continue
            level = marks[0].value
            env_runs = self.runs[self.runs["env"] == env]
            for group, members in env_runs.groupby(d.GROUP, sort=True):
                steps_to, seconds_to = [], []
                for run in members["run"]:
                    frame = by_run.get(run)
                    if frame is None:
                        continue
                    hit = frame[frame["eval_return_mean"] >= level]
                    if len(hit):
                        steps_to.append(float(hit["timesteps"].iloc[0]))
                        seconds_to.append(float(hit["wall_time_s"].iloc[0]))
                rows.append(
                    {
                        "env": env,
                        "group": str(group),
                        "threshold": _short(level),
                        "reached": f"{len(steps_to)} of {len(members)}",
                        "timesteps to threshold (median)": (
                            _short(float(np.median(steps_to))) if steps_to else "not reached"
                        ),
                        "per run": ", ".join(_short(v) for v in sorted(steps_to)) or "—",
                        "wall-clock s (median)": (
                            f"{np.nanmedian(seconds_to):.1f}"
                            if seconds_to and not np.isnan(seconds_to).all()
                            else "—"
                        ),
                    }
                )
        if not rows:
            return None
        section = Section("Samples to the solved threshold")
        section.paragraphs.append(
            "Sample efficiency read as the training timesteps (and wall-clock) at a run's first "
            "evaluation at or above the env's solved threshold (from the anchors file), not "
            "as the samples consumed in a fixed time. The median is over the runs that "
            "reached it; runs that did not are counted in `reached`, so compare medians only "
            "together with it. One evaluation crossing is not a confirmed solve (that needs "
            "the mean over 100 consecutive episodes; see `confirm_episodes`)."
        )
        section.tables.append((d.caption(self.runs), pd.DataFrame(rows)))
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
        if x == "cpu_seconds" and not until:
            section.paragraphs.append(
                "Not drawn: in no env did every run measure CPU-seconds (runs recorded before "
                "the runner measured them) and reach a common "
                f"{MIN_CPU_COMPARED_S:g} CPU-seconds (the meter is read once a second)."
            )
            return section
        # an env whose CPU-seconds are not compared has no panel on that axis
        runs = self.runs[self.runs["env"].isin(until)] if x == "cpu_seconds" else self.runs
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

    def fitness(self) -> Section:
        section = Section("Training fitness against timesteps")
        if not self.figure(
            section,
            plots.fitness_curve_figure(self.steps, self.runs, self.anchors),
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
                        f"{env}: the groups differ in reward_transform "
                        f"({'; '.join(transforms)}): their fitness levels compare only where "
                        "those rewards agree; their evaluations always do."
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
                    f"{r} ({_status_text(s, d)})"
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
) -> Path:
    """Write the report for the runs under ``paths`` into ``out``; return ``report.md``'s path.

    ``map_method`` is ``pca`` (default, fast) or ``umap``; ``note`` is a paragraph of the
    report's own (what the runs are, how they were made) placed after its result. ``replay``:
    draw the sections that play stored final policies (frames, behavioural diversity) where
    runs have them. ``imports``: modules the user allows (``--import``); a run's recorded
    imports are imported only on that word or when the run is the user's own
    (:mod:`harness.user_modules`). Raises :class:`ReportError` when there is nothing to
    report (then nothing is written).
    """
    from envs.plugins import only_modules

    # every run's config is completed again below: a module its record names is imported
    # only once import_recorded_modules has allowed it (harness.user_modules)
    with _one_blas_thread(), only_modules(imports):
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


def _status_text(status: str, run_dir: str) -> str:
    """A run's recorded status, and whether a RUNNING one still has a process behind it."""
    if status == "RUNNING" and rundir.run_is_dead(Path(run_dir)):
        return "RUNNING in its record, but no process runs it: `harness resume` continues it"
    return status


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
) -> str:
    """The ``harness report`` command line that draws this report again, every flag given."""
    parts = ["harness report", *map(str, paths), f"--out {out}"]
    parts += [f"--import {module}" for module in imports]
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
) -> Path:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_runs(paths)
    for warning in caught:
        print(f"harness: warning: {warning.message}", file=sys.stderr)
    problems, unplayable = settings.import_recorded_modules(table.records, imports)
    for problem in problems:
        print(f"harness: warning: {problem}", file=sys.stderr)
    if len(table) == 0:
        raise ReportError(f"no readable runs under {', '.join(map(str, paths))}")
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
    builder = ReportBuilder(selected, out, map_runs, map_method, anchors)
    runs = builder.runs

    command = _report_command(
        paths, out, title, map_runs, statuses, map_method, note, replay, imports
    )
    intro = [
        *([note] if note else []),
        f"Generated by `{command}` from "
        f"{len(runs)} stored run(s); every figure and table is drawn from the run records "
        "(Sacred FileStorage directories"
        + (" packed in a run archive" if archived else "")
        + "), none from a rerun."
        + (" NOTE is the paragraph above." if note else ""),
        "- Environments: " + _code_list(sorted(runs["env"].astype(str).unique())) + "\n"
        "- Groups: " + str(runs.groupby(["env", d.GROUP]).ngroups) + " (" + d.n_text(runs) + ")\n"
        "- Algorithms: " + _code_list(sorted(runs["algo"].astype(str).unique())) + "\n"
        "- Budget: " + d.budget_text(runs) + "\n"
        "- Seeds: " + d.seeds_text(runs).removeprefix("seeds ").removeprefix("seed ") + "\n"
        "- Machine: " + d.machine_text(runs) + "\n"
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
            f"earlier drawing of this report by `{', '.join(rebuilt)}`, the original run "
            "directories being gone: configs, metrics, statuses, hosts, times and summaries as "
            "those tables held them. They hold no population logs or final parameters, so no "
            "map of visited models is drawn, and runs the earlier report left out are absent; "
            "each run's earlier label is in its `run.json` (`rebuilt_from_tables`)."
        )
    if table.skipped:
        intro.append("Skipped damaged run directories: " + "; ".join(table.skipped) + ".")

    curve = builder.curves("timesteps", "eval_vs_timesteps.png", CURVE_TITLE)
    sections = [
        builder.settings_section(),
        builder.budgets(),
        builder.scores_common(),
        builder.thresholds(),
        builder.scores_end(),
        curve,
        builder.curves(
            "wall_time_s", "eval_vs_wallclock.png", "Evaluation return against wall-clock"
        ),
        builder.curves(
            "cpu_seconds", "eval_vs_cpu_seconds.png", "Evaluation return against CPU-seconds"
        ),
        builder.fitness(),
        builder.profiles(),
        builder.episodes(),
        builder.scaling(),
        builder.wire(),
        builder.model_map(),
        *(_replay_sections(builder, unplayable) if replay else ()),
        builder.run_list(excluded),
        builder.appendix_settings(),
        builder.appendix_commands(),
    ]
    doc = Document(
        title_line(title or _default_title(runs), runs),
        intro,
        [s for s in sections if s is not None],
        warnings=audit.machine_warnings(runs)
        + audit.budget_warnings(runs)
        + audit.flat_fitness_warnings(selected.steps, runs),
        lead=[builder.result(curve)],
    )
    (out / "report.md").write_text(to_markdown(doc), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc, out), encoding="utf-8")
    selected.steps.to_csv(out / "runs.csv", index=False)
    runs.to_csv(out / "summary.csv", index=False)
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
