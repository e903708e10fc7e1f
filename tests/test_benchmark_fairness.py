"""The benchmark's fairness checks: sanity gates, defects found in recorded configs, the
Salimans et al. table on a small synthetic archive, equal-compute cells and provenance."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness import rundir
from harness.benchmark import answer, fairness
from harness.benchmark.carry import Unfinished, archived_runs, cost_left
from harness.benchmark.fairness import TaskScores
from harness.benchmark.report import leader_text, task_scores
from harness.benchmark.spec import BenchmarkError, Task, load_benchmark
from harness.config import build_run_config
from harness.records import load_runs
from harness.report.anchors import Anchor
from tests.conftest import ROOT

HOPPER = "Hopper-v5"


def zoo(algo: str, value: float, env: str = HOPPER) -> Anchor:
    return Anchor(env, f"rl-zoo {algo}", value, "published", "test", timesteps=1e6, algo=algo)


def gate_scores(finals: dict[str, list[float]]) -> TaskScores:
    task = Task(HOPPER, {"timesteps": 1_000_000}, 3800.0, "test", list(finals))
    rows = [
        {"algo": algo, "seed": 100 + i, "score_timesteps": v, "score_final": v, "gym_id": HOPPER}
        for algo, values in finals.items()
        for i, v in enumerate(values)
    ]
    return TaskScores(task, pd.DataFrame(rows), {"timesteps": 1e6}, 0.0)


def test_gates_fire_below_the_anchor_and_on_too_few_runs() -> None:
    scores = gate_scores(
        {
            "optimes": [2600.0, 2700.0, 2650.0, 2750.0, 2800.0],
            "ppo": [900.0, 1000.0],  # two of five runs, and below half the way to 2,410
            "a2c": [700.0, 720.0, 740.0, 760.0, 780.0],  # above half of 733 (367): passes
        }
    )
    anchors = [zoo("ppo", 2410.0), zoo("a2c", 733.0), zoo("ppo", 99999.0, env="Ant-v5")]
    gates = fairness.task_gates(scores, anchors, planned=5)
    ppo, a2c, es = gates["ppo"], gates["a2c"], gates["optimes"]
    assert ppo.anchor is not None and ppo.anchor.value == 2410.0  # not the Ant-v5 figure
    assert ppo.floor == pytest.approx(1205.0)
    assert ppo.below_anchor and ppo.few_runs and ppo.flagged
    assert (
        ppo.text()
        == "ppo on Hopper-v5: n = 2, 950 against the zoo's 2,410 at 1M — below its anchor"
    )
    assert not a2c.flagged and a2c.anchor_text() == "740 against the zoo's 733 at 1M"
    assert es.anchor is None and not es.flagged  # ES cells: no anchor, all runs

    # A cell of five runs just below the floor is flagged, one just above is not.
    low = gate_scores({"ppo": [1200.0] * 5})
    assert fairness.task_gates(low, anchors, 5)["ppo"].flagged
    high = gate_scores({"ppo": [1210.0] * 5})
    assert not fairness.task_gates(high, anchors, 5)["ppo"].flagged
    # An ES cell short of runs is flagged too.
    short = gate_scores({"optimes": [1.0, 2.0, 3.0]})
    assert (
        fairness.task_gates(short, anchors, 5)["optimes"]
        .text()
        .startswith("optimes on Hopper-v5: n = 3, 2.0 (no published anchor)")
    )

    # The leader row names a flagged cell instead of ranking it.
    flagged = {a: g.text() for a, g in gates.items() if g.flagged}
    row = leader_text(scores, "timesteps", flagged)
    assert row.startswith("**optimes** 2700.0 (n=5) over a2c 740.0; difference 1960.0 [")
    assert "(not ranked: ppo on Hopper-v5: n = 2, 950 against the zoo's 2,410" in row
    assert "**ppo**" not in leader_text(
        gate_scores({"ppo": [5000.0] * 2, "snes": [1.0] * 5}), "final", {"ppo": "x"}
    )


# -- synthetic run directories and archives ------------------------------------------------------

#: The run knobs a run records besides those below (a config as ``harness run`` writes it), so
#: that the readers' record check takes these runs as runs.
RECORDED_KNOBS = {
    key: value
    for key, value in build_run_config(
        {"algo": "optimes", "env": HOPPER, "seed": 100}
    ).config.items()
    if key not in ("policy", "params")
}


def write_run(
    folder: Path,
    *,
    algo: str,
    seed: int,
    evals: list[tuple[float, float, float]],
    policy: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    env: str = HOPPER,
    reward_transform: str = "none",
    cpu_limit: float | None = None,
) -> Path:
    """A completed run directory as the runner writes one, evaluated at ``evals``
    (timesteps, CPU-seconds, return): one metrics row per evaluation. ``folder``'s name is
    a run id (a number, as Sacred's)."""
    folder.mkdir(parents=True)
    steps = list(range(1, len(evals) + 1))
    series = {
        "timesteps": [e[0] for e in evals],
        "cpu_seconds": [e[1] for e in evals],
        "eval_return_mean": [e[2] for e in evals],
        "episode_length_mean": [1000.0] * len(evals),
    }
    metrics = {k: {"steps": steps, "values": v} for k, v in series.items()}
    config = {
        **RECORDED_KNOBS,
        "algo": algo,
        "env": env,
        "seed": seed,
        "episodes": 1,
        "workers": 1,
        "timesteps": None if cpu_limit else int(evals[-1][0]),
        "cpu_limit": cpu_limit,
        "reward_transform": reward_transform,
        "policy": {
            "activation": "tanh",
            "discretize": 0,
            **(policy or {"kind": "linear", "hidden_sizes": [64, 64], "activation": "tanh"}),
        },
        "params": params or {},
    }
    result = {"env": env, "cpu_seconds": evals[-1][1], "timesteps": evals[-1][0]}
    files = {
        rundir.CONFIG: config,
        rundir.RUN: {
            "status": "COMPLETED",
            "start_time": "2026-01-01T00:00:00.000000",
            "result": result,
            "host": {"cpu_count": 2},
        },
        rundir.METRICS: metrics,
        rundir.SUMMARY: {"cpu_seconds": evals[-1][1], **(spec or {}).get("summary", {})},
        rundir.POLICY_SPEC: {k: v for k, v in (spec or {}).items() if k != "summary"},
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data))
    return folder


