"""Assemble a comparison report from stored runs: figures, tables, Markdown, HTML, CSV."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.records import RunTable, load_runs, read_population
from harness.report import data as d
from harness.report import plots, tables
from harness.report.render import Document, Section, to_html, to_markdown

OUTPUTS = ("report.md", "report.html", "runs.csv", "summary.csv")


class ReportError(ValueError):
    """Nothing to report on; the message is one line."""


def _code_list(items: Sequence[str]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


class ReportBuilder:
    def __init__(self, table: RunTable, out: Path, umap_runs: int) -> None:
        self.table = table
        self.out = out
        self.umap_runs = umap_runs
        self.runs = d.add_groups(table.runs)
        self.steps = table.steps

    def figure(self, section: Section, fig: object, name: str, alt: str) -> bool:
        if fig is None:
            return False
        plots.save(fig, self.out / name)  # type: ignore[arg-type]
        section.images.append((name, alt))
        return True

    # -- sections ------------------------------------------------------------
    def final_scores(self) -> Section:
        section = Section("Final scores")
        scores = tables.final_scores(self.runs)
        section.paragraphs.append(
            "Final score of a run: the mean return of its last evaluation (fresh seeded "
            "episodes at the end of its budget). IQM: interquartile mean over runs; 95% "
            f"intervals by stratified bootstrap ({tables.BOOTSTRAP_REPS} resamples, rliable). "
            "A group of one run has no interval."
        )
        if scores.empty:
            section.paragraphs.append("No run logged an evaluation.")
            return section
        self.figure(
            section,
            plots.final_score_figure(scores, self.runs),
            "final_scores.png",
            "final scores and IQM per algorithm",
        )
        section.tables.append((d.caption(self.runs), tables.score_table(scores)))
        poi = tables.probability_of_improvement(self.runs)
        if poi.empty:
            section.paragraphs.append(
                "Probability of improvement needs two algorithms (groups) on one env; "
                "these runs have one."
            )
        else:
            section.tables.append(
                (
                    "Probability of improvement: the chance that a run of X ends with a higher "
                    "final return than a run of Y (Mann-Whitney U / nm, rliable); 0.5 means "
                    "no difference. Intervals need two runs on each side.",
                    tables.improvement_table(poi),
                )
            )
        return section

    def curves(self, x: str, name: str, title: str) -> Section:
        section = Section(title)
        fig = plots.eval_curve_figure(self.steps, self.runs, x)
        if not self.figure(section, fig, name, title):
            section.paragraphs.append("No run logged an evaluation.")
        elif x == "timesteps":
            section.paragraphs.append(
                "Each run's evaluations are interpolated onto a common grid (no "
                "extrapolation past a run's last evaluation), then averaged across seeds."
            )
        else:
            section.paragraphs.append(
                "Training wall-clock since the run started (evaluation included), on the "
                "machine named in the caption; runs that shared cores (a sweep with "
                "`--jobs` > 1) are slower than alone."
            )
        return section

    def episodes(self) -> Section:
        section = Section("Episodes per fitness evaluation")
        if not self.figure(
            section,
            plots.episodes_figure(self.steps, self.runs),
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
        scaling = d.scaling_frame(self.runs)
        if scaling.empty:
            section.paragraphs.append(
                "Not measured: no algorithm was run on one env with two or more worker "
                "counts (sweep `workers: [1, 2, ...]`)."
            )
            return section
        section.paragraphs.append(
            "Throughput is training env steps per second of training wall-clock; speed-up is "
            "against the fewest workers of each series, efficiency = speed-up x w0 / workers "
            "(1 is linear). A machine with fewer cores than workers cannot scale."
        )
        self.figure(section, plots.scaling_figure(scaling), "scaling.png", "speed-up")
        section.tables.append((d.caption(scaling), tables.scaling_table(scaling)))
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

    def umap(self) -> Section:
        section = Section("Map of the models visited (UMAP)")
        if self.umap_runs <= 0:
            section.paragraphs.append("Skipped (`--umap-runs 0`).")
            return section
        from harness.report import umap_map

        with_log = self.runs[self.runs["has_population_log"]].sort_values(
            ["env", "algo", "seed", "run"]
        )
        chosen = with_log.groupby(["env", "algo"], sort=False).head(1).head(self.umap_runs)
        drawn = 0
        for _, row in chosen.iterrows():
            record = self.table.record(row["run"])
            log = read_population(record.path)
            if log is None:
                continue
            same = self.runs[self.runs["run"] == row["run"]]
            fig = umap_map.population_figure(record, log, d.caption(same))
            if self.figure(
                section, fig, f"umap_{_safe(row['run'])}.png", f"UMAP map of run {row['run']}"
            ):
                drawn += 1
        if drawn:
            section.paragraphs.append(
                "Each point is one model the run evaluated, embedded in 2-D by UMAP "
                "(random_state 0); circles joined by a line are the successive centres, the "
                "star the last one. Models of OpenAI-ES are rebuilt from the stored centres "
                "and noise indices; others from their stored vectors or centres."
            )
            return section
        section.paragraphs.append(
            "No run here stored a population log (`population.npz`), so the models visited "
            "cannot be rebuilt; the map below, when drawn, places each run's final "
            "parameters instead."
        )
        for env, env_runs in self.runs.groupby("env", sort=True):
            if drawn >= self.umap_runs:
                break
            fig = umap_map.final_params_figure(env_runs, self.table.records, d.caption(env_runs))
            if self.figure(
                section,
                fig,
                f"umap_final_{_safe(str(env))}.png",
                f"UMAP map of final models on {env}",
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
                "algorithm": frame["algo"],
                "env": frame["env"],
                "seed": frame["seed"],
                "k": frame["episodes_per_fitness"],
                "workers": frame["workers"],
                "backend": frame["backend"],
                "final return": [tables.fmt(v) for v in frame["final_eval_return"]],
                "timesteps": [tables.fmt(v, 0) for v in frame["final_timesteps"]],
                "wall-clock s": [tables.fmt(v, 1) for v in frame["final_wall_time_s"]],
                "stopped": frame["stop_reason"].fillna(""),
            }
        )
        section.tables.append(("", listing))
        if len(excluded):
            section.paragraphs.append(
                f"{len(excluded)} run(s) not completed, left out of every figure and table: "
                + ", ".join(
                    f"{r} ({s})" for r, s in zip(excluded["run"], excluded["status"], strict=True)
                )
                + "."
            )
        return section


def build_report(
    paths: Sequence[str | Path],
    out: str | Path,
    title: str | None = None,
    umap_runs: int = 2,
    statuses: Sequence[str] = ("COMPLETED",),
) -> Path:
    """Write the report for the runs under ``paths`` into ``out``; return ``report.md``'s path.

    Raises :class:`ReportError` when there is nothing to report (then nothing is written).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_runs(paths)
    for warning in caught:
        print(f"harness: warning: {warning.message}", file=sys.stderr)
    if len(table) == 0:
        raise ReportError(f"no readable runs under {', '.join(map(str, paths))}")
    selected = table.select(statuses)
    excluded = table.runs[~table.runs["status"].isin(list(statuses))]
    if len(selected) == 0:
        raise ReportError(
            f"none of the {len(table)} runs under {', '.join(map(str, paths))} "
            f"has status {' or '.join(statuses)}"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "report.md").exists():
        for stale in out.glob("*.png"):
            stale.unlink()
    builder = ReportBuilder(selected, out, umap_runs)
    runs = builder.runs

    intro = [
        f"Generated by `harness report {' '.join(map(str, paths))} --out {out}` from "
        f"{len(runs)} stored run(s); every figure and table is drawn from the run records "
        "(Sacred FileStorage directories), none from a rerun.",
        "- Environments: " + _code_list(sorted(runs["env"].astype(str).unique())) + "\n"
        "- Algorithms: " + _code_list(sorted(runs["algo"].astype(str).unique())) + "\n"
        "- Budget: " + d.budget_text(runs) + "\n"
        "- Seeds: " + d.seeds_text(runs).removeprefix("seeds ").removeprefix("seed ") + "\n"
        "- Machine: " + d.machine_text(runs) + "\n"
        "- Sweeps: "
        + (_code_list(sorted(runs["sweep"].dropna().astype(str).unique())) or "none (single runs)"),
        "Data: [runs.csv](runs.csv) (tidy, one row per run and step: config columns and every "
        "metric; evaluations are sparse, NaN between them) and [summary.csv](summary.csv) "
        "(one row per run).",
    ]
    if table.skipped:
        intro.append("Skipped damaged run directories: " + "; ".join(table.skipped) + ".")

    sections = [
        builder.final_scores(),
        builder.curves("timesteps", "eval_vs_timesteps.png", "Evaluation return against timesteps"),
        builder.curves(
            "wall_time_s", "eval_vs_wallclock.png", "Evaluation return against wall-clock"
        ),
        builder.episodes(),
        builder.scaling(),
        builder.wire(),
        builder.umap(),
        builder.run_list(excluded),
    ]
    doc = Document(title or _default_title(runs), intro, sections)
    (out / "report.md").write_text(to_markdown(doc), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc, out), encoding="utf-8")
    selected.steps.to_csv(out / "runs.csv", index=False)
    runs.to_csv(out / "summary.csv", index=False)
    return out / "report.md"


def _default_title(runs: pd.DataFrame) -> str:
    sweeps = sorted(runs["sweep"].dropna().astype(str).unique())
    envs = ", ".join(sorted(runs["env"].astype(str).unique()))
    algos = " vs ".join(sorted(runs["algo"].astype(str).unique()))
    name = f"{', '.join(sweeps)}: " if sweeps else ""
    return f"{name}{algos} on {envs}"
