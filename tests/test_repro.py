"""`harness check-repro`: the committed golden digests, and a real mismatch it must catch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.commands import UsageError
from harness.repro import _read_golden, compare_golden, diff_metrics, digest, golden_text
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "repro_cartpole.json"
TESTS = Path(__file__).resolve().parent


def _check_repro(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HARNESS_PROGRESS": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "check-repro", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def golden_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    keep = tmp_path_factory.mktemp("repro")
    result = _check_repro("--golden", str(GOLDEN), "--keep", str(keep))
    assert result.returncode == 0, result.stdout + result.stderr
    return keep, result.stdout


def test_matches_the_committed_golden_digests(golden_check: tuple[Path, str]) -> None:
    keep, out = golden_check
    assert "W=1 again vs W=1: same metrics" in out
    assert "W=2 vs W=1: same metrics" in out
    assert "interrupted after step 5 and resumed vs W=1: same metrics" in out
    assert f"W=1 vs golden {GOLDEN}: same metrics" in out
    resumed = json.loads((keep / "resumed" / "1" / "run.json").read_text())
    assert resumed["status"] == "COMPLETED" and resumed["resumed"][0]["from_step"] == 5


def _metrics(keep: Path) -> dict[str, Any]:
    metrics: dict[str, Any] = json.loads((keep / "first" / "1" / "metrics.json").read_text())
    return metrics


def test_golden_file_documents_how_to_regenerate() -> None:
    golden = _read_golden(GOLDEN)
    assert "--update-golden" in golden["about"] and str(GOLDEN.relative_to(ROOT)) in golden["about"]
    assert GOLDEN.read_text() == golden_text(golden)  # written by the tool, untouched


@pytest.mark.slow
def test_a_changed_number_is_reported_with_step_and_values(
    golden_check: tuple[Path, str], tmp_path: Path
) -> None:
    metrics = _metrics(golden_check[0])
    golden = json.loads(GOLDEN.read_text())
    entry = golden["metrics"]["fitness_max"]
    entry["values"][4] += 1.0
    entry["sha256"] = digest(entry["steps"], entry["values"], golden["digits"])
    changed = tmp_path / "golden.json"
    changed.write_text(json.dumps(golden))
    lines = compare_golden(_read_golden(changed), golden["config"], metrics)
    assert lines == [
        f"fitness_max: first differs at step 5: {entry['values'][4]!r} (golden) "
        f"vs {entry['values'][4] - 1.0!r} (this run)"
    ]
    # last-digit noise (another CPU's BLAS) is not a mismatch
    entry = golden["metrics"]["param_norm"]
    entry["values"][2] = float(f"{entry['values'][2] * (1 + 2e-6):.6g}")
    entry["sha256"] = digest(entry["steps"], entry["values"], golden["digits"])
    golden["metrics"]["fitness_max"] = json.loads(GOLDEN.read_text())["metrics"]["fitness_max"]
    changed.write_text(json.dumps(golden))
    assert compare_golden(_read_golden(changed), golden["config"], metrics) == []
    # a hand-edited value that no longer matches its digest is refused
    entry["values"][3] += 1
    changed.write_text(json.dumps(golden))
    with pytest.raises(UsageError, match="param_norm"):
        _read_golden(changed)


def test_diff_names_metric_step_and_values() -> None:
    a = {
        "fitness_mean": {"steps": [1, 2, 3], "values": [1.0, 2.0, 3.0]},
        "wall_time_s": {"steps": [1], "values": [0.1]},
    }
    b = {
        "fitness_mean": {"steps": [1, 2, 3], "values": [1.0, 2.5, 3.0]},
        "wall_time_s": {"steps": [1], "values": [0.2]},
        "sigma": {"steps": [1], "values": [0.1]},
    }
    assert diff_metrics(a, b, "W=1", "W=2") == [
        "fitness_mean: first differs at step 2: 2.0 (W=1) vs 2.5 (W=2)",
        "sigma: logged by W=2 only",
    ]


def test_a_policy_knob_newer_than_the_golden_file_counts_only_off_its_default() -> None:
    golden: dict[str, Any] = {"config": {"policy": {"kind": "mlp"}}, "metrics": {}}
    assert compare_golden(golden, {"policy": {"kind": "mlp", "init": "normc"}}, {}) == []
    moved = compare_golden(golden, {"policy": {"kind": "mlp", "init": "torch"}}, {})
    assert len(moved) == 1 and moved[0].startswith("config policy:") and "torch" in moved[0]
    assert compare_golden(golden, {"policy": {"kind": "linear", "init": "normc"}}, {})


@pytest.mark.slow
def test_catches_a_run_that_is_not_reproducible(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import faulty_env\n")
    pythonpath = os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")])
    result = _check_repro(
        "--algo",
        "optimes",
        "--env",
        "Unseeded-v0",
        "--generations",
        "3",
        "--set",
        "policy.kind=linear",
        "--set",
        "eval_episodes=2",
        "--interrupt-at",
        "1",
        env={"PYTHONPATH": pythonpath},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "W=1 again vs W=1: MISMATCH" in out and "W=2 vs W=1: MISMATCH" in out
    assert "fitness_mean: first differs at step 1: " in out
    assert out.strip().endswith("check-repro: FAILED")