def archive_of(tmp_path: Path, runs: list[Path]) -> Path:
    archive = tmp_path / "runs.tar.xz"
    rundir.write_run_archive(runs, archive)
    return archive


LINEAR_ES = {
    "kind": "linear",
    "hidden_sizes": [],
    "activation": "tanh",
    "obs_dim": 11,
    "action_kind": "box",
    "action_dim": 3,
    "action_low": [-1.0] * 3,
    "action_high": [1.0] * 3,
}


def test_the_es_policy_network_is_detected_from_the_recorded_rl_net(tmp_path: Path) -> None:
    def sb3(pi: list[int], count: int) -> dict[str, Any]:
        return {
            "format": "stable-baselines3",
            "net_arch": {"pi": pi, "vf": pi},
            "num_params": count,
        }

    curve = [(5e5, 100.0, 10.0), (1e6, 200.0, 20.0)]
    runs = [
        # the ES policy (linear) where SB3's default 64-64 belongs: flagged
        write_run(tmp_path / "1", algo="a2c", seed=100, evals=curve, spec=sb3([], 132)),
        write_run(tmp_path / "2", algo="a2c", seed=101, evals=curve, spec=sb3([], 132)),
        # its own 256-256 (the zoo's): not flagged
        write_run(
            tmp_path / "3",
            algo="ppo",
            seed=100,
            evals=curve,
            params={"net_arch": [256, 256]},
            spec=sb3([256, 256], 138759),
        ),
        # a 16-unit net that the config asked for, equal to a 16-unit ES MLP: not flagged
        write_run(
            tmp_path / "4",
            algo="ppo",
            seed=101,
            evals=curve,
            policy={"kind": "mlp", "hidden_sizes": [16]},
            params={"net_arch": [16]},
            spec=sb3([16], 400),
        ),
        # the ES LSTM section's 16 units, no net_arch asked for: flagged
        write_run(
            tmp_path / "5",
            algo="recurrent-ppo",
            seed=100,
            evals=curve,
            policy={"kind": "lstm", "hidden_sizes": [16]},
            spec=sb3([16], 500),
        ),
        write_run(tmp_path / "6", algo="optimes", seed=100, evals=curve, spec=LINEAR_ES),
    ]
    table = load_runs([archive_of(tmp_path, runs)]).select(("COMPLETED",))
    facts = fairness.run_facts(table)
    assert facts.loc[facts["algo"] == "a2c", "rl_net"].tolist() == [[], []]
    assert facts.loc[facts["algo"] == "optimes", "n_params"].tolist() == [36.0]  # 11x3 + 3
    found = {d.algo: d for d in fairness.es_network_defects(HOPPER, facts)}
    assert sorted(found) == ["a2c", "recurrent-ppo"]
    assert found["a2c"].short == "ran the ES policy network (linear); rerun pending"
    assert "instead of SB3's default 64-64" in found["a2c"].text and found["a2c"].seeds == (
        100,
        101,
    )
    assert found["recurrent-ppo"].short == "ran the ES policy network (16-unit); rerun pending"
    assert "(seeds" not in found["a2c"].text  # every run of the cell had it


