"""`harness report` end to end from a tiny real sweep; the statistics rule, budget audit,
settings, reproduce commands, anchors and scaling model; degenerate inputs; the model map."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import textwrap
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest

from evaluation.noise import NoiseSpec, NoiseTable
from harness import rundir
from harness.cli import build_parser, main
from harness.launch import resolve_run_args
from harness.records import POPULATION_ARTIFACT, PopulationLogWriter, load_runs, read_population
from harness.report import anchors as anchor_mod
from harness.report import audit, scaling, settings, stats
from harness.report.data import (
    GROUP,
    MAX_GAP_AT_CUT,
    add_groups,
    carry_cpu_seconds,
    common_budget,
    cpu_seconds_compared,
    eval_curves,
    every_run_has,
    scores_at,
)
from harness.report.tables import markdown_rows, score_table
from harness.report.umap_map import ModelCloud, centres_caption, models_from_population, pca
from harness.sweep import load_sweep, run_sweep
from tests.conftest import harness_cli

matplotlib.use("Agg")

NOISE_SIZE = 200_000


def _sweep_file(folder: Path, name: str, grid: str, budget: str = "timesteps: 2000") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        grid: {{{grid}}}
        budget:
          {budget}
        backend: inline
        set: [eval_every_timesteps=500, eval_episodes=2]
        overrides:
          optimes: [population=10, noise_size={NOISE_SIZE}]
          cma: [population=10]
        """)
    )
    return path


def _add_population_log(run_dir: Path) -> None:
    """Write the population log the runner will store (synthetic fitness, real noise table)."""
    config = json.loads((run_dir / "config.json").read_text())
    centre = np.load(run_dir / "final_params.npy")
    seed = config["params"]["noise_seed"]
    writer = PopulationLogWriter(
        centre_every=1, noise_size=NOISE_SIZE, noise_seed=config["seed"] if seed < 0 else seed
    )
    rng = np.random.default_rng(0)
    for generation in range(1, 7):
        pairs = rng.integers(0, NOISE_SIZE - centre.size, size=5)
        writer.add_generation(
            generation,
            fitness=rng.normal(generation, 1.0, size=10),
            centre=centre + 0.05 * generation,
            sigma=0.1,
            noise_index=np.repeat(pairs, 2),
            sign=np.tile([1, -1], 5),
        )
    writer.add_final_centre(centre)
    writer.save(run_dir / POPULATION_ARTIFACT)
    record = json.loads((run_dir / "run.json").read_text())
    if POPULATION_ARTIFACT not in record["artifacts"]:
        record["artifacts"].append(POPULATION_ARTIFACT)
    (run_dir / "run.json").write_text(json.dumps(record))


def _run_dirs(runs: Path) -> list[Path]:
    return sorted(
        (p for p in runs.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )


def _config(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


@pytest.fixture(scope="module")
def sweep_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny real sweep: optimes and cma, 2 seeds, k = 1 and 2; plus optimes at 2 workers."""
    folder = tmp_path_factory.mktemp("report")
    runs = folder / "runs"
    main_grid = "algo: [optimes, cma], env: [CartPole], seed: [0, 1], episodes: [1, 2]"
    scaling_grid = "algo: [optimes], env: [CartPole], seed: [0], workers: [2]"
    for name, grid in (("tiny", main_grid), ("tiny_w2", scaling_grid)):
        result = run_sweep(
            load_sweep(_sweep_file(folder, name, grid)), runs, jobs=2, progress=False
        )
        assert not result.failed, [(o.cell.label, o.detail) for o in result.failed]
    first_optimes = next(h for h in _run_dirs(runs) if _config(h)["algo"] == "optimes")
    _add_population_log(first_optimes)
    return runs


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real optimes run of 2 generations: a much smaller budget than the sweep's."""
    folder = tmp_path_factory.mktemp("short")
    runs = folder / "runs"
    grid = "algo: [optimes], env: [CartPole], seed: [0]"
    sweep = load_sweep(_sweep_file(folder, "short", grid, budget="generations: 2"))
    result = run_sweep(sweep, runs, jobs=1, progress=False)
    assert not result.failed
    return runs


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"## {title}")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end > 0 else None]


@pytest.mark.slow
def test_report_end_to_end(
    sweep_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(sweep_runs), "--out", str(out), "--map-runs", "1"]) == 0
    assert "report.md" in capsys.readouterr().out
    expected = {
        "report.md",
        "report.html",
        "runs.csv",
        "summary.csv",
        "scores_common_budget.png",
        "eval_vs_timesteps.png",
        "eval_vs_wallclock.png",
        "fitness_vs_timesteps.png",
        "episodes_per_fitness.png",
        "scaling.png",
        "bytes_per_generation.png",
    }
    names = {p.name for p in out.iterdir()}
    assert expected <= names, expected - names
    maps = [n for n in names if n.startswith(("map_", "umap_"))]
    assert len(maps) == 1 and maps[0].startswith("map_") and "final" not in maps[0]

    markdown = (out / "report.md").read_text()
    # the title line states n and the budget
    title = markdown.splitlines()[0]
    assert title.startswith("# ") and "n=1-2 runs per group" in title and "budget 2k" in title
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert set(images) == {n for n in names if n.endswith(".png")}
    for png in images:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # every caption names env, budget, seeds and machine
    assert "CartPole (CartPole-v1) · budget 2k timesteps · seeds 0, 1 · Linux" in markdown

    # groups of 2 runs: no interval, no IQM, in both score tables; n and mean are those of
    # the per-run scores in summary.csv
    summary = pd.read_csv(out / "summary.csv")
    for title_text, column in (
        ("Scores at the common budget", "score_common_timesteps"),
        ("Scores at the end of each run", "final_eval_return"),
    ):
        per_group = summary.groupby("group")[column]
        rows = markdown_rows(_section(markdown, title_text), "| env | group | n |")
        assert {r["group"] for r in rows} == {
            "cma k=1 w=1",
            "cma k=2 w=1",
            "optimes k=1 w=1",
            "optimes k=1 w=2",
            "optimes k=2 w=1",
        }
        for row in rows:
            assert int(row["n"]) == per_group.count()[row["group"]] in (1, 2)
            assert row["mean 95% CI"] == row["IQM"] == row["IQM 95% CI"] == "n too small"
            # the table rounds to one decimal
            assert float(row["mean"]) == pytest.approx(per_group.mean()[row["group"]], abs=0.051)

    # P(X > Y): exactly the pairs that differ in one of algorithm, k, W
    pairs = markdown_rows(_section(markdown, "Scores at the common budget"), "| env | X | Y |")
    listed = {(r["X"], r["Y"], r["differ in"]) for r in pairs}
    assert listed == {
        ("cma k=1 w=1", "cma k=2 w=1", "k"),
        ("cma k=1 w=1", "optimes k=1 w=1", "algorithm"),
        ("cma k=2 w=1", "optimes k=2 w=1", "algorithm"),
        ("optimes k=1 w=1", "optimes k=1 w=2", "W"),
        ("optimes k=1 w=1", "optimes k=2 w=1", "k"),
    }
    assert all(r["95% CI"] == "n too small" for r in pairs)

    # conclusions: one line per env, inconclusive at n <= 2
    conclusions = _section(markdown, "Result")
    line = next(x for x in conclusions.splitlines() if x.startswith("- **CartPole**"))
    assert "common budget" in line and "common wall-clock" in line
    # runs of a few CPU-seconds are not compared on them (the meter is read once a second)
    assert "CPU-seconds:" not in line
    assert "No aggregate curve" in _section(markdown, "Evaluation return against CPU-seconds")
    assert "inconclusive at n=" in line or " tie at " in line

    # settings: the differing columns only; the appendix has every key
    settings_rows = markdown_rows(_section(markdown, "Settings behind every curve"), "| env |")
    assert {r["k"] for r in settings_rows} == {"1", "2"} and {r["W"] for r in settings_rows} == {
        "1",
        "2",
    }
    assert "backend" not in settings_rows[0]  # inline everywhere: not a difference
    appendix = _section(markdown, "Appendix A: every setting of every group")
    assert "| params.population |" in appendix and "| policy.kind |" in appendix

    # budgets table with requested and used, CPU-seconds and cores
    budget_rows = markdown_rows(_section(markdown, "Budgets: requested and used"), "| env |")
    assert all(r["requested"] == "2k timesteps" and r["cores"] for r in budget_rows)

    # anchors: CartPole's solved threshold is drawn on the timesteps figure
    curves = _section(markdown, "Evaluation return against timesteps")
    anchor_rows = markdown_rows(curves, "| env | anchor |")
    assert [r["anchor"] for r in anchor_rows] == ["solved 475"]
    assert "reward_threshold=475.0" in anchor_rows[0]["source"]

    # reproduce commands: one per run
    commands = re.findall(r"^harness run .*$", markdown, flags=re.MULTILINE)
    assert len(commands) == 9

    html = (out / "report.html").read_text()
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert len(sources) == len(images) and all(
        s.startswith("data:image/png;base64,") for s in sources
    )
    assert "<table>" in html and "http" not in html.replace("http-equiv", "")
    for fragment in re.findall(r'href="#([^"]+)"', html):
        assert f'id="{fragment}"' in html, fragment

    table = load_runs([sweep_runs])
    tidy = pd.read_csv(out / "runs.csv")
    assert len(tidy) == len(table.steps)
    assert {
        "run",
        "algo",
        "seed",
        "episodes_per_fitness",
        "workers",
        "timesteps",
        "eval_return_mean",
        "wall_time_s",
    } <= set(tidy.columns)
    assert len(summary) == 9 and set(summary["sweep"]) == {"tiny", "tiny_w2"}
    assert {"group", "score_common_timesteps", "cpu_seconds"} <= set(summary.columns)


