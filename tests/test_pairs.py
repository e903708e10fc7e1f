"""Equal-compute pairs (harness.pairing): two real runs side by side, the follower stopping
at the CPU-seconds its lead used, resumed together; and how sweeps and the benchmark
declare them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.benchmark.spec import BenchmarkError, load_benchmark
from harness.checkpoint import INTERRUPT_ENV
from harness.sweep import SweepError, load_sweep, run_sweep
from harness.sweep.identity import same_cell
from tests.conftest import ROOT


def pair_sweep(folder: Path, extra: str = "") -> Path:
    path = folder / "pairs.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: pairs
        grid:
          algo: [ppo, optimes]
          env: [CartPole]
          seed: [0]
        budget:
          timesteps: 6000
        backend: inline
        pair_with: ppo
        set: [eval_every_timesteps=3000, eval_episodes=1]
        overrides:
          optimes: [population=10]
        """)
        + extra
    )
    return path


def summary_of(runs: Path, run_id: str | None) -> dict[str, Any]:
    assert run_id is not None
    return dict(json.loads((runs / run_id / "summary.json").read_text()))


def test_a_sweep_pairs_each_other_cell_with_a_run_of_its_lead(tmp_path: Path) -> None:
    sweep = load_sweep(pair_sweep(tmp_path))
    lead, follower = (cell.config for cell in sweep.cells)
    assert sweep.pairs == [(0, 1)]
    assert (lead["algo"], lead["paired_with"], lead["timesteps"]) == ("ppo", "optimes", 6000)
    assert (follower["algo"], follower["paired_with"], follower["timesteps"]) == (
        "optimes",
        "ppo",
        None,
    )
    with pytest.raises(SweepError, match=r"pair_with must be an algorithm of grid\.algo"):
        load_sweep(_rewrite(pair_sweep(tmp_path), "pair_with: ppo", "pair_with: a2c"))


def _rewrite(path: Path, old: str, new: str) -> Path:
    path.write_text(path.read_text().replace(old, new))
    return path


@pytest.mark.slow
def test_a_pair_runs_side_by_side_and_resumes_as_a_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = load_sweep(pair_sweep(tmp_path))
    runs = tmp_path / "runs"
    monkeypatch.setenv(INTERRUPT_ENV, "2")  # both sides stop at their second step
    first = run_sweep(sweep, runs, progress=False)
    assert [o.status for o in first.outcomes] == ["INTERRUPTED", "INTERRUPTED"]
    monkeypatch.delenv(INTERRUPT_ENV)
    alone = subprocess.run(
        [sys.executable, "-m", "harness.cli", "resume", str(runs / str(first.outcomes[1].run_id))],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )  # a follower has no budget but its partner's
    assert alone.returncode == 2 and "resumes with its partner" in alone.stderr
    second = run_sweep(sweep, runs, progress=False)
    assert [(o.action, o.status) for o in second.outcomes] == [("resumed", "COMPLETED")] * 2
    assert [o.run_id for o in second.outcomes] == [o.run_id for o in first.outcomes]
    lead_run, follower_run = (o.run_id for o in second.outcomes)
    lead, follower = summary_of(runs, lead_run), summary_of(runs, follower_run)
    assert lead["pair"] == {"role": "lead", "partner": "optimes"}
    pair = follower["pair"]
    assert (pair["role"], pair["partner"], pair["partner_run"]) == ("follower", "ppo", lead_run)
    # the limit is the lead's whole CPU-seconds, both processes' included
    assert pair["cpu_limit"] == lead["cpu_seconds"]
    assert follower["stop_reason"].startswith("CPU limit")
    # it stopped at its first step past the limit, and never ran ahead of its lead
    assert lead["cpu_seconds"] <= follower["cpu_seconds"] <= lead["cpu_seconds"] + 2.0
    assert follower["time_breakdown"]["pair_wait"] >= 0.0
    cores = [s["machine_load"]["cpu_affinity"] for s in (lead, follower)]
    if len(os.sched_getaffinity(0)) >= 2:
        assert len(cores[0]) == len(cores[1]) == 1 and cores[0] != cores[1]


def test_half_a_pair_done_is_not_done(tmp_path: Path) -> None:
    sweep = load_sweep(_rewrite(pair_sweep(tmp_path), "seed: [0]", "seed: [0, 1]"))
    assert sweep.pairs == [(0, 1), (2, 3)]
    assert sweep.whole_pairs({0, 1, 2}) == {0, 1}
    assert sweep.whole_pairs({1, 3}) == set()


