"""The report's answer: the best ES against the best RL at equal timesteps, CPU-seconds and
wall-clock with the interval of the difference; no lead without evidence; a time to a
score above the evaluation noise (issue 59)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.report import stats
from tests.conftest import harness_cli

ENV = "cem_example.envs:PointReach-v0"  # the worked plugin package's env, by gymnasium's form


# -- the lead rule -------------------------------------------------------------------------------


def test_no_lead_or_bold_while_the_difference_interval_spans_zero() -> None:
    near = {"a": np.array([-71.0, -71.3, -70.9]), "b": np.array([-71.2, -71.1, -71.4])}
    text = stats.lead_text(near, "at 1k timesteps")
    assert "**" not in text and "leads" not in text
    assert "spans 0" in text and "inconclusive at n=3" in text
    far = {"a": np.array([10.0, 11, 12]), "b": np.array([1.0, 2, 3])}
    text = stats.lead_text(far, "at 1k timesteps")
    assert "**a** leads" in text and "excludes 0" in text
    diff = stats.difference(far["a"], far["b"])
    assert diff.sign == 1 and diff.low > 0 and diff.value == pytest.approx(9.0)
    assert diff.poi == 1.0
    # two runs a side: no interval, so no lead however far apart
    two = {"a": np.array([10.0, 11]), "b": np.array([1.0, 2])}
    text = stats.lead_text(two, "at 1k timesteps")
    assert "**" not in text and "no interval at n=2" in text


def test_a_grid_names_a_best_value_only_on_evidence(tmp_path: Path) -> None:
    from harness.report.build import SCORE_T, ReportBuilder

    rows = [
        {"env": "E", "algo": "optimes", "params.sigma": sigma, SCORE_T: score}
        for sigma, scores in ((0.05, [-71.0, -71.3, -70.9]), (0.02, [-71.2, -71.1, -71.4]))
        for score in scores
    ]
    builder = ReportBuilder.__new__(ReportBuilder)
    builder.runs = pd.DataFrame(rows)
    text = builder.grid_text("E", "optimes", "params.sigma")
    assert text.startswith("no setting of 0.02, 0.05 is distinguishable") and "best" not in text
    builder.runs.loc[builder.runs["params.sigma"] == 0.02, SCORE_T] -= 20
    assert builder.grid_text("E", "optimes", "params.sigma").startswith("best sigma=0.05")


# -- a level above the evaluation noise ----------------------------------------------------------


def test_default_level_sits_above_the_evaluation_noise() -> None:
    steps = pd.DataFrame(
        {
            "run": ["r"] * 4,
            "timesteps": [1.0, 2, 3, 4],
            "eval_return_mean": [-75.0, -72.0, -71.0, -73.0],
            "eval_return_std": [10.0] * 4,
        }
    )
    runs = pd.DataFrame({"run": ["r"], "eval_episodes": [4]})
    noise = stats.evaluation_noise(steps, runs)
    # one evaluation's standard error is 10 / 2 = 5; the last three spread less (std 1)
    assert noise == pytest.approx(5.0)
    # 0.9 of the way from -75 to -55 would be -57, above 2 x 5 over -75: kept
    assert stats.default_level(-75.0, -55.0, noise, 0.9) == pytest.approx(-57.0)
    # 0.9 of the way from -75 to -64.5 would be -65.55, inside the noise: raised to 2 x 5 above
    assert stats.default_level(-75.0, -64.5, noise, 0.9) == pytest.approx(-65.0)
    # from -75 to -71 the whole margin is inside the noise: no level past the final score
    # (nobody's median run would reach it); the warning below says so instead
    assert stats.default_level(-75.0, -71.0, noise, 0.9) == pytest.approx(-71.0)
    assert np.isnan(stats.default_level(-75.0, -76.0, noise, 0.9))  # nothing learnt
    warning = stats.noisy_level_warning(-71.0, -75.0, noise, "the level")
    assert warning is not None and "inside the evaluation noise" in warning
    assert stats.noisy_level_warning(-40.0, -75.0, noise, "the level") is None


# -- a user's own env through ES and PPO, on both budgets ---------------------------------------


def _runs(runs_dir: Path, budget: list[str], es_every: str) -> None:
    common = ["--env", ENV, "--set", "eval_episodes=5", "--runs-dir", str(runs_dir)]
    es = ["--algo", "optimes", "--backend", "inline", "--set", f"eval_every_timesteps={es_every}"]
    ppo = ["--algo", "ppo", "--set", "eval_every_timesteps=512", "--set", "params.n_steps=512"]
    commands = [
        [*common, *algo, "--seed", str(seed), *budget] for algo in (es, ppo) for seed in (1, 2, 3)
    ]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda args: harness_cli("run", *args), commands))


def _first_section(out: Path) -> str:
    markdown = (out / "report.md").read_text()
    first = markdown.split("\n## ")[1]
    return first.split("> **Warnings**")[0]


def _answer_line(section: str) -> str:
    lines = [line for line in section.splitlines() if "(best ES) against" in line]
    assert len(lines) == 1, section
    return lines[0]


DIFFERENCE = r"difference [+-][\d.]+ \[[+-][\d.]+, [+-][\d.]+\]"


@pytest.mark.slow
def test_report_answers_best_es_against_best_rl_on_both_budgets(tmp_path: Path) -> None:
    by_steps, by_cpu = tmp_path / "steps", tmp_path / "cpu"
    _runs(by_steps, ["--timesteps", "4096"], "1000")
    _runs(by_cpu, ["--cpu-limit", "3"], "4000")
    reports = {}
    for name, runs in (("steps", by_steps), ("cpu", by_cpu)):
        out = tmp_path / f"report_{name}"
        harness_cli("report", str(runs), "--out", str(out), "--no-replay", "--map-runs", "0")
        reports[name] = _first_section(out)
    for section in reports.values():
        assert section.startswith("Result"), section[:80]
        line = _answer_line(section)
        assert "optimes (best ES) against ppo (best RL)" in line
        # equal timesteps and equal CPU-seconds, each with the interval of the difference
        timesteps = re.search(r"at [\d.]+k? timesteps each (.*?); at ", line)
        cpu = re.search(r"at [\d.]+ CPU-s each (.*?)(; at |; time to)", line)
        assert timesteps and cpu, line
        for clause in (timesteps.group(1), cpu.group(1)):
            assert re.search(DIFFERENCE, clause), clause
            assert "P(optimes > ppo)" in clause
            assert "ahead" in clause or "inconclusive" in clause or "not decided" in clause
        assert "time to " in line
        assert "| optimes against ppo |" in section  # the answer's numbers
    # budgeted in CPU-seconds: the answer and the headline lead with CPU-seconds
    cpu_line = _answer_line(reports["cpu"])
    assert cpu_line.index("CPU-s each") < cpu_line.index("timesteps each")
    assert "Scores at the common CPU-seconds" in reports["cpu"]
    assert "eval_vs_cpu_seconds.png" in reports["cpu"].split("*The answer's numbers")[0]
    steps_line = _answer_line(reports["steps"])
    assert steps_line.index("timesteps each") < steps_line.index("CPU-s each")
    # any two groups a user names
    out = tmp_path / "compare"
    flags = ["--no-replay", "--map-runs", "0"]
    harness_cli("report", str(by_cpu), "--out", str(out), *flags, "--compare", "ppo", "optimes")
    section = _first_section(out)
    named = [line for line in section.splitlines() if "(`--compare`)" in line]
    assert len(named) == 1 and "ppo against optimes" in named[0]
    assert re.search(DIFFERENCE, named[0]) and "P(ppo > optimes)" in named[0]
    bad = harness_cli(
        "report", str(by_cpu), "--out", str(tmp_path / "bad"), "--compare", "ppo", "x", check=False
    )
    assert bad.returncode == 2 and "--compare x" in bad.stderr