@pytest.mark.slow
def test_reproduce_commands_rebuild_each_runs_config(sweep_runs: Path) -> None:
    for run_dir in _run_dirs(sweep_runs):
        config = _config(run_dir)
        command = settings.reproduce_command(config)
        argv = shlex.split(command)
        assert argv[:2] == ["harness", "run"]
        rebuilt = resolve_run_args(build_parser().parse_args(argv[1:])).config
        family = settings._family(config["algo"])
        for key, value in config.items():
            if key == "sweep" or not settings._applies(key, family):
                continue
            assert rebuilt[key] == value, (run_dir.name, key, command)


def test_set_values_read_back_as_written() -> None:
    from harness.config import parse_value

    for value in (1e-05, 3e-4, 0.1 + 0.2, 1e20, 2.0, True, None, [64, 64], "adam"):
        assert parse_value(settings._yaml_value(value)) == value


@pytest.mark.slow
def test_report_of_one_run_still_has_a_table(sweep_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "single"
    one = _run_dirs(sweep_runs)[0]
    assert main(["report", str(one), "--out", str(out), "--map-runs", "0"]) == 0
    markdown = (out / "report.md").read_text()
    assert "(n=1 run per group" in markdown.splitlines()[0]
    assert "no two groups on one env differ" in markdown
    assert "Not compared" in markdown and "Not measured" in markdown
    row = markdown_rows(_section(markdown, "Scores at the common budget"), "| env | group | n |")
    assert len(row) == 1 and row[0]["n"] == "1" and row[0]["seeds"] == "0"
    assert row[0]["mean 95% CI"] == "n too small" and row[0]["IQM"] == "n too small"
    assert (out / "eval_vs_timesteps.png").exists()
    assert "only " in _section(markdown, "Result") and "nothing to compare" in markdown


@pytest.mark.slow
def test_the_stated_command_draws_the_report_again(sweep_runs: Path, tmp_path: Path) -> None:
    """The "Generated by" line carries every flag the report was drawn with."""
    out = tmp_path / "flags"
    one = str(_run_dirs(sweep_runs)[0])
    args = [one, "--out", str(out), "--title", "probe's study", "--map-runs", "0"]
    assert main(["report", *args, "--all-statuses"]) == 0
    stated = re.search(r"Generated by `([^`]*)`", (out / "report.md").read_text())
    assert stated is not None
    words = shlex.split(stated.group(1))
    assert words[:2] == ["harness", "report"] and words[2:] == [*args, "--all-statuses"]


@pytest.mark.slow
def test_a_run_whose_process_died_is_named_as_such(sweep_runs: Path, tmp_path: Path) -> None:
    """A run left RUNNING by a killed head is listed as resumable, a live one as RUNNING."""
    runs = tmp_path / "runs"
    completed, dead, live = (runs / name for name in ("1", "2", "3"))
    for target in (completed, dead, live):
        shutil.copytree(_run_dirs(sweep_runs)[0], target)
    for target in (dead, live):
        record = json.loads((target / rundir.RUN).read_text())
        (target / rundir.RUN).write_text(json.dumps({**record, "status": "RUNNING"}))
        (target / rundir.LOCK).touch()
    holder = rundir.lock_run_dir(live)  # this process plays the live head
    assert holder is not None
    try:
        out = tmp_path / "report"
        assert main(["report", str(runs), "--out", str(out), "--map-runs", "0"]) == 0
    finally:
        os.close(holder)
    listing = re.search(r"2 run\(s\) not completed[^\n]*", (out / "report.md").read_text())
    assert listing is not None
    assert "runs/2 (RUNNING in its record, but no process runs it" in listing.group(0)
    assert "runs/3 (RUNNING)" in listing.group(0)


@pytest.mark.slow
def test_the_same_runs_draw_the_same_score_figure(sweep_runs: Path, tmp_path: Path) -> None:
    """Seaborn jitters strip-plot points with numpy's global RNG: seeded, the figure repeats."""
    figures = []
    for name in ("first", "second"):
        np.random.seed(int.from_bytes(name.encode()[:4], "little"))  # callers' states differ
        assert (
            main(["report", str(sweep_runs), "--out", str(tmp_path / name), "--map-runs", "0"]) == 0
        )
        figures.append((tmp_path / name / "scores_common_budget.png").read_bytes())
    assert figures[0] == figures[1]


@pytest.mark.slow
def test_unequal_budgets_warn_at_the_top(sweep_runs: Path, short_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    assert (
        main(["report", str(sweep_runs), str(short_run), "--out", str(out), "--map-runs", "0"]) == 0
    )
    markdown = (out / "report.md").read_text()
    intro_at = markdown.index("Generated by")
    warnings_at = markdown.index("> **Warnings**")
    # the result first (conclusions, main curve, scores), then the warnings, then the rest
    result_at = markdown.index("## Result")
    assert result_at < warnings_at < intro_at
    assert markdown.index("eval_vs_timesteps.png") < warnings_at
    block = markdown[warnings_at:intro_at]
    assert "asked for different budgets" in block and "2 generations" in block
    assert re.search(r"groups used timesteps differing by \+\d+%", block)
    # the short run is its own group (a different budget), never averaged with the others
    summary = pd.read_csv(out / "summary.csv")
    short = summary[summary["sweep"] == "short"]
    assert len(short) == 1
    short_group = short["group"].iloc[0]
    assert short_group not in set(summary.loc[summary["sweep"] != "short", "group"])
    settings_rows = markdown_rows(_section(markdown, "Settings behind every curve"), "| env |")
    budgets = {r["group"]: r["budget"] for r in settings_rows}
    assert budgets[short_group] == "2 generations"
    assert {v for g, v in budgets.items() if g != short_group} == {"2k timesteps"}
    # scores are compared at the short run's last evaluation; a run that had not evaluated
    # by then has no score there (never one extrapolated), nor has one whose evaluations
    # either side of it are further apart than that budget (never one read off a long line)
    found = re.search(r"\(CartPole: ([\d.]+)(k?) timesteps\)", markdown)
    assert found is not None
    common = float(found.group(1)) * (1000 if found.group(2) else 1)
    table = load_runs([sweep_runs, short_run])
    evals = table.steps[table.steps["eval_return_mean"].notna()]
    last_eval = evals[evals["run_dir"] == short["run_dir"].iloc[0]]["timesteps"].max()
    assert common == pytest.approx(last_eval, rel=0.01)
    assert common < summary.loc[summary["sweep"] != "short", "final_timesteps"].min()
    at = {run_dir: sorted(frame["timesteps"]) for run_dir, frame in evals.groupby("run_dir")}
    gaps = 0
    for run_dir, score in zip(summary["run_dir"], summary["score_common_timesteps"], strict=True):
        before = [t for t in at[run_dir] if t <= last_eval * 1.001]
        after = [t for t in at[run_dir] if t > last_eval * 1.001]
        between = bool(before and after) and before[-1] < last_eval * 0.999
        too_far = between and after[0] - before[-1] > MAX_GAP_AT_CUT * last_eval
        gaps += too_far
        assert math.isnan(score) == (not before or too_far)
    assert gaps  # the rule is exercised: some run evaluated far past the short budget

    html = (out / "report.html").read_text()
    assert html.index('id="result"') < html.index('class="warnings"') < html.index("Generated by")


def test_budget_warnings_name_overruns_and_spreads() -> None:
    runs = pd.DataFrame(
        {
            "run": ["a", "b", "c", "d"],
            "env": ["Ant"] * 4,
            GROUP: ["cma k=1", "cma k=1", "nevergrad-es k=5", "nevergrad-es k=5"],
            "budget_timesteps": [150_000.0] * 4,
            "budget_generations": [math.nan] * 4,
            "budget_time_limit": [math.nan] * 4,
            "budget_target_return": [math.nan] * 4,
            "final_timesteps": [153_046.0, 153_000.0, 247_142.0, 200_000.0],
            "final_wall_time_s": [36.5, 36.0, 58.2, 50.0],
        }
    )
    lines = audit.budget_warnings(runs)
    overrun = [w for w in lines if "overran" in w]
    assert len(overrun) == 1 and "nevergrad-es k=5" in overrun[0] and "+65%" in overrun[0]
    assert any("timesteps differing by" in w for w in lines)
    even = runs.assign(final_timesteps=[150_500.0] * 4, final_wall_time_s=[36.0] * 4)
    assert audit.budget_warnings(even) == []


def test_machine_warnings_name_loaded_and_unlike_machines() -> None:
    """Wall-clock from runs that overlapped with more workers than cores, or from machines
    that differ, is labelled as such; runs one after another on one machine are not."""

    def runs(starts: list[str], stops: list[str], cores: list[float]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "run": ["a", "b"],
                "env": ["Lander", "Lander"],
                "workers": [2, 2],
                "host_name": ["vm", "vm"],
                "host_cpu": ["EPYC", "EPYC"],
                "host_cpu_count": cores,
                "start_time": starts,
                "stop_time": stops,
            }
        )

    day = "2026-11-25T"
    apart = runs(
        [day + "01:00:00", day + "02:00:00"], [day + "01:30:00", day + "02:30:00"], [2.0, 2.0]
    )
    assert audit.machine_warnings(apart) == []
    together = runs(
        [day + "01:00:00", day + "01:10:00"], [day + "01:30:00", day + "01:40:00"], [2.0, 2.0]
    )
    (line,) = audit.machine_warnings(together)
    assert "up to 2 runs" in line and "4 workers on 2 cores" in line and "loaded machine" in line
    unlike = runs(
        [day + "01:00:00", day + "02:00:00"], [day + "01:30:00", day + "02:30:00"], [2.0, 16.0]
    )
    (line,) = audit.machine_warnings(unlike)
    assert "unlike machines" in line and "16 CPUs" in line


def test_statistics_follow_the_number_of_runs() -> None:
    scores = {"two": [1.0, 2.0], "three": [1.0, 2.0, 4.0], "four": [1.0, 2.0, 4.0, 8.0]}
    runs = pd.DataFrame(
        [
            {"run": f"{g}{i}", "env": "E", GROUP: g, "seed": i, "score": v}
            for g, values in scores.items()
            for i, v in enumerate(values)
        ]
    )
    frame = stats.score_frame(runs, "score").set_index(GROUP)
    assert math.isnan(frame.at["two", "mean_low"]) and math.isnan(frame.at["two", "iqm"])
    assert (
        frame.at["three", "mean_low"] <= frame.at["three", "mean"] <= frame.at["three", "mean_high"]
    )
    assert math.isnan(frame.at["three", "iqm"])
    assert frame.at["four", "iqm"] == pytest.approx(3.0)  # middle half of 1, 2, 4, 8
    assert frame.at["four", "iqm_low"] <= 3.0 <= frame.at["four", "iqm_high"]
    shown = score_table(frame.reset_index()).set_index("group")
    assert shown.loc["two", ["mean 95% CI", "IQM", "IQM 95% CI"]].tolist() == ["n too small"] * 3
    assert shown.loc["three", "mean 95% CI"].startswith("[")
    assert shown.loc["three", "IQM"] == "n too small"
    assert shown.loc["four", "IQM"] == "3.0" and shown.loc["four", "IQM 95% CI"].startswith("[")


def test_lead_is_called_only_when_the_difference_excludes_zero() -> None:
    far = {"a": [10.0, 11, 12], "b": [1.0, 2, 3]}
    assert "a ahead at n=3" in stats.lead_text(far, "at 1k timesteps")
    near = {"a": [1.0, 5, 9], "b": [0.0, 4, 8]}
    assert "inconclusive at n=3" in stats.lead_text(near, "at 1k timesteps")
    small = {"a": [10.0, 11], "b": [1.0, 2]}
    assert "inconclusive at n=2" in stats.lead_text(small, "at 1k timesteps")


def test_one_factor_pairs_only() -> None:
    rows = [
        ("optimes k=1", "optimes", 1, 1),
        ("optimes k=5", "optimes", 5, 1),
        ("cma k=1", "cma", 1, 1),
        ("cma k=5 w=2", "cma", 5, 2),
    ]
    runs = pd.DataFrame(
        [
            {"env": "E", GROUP: g, "algo": a, "episodes_per_fitness": k, "workers": w}
            for g, a, k, w in rows
        ]
    )
    pairs = {(x, y, f) for _, x, y, f in stats.one_factor_pairs(runs)}
    assert pairs == {
        ("cma k=1", "optimes k=1", "algorithm"),
        ("optimes k=1", "optimes k=5", "k"),
    }


def test_iqm_and_curve_statistics_equal_rliables() -> None:
    from rliable import metrics

    rng = np.random.default_rng(3)
    for n in (3, 4, 5, 8, 9):
        scores = rng.normal(size=(n, 1))
        assert stats.iqm(scores) == pytest.approx(metrics.aggregate_iqm(scores))
        curve = rng.normal(size=(n, 1, 7))
        expected = [metrics.aggregate_iqm(curve[..., f]) for f in range(7)]
        np.testing.assert_allclose(stats.curve_statistic("iqm")(curve), expected)
        np.testing.assert_allclose(
            stats.curve_statistic("mean")(curve),
            [metrics.aggregate_mean(curve[..., f]) for f in range(7)],
        )


def _runs_on_one_env(names: list[str], algos: list[str], seeds: list[int]) -> pd.DataFrame:
    """Grouped run rows on env "E" at k = 1 and W = 1, as the report's tables hold them."""
    n = len(names)
    return add_groups(
        pd.DataFrame(
            {
                "run": names,
                "env": ["E"] * n,
                "algo": algos,
                "seed": seeds,
                "episodes_per_fitness": [1] * n,
                "workers": [1] * n,
            }
        )
    )


def test_scores_at_the_common_budget() -> None:
    runs = _runs_on_one_env(["a", "b"], ["x", "y"], [0, 0])
    steps = pd.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 2,
            "timesteps": [100.0, 200.0, 300.0, 100.0, 250.0],
            "eval_return_mean": [1.0, 2.0, 3.0, 10.0, 40.0],
        }
    )
    budget = common_budget(steps, runs, "timesteps")
    assert budget == {"E": 250.0}
    np.testing.assert_allclose(scores_at(steps, runs, "timesteps", budget), [2.5, 40.0])
    # evaluations either side of the budget over half of it apart give no score there
    sparse = steps.assign(timesteps=[0.0, 200.0, 300.0, 0.0, 250.0])
    np.testing.assert_allclose(scores_at(sparse, runs, "timesteps", {"E": 150.0}), [np.nan, np.nan])
    np.testing.assert_allclose(scores_at(sparse, runs, "timesteps", {"E": 200.0}), [2.0, np.nan])
    cut = eval_curves(steps, runs, "timesteps", until=budget)
    assert cut["timesteps"].max() == 250.0
    assert cut.loc[cut["run"] == "a", "eval_return_mean"].iloc[-1] == pytest.approx(2.5)


