"""``harness tune``: Optuna studies whose trials are real runs.

The studies run the real CLI as subprocesses (each trial x seed a ``python -m
harness.sweep --cell`` run of its own) at tiny budgets (CartPole, optimes, a few
thousand timesteps): a SQLite study shared by the tests of its outputs, two processes
sharing one study on a real PostgreSQL server started for the test, and a study
interrupted with Ctrl-C and run again. Scores are recomputed from the runs'
``metrics.json``; bad input is refused with exit status 2 and nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import main
from tests.conftest import ROOT, harness_cli

# Slow: trials are real `harness run` subprocesses and studies are real Optuna studies over
# them (about 45 s of the suite, plus PostgreSQL and Ray); CI runs them in `make test-slow`.
pytestmark = pytest.mark.slow

#: A small space: two continuous ranges and the episodes flag (a --set key and a flag).
SPACE = textwrap.dedent("""\
    optimes:
      sigma: {float: [0.05, 0.2], log: true}
      learning_rate: {float: [0.01, 0.1], log: true}
      episodes: {choice: [1, 2]}
    """)
#: What every study here shares: tiny runs, inline evaluation, a fixed population.
COMMON = (
    "--algo",
    "optimes",
    "--env",
    "CartPole",
    "--backend",
    "inline",
    "--set",
    "population=10",
    "--set",
    "eval_episodes=2",
    "--startup-trials",
    "2",
)
GROUP = "t"
NAME = f"{GROUP}-optimes"


def space_file(folder: Path, text: str = SPACE) -> Path:
    path = folder / "space.yaml"
    path.write_text(text)
    return path


def load_study(url: str, name: str = NAME) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna.load_study(study_name=name, storage=url)


def robust(run_dir: Path) -> float:
    """A run's score as the docs define it, from its metrics.json: the mean of its last 3
    evaluations."""
    values = json.loads((run_dir / "metrics.json").read_text())["eval_return_mean"]["values"]
    tail = values[-3:]
    return sum(tail) / len(tail)


def run_dirs(runs_dir: Path) -> list[Path]:
    return sorted((p for p in runs_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def config_of(run_dir: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((run_dir / "config.json").read_text())
    return config


def status_of(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["status"])


def check_trial_runs(runs_dir: Path, trial: Any, seeds: list[int], tag: str = NAME) -> list[Path]:
    """The trial's runs are ordinary runs: tagged with the study, at its seeds and values."""
    from optuna.trial import TrialState

    runs = trial.user_attrs["runs"]
    assert sorted(map(int, runs)) == seeds
    values = trial.user_attrs["values"]
    paths = []
    for seed, run_id in runs.items():
        path = runs_dir / run_id
        config = config_of(path)
        assert config["sweep"] == tag and config["seed"] == int(seed)
        assert config["params"]["sigma"] == values["sigma"]
        assert config["params"]["learning_rate"] == values["learning_rate"]
        assert config["episodes"] == values["episodes"]
        expected = (
            ("COMPLETED",) if trial.state == TrialState.COMPLETE else ("COMPLETED", "INTERRUPTED")
        )
        assert status_of(path) in expected
        paths.append(path)
    if trial.state == TrialState.COMPLETE:
        mean = sum(robust(p) for p in paths) / len(paths)
        assert trial.value == pytest.approx(mean, rel=1e-12)
        assert trial.intermediate_values[max(trial.intermediate_values)] == pytest.approx(mean)
    return paths


# -- a SQLite study, shared by the tests of its outputs ------------------------------------


@dataclass
class Study:
    runs_dir: Path
    url: str
    out: Path
    stdout: str


@pytest.fixture(scope="module")
def sqlite_study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    """3 trials x 2 seeds x 3,000 timesteps, the best re-evaluated on seed 50: 7 runs, about
    15 CPU-seconds in all (10 s of wall-clock on 2 idle cores)."""
    folder = tmp_path_factory.mktemp("tune")
    runs_dir = folder / "runs"
    done = harness_cli(
        "tune",
        *COMMON,
        "--study",
        GROUP,
        "--trials",
        "3",
        "--seeds",
        "0",
        "1",
        "--check-seeds",
        "50",
        "--timesteps",
        "3000",
        "--evaluations",
        "5",
        "--space",
        str(space_file(folder)),
        "--runs-dir",
        str(runs_dir),
    )
    url = f"sqlite:///{(runs_dir / '_tune' / 'tune.db').absolute()}"
    return Study(runs_dir, url, runs_dir / "_tune" / NAME, done.stdout)


