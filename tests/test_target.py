"""The honest stopping rule: a crossing of the target return must be confirmed on fresh
episodes; where the time goes; the progress bar under every budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from algorithms.es_common import confirm_seeds, eval_seeds
from harness.budget import Budget
from harness.config import ConfigError, build_run_config, complete_config
from harness.repro import compared
from harness.runner import CONFIRM_METRICS, STARTUP_PARTS, TIME_PARTS
from tests.conftest import ROOT, harness_cli, only_run_dir, read_run
from tests.test_parallel import make_algorithm

TARGET_SUMMARY_KEYS = {"return", "first_crossing", "confirmed"}


def _run(runs_dir: Path, *extra: str, timesteps: int = 60_000) -> tuple[dict[str, Any], dict]:
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--backend",
        "inline",
        "--workers",
        "1",
        "--timesteps",
        str(timesteps),
        "--runs-dir",
        str(runs_dir),
        "--set",
        "eval_every_timesteps=5000",
        *extra,
    )
    run_dir = only_run_dir(runs_dir)
    return read_run(run_dir), json.loads((run_dir / "summary.json").read_text())


def _values(metrics: dict[str, Any], name: str) -> list[float]:
    return list(metrics.get(name, {}).get("values", []))


def _steps(metrics: dict[str, Any], name: str) -> list[int]:
    return list(metrics.get(name, {}).get("steps", []))


# A crossing that two confirmations reject before a third passes (CartPole, seed 2): one
# evaluation episode crosses 150 by luck, 20 fresh episodes do not, and training goes on.
LUCKY = (
    "--seed",
    "2",
    "--target-return",
    "150",
    "--set",
    "eval_episodes=1",
    "--set",
    "eval_every_timesteps=2000",
    "--set",
    "confirm_episodes=20",
)


@pytest.fixture(scope="module")
def lucky(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    return _run(tmp_path_factory.mktemp("lucky"), *LUCKY)


def test_failed_confirmation_continues_training(lucky: tuple[dict[str, Any], dict]) -> None:
    record, summary = lucky
    metrics = record["metrics"]
    passed = _values(metrics, "confirm_passed")
    # The setup this test relies on: an early crossing that its confirmation rejects.
    assert passed[0] == 0.0, f"seed 2 no longer gives a rejected crossing: {passed}"
    assert passed[-1] == 1.0 and passed.count(1.0) == 1
    failed_at = _steps(metrics, "confirm_passed")[0]
    last_step = _steps(metrics, "timesteps")[-1]
    assert last_step > failed_at  # training went on after the rejected crossing
    confirm_means = _values(metrics, "confirm_return_mean")
    assert confirm_means[0] < 150 <= confirm_means[-1]
    target = summary["target"]
    assert set(target) == TARGET_SUMMARY_KEYS and target["return"] == 150.0
    first, confirmed = target["first_crossing"], target["confirmed"]
    assert set(first) == {"timesteps", "wall_time_s"}
    assert set(confirmed) == {"timesteps", "wall_time_s", "return_mean", "episodes"}
    assert first["timesteps"] < confirmed["timesteps"] == _values(metrics, "timesteps")[-1]
    assert first["wall_time_s"] < confirmed["wall_time_s"] <= summary["wall_time_s"]
    assert confirmed["episodes"] == 20 and confirmed["return_mean"] == confirm_means[-1]
    assert summary["stop_reason"].startswith("target return 150.0 reached")
    assert record["config"]["confirm_episodes"] == 20


def test_confirmations_leave_the_regular_evaluations_unchanged(
    lucky: tuple[dict[str, Any], dict], tmp_path: Path
) -> None:
    """Same seed without a target: every compared metric agrees up to the target's stop."""
    target_run, summary = lucky
    stop_step = summary["steps"]
    plain, plain_summary = _run(
        tmp_path,
        *[arg for arg in LUCKY if arg not in ("--target-return", "150")],
        timesteps=summary["timesteps"],
    )
    assert plain_summary["target"] is None and plain["config"]["confirm_episodes"] is None
    assert not any(name.startswith("confirm_") for name in plain["metrics"])
    for name, series in plain["metrics"].items():
        if not compared(name):
            continue
        mine = dict(zip(series["steps"], series["values"], strict=True))
        theirs = target_run["metrics"][name]
        other = dict(zip(theirs["steps"], theirs["values"], strict=True))
        common = [s for s in mine if s in other and s <= stop_step]
        assert common, name
        assert [mine[s] for s in common] == [other[s] for s in common], name