def test_anchor_file_and_drawing() -> None:
    import matplotlib.pyplot as plt

    anchors = anchor_mod.load_anchors()
    by_id = {(a.gym_id, a.label): a for a in anchors}
    assert by_id[("AntBulletEnv-v0", "rl-zoo PPO")].value == pytest.approx(2865.922)
    assert by_id[("AntBulletEnv-v0", "rl-zoo A2C")].timesteps == 2_000_000
    assert by_id[("LunarLanderContinuous-v3", "rl-zoo PPO")].timesteps == 1_000_000
    assert by_id[("LunarLanderContinuous-v3", "solved")].value == 200
    assert by_id[("AntBulletEnv-v0", "solved")].value == 2500
    assert all(a.source for a in anchors)
    runs = pd.DataFrame(
        {"env": ["PendulumPO", "Pendulum"], "gym_id": ["Pendulum-v1", "Pendulum-v1"]}
    )
    # the zoo's Pendulum-v1 figures are fully observed; PendulumPO gets its NoVel LSTM's only
    assert [a.label for a in anchor_mod.anchors_for(anchors, runs, "PendulumPO")] == [
        "rl-zoo RecurrentPPO"
    ]
    assert by_id[("Pendulum-v1", "rl-zoo RecurrentPPO")].algo == "recurrent-ppo"
    assert [a.label for a in anchor_mod.anchors_for(anchors, runs, "Pendulum")] == ["rl-zoo PPO"]

    lander = [a for a in anchors if a.gym_id == "LunarLanderContinuous-v3"]
    fig, ax = plt.subplots()
    ax.plot([0, 1_200_000], [-200, 250])
    handles = anchor_mod.draw_anchors(ax, lander, x_max=1_200_000)
    assert len(handles) == len(lander)
    assert any(getattr(h, "get_xdata", lambda: [])()[0] == 1_000_000 for h in handles)
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([0, 150_000], [0, 400])  # the Ant curves of a short run: anchors far above
    ant = [a for a in anchors if a.gym_id == "AntBulletEnv-v0"]
    handles = anchor_mod.draw_anchors(ax, ant, x_max=150_000)
    labels = [h.get_label() for h in handles]
    assert "rl-zoo PPO 2,866 at 2M steps (above the plot)" in labels
    assert len(labels) == len(ant) and ax.get_ylim()[1] < 1000  # the curves keep the scale
    plt.close(fig)
    # GoodAI plotted training fitness: those anchors (and only those) are marked so
    assert {a.label for a in ant if a.training_fitness} == {
        "GoodAI OptimES (pop 100)",
        "GoodAI CMA 5 ep",
    }
    assert all("fitness" in a.measure for a in anchors if a.training_fitness)
    assert not any(a.training_fitness for a in anchors if a.label.startswith("rl-zoo"))