def test_trials_are_tagged_runs_scored_by_the_last_three_evaluations(sqlite_study: Study) -> None:
    from optuna.trial import TrialState

    study = load_study(sqlite_study.url)
    trials = study.get_trials()
    assert [t.number for t in trials] == [0, 1, 2]
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    seen: list[Path] = []
    for trial in trials:
        seen += check_trial_runs(sqlite_study.runs_dir, trial, [0, 1])
    # the check run of the best trial, on its own tag; nothing else, nothing twice
    recheck = study.user_attrs["recheck"]
    check = sqlite_study.runs_dir / recheck["runs"]["50"]
    assert config_of(check)["sweep"] == f"{NAME}-check" and config_of(check)["seed"] == 50
    assert recheck["trial"] == study.best_trial.number
    assert recheck["score"] == pytest.approx(robust(check))
    assert sorted(run_dirs(sqlite_study.runs_dir)) == sorted([*seen, check])
    # the study records its equal-effort budget and what its objective is
    assert study.user_attrs["budget"] == "3 trials x 2 seeds x 3,000 timesteps"
    assert study.user_attrs["run_budget"] == {"timesteps": 3000}
    assert "last 3 evaluations" in study.user_attrs["objective"]
    assert "last 3 evaluations" in sqlite_study.stdout
    # reportable like any run: the sweep filter finds the study's runs
    import harness

    table = harness.load_runs(sqlite_study.runs_dir, sweep=NAME, statuses=("COMPLETED",))
    completed = [p for p in seen if status_of(p) == "COMPLETED"]
    assert len(table) == len(completed)


def test_outputs_best_yaml_trials_csv_and_report(sqlite_study: Study) -> None:
    import pandas as pd

    study = load_study(sqlite_study.url)
    best = study.best_trial
    document = yaml.safe_load((sqlite_study.out / "best.yaml").read_text())
    assert document["trial"] == best.number and document["study"] == NAME
    assert document["tuning_score"] == pytest.approx(best.value)
    assert document["recheck_score"] == pytest.approx(study.user_attrs["recheck"]["score"])
    values = best.user_attrs["values"]
    assert document["set"] == {k: v for k, v in values.items() if k != "episodes"}
    assert document["flags"] == {"episodes": values["episodes"]}
    frame = pd.read_csv(sqlite_study.out / "trials.csv")
    assert list(frame["trial"]) == [t.number for t in study.get_trials()]
    by_number = {t.number: t.value for t in study.get_trials()}
    for number, objective in zip(frame["trial"], frame["objective"], strict=True):
        if by_number[number] is not None:
            assert objective == pytest.approx(by_number[number])
    report = (sqlite_study.out / "report.md").read_text()
    for png in ("tune_history.png", "tune_importances.png", "tune_best_curves.png"):
        assert f"({png})" in report
        data = (sqlite_study.out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert f"**{best.number}**" in report
    assert (sqlite_study.out / "report.html").read_text().count("data:image/png;base64") == 3


def test_best_yaml_round_trips_through_harness_run(sqlite_study: Study, tmp_path: Path) -> None:
    document = yaml.safe_load((sqlite_study.out / "best.yaml").read_text())
    runs = tmp_path / "runs"
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--seed",
        "100",
        "--timesteps",
        "500",
        "--backend",
        "inline",
        "--runs-dir",
        str(runs),
        "--no-progress",
        *document["args"],
    )
    (run,) = run_dirs(runs)
    config = config_of(run)
    for key, value in document["set"].items():
        assert config["params"][key] == value  # exactly: no digit lost on the way
    assert config["episodes"] == document["flags"]["episodes"]