def test_time_breakdown_of_a_run(lucky: tuple[dict[str, Any], dict]) -> None:
    record, summary = lucky
    parts = summary["time_breakdown"]
    assert list(parts) == [p for p in TIME_PARTS if p in parts]
    for part in ("process_start", "setup", "rollouts", "head_update", "evaluation"):
        assert parts[part] > 0, part
    assert parts["confirmation"] > 0  # three confirmations ran
    training = sum(v for k, v in parts.items() if k not in STARTUP_PARTS)
    assert training == pytest.approx(summary["wall_time_s"])
    # running totals are logged with every evaluation; the last one matches the summary
    metrics = record["metrics"]
    assert _steps(metrics, "time_rollouts_s") == _steps(metrics, "eval_return_mean")
    assert _values(metrics, "time_evaluation_s") == sorted(_values(metrics, "time_evaluation_s"))
    assert not any(compared(name) for name in metrics if name.startswith("time_"))


def test_a_reopened_run_drops_its_final_confirmation_metrics() -> None:
    """A resume that reopens a finished run undoes its final evaluation and confirmation,
    so their metrics must be among those the resume drops."""
    from harness.experiment import EVAL_METRIC_NAMES

    assert set(CONFIRM_METRICS) <= set(EVAL_METRIC_NAMES)


def test_a_run_without_target_has_no_target_block(tmp_path: Path) -> None:
    record, summary = _run(tmp_path, "--timesteps", "3000")
    assert summary["target"] is None
    assert (
        "confirmation" not in summary["time_breakdown"]
        or not summary["time_breakdown"]["confirmation"]
    )
    assert not any(name.startswith("confirm_") for name in record["metrics"])


# -- confirmation seeds, and who runs the episodes ----------------------------------------
def test_confirmation_seeds_are_their_own_stream() -> None:
    confirm = confirm_seeds(7, 0, 100)
    assert len(set(confirm)) == 100
    assert confirm != confirm_seeds(7, 1, 100)  # each confirmation draws fresh episodes
    assert not set(confirm) & set(eval_seeds(7, 0, 100))
    assert confirm == confirm_seeds(7, 0, 100)  # from the run seed alone


@pytest.mark.parametrize("name", ["optimes", "cma"])
def test_confirmation_episodes_match_on_head_and_workers(name: str) -> None:
    """The same seeds give the same returns whether the head (inline) or two workers run them."""
    seeds = confirm_seeds(3, 0, 24)
    returns = []
    for backend, workers in (("inline", 1), ("process", 2)):
        algorithm = make_algorithm(name, backend, workers)
        try:
            algorithm.step()  # a centre that is not the initial one
            returns.append(np.asarray(algorithm.evaluate_policy(seeds)))
        finally:
            algorithm.close()
    np.testing.assert_array_equal(returns[0], returns[1])
    assert len(set(returns[0].tolist())) > 1  # the episodes differ: the seeds matter


# -- population scaled with the workers ---------------------------------------------------
def _config(**extra: Any) -> dict[str, Any]:
    return complete_config(
        {
            "algo": "optimes",
            "env": "CartPole",
            "seed": 0,
            "episodes": 1,
            "workers": 1,
            "backend": "inline",
            "timesteps": 1000,
            "policy": {},
            "params": {},
            **extra,
        }
    )


def test_population_per_worker_scales_the_population() -> None:
    assert _config()["params"]["population"] == 20  # the fixed default
    assert _config(population_per_worker=6, workers=1)["params"]["population"] == 6
    assert _config(population_per_worker=6, workers=3)["params"]["population"] == 18
    assert _config(population_per_worker=8, workers=4, algo="cma")["params"]["population"] == 32
    with pytest.raises(ConfigError, match="population must be an even number"):
        _config(population_per_worker=3, workers=1)
    ppo = {"algo": "ppo", "env": "CartPole", "timesteps": 1000, "population_per_worker": 4}
    with pytest.raises(ConfigError, match="population_per_worker"):
        build_run_config(ppo, source="given", refuse="given")
    with pytest.raises(ConfigError, match=r"population_per_worker must be .*got 0"):
        _config(population_per_worker=0)