def ramp(top: float, reach: float, cpu_per_step: float) -> list[tuple[float, float, float]]:
    """Evaluations every 100k to 1M: the return rising linearly to ``top`` at ``reach``."""
    return [(t, t * cpu_per_step, top * min(t / reach, 1.0)) for t in np.arange(1, 11) * 100_000.0]


def synthetic_task(
    tmp_path: Path, es_never: int = 0, continued: bool = False
) -> fairness.TaskFacts:
    """A task of optimes (cheap, 100 at 0.5M) and ppo (costly, 100 at 1M), three seeds each.
    ``es_never``: how many optimes runs stay at 0; ``continued``: each of those has an
    equal-compute run (to 1,000 CPU-s) rising 50 per 1M timesteps."""
    runs = []
    for i, seed in enumerate((100, 101, 102)):
        es = ramp(100.0, 5e5, 5e-5) if i >= es_never else ramp(0.0, 5e5, 5e-5)
        if continued and i < es_never:
            rising = [(t * 1e6, 15.0 * t, 50.0 * t) for t in range(1, 21)]
            runs.append(
                write_run(
                    tmp_path / f"{10 + i}",
                    algo="optimes",
                    seed=seed,
                    cpu_limit=1000.0,
                    spec=LINEAR_ES,
                    evals=rising,
                )
            )
        runs.append(
            write_run(
                tmp_path / f"{2 * i + 1}", algo="optimes", seed=seed, evals=es, spec=LINEAR_ES
            )
        )
        runs.append(
            write_run(
                tmp_path / f"{2 * i + 2}", algo="ppo", seed=seed, evals=ramp(100.0, 1e6, 1e-3)
            )
        )
    task = Task(HOPPER, {"timesteps": 1_000_000}, 100.0, "test", ["optimes", "ppo"])
    scores = task_scores(task, archive_of(tmp_path, runs), random_score=0.0)
    assert scores is not None
    return fairness.task_facts(scores, [], fairness.Provenance({}), planned_runs=3)


