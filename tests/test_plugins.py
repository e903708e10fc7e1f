"""Envs, algorithms and grids from the user's own code, through real subprocesses.

The user's modules are written into a temporary working directory, as a user's
project would hold them, and the ``harness`` console script runs there: nothing of
the harness is changed. The installed plugin of ``examples/plugin`` (``make venv``
installs it) provides the cross-entropy method through its entry point.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from algorithms.registry import algorithm_names, algorithm_source, prefix_names
from tests.conftest import ROOT

HARNESS = Path(sys.executable).with_name("harness")
PLUGIN = str(ROOT / "examples" / "plugin")
#: as the Makefile installs it: editable, built with the venv's own setuptools
NO_ISOLATION = ("--no-build-isolation", "-e")

#: An env of the user's own, whose constructor takes no render_mode.
USER_ENVS = """
import gymnasium as gym
import numpy as np


class Walk(gym.Env):
    observation_space = gym.spaces.Box(-10, 10, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.x = 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-1, 1))
        return np.array([self.x], dtype=np.float32), {}

    def step(self, action):
        self.x += 0.1 if action == 1 else -0.1
        return np.array([self.x], dtype=np.float32), -abs(self.x), False, False, {}


gym.register("MyWalk-v0", entry_point="myenvs:Walk", max_episode_steps=20)
"""

#: An algorithm of the user's own, registered as its module is imported.
USER_ALGORITHM = """
from dataclasses import replace

from algorithms.registry import get_algorithm, register_definition

register_definition(
    replace(get_algorithm("cma"), name="my-cma", summary="pycma under a name of the user's own")
)
"""

CLASH = """
from dataclasses import replace

from algorithms.registry import get_algorithm, register_definition

register_definition(replace(get_algorithm("cma"), summary="mine"))
"""


#: A one-generation cma run on CartPole, up to its runs directory.
CMA_RUN = ("--algo", "cma", "--env", "CartPole", "--generations", "1", "--runs-dir")


@pytest.fixture(scope="session", autouse=True)
def plugin_installed() -> None:
    """The worked plugin, installed as ``make venv`` installs it (once, if missing)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("es-harness-cem-example")
    except PackageNotFoundError:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *NO_ISOLATION, PLUGIN],
            check=True,
            timeout=300,
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's working directory holding their own modules."""
    (tmp_path / "myenvs.py").write_text(USER_ENVS)
    (tmp_path / "myalgo.py").write_text(USER_ALGORITHM)
    (tmp_path / "clash.py").write_text(CLASH)
    return tmp_path


