"""End to end: `harness run` writes complete Sacred runs; the same seed gives the same numbers."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.runner import COMMON_METRICS
from tests.conftest import ROOT, deterministic_metrics, harness_cli, only_run_dir, read_run


def _run(runs_dir: Path, *extra: str, timesteps: int = 15000) -> dict:
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--timesteps",
        str(timesteps),
        "--runs-dir",
        str(runs_dir),
        *extra,
    )
    return read_run(only_run_dir(runs_dir))


def test_run_writes_a_complete_run_directory(runs_dir: Path) -> None:
    record = _run(runs_dir, "--backend", "inline", "--workers", "1")
    run_dir = only_run_dir(runs_dir)
    assert record["run"]["status"] == "COMPLETED"
    config = record["config"]
    assert config["algo"] == "optimes" and config["env"] == "CartPole"
    # every knob is recorded with a concrete value
    assert config["params"]["population"] == 20 and config["policy"]["kind"] == "mlp"
    assert config["eval_episodes"] == 10 and config["timesteps"] == 15000
    assert set(record["metrics"]) >= set(COMMON_METRICS)
    timesteps = record["metrics"]["timesteps"]["values"]
    assert timesteps == sorted(timesteps) and timesteps[-1] >= 15000
    for name in (
        "final_params.npy",
        "policy_spec.json",
        "summary.json",
        "checkpoint.pkl",
        "cout.txt",
    ):
        assert (run_dir / name).exists(), name
    params = np.load(run_dir / "final_params.npy")
    assert params.dtype == np.float32 and params.size == 4 * 16 + 16 + 16 * 2 + 2
    assert "%|" not in (run_dir / "cout.txt").read_text()  # the progress bar stays out


def test_same_seed_twice_gives_identical_metrics(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", "--backend", "inline", "--seed", "3")
    second = _run(tmp_path / "b", "--backend", "inline", "--seed", "3")
    assert deterministic_metrics(first["metrics"]) == deterministic_metrics(second["metrics"])
    other = _run(tmp_path / "c", "--backend", "inline", "--seed", "4")
    assert deterministic_metrics(first["metrics"]) != deterministic_metrics(other["metrics"])


def test_one_worker_and_two_workers_give_identical_metrics(tmp_path: Path) -> None:
    one = _run(tmp_path / "w1", "--backend", "process", "--workers", "1", "--seed", "5")
    two = _run(tmp_path / "w2", "--backend", "process", "--workers", "2", "--seed", "5")
    assert deterministic_metrics(one["metrics"]) == deterministic_metrics(two["metrics"])


def test_optimes_solves_cartpole(runs_dir: Path) -> None:
    record = _run(
        runs_dir,
        "--backend",
        "process",
        "--workers",
        "2",
        "--target-return",
        "475",
        "--set",
        "eval_every_timesteps=5000",
        timesteps=200_000,
    )
    evals = record["metrics"]["eval_return_mean"]["values"]
    assert max(evals) >= 475, evals


def test_sacred_command_line_with_named_config(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "harness.experiment", "print_config", "with", "ant", "episodes=5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "AntBulletEnv" in completed.stdout and "episodes = 5" in completed.stdout
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.experiment",
            "-F",
            str(tmp_path / "runs"),
            "with",
            "lander",
            "algo=optimes",
            "generations=1",
            "eval_episodes=1",
            "backend=inline",
            "params.population=4",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    record = read_run(only_run_dir(tmp_path / "runs"))
    assert record["run"]["status"] == "COMPLETED"
    assert record["config"]["policy"]["kind"] == "linear"
    assert record["config"]["params"]["population"] == 4


def test_train_episode_steps_caps_training_but_not_evaluation(runs_dir: Path) -> None:
    record = _run(
        runs_dir,
        "--backend",
        "inline",
        "--set",
        "train_episode_steps=20",
        "--set",
        "eval_every_timesteps=5000",
        timesteps=30000,
    )
    assert record["config"]["params"]["train_episode_steps"] == 20
    lengths = record["metrics"]["episode_length_mean"]["values"]
    assert max(lengths) <= 20, lengths
    # CartPole's return is its length: evaluation runs past the training cap
    evals = record["metrics"]["eval_return_mean"]["values"]
    assert max(evals) > 20, evals


def test_each_evaluation_row_has_the_cpu_seconds_of_its_own_step(runs_dir: Path) -> None:
    """The meter is read at most once a second, except at a step an evaluation follows:
    evaluations less than a second apart still get their own, increasing, CPU-seconds.

    3,000 timesteps between evaluations: the meter counts in clock ticks (10 ms), and 1,000
    CartPole timesteps sometimes took less than one tick."""
    record = _run(
        runs_dir, "--backend", "inline", "--set", "eval_every_timesteps=3000", timesteps=18000
    )
    metrics = record["metrics"]
    cpu = dict(zip(metrics["cpu_seconds"]["steps"], metrics["cpu_seconds"]["values"], strict=True))
    at_evaluations = [cpu[step] for step in metrics["eval_return_mean"]["steps"]]
    assert len(at_evaluations) >= 4
    assert all(b > a for a, b in itertools.pairwise(at_evaluations))


def test_a_cpu_limit_stops_the_run_at_the_first_step_past_it(runs_dir: Path) -> None:
    """The CPU meter is read at every step under a CPU limit, so the run stops at the first
    step whose process tree has used the limit, whatever the other budgets say."""
    limit = 3.0
    record = _run(runs_dir, "--backend", "inline", "--cpu-limit", str(limit), timesteps=10_000_000)
    assert record["run"]["result"]["stop_reason"] == f"CPU limit {limit} CPU-s reached"
    cpu = record["metrics"]["cpu_seconds"]["values"]
    assert cpu[-1] >= limit > cpu[-2]
    assert record["metrics"]["timesteps"]["values"][-1] < 10_000_000


@pytest.mark.slow
def test_an_endpoint_evaluates_the_final_policy_on_episodes_fixed_for_every_run(
    tmp_path: Path,
) -> None:
    """``endpoint_episodes``: after training, the final policy on episode seeds that do not
    depend on the run's seed or algorithm, outside its CPU-seconds; recorded in summary.json
    and as metrics at the final step."""
    from algorithms.es_common import endpoint_seeds, eval_seeds

    assert endpoint_seeds(4) == endpoint_seeds(4) != eval_seeds(0, 0, 4)
    runs = tmp_path / "runs"
    for algo in ("optimes", "ppo"):
        harness_cli(
            "run", "--algo", algo, "--env", "CartPole", "--timesteps", "2000", "--seed", "3",
            "--set", "endpoint_episodes=4", "--set", "eval_every_timesteps=1000",
            "--runs-dir", str(runs),
        )  # fmt: skip
    for run_dir in sorted(p for p in runs.iterdir() if p.name.isdigit()):
        record = read_run(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        endpoint = summary["endpoint"]
        assert endpoint["episodes"] == 4 and endpoint["failed"] == 0
        metrics = record["metrics"]
        last_step = metrics["timesteps"]["steps"][-1]
        assert metrics["endpoint_return_mean"]["steps"] == [last_step]
        assert metrics["endpoint_return_mean"]["values"] == [endpoint["mean"]]
        assert metrics["cpu_seconds"]["values"][-1] <= summary["cpu_seconds"]
    from harness.records import load_runs

    table = load_runs([runs])  # the knob and the metric of one name both read
    assert set(table.runs["endpoint_episodes_set"]) == {4}
    assert set(table.steps["endpoint_episodes"].dropna()) == {4.0}