@pytest.mark.slow
def test_a_pair_whose_follower_did_not_complete_runs_again_as_a_pair(tmp_path: Path) -> None:
    sweep = load_sweep(pair_sweep(tmp_path))
    runs = tmp_path / "runs"
    first = run_sweep(sweep, runs, progress=False)
    assert [o.status for o in first.outcomes] == ["COMPLETED"] * 2
    follower_run = runs / str(first.outcomes[1].run_id)
    record = json.loads((follower_run / "run.json").read_text())
    (follower_run / "run.json").write_text(json.dumps({**record, "status": "FAILED"}))
    again = run_sweep(sweep, runs, progress=False)
    assert [(o.action, o.status) for o in again.outcomes] == [("ran", "COMPLETED")] * 2
    lead_run = again.outcomes[0].run_id
    assert lead_run != first.outcomes[0].run_id  # a new lead beside the new follower
    assert summary_of(runs, again.outcomes[1].run_id)["pair"]["partner_run"] == lead_run
    assert (runs / str(first.outcomes[0].run_id) / "summary.json").is_file()  # nothing lost


def test_a_paired_run_alone_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "harness.cli", "run", "--algo", "optimes"]
    command += ["--env", "CartPole", "--set", "paired_with=ppo", "--runs-dir", str(runs)]
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PAIR_FILE"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "paired_with=ppo runs only as one of a pair" in done.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_a_lead_is_not_a_grid_run_made_before_pairs() -> None:
    grid_run = {"algo": "ppo", "env": "CartPole", "seed": 0, "timesteps": 6000}
    lead = {**grid_run, "paired_with": "optimes"}
    assert not same_cell(lead, grid_run)
    assert same_cell({**grid_run, "paired_with": None}, grid_run)


BENCH = """\
name: pairbench
seeds: [100, 101]
workers: 1
tasks:
  - env: CartPole
    budget: {timesteps: 4000}
    reference: {score: 500, source: "x"}
    algos: [optimes, snes, ppo]
    cost_cpu_s: {optimes: 5, snes: 5, ppo: 20}
    equal_compute:
      against: ppo
      algos: [optimes, snes]
      paired: true
"""


def test_the_benchmark_runs_its_equal_compute_cells_as_pairs(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(BENCH)
    bench = load_benchmark(path)
    cells = {cell.index: cell for cell in bench.sweep.cells}
    assert len(bench.sweep.pairs) == 4  # two ES, two seeds
    for lead, follower in bench.sweep.pairs:
        a, b = cells[lead].config, cells[follower].config
        assert (a["algo"], a["paired_with"], a["timesteps"]) == ("ppo", b["algo"], 4000)
        assert (b["paired_with"], b["timesteps"], b["cpu_limit"]) == ("ppo", None, None)
        assert a["seed"] == b["seed"] and follower == lead + 1  # run together, listed together
        assert bench.is_equal_compute(cells[lead]) and bench.is_equal_compute(cells[follower])
        assert bench.cost_of(cells[follower]) == 20  # its lead's
    part = bench.only([], ["snes"])  # one side picks the pair
    assert {str(c.config["algo"]) for c in part.sweep.cells} == {"snes", "ppo"}
    assert sum(c.config.get("paired_with") == "snes" for c in part.sweep.cells) == 2
    path.write_text(BENCH + "      cpu_limit: 100\n")
    with pytest.raises(BenchmarkError, match="paired cells take their partner's CPU-seconds"):
        load_benchmark(path)


@pytest.mark.slow
def test_a_report_archives_a_pair_once_while_the_other_pairs_wait(tmp_path: Path) -> None:
    """The lead of a finished pair stands in for the missing lead of another pair only
    while it is not archived already: reporting the same runs twice archives each once."""
    from harness import rundir
    from tests.conftest import harness_cli

    path = tmp_path / "bench.yaml"
    path.write_text(BENCH.replace("seeds: [100, 101]", "seeds: [100]"))
    runs, out = tmp_path / "runs", tmp_path / "report"
    harness_cli("benchmark", "run", "--file", str(path), "--runs-dir", str(runs),
                "--algo", "optimes", "--no-progress")  # fmt: skip
    summary = str(tmp_path / "BENCHMARK.md")
    report = ["benchmark", "report", "--file", str(path), "--runs-dir", str(runs),
              "--out", str(out), "--resamples", "100", "--summary", summary]  # fmt: skip
    for _ in range(2):
        harness_cli(*report)
        archived = rundir.scan_runs(rundir.extract_run_archive(out / "cartpole" / "runs.tar.xz"))
        made = [
            (h.config["algo"], h.config.get("paired_with"), h.run["start_time"]) for h in archived
        ]
        assert len(made) == len(set(made)), made
        assert ("ppo", "optimes") in {(algo, partner) for algo, partner, _ in made}
