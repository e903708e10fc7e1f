"""The run-record reader on real run directories made by short runs, and on damaged ones."""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.records import (
    POPULATION_ARTIFACT,
    PopulationLogWriter,
    RunDirWarning,
    find_run_dirs,
    load_runs,
    read_population,
    scan_runs,
)
from harness.runner import COMMON_METRICS
from tests.conftest import harness_cli

TINY = (
    "--env",
    "CartPole",
    "--timesteps",
    "3000",
    "--backend",
    "inline",
    "--set",
    "eval_every_timesteps=1000",
    "--set",
    "eval_episodes=2",
    "--set",
    "population=10",
)


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short COMPLETED optimes runs (seeds 0 and 1) in one runs directory."""
    runs = tmp_path_factory.mktemp("records") / "runs"
    for seed in ("0", "1"):
        harness_cli("run", "--algo", "optimes", "--seed", seed, "--runs-dir", str(runs), *TINY)
    return runs


def test_load_runs_gives_tidy_steps_and_one_summary_row_per_run(real_runs: Path) -> None:
    table = load_runs([real_runs])
    assert len(table) == 2 and table.skipped == []
    runs, steps = table.runs, table.steps
    assert set(runs["status"]) == {"COMPLETED"}
    assert sorted(runs["seed"]) == [0, 1]
    # config columns, flattened and renamed where a metric has the same name
    for column in (
        "algo",
        "env",
        "seed",
        "episodes_per_fitness",
        "workers",
        "backend",
        "sweep",
        "budget_timesteps",
        "params.population",
        "params.sigma",
        "policy.kind",
        "policy.hidden_sizes",
    ):
        assert column in steps.columns and column in runs.columns, column
    assert set(steps["algo"]) == {"optimes"} and set(steps["params.population"]) == {10}
    assert set(steps["budget_timesteps"]) == {3000}
    assert steps["policy.hidden_sizes"].iloc[0] == "[16]"
    # every common metric is a column; one row per (run, step)
    for metric in COMMON_METRICS:
        assert metric in steps.columns, metric
    assert not steps.duplicated(["run", "step"]).any()
    for _, frame in steps.groupby("run"):
        assert frame["step"].tolist() == list(range(1, len(frame) + 1))
        assert frame["timesteps"].is_monotonic_increasing
        assert frame["timesteps"].iloc[-1] >= 3000
    # evaluations are sparse: NaN between them, present at the last step
    evals = steps["eval_return_mean"]
    assert evals.isna().any() and evals.notna().any()
    last = steps.sort_values("step").groupby("run").tail(1)
    assert last["eval_return_mean"].notna().all()
    # the summary agrees with the steps
    for _, row in runs.iterrows():
        own = steps[steps["run"] == row["run"]]
        assert row["final_eval_return"] == own["eval_return_mean"].dropna().iloc[-1]
        assert row["final_timesteps"] == own["timesteps"].iloc[-1]
        assert row["generations"] == len(own)
        assert row["n_params"] == 4 * 16 + 16 + 16 * 2 + 2
        assert row["steps_per_s"] > 0 and row["time_per_generation_s"] > 0
        assert row["host_name"] and row["host_cpu"] and row["gym_id"] == "CartPole-v1"
        assert row["stop_reason"].startswith("timestep budget")


def _damage(real_runs: Path, target: Path) -> None:
    """Copies of the real runs plus four damaged directories."""
    shutil.copytree(real_runs, target)
    good = target / "1"
    # 3: truncated metrics.json (a run killed mid-write)
    shutil.copytree(good, target / "3")
    text = (target / "3" / "metrics.json").read_text()
    (target / "3" / "metrics.json").write_text(text[: len(text) // 2])
    # 4: no run.json (created, never started)
    shutil.copytree(good, target / "4")
    (target / "4" / "run.json").unlink()
    # 5: run.json is not JSON at all
    shutil.copytree(good, target / "5")
    (target / "5" / "run.json").write_text('{"status": "COMPL')
    # 6: a FAILED run that died before logging anything: kept, without steps
    shutil.copytree(good, target / "6")
    (target / "6" / "metrics.json").unlink()
    run = json.loads((target / "6" / "run.json").read_text())
    run["status"] = "FAILED"
    (target / "6" / "run.json").write_text(json.dumps(run))
    # bookkeeping folders are not runs
    (target / "_sweeps" / "x").mkdir(parents=True)
    (target / "notes").mkdir()


def test_damaged_directories_are_skipped_with_a_warning(real_runs: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    _damage(real_runs, damaged)
    with pytest.warns(RunDirWarning) as caught:
        table = load_runs([damaged])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3
    assert any("3" in m and "metrics.json is truncated" in m for m in messages)
    assert any(
        m.startswith(f"skipping run directory {damaged / '4'}") and "run.json is missing" in m
        for m in messages
    )
    assert any(str(damaged / "5") in m for m in messages)
    assert sorted(table.runs["run_id"]) == ["1", "2", "6"]
    failed = table.runs[table.runs["run_id"] == "6"].iloc[0]
    assert failed["status"] == "FAILED" and math.isnan(failed["final_eval_return"])
    assert set(table.steps["run_id"]) == {"1", "2"}
    assert len(table.skipped) == 3
    completed = table.select(["COMPLETED"])
    assert len(completed) == 2 and set(completed.steps["run_id"]) == {"1", "2"}
    # the sweep's quiet scan lists the readable headers only
    assert [h.run_id for h in scan_runs(damaged)] == ["1", "2", "3", "6"]


def test_paths_may_name_single_runs_and_several_runs_dirs(real_runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(real_runs, other)
    assert find_run_dirs([real_runs / "2"]) == [real_runs / "2"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = load_runs([real_runs, other])
    assert len(table) == 4 and table.runs["run"].is_unique
    assert set(table.runs["run"]) == {"runs/1", "runs/2", "other/1", "other/2"}
    single = load_runs([real_runs / "1"])
    assert list(single.runs["run_id"]) == ["1"]


def test_population_log_round_trip_and_damage(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    writer = PopulationLogWriter(centre_every=2, noise_size=1000, noise_seed=7)
    centre = np.zeros(5, np.float32)
    for generation in range(1, 6):
        writer.add_generation(
            generation,
            rng.normal(size=4),
            centre,
            sigma=0.1,
            noise_index=[3, 3, 9, 9],
            sign=[1, -1, 1, -1],
        )
        centre = centre + 0.5
    writer.add_final_centre(centre)
    writer.save(tmp_path / POPULATION_ARTIFACT)
    log = read_population(tmp_path)
    assert log is not None and log.uses_noise_table
    assert log.generation.tolist() == [1, 2, 3, 4, 5]
    assert log.centre_generation.tolist() == [1, 3, 5, 6]
    assert log.fitness.shape == (5, 4) and log.centre.shape == (4, 5)
    np.testing.assert_array_equal(log.centre[-1], np.full(5, 2.5, np.float32))
    assert log.noise_size == 1000 and log.noise_seed == 7
    assert log.sign[0].tolist() == [1, -1, 1, -1]
    assert read_population(tmp_path / "nowhere") is None
    (tmp_path / POPULATION_ARTIFACT).write_bytes(b"not an npz")
    with pytest.warns(RunDirWarning, match="ignoring population log"):
        assert read_population(tmp_path) is None


def test_metrics_logged_twice_at_one_step_keep_the_last_value(
    real_runs: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "runs"
    shutil.copytree(real_runs, copy)
    path = copy / "1" / "metrics.json"
    metrics = json.loads(path.read_text())
    series = metrics["fitness_mean"]
    series["steps"].append(series["steps"][-1])
    series["values"].append(12345.0)
    series["timestamps"].append(series["timestamps"][-1])
    path.write_text(json.dumps(metrics))
    steps = load_runs([copy / "1"]).steps
    assert isinstance(steps, pd.DataFrame)
    assert steps["fitness_mean"].iloc[-1] == 12345.0
    assert not steps["step"].duplicated().any()