def harness(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``harness`` console script in ``cwd``, as a user runs it: the modules there are
    found through ``PYTHONPATH`` (the harness does not search the current directory)."""
    path = os.pathsep.join(filter(None, (str(cwd), os.environ.get("PYTHONPATH"))))
    full_env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONPATH": path, **(env or {})}
    full_env.pop("ES_HARNESS_IMPORTS", None)
    completed = subprocess.run(
        [str(HARNESS), *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=600
    )
    if check and completed.returncode != 0:
        raise AssertionError(f"harness {' '.join(args)}: {completed.stdout}\n{completed.stderr}")
    return completed


def run_configs(runs: Path) -> list[dict[str, Any]]:
    dirs = sorted((p for p in runs.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads((d / "config.json").read_text()) for d in dirs]


def statuses(runs: Path) -> list[str]:
    dirs = sorted((p for p in runs.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads((d / "run.json").read_text())["status"] for d in dirs]


def report_groups(report: Path, algo: str) -> set[str]:
    """The group names a report's tables use for ``algo`` (``optimes [sigma=0.1, ...]``)."""
    text = (report / "report.md").read_text()
    return set(re.findall(rf"{re.escape(algo)} \[[^\]]*\]", text))


def usage_error(result: subprocess.CompletedProcess[str], *named: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in named:
        assert text in lines[0], (text, lines[0])


@pytest.mark.slow
def test_an_env_of_the_users_module_runs_through_import_and_module_id(project: Path) -> None:
    runs = project / "runs"
    tiny = ("--generations", "2", "--runs-dir", str(runs), "--set", "population=6")
    # process workers import the module too (they build the env)
    harness(
        project,
        "run",
        "--import",
        "myenvs",
        "--env",
        "MyWalk-v0",
        "--algo",
        "cma",
        "--workers",
        "2",
        *tiny,
    )
    harness(project, "run", "--env", "myenvs:MyWalk-v0", "--algo", "cma", *tiny)
    first, second = run_configs(runs)
    assert first["imports"] == ["myenvs"] and first["env"] == "MyWalk-v0"
    assert second["imports"] == [] and second["env"] == "myenvs:MyWalk-v0"
    assert statuses(runs) == ["COMPLETED", "COMPLETED"]
    # nothing imports the module unless asked
    usage_error(
        harness(project, "run", "--env", "MyWalk-v0", *tiny, check=False),
        "'MyWalk-v0'",
        "--import MODULE",
    )
    usage_error(
        harness(project, "run", "--import", "nosuch", *tiny, check=False), "'nosuch'", "not found"
    )
    assert len(run_configs(runs)) == 2


def test_an_algorithm_of_the_users_module_and_a_name_claimed_twice(project: Path) -> None:
    runs = project / "runs"
    harness(
        project,
        "run",
        "--import",
        "myalgo",
        "--algo",
        "my-cma",
        "--env",
        "CartPole",
        "--generations",
        "2",
        "--runs-dir",
        str(runs),
    )
    (config,) = run_configs(runs)
    assert config["algo"] == "my-cma" and config["imports"] == ["myalgo"]
    clash = harness(project, "run", "--import", "clash", *CMA_RUN, str(runs), check=False)
    usage_error(clash, "'cma' is claimed twice", "module algorithms.cma_es", "module clash")
    assert len(run_configs(runs)) == 1


def test_the_installed_plugin_is_found_through_its_entry_point(project: Path) -> None:
    listed = harness(project, "list").stdout
    assert any(line.split()[:2] == ["cem", "[es]"] for line in listed.splitlines()), listed
    runs = project / "runs"
    harness(
        project,
        "run",
        "--algo",
        "cem",
        "--env",
        "cem_example.envs:PointReach-v0",
        "--generations",
        "3",
        "--runs-dir",
        str(runs),
        "--set",
        "population=8",
    )
    (config,) = run_configs(runs)
    assert config["params"]["population"] == 8 and statuses(runs) == ["COMPLETED"]


GRID_SWEEP = """
name: ablation
grid:
  algo: [optimes]
  env: [CartPole]
  sigma: [0.05, 0.1]
  learning_rate: [1e-2, 3e-2]
budget: {generations: 2}
backend: inline
set: [population=6, eval_episodes=2]
"""


@pytest.mark.slow
def test_a_two_by_two_hyperparameter_grid_gives_four_named_groups_and_reruns_skip(
    project: Path,
) -> None:
    sweep, runs = project / "ablation.yaml", project / "runs"
    sweep.write_text(GRID_SWEEP)
    harness(project, "sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    configs = run_configs(runs)
    assert sorted((c["params"]["sigma"], c["params"]["learning_rate"]) for c in configs) == [
        (0.05, 0.01),
        (0.05, 0.03),
        (0.1, 0.01),
        (0.1, 0.03),
    ]
    again = harness(project, "sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    assert "4 cells, 4 already completed, 0 ran" in again.stdout
    harness(project, "report", str(runs), "--out", str(project / "report"))
    groups = report_groups(project / "report", "optimes")
    assert len(groups) == 4, groups
    for sigma in ("0.05", "0.1"):
        for rate in ("0.01", "0.03"):
            assert sum(f"sigma={sigma}" in g and f"learning_rate={rate}" in g for g in groups) == 1


def test_grid_keys_on_the_command_line_and_a_hyperparameter_one_algorithm_lacks(
    project: Path,
) -> None:
    sweep, runs = project / "ablation.yaml", project / "runs"
    sweep.write_text(GRID_SWEEP)
    command = ("sweep", str(sweep), "--runs-dir", str(runs))
    listed = harness(
        project, *command, "--dry-run", "--grid", "sigma=0.02,0.05,0.2", "--grid", "kind=linear"
    ).stdout
    cells = [line for line in listed.splitlines() if "optimes CartPole" in line]
    assert len(cells) == 6 and all(c.endswith(" kind=linear") for c in cells), listed
    assert sum(" sigma=0.02 " in c for c in cells) == 2
    refused = harness(project, *command, "--grid", "algo=optimes,cma", check=False)
    usage_error(refused, "grid.sigma: cma has no hyperparameter or knob 'sigma'", "sigma0")
    refused = harness(project, *command, "--grid", "population=2.5e0", check=False)
    usage_error(refused, "population", "2.5")
    assert not runs.exists()


PLUGIN_SWEEP = """
name: cem-ablation
imports: [myenvs]
grid:
  algo: [cem]
  env: [MyWalk-v0]
  population: [8, 12]
  sigma: [0.3, 0.6]
  workers: [4]
budget: {generations: 6}
backend: process
set: [checkpoint_every=1, eval_every_timesteps=400, eval_episodes=3]
"""


# Slow: 4 sweep cells on 4 process workers, each interrupted and resumed, then check-repro
# (three more runs) and a report; the fast tests check each step on its own.
@pytest.mark.slow
def test_the_plugin_end_to_end_sweep_interrupt_resume_check_repro_report(project: Path) -> None:
    """The installed algorithm on an env of the user's module: a 2 x 2 grid on 4 process
    workers, every cell interrupted and resumed, then check-repro and a report."""
    sweep, runs = project / "cem.yaml", project / "runs"
    sweep.write_text(PLUGIN_SWEEP)
    interrupted = harness(
        project,
        "sweep",
        str(sweep),
        "--runs-dir",
        str(runs),
        "--no-progress",
        check=False,
        env={"HARNESS_INTERRUPT_AT_STEP": "3"},
    )
    assert interrupted.returncode == 1 and statuses(runs) == ["INTERRUPTED"] * 4
    resumed = harness(project, "sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    assert "4 resumed" in resumed.stdout and statuses(runs) == ["COMPLETED"] * 4
    configs = run_configs(runs)
    assert all(c["imports"] == ["myenvs"] and c["workers"] == 4 for c in configs)
    skipped = harness(project, "sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    assert "4 already completed" in skipped.stdout

    check = harness(
        project,
        "check-repro",
        "--import",
        "myenvs",
        "--algo",
        "cem",
        "--env",
        "MyWalk-v0",
        "--generations",
        "5",
        "--set",
        "population=8",
        "--interrupt-at",
        "2",
    )
    assert "mismatch" not in check.stdout.lower(), check.stdout

    harness(project, "report", str(runs), "--out", str(project / "report"))
    groups = report_groups(project / "report", "cem")
    assert len(groups) == 4, groups
    markdown = (project / "report" / "report.md").read_text()
    assert "mean and std of the best" in markdown  # the plugin describes its update
    assert "harness run --import myenvs --algo cem --env MyWalk-v0" in markdown


def _strings(node: ast.AST) -> list[str]:
    """String constants a comparison operand holds (itself, or inside a tuple/list/set)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def test_no_module_compares_algorithm_names_but_their_own_and_the_registry() -> None:
    """Behaviour follows what an algorithm declares: a comparison with a registered name
    (``algo == "ppo"``, ``algo in ("ppo", "a2c")``, ``algo.startswith("ng:")``) outside the
    algorithm's own module and the registry would treat a new algorithm wrongly."""
    names = set(algorithm_names())
    prefixes = {form.removesuffix("NAME") for form in prefix_names()}
    own = {algorithm_source(n).removeprefix("module ") for n in names}
    own |= {"algorithms.registry", "algorithms.nevergrad_es"}  # the ng: prefix's module
    offenders = []
    for package in ("envs", "evaluation", "algorithms", "harness"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if module in own:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                found: list[str] = []
                if isinstance(node, ast.Compare):
                    for operand in [node.left, *node.comparators]:
                        found += [text for text in _strings(operand) if text in names]
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("startswith", "removeprefix")
                ):
                    for arg in node.args:
                        found += [text for text in _strings(arg) if text in prefixes]
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {t!r}" for t in found]
    assert not offenders, offenders


def test_a_name_an_entry_point_claims_twice_names_both_sources() -> None:
    from dataclasses import replace

    from algorithms.registry import AlgorithmRegistryError, get_algorithm, register_definition

    cma = get_algorithm("cma")
    source = "entry point cma = theirs.algos:Other of package theirs"
    with pytest.raises(AlgorithmRegistryError) as refused:
        register_definition(replace(cma, summary="theirs"), source)  # type: ignore[type-var]
    assert str(refused.value) == (
        f"algorithm name 'cma' is claimed twice: by module algorithms.cma_es and by {source}"
    )
    assert get_algorithm("cma") is cma  # the first claim stands
    assert algorithm_source("cem").startswith("entry point cem = cem_example.cem:")
