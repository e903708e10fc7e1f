"""The speed record (harness/speed.py): every run times a reference workload at each
evaluation; `harness report` states each run's speed and compares CPU-seconds of runs of
different speed in reference CPU-seconds, or says why not."""

from __future__ import annotations

import json
import math
import shutil
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


def _set_series(
    run_dir: Path, value: float, cpu: str | None = None, steps_per_cpu_s: float | None = None
) -> float:
    """Make the run's speed series flat at ``value`` (as if measured there) and, with
    ``steps_per_cpu_s``, its CPU-seconds its timesteps at that rate; return ``value``."""
    path = run_dir / "metrics.json"
    metrics = json.loads(path.read_text())
    for name in speed.METRICS:
        metrics[name]["values"] = [value] * len(metrics[name]["values"])
    if steps_per_cpu_s is not None:  # the runs are too short for their own CPU to tell
        used = [t / steps_per_cpu_s for t in metrics["timesteps"]["values"]]
        metrics["cpu_seconds"]["values"] = used
        summary_path = run_dir / "summary.json"
        summary = json.loads(summary_path.read_text())
        summary["cpu_seconds"] = used[-1]
        summary_path.write_text(json.dumps(summary))
    path.write_text(json.dumps(metrics))
    if cpu is not None:
        run_json = run_dir / "run.json"
        run = json.loads(run_json.read_text())
        run["host"]["cpu"] = cpu
        run_json.write_text(json.dumps(run))
    return value


@pytest.fixture(scope="module")
def made_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _runs(tmp_path_factory.mktemp("speed") / "runs")


@pytest.fixture
def two_runs(made_runs: list[Path], tmp_path: Path) -> list[Path]:
    """A copy of the two runs for each test (each edits their records)."""
    shutil.copytree(made_runs[0].parent, tmp_path / "runs")
    return [tmp_path / "runs" / run.name for run in made_runs]


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
    fast = _set_series(two_runs[0], _median(two_runs[0]), steps_per_cpu_s=4000)
    # half the speed, and the work took twice the CPU-seconds a step there
    slow = _set_series(two_runs[1], fast / 2, cpu="Slow CPU Model", steps_per_cpu_s=2000)
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
    base = _set_series(two_runs[0], _median(two_runs[0]))
    path = two_runs[1] / "metrics.json"
    metrics = json.loads(path.read_text())
    # built on run 0's speed, not run 1's own measurement: on a loaded machine the two
    # runs' measured speeds differ by chance, and this record must differ by more than the
    # tolerance (its median is at most 0.75 x base) and spread within itself
    metrics[speed.KERNEL_METRIC]["values"] = [
        base * (0.3 + 0.3 * (i % 4)) for i in range(len(metrics[speed.KERNEL_METRIC]["values"]))
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


def test_report_does_not_convert_where_the_record_does_not_explain_the_rates(
    two_runs: list[Path],
) -> None:
    """Records 2x apart while the runs' own steps per CPU-second agree: the record is
    wrong about one of them, so nothing is converted and the line says why."""
    fast = _set_series(two_runs[0], _median(two_runs[0]), steps_per_cpu_s=4000)
    _set_series(two_runs[1], fast / 2, cpu="Slow CPU Model", steps_per_cpu_s=4000)
    table = load_runs([two_runs[0].parent])
    frame, lines = audit.speed_table(table.steps, table.runs)
    assert any("not converted" in line and "does not explain" in line for line in lines), lines
    assert set(frame["reference CPU-seconds"]) == {"—"}