def test_a_sweep_runs_at_the_tuned_settings_and_names_the_study(
    sqlite_study: Study, tmp_path: Path
) -> None:
    from harness.report.settings import headline, reproduce_command
    from harness.sweep import SweepError, load_sweep

    study = load_study(sqlite_study.url)
    best = study.best_trial
    text = textwrap.dedent(f"""\
        name: at-best
        grid: {{algo: [optimes], env: [CartPole], seed: [100, 101]}}
        budget: {{timesteps: 1000}}
        tuned: {{study: {GROUP}, storage: "{sqlite_study.url}"}}
        """)
    path = tmp_path / "at-best.yaml"
    path.write_text(text)
    sweep = load_sweep(path)
    assert len(sweep.cells) == 2
    for cell in sweep.cells:
        config = cell.config
        assert config["params"]["sigma"] == best.user_attrs["values"]["sigma"]
        assert config["params"]["learning_rate"] == best.user_attrs["values"]["learning_rate"]
        assert config["episodes"] == best.user_attrs["values"]["episodes"]
        provenance = headline(config)["tuned"]
        assert f"study {NAME} trial {best.number}" in provenance
        assert "3 trials x 2 seeds x 3,000 timesteps" in provenance
        assert "tuning seeds 0 1" in provenance
        assert "tuned" not in reproduce_command(config)
    path.write_text(text + "overrides:\n  optimes: [sigma=0.5]\n")
    with pytest.raises(SweepError, match="sigma of optimes is set both by tuned"):
        load_sweep(path)
    path.write_text(text.replace("[optimes]", "[optimes, snes]"))
    with pytest.raises(SweepError, match=f"no study '{GROUP}-snes'"):
        load_sweep(path)


