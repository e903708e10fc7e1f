"""The Python API (harness.api): the run ``harness run`` makes, its refusals, a cheap import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import harness
from harness import api
from harness.commands import UsageError

ROOT = Path(__file__).resolve().parents[1]
#: Metrics that measure the machine rather than the computation.
TIMING = ("wall_time_s", "cpu_seconds", "load", "time_", "_s")


def _quiet_env() -> dict[str, str]:
    return {**os.environ, "HARNESS_PROGRESS": "0"}


def _computed(metrics: dict[str, dict[str, list[object]]]) -> dict[str, object]:
    """metrics.json without the timings and timestamps (they differ between two runs)."""
    return {
        name: (series["steps"], series["values"])
        for name, series in metrics.items()
        if not any(part in name for part in TIMING)
    }


def test_a_run_from_python_is_the_command_line_run(tmp_path: Path) -> None:
    knobs = ["--algo", "optimes", "--env", "CartPole", "--seed", "3", "--generations", "2"]
    knobs += ["--backend", "inline", "--set", "sigma=0.05", "--set", "policy.kind=linear"]
    cli_dir = tmp_path / "cli"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", *knobs, "--runs-dir", str(cli_dir)],
        cwd=ROOT,
        env=_quiet_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = api.run(
        algo="optimes",
        env="CartPole",
        seed=3,
        generations=2,
        backend="inline",
        sigma=0.05,
        policy={"kind": "linear"},
        runs_dir=tmp_path / "api",
        progress=False,
    )
    assert result.status == "COMPLETED"
    assert result.run_dir == tmp_path / "api" / "1"
    cli_config = json.loads((cli_dir / "1" / "config.json").read_text())
    api_config = json.loads((result.run_dir / "config.json").read_text())
    assert api_config == cli_config == result.config
    cli_metrics = json.loads((cli_dir / "1" / "metrics.json").read_text())
    api_metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert _computed(api_metrics) == _computed(cli_metrics)
    assert "eval_return_mean" in _computed(api_metrics)
    frame = result.metrics
    assert {"step", "timesteps", "eval_return_mean"} <= set(frame.columns)
    assert result.summary["final_eval_return"] == pytest.approx(
        frame["eval_return_mean"].dropna().iloc[-1]
    )
    policy = result.policy()
    assert policy.status == "COMPLETED"
    table = api.load_runs([cli_dir, tmp_path / "api"], algo="optimes", where={"sigma": 0.05})
    assert len(table) == 2 and set(table["params.sigma"]) == {0.05}
    steps = api.load_runs(tmp_path / "api", steps=True)
    assert len(steps) == len(frame)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"popsize": 3}, "unknown --set key 'popsize'; did you mean: population"),
        ({"generations": 0}, "argument --generations: generations must be positive, got 0"),
        ({"env": "NoSuchEnv"}, "unknown environment 'NoSuchEnv'"),
        ({"backend": "carrier-pigeon"}, "unknown backend 'carrier-pigeon'"),
    ],
)
def test_bad_input_raises_the_command_line_message_and_writes_nothing(
    tmp_path: Path, knobs: dict[str, object], message: str
) -> None:
    given: dict[str, object] = {"algo": "optimes", "env": "CartPole", **knobs}
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        api.run(runs_dir=tmp_path / "runs", **given)  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists()


def test_load_runs_and_report_refuse_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        api.load_runs(tmp_path / "missing")
    with pytest.raises(UsageError, match="does not exist"):
        api.report(tmp_path / "missing", out=tmp_path / "out")
    with pytest.raises(UsageError, match="unrecognized arguments: --no-such-option"):
        api.report(tmp_path, out=tmp_path / "out", no_such_option=1)


def test_sweep_and_report_are_callable_packages() -> None:
    import harness.report
    import harness.sweep

    assert callable(harness.sweep) and callable(harness.report)
    assert harness.sweep.load_sweep is not None  # still the sub-package
    assert harness.run is api.run and harness.load_runs is api.load_runs


def test_sweep_from_a_dict_lists_completed_cells(tmp_path: Path) -> None:
    spec = {
        "name": "api-grid",
        "grid": {"algo": ["optimes"], "env": ["CartPole"], "seed": [0], "sigma": [0.05, 0.1]},
        "budget": {"generations": 1},
        "backend": "inline",
    }
    outcome = api.sweep(spec, runs_dir=tmp_path / "runs", progress=False)
    assert outcome.exit_status == 0 and not outcome.failed
    assert sorted(r.config["params"]["sigma"] for r in outcome.runs) == [0.05, 0.1]
    assert (tmp_path / "runs" / "_sweeps" / "api-grid.yaml").is_file()
    again = api.sweep(spec, runs_dir=tmp_path / "runs", progress=False)
    assert [o.action for o in again.outcomes] == ["skipped", "skipped"]
    with pytest.raises(UsageError, match="grid"):
        api.sweep({"name": "bad"}, runs_dir=tmp_path / "runs")


def test_import_harness_stays_cheap() -> None:
    code = (
        "import harness, sys; print(sorted(m for m in sys.modules if m in "
        + repr(["pandas", "sacred", "torch", "gymnasium", "numpy", "harness.api"])
        + "))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stderr
    assert harness.__all__  # the names the API exports


# -- from any script: workers never run the caller's __main__ again --------------------------

#: A script as a new user writes it: no ``if __name__ == "__main__":`` block. Each time its
#: top level runs it adds a line to ``count.txt``.
BARE_RUN = """
import harness
with open("count.txt", "a") as f:
    f.write("ran\\n")
