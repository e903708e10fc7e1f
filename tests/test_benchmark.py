"""The benchmark: its file, its cells, and a whole small benchmark run, archived and redrawn."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import rundir
from harness.benchmark.report import (
    TaskScores,
    aggregate_matrix,
    budget_words,
    compute_span_text,
    cpu_spread_text,
    more_workers_text,
    own_budget_text,
    threshold_table,
)
from harness.benchmark.spec import BenchmarkError, Task, load_benchmark
from harness.rundir import extract_run_archive, run_dirs
from tests.conftest import ROOT, harness_cli

SMALL = """\
name: bench-test
seeds: [100, 101, 102]
workers: 1
tasks:
  - env: CartPole
    budget: {timesteps: 3000}
    reference: {score: 475, source: "CartPole-v1 reward_threshold"}
    algos: [optimes, ppo]
    set: [eval_every_timesteps=1000, eval_episodes=3]
    cost_cpu_s: {optimes: 5, ppo: 20}
"""


def write(folder: Path, text: str) -> Path:
    path = folder / "bench.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_benchmark_is_valid_and_held_out() -> None:
    bench = load_benchmark(ROOT / "experiments" / "benchmark.yaml")
    assert len(bench.tasks) >= 5
    assert all(seed >= 100 for seed in bench.seeds) and len(bench.seeds) >= 5
    grid = [c for c in bench.sweep.cells if not bench.is_equal_compute(c)]
    assert len(grid) == sum(len(t.algos) for t in bench.tasks) * len(bench.seeds)
    # an equal-compute cell per ES and seed, and a run of its RL beside each paired one
    equal = sum(
        len(t.equal_compute.algos) * (2 if t.equal_compute.paired else 1)
        for t in bench.tasks
        if t.equal_compute
    )
    assert len(bench.sweep.cells) - len(grid) == equal * len(bench.seeds)
    order = [(bench.tasks.index(bench.task_of(c)), bench.cost_of(c)) for c in bench.sweep.cells]
    assert order == sorted(order), "cells run task by task, cheapest first within a task"
    assert {c.config["workers"] for c in bench.sweep.cells} == {bench.workers}


def test_a_filter_that_selects_no_cell_is_refused_by_name() -> None:
    bench = load_benchmark(ROOT / "experiments" / "benchmark.yaml")
    assert bench.only(["HalfCheetah-v5"], ["ppo"]).sweep.cells
    with pytest.raises(
        BenchmarkError, match="no cell matches --task HalfCheetah-v5 --algo recurrent-ppo"
    ):
        bench.only(["HalfCheetah-v5"], ["recurrent-ppo"])


def test_a_page_without_runs_does_not_claim_its_equal_compute_cells_ran(tmp_path: Path) -> None:
    from harness.cli import main

    summary = tmp_path / "BENCHMARK.md"
    out = ["--out", str(tmp_path / "report"), "--summary", str(summary)]
    assert main(["benchmark", "report", *out, "--resamples", "100"]) == 0
    page = summary.read_text(encoding="utf-8")
    tasks = [task.env for task in load_benchmark(ROOT / "experiments" / "benchmark.yaml").tasks]
    assert re.search(r"\b0 of \d+ cells complete", page)
    assert "Every cell it needs has run" not in page
    assert f"Not priced yet on {', '.join(tasks)}:" in page


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("seeds: [100, 101, 102]", None),
        ("seeds: [5, 100]", "seed 5 is a tuning seed"),
        ("seeds: []", "seeds must be a list of integers"),
        ("    budget: {timesteps: 3000}", None),
        ("    budget: {steps: 3000}", "budget must be a mapping"),
        ("    algos: [optimes, ppo]", None),
        ("    algos: [optimes, nope]", "nope"),
        ("    reference: {score: 475, source: x}", None),
        ("    reference: {source: x}", "reference must give a numeric score"),
    ],
)
def test_bad_benchmark_file_names_the_value(
    tmp_path: Path, change: str, message: str | None
) -> None:
    key = change.split(":")[0]
    lines = [change if line.split(":")[0] == key else line for line in SMALL.splitlines()]
    path = write(tmp_path, "\n".join(lines) + "\n")
    if message is None:
        load_benchmark(path)
        return
    with pytest.raises(BenchmarkError, match=message):
        load_benchmark(path)


# Slow: six real CartPole runs through `harness benchmark run` twice, then two full benchmark
# reports (about 48 s of one worker); CI runs it in `make test-slow`.
@pytest.mark.slow
def test_small_benchmark_runs_resumes_and_redraws_from_its_archive(tmp_path: Path) -> None:
    spec = write(tmp_path, SMALL)
    runs, out, summary = tmp_path / "runs", tmp_path / "report", tmp_path / "BENCHMARK.md"
    part = ("benchmark", "run", "--file", str(spec), "--runs-dir", str(runs), "--algo", "optimes")
    assert (
        "2 cells, 0 already completed, 2 ran"
        in harness_cli(*part, "--seed", "100", "--seed", "102").stdout
    )
    ran = harness_cli("benchmark", "run", "--file", str(spec), "--runs-dir", str(runs))
    assert "6 cells, 2 already completed, 4 ran" in ran.stdout
    plan = harness_cli("benchmark", "plan", "--file", str(spec), "--runs-dir", str(runs))
    cartpole = next(line for line in plan.stdout.splitlines() if line.startswith("CartPole"))
    cells, completed, cpu_h_done, cpu_h_left = cartpole.split()[1:]
    assert (cells, completed, cpu_h_left) == ("6", "6", "0.0") and float(cpu_h_done) >= 0
    for flag, value in (("--task", "Hopper-v5"), ("--algo", "sac"), ("--seed", "7")):
        bad = harness_cli("benchmark", "plan", "--file", str(spec), flag, value, check=False)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert repr(value) in bad.stderr
    again = harness_cli("benchmark", "run", "--file", str(spec), "--runs-dir", str(runs))
    assert "6 already completed, 0 ran" in again.stdout
    nowhere = tmp_path / "nowhere"
    bad = harness_cli(
        "benchmark", "report", "--file", str(spec), "--out", str(nowhere), "--resamples", "5",
        check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "harness: error: --resamples 5 is outside 100..1,000,000"
    ], bad.stderr
    assert not nowhere.exists()

    # A draft of 500 resamples: the interval code is the same, at a twentieth of the time.
    common = ["--file", str(spec), "--out", str(out), "--summary", str(summary)]
    common += ["--resamples", "500"]
    harness_cli("benchmark", "report", "--runs-dir", str(runs), *common)
    archive = out / "cartpole" / "runs.tar.xz"
    archived = run_dirs(extract_run_archive(archive))
    assert len(archived) == 6
    assert sorted(p.name for p in archived[0].iterdir()) == [
        "config.json",
        "metrics.json",
        "policy_spec.json",
        "run.json",
        "summary.json",
    ]
    load = json.loads((archived[0] / "summary.json").read_text())["machine_load"]
    assert load["sweep_jobs"] == 1 and load["cpu_count"] == os.cpu_count()
    assert load["samples"] >= 1 and load["loadavg_1m_max"] >= load["loadavg_1m_mean"] >= 0
    page = summary.read_text()
    assert "6 of 6 cells complete" in page
    assert "| [CartPole](report/cartpole/report.md) | 6/6 |" in page
    timesteps_section = page.split("## Aggregate at equal timesteps")[1].split("## ")[0]
    assert "Not drawn yet" not in timesteps_section
    assert "report/aggregate_timesteps.png" in timesteps_section
    assert "(rliable; a draft of 500 resamples)" in timesteps_section  # not the default 20,000
    for name in ("aggregate_timesteps.png", "profiles_timesteps.png"):
        assert (out / name).stat().st_size > 1000
    # At equal CPU-seconds PPO may have no evaluation yet where the ES runs' CPU ends: then
    # the section says so instead of drawing a figure from NaNs.
    cpu_section = page.split("## Aggregate at equal CPU-seconds")[1]
    assert ("Not drawn yet" in cpu_section) != (out / "aggregate_cpu_seconds.png").is_file()
    assert (out / "cartpole" / "report.md").read_text().count("| optimes |") >= 1

    # Redrawn from the committed archive alone (no runs directory): the same bytes.
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    first_summary = page
    harness_cli("benchmark", "report", *common)
    second = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    changed = sorted(str(k) for k in first if first[k] != second.get(k))
    assert changed == [], changed
    assert summary.read_text() == first_summary


@pytest.mark.slow
def test_report_reads_an_archive_as_a_runs_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--timesteps",
        "2000",
        "--seed",
        "3",
        "--runs-dir",
        str(runs),
        "--set",
        "eval_every_timesteps=1000",
    )
    from harness.rundir import write_run_archive

    archive = tmp_path / "study.tar.xz"
    # An archive rewritten in the same process is read anew (the benchmark report reads
    # each task's archive, rewrites it with more runs, then reads it again).
    write_run_archive([], archive)
    assert run_dirs(extract_run_archive(archive)) == []
    write_run_archive(run_dirs(runs), archive)
    assert len(run_dirs(extract_run_archive(archive))) == 1
    write_run_archive(run_dirs(runs), tmp_path / "again.tar.xz")
    assert archive.read_bytes() == (tmp_path / "again.tar.xz").read_bytes()
    harness_cli("report", str(runs), "--out", str(tmp_path / "from_dir"), "--map-runs", "0")
    harness_cli("report", str(archive), "--out", str(tmp_path / "from_archive"), "--map-runs", "0")
    for name in ("eval_vs_timesteps.png", "runs.csv"):
        assert (tmp_path / "from_dir" / name).read_bytes() != b""
    from_dir = (tmp_path / "from_dir" / "eval_vs_timesteps.png").read_bytes()
    assert from_dir == (tmp_path / "from_archive" / "eval_vs_timesteps.png").read_bytes()


def test_aggregate_takes_complete_tasks_and_the_algorithms_they_share() -> None:
    def scores(env: str, algos: list[str], seeds: dict[str, list[int]]) -> TaskScores:
        task = Task(env, {"timesteps": 1000}, 100.0, "test", algos)
        rows = [
            {"algo": a, "seed": s, "score_timesteps": 10.0 * s + i}
            for i, a in enumerate(algos)
            for s in seeds.get(a, [100, 101, 102])
        ]
        return TaskScores(task, pd.DataFrame(rows), {"timesteps": 1000.0}, 0.0)

    both = ["optimes", "ppo"]
    lander = scores("Lander", [*both, "pgpe"], {})
    pendulum = scores("PendulumPO", [*both, "recurrent-ppo"], {"ppo": [100, 101, 102, 103]})
    unfinished = scores("Ant", both, {"ppo": [100, 101]})
    aggregate = aggregate_matrix([lander, pendulum, unfinished], "timesteps")
    assert aggregate.envs == ["Lander", "PendulumPO"]
    assert sorted(aggregate.matrix) == both
    assert aggregate.matrix["ppo"].shape == (3, 2)  # the seeds every task shares
    np.testing.assert_allclose(aggregate.matrix["optimes"][:, 0], [10.0, 10.1, 10.2])
    assert aggregate.left_out == {
        "pgpe": "run on Lander only",
        "recurrent-ppo": "run on PendulumPO only",
    }
    assert aggregate_matrix([unfinished], "timesteps").matrix == {}
    # An algorithm planned on one task only cannot enter the aggregate, so its missing runs
    # leave the task's others in; a cross-task algorithm's missing runs keep the task out.
    no_recurrent_yet = scores("PendulumPO", [*both, "recurrent-ppo"], {"recurrent-ppo": []})
    aggregate = aggregate_matrix([lander, no_recurrent_yet, unfinished], "timesteps")
    assert aggregate.envs == ["Lander", "PendulumPO"]
    assert sorted(aggregate.matrix) == both
    no_ppo_yet = scores("PendulumPO", [*both, "recurrent-ppo"], {"ppo": []})
    assert aggregate_matrix([lander, no_ppo_yet], "timesteps").envs == ["Lander"]


def test_the_equal_cpu_point_is_set_against_the_costliest_algorithm() -> None:
    task = Task("Lander", {"timesteps": 1000}, 100.0, "test", ["optimes", "ppo"])
    runs = pd.DataFrame(
        {
            "algo": ["optimes", "optimes", "ppo", "ppo"],
            "seed": [100, 101, 100, 101],
            "cpu_seconds_total": [40.0, 50.0, 1000.0, 1200.0],
        }
    )
    scores = TaskScores(task, runs, {"timesteps": 1000.0, "cpu_seconds": 40.0}, 0.0)
    assert "Lander 40 (ppo: 1100 per run)" in compute_span_text([scores])
    assert "by up to: Lander 1.2x (optimes)." in str(cpu_spread_text([scores]))
    one_each = TaskScores(task, runs.iloc[[0, 2]], scores.at, 0.0)
    assert cpu_spread_text([one_each]) is None  # a spread needs two runs of one algorithm


def test_runs_given_more_workers_on_another_machine_are_named() -> None:
    task = Task("Ant", {"timesteps": 1000}, 100.0, "test", ["optimes", "ppo"])
    runs = pd.DataFrame(
        {
            "algo": ["optimes", "optimes", "optimes", "ppo"],
            "seed": [100, 103, 104, 100],
            "workers_most": [1.0, 8.0, 8.0, 1.0],
            "started_on": ["a 2-CPU AMD EPYC", *["a 16-CPU Intel Xeon"] * 2, "a 2-CPU AMD EPYC"],
        }
    )
    scores = TaskScores(task, runs, {"timesteps": 1000.0}, 0.0)
    text = str(more_workers_text([scores], 1))
    assert text.startswith("Not on 1 core throughout: optimes on Ant seeds 103, 104 (up to 8 ")
    assert "started on a 16-CPU Intel Xeon)." in text and "100" not in text
    assert more_workers_text([TaskScores(task, runs.iloc[[0, 3]], scores.at, 0.0)], 1) is None


def test_a_task_with_budgets_per_algorithm_names_them_and_its_leader_at_each_own_budget() -> None:
    task = Task("Ant", {"timesteps": 10_000_000}, 2500.0, "test", ["optimes", "cma", "ppo"])
    runs = pd.DataFrame(
        {
            "algo": ["optimes"] * 3 + ["cma"] * 3 + ["ppo"] * 3,
            "seed": [100, 101, 102] * 3,
            "score_final": [2400.0, 2500.0, 2450.0, 900.0, 950.0, 1000.0, 1500.0, 1600.0, 1550.0],
        }
    )
    scores = TaskScores(task, runs, {"timesteps": 2_000_000.0, "cpu_seconds": 100.0}, 0.0)
    same = dict.fromkeys(task.algos, 10_000_000.0)
    assert budget_words(task, same) == "10M timesteps"
    assert own_budget_text(scores, same) is None
    differ = same | {"ppo": 2_000_000.0}
    assert budget_words(task, differ) == "10M timesteps (ppo: 2M)"
    text = own_budget_text(scores, differ)
    assert text is not None and "budgets, 10M timesteps (ppo: 2M); its" in text, text
    assert "compares them at 2.00M timesteps" in text
    assert "own budget (its last evaluation): **optimes** 2450.0 (n=3) over ppo 1550.0" in text
    ppo_only = TaskScores(task, runs[runs["algo"] == "ppo"], scores.at, 0.0)
    assert own_budget_text(ppo_only, differ) is None  # one algorithm: nothing to compare


def test_threshold_table_counts_the_runs_that_reached_the_reference_and_their_medians(
    tmp_path: Path,
) -> None:
    bench = load_benchmark(write(tmp_path, SMALL))
    nan = float("nan")
    runs = pd.DataFrame(
        {
            "algo": ["optimes"] * 3,
            "seed": [100, 101, 102],
            "to_threshold_timesteps": [1000.0, 3000.0, nan],
            "to_threshold_cpu_seconds": [2.0, 4.0, nan],
        }
    )
    scores = TaskScores(bench.tasks[0], runs, {"timesteps": 3000.0, "cpu_seconds": 5.0}, 0.0)
    table = threshold_table(bench, [scores]).set_index("algorithm")
    assert table.loc["optimes", "CartPole"] == "2/3: 2k steps, 3 CPU-s"
    assert table.loc["ppo", "CartPole"] == "—"


CARRIED = """\
name: bench-carry
seeds: [100]
workers: 1
tasks:
  - env: CartPole
    budget: {timesteps: 4000}
    reference: {score: 475, source: "CartPole-v1 reward_threshold"}
    algos: [optimes]
    set: [eval_every_timesteps=1000, eval_episodes=3]