# -- two processes, one study, a real PostgreSQL server ----------------------------------------


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster in a temporary folder, reached on a Unix socket there;
    Debian's postgresql is installed first where it is missing and apt-get is allowed."""
    bindir = _postgres_bin()
    if bindir is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], capture_output=True)
        bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    folder = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", "5432"  # the socket is in our folder: any port is free
    try:
        subprocess.run(
            [
                *as_user,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        options = f"-k {folder} -c listen_addresses='' -p {port} -c fsync=off"
        subprocess.run(
            [
                *as_user,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
        )
        import sqlalchemy

        server = f"postgresql+psycopg2://postgres@/postgres?host={folder}&port={port}"
        engine = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("CREATE DATABASE tune"))
        engine.dispose()
        yield f"postgresql+psycopg2://postgres@/tune?host={folder}&port={port}"
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def _tune_process(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "tune", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )


# slow: two tune processes and 5 runs side by side on a cluster started for the test (~30 s)
@pytest.mark.slow
def test_two_processes_share_a_study_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    from optuna.trial import TrialState

    runs_dir = tmp_path / "runs"
    args = (
        *COMMON,
        "--study",
        GROUP,
        "--trials",
        "5",
        "--seeds",
        "0",
        "--check-seeds",
        "--timesteps",
        "4000",
        "--space",
        str(space_file(tmp_path)),
        "--runs-dir",
        str(runs_dir),
        "--storage",
        postgres_url,
    )
    first, second = _tune_process(*args), _tune_process(*args)
    outputs = [proc.communicate(timeout=300) for proc in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outputs
    study = load_study(postgres_url)
    trials = study.get_trials()
    # exactly the target: none lost, none started beyond it, none run twice
    assert [t.number for t in trials] == [0, 1, 2, 3, 4]
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert len({t.user_attrs["process"] for t in trials}) == 2  # both processes took trials
    paths = [p for t in trials for p in check_trial_runs(runs_dir, t, [0])]
    assert len(set(paths)) == 5 and sorted(paths) == run_dirs(runs_dir)


# -- Ctrl-C and resumption ------------------------------------------------------------------


def _wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# slow: a trial interrupted mid-run, then the study run to its end (~30 s)
@pytest.mark.slow
def test_ctrl_c_requeues_the_trial_and_a_rerun_resumes_its_runs(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    runs_dir = tmp_path / "runs"
    args = (
        *COMMON,
        "--study",
        GROUP,
        "--trials",
        "2",
        "--seeds",
        "0",
        "1",
        "--check-seeds",
        "--timesteps",
        "400000",
        "--space",
        str(space_file(tmp_path)),
        "--runs-dir",
        str(runs_dir),
    )
    url = f"sqlite:///{(runs_dir / '_tune' / 'tune.db').absolute()}"
    proc = _tune_process(*args)

    # 400,000 timesteps (about 5 s a run) outlast the skew between the two runs' start-ups
    # on a loaded machine: neither finishes before the other has checkpointed.
    def running_with_checkpoints() -> bool:
        dirs = run_dirs(runs_dir) if runs_dir.is_dir() else []
        return len(dirs) == 2 and all(
            (d / "checkpoint.pkl").is_file() and status_of(d) == "RUNNING" for d in dirs
        )

    _wait_for(running_with_checkpoints, 120, "trial 0's two runs to start")
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at a terminal: the command's process group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "trial(s) 0 marked FAIL and queued again" in err
    interrupted = run_dirs(runs_dir)
    assert [status_of(d) for d in interrupted] == ["INTERRUPTED", "INTERRUPTED"]
    study = load_study(url)
    first, queued = study.get_trials()
    assert first.state == TrialState.FAIL and "interrupted" in first.user_attrs["failure"]
    assert queued.state == TrialState.WAITING and queued.params == first.params
    assert queued.system_attrs["failed_trial"] == 0  # optuna's mark of a retried trial

    again = _tune_process(*args)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out, err)
    trials = load_study(url).get_trials()
    # 2 trials count: the queued copy of trial 0 (number 1) and one more; trial 0 does not
    assert trials[0].state == TrialState.FAIL
    assert [t.number for t in trials if t.state != TrialState.FAIL] == [1, 2]
    retry = trials[1]
    assert retry.params == first.params
    # the interrupted runs were continued in place, not made again
    assert sorted(runs_dir / r for r in retry.user_attrs["runs"].values()) == interrupted
    paths = [p for t in trials[1:] for p in check_trial_runs(runs_dir, t, [0, 1])]
    assert sorted(paths) == run_dirs(runs_dir)
    identities = {json.dumps({**config_of(p), "ray_address": None}, sort_keys=True) for p in paths}
    assert len(identities) == len(paths) == 4


# slow: starts a private Ray instance (~5 s, ~700 MB) for one trial of two runs (~40 s here)
@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # beside the other Ray tests (tests/conftest.py)
def test_trials_run_as_ray_work(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    harness_cli(
        "tune",
        *COMMON,
        "--study",
        GROUP,
        "--trials",
        "1",
        "--seeds",
        "0",
        "--check-seeds",
        "50",
        "--timesteps",
        "2000",
        "--space",
        str(space_file(tmp_path)),
        "--runs-dir",
        str(runs_dir),
        "--ray-address",
        "local",
        "--ship-every",
        "1",
    )
    study = load_study(f"sqlite:///{(runs_dir / '_tune' / 'tune.db').absolute()}")
    (trial,) = study.get_trials()
    (run,) = check_trial_runs(runs_dir, trial, [0])
    check = runs_dir / study.user_attrs["recheck"]["runs"]["50"]
    assert sorted(run_dirs(runs_dir)) == sorted([run, check])
    for path in (run, check):  # each ran as a Ray task and shipped its record here
        assert json.loads((path / "run.json").read_text())["head"]["ray_node"]


# -- bad input: exit status 2, one line, nothing written ------------------------------------


def _tune_usage(capsys: pytest.CaptureFixture[str], runs_dir: Path, *args: str) -> str:
    try:
        code = main(["tune", *COMMON, "--trials", "2", "--runs-dir", str(runs_dir), *args])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, captured.err
    assert lines[0].startswith("harness: error: ")
    assert not runs_dir.exists()  # nothing written
    return lines[0]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--timesteps", "1000", "--seeds", "0", "100"], ["--seeds 100", "held out"]),
        (["--timesteps", "1000", "--check-seeds", "250"], ["--check-seeds 250", "below 100"]),
        (["--timesteps", "1000", "--seeds", "-1"], ["--seeds", "'-1'"]),
        (["--timesteps", "1000", "--seeds", "0", "--check-seeds", "0"], ["--check-seeds 0"]),
        ([], ["--timesteps T or --cpu-limit SEC"]),
        (["--timesteps", "1000", "--cpu-limit", "5"], ["not both"]),
        (["--cpu-limit", "5", "--target-return", "100"], ["--target-return 100", "--timesteps"]),
        (["--timesteps", "1000", "--study", "a b"], ["--study", "'a b'"]),
        # COMMON fixes population, which the shipped optimes space samples
        (["--timesteps", "1000"], ["--set population=10", "search space"]),
    ],
)
def test_bad_flags_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], named: list[str]
) -> None:
    line = _tune_usage(capsys, tmp_path / "runs", *args)
    for text in named:
        assert text in line, line


