"""``harness bench project``: wall-clock to a return at 1 to 1,440 cores, from real runs.

Real CartPole runs of an ES (optimes, at one and two workers, the process backend) and
of PPO, each a ``harness run`` subprocess of a few seconds that stops at a confirmed
target; then the bench (and the report section, and the validation script) on their
run directories.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from evaluation.backends import chunk_count
from harness.bench import project
from tests.conftest import ROOT, harness_cli

# Slow: every test reads runs that real `harness run` subprocesses of both families trained
# first (about 50 s of the suite); CI runs them in `make test-slow`.
pytestmark = pytest.mark.slow

TARGET = 150.0
CORES = ["1", "2", "4", "8", "16", "64", "256", "1440"]
COMMON = [
    "--env", "CartPole", "--target-return", str(TARGET), "--runs-dir",
    "--set", "eval_every_timesteps=1000", "--set", "eval_episodes=3",
    "--set", "confirm_episodes=3", "--no-progress",
]  # fmt: skip


def _run(runs: Path, *args: str) -> None:
    flags = list(COMMON)
    flags.insert(flags.index("--runs-dir") + 1, str(runs))
    harness_cli("run", *args, *flags)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project") / "runs"
    for workers in ("1", "2"):
        _run(folder, "--algo", "optimes", "--seed", "3", "--workers", workers,
             "--backend", "process", "--timesteps", "60000")  # fmt: skip
    _run(folder, "--algo", "ppo", "--seed", "3", "--timesteps", "20000")
    return folder


def _project(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "projection.json"
    done = harness_cli("bench", "project", *args, "--json", str(out))
    return json.loads(out.read_text()), done.stdout


def _algorithm(data: dict[str, Any], algo: str) -> dict[str, Any]:
    (found,) = [a for a in data["algorithms"] if a["algo"] == algo]
    return found


def test_the_runs_record_what_the_model_needs(runs: Path) -> None:
    """The ES records its longest task per generation; PPO its rollout/update split, which
    the runner books as head_update."""
    for run_dir in sorted(p for p in runs.iterdir() if p.name.isdigit()):
        config = json.loads((run_dir / "config.json").read_text())
        metrics = json.loads((run_dir / "metrics.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["target"]["confirmed"], run_dir
        if config["algo"] == "optimes":
            longest = metrics["longest_task_s"]["values"]
            work = metrics["worker_seconds"]["values"]
            assert all(0 < m <= w for m, w in zip(longest, work, strict=True))
            assert all(m >= w / 20 for m, w in zip(longest, work, strict=True))  # 20 tasks
        else:
            learn, rollout, update = (
                metrics[k]["values"] for k in ("learn_s", "rollout_s", "update_s")
            )
            for total, r, u in zip(learn, rollout, update, strict=True):
                assert r > 0 and u > 0 and r + u == pytest.approx(total)
            assert summary["time_breakdown"]["head_update"] == pytest.approx(sum(update))


def test_projection_json_monotone_es_and_rl_capped_at_n_envs(runs: Path, tmp_path: Path) -> None:
    # RL's env-process messages at no cost: with the committed machine file's cost per step, a
    # CartPole rollout measured fast enough makes one env the quickest (CI saw workers == 1),
    # and the n_envs cap under test would not be reached
    machine = tmp_path / "machine.json"
    machine.write_text(json.dumps({"dummy_steps_per_s": 1e4, "subproc_message_s": 0.0}))
    data, text = _project(
        tmp_path, str(runs), "--cores", *CORES, "--target", str(TARGET), "--machine", str(machine)
    )
    cores = [int(c) for c in CORES]
    assert data["cores"] == cores
    assert data["targets"] == {"CartPole": {"value": TARGET, "source": "--target"}}
    assert len(data["runs"]) == 3 and all(r["reached"] for r in data["runs"])

    es = _algorithm(data, "optimes")
    assert es["family"] == "es" and es["runs"] == 1  # projected from the W=1 run
    assert [m["workers"] for m in es["measured"]] == [1, 2]  # both W measured, marked apart
    times = [p["seconds"] for p in es["projection"]]
    assert all(later <= earlier for earlier, later in itertools.pairwise(times))
    workers = [p["workers"] for p in es["projection"]]
    assert all(w <= c for w, c in zip(workers, cores, strict=True)) and max(workers) <= 20
    capped = [p for p in es["projection"] if p["cores"] >= 20]
    assert len({p["seconds"] for p in capped}) == 1  # the population of 20 caps it
    for point in es["projection"]:
        terms = sum(point[t] for t in project.TERMS)
        assert terms == pytest.approx(point["seconds"])
    (es_run,) = [r for r in data["runs"] if r["algo"] == "optimes" and r["workers"] == 1]
    assert es_run["inputs"]["longest_task"] == "recorded"
    # the model at the run's own W adds its records back up to its measured time
    assert es_run["projection"][0]["seconds"] == pytest.approx(es_run["measured_s"], rel=0.1)
    assert es_run["projection"][0]["stragglers"] == 0.0
    assert es_run["projection"][1]["stragglers"] > 0.0
    assert es_run["projection"][1]["episode_work"] == pytest.approx(
        es_run["projection"][0]["episode_work"] / 2
    )

    rl = _algorithm(data, "ppo")
    (rl_run,) = [r for r in data["runs"] if r["algo"] == "ppo"]
    assert rl_run["inputs"]["n_envs"] == 8 and rl_run["inputs"]["split_recorded"]
    assert rl_run["projection"][0]["seconds"] == pytest.approx(rl_run["measured_s"], rel=0.1)
    by_cores = {p["cores"]: p for p in rl["projection"]}
    assert by_cores[8]["workers"] == 8 and by_cores[1440]["workers"] == 8
    assert by_cores[8]["seconds"] == by_cores[1440]["seconds"] < by_cores[1]["seconds"]
    assert by_cores[1440]["head_update"] == by_cores[1]["head_update"] > 0  # serial updates
    raised = {p["cores"]: p["seconds"] for p in rl_run["n_envs_raised"]}
    assert raised[1440] < raised[8] and rl_run["n_envs_raised_samples"] == "unmeasured"
    assert "at most n_envs = 8 cores" in text
    assert "sample-efficiency cost is unmeasured" in text


def test_a_target_never_reached_says_so(runs: Path, tmp_path: Path) -> None:
    data, text = _project(tmp_path, str(runs), "--target", "1e6", "--cores", "1", "16")
    assert not any(r["reached"] for r in data["runs"])
    assert all(r["projection"] == [] for r in data["runs"])
    for algo in data["algorithms"]:
        assert [p["seconds"] for p in algo["projection"]] == [None, None]
    assert text.count("never reached by the median run") == 2


def test_population_grows_only_where_it_helps_and_its_effect_is_unmeasured(
    runs: Path, tmp_path: Path
) -> None:
    """With the effect of a population on generations unmeasured, a larger population only
    costs (same generations, more episodes each): the run's own is picked at every W."""
    data, text = _project(
        tmp_path, str(runs), "--target", str(TARGET), "--cores", "1", "4", "64",
        "--population-grows", "--sample-costs",
    )  # fmt: skip
    assert data["assumptions"]["population_grows"] and data["assumptions"]["sample_costs"] is None
    es = _algorithm(data, "optimes")
    points = {p["cores"]: p for p in es["projection"]}
    assert [(p["workers"], p["population"]) for p in points.values()] == [
        (1, 20), (4, 20), (20, 20)
    ]  # fmt: skip
    assert {p["picked"] for p in points.values()} == {"the run's own"}
    assert "unmeasured" in text and "picked" in text
    # a grown population's terms: the head update in proportion, 20 episodes per worker
    costs = project.read_costs(_run_of(runs, "optimes"))
    assert isinstance(costs, project.RunCosts)
    step = project.reached_step(costs, TARGET)
    assert step is not None
    one = project.es_point(costs, step, 1, project.Assumptions(), 20)
    wide = project.es_point(costs, step, 64, project.Assumptions(), 1280)
    assert wide.terms["head_update"] == pytest.approx(64 * one.terms["head_update"])
    assert wide.terms["episode_work"] == pytest.approx(one.terms["episode_work"])