def test_the_salimans_table_measures_time_to_shares_of_the_best_rl_score(tmp_path: Path) -> None:
    facts = synthetic_task(tmp_path)
    assert facts.best == {"es": "optimes", "rl": "ppo"}
    ppo = facts.scores.runs[facts.scores.runs["algo"] == "ppo"]
    # the final score is the mean of the last three evaluations: (80 + 90 + 100) / 3
    assert ppo["score_final"].tolist() == pytest.approx([90.0] * 3)
    assert ppo["score_timesteps"].tolist() == pytest.approx([90.0] * 3)
    rows = fairness.time_to_share(facts)
    assert [row.level for row in rows] == pytest.approx([22.5, 45.0, 67.5])
    # ppo (10 per 100k) first reaches them at 300k, 500k, 700k; optimes (20 per 100k) at
    # 200k, 300k, 400k; CPU: 1 CPU-s per 1,000 timesteps against 1 per 20,000.
    assert [row.rl.timesteps for row in rows] == [3e5, 5e5, 7e5]
    assert [row.es.timesteps for row in rows] == [2e5, 3e5, 4e5]
    assert [row.ratio("timesteps") for row in rows] == pytest.approx([2 / 3, 3 / 5, 4 / 7])
    assert [row.ratio("cpu_seconds") for row in rows] == pytest.approx(
        [10 / 300, 15 / 500, 20 / 700]
    )
    assert all(row.es.reached == row.es.n == 3 for row in rows)
    table = answer.salimans_section([facts]).tables[0][1]
    assert table["ES/RL timesteps"].tolist() == ["0.67", "0.60", "0.57"]
    assert table["ES timesteps"].tolist() == ["200k (3/3)", "300k (3/3)", "400k (3/3)"]

    sentence = answer.answer_sentence(facts, {"optimes": 1e6, "ppo": 1e6})
    assert sentence.startswith(
        "**Hopper-v5**, optimes (best ES) against ppo (best RL, on-policy RL only): at equal "
        "timesteps (1M) "
        "optimes leads, optimes 100 [100, 100] against ppo 90.0 [90.0, 90.0], difference 10.0 "
    )
    # each side's cost for its score: off-policy RL buys samples with compute
    assert "(CPU-s a run to its budget: optimes 50, ppo 1,000);" in sentence
    # ppo first evaluates at 100 CPU-s: no score at 50 (never one extrapolated), and the
    # sentence says why rather than "no scores yet"
    assert "(50 CPU-s, ppo 10% into its training) not compared: ppo had no evaluation " in sentence
    # At equal compute at ppo's full budget (1,000 CPU-s) optimes (50 CPU-s a run) has no
    # scores: three cells of 1,000 CPU-seconds are missing.
    point = fairness.equal_compute_point(facts)
    assert point is not None and point.cpu_seconds == pytest.approx(1000.0)
    assert point.es == ["optimes"] and point.missing == {"optimes": 3}
    assert point.cpu_hours_missing == pytest.approx(3 * 1000 / 3600)
    assert "not run yet: 3 cells, ~0.8 CPU-hours (not planned: optimes with --cpu-limit 1,000)" in (
        answer.full_budget_text(point, facts, cell=True)
    )


def test_an_equal_compute_lead_of_one_run_does_not_hide_the_pair_with_its_runs(
    tmp_path: Path,
) -> None:
    """snes has one run at equal compute, above everything; optimes has five, below ppo:
    the cell and the sentence give snes's (inconclusive) and optimes's (ppo leads)."""
    facts = synthetic_task(tmp_path)
    point = fairness.EqualComputePoint(
        rl="ppo",
        cpu_seconds=1000.0,
        es=["optimes", "snes"],
        scores={"optimes": np.array([60.0, 61.0, 62.0, 63.0, 64.0]), "snes": np.array([150.0])},
        source={"optimes": "cells", "snes": "cells"},
        missing={"snes": 4},
        rl_scores=np.array([88.0, 89.0, 90.0, 91.0, 92.0]),
    )
    cell = answer.full_budget_text(point, facts, cell=True)
    assert cell.startswith(
        "inconclusive (n < 3): **snes** 150.0 (n=1) over ppo 90.0; **ppo** 90.0 (n=5) over "
        "optimes 62.0; difference 28.0 ["
    ), cell
    sentence = answer.full_budget_text(point, facts, cell=False)
    assert sentence.startswith("inconclusive, snes 150 (n=1) against ppo 90.0 [")
    assert "; ppo leads, optimes 62.0 [" in sentence and "not run yet: 4 cells" in sentence
    # with its runs complete, the best ES alone
    point.scores["snes"] = np.array([150.0, 151.0, 152.0, 153.0, 154.0])
    point.missing = {}
    assert "optimes" not in answer.full_budget_text(point, facts, cell=True)


