"""``harness tune`` on CPU-second budgets: evaluations spread by ``--evaluations``, trials with
too few evaluations flagged and not taken as the best, CPU-limit overruns reported (the RL
chunk granularity named), and ES spaces that sample the policy's size as RL ones sample
``net_arch``.

Two real studies of one trial each (optimes and PPO on CartPole, a few CPU-seconds per run:
about 30 s of wall-clock in all on 2 idle cores); the rest reads synthetic studies.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import harness_cli

pytestmark = pytest.mark.slow


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _only_run(runs_dir: Path) -> Path:
    runs = [p for p in runs_dir.iterdir() if p.name.isdigit()]
    assert len(runs) == 1, runs
    return runs[0]


def _evaluations(run_dir: Path) -> int:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return len(metrics["eval_return_mean"]["values"])


def test_cpu_limit_spreads_evaluations_by_evaluations(tmp_path: Path) -> None:
    """--cpu-limit 3 --evaluations 12: an evaluation every 0.25 CPU-s, about 12 in all (a
    CartPole run at its per-env 50,000-timestep interval made about 6 before)."""
    space = tmp_path / "space.yaml"
    space.write_text("optimes:\n  sigma: {float: [0.05, 0.2], log: true}\n")
    runs_dir = tmp_path / "runs"
    done = harness_cli(
        "tune",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--backend",
        "inline",
        "--set",
        "population=10",
        "--set",
        "eval_episodes=2",
        "--trials",
        "1",
        "--seeds",
        "0",
        "--check-seeds",
        "--cpu-limit",
        "3",
        "--evaluations",
        "12",
        "--space",
        str(space),
        "--runs-dir",
        str(runs_dir),
    )
    run = _only_run(runs_dir)
    config = json.loads((run / "config.json").read_text())
    assert config["eval_every_cpu_seconds"] == pytest.approx(0.25)
    assert 10 <= _evaluations(run) <= 15
    summary = json.loads((run / "summary.json").read_text())
    assert "CPU-s" in done.stdout and "of 3" in done.stdout  # used vs limit on the trial's line
    (row,) = _rows(runs_dir / "_tune" / "tune-CartPole-optimes" / "trials.csv")
    assert row["too_few_evaluations"] == "False"
    assert int(row["evaluations"]) == _evaluations(run)
    assert float(row["cpu_limit"]) == 3.0
    assert float(row["cpu_seconds_seed_0"]) == pytest.approx(summary["cpu_seconds"])


def test_a_ppo_chunk_past_the_cpu_limit_is_reported_and_flagged(tmp_path: Path) -> None:
    """One PPO chunk of 2048 x 2 timesteps costs several CPU-s: under a 1 CPU-s limit the run
    overruns it and makes fewer than 3 evaluations. The overrun is reported as the chunk
    granularity, the trial flagged, and the best taken among the flagged with a warning."""
    space = tmp_path / "space.yaml"
    space.write_text("ppo:\n  learning_rate: {float: [1.0e-4, 1.0e-3], log: true}\n")
    runs_dir = tmp_path / "runs"
    done = harness_cli(
        "tune",
        "--algo",
        "ppo",
        "--env",
        "CartPole",
        "--set",
        "n_steps=2048",
        "--set",
        "n_envs=2",
        "--set",
        "eval_episodes=2",
        "--trials",
        "1",
        "--seeds",
        "0",
        "--check-seeds",
        "--cpu-limit",
        "1",
        "--space",
        str(space),
        "--runs-dir",
        str(runs_dir),
    )
    assert "over its CPU limit" in done.stderr, done.stderr
    assert "chunk granularity" in done.stderr and "n_steps x n_envs = 4,096" in done.stderr
    assert "no completed trial has the 3 evaluations" in done.stderr
    out = runs_dir / "_tune" / "tune-CartPole-ppo"
    (row,) = _rows(out / "trials.csv")
    assert row["state"] == "COMPLETE" and row["too_few_evaluations"] == "True"
    assert float(row["cpu_overrun"]) > 0.1
    report = (out / "report.md").read_text()
    assert "CPU limit overruns" in report and "Too few evaluations" in report


def test_an_rl_run_follows_the_cpu_evaluation_schedule_between_its_chunks(tmp_path: Path) -> None:
    """eval_every_cpu_seconds drives RL runs too: PPO in small chunks (64 x 1 timesteps)
    under a 12 CPU-s limit (2 to 5 of them building the model, on machines up to 2.5x apart)
    is evaluated once per CPU-second, not once at the end."""
    runs_dir = tmp_path / "runs"
    harness_cli(
        "run",
        "--algo",
        "ppo",
        "--env",
        "CartPole",
        "--cpu-limit",
        "12",
        "--set",
        "n_steps=64",
        "--set",
        "n_envs=1",
        "--set",
        "batch_size=64",
        "--set",
        "eval_episodes=1",
        "--set",
        "eval_every_cpu_seconds=1",
        "--runs-dir",
        str(runs_dir),
    )
    run = _only_run(runs_dir)
    metrics = json.loads((run / "metrics.json").read_text())
    steps = metrics["eval_return_mean"]["steps"]
    assert 4 <= len(steps) <= 14, steps
    cpu = dict(zip(metrics["cpu_seconds"]["steps"], metrics["cpu_seconds"]["values"], strict=True))
    at = [cpu[step] for step in steps]
    bins = [int(seconds) for seconds in at[:-1]]  # the last may be the budget's final one
    assert bins == sorted(set(bins)), at  # at most one scheduled evaluation per CPU-second


# -- the best trial among synthetic studies ---------------------------------------------------


def _study(trials: list[tuple[float, int]], limit: float | None = None, usage: Any = None) -> Any:
    """An in-memory study of optimes (sigma only) whose completed trials have these
    (objective, evaluations per run) and, under ``limit``, used 1.3 x it (``usage``: the
    record every trial holds instead)."""
    import optuna

    from harness.tune.space import parse_space

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = parse_space("optimes", {"sigma": {"float": [0.05, 0.2]}}, "test")
    study = optuna.create_study(direction="maximize", study_name="s-optimes")
    study.set_user_attr("algo", "optimes")
    study.set_user_attr("env", "CartPole")
    study.set_user_attr("seeds", [0])
    for value, evaluations in trials:
        trial = study.ask({"sigma": optuna.distributions.FloatDistribution(0.05, 0.2)})
        trial.set_user_attr("values", {"sigma": trial.params["sigma"]})
        for step in range(evaluations):
            trial.report(value, step)
        used = None if limit is None else 1.3 * limit
        record = {"evaluations": evaluations, "cpu_seconds": used, "steps": 2, "chunk": None}
        trial.set_user_attr("usage", {"0": record} if usage is None else usage)
        study.tell(trial, value)
    return study, space


def test_a_trial_with_too_few_evaluations_is_not_the_best() -> None:
    from harness.tune.best import best_of, checked_trials
    from harness.tune.outputs import trials_frame

    study, space = _study([(10.0, 5), (99.0, 2), (20.0, 3)])
    checked, skipped = checked_trials(study, space)
    assert not skipped
    tuned = best_of(study, "sqlite://", "optimes", checked)
    assert tuned.trial == 2 and not tuned.warning  # 99 had 2 evaluations of the 3 averaged
    frame = trials_frame(checked)
    assert list(frame["too_few_evaluations"]) == [False, True, False]
    assert list(frame["evaluations"]) == [5, 2, 3]


def test_the_best_of_trials_all_with_too_few_evaluations_comes_with_a_warning() -> None:
    from harness.tune.best import best_of, checked_trials

    study, space = _study([(10.0, 1), (30.0, 2)])
    tuned = best_of(study, "sqlite://", "optimes", checked_trials(study, space)[0])
    assert tuned.trial == 1
    assert "no completed trial has the 3 evaluations" in tuned.warning


def test_overruns_are_noted_with_the_step_granularity(tmp_path: Path) -> None:
    from harness.tune.best import best_of, checked_trials
    from harness.tune.outputs import trials_frame, usage_notes
    from harness.tune.scores import Objective

    study, space = _study([(10.0, 5), (20.0, 4)], limit=10.0)
    checked, _ = checked_trials(study, space)
    frame = trials_frame(checked, 10.0)
    assert list(frame["cpu_overrun"]) == [pytest.approx(0.3)] * 2
    plan: Any = type("Plan", (), {"budget": {"cpu_limit": 10.0}, "objective": Objective()})()
    notes = usage_notes(plan, checked, best_of(study, "sqlite://", "optimes", checked))
    (line,) = notes
    assert "2 run(s) used more than 10% over the 10 CPU-s limit (up to +30%" in line
    assert "13.0 CPU-s of its 10 (+30%): the step granularity" in line


def test_a_hostile_usage_record_skips_the_trial() -> None:
    """``usage`` is read from the database: a record that is no harness record is refused
    like any other (best.py's checks)."""
    from harness.tune.best import checked_trials

    study, space = _study([(10.0, 5)], usage={"0": {"evaluations": "x"}})
    kept, skipped = checked_trials(study, space)
    assert not kept and "usage=" in skipped


# -- search spaces ------------------------------------------------------------------------------


ES = ("optimes", "snes", "pgpe", "xnes", "cma", "nevergrad-es", "ng:CMA", "lm-ma-es", "nsr-es")


@pytest.mark.parametrize("algo", ES)
def test_the_es_spaces_sample_the_policy_size_as_rl_spaces_sample_net_arch(algo: str) -> None:
    from harness.config import build_run_config
    from harness.tune.space import load_space, split_values

    space = {p.key: p for p in load_space(algo).params}
    assert "net_arch" in {p.key for p in load_space("ppo").params}
    assert space["policy.kind"].values == ("linear", "mlp")
    sizes = space["policy.hidden_sizes"].values
    if algo in ("optimes", "snes", "pgpe", "lm-ma-es", "nsr-es"):
        assert sizes == ([64], [64, 64], [256, 256])  # PPO's net_arch choices
    else:  # full covariance (cma, xnes, ng:CMA): sizes it can hold
        assert sizes == ([16], [32, 32])
    for kind in ("linear", "mlp"):
        values = {"policy.kind": kind, "policy.hidden_sizes": sizes[-1]}
        _, sets = split_values(values)
        config = build_run_config(
            {"algo": algo, "env": "LunarLanderContinuous", "timesteps": 10**5}, overrides=sets
        ).config
        assert config["policy"]["kind"] == kind
        assert config["policy"]["hidden_sizes"] == sizes[-1]


def test_a_space_with_the_policy_size_refuses_a_fixed_policy_kind(tmp_path: Path) -> None:
    """The policy's size is sampled: a --set of it is refused (exit 2, one line)."""
    done = harness_cli(
        "tune",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--trials",
        "1",
        "--cpu-limit",
        "1",
        "--set",
        "policy.kind=linear",
        "--runs-dir",
        str(tmp_path / "runs"),
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "policy.kind is in optimes's search space" in done.stderr
    assert not (tmp_path / "runs").exists()