@pytest.mark.parametrize(
    ("space", "named"),
    [
        ("optimes:\n  sigmaa: {float: [0.01, 0.1]}\n", ["sigmaa", "unknown parameter", "sigma"]),
        ("optimes:\n  sigma: {float: [0.2, 0.1]}\n", ["optimes.sigma", "inverted"]),
        ("optimes:\n  sigma: {float: [0.1, 0.1]}\n", ["optimes.sigma", "empty"]),
        ("optimes:\n  fitness_shaping: {choice: []}\n", ["fitness_shaping", "empty"]),
        ("optimes:\n  sigma: {float: [0, 0.1], log: true}\n", ["optimes.sigma", "above 0"]),
        ("optimes:\n  population: {int: [3, 8.5]}\n", ["population", "8.5"]),
        ("optimes:\n  optimizer: {choice: [adam, 3]}\n", ["optimizer", "3"]),
        ("optimes:\n  timesteps: {int: [10, 20]}\n", ["timesteps", "budget"]),
        ("optimes:\n  sigma: {float: [-0.1, 0.1]}\n", ["sigma = -0.1", "positive"]),
        ("snes:\n  sigma: {float: [0.1, 1]}\n", ["no search space for optimes"]),
    ],
)
def test_bad_spaces_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, space: str, named: list[str]
) -> None:
    path = space_file(tmp_path, space)
    line = _tune_usage(capsys, tmp_path / "runs", "--timesteps", "1000", "--space", str(path))
    for text in named:
        assert text in line, line