def test_a_median_run_that_never_gets_there_makes_the_share_never(tmp_path: Path) -> None:
    facts = synthetic_task(tmp_path / "two", es_never=2)  # two of three optimes runs stay at 0
    rows = fairness.time_to_share(facts)
    assert all(row.es.reached == 1 and math.isinf(row.es.timesteps) for row in rows)
    assert all(math.isinf(row.ratio("timesteps")) for row in rows)
    assert (
        answer.salimans_section([facts]).tables[0][1]["ES timesteps"].tolist()
        == ["not within its budget (1/3)"] * 3
    )
    one = synthetic_task(tmp_path / "one", es_never=1)  # the median run gets there
    assert [row.es.timesteps for row in fairness.time_to_share(one)] == [2e5, 3e5, 4e5]


def test_a_run_below_a_level_is_continued_by_its_equal_compute_run(tmp_path: Path) -> None:
    """Two of three optimes grid runs stop at 1M below every level; their seeds' equal-compute
    runs, trained on to 1,000 CPU-s, cross 22.5 and 45 at 1M and 67.5 at 2M."""
    facts = synthetic_task(tmp_path, es_never=2, continued=True)
    rows = fairness.time_to_share(facts)
    assert [(row.es.reached, row.es.n, row.es.extended) for row in rows] == [(3, 3, 2)] * 3
    assert [row.es.timesteps for row in rows] == [1e6, 1e6, 2e6]
    assert [row.es.cpu_seconds for row in rows] == [15.0, 15.0, 30.0]
    table = answer.salimans_section([facts]).tables[0][1]
    assert table["ES timesteps"].tolist()[2] == "2M (3/3, 2 in equal-compute runs)"


def test_equal_compute_runs_are_scored_apart_from_the_grid(tmp_path: Path) -> None:
    runs = [
        write_run(
            tmp_path / "1", algo="optimes", seed=100, evals=ramp(100.0, 5e5, 5e-5), spec=LINEAR_ES
        ),
        write_run(tmp_path / "2", algo="ppo", seed=100, evals=ramp(100.0, 1e6, 1e-3)),
        # optimes with a CPU limit of ppo's 1,000 CPU-seconds: 20M timesteps, at 300 at the end
        write_run(
            tmp_path / "3",
            algo="optimes",
            seed=100,
            cpu_limit=1000.0,
            spec=LINEAR_ES,
            evals=[(t * 1e6, t * 50.0, 15.0 * t) for t in range(1, 21)],
        ),
    ]
    task = Task(HOPPER, {"timesteps": 1_000_000}, 100.0, "test", ["optimes", "ppo"])
    scores = task_scores(task, archive_of(tmp_path, runs), random_score=0.0)
    assert scores is not None and sorted(scores.runs["algo"]) == ["optimes", "ppo"]  # the grid
    facts = fairness.task_facts(scores, [], fairness.Provenance({}), planned_runs=1)
    point = fairness.equal_compute_point(facts)
    assert point is not None and point.source == {"optimes": "cells"}
    assert point.scores["optimes"].tolist() == pytest.approx([(270 + 285 + 300) / 3])
    assert point.cells_missing == 0
    text = answer.full_budget_text(point, facts, cell=True)
    assert text.startswith("inconclusive (n < 3): **optimes** 285.0 (n=1) over ppo 90.0")

    # ppo far below its anchor: the cell keeps both values and ranks neither
    gated = fairness.task_facts(scores, [zoo("ppo", 2410.0)], fairness.Provenance({}), 1)
    point = fairness.equal_compute_point(gated)
    assert answer.full_budget_text(point, gated, cell=True) == (
        "optimes 285 (n=1) against ppo 90.0 (n=1) (not ranked: ppo on Hopper-v5: 90.0 against "
        "the zoo's 2,410 at 1M — below its anchor)"
    )


# -- configs against published settings ---------------------------------------------------------


def facts_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = {
        "family": "es",
        "obs_norm": True,
        "obs_fraction": 1.0,
        "reward_transform": "none",
        "generations": 200.0,
        "timesteps": 1e6,
        "episode_length": 1000.0,
        "episodes": 1,
        "population": 16,
        "cpu_limit": None,
        "params": {},
        "seed": 100,
    }
    return pd.DataFrame([{**base, **row} for row in rows])