def test_scaling_model_from_the_w1_breakdown() -> None:
    rows = []
    for w, rate, ttt in (
        (1, 1000.0, 40.0),
        (1, 1000.0, 44.0),
        (2, 1800.0, 24.0),
        (4, 3000.0, 15.0),
    ):
        rows.append(
            {
                "run": f"r{w}{rate}{ttt}",
                "env": "E",
                "algo": "optimes",
                "episodes_per_fitness": 1,
                "backend": "process",
                "workers": w,
                "steps_per_s": rate,
                "host_cpu_count": 2.0,
                "time.setup": 5.0,  # before training: outside the model
                "time.rollouts": 8.0 if w == 1 else math.nan,
                "time.head_update": 1.0 if w == 1 else math.nan,
                "time.evaluation": 1.0 if w == 1 else math.nan,  # run by the workers: parallel
                "time_to_target_s": ttt,
                "time_to_target_kind": "confirmed",
            }
        )
    frame = scaling.scaling_frame(pd.DataFrame(rows))
    assert scaling.serial_fraction(frame) == pytest.approx(0.1)  # head_update 1 of 10 s
    model = scaling.model_frame(frame).set_index("workers")
    assert model.at[2, "model_speedup"] == pytest.approx(1 / (0.1 + 0.9 / 2))
    assert model.at[4, "ideal_steps_per_s"] == pytest.approx(4000.0)
    assert model.at[1, "time_to_target_s"] == pytest.approx(42.0)
    assert model.at[4, "model_time_to_target_s"] == pytest.approx(42.0 * (0.1 + 0.9 / 4))
    shown = scaling.scaling_table(scaling.model_frame(frame))
    assert shown["W"].tolist() == ["1", "2", "4 (> cores)"]
    assert shown["time to target s (median)"].iloc[0] == "42.0 (confirmed)"
    assert scaling.scaling_figure(frame, scaling.model_frame(frame)) is not None