"""


def _trajectory(run_dir: Path) -> dict[str, list[float]]:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {k: metrics[k]["values"] for k in ("timesteps", "fitness_mean", "eval_return_mean")}


@pytest.mark.slow
def test_an_unfinished_cell_travels_in_the_committed_folder_to_another_machine(
    tmp_path: Path,
) -> None:
    """Machine A stops a cell half-way and reports; machine B (another checkpoint key, a
    fresh runs directory) continues it from the committed folder, bitwise as if never
    stopped; then a third fresh runs directory finds it done in the archive."""
    spec = write(tmp_path, CARRIED)
    out, summary = tmp_path / "report", tmp_path / "BENCHMARK.md"
    common = ["--file", str(spec)]
    draft = ["--resamples", "500"]  # the report's intervals are not what this test checks
    keys = {name: {"HARNESS_CHECKPOINT_KEY_FILE": str(tmp_path / name / "key")} for name in "ABC"}

    straight = tmp_path / "straight"
    harness_cli("benchmark", "run", *common, "--runs-dir", str(straight), "--archive-dir", str(out))
    expected = _trajectory(run_dirs(straight)[0])

    machine_a = tmp_path / "a"
    stopped = harness_cli(
        "benchmark", "run", *common, "--runs-dir", str(machine_a), "--archive-dir", str(out),
        env={**keys["A"], "HARNESS_INTERRUPT_AT_STEP": "3"}, check=False,
    )  # fmt: skip
    assert stopped.returncode == 1 and "INTERRUPTED" in stopped.stdout
    reported = harness_cli(
        "benchmark", "report", *common, *draft, "--runs-dir", str(machine_a), "--out", str(out),
        "--summary", str(summary), env=keys["A"],
    )  # fmt: skip
    assert "unfinished runs carried in the report folder: CartPole 1" in reported.stderr
    carried = run_dirs(extract_run_archive(out / "cartpole" / "unfinished.tar.xz"))
    assert [sorted(p.name for p in d.iterdir()) for d in carried] == [
        ["checkpoint.pkl", "config.json", "metrics.json", "run.json"]
    ]
    assert "0 of 1 cells complete; missing: CartPole 1 (1 of them half-done, carried)" in (
        summary.read_text()
    )
    assert "seed=100 episodes=1 workers=1 (unfinished: carried at " in (
        (out / "report.md").read_text()
    )

    machine_b = tmp_path / "b"
    plan = harness_cli(
        "benchmark", "plan", *common, "--runs-dir", str(machine_b), "--archive-dir", str(out)
    )
    assert "unfinished: optimes CartPole seed=100" in plan.stdout
    assert "of 4,000 timesteps (carried: benchmark run --adopt-unfinished continues" in (
        plan.stdout
    )
    row = next(line for line in plan.stdout.splitlines() if line.startswith("CartPole"))
    assert row.split()[1:3] == ["1", "0"]  # one cell, not done: the carried run is no completion
    continued = harness_cli(
        "benchmark", "run", *common, "--runs-dir", str(machine_b), "--archive-dir", str(out),
        "--adopt-unfinished", env=keys["B"],
    )  # fmt: skip
    assert "1 resumed, 0 not completed" in continued.stdout, continued.stdout
    assert "continues from" in continued.stderr
    (finished,) = run_dirs(machine_b)
    assert _trajectory(finished) == expected
    run = json.loads((finished / "run.json").read_text())
    assert run["status"] == "COMPLETED" and len(run["carried"]) == 1 and run["resumed"]
    rerun = harness_cli(
        "benchmark", "run", *common, "--runs-dir", str(machine_b), "--archive-dir", str(out),
        env=keys["B"],
    )  # fmt: skip
    assert "1 cells, 1 already completed, 0 ran" in rerun.stdout
    assert "not continued" not in rerun.stderr  # its own run is ahead of the carried one

    harness_cli(
        "benchmark", "report", *common, *draft, "--runs-dir", str(machine_b), "--out", str(out),
        "--summary", str(summary), env=keys["B"],
    )  # fmt: skip
    assert not (out / "cartpole" / "unfinished.tar.xz").exists()
    assert "1 of 1 cells complete" in summary.read_text()
    fresh = tmp_path / "c"
    again = harness_cli(
        "benchmark", "run", *common, "--runs-dir", str(fresh), "--archive-dir", str(out),
        env=keys["C"],
    )  # fmt: skip
    assert "1 cells, 1 already completed, 0 ran" in again.stdout
    assert "not run again (--rerun-archived runs them)" in again.stderr
    assert not run_dirs(fresh)


def test_a_carried_checkpoint_is_adopted_only_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adoption re-signs a checkpoint from another key, and refuses a damaged one unread."""
    from harness.checkpoint import (
        KEY_ENV,
        CheckpointError,
        adopt_checkpoint,
        load_checkpoint,
        save_checkpoint,
    )

    path = tmp_path / "checkpoint.pkl"
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "a.key"))
    save_checkpoint(path, {"centre": np.arange(4, dtype=np.float32), "step": 3})
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "b.key"))
    (tmp_path / "b.key").write_text("ab" * 32 + "\n")
    with pytest.raises(CheckpointError, match="not written with this user's"):
        load_checkpoint(path)
    assert adopt_checkpoint(path) == "arrays"
    assert load_checkpoint(path)["step"] == 3
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError, match="damaged: checksum mismatch"):
        adopt_checkpoint(path)