result = harness.run(algo="optimes", env="CartPole", seed=0, generations=1, workers=2,
                     backend="process", runs_dir="runs", progress=False, oversubscribe=True)
print(result)
"""
BARE_SWEEP = """
import harness
with open("count.txt", "a") as f:
    f.write("ran\\n")
spec = {"name": "bare", "grid": {"algo": ["optimes"], "env": ["CartPole"], "seed": [0],
        "workers": [2]}, "budget": {"generations": 1}, "backend": "process"}
outcome = harness.sweep(spec, runs_dir="runs", progress=False, oversubscribe=True)
assert outcome.exit_status == 0, outcome.failed
"""


def _statuses(runs: Path) -> list[str]:
    return sorted(
        json.loads(run_json.read_text())["status"] for run_json in runs.glob("*/run.json")
    )


@pytest.mark.parametrize(
    ("how", "script"),
    [("file", BARE_RUN), ("stdin", BARE_RUN), ("notebook", BARE_RUN), ("stdin", BARE_SWEEP)],
    ids=["run-file", "run-stdin", "run-notebook", "sweep-stdin"],
)
def test_a_bare_script_runs_once_with_process_workers(
    tmp_path: Path, how: str, script: str
) -> None:
    path = tmp_path / "script.py"
    path.write_text(script, encoding="utf-8")
    argv = {
        "file": [sys.executable, "script.py"],
        "stdin": [sys.executable, "-"],
        # a notebook's cells: code run in a __main__ without a file
        "notebook": [sys.executable, "-c", "exec(open('script.py').read())"],
    }[how]
    with path.open("rb") as stdin:
        done = subprocess.run(
            argv,
            cwd=tmp_path,
            env=_quiet_env(),
            stdin=stdin if how == "stdin" else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "count.txt").read_text().splitlines() == ["ran"]  # workers never ran it
    assert _statuses(tmp_path / "runs") == ["COMPLETED"]
    if script is BARE_RUN:
        assert done.stdout.strip() == (
            "RunResult(run_dir='runs/1', algo='optimes', env='CartPole', seed=0, "
            "status='COMPLETED')"
        )


@pytest.mark.parametrize("started_as", ["file", "module"])
def test_spawned_processes_do_not_import_the_main_module(
    monkeypatch: pytest.MonkeyPatch, started_as: str
) -> None:
    import importlib.machinery
    import types
    from multiprocessing.spawn import get_preparation_data

    from evaluation.spawning import main_module_hidden

    script = types.ModuleType("__main__")
    if started_as == "file":  # python script.py
        script.__file__ = "/somewhere/script.py"
        key, value = "init_main_from_path", "/somewhere/script.py"
    else:  # python -m mine (a notebook kernel is started so)
        script.__spec__ = importlib.machinery.ModuleSpec("mine", None)
        key, value = "init_main_from_name", "mine"
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert get_preparation_data("w")[key] == value
    with main_module_hidden():
        data = get_preparation_data("w")
        assert "init_main_from_path" not in data and "init_main_from_name" not in data
        assert sys.modules["__main__"] is not script
    assert sys.modules["__main__"] is script  # put back as it was


def test_an_env_defined_in_the_script_is_refused_for_workers(tmp_path: Path) -> None:
    import gymnasium as gym
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    def script_pole(**kwargs: Any) -> gym.Env[Any, Any]:
        return CartPoleEnv(**kwargs)

    script_pole.__module__ = "__main__"  # as if the calling script defined it
    gym.register("ScriptPole-v0", entry_point=script_pole, max_episode_steps=50)
    try:
        with pytest.raises(UsageError, match=r"defined in the script .* imports=\['MODULE'\]"):
            api.run(
                "optimes",
                "ScriptPole-v0",
                runs_dir=tmp_path / "runs",
                generations=1,
                workers=2,
                backend="process",
                oversubscribe=True,
            )
        assert not (tmp_path / "runs").exists()
        inline = api.run(
            "optimes",
            "ScriptPole-v0",
            runs_dir=tmp_path / "runs",
            generations=1,
            backend="inline",
            progress=False,
        )
        assert inline.status == "COMPLETED"
    finally:
        del gym.registry["ScriptPole-v0"]


def test_results_and_policies_print_in_one_line(tmp_path: Path) -> None:
    import numpy as np

    from harness.replay import LoadedPolicy

    config = {"algo": "cma", "env": "Pendulum", "seed": 7, "params": {"x": list(range(500))}}
    result = api.RunResult(tmp_path / "3", "FAILED", config, {"final_eval_return": -1.0})
    text = repr(result)
    assert text == (
        f"RunResult(run_dir={str(tmp_path / '3')!r}, algo='cma', env='Pendulum', seed=7, "
        "status='FAILED')"
    )
    policy = LoadedPolicy(
        tmp_path / "3",
        config,
        "checkpoint",
        12,
        "INTERRUPTED",
        lambda o, d: np.zeros(1),
        lambda: None,
    )
    assert repr(policy) == (
        f"LoadedPolicy(run_dir={str(tmp_path / '3')!r}, algo='cma', env='Pendulum', "
        "source='checkpoint', step=12, status='INTERRUPTED')"
    )
    policy.source, policy.step, policy.status = "final", None, "COMPLETED"
    assert "source='final', status='COMPLETED')" in repr(policy)


# -- the sweep's ETA: each cell estimated from its algorithm and env ------------------------


def test_cell_costs_come_from_measurements_then_the_plan_then_a_default() -> None:
    from harness.sweep.estimate import CostEstimator, format_eta, plan_rates

    ppo = {"algo": "ppo", "env": "Hopper-v5", "timesteps": 1_000_000, "workers": 1}
    es = {"algo": "optimes", "env": "CartPole", "timesteps": 40_000, "workers": 1}
    mine = {"algo": "optimes", "env": "mine:Point-v0", "timesteps": 10_000, "workers": 1}
    estimator = CostEstimator(plan=plan_rates(), default_s=60.0, start_s=3.0)
    # PPO on Hopper: the benchmark plan's 1300 CPU-seconds for 1M timesteps
    assert estimator.estimate(ppo).source == "plan"
    assert estimator.estimate(ppo).seconds == pytest.approx(1303.0)
    assert estimator.estimate(mine).source == "default"
    assert estimator.estimate(mine).seconds == 60.0
    # measured ES cells say nothing about PPO: each (algorithm, env) keeps its own rate
    estimator.observe(es, 8.0)
    estimator.observe(es, 12.0)
    assert estimator.estimate(es).source == "measured"
    assert estimator.estimate({**es, "timesteps": 80_000}).seconds == pytest.approx(20.0)
    assert estimator.estimate(ppo).source == "plan"
    # a measured PPO cell replaces the plan for the others of its kind
    estimator.observe(ppo, 240.0)
    assert estimator.estimate(ppo).seconds == pytest.approx(240.0)
    # what is left: two waiting PPO cells, one running for 100 s, over 2 jobs
    left = estimator.remaining([ppo, ppo], [(ppo, 100.0)], jobs=2)
    assert left == pytest.approx((240.0 * 2 + 140.0) / 2)
    # a time limit caps the estimate; no timestep budget: the mean of the measured runs
    assert estimator.estimate({**ppo, "time_limit": 30.0}).seconds == pytest.approx(33.0)
    assert estimator.estimate({**es, "timesteps": None}).seconds == pytest.approx(10.0)
    assert format_eta(3725) == "1h02m" and format_eta(245) == "4m05s" and format_eta(9) == "9s"


def test_cell_costs_from_runs_already_stored() -> None:
    from types import SimpleNamespace

    from harness.sweep.estimate import CostEstimator

    header = SimpleNamespace(
        config={"algo": "a2c", "env": "CartPole", "timesteps": 10_000},
        run={
            "start_time": "2026-01-01T00:00:00",
            "stop_time": "2026-01-01T00:01:00",
            "result": {"timesteps": 10_000},
        },
    )
    estimator = CostEstimator(start_s=0.0)
    estimator.observe_runs([header])
    cost = estimator.estimate({"algo": "a2c", "env": "CartPole", "timesteps": 20_000})
    assert cost.source == "measured" and cost.seconds == pytest.approx(120.0)