@pytest.mark.slow
def test_report_shows_time_to_target_and_model(sweep_runs: Path, tmp_path: Path) -> None:
    """Runs recorded with a target and a breakdown (the runner's summary.json fields)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for run_dir in _run_dirs(sweep_runs):
        config = _config(run_dir)
        if config["algo"] != "optimes" or config["episodes"] != 1 or config["seed"] != 0:
            continue
        copy = runs / run_dir.name
        shutil.copytree(run_dir, copy)
        summary = json.loads((copy / "summary.json").read_text())
        w = config["workers"]
        summary["target"] = {
            "return": 50.0,
            "first_crossing": {"timesteps": 1000, "wall_time_s": 2.0 / w},
            "confirmed": {
                "timesteps": 1200,
                "wall_time_s": 3.0 / w,
                "return_mean": 60.0,
                "episodes": 100,
            },
        }
        summary["time_breakdown"] = {
            "setup": 4.0,
            "rollouts": 3.0 / w,
            "head_update": 1.0,
            "evaluation": 0.0,
        }
        (copy / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--map-runs", "0"]) == 0
    section = _section((out / "report.md").read_text(), "Scaling with workers")
    rows = markdown_rows(section, "| series | W |")
    assert [r["W"] for r in rows] == ["1", "2"]
    assert rows[0]["time to target s (median)"] == "3.0 (confirmed)"
    assert rows[1]["model speed-up"] == f"{1 / (0.25 + 0.75 / 2):.2f}"
    assert "Where the wall-clock went" in section and "rollouts" in section


def test_performance_profiles_across_envs() -> None:
    runs = pd.DataFrame(
        [
            {
                "env": env,
                GROUP: g,
                "algo": g,
                "episodes_per_fitness": 1,
                "workers": 1,
                "seed": s,
                "score": base + 10 * s + (5 if g == "b" else 0),
            }
            for env, base in (("E1", 0.0), ("E2", 100.0))
            for g in ("a", "b")
            for s in range(3)
        ]
    )
    prepared = stats.profile_scores(runs, "score", {"E2": 200.0})
    assert prepared is not None
    scores, taus, with_intervals, note = prepared
    assert set(scores) == {"a", "b"} and scores["a"].shape == (3, 2) and with_intervals
    assert scores["b"][:, 0].max() == pytest.approx(1.0)  # E1: best run is 1
    assert scores["a"][0, 1] == pytest.approx(0.0) and "solved threshold" in note
    from harness.report.plots import performance_profile_figure

    assert performance_profile_figure(scores, taus, with_intervals, note) is not None
    assert stats.profile_scores(runs[runs["env"] == "E1"], "score", {}) is None


def test_report_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no readable runs" in err
    assert not (tmp_path / "o").exists()


def test_umap_models_are_rebuilt_exactly_as_workers_build_them(tmp_path: Path) -> None:
    spec = NoiseSpec(5000, 3)
    table = NoiseTable.create(spec)
    centre0 = np.linspace(-1, 1, 7).astype(np.float32)
    writer = PopulationLogWriter(centre_every=2, noise_size=spec.size, noise_seed=spec.seed)
    for generation in (1, 2, 3):
        writer.add_generation(
            generation,
            np.array([1.0, 2.0, 3.0, 4.0]),
            centre0 * generation,
            sigma=0.5,
            noise_index=np.array([10, 10, 400, 400]),
            sign=np.array([1, -1, 1, -1]),
        )
    writer.save(tmp_path / POPULATION_ARTIFACT)
    log = read_population(tmp_path)
    assert log is not None
    cloud = models_from_population(log)
    assert cloud is not None
    # centres of generations 1 and 3 are stored: 2 centres + 2 x 4 candidates
    assert cloud.is_centre.sum() == 2 and (~cloud.is_centre).sum() == 8
    candidates = cloud.params[~cloud.is_centre]
    expected = centre0 * 3 + np.float32(-1 * 0.5) * table.get(400, 7)
    np.testing.assert_array_equal(candidates[-1], expected)
    assert cloud.fitness[~cloud.is_centre].tolist() == [1.0, 2.0, 3.0, 4.0] * 2
    assert sorted(set(cloud.generation.tolist())) == [1, 3]


def test_map_caption_counts_repeated_centres_once() -> None:
    params = np.array([[0.0, 1.0], [0.0, 1.0], [2.0, 3.0], [0.5, 0.5]])
    cloud = ModelCloud(
        params=params,
        fitness=np.zeros(4),
        generation=np.array([1, 2, 3, 3]),
        is_centre=np.array([True, True, True, False]),
    )
    assert centres_caption(cloud) == "3 centres (2 distinct)"
    cloud.is_centre[1] = False
    assert centres_caption(cloud) == "2 centres"


def test_pca_map_matches_the_leading_principal_components() -> None:
    rng = np.random.default_rng(0)
    for shape in ((120, 40), (400, 700)):  # exact SVD and the randomized path
        data = rng.normal(size=shape)
        data[:, 0] *= 8.0
        data[:, 1] *= 4.0
        xy, ratios = pca(data)
        centred = data - data.mean(axis=0)
        _, singular, vt = np.linalg.svd(centred, full_matrices=False)
        exact = centred @ vt[:2].T
        for i in range(2):
            assert abs(np.corrcoef(xy[:, i], exact[:, i])[0, 1]) > 0.999
        np.testing.assert_allclose(ratios, singular[:2] ** 2 / (singular**2).sum(), rtol=1e-3)
        np.testing.assert_array_equal(pca(data)[0], xy)  # deterministic


# Slow: numba compiles UMAP for about 15 s; the default PCA map is checked in the fast suite.
@pytest.mark.slow
def test_umap_map_when_asked(sweep_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "umap"
    assert main(["report", str(sweep_runs), "--out", str(out), "--map-runs", "1", "--umap"]) == 0
    assert [p.name for p in out.glob("umap_*.png")]
    assert "Map of the models visited (UMAP)" in (out / "report.md").read_text()


def test_curves_average_only_where_every_seed_has_evaluated() -> None:
    runs = _runs_on_one_env(["a", "b"], ["x", "x"], [0, 1])
    steps = pd.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 3,
            "timesteps": [100.0, 200.0, 300.0, 150.0, 250.0, 400.0],
            "eval_return_mean": [1.0, 2.0, 3.0, 10.0, 20.0, 40.0],
        }
    )
    curves = eval_curves(steps, runs, "timesteps", points=5)
    assert curves["timesteps"].min() == 150.0 and curves["timesteps"].max() == 300.0
    a = curves[curves["run"] == "a"]
    np.testing.assert_allclose(
        a["eval_return_mean"], np.interp(a["timesteps"], [100, 200, 300], [1, 2, 3])
    )


def _four_runs(**columns: list[Any]) -> pd.DataFrame:
    """Runs a-d of algorithm x on env E, seeds 0 and 1 twice, k = 1, W = 1 unless given."""
    base: dict[str, list[Any]] = {
        "run": list("abcd"),
        "env": ["E"] * 4,
        "algo": ["x"] * 4,
        "seed": [0, 1, 0, 1],
        "episodes_per_fitness": [1] * 4,
        "workers": [1] * 4,
    }
    return pd.DataFrame({**base, **columns})


def test_groups_split_on_any_setting_but_ignore_unrecorded_keys() -> None:
    runs = _four_runs(
        **{
            "params.population": [10, 10, 40, 40],
            "reward_transform": [math.nan, "none", math.nan, "none"],
        }
    )
    grouped = add_groups(runs, ["params.population", "reward_transform"])
    assert grouped[GROUP].tolist() == ["x [population=10]"] * 2 + ["x [population=40]"] * 2


def test_a_run_older_than_a_knob_groups_with_the_default_it_followed() -> None:
    runs = _four_runs(**{"policy.init": [math.nan, "normc", "torch", "torch"]})
    recorded = {"a": [], "b": ["policy.init"], "c": ["policy.init"], "d": ["policy.init"]}
    grouped = add_groups(runs, ["policy.init"], recorded)
    assert grouped[GROUP].tolist() == ["x [init=normc]"] * 2 + ["x [init=torch]"] * 2


def test_a_budget_older_than_its_knob_reads_as_the_null_it_followed() -> None:
    """Grid runs recorded before ``cpu_limit`` existed, beside runs trained to a CPU limit:
    the label names the budget, the column's default read as the runs that record a null
    read it."""
    runs = _four_runs(**{"budget_cpu_limit": [math.nan, math.nan, 3913.0, 3913.0]})
    recorded = {"a": [], "b": ["budget_cpu_limit"], "c": ["budget_cpu_limit"]}
    recorded["d"] = recorded["c"]
    grouped = add_groups(runs, ["budget_cpu_limit"], recorded)
    assert grouped[GROUP].tolist() == ["x [budget=none]"] * 2 + ["x [budget=3913 CPU-s]"] * 2
    # the budget keys that differ are named together, in words, where the first of them was
    runs = _four_runs(
        **{
            "budget_timesteps": [1e6, 1e6, math.nan, math.nan],
            "eval_every_timesteps": [50000, 50000, 5e6, 5e6],
            "budget_cpu_limit": [math.nan, math.nan, 3913.0, 3913.0],
        }
    )
    keys = ["budget_timesteps", "eval_every_timesteps", "budget_cpu_limit"]
    recorded = {run: ["budget_timesteps", "eval_every_timesteps"] for run in "ab"}
    recorded |= {run: keys for run in "cd"}
    grouped = add_groups(runs, keys, recorded)
    assert (
        grouped[GROUP].tolist()
        == ["x [budget=1M timesteps, eval_every_timesteps=50000]"] * 2
        + ["x [budget=3913 CPU-s, eval_every_timesteps=5000000]"] * 2
    )


def test_a_setting_that_changes_with_w_still_names_the_groups() -> None:
    runs = _four_runs(
        workers=[1, 1, 8, 8], reward_transform=["shaped", "shaped", "annealed", "annealed"]
    )
    grouped = add_groups(runs, ["reward_transform"])
    assert (
        grouped[GROUP].tolist()
        == ["x w=1 [reward_transform=shaped]"] * 2 + ["x w=8 [reward_transform=annealed]"] * 2
    )


def test_a_sweep_per_configuration_names_groups_that_k_also_splits() -> None:
    tuned = 0.024225022473841774
    runs = _four_runs(
        episodes_per_fitness=[1, 1, 5, 5],
        sweep=["lander-shipped"] * 2 + ["lander-tuned"] * 2,
        **{"params.learning_rate": [0.03, 0.03, tuned, tuned]},
    )
    grouped = add_groups(runs, ["params.learning_rate"])
    assert grouped[GROUP].tolist() == ["x k=1 [lander-shipped]"] * 2 + ["x k=5 [lander-tuned]"] * 2


def test_a_float_setting_is_labelled_short_but_never_merges_two_groups() -> None:
    tuned = 0.024225022473841774
    runs = _four_runs(**{"params.learning_rate": [0.005, 0.005, tuned, tuned]})
    assert (
        add_groups(runs, ["params.learning_rate"])[GROUP].tolist()
        == ["x [learning_rate=0.005]"] * 2 + ["x [learning_rate=0.0242]"] * 2
    )
    close = _four_runs(**{"params.learning_rate": [tuned, tuned, 0.0242251, 0.0242251]})
    assert (
        add_groups(close, ["params.learning_rate"])[GROUP].tolist()
        == ["x [learning_rate=0.024225]"] * 2 + ["x [learning_rate=0.0242251]"] * 2
    )


def test_scaling_against_the_fewest_workers() -> None:
    runs = pd.DataFrame(
        {
            "env": ["E"] * 4,
            "algo": ["x"] * 4,
            "episodes_per_fitness": [1] * 4,
            "backend": ["process"] * 4,
            "workers": [2, 2, 4, 4],
            "steps_per_s": [100.0, 100.0, 150.0, 170.0],
        }
    )
    frame = scaling.scaling_frame(runs)
    assert frame["baseline_workers"].tolist() == [2] * 4
    np.testing.assert_allclose(frame["speedup"], [1.0, 1.0, 1.5, 1.7])
    np.testing.assert_allclose(frame["efficiency"], [1.0, 1.0, 0.75, 0.85])
    assert scaling.scaling_frame(runs[runs["workers"] == 2]).empty
    # W differing together with another setting is two configurations, not a speed-up
    same = runs.assign(**{GROUP: ["x w=2", "x w=2", "x w=4", "x w=4"]})
    np.testing.assert_allclose(scaling.scaling_frame(same)["speedup"], [1.0, 1.0, 1.5, 1.7])
    other = runs.assign(**{GROUP: ["x w=2", "x w=2", "x w=4 [p=8]", "x w=4 [p=8]"]})
    assert scaling.scaling_frame(other).empty


def test_vectorised_probability_of_improvement_equals_rliables() -> None:
    from rliable import metrics

    rng = np.random.default_rng(1)
    for n, m in ((3, 4), (5, 5), (2, 1)):
        x = rng.integers(0, 4, size=(n, 2)).astype(float)  # ties included
        y = rng.integers(0, 4, size=(m, 2)).astype(float)
        assert stats.poi_statistic(x, y) == pytest.approx(metrics.probability_of_improvement(x, y))


def test_bootstrap_intervals_are_the_same_on_every_call_and_leave_numpy_alone() -> None:
    """rliable resamples with numpy's global RNG; the report must still be deterministic."""
    from harness.report import stats

    scores = np.array([1.0, 5.0, 3.0, 8.0, 2.0]).reshape(-1, 1)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = stats._bootstrap(scores, stats._mean, 500, seed=0)[1]
    np.random.seed(999)  # a caller's own use of the global RNG must not leak in
    second = stats._bootstrap(scores, stats._mean, 500, seed=0)[1]
    np.testing.assert_array_equal(first, second)
    other = stats._bootstrap(scores, stats._mean, 500, seed=1)[1]
    assert not np.array_equal(first, other)
    np.random.seed(123)
    stats._bootstrap(scores, stats._mean, 50, seed=0)
    np.testing.assert_array_equal(np.random.get_state()[1], before)