# Slow: three real CartPole runs through `harness benchmark run` and three benchmark reports.
@pytest.mark.slow
def test_an_archived_run_whose_settings_changed_stays_until_its_cell_runs_again(
    tmp_path: Path,
) -> None:
    """A report from a runs directory rewrites the task's archive; a run archived before
    its cell's settings changed stays in it (labelled on the page) until the cell runs
    again, then gives way to the new run."""
    before = SMALL.replace("algos: [optimes, ppo]", "algos: [optimes, cma]").replace(
        "seeds: [100, 101, 102]", "seeds: [100]"
    )
    after = before.replace(
        "    cost_cpu_s:", "    overrides:\n      cma: [sigma0=0.3]\n    cost_cpu_s:"
    )
    spec, out = write(tmp_path, before), tmp_path / "report"
    draft = ["--resamples", "100", "--summary", str(tmp_path / "BENCHMARK.md")]
    first, second = tmp_path / "first", tmp_path / "second"
    harness_cli("benchmark", "run", "--file", str(spec), "--runs-dir", str(first))
    harness_cli("benchmark", "report", "--file", str(spec), "--runs-dir", str(first),
                "--out", str(out), *draft)  # fmt: skip
    archive = out / "cartpole" / "runs.tar.xz"

    def archived() -> list[tuple[str, float]]:
        return sorted(
            (h.config["algo"], h.config["params"].get("sigma0", -1.0))
            for h in rundir.scan_runs(extract_run_archive(archive))
        )

    assert [a for a, _ in archived()] == ["cma", "optimes"]
    old_sigma = dict(archived())["cma"]
    spec.write_text(textwrap.dedent(after))
    harness_cli("benchmark", "run", "--file", str(spec), "--runs-dir", str(second),
                "--algo", "optimes", "--archive-dir", str(out))  # fmt: skip
    harness_cli("benchmark", "report", "--file", str(spec), "--runs-dir", str(second),
                "--out", str(out), *draft)  # fmt: skip
    assert archived() == [("cma", old_sigma), ("optimes", -1.0)]  # kept, not dropped
    assert "the archived runs no longer match their cells" in (out / "report.md").read_text()
    harness_cli("benchmark", "run", "--file", str(spec), "--runs-dir", str(second),
                "--archive-dir", str(out))  # fmt: skip
    harness_cli("benchmark", "report", "--file", str(spec), "--runs-dir", str(second),
                "--out", str(out), *draft)  # fmt: skip
    assert archived() == [("cma", 0.3), ("optimes", -1.0)]  # the rerun replaced it


def test_a_checkpoint_too_large_to_commit_is_not_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An off-policy run's checkpoint holds its replay buffer (hundreds of MB): the report
    folder does not carry it, and says so."""
    from harness.benchmark import carry

    spec = write(tmp_path, CARRIED)
    runs, out = tmp_path / "runs", tmp_path / "report"
    harness_cli(
        "benchmark", "run", "--file", str(spec), "--runs-dir", str(runs), "--archive-dir",
        str(out), env={"HARNESS_INTERRUPT_AT_STEP": "3"}, check=False,
    )  # fmt: skip
    bench = load_benchmark(spec)
    (label,) = [cell.label for cell in bench.sweep.cells]
    monkeypatch.setattr(carry, "CARRY_MAX_BYTES", 10)
    carry.write_unfinished(bench, runs, out, {label})
    assert not (out / "cartpole" / carry.UNFINISHED).exists()
    assert "is not carried: its checkpoint" in capsys.readouterr().err