def test_settings_are_compared_with_the_published_ones_and_defects_are_named() -> None:
    ars = {
        "optimes": {
            "name": "ARS V2-t at its published HalfCheetah settings",
            "source": "Mania et al. 2018",
            "params": {"population": 64, "top_directions": 4, "sigma": 0.03},
            "reward_transform": "none",
        }
    }
    frame = facts_frame(
        [
            {
                "algo": "optimes",
                "params": {"population": 16, "top_directions": 0, "sigma": 0.03},
                "obs_fraction": 0.01,
                "generations": 63.0,
            },
            {"algo": "cma", "obs_norm": None, "population": 0, "generations": 56.0},
            {"algo": "pgpe", "population": 100, "generations": 10.0, "reward_transform": "shift:1"},
        ]
    )
    found, matching = fairness.settings_defects("HalfCheetah-v5", frame, ars)
    assert matching == [] and len(found) == 1
    assert found[0].text.startswith(
        "optimes on HalfCheetah-v5 is not ARS V2-t at its published HalfCheetah settings: "
        "recorded population 16 against 64; top_directions 0 (every direction) against 4 "
    )
    same = facts_frame(
        [
            {
                "algo": "optimes",
                "params": {"population": 64, "top_directions": 4, "sigma": 0.030000001},
            }
        ]
    )
    assert fairness.settings_defects("HalfCheetah-v5", same, ars)[1][0].startswith(
        "optimes on HalfCheetah-v5 matches ARS V2-t"
    )
    obs = {d.algo: d.short for d in fairness.obs_defects("HalfCheetah-v5", frame, mujoco=True)}
    assert obs == {
        "cma": "no observation normalisation",
        "optimes": "observation statistics from 1% of rollouts",
    }
    assert fairness.obs_defects("PendulumPO", frame, mujoco=False) == []
    generations = {d.algo: d.text for d in fairness.generation_defects("HalfCheetah-v5", frame)}
    assert generations["pgpe"] == (
        "pgpe on HalfCheetah-v5: 10 generations at 1M timesteps "
        "(1M / (population 100 x 1 episode x 1,000 steps a mean episode))"
    )
    assert "its default population, about 18" in generations["cma"]  # 1M / (56 x 1,000)
    assert [d.algo for d in fairness.reward_defects("HalfCheetah-v5", frame)] == ["pgpe"]
    # A run whose cell the archive lacks (its settings changed since) is stale.
    stale = fairness.stale_defects("HalfCheetah-v5", frame, {("cma", 100), ("ppo", 100)})
    assert [(d.algo, d.seeds) for d in stale] == [("cma", (100,))]


# -- the shipped files ---------------------------------------------------------------------------


def test_every_benchmark_cell_has_its_provenance() -> None:
    bench = load_benchmark(ROOT / "experiments" / "benchmark.yaml")
    provenance = fairness.load_provenance()
    assert fairness.provenance_gaps(bench, provenance) == ([], [])
    for task in bench.tasks:
        for algo in task.algos:
            entry = provenance.of(task.env, algo)
            assert all(entry[k] for k in fairness.PROVENANCE_FIELDS), (task.env, algo)
    with_gap = fairness.Provenance({k: dict(v) for k, v in provenance.cells.items()})
    del with_gap.cells["Hopper-v5"]["ppo"]
    assert fairness.provenance_gaps(bench, with_gap)[0] == ["Hopper-v5 ppo"]


def test_a_provenance_entry_without_a_field_names_it(tmp_path: Path) -> None:
    path = tmp_path / "provenance.yaml"
    path.write_text("cells:\n  Hopper-v5:\n    ppo: {by: zoo, task: Hopper-v3, seeds: zoo's}\n")
    with pytest.raises(fairness.ProvenanceError, match=r"cells.Hopper-v5.ppo lacks source"):
        fairness.load_provenance(path)