@pytest.mark.slow
def test_a_population_that_scores_alike_is_named(sweep_runs: Path, tmp_path: Path) -> None:
    # GoodAI's discretised Ant MLP from seed 1: every perturbation plays the same actions,
    # the Ant falls after 20 steps and every candidate scores 10
    flat_runs = tmp_path / "flat"
    harness_cli(
        "run",
        *("--algo", "optimes", "--env", "AntBulletEnv", "--seed", "1", "--generations", "3"),
        *("--set", "policy.kind=mlp", "--set", "policy.discretize=5", "--set", "population=10"),
        # GoodAI's OpenAI-ES, not the ARS defaults optimes ships for Ant
        *("--set", "reward_transform=none", "--set", "top_directions=0", "--set", "sigma=0.02"),
        *("--set", "fitness_shaping=centered_ranks", "--set", "obs_fraction=0.01"),
        *("--set", "eval_every_timesteps=100", "--backend", "inline"),
        *("--runs-dir", str(flat_runs)),
    )
    out = tmp_path / "report"
    assert main(["report", str(sweep_runs), str(flat_runs), "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    block = markdown[markdown.index("> **Warnings**") : markdown.index("Generated by")]
    named = re.findall(r"run (\S+) \([^)]*\) scored its whole population alike", block)
    assert named == [f"{flat_runs.name}/1"], block  # CartPole runs that learned are not named
    assert "in 3 of its 3 generations" in block


def test_the_settings_table_names_the_es_update_rule() -> None:
    """OpenAI-ES and ARS V2-t groups differ in their update, not only in their numbers."""
    openai = {"population": 40, "optimizer": "adam", "l2_coeff": 0.005}
    ars = {
        "population": 60,
        "top_directions": 10,
        "fitness_shaping": "reward_std",
        "optimizer": "sgd",
        "momentum": 0.0,
        "l2_coeff": 0.0,
    }
    assert settings.headline({"algo": "optimes", "params": openai})["ES update"] == (
        "all 20 pairs, centred ranks, Adam, L2 0.005"
    )
    assert settings.headline({"algo": "optimes", "params": ars})["ES update"] == (
        "top 10 of 30 pairs, returns / their std (ARS), SGD"
    )
    row = settings.headline({"algo": "cma", "params": {"population": 0}})
    assert row["ES update"] == "weighted recombination, rank-1 + rank-mu covariance, CSA step size"
    restarted = {"population": 0, "restarts": 2, "restart_from": "mean"}
    assert settings.headline({"algo": "cma", "params": restarted})["ES update"].endswith(
        "; IPOP: up to 2 restarts from the mean"
    )
    ng = {"population": 60, "noisy": True, "budget": 0}
    assert settings.headline({"algo": "nevergrad-es", "params": ng})["ES update"] == (
        "Nevergrad ES, ask/tell of 60, noisy fitness"
    )
    assert row["population"] == "pycma default (4 + 3 ln d)"
    assert settings.headline({"algo": "ppo", "params": {}})["population"] == "—"
    snes = {"population": 0, "fitness_shaping": "nes", "optimizer": "sgd", "momentum": 0.0}
    row = settings.headline({"algo": "snes", "params": snes})
    assert row["population"] == "paper default (4 + 3 ln d, even)"
    assert row["ES update"] == (
        "all pairs, NES utilities, SGD; sigma: SNES natural gradient,"
        " sigma * exp(eta_sigma / 2 grad), eta_sigma (3 + ln d) / (5 sqrt d)"
    )
    pgpe = {"population": 100, "optimizer": "clipup", "max_speed": 0.15, "momentum": 0.9}
    assert settings.headline({"algo": "pgpe", "params": pgpe})["ES update"] == (
        "all 50 pairs, centred ranks, ClipUp, max speed 0.15, momentum 0.9;"
        " sigma: PGPE gradient step, rate 0.1, change clipped to 0.2"
    )


def test_a_group_first_evaluated_after_the_cut_is_still_named_in_the_legend() -> None:
    from harness.report.plots import eval_curve_figure

    runs = _runs_on_one_env(["early", "late"], ["x", "y"], [0, 0])
    steps = pd.DataFrame(
        {
            "run": ["early"] * 3 + ["late"] * 2,
            "timesteps": [100.0, 200.0, 300.0, 250.0, 400.0],
            "eval_return_mean": [1.0, 2.0, 3.0, 10.0, 20.0],
        }
    )
    figure = eval_curve_figure(steps, runs, "timesteps", until={"E": 200.0})
    assert figure is not None
    texts = [t.get_text().replace("\n", " ") for t in figure.axes[0].get_legend().get_texts()]
    assert any(t.startswith("x ") for t in texts)
    assert any(t.startswith("y ") and "no evaluation by the cut" in t for t in texts)


@pytest.mark.parametrize("column", ["eval_return_mean", "fitness_mean"])
def test_a_timesteps_axis_ends_near_the_budget_where_runs_go_far_past_it(column: str) -> None:
    """Runs trained to a CPU limit go on 28 times past the budget: the axis of the evaluation
    and of the training-fitness figure ends at 1.25 times the budget and names how far they
    go, and their two evaluations by the budget are not joined into a curve; runs just past
    the budget keep the full axis."""
    from harness.report.plots import eval_curve_figure, fitness_curve_figure

    runs = _runs_on_one_env(["budget", "long"], ["x", "y"], [0, 0])

    def figure_to(long_end: float) -> Any:
        steps = pd.DataFrame(
            {
                "run": ["budget"] * 3 + ["long"] * 3,
                "timesteps": [0.0, 5e5, 1e6, 0.0, 1e6, long_end],
                column: [1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
            }
        )
        figure = (
            eval_curve_figure(steps, runs, "timesteps", until={"E": 1e6})
            if column == "eval_return_mean"
            else fitness_curve_figure(steps, runs, until={"E": 1e6})
        )
        assert figure is not None
        return figure

    far = figure_to(28.4e6)
    assert far.axes[0].get_xlim()[1] == pytest.approx(1.25e6)
    assert "runs go on to 28.4M" in " ".join(t.get_text() for t in far.axes[0].texts)
    if column == "eval_return_mean":
        # two evaluations by the budget (0 and 1M) draw no aggregate line, only faint runs
        legend = [t.get_text().replace("\n", " ") for t in far.axes[0].get_legend().get_texts()]
        assert "y (n=1, faint only: a run has 2 evaluations by the cut)" in legend
        assert any(t.startswith("x (") and "faint only" not in t for t in legend)
    near = figure_to(2e6)
    assert near.axes[0].get_xlim()[1] >= 2e6 and not near.axes[0].texts


@pytest.mark.slow
def test_a_run_stopped_before_its_final_parameters_stays_in_its_group(
    sweep_runs: Path, tmp_path: Path
) -> None:
    """An interrupted seed has no final parameters (nor their count); it must not form a
    group of its own apart from its completed seed."""
    runs = tmp_path / "runs"
    same_config = [
        d
        for d in _run_dirs(sweep_runs)
        if _config(d)["algo"] == "optimes"
        and _config(d)["episodes"] == 1
        and _config(d)["workers"] == 1
    ]
    assert len(same_config) == 2  # seeds 0 and 1
    for index, source in enumerate(same_config, start=1):
        shutil.copytree(source, runs / str(index))
    for artifact in rundir.ARTIFACT_NAMES:  # written at the end of a run, as a stop leaves them
        (runs / "2" / artifact).unlink(missing_ok=True)
    record = json.loads((runs / "2" / rundir.RUN).read_text())
    (runs / "2" / rundir.RUN).write_text(json.dumps({**record, "status": "INTERRUPTED"}))
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--map-runs", "0", "--all-statuses"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary[GROUP].nunique() == 1, summary[GROUP].tolist()


def test_policy_text_names_the_init_only_when_it_is_not_openais() -> None:
    from harness.report.settings import policy_text

    policy = {"kind": "mlp", "hidden_sizes": [64, 64], "activation": "relu", "discretize": 5}
    assert policy_text({"policy": policy}) == "mlp 64-64 relu, 5 action levels"
    torch_init = {"policy": {**policy, "init": "torch"}}
    assert policy_text(torch_init) == "mlp 64-64 relu, 5 action levels, torch init"


def test_a_run_older_than_policy_init_gets_no_warning_for_it_but_does_for_other_knobs() -> None:
    from harness.config import build_run_config
    from harness.report.settings import unrecorded_keys

    config = build_run_config({"algo": "optimes", "env": "CartPole", "timesteps": 100}).config
    assert unrecorded_keys(config) == []
    old = {**config, "policy": {k: v for k, v in config["policy"].items() if k != "init"}}
    assert unrecorded_keys(old) == []  # every run before the knob used normc, its default
    older = {k: v for k, v in old.items() if k != "sync"}
    assert unrecorded_keys(older) == ["sync"]


@pytest.mark.slow
def test_training_fitness_is_drawn_per_run_as_its_trailing_mean(sweep_runs: Path) -> None:
    from harness.report import plots
    from harness.report.data import GROUP, add_groups

    table = load_runs([sweep_runs])
    steps, runs = table.steps, add_groups(table.runs)
    fig = plots.fitness_curve_figure(steps, runs)
    assert fig is not None
    ax = fig.axes[0]
    drawn = {label.split(" (n=")[0] for label in ax.get_legend_handles_labels()[1]}
    assert drawn == set(runs[GROUP])
    # a run's bold line is the trailing mean of its logged fitness
    run = runs["run"].iloc[0]
    logged = steps[(steps["run"] == run) & steps["fitness_mean"].notna()]
    expected = logged["fitness_mean"].rolling(plots.FITNESS_WINDOW, min_periods=1).mean()
    assert any(
        np.allclose(line.get_ydata(), expected.to_numpy())
        for line in ax.get_lines()
        if len(line.get_ydata()) == len(expected)
    )
    plots.plt.close(fig)
    assert plots.fitness_curve_figure(steps.drop(columns="fitness_mean"), runs) is None
    # published training-fitness figures (GoodAI's) are drawn beside the curves; eval-only
    # ones (the zoo's, the solved threshold) are not
    as_ant = runs.assign(env="AntBulletEnv", gym_id="AntBulletEnv-v0")
    fig = plots.fitness_curve_figure(steps, as_ant, anchor_mod.load_anchors())
    assert fig is not None
    labels = [t.get_text().replace("\n", " ") for t in fig.axes[0].get_legend().get_texts()]
    assert sum(label.startswith("GoodAI") for label in labels) == 2
    assert not any(label.startswith(("rl-zoo", "solved")) for label in labels)
    plots.plt.close(fig)


def test_cpu_seconds_reach_each_evaluation_and_compare_only_where_every_run_has_them() -> None:
    """The runner samples CPU-seconds at most once a second, so an evaluation row may have
    none: the sample before it is carried there. A run that never measured them (an older
    record) keeps its env out of the equal-CPU comparison."""
    nan = math.nan
    steps = pd.DataFrame(
        {
            "run": ["a", "a", "a", "b", "b"],
            "step": [0, 1, 2, 0, 1],
            "cpu_seconds": [1.0, nan, 3.0, nan, nan],
            "eval_return_mean": [nan, 10.0, 20.0, 5.0, 6.0],
            "timesteps": [100, 200, 300, 100, 200],
        }
    )
    carried = carry_cpu_seconds(steps)
    assert carried["cpu_seconds"].tolist()[:3] == [1.0, 1.0, 3.0]
    assert carried.index.equals(steps.index)
    runs = pd.DataFrame({"run": ["a", "b"], "env": ["E", "E"]})
    assert every_run_has(carried, runs[runs["run"] == "a"], "cpu_seconds")
    assert not every_run_has(carried, runs, "cpu_seconds")
    assert every_run_has(carried, runs, "timesteps")
    # env E: run b never measured; env F: compared from 3 CPU-seconds on, not from 4
    other = carried.assign(run=carried["run"].map({"a": "c", "b": "d"}))
    other.loc[other["run"] == "d", "cpu_seconds"] = [5.0, 6.0]
    both = pd.concat([carried, other], ignore_index=True)
    runs = pd.DataFrame({"run": ["a", "b", "c", "d"], "env": ["E", "E", "F", "F"]})
    assert cpu_seconds_compared(both, runs, least=3.0) == {"F": 3.0}
    assert cpu_seconds_compared(both, runs, least=4.0) == {}


def test_groups_of_one_algorithm_at_one_k_are_told_apart_in_the_episodes_figure() -> None:
    from matplotlib.colors import to_rgb

    from harness.report.plots import episodes_figure

    seeds = [100, 101, 102]
    rows = [
        (f"{sweep}-{seed}", algo, k, sweep, seed)
        for sweep, algo, k in [("shipped", "ppo", 1), ("tuned", "ppo", 1), ("tuned", "optimes", 5)]
        for seed in seeds
    ]
    runs = add_groups(
        pd.DataFrame(
            {
                "run": [r[0] + r[1] for r in rows],
                "env": ["E"] * len(rows),
                "algo": [r[1] for r in rows],
                "episodes_per_fitness": [r[2] for r in rows],
                "sweep": [r[3] for r in rows],
                "seed": [r[4] for r in rows],
                "workers": [1] * len(rows),
                "final_eval_return": np.arange(len(rows), dtype=float),
                "params.learning_rate": [0.03 if r[3] == "shipped" else 0.02 for r in rows],
            }
        ),
        ["params.learning_rate"],
    )
    steps = pd.DataFrame(
        [
            {"run": run, "timesteps": t, "eval_return_mean": float(i + t / 100)}
            for i, run in enumerate(runs["run"])
            for t in (100.0, 200.0, 300.0)
        ]
    )
    figure = episodes_figure(steps, runs)
    assert figure is not None
    curves, scores = figure.axes[0], figure.axes[1]
    colour = {
        text.get_text(): to_rgb(line.get_color())
        for line, text in zip(
            curves.get_legend().get_lines(), curves.get_legend().get_texts(), strict=True
        )
    }
    shipped = next(c for t, c in colour.items() if t.startswith("ppo") and "shipped" in t)
    tuned = next(c for t, c in colour.items() if t.startswith("ppo") and "tuned" in t)
    assert shipped != tuned
    named = [t.get_text() for t in scores.get_legend().get_texts()]
    assert sum(name.startswith("ppo") for name in named) == 2
    assert any(name.startswith("optimes") for name in named)
