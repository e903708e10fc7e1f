"""`harness report` end to end from a tiny real sweep, degenerate inputs, the UMAP rebuild."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.cli import main
from harness.parallel.noise import NoiseSpec, NoiseTable
from harness.records import POPULATION_ARTIFACT, PopulationLogWriter, load_runs, read_population
from harness.report.data import add_groups, eval_curves, scaling_frame
from harness.report.umap_map import models_from_population
from harness.sweep import load_sweep, run_sweep

NOISE_SIZE = 200_000


def _sweep_file(folder: Path, name: str, grid: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        grid: {{{grid}}}
        budget:
          timesteps: 2000
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
    record["artifacts"].append(POPULATION_ARTIFACT)
    (run_dir / "run.json").write_text(json.dumps(record))


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
    first_optimes = next(
        h
        for h in sorted(runs.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0)
        if h.name.isdigit() and json.loads((h / "config.json").read_text())["algo"] == "optimes"
    )
    _add_population_log(first_optimes)
    return runs


def test_report_end_to_end(
    sweep_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(sweep_runs), "--out", str(out), "--umap-runs", "1"]) == 0
    assert "report.md" in capsys.readouterr().out
    expected = {
        "report.md",
        "report.html",
        "runs.csv",
        "summary.csv",
        "final_scores.png",
        "eval_vs_timesteps.png",
        "eval_vs_wallclock.png",
        "episodes_per_fitness.png",
        "scaling.png",
        "bytes_per_generation.png",
    }
    names = {p.name for p in out.iterdir()}
    assert expected <= names, expected - names
    umaps = [n for n in names if n.startswith("umap_")]
    assert len(umaps) == 1 and not umaps[0].startswith("umap_final")

    markdown = (out / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert set(images) == {n for n in names if n.endswith(".png")}
    for png in images:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # tables: final scores with IQM and intervals, probability of improvement, scaling
    assert "| env | algorithm | runs | seeds |" in markdown and "IQM 95% CI" in markdown
    assert "P(X > Y)" in markdown
    assert "optimes k=1" in markdown and "cma k=2" in markdown
    assert "efficiency" in markdown and "speed-up" in markdown
    # every caption names env, budget, seeds and machine
    assert "CartPole (CartPole-v1) · budget 2k timesteps · seeds 0, 1 · Linux" in markdown

    html = (out / "report.html").read_text()
    sources = re.findall(r'src="([^"]*)"', html)
    assert len(sources) == len(images) and all(
        s.startswith("data:image/png;base64,") for s in sources
    )
    assert "<table>" in html and "http" not in html.replace("http-equiv", "")

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
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 9 and set(summary["sweep"]) == {"tiny", "tiny_w2"}


def test_report_of_one_run_still_has_a_table(sweep_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "single"
    assert main(["report", str(sweep_runs / "1"), "--out", str(out), "--umap-runs", "0"]) == 0
    markdown = (out / "report.md").read_text()
    assert "| env | algorithm | runs |" in markdown
    assert "Probability of improvement needs two algorithms" in markdown
    assert "Not compared" in markdown and "Not measured" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| CartPole |"))
    assert "| 1 | 0 |" in row and "—" in row  # one run, seed 0, no interval
    assert "one run per group: no interval" in markdown or (out / "eval_vs_timesteps.png").exists()


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
            [1.0, 2.0, 3.0, 4.0],
            centre0 * generation,
            sigma=0.5,
            noise_index=[10, 10, 400, 400],
            sign=[1, -1, 1, -1],
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


def test_curves_average_only_where_every_seed_has_evaluated() -> None:
    runs = add_groups(
        pd.DataFrame(
            {
                "run": ["a", "b"],
                "env": ["E", "E"],
                "algo": ["x", "x"],
                "seed": [0, 1],
                "episodes_per_fitness": [1, 1],
                "workers": [1, 1],
            }
        )
    )
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
    frame = scaling_frame(runs)
    assert frame["baseline_workers"].tolist() == [2] * 4
    np.testing.assert_allclose(frame["speedup"], [1.0, 1.0, 1.5, 1.7])
    np.testing.assert_allclose(frame["efficiency"], [1.0, 1.0, 0.75, 0.85])
    assert scaling_frame(runs[runs["workers"] == 2]).empty


def test_vectorised_probability_of_improvement_equals_rliables() -> None:
    from rliable import metrics

    from harness.report.tables import poi_statistic

    rng = np.random.default_rng(1)
    for n, m in ((3, 4), (5, 5), (2, 1)):
        x = rng.integers(0, 4, size=(n, 2)).astype(float)  # ties included
        y = rng.integers(0, 4, size=(m, 2)).astype(float)
        assert poi_statistic(x, y) == pytest.approx(metrics.probability_of_improvement(x, y))