def test_the_shipped_equal_compute_limits_are_the_rl_entries_medians() -> None:
    """Each task's equal-compute cpu_limit is its RL entry's median CPU-seconds per run in
    the committed archive, to within 5% (the page warns where they drift further)."""
    bench = load_benchmark(ROOT / "experiments" / "benchmark.yaml")
    planned = [
        task
        for task in bench.tasks
        if task.equal_compute is not None and not task.equal_compute.paired  # a pair's is live
    ]
    assert planned
    for task in planned:
        assert task.equal_compute is not None
        archive = ROOT / "reports" / "benchmark" / task.env.lower() / "runs.tar.xz"
        cpu = [
            float(rundir.read_json(h.path / rundir.SUMMARY)["cpu_seconds"])
            for h in archived_runs(archive)
            if h.status == "COMPLETED" and h.config["algo"] == task.equal_compute.against
        ]
        assert cpu, task.env
        assert task.equal_compute.cpu_limit == pytest.approx(float(np.median(cpu)), rel=0.05)


EQUAL = """\
name: bench-equal
seeds: [100, 101]
tasks:
  - env: CartPole
    budget: {timesteps: 3000}
    reference: {score: 475, source: test}
    algos: [optimes, cma, ppo]
    set: [eval_every_timesteps=1000]
    cost_cpu_s: {optimes: 5, cma: 5, ppo: 20}
    equal_compute: {against: ppo, algos: [optimes], cpu_limit: 12, set: [eval_every_timesteps=2000]}
"""


def test_equal_compute_cells_are_planned_costed_and_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(EQUAL))
    bench = load_benchmark(path)
    extra = [c for c in bench.sweep.cells if bench.is_equal_compute(c)]
    assert len(bench.sweep.cells) == 3 * 2 + 2 and len(extra) == 2
    assert [c.label for c in extra] == [
        "optimes CartPole seed=100 episodes=1 workers=1 cpu_limit=12",
        "optimes CartPole seed=101 episodes=1 workers=1 cpu_limit=12",
    ]
    assert all(c.config["cpu_limit"] == 12.0 and c.config["timesteps"] is None for c in extra)
    assert all(c.config["eval_every_timesteps"] == 2000 for c in extra)
    assert [bench.cost_of(c) for c in bench.sweep.cells] == [5, 5, 5, 5, 12, 12, 20, 20]
    assert bench.timesteps_of(bench.tasks[0]) == dict.fromkeys(["optimes", "cma", "ppo"], 3000.0)
    missing = {"CartPole": [c.label for c in bench.sweep.cells]}
    grid, equal = fairness.split_missing(bench, missing)
    assert len(grid["CartPole"]) == 6 and equal == {"CartPole": [c.label for c in extra]}

    for change, message in (
        ("against: optimes", "against must be an RL algorithm of the task"),
        ("algos: [ppo]", "algos must be ES algorithms of the task, got ppo"),
        ("algos: [pgpe]", "algos must be ES algorithms of the task, got pgpe"),
        ("cpu_limit: 0", "cpu_limit must be positive CPU-seconds"),
        ("budget: 5", "unknown key tasks[0].equal_compute.budget"),
    ):
        key = change.split(":")[0]
        text = EQUAL.replace(
            "against: ppo, algos: [optimes], cpu_limit: 12",
            {
                "against": "against: optimes, algos: [optimes], cpu_limit: 12",
                "algos": f"against: ppo, {change}, cpu_limit: 12",
                "cpu_limit": "against: ppo, algos: [optimes], cpu_limit: 0",
                "budget": "against: ppo, algos: [optimes], cpu_limit: 12, budget: 5",
            }[key],
        )
        path.write_text(textwrap.dedent(text))
        with pytest.raises(BenchmarkError, match=message.replace("[", r"\[")):
            load_benchmark(path)