@pytest.fixture(scope="module")
def samples(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sample-cost runs: the fixture's W=1 optimes (population 20) and PPO (n_envs 8) runs,
    and real runs of each at another setting: optimes at population 40, PPO at n_envs 4."""
    import shutil

    folder = tmp_path_factory.mktemp("samples") / "runs"
    folder.mkdir()
    for name, run_dir in (("1", _run_of(runs, "optimes")), ("2", _run_of(runs, "ppo"))):
        shutil.copytree(run_dir, folder / name)
    _run(folder, "--algo", "optimes", "--seed", "4", "--set", "population=40",
         "--timesteps", "60000")  # fmt: skip
    _run(folder, "--algo", "ppo", "--seed", "4", "--set", "n_envs=4", "--timesteps", "20000")
    return folder


def test_measured_sample_costs_are_picked_where_faster_and_named(
    runs: Path, samples: Path, tmp_path: Path
) -> None:
    """With sample-cost runs at population 40 and n_envs 4, each run may use them at every
    core count, its generations (ES) and timesteps (RL) to R scaled by the measured ratio;
    the fastest setting is taken, named, and never slower than the run's own."""
    args = [str(runs), "--target", str(TARGET), "--cores", *CORES]
    fixed, _ = _project(tmp_path, *args, "--sample-costs")
    picked, text = _project(tmp_path, *args, "--sample-costs", str(samples))
    assert "sample-cost runs" in picked["assumptions"]["sample_costs"]
    assert "populations 20, 40" in text and "n_envs 4, 8" in text
    for algo, setting in (("optimes", "population"), ("ppo", "n_envs")):
        before = [p["seconds"] for p in _algorithm(fixed, algo)["projection"]]
        after = _algorithm(picked, algo)["projection"]
        assert all(a["seconds"] <= b * (1 + 1e-9) for a, b in zip(after, before, strict=True))
        for point in after:
            assert point["picked"] == "the run's own" or point["picked"].startswith(
                f"{setting} {40 if algo == 'optimes' else 4} (measured "
            ), point["picked"]
    # the measured option itself: the run's generations and timesteps scaled by the ratio
    measured: dict[str, project.SampleCost] = {}
    sample_runs, _ = project.read_samples([samples])
    for algo in ("optimes", "ppo"):
        costs = project.read_costs(_run_of(runs, algo))
        assert isinstance(costs, project.RunCosts)
        found = project.sample_costs(sample_runs, costs, TARGET)
        other = 40 if algo == "optimes" else 4
        assert sorted(found) == sorted([project.setting_of(costs), other])
        own, theirs = found[project.setting_of(costs)], found[other]
        assert own.reached == theirs.reached == 1 and own.timesteps and theirs.timesteps
        measured[algo] = theirs
        step = project.reached_step(costs, TARGET)
        assert step is not None
        ratio = theirs.timesteps / own.timesteps
        base = project.rl_point(costs, step, 4, project.Assumptions()) if algo == "ppo" else None
        if base is not None:
            scaled = project.rl_point(costs, step, 4, project.Assumptions(), 4, ratio)
            assert scaled.workers == 4 and scaled.n_envs == 4
            assert scaled.terms["head_update"] == pytest.approx(base.terms["head_update"] * ratio)
    assert measured["optimes"].generations is not None


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([], "RUNS"),
        (["{missing}"], "nope"),
        (["{empty}"], "no runs under"),
        (["{runs}", "--cores", "0"], "--cores"),
        (["{runs}", "--cores", "4", "-3"], "-3"),
        (["{runs}", "--target", "abc"], "'abc'"),
        (["{runs}", "--sample-costs", "{missing}"], "--sample-costs"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    runs: Path, tmp_path: Path, args: list[str], named: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    paths = {"runs": str(runs), "missing": str(tmp_path / "nope"), "empty": str(empty)}
    out = tmp_path / "out" / "projection.json"
    argv = [a.format(**paths) for a in args]
    done = harness_cli("bench", "project", *argv, "--json", str(out), check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error:") and named in lines[0]
    assert not out.exists() and not out.parent.exists()


def test_chunk_counts_match_the_backends_scheduling() -> None:
    for tasks in (1, 7, 40, 200, 2880):
        for workers in (1, 2, 3, 16, 64, 1440):
            assert project._chunks(tasks, workers) == chunk_count(tasks, workers, 4)


def test_es_first_from_needs_every_larger_core_count() -> None:
    cores = [1, 2, 4, 8]
    es = list(zip(cores, [10.0, 6.0, 3.0, 2.0], strict=True))
    rl = list(zip(cores, [5.0, 4.0, 4.0, 4.0], strict=True))
    assert project.es_first_from(es, rl) == 4
    assert project.es_first_from(es, list(zip(cores, [5.0, 4.0, 4.0, 1.0], strict=True))) is None
    assert project.es_first_from(list(zip(cores, [None] * 4, strict=True)), rl) is None
    assert project.lower_median([3.0, None, 1.0]) == 3.0
    assert project.lower_median([3.0, None, None]) is None


def test_the_report_draws_the_section_for_both_families(runs: Path, tmp_path: Path) -> None:
    from harness.report import projection

    out = tmp_path / "report"
    harness_cli("report", str(runs), "--out", str(out), "--map-runs", "0", "--no-replay")
    markdown = (out / "report.md").read_text()
    section = markdown.split("## Wall-clock as cores grow")[1].split("</details>")[0]
    # the runs stopped near 150, below the solved threshold: a score both families reach
    assert "CartPole: R = " in section
    # the default level: 0.9 of the way to that score, or the score itself where the way
    # lies inside the evaluation noise
    assert "0.9 of the way from the first evaluation" in section or (
        "median final score itself" in section and "evaluation noise" in section
    )
    assert "| optimes | es |" in section and "| ppo | rl |" in section
    assert (out / projection.FIGURE).stat().st_size > 10_000
    es_only = [
        p
        for p in runs.iterdir()
        if p.name.isdigit() and json.loads((p / "config.json").read_text())["algo"] == "optimes"
    ]
    assert len(es_only) == 2
    assert projection.panels(es_only) == []  # one family: no section


def test_a_verdict_against_a_gated_algorithm_says_it_is_none(runs: Path) -> None:
    from harness.report import projection

    run_dirs = [p for p in runs.iterdir() if p.name.isdigit()]
    (panel,) = projection.panels(run_dirs)
    plain = projection.verdict(panel)
    assert projection.gated_verdict(panel, {}) == plain
    assert projection.gated_verdict(panel, {"a2c": "a2c on CartPole: n = 1"}) == plain
    gate = "ppo on CartPole: n = 1, 150 (no published anchor)"
    gated = projection.gated_verdict(panel, {"ppo": gate})
    assert gated.startswith(plain.removesuffix("."))
    assert gated.endswith(f"not a verdict, as on the leader row: {gate}.")


def test_the_validation_script_predicts_w2_from_w1(runs: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "validate_projection", ROOT / "scripts" / "validate_projection.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["validate_projection"] = module
    spec.loader.exec_module(module)
    out = tmp_path / "validation.md"
    assert module.main([str(runs), "--out", str(out), "--json", str(tmp_path / "v.json")]) == 0
    (row,) = json.loads((tmp_path / "v.json").read_text())
    assert row["algo"] == "optimes" and row["steps"][0] == row["steps"][1]  # determinism
    assert math.isfinite(row["error"]) and row["measured_s"] > 0
    assert row["parts"]["stragglers"]["predicted"] > 0
    assert "| CartPole | optimes | 3 |" in out.read_text()
    # written first from the W=1 runs alone, then compared: the same prediction
    written = tmp_path / "predictions.json"
    assert module.main([str(runs), "--predict", str(written)]) == 0
    record = json.loads(written.read_text())
    assert record["model_version"] == project.MODEL_VERSION and record["commit"]
    (prediction,) = [p for p in record["predictions"] if p["algo"] == "optimes"]
    assert (prediction["base_workers"], prediction["other_workers"]) == (1, 2)
    held = tmp_path / "held.json"
    assert module.main([str(runs), "--predictions", str(written), "--json", str(held)]) == 0
    (checked,) = json.loads(held.read_text())
    assert checked["predicted_s"] == prediction["predicted_s"] == row["predicted_s"]
    assert checked["measured_s"] == row["measured_s"]
    written.write_text(json.dumps({**record, "model_version": project.MODEL_VERSION - 1}))
    assert module.main([str(runs), "--predictions", str(written)]) == 2


def test_runs_without_the_longest_task_fall_back_to_what_they_measured(
    runs: Path, tmp_path: Path
) -> None:
    """Older ES runs: the longest task from the stragglers measured at W=2, else the bound
    of the episode step cap (CartPole's 500 steps) at W=1."""
    import shutil

    sources = {}
    for run_dir in (p for p in runs.iterdir() if p.name.isdigit()):
        config = json.loads((run_dir / "config.json").read_text())
        if config["algo"] == "optimes":
            copy = tmp_path / run_dir.name
            shutil.copytree(run_dir, copy)
            metrics = json.loads((copy / "metrics.json").read_text())
            del metrics["longest_task_s"]
            (copy / "metrics.json").write_text(json.dumps(metrics))
            sources[config["workers"]] = copy
    old = {w: project.read_costs(path) for w, path in sources.items()}
    assert isinstance(old[1], project.RunCosts) and isinstance(old[2], project.RunCosts)
    assert old[1].longest_source == "bound: 1 x 500-step cap (not recorded)"
    assert old[2].longest_source.startswith("from the stragglers measured")
    step = project.reached_step(old[2], TARGET)
    assert step is not None
    at_two = project.point(old[2], step, 2, project.Assumptions())
    metrics = json.loads((sources[2] / "metrics.json").read_text())
    recorded = metrics["straggler_s"]["values"][:step]
    work = metrics["worker_seconds"]["values"][:step]
    # at the run's own W the term gives back what it measured, at least half a mean task
    # and at most half the generation's work (a loaded machine can starve one worker)
    expected = sum(max(min(r, w / 2), w / 20 / 2) for r, w in zip(recorded, work, strict=True))
    assert at_two.terms["stragglers"] == pytest.approx(expected, rel=1e-6)
    full = project.read_costs(runs / sources[1].name)
    assert isinstance(full, project.RunCosts) and full.longest_source == "recorded"
    bound = project.point(old[1], step, 2, project.Assumptions()).terms["stragglers"]
    assert bound > project.point(full, step, 2, project.Assumptions()).terms["stragglers"]


def _cpu_limited_copies(run_dir: Path, folder: Path) -> list[Path]:
    """Two copies of ``run_dir`` as runs 91 and 92 under ``folder``, recorded as trained to a
    CPU limit of 50 s, whose every evaluation is -1000 (and no target confirmed)."""
    import shutil

    copies = []
    for name in ("91", "92"):
        copy = folder / name
        shutil.copytree(run_dir, copy)
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps({**config, "cpu_limit": 50.0}))
        metrics = json.loads((copy / "metrics.json").read_text())
        evals = metrics["eval_return_mean"]
        evals["values"] = [-1000.0] * len(evals["values"])
        metrics.pop("confirm_passed", None)  # nor confirmed the target
        (copy / "metrics.json").write_text(json.dumps(metrics))
        copies.append(copy)
    return copies


def test_the_benchmark_section_projects_the_grid_runs_not_those_to_a_cpu_limit(
    runs: Path, tmp_path: Path
) -> None:
    """Runs trained to a CPU limit (the benchmark's equal-compute cells) are another
    configuration: two such ppo runs that never score leave the section as it is without
    them, and make ppo's median run "never" if they were counted."""
    from harness import rundir
    from harness.report import projection

    grid = sorted(p for p in runs.iterdir() if p.name.isdigit())
    ppo = next(p for p in grid if json.loads((p / "config.json").read_text())["algo"] == "ppo")
    limited = _cpu_limited_copies(ppo, tmp_path / "limited")

    def section(run_dirs: list[Path], name: str) -> Any:
        archive = tmp_path / f"{name}.tar.xz"
        rundir.write_run_archive(run_dirs, archive)
        out = tmp_path / name
        out.mkdir()
        return projection.benchmark_section([("CartPole", archive, (150.0, "test"))], out)

    alone = section(grid, "grid")
    with_limited = section([*grid, *limited], "both")
    assert with_limited.tables[0][1].equals(alone.tables[0][1])
    rl_row = alone.tables[0][1].set_index("")["1 core"]["best RL"]
    assert rl_row.endswith("ppo") and not rl_row.startswith("never")
    assert not projection._trained_to_budget(limited[0]) and projection._trained_to_budget(ppo)


def test_a_report_projects_each_configuration_of_an_algorithm_apart(
    runs: Path, tmp_path: Path
) -> None:
    """In a report, ppo trained to a CPU limit is its own group, so its runs that never
    score do not make the grid ppo's median run "never" (they would, counted together)."""

    from harness.report import projection

    grid = sorted(p for p in runs.iterdir() if p.name.isdigit())
    ppo = next(p for p in grid if json.loads((p / "config.json").read_text())["algo"] == "ppo")
    limited = tmp_path / "limited"
    _cpu_limited_copies(ppo, limited)

    def section_of(*folders: Path) -> str:
        out = tmp_path / f"report-{len(folders)}"
        harness_cli(
            "report", *map(str, folders), "--out", str(out), "--map-runs", "0", "--no-replay"
        )
        markdown = (out / "report.md").read_text()
        return markdown.split("## Wall-clock as cores grow")[1].split("</details>")[0]

    def row(section: str, name: str) -> list[str]:
        (found,) = [
            line for line in section.splitlines() if line.startswith(f"| CartPole | {name} |")
        ]
        return found.split(" | ")[2:]

    alone, both = section_of(runs), section_of(runs, limited)
    assert "never" not in row(alone, "ppo")
    # the groups are named by their budgets
    assert row(both, "ppo [budget=20k timesteps or return 150]") == row(
        alone, "ppo"
    )  # the same times
    assert row(both, "ppo [budget=20k timesteps or 50 CPU-s or return 150]")[1] == "0 of 2"
    assert row(both, "optimes") == row(alone, "optimes")  # its W=1 and W=2 runs still together
    # counted per algorithm, the two runs that never score take ppo's median run
    read = [projection.model.read_costs(d) for d in [*grid, *sorted(limited.iterdir())]]
    costs = [c for c in read if not isinstance(c, str)]
    _, projections, _ = projection.model.project_all(
        costs, [1], projection.default_assumptions(), target=TARGET
    )
    pooled = next(a for a in projection.model.by_algorithm(projections, [1]) if a.algo == "ppo")
    assert pooled.median[0][1] is None


def _copies(
    run_dir: Path,
    folder: Path,
    names: list[str],
    config: dict[str, Any] | None = None,
    summary: dict[str, Any] | None = None,
    add: dict[str, float] | None = None,
) -> list[Path]:
    """Copies of ``run_dir`` named ``names`` under ``folder``: ``config`` merged into their
    config (a ``params`` mapping into its params), ``summary`` into their summary, and
    ``add`` added to every value of those metrics."""
    import shutil

    out = []
    for index, name in enumerate(names):
        copy = folder / name
        shutil.copytree(run_dir, copy)
        stored = json.loads((copy / "config.json").read_text())
        given = dict(config or {})
        stored["params"] = {**stored.get("params", {}), **given.pop("params", {})}
        stored = {**stored, **given, "seed": int(stored["seed"]) + 10 + index}
        (copy / "config.json").write_text(json.dumps(stored))
        if summary:
            old = json.loads((copy / "summary.json").read_text())
            (copy / "summary.json").write_text(json.dumps({**old, **summary}))
        if add:
            metrics = json.loads((copy / "metrics.json").read_text())
            for metric, extra in add.items():
                metrics[metric]["values"] = [v + extra for v in metrics[metric]["values"]]
            (copy / "metrics.json").write_text(json.dumps(metrics))
        out.append(copy)
    return out


def _run_of(runs: Path, algo: str, workers: int = 1) -> Path:
    return next(
        p
        for p in sorted(runs.iterdir())
        if p.name.isdigit()
        and json.loads((p / "config.json").read_text())["algo"] == algo
        and json.loads((p / "config.json").read_text())["workers"] == workers
    )


@pytest.fixture(scope="module")
def populations(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's runs, plus two optimes runs of sweep "small" at population 8 and two of
    sweep "large" at population 40 (copies of the W=1 run, so their records are real)."""
    import shutil

    folder = tmp_path_factory.mktemp("populations") / "runs"
    shutil.copytree(runs, folder)
    optimes = _run_of(runs, "optimes")
    _copies(optimes, folder, ["81", "82"], {"sweep": "small", "params": {"population": 8}})
    _copies(optimes, folder, ["83", "84"], {"sweep": "large", "params": {"population": 40}})
    return folder


def _names(data: dict[str, Any]) -> list[str]:
    return sorted(a["algo"] for a in data["algorithms"])


def test_sweep_and_where_choose_the_runs_and_the_output_names_only_their_groups(
    populations: Path, tmp_path: Path
) -> None:
    args = [str(populations), "--target", str(TARGET), "--cores", "1", "64"]
    small, text = _project(tmp_path, *args, "--sweep", "small")
    assert _names(small) == ["optimes"]
    assert sorted(Path(r["run"]).name for r in small["runs"]) == ["81", "82"]
    assert "ppo (rl)" not in text and "optimes (es): 2 of 2 runs" in text
    large, text = _project(tmp_path, *args, "--where", "population=40")
    assert sorted(Path(r["run"]).name for r in large["runs"]) == ["83", "84"]
    assert _names(large) == ["optimes"] and "ppo (rl)" not in text
    both, _ = _project(tmp_path, *args, "--where", "algo=optimes", "--where", "workers=1")
    assert sorted(Path(r["run"]).name for r in both["runs"]) == [
        "1", "81", "82", "83", "84"
    ]  # fmt: skip
    done = harness_cli("bench", "project", *args, "--sweep", "nope", check=False)
    assert done.returncode == 2 and "--sweep nope" in done.stderr


def test_each_configuration_of_an_algorithm_is_projected_apart(
    populations: Path, tmp_path: Path
) -> None:
    """Populations 8, 20 and 40 of optimes are three groups, never one median."""
    data, text = _project(tmp_path, str(populations), "--target", str(TARGET), "--cores", "1")
    optimes = [a for a in data["algorithms"] if a["family"] == "es"]
    assert len(optimes) == 3 and all(a["algo"].startswith("optimes [") for a in optimes)
    assert {a["runs"] for a in optimes} == {1, 2}  # the W=1 run of population 20, 2 copies
    assert [a["algo"] for a in data["algorithms"] if a["family"] == "rl"] == ["ppo"]
    assert {a["algorithm"] for a in data["algorithms"]} == {"optimes", "ppo"}
    for group in optimes:
        assert f"{group['algo']} (es):" in text


def test_start_up_is_the_least_loaded_runs_and_labelled(runs: Path, tmp_path: Path) -> None:
    """Two copies of the W=1 optimes run whose process started 5 s later (a loaded
    machine): the configuration's median run is one of them, with the least start-up."""
    import shutil

    folder = tmp_path / "runs"
    shutil.copytree(runs, folder)
    _copies(_run_of(runs, "optimes"), folder, ["71", "72"], add={"time_process_start_s": 5.0})
    data, text = _project(tmp_path, str(folder), "--target", str(TARGET), "--cores", "1", "4")
    es = _algorithm(data, "optimes")
    own = [r for r in data["runs"] if r["algo"] == "optimes"]
    startups = [r["projection"][0]["startup"] for r in own]
    assert max(startups) > min(startups) + 4.9
    (plain,) = [r for r in own if Path(r["run"]).name not in ("71", "72") and r["workers"] == 1]
    # three W=1 runs, the lower median one of the slow copies, its start-up the least of
    # all four (the W=2 run's, where it started faster than the plain W=1 run)
    least = plain["projection"][0]["seconds"] - plain["projection"][0]["startup"] + min(startups)
    assert es["projection"][0]["seconds"] == pytest.approx(least)
    assert es["projection"][0]["startup"] == pytest.approx(min(startups))
    assert es["startup"]["seconds"] == pytest.approx(min(startups))
    assert "the least of its 4 runs' measured" in text and "least-loaded" in text


def test_an_env_without_published_n_envs_is_labelled_sb3_default(
    runs: Path, tmp_path: Path
) -> None:
    """PPO on an env with no n_envs in the defaults (here a copy of the CartPole run recorded
    as Acrobot-v1 at n_envs 1): the cap says SB3's default, and the variant is shown."""
    (copy,) = _copies(
        _run_of(runs, "ppo"),
        tmp_path / "runs",
        ["61"],
        {"env": "Acrobot", "params": {"n_envs": 1}},
        {"env": "Acrobot-v1"},
    )
    data, text = _project(tmp_path, str(copy), "--target", str(TARGET), "--cores", "1", "8")
    assert "at most n_envs = 1 core (SB3 default: the env has no published n_envs)" in text
    assert "published n_envs)" not in text.replace("no published n_envs)", "")
    assert "variant: n_envs raised to W" in text
    (run,) = data["runs"]
    assert run["inputs"]["n_envs_source"].startswith("SB3 default")
    assert [p["n_envs"] for p in run["n_envs_raised"]] == [1, 8]


def test_a_growing_population_never_makes_more_cores_slower(runs: Path, tmp_path: Path) -> None:
    args = [str(runs), "--target", str(TARGET), "--cores", *CORES]
    fixed, _ = _project(tmp_path, *args)
    grown, text = _project(tmp_path, *args, "--population-grows")
    for family in ("optimes", "ppo"):
        before = [p["seconds"] for p in _algorithm(fixed, family)["projection"]]
        after = [p["seconds"] for p in _algorithm(grown, family)["projection"]]
        assert all(a <= b * (1 + 1e-9) for a, b in zip(after, before, strict=True)), family
        assert all(b <= a for a, b in itertools.pairwise(after)), family
    picks = [p["picked"] for p in _algorithm(grown, "optimes")["projection"]]
    assert all(picks) and "picked" in text


def test_the_cores_figure_labels_every_tick_it_draws() -> None:
    """A panel whose times span 6.3 to 32.8 s (the log axis once labelled only 10 and 20)."""
    import matplotlib

    matplotlib.use("Agg")
    from harness.report import projection

    cores = [1, 2, 4, 8, 16, 64, 256, 1024]

    def algo(name: str, family: str, seconds: list[float]) -> project.AlgorithmProjection:
        points = [
            project.Point(c, c, s, {t: s / len(project.TERMS) for t in project.TERMS})
            for c, s in zip(cores, seconds, strict=True)
        ]
        median: list[tuple[int, float | None, project.Point | None]] = [
            (p.cores, p.seconds, p) for p in points
        ]
        band: list[tuple[float | None, float | None]] = [(s * 0.9, s * 1.1) for s in seconds]
        return project.AlgorithmProjection("Reach", name, family, 1.0, [], median, band, [], [])

    es = algo("optimes", "es", [6.3, 6.1, 5.9, 5.8, 5.75, 5.7, 5.7, 5.7])
    rl = algo("ppo", "rl", [32.8, 28.0, 25.0, 24.0, 24.0, 24.0, 24.0, 24.0])
    fig = projection.figure([projection.Panel("Reach", 1.0, "test", [es, rl], cores)])
    assert fig is not None
    fig.canvas.draw()
    ax = fig.axes[0]
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        shown = [
            (loc, label.get_text())
            for loc, label in zip(axis.get_majorticklocs(), axis.get_ticklabels(), strict=True)
            if low * (1 - 1e-9) <= loc <= high * (1 + 1e-9)
        ]
        assert all(text for _, text in shown), shown
        minor = [loc for loc in axis.get_minorticklocs() if low <= loc <= high]
        assert minor == [], minor
    assert [label.get_text() for label in ax.get_xticklabels()] == [f"{c:,}" for c in cores]
    # labelled ticks frame the times: from one at or below the least to one at or above
    # the most, at least four of them
    low, high = ax.get_ylim()
    ys = [loc for loc in ax.yaxis.get_majorticklocs() if low <= loc <= high]
    assert len(ys) >= 4 and ys[0] <= 5.7 and ys[-1] >= 32.8


def test_one_env_steps_in_the_head_so_its_rl_run_pays_no_env_messages(runs: Path) -> None:
    """SB3 steps a single env in its own process (DummyVecEnv) at any worker count, so the
    model adds env-process messages only where two or more envs step."""
    (ppo,) = [c for c in map(project.read_costs, sorted(runs.iterdir())) if not isinstance(c, str)
              and c.algo == "ppo"]  # fmt: skip
    machine = project.MachineCosts("", 1e-4, 1e-3, "test")
    assumptions = project.Assumptions(machines=(machine,))
    step = len(ppo.timesteps)
    one_env = dataclasses.replace(ppo, n_envs=1)
    assert project.rl_point(one_env, step, 2, assumptions).terms["messages"] == 0.0
    assert project.rl_point(ppo, step, 2, assumptions).terms["messages"] > 0.0


def test_env_process_messages_cost_what_the_machine_measured_at_the_runs_own_gap(
    runs: Path,
) -> None:
    """The message cost per env step is read at the head's own seconds per vectorised step
    in the run (its rollout less its env steps), from the machine file of its env if one
    was measured, else the first file's."""
    (ppo,) = [c for c in map(project.read_costs, sorted(runs.iterdir())) if not isinstance(c, str)
              and c.algo == "ppo"]  # fmt: skip
    step = len(ppo.timesteps)
    flat = project.MachineCosts("Other-v0", 1e-5, 1e-4, "flat")
    rising = project.MachineCosts(ppo.gym_id, 1e-5, 1e-4, "rising", (0.0, 1.0), (1e-4, 1.0))
    assert project.Assumptions(machines=(flat, rising)).machine_for(ppo.gym_id) is rising
    assert project.Assumptions(machines=(flat, rising)).machine_for("Hopper-v5") is flat
    steps = float(ppo.timesteps[step - 1])
    serial = float(ppo.rollout_s[:step].sum()) * ppo.parallel_envs
    gap = (serial - min(serial, steps * rising.env_step_s)) / (steps / ppo.n_envs)
    messages = project.rl_point(ppo, step, 2, project.Assumptions(machines=(rising,)))
    assert messages.terms["messages"] == pytest.approx(steps * rising.message_s(gap))
    assert rising.message_s(gap) > rising.subproc_message_s  # a busy head costs more
    plain = project.rl_point(ppo, step, 2, project.Assumptions(machines=(flat,)))
    assert plain.terms["messages"] == pytest.approx(steps * flat.subproc_message_s)


def test_a_median_band_resamples_the_runs_and_never_reaching_leaves_it_open() -> None:
    times = [10.0, 12.0, 15.0, 30.0, 31.0]
    low, high = project.median_band(times)
    assert low is not None and high is not None
    assert min(times) <= low <= project.lower_median(times) <= high <= max(times)
    assert project.median_band(times) == (low, high)  # from a fixed seed
    assert project.median_band([10.0, None, None, None, 12.0]) == (10.0, None)
    assert project.median_band([None, None]) == (None, None)
    assert project.band_text((9.5, None)) == "[9.5, never]"


def test_the_benchmark_section_draws_the_named_algorithms_with_bands(
    runs: Path, tmp_path: Path
) -> None:
    """The leader row's picks are drawn even where another algorithm of the family is
    faster; every time carries its band; a verdict says what the bands allow and where the
    times come from when the runs recorded no common speed."""
    from harness import rundir
    from harness.report import projection

    grid = sorted(p for p in runs.iterdir() if p.name.isdigit())
    archive = tmp_path / "runs.tar.xz"
    rundir.write_run_archive(grid, archive)
    task = [("CartPole", archive, (150.0, "test"))]
    section = projection.benchmark_section(task, tmp_path, named={"CartPole": {"es": "optimes"}})
    rows = section.tables[0][1].set_index("")
    for label in ("best ES", "best RL"):
        cell = rows["1 core"][label]
        assert re.fullmatch(r"[\d.,]+ s \[[\d.,]+, ([\d.,]+|never)\] \w+", cell), cell
    assert rows["1 core"]["best ES"].endswith("optimes")
    (verdict,) = [t for t in section.after if t.startswith("CartPole:")]
    assert "95% bands" in verdict
    (samples,) = [t for t in section.after if t.startswith("CartPole, sample costs to 150:")]
    assert "optimes: none measured, its population (20) kept" in samples
    assert "ppo: none measured, its n_envs (8) kept" in samples
    (panel,) = projection.panels(grid, {"CartPole": (150.0, "test")})
    runs_of = [r.costs for a in panel.algorithms for r in a.runs]
    for costs in runs_of:
        costs.speed = 150_000.0
    assert panel.machines(["optimes", "ppo"]) == ""  # one speed: nothing to say
    runs_of[0].speed = 300_000.0
    assert "not converted" in panel.machines(["optimes", "ppo"])
    for costs in runs_of:
        costs.speed = None
    assert "no run recorded its speed" in panel.machines(["optimes", "ppo"])
    missing = projection.benchmark_section(task, tmp_path, named={"CartPole": {"es": "cma"}})
    assert missing.tables[0][1].equals(section.tables[0][1])  # a pick without runs: the fastest