def test_an_unreachable_storage_is_refused(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg2://nobody:secret@127.0.0.1:{port}/none"
    runs_dir = tmp_path / "runs"
    done = harness_cli(
        "tune",
        *COMMON,
        "--trials",
        "2",
        "--timesteps",
        "1000",
        "--space",
        str(space_file(tmp_path)),
        "--runs-dir",
        str(runs_dir),
        "--storage",
        url,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "is unreachable" in lines[0] and f"127.0.0.1:{port}" in lines[0]
    assert "secret" not in lines[0]  # the password is not printed
    assert not runs_dir.exists()


# -- search spaces --------------------------------------------------------------------------


def _builtin_algorithms() -> list[str]:
    from algorithms.registry import algorithm_names, algorithm_source

    names = [n for n in algorithm_names() if algorithm_source(n).startswith("module algorithms.")]
    return [*names, "ng:CMA"]


@pytest.mark.parametrize("algo", _builtin_algorithms())
def test_every_shipped_algorithm_has_a_space_whose_points_runs_accept(algo: str) -> None:
    import optuna

    from harness.config import build_run_config
    from harness.tune.space import EPISODES, load_space, split_values

    space = load_space(algo)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(8):
        trial = study.ask()
        values = space.sample(trial)
        for param in space.params:
            value = values[param.key]
            if param.kind == "same_as":
                assert value == values[str(param.same_as)]
            elif param.kind == "choice":
                assert value in param.values
            else:
                low, high = sorted(param.extremes())
                assert low <= value <= high
                if param.transform == "pow2":
                    assert value & (value - 1) == 0
            if param.at_most is not None:
                other, minus = param.at_most
                assert value <= values[other] - minus
        episodes, sets = split_values(values)
        given: dict[str, Any] = {"algo": algo, "env": "LunarLanderContinuous", "timesteps": 10**6}
        if episodes is not None:
            given[EPISODES] = episodes
        config = build_run_config(given, overrides=sets).config  # a run would take it
        for key, value in values.items():
            if key != EPISODES and "." not in key:
                assert config["params"][key] == value
        study.tell(trial, 0.0)


def test_the_zoo_ppo_space_is_reproduced(tmp_path: Path) -> None:
    """The PPO sampler of rl_zoo3 2.9.2 (hyperparams_opt.py), as optuna distributions."""
    from harness.tune.space import load_space

    space = {p.key: p for p in load_space("ppo").params}
    assert (space["batch_size"].name, space["batch_size"].low, space["batch_size"].high) == (
        "batch_size_pow",
        2,
        10,
    )
    assert space["gamma"].name == "one_minus_gamma" and space["gamma"].log
    assert sorted(space["gamma"].extremes()) == [pytest.approx(0.97), pytest.approx(0.9999)]
    assert space["net_arch"].labels == ("tiny", "small", "medium")
    assert space["net_arch"].values == ([64], [64, 64], [256, 256])
    assert space["clip_range"].values == (0.1, 0.2, 0.3, 0.4)


def test_a_plugin_algorithm_brings_its_own_space(tmp_path: Path) -> None:
    from harness.config import import_user_modules
    from harness.tune.space import SpaceError, load_space

    package = tmp_path / "tune_plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent("""\
        from dataclasses import replace

        from algorithms.registry import get_algorithm, register_definition

        space = {"sigma": {"float": [0.01, 0.5], "log": True}}
        optimes = get_algorithm("optimes")
        register_definition(replace(optimes, name="tune-plugin-es", search_space=space))
        """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import_user_modules(["tune_plugin_pkg"])
        space = load_space("tune-plugin-es")
        assert space.source == "the search_space of tune-plugin-es (module tune_plugin_pkg)"
        assert [p.key for p in space.params] == ["sigma"]
        # --space still wins, and its entry for the plugin is checked as any other
        override = space_file(tmp_path, "tune-plugin-es:\n  sigma: {float: [0.3, 0.2]}\n")
        with pytest.raises(SpaceError, match="inverted"):
            load_space("tune-plugin-es", override)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_sampler_is_seeded_by_the_study_seed_and_trial_count() -> None:
    """Every choice of a study comes from --seed: the same seed asks the same points."""
    import optuna

    from harness.tune.study import make_sampler

    def points(seed: int) -> list[dict[str, Any]]:
        study = optuna.create_study(direction="maximize")
        asked = []
        for _ in range(8):  # past the 3 random start trials: TPE's model is used too
            study.sampler = make_sampler(seed, 3, len(study.trials))
            trial = study.ask()
            x = trial.suggest_float("x", -2.0, 2.0)
            k = trial.suggest_categorical("k", ["a", "b"])
            study.tell(trial, -((x - 1.0) ** 2) + (k == "b"))
            asked.append(trial.params)
        return asked

    assert points(7) == points(7)
    assert points(7) != points(8)


def test_a_time_to_target_study_scores_the_timesteps_to_a_confirmed_return(
    tmp_path: Path,
) -> None:
    """``--target-return``: each run stops at its confirmed target, a trial's value is minus
    the mean of its runs' confirmed timesteps (the cap, or more, for a run that never
    confirmed), as the runs' own summaries give them; the study refuses to be continued
    as a score study."""
    from optuna.trial import TrialState

    runs_dir, cap = tmp_path / "runs", 20_000
    args = [
        *COMMON,
        "--set",
        "confirm_episodes=5",
        "--study",
        GROUP,
        "--seeds",
        "0",
        "1",
        "--check-seeds",
        "50",
        "--timesteps",
        str(cap),
        "--space",
        str(space_file(tmp_path)),
        "--runs-dir",
        str(runs_dir),
    ]
    done = harness_cli("tune", *args, "--trials", "2", "--target-return", "100")
    assert "confirmed return 100" in done.stdout
    study = load_study(f"sqlite:///{(runs_dir / '_tune' / 'tune.db').absolute()}")
    assert (study.user_attrs["objective_target"], study.user_attrs["objective_cap"]) == (100, cap)
    confirmed = 0
    for trial in study.get_trials():
        assert trial.state == TrialState.COMPLETE
        values = []
        for run_id in trial.user_attrs["runs"].values():
            summary = json.loads((runs_dir / run_id / "summary.json").read_text())
            reached = summary["target"]["confirmed"]
            if reached is None:
                values.append(-max(cap, summary["timesteps"]))
            else:
                confirmed += 1
                assert summary["timesteps"] == reached["timesteps"]  # it stopped there
                assert reached["return_mean"] >= 100
                values.append(-reached["timesteps"])
        assert trial.value == pytest.approx(sum(values) / len(values), rel=1e-12)
        assert trial.intermediate_values[max(trial.intermediate_values)] == trial.value
    assert confirmed  # CartPole confirms 100 well inside 20,000 timesteps at these settings
    best = yaml.safe_load((runs_dir / "_tune" / NAME / "best.yaml").read_text())
    assert best["tuning_score"] == study.best_value and "confirmed return 100" in best["objective"]
    again = harness_cli("tune", *args, "--trials", "3", check=False)
    assert again.returncode == 2, again.stderr
    assert "'target_return': 100.0}, not {'timesteps': 20000}" in again.stderr


def test_intermediate_values_wait_for_every_seed() -> None:
    from harness.tune.scores import intermediate, trial_value

    assert intermediate([([1.0, 2.0], False), ([3.0], False)], 1) is None  # seed 2 not there
    assert intermediate([([1.0, 2.0], False), ([3.0], True)], 1) == trial_value([[1, 2], [3]])
    assert intermediate([([1.0, 2.0], True), ([3.0], True)], 2) is None  # past every run
    four = [10.0, 20.0, 30.0, 40.0]
    assert trial_value([four]) == 30.0  # the mean of the last 3


def test_the_equal_effort_study_file_gives_every_algorithm_one_budget(tmp_path: Path) -> None:
    """experiments/tune_lander.yaml through scripts/tune_lander.py: one `harness tune` for all
    algorithms (one budget each), tuning seeds below 100, held-out sweeps from 100 on."""
    import importlib.util

    from harness.sweep import load_sweep

    spec = importlib.util.spec_from_file_location(
        "tune_lander", ROOT / "scripts" / "tune_lander.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    plan = script.read_plan(ROOT / "experiments" / "tune_lander.yaml")
    command = script.tune_command(plan, tmp_path)
    algos = command[command.index("--algo") + 1 : command.index("--env")]
    assert algos == ["optimes", "snes", "ppo"]
    assert max(plan["seeds"] + plan["check_seeds"]) < 100 <= min(plan["holdout"]["seeds"])
    shipped, tuned = script.holdout_sweeps(plan, tmp_path)
    sweep = load_sweep(shipped)  # the tuned one needs the studies; same grid and budget
    assert {c.config["algo"] for c in sweep.cells} == set(algos)
    assert {c.config["seed"] for c in sweep.cells} == set(plan["holdout"]["seeds"])
    assert {c.config["timesteps"] for c in sweep.cells} == {plan["holdout"]["budget"]["timesteps"]}
    assert yaml.safe_load(tuned.read_text())["tuned"]["study"] == plan["study"]


def test_the_study_costs_are_summed_per_sweep_from_each_run_record(tmp_path: Path) -> None:
    """scripts/tune_lander.py's costs: per sweep name (study, re-check, held-out group), the
    runs, timesteps, CPU- and wall-seconds their summaries record; a half-written run adds
    nothing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tune_lander", ROOT / "scripts" / "tune_lander.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    records = [("s-optimes", 100, 7.5, 70.0), ("s-optimes", 101, 8.5, 80.0), ("s-ppo", 99, 60, 9)]
    for number, (sweep, steps, cpu, wall) in enumerate(records, start=1):
        run = tmp_path / str(number)
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"sweep": sweep}))
        summary = {"timesteps": steps, "cpu_seconds": cpu, "wall_time_s": wall}
        (run / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "config.json").write_text(json.dumps({"sweep": "s-ppo"}))
    rows = script.cost_rows([tmp_path])
    assert rows == [
        {"group": "s-optimes", "runs": 2, "timesteps": 201, "cpu_seconds": 16.0,
         "wall_seconds": 150.0},
        {"group": "s-ppo", "runs": 1, "timesteps": 99, "cpu_seconds": 60.0, "wall_seconds": 9.0},
    ]  # fmt: skip