def test_an_unfinished_cell_is_costed_for_what_it_has_left(tmp_path: Path) -> None:
    """A run to a timesteps budget has the share of timesteps it has left; a run to a CPU
    limit, the CPU-seconds its meter has not read (not its whole limit again)."""
    path = tmp_path / "bench.yaml"
    path.write_text(textwrap.dedent(EQUAL))
    bench = load_benchmark(path)
    grid = next(c for c in bench.sweep.cells if not bench.is_equal_compute(c))
    limited = next(c for c in bench.sweep.cells if bench.is_equal_compute(c))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / rundir.METRICS).write_text(
        json.dumps(
            {
                "timesteps": {"steps": [1, 2], "values": [500.0, 1000.0]},
                "cpu_seconds": {"steps": [1, 2], "values": [2.0, 9.0]},
            }
        )
    )
    assert cost_left(grid, 5.0, None) == 5.0
    assert cost_left(grid, 5.0, Unfinished(grid, run_dir, 1500.0)) == pytest.approx(2.5)
    assert cost_left(limited, 12.0, Unfinished(limited, run_dir, 1000.0)) == pytest.approx(3.0)
    assert cost_left(limited, 8.0, Unfinished(limited, run_dir, 1000.0)) == 0.0
    (run_dir / rundir.METRICS).write_text("{}")  # no meter reading yet: the whole limit
    assert cost_left(limited, 12.0, Unfinished(limited, run_dir, 0.0)) == 12.0


def test_the_family_aggregate_leaves_out_a_task_whose_pick_is_below_its_sanity_gate(
    tmp_path: Path,
) -> None:
    facts = synthetic_task(tmp_path)

    def section() -> str:
        return answer.family_section(
            [facts],
            tmp_path,
            10,
            "",
            lambda matrix, out, name, reps: (pd.DataFrame(), ["a.png", "b.png"]),
            lambda *args: pd.DataFrame(),
        ).paragraphs[0]

    assert "Hopper-v5: optimes against ppo. " in section()
    # ppo with fewer runs than the benchmark has seeds fails its gate: the RL family's best
    # is not to be trusted there, so the task has no verdict and stays out, named
    facts.gates["ppo"] = dataclasses.replace(facts.gates["ppo"], planned=5)
    assert "Left out: Hopper-v5 (ppo below its sanity gate)." in section()
    assert "optimes against ppo" not in section()


def test_a_leader_is_called_by_the_interval_of_the_difference() -> None:
    """Means 12 and 10 at n = 5: their own 95% intervals overlap ([10.8, 13.2] and
    [8.8, 11.2]) but the interval of the difference lies above 0, so "a" leads, and the
    call gives the difference; shifted closer, the difference spans 0 and nobody leads."""
    apart = answer.compare(
        "a", np.array([10.0, 11, 12, 13, 14]), "b", np.array([8.0, 9, 10, 11, 12])
    )
    assert apart is not None and apart.a.mean_low < apart.b.mean_high
    assert apart.conclusive
    assert answer.cell_text(apart) == "**a** 12.0 (n=5) over b 10.0; difference 2.0 [0.4, 3.8]"
    close = answer.compare(
        "a", np.array([10.0, 11, 12, 13, 14]), "b", np.array([10.0, 11, 12, 13, 13])
    )
    assert close is not None and not close.conclusive
    assert answer.cell_text(close).startswith(
        "inconclusive: **a** 12.0 (n=5) over b 11.8; difference 0.2 ["
    )
    assert answer.cell_text(close).endswith("] spans 0")


def test_settings_chosen_on_held_out_seeds_are_named() -> None:
    entry = {"by": "x", "task": "x", "source": "x"}
    provenance = fairness.Provenance(
        {
            "Lander": {
                "snes": {**entry, "seeds": "0, 1; shipped after it beat the defaults on 100-104"},
                "ppo": {**entry, "seeds": "the zoo's"},
                "cma": {**entry, "seeds": "0, 1, 2; re-checked on 50, 51"},
            },
            "Pendulum": {"rppo": {**entry, "seeds": "the zoo's; the check on seed 100"}},
        }
    )
    assert provenance.seen_seeds(100) == ["Lander snes", "Pendulum rppo"]
    assert provenance.seen_seeds(200) == []
    shipped = fairness.load_provenance().seen_seeds(100)
    assert "LunarLanderContinuous snes" in shipped  # its speed settings were shipped on them
