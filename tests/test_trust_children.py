"""No code from the working folder, none from a tuning database (docs/trust.md).

The ``harness`` console script is run from a folder holding ``yaml.py``, ``numpy.py``,
``json.py`` and ``multiprocessing.py`` that append a line to ``MARKER`` when imported and
then hand over the real module, so that a command they reach still works: the Python
processes a command starts (sweep cells, ``harness resume`` of a cell, tune trials,
check-repro runs, ``spawn`` evaluation workers, multiprocessing's resource tracker, Ray's
workers) must import none of them. A foreign optuna study (SQLite, built with optuna's
API) is data: its env naming a module of a planted package is refused in one line with
nothing imported, and trials with records the harness never writes are skipped with one
warning line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import only_run_dir

HARNESS = Path(sys.executable).parent / "harness"
PLANTED = ("yaml", "numpy", "json", "multiprocessing")

#: Imported, it notes who imported it, then puts the real module in its place.
SHIM = """\
import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_here, "MARKER"), "a") as _marker:
    _marker.write(f"{__name__} imported by pid {os.getpid()}: {sys.argv[:3]}\\n")
del sys.modules[__name__]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
import {name} as _real
sys.modules[__name__] = _real
"""

#: A tiny sweep cell: optimes on CartPole, evaluated by 2 ``spawn`` workers.
SWEEP = """\
name: planted
grid: {{algo: [optimes], env: [CartPole], seed: [0], workers: [2]}}
budget: {{{budget}}}
backend: process
set: [eval_every_timesteps=1000, eval_episodes=1, population=10, checkpoint_every=1]
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A working folder with the planted modules (a downloaded experiment folder)."""
    work = tmp_path / "work"
    work.mkdir()
    for name in PLANTED:
        (work / f"{name}.py").write_text(SHIM.replace("{name}", name))
    return work


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    return {**env, "HARNESS_PROGRESS": "0", **extra}


def harness(
    cwd: Path, *args: str, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """The ``harness`` console script, as a user types it, in ``cwd``."""
    return subprocess.run(
        [str(HARNESS), *args],
        cwd=cwd,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def no_marker(folder: Path, done: subprocess.CompletedProcess[str] | None = None) -> None:
    marker = folder / "MARKER"
    assert not marker.exists(), marker.read_text()
    if done is not None:
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr


def test_the_shim_runs_when_the_folder_is_on_the_path(folder: Path) -> None:
    """The planted modules do run under ``python -m`` there (what the harness's children were)."""
    subprocess.run(
        [sys.executable, "-m", "harness.sweep", "--help"],
        cwd=folder,
        env=child_env(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert "json imported" in (folder / "MARKER").read_text()


def test_a_sweep_its_cells_and_their_workers_import_nothing_from_the_folder(
    folder: Path,
) -> None:
    (folder / "s.yaml").write_text(SWEEP.format(budget="timesteps: 1500"))
    done = harness(folder, "sweep", "s.yaml", "--runs-dir", "runs")
    no_marker(folder, done)
    run = json.loads((only_run_dir(folder / "runs") / "run.json").read_text())
    assert run["status"] == "COMPLETED"


@pytest.mark.slow
def test_a_resumed_cell_and_harness_resume_import_nothing_from_the_folder(folder: Path) -> None:
    """A sweep stopped after its cell's first checkpoint, run again: the cell is resumed
    (``harness resume`` as a child); then ``harness resume RUN`` extends the run."""
    (folder / "s.yaml").write_text(SWEEP.format(budget="time_limit: 4"))
    runs = folder / "runs"
    sweep = subprocess.Popen(
        [str(HARNESS), "sweep", "s.yaml", "--runs-dir", "runs"],
        cwd=folder,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(runs.glob("*/checkpoint.pkl")):
        assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
        time.sleep(0.05)
    sweep.send_signal(signal.SIGTERM)
    sweep.communicate(timeout=120)
    run_dir = only_run_dir(runs)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "INTERRUPTED"
    no_marker(folder)

    again = harness(folder, "sweep", "s.yaml", "--runs-dir", "runs")
    no_marker(folder, again)
    assert "1 resumed" in again.stdout + again.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "COMPLETED"

    extended = harness(folder, "resume", str(run_dir), "--time-limit", "5")
    no_marker(folder, extended)


@pytest.mark.slow
def test_tune_trials_import_nothing_from_the_folder(folder: Path) -> None:
    (folder / "space.yaml").write_text("optimes:\n  sigma: {float: [0.05, 0.2], log: true}\n")
    done = harness(
        folder,
        *("tune", "--algo", "optimes", "--env", "CartPole", "--trials", "1", "--seeds", "0"),
        *("--check-seeds", "--timesteps", "1500", "--evaluations", "2", "--workers", "2"),
        *("--space", "space.yaml", "--set", "population=10", "--runs-dir", "runs"),
    )
    no_marker(folder, done)
    assert (folder / "runs" / "_tune" / "tune-CartPole-optimes" / "best.yaml").is_file()


@pytest.mark.slow
def test_check_repro_imports_nothing_from_the_folder(folder: Path) -> None:
    """Its runs (W=1, W=2, interrupted and resumed) are children of check-repro."""
    done = harness(
        folder,
        *("check-repro", "--algo", "optimes", "--env", "CartPole", "--generations", "6"),
        *("--set", "population=10", "--set", "eval_episodes=1", "--set", "checkpoint_every=1"),
    )
    no_marker(folder, done)
    assert "check-repro: OK" in done.stdout


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_ray_workers_import_nothing_from_the_folder(folder: Path) -> None:
    """Ray puts the driver's working folder first on its workers' paths unless told not to."""
    done = harness(
        folder,
        *("run", "--algo", "optimes", "--env", "CartPole", "--backend", "ray", "--workers", "1"),
        *("--timesteps", "1500", "--set", "population=10", "--runs-dir", "runs"),
    )
    no_marker(folder, done)


# -- a tuning database is data ----------------------------------------------------------------

SPACE = {"sigma": {"float": [0.05, 0.2], "log": True}}
EVIL = "evil_tuned"


def foreign_study(url: str, name: str, env: str) -> None:
    """A study made by someone else: its best trials hold records the harness never writes."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    record: dict[str, Any] = {"algo": "optimes", "env": env, "seeds": [0], "space": SPACE}
    for key, attr in record.items():
        study.set_user_attr(key, attr)
    sigma: dict[str, optuna.distributions.BaseDistribution] = {
        "sigma": optuna.distributions.FloatDistribution(0.05, 0.2, log=True)
    }
    trials: list[tuple[float, dict[str, Any]]] = [
        (100.0, {"values": {"sigma": 0.1}, "runs": {"0": "1"}}),
        (900.0, {"values": {"sigma": 0.15}, "runs": {"x": "1"}}),
        (800.0, {"values": {"imports": [EVIL]}}),
        (700.0, {"values": {"sigma": 5.0}}),
        (600.0, {"values": {"sigma": 0.1, "env": f"{EVIL}:CartPole-v1"}}),
    ]
    for value, attrs in trials:
        study.add_trial(
            optuna.trial.create_trial(
                params={"sigma": 0.1}, distributions=sigma, value=value, user_attrs=attrs
            )
        )


@pytest.fixture
def evil_path(tmp_path: Path) -> tuple[Path, Path]:
    """A module a study names, on the Python path: importing it writes a marker."""
    src = tmp_path / "src"
    src.mkdir()
    marker = tmp_path / "EVIL_MARKER"
    (src / f"{EVIL}.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    return src, marker


def test_a_study_naming_a_module_is_refused_in_one_line(
    tmp_path: Path, evil_path: tuple[Path, Path]
) -> None:
    src, marker = evil_path
    url = f"sqlite:///{tmp_path / 'foreign.db'}"
    foreign_study(url, "evil-optimes", f"{EVIL}:CartPole-v1")
    (tmp_path / "s.yaml").write_text(
        "name: at-evil\ngrid: {algo: [optimes], env: [CartPole], seed: [100]}\n"
        f'budget: {{timesteps: 1000}}\ntuned: {{study: evil, storage: "{url}"}}\n'
    )
    done = harness(tmp_path, "sweep", "s.yaml", "--runs-dir", "runs", PYTHONPATH=str(src))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), done.stderr
    assert f"'{EVIL}:CartPole-v1'" in lines[0] and "not imported" in lines[0]
    assert not marker.exists()
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_foreign_trials_are_skipped_and_best_yaml_holds_checked_values(
    tmp_path: Path, evil_path: tuple[Path, Path]
) -> None:
    import yaml

    from harness.sweep import load_sweep

    src, marker = evil_path
    url = f"sqlite:///{tmp_path / 'foreign.db'}"
    foreign_study(url, "g-optimes", "CartPole")
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"optimes": SPACE}))
    done = harness(
        tmp_path,
        *("tune", "--algo", "optimes", "--env", "CartPole", "--study", "g", "--storage", url),
        *("--trials", "3", "--seeds", "0", "--check-seeds", "--timesteps", "1500"),
        *("--space", "space.yaml", "--runs-dir", "runs"),
        PYTHONPATH=str(src),
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    skipped = [line for line in done.stderr.splitlines() if "trial(s) skipped" in line]
    assert len(skipped) == 1, done.stderr  # one line for every foreign trial
    assert skipped[0].startswith("harness: warning: study g-optimes: 4 trial(s) skipped")
    assert "Traceback" not in done.stderr
    assert "best trial 0: tuning score 100.00" in done.stdout
    out = tmp_path / "runs" / "_tune" / "g-optimes"
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["trial"] == 0 and best["set"] == {"sigma": 0.1}
    assert best["args"] == ["--set", "sigma=0.1"]
    assert (out / "trials.csv").read_text().count("\n") == 2  # the header and trial 0
    assert not marker.exists()

    # a sweep's tuned: reads the same study: the checked trial, one warning line
    sweep_file = tmp_path / "at.yaml"
    sweep_file.write_text(
        "name: at\ngrid: {algo: [optimes], env: [CartPole], seed: [100]}\n"
        f'budget: {{timesteps: 1000}}\ntuned: {{study: g, storage: "{url}"}}\n'
    )
    (cell,) = load_sweep(sweep_file).cells
    assert cell.config["params"]["sigma"] == 0.1
    assert "trial 0" in cell.config["tuned"]
    assert not marker.exists()