def test_population_per_worker_in_a_run(runs_dir: Path) -> None:
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--workers",
        "2",
        "--generations",
        "2",
        "--runs-dir",
        str(runs_dir),
        "--set",
        "population_per_worker=6",
    )
    record = read_run(only_run_dir(runs_dir))
    assert record["config"]["params"]["population"] == 12
    assert _values(record["metrics"], "episodes")[0] == 12  # one episode per candidate


def test_confirm_episodes_needs_a_target() -> None:
    assert _config()["confirm_episodes"] is None
    assert _config(target_return=100.0)["confirm_episodes"] == 100
    assert _config(target_return=100.0, confirm_episodes=0)["confirm_episodes"] == 0
    with pytest.raises(ConfigError, match=r"confirm_episodes must be .*got -1"):
        _config(target_return=100.0, confirm_episodes=-1)


# -- budgets and the progress bar ---------------------------------------------------------
def test_budget_share_is_the_binding_limit() -> None:
    assert Budget(timesteps=1000).used(250, 9, 99.0) == (0.25, "timesteps")
    assert Budget(generations=10).used(10**9, 4, 99.0) == (0.4, "generations")
    assert Budget(time_limit=20.0).used(10**9, 10**6, 5.0) == (0.25, "time_limit")
    both = Budget(timesteps=1000, time_limit=10.0)
    assert both.used(100, 1, 5.0) == (0.5, "time_limit")
    assert both.used(900, 1, 5.0) == (0.9, "timesteps")
    assert both.used(2000, 1, 5.0) == (1.0, "timesteps")
    cpu = Budget(timesteps=1000, cpu_limit=40.0)
    assert cpu.used(100, 1, 99.0, 30.0) == (0.75, "cpu_limit")
    assert cpu.exhausted(100, 1, 99.0, None, 39.9) is None
    assert cpu.exhausted(100, 1, 99.0, None, 40.0) == "CPU limit 40.0 CPU-s reached"


def test_target_counts_only_when_reached() -> None:
    budget = Budget(timesteps=1000, target_return=200.0)
    assert budget.crosses(200.0) and not budget.crosses(199.9) and not budget.crosses(None)
    assert budget.exhausted(10, 1, 1.0, None) is None  # a crossing alone does not stop
    assert budget.exhausted(10, 1, 1.0, 201.5) == "target return 200.0 reached (201.5)"


@pytest.mark.parametrize(
    "budget", [["--generations", "3"], ["--time-limit", "1.5"], ["--cpu-limit", "1.5"]]
)
def test_progress_bar_moves_under_every_budget(budget: list[str], tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "run", "--algo", "optimes", "--env", "CartPole"),
            *("--backend", "inline", "--workers", "1", "--runs-dir", str(tmp_path), *budget),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HARNESS_PROGRESS": "1"},
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    # Piped, the bar is plain lines (harness.progress); its last says the budget is spent.
    last = completed.stderr.strip().splitlines()[-1]
    assert "100% [" in last and "\r" not in completed.stderr, completed.stderr


# Slow: check-repro's four full runs (W=1 twice, W=2, interrupted and resumed).
@pytest.mark.slow
def test_confirmations_are_reproducible_across_workers_and_resume() -> None:
    """check-repro with the rejected-then-confirmed target: W=1 twice, W=2, and a run
    interrupted between two confirmations and resumed all log the same metrics."""
    completed = harness_cli(
        "check-repro",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--timesteps",
        "60000",
        "--interrupt-at",
        "4",
        *LUCKY,
        timeout=900,
    )
    assert "check-repro: OK" in completed.stdout, completed.stdout
    assert "confirm_passed" in completed.stdout and "confirm_return_mean" in completed.stdout
