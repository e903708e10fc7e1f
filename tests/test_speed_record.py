"""The speed record (harness/speed.py): every run times a reference workload at each
evaluation; `harness report` states each run's speed and compares CPU-seconds of runs of
different speed in reference CPU-seconds, or says why not."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness import speed
from harness.cli import main
from harness.records import load_runs
from harness.report import audit
from harness.repro import compared
from tests.conftest import harness_cli, read_run


def _runs(runs_dir: Path) -> list[Path]:
    for seed in ("1", "2"):
        harness_cli(
            "run",
            "--algo",
            "optimes",
            "--env",
            "CartPole",
            "--timesteps",
            "3000",
            "--seed",
            seed,
            "--backend",
            "inline",
            "--workers",
            "1",
            "--set",
            "eval_every_timesteps=1000",
            "--set",
            "eval_episodes=2",
            "--runs-dir",
            str(runs_dir),
        )
    return sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name.isdigit())


def _median(run_dir: Path) -> float:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return speed.run_speed(metrics[speed.KERNEL_METRIC]["values"])[0]


def _set_series(run_dir: Path, value: float, cpu: str | None = None) -> float:
    """Make the run's speed series flat at ``value`` (as if measured there); return it."""
    path = run_dir / "metrics.json"
    metrics = json.loads(path.read_text())
    for name in speed.METRICS:
        metrics[name]["values"] = [value] * len(metrics[name]["values"])
    path.write_text(json.dumps(metrics))
    if cpu is not None:
        run_json = run_dir / "run.json"
        run = json.loads(run_json.read_text())
        run["host"]["cpu"] = cpu
        run_json.write_text(json.dumps(run))
    return value


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _runs(tmp_path_factory.mktemp("speed") / "runs")


def test_every_evaluation_records_the_speed_series(two_runs: list[Path]) -> None:
    record = read_run(two_runs[0])
    metrics = record["metrics"]
    evals = metrics["eval_return_mean"]["steps"]
    assert len(evals) >= 3
    for name in speed.METRICS:
        assert metrics[name]["steps"] == evals, name
        assert all(v > 0 and math.isfinite(v) for v in metrics[name]["values"])
        assert not compared(name)  # a timing: left out of repro and resume comparisons
    assert record["run"]["host"]["cpu"]  # the CPU model, recorded once by Sacred


def test_report_converts_runs_of_different_speed(two_runs: list[Path], tmp_path: Path) -> None:
    fast = _set_series(two_runs[0], _median(two_runs[0]))
    slow = _set_series(two_runs[1], fast / 2, cpu="Slow CPU Model")  # half the speed
    out = tmp_path / "report"
    assert main(["report", str(two_runs[0].parent), "--out", str(out), "--map-runs", "0"]) == 0
    text = (out / "report.md").read_text()
    assert "Machine speed" in text and "Slow CPU Model" in text
    assert f"{fast:,.0f}" in text and f"{slow:,.0f}" in text
    assert "run speeds differ by +100%" in text and "compare their CPU-seconds as reference" in text
    for run_dir, value in zip(two_runs, (fast, slow), strict=True):
        cpu = json.loads((run_dir / "summary.json").read_text())["cpu_seconds"]
        expected = audit.fmt(cpu * value / speed.REFERENCE_SPEED, 1)
        row = next(line for line in text.splitlines() if f"| runs/{run_dir.name} |" in line)
        assert row.rstrip(" |").endswith(f"| {expected}"), row


def test_report_says_why_not_for_a_wide_or_missing_record(two_runs: list[Path]) -> None:
    _set_series(two_runs[0], _median(two_runs[0]))
    path = two_runs[1] / "metrics.json"
    metrics = json.loads(path.read_text())
    values = metrics[speed.KERNEL_METRIC]["values"]
    metrics[speed.KERNEL_METRIC]["values"] = [
        v * (0.3 + 0.3 * (i % 4)) for i, v in enumerate(values)
    ]
    path.write_text(json.dumps(metrics))
    table = load_runs([two_runs[0].parent])
    frame, lines = audit.speed_table(table.steps, table.runs)
    assert any("not converted" in line and "spread above it" in line for line in lines)
    assert set(frame["reference CPU-seconds"]) == {"—"}
    for name in speed.METRICS:
        del metrics[name]
    path.write_text(json.dumps(metrics))
    table = load_runs([two_runs[0].parent])
    frame, lines = audit.speed_table(table.steps, table.runs)
    assert "no record" in set(frame["speed (kernel/CPU-s)"])
