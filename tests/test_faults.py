"""Environment faults: NaN/inf from the env or an exception in ``env.step``, through the CLI.

The faulty envs (tests/faulty_env.py) are real gymnasium envs; a
``sitecustomize.py`` on PYTHONPATH registers them in every process of the run,
the spawned workers included, so the process backend is exercised too.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, only_run_dir, read_run

TESTS = Path(__file__).resolve().parent
FAULTS = {
    "FaultyNanReward-v0": "NonFiniteError: non-finite reward nan",
    "FaultyInfObs-v0": "NonFiniteError: non-finite observation",
    "FaultyStepRaise-v0": "EnvStepError: planted failure in step 5",
}


@pytest.fixture(scope="module")
def faulty_env_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    site = tmp_path_factory.mktemp("site")
    (site / "sitecustomize.py").write_text("import faulty_env  # registers the faulty envs\n")
    return os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")])


def _run(pythonpath: str, runs: Path, env_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "HARNESS_PROGRESS": "0"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--algo",
            "optimes",
            "--env",
            env_id,
            "--generations",
            "3",
            "--runs-dir",
            str(runs),
            "--set",
            "policy.kind=linear",
            "--set",
            "eval_episodes=3",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("env_id", "backend"),
    [
        ("FaultyNanReward-v0", "process"),
        ("FaultyInfObs-v0", "inline"),
        ("FaultyStepRaise-v0", "process"),
    ],
)
def test_env_fault_stops_the_run_and_records_it_failed(
    faulty_env_path: str, tmp_path: Path, env_id: str, backend: str
) -> None:
    result = _run(
        faulty_env_path, tmp_path / "runs", env_id, "--backend", backend, "--workers", "2"
    )
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    # one line naming the env, the generation and the candidate
    assert last.startswith("harness: run 1 FAILED: EnvironmentFault: "), last
    assert f"env {env_id}, generation 0, " in last and FAULTS[env_id] in last, last
    assert "task " in last or "candidate " in last, last
    assert "Traceback" not in result.stderr

    run = json.loads((only_run_dir(tmp_path / "runs") / "run.json").read_text())
    assert run["status"] == "FAILED"
    trace = "".join(run["fail_trace"])
    assert "Traceback" in trace and FAULTS[env_id] in trace and "generation 0" in trace
    assert "faulty_env.py" in trace or "rollout.py" in trace  # the worker's own traceback


@pytest.mark.parametrize("env_id", ["FaultyNanReward-v0", "FaultyStepRaise-v0"])
def test_switch_scores_a_faulty_candidate_as_worst(
    faulty_env_path: str, tmp_path: Path, env_id: str
) -> None:
    result = _run(
        faulty_env_path,
        tmp_path / "runs",
        env_id,
        "--backend",
        "inline",
        "--set",
        "fail_on_env_error=false",
    )
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    metrics = record["metrics"]
    # the third episode of the env (generation 0, candidate 2) went wrong and scored worst
    assert metrics["failed_candidates"]["values"] == [1.0, 0.0, 0.0]
    for name in ("fitness_mean", "fitness_min", "fitness_max", "eval_return_mean"):
        assert all(math.isfinite(v) for v in metrics[name]["values"]), name
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 3
