"""One line, never a traceback: hostile or mistaken input to every command (issue 60).

Each case once ended in a traceback (or was accepted where it should be refused); now a
command refuses it with one ``harness: error:`` line and exit status 2, a report skips
only the run at fault with one warning, and a sweep runs the cell of a run it cannot read
again. Commands run as real subprocesses (``harness_cli``), as a user would run them.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness import rundir
from tests.conftest import ROOT, harness_cli

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

CARTPOLE = ("--algo", "optimes", "--env", "CartPole")
TINY_RUN = (*CARTPOLE, "--generations", "1", "--backend", "inline", "--workers", "1")


def assert_one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, exactly one ``harness: error:`` line, no traceback; the line holds ``needles``."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("harness: error:")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real, finished CartPole run (one generation)."""
    runs = tmp_path_factory.mktemp("tiny") / "runs"
    harness_cli("run", *TINY_RUN, "--runs-dir", str(runs), "--no-progress")
    return runs / "1"


def _copy_run(run_dir: Path, to: Path) -> Path:
    shutil.copytree(run_dir, to)
    return to


def _set_field(run_dir: Path, name: str, path: tuple[Any, ...], value: Any) -> None:
    """Replace the field at ``path`` (keys and list indices) of ``run_dir/name``."""
    file = run_dir / name
    data = json.loads(file.read_text())
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    file.write_text(json.dumps(data))


# -- command lines ------------------------------------------------------------------------------

DEEP_YAML = "[" * 5000 + "]" * 5000


def _files(folder: Path) -> dict[str, Path]:
    """Sweep and search-space files, each with one hostile part."""
    sweep = "name: s\ngrid:\n  algo: [optimes]\n  env: [CartPole]\nbudget: {generations: 1}\n"
    texts = {
        "sweep_complex_key": sweep + "? [a]\n: 1\n",
        "sweep_deep": sweep + f"x: {DEEP_YAML}\n",
        "sweep_set_value": sweep.replace("env: [CartPole]", "env: [CartPole]\n  sigma: !!set {1}"),
        "sweep_date_value": sweep.replace(
            "env: [CartPole]", "env: [CartPole]\n  sigma: [2024-01-01]"
        ),
        "space_complex_key": "optimes:\n  ? [a]\n  : 1\n",
        "space_deep": f"optimes: {DEEP_YAML}\n",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(text)
    return paths


TUNE = ("tune", *CARTPOLE, "--timesteps", "100000", "--trials", "1")

#: argv (``{file}``: a file of :func:`_files`, ``{runs}``: a fresh runs folder, ``{run}``:
#: the tiny run) -> what the one error line must name.
CLI_CASES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "discretize_huge": (
        ["run", *CARTPOLE, "--set", "policy.discretize=1e13", "--print-config"],
        ("policy.discretize", "10000000000000"),
    ),
    "discretize_on_a_discrete_env": (
        ["run", *TINY_RUN, "--set", "policy.discretize=3", "--runs-dir", "{runs}"],
        ("discretize", "CartPole"),
    ),
    "set_value_nested_3000_deep": (
        ["run", *CARTPOLE, "--set", "sigma=" + "[" * 3000, "--print-config"],
        ("cannot parse value", "nested"),
    ),
    "algo_empty": (["run", "--algo", "", "--env", "CartPole", "--print-config"], ("''",)),
    "hidden_sizes_30000": (
        [
            *("run", *CARTPOLE, "--runs-dir", "{runs}", "--set"),
            "policy.hidden_sizes=[" + ",".join(["1"] * 30000) + "]",
        ],
        ("policy.hidden_sizes", "16 layers", "30000"),
    ),
    "hidden_size_too_wide": (
        ["run", *CARTPOLE, "--set", "policy.hidden_sizes=[100000]", "--print-config"],
        ("policy.hidden_sizes", "4096", "100000"),
    ),
    "sweep_complex_key": (["sweep", "{sweep_complex_key}", "--runs-dir", "{runs}"], ("key",)),
    "sweep_deep": (["sweep", "{sweep_deep}", "--runs-dir", "{runs}"], ("nested",)),
    "sweep_set_value": (["sweep", "{sweep_set_value}", "--runs-dir", "{runs}"], ("'set'",)),
    "sweep_date_value": (
        ["sweep", "{sweep_date_value}", "--runs-dir", "{runs}", "--dry-run"],
        ("sigma", "2024-01-01"),
    ),
    "space_complex_key": (
        [*TUNE, "--space", "{space_complex_key}", "--runs-dir", "{runs}"],
        ("key",),
    ),
    "space_deep": ([*TUNE, "--space", "{space_deep}", "--runs-dir", "{runs}"], ("nested",)),
    "storage_port_too_big": (
        [*TUNE, "--storage", "postgresql://u@localhost:99999999/db", "--runs-dir", "{runs}"],
        ("port 99999999",),
    ),
    "storage_port_not_a_number": (
        [*TUNE, "--storage", "postgresql://u:secret@localhost:abc/db", "--runs-dir", "{runs}"],
        ("not a database URL", "u:***@"),
    ),
    "storage_sqlite_option": (
        [*TUNE, "--storage", "sqlite:///x.db?timeout=abc", "--runs-dir", "{runs}"],
        ("--storage", "abc"),
    ),
    "storage_junk": ([*TUNE, "--storage", "junk", "--runs-dir", "{runs}"], ("'junk'",)),
    "enjoy_seed_negative": (["enjoy", "{run}", "--seed", "-1"], ("--seed", "-1")),
    "enjoy_seed_past_the_last": (
        ["enjoy", "{run}", "--seed", str(2**32 - 1), "--episodes", "2"],
        ("--seed", "4,294,967,295"),
    ),
    "enjoy_episodes_1e11": (["enjoy", "{run}", "--episodes", "1e11"], ("--episodes", "1e11")),
    "enjoy_fps_inf": (["enjoy", "{run}", "--fps", "inf"], ("--fps", "inf")),
    "enjoy_fps_huge": (["enjoy", "{run}", "--fps", "1e300"], ("--fps", "1e300")),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_a_bad_command_line_is_one_line(case: str, tiny_run: Path, tmp_path: Path) -> None:
    argv, needles = CLI_CASES[case]
    runs = tmp_path / "runs"
    names = {**_files(tmp_path), "runs": runs, "run": tiny_run}
    args = [arg.format(**names) if arg.startswith("{") else arg for arg in argv]
    result = harness_cli(*args, check=False, timeout=120)
    assert_one_error_line(result, *needles)
    assert not runs.exists(), "nothing may be written"


# -- records: a report skips the run at fault, enjoy refuses it -----------------------------

#: (file, field path, hostile value, what the one line names)
RECORD_CASES: dict[str, tuple[str, tuple[Any, ...], Any, str]] = {
    "algo_null": (rundir.CONFIG, ("algo",), None, "algo"),
    "seed_text": (rundir.CONFIG, ("seed",), "x", "seed"),
    "eval_episodes_0": (rundir.CONFIG, ("eval_episodes",), 0, "eval_episodes"),
    "max_episode_steps_text": (rundir.CONFIG, ("max_episode_steps",), "x", "max_episode_steps"),
    "noise_size_list": (rundir.CONFIG, ("params", "noise_size"), [1, 2], "noise_size"),
    "hidden_sizes_30000": (
        rundir.CONFIG,
        ("policy", "hidden_sizes"),
        [1] * 30000,
        "hidden_sizes",
    ),
    "host_text": (rundir.RUN, ("host",), "x", "host"),
    "no_start_time": (rundir.RUN, ("start_time",), None, "start_time"),
    "steps_text": (rundir.METRICS, ("timesteps", "steps", 0), "a", "steps"),
}


@pytest.fixture(scope="module")
def damaged_runs(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder: the tiny run as run 1, then one copy per record case, each damaged."""
    runs = tmp_path_factory.mktemp("damaged") / "runs"
    runs.mkdir()
    _copy_run(tiny_run, runs / "1")
    for index, (name, path, value, _) in enumerate(RECORD_CASES.values(), start=2):
        _set_field(_copy_run(tiny_run, runs / str(index)), name, path, value)
    return runs


def _case_dir(runs: Path, case: str) -> Path:
    return runs / str(list(RECORD_CASES).index(case) + 2)


@pytest.fixture(scope="module")
def damaged_report(damaged_runs: Path) -> subprocess.CompletedProcess[str]:
    """``harness report`` over every damaged run and the whole one, once."""
    out = damaged_runs.parent / "report"
    return harness_cli("report", str(damaged_runs), "--out", str(out), check=False, timeout=600)


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_a_report_skips_only_the_run_with_a_bad_field(
    case: str, damaged_runs: Path, damaged_report: subprocess.CompletedProcess[str]
) -> None:
    result = damaged_report
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    run_dir = _case_dir(damaged_runs, case)
    warned = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("harness: warning:") and f"{run_dir.parent.name}/{run_dir.name}:" in line
    ]
    assert len(warned) == 1, result.stderr
    assert RECORD_CASES[case][3] in warned[0]
    # the other runs are reported: the whole one, alone
    assert "harness: error:" not in result.stderr
    with (damaged_runs.parent / "report" / "runs.csv").open(newline="") as stream:
        assert [row["run_id"] for row in csv.DictReader(stream)] == ["1"]


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_load_runs_skips_the_run_with_a_bad_field(case: str, damaged_runs: Path) -> None:
    """In process: the run at fault is left out with one warning line naming its field."""
    from harness.records import RunDirWarning, load_runs

    run_dir = _case_dir(damaged_runs, case)
    folder = run_dir.parent.parent / f"only-{case}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    shutil.copytree(damaged_runs / "1", folder / "1")
    shutil.copytree(run_dir, folder / "2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RunDirWarning)
        table = load_runs([folder])
    messages = [str(w.message) for w in caught if issubclass(w.category, RunDirWarning)]
    assert len(messages) == 1 and "\n" not in messages[0], messages
    assert RECORD_CASES[case][3] in messages[0]
    assert list(table.runs["run_id"]) == ["1"]


@pytest.mark.parametrize("case", ["max_episode_steps_text", "seed_text", "algo_null"])
def test_enjoy_refuses_a_run_with_a_bad_field(case: str, damaged_runs: Path) -> None:
    run_dir = _case_dir(damaged_runs, case)
    result = harness_cli("enjoy", str(run_dir), "--episodes", "1", check=False, timeout=120)
    assert_one_error_line(result, str(run_dir), RECORD_CASES[case][3])


def test_a_report_of_an_archive_named_only_its_suffix(tiny_run: Path, tmp_path: Path) -> None:
    """A file named ``.tar.xz`` (no name of its own) once unpacked onto its own folder."""
    archive = tmp_path / ".tar.xz"
    rundir.write_run_archive([tiny_run], archive)
    result = harness_cli("report", str(archive), "--out", str(tmp_path / "out"), check=False)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "report.md").is_file()


# -- sweeps: a planted run matches no cell it is not -----------------------------------------


SWEEP = (
    "name: planted\ngrid:\n  algo: [optimes]\n  env: [CartPole]\n  seed: [0]\n  workers: [1]\n"
    "budget: {generations: 1}\nbackend: inline\n"
)


def _planted(runs: Path, run_entry: dict[str, Any]) -> Path:
    """A three-file run: config, run and metrics only, as an attacker writes one."""
    planted = runs / "1"
    planted.mkdir(parents=True)
    (planted / rundir.CONFIG).write_text(json.dumps({"algo": "optimes", "env": "CartPole"}))
    (planted / rundir.RUN).write_text(json.dumps(run_entry))
    (planted / rundir.METRICS).write_text("{}")
    return planted


@pytest.mark.parametrize(
    "run_entry",
    [{"status": "COMPLETED"}, {"status": "COMPLETED", "start_time": "2024-01-01T00:00:00"}],
    ids=["no_start_time", "with_start_time"],
)
def test_a_planted_three_file_run_completes_no_cell(
    run_entry: dict[str, Any], tmp_path: Path
) -> None:
    """It once ended the sweep in ``KeyError: 'start_time'``, or (with a start time) made
    every cell "already completed"; now it is unreadable: one warning, the cell runs."""
    runs = tmp_path / "runs"
    planted = _planted(runs, run_entry)
    sweep = tmp_path / "planted.yaml"
    sweep.write_text(SWEEP)
    result = harness_cli("sweep", str(sweep), "--runs-dir", str(runs), check=False, timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if str(planted) in line]
    assert len(warned) == 1 and warned[0].startswith("harness: warning:"), result.stderr
    statuses = [rundir.read_status(run) for run in rundir.run_dirs(runs) if run != planted]
    assert statuses == ["COMPLETED"], result.stderr


def test_a_stored_run_with_a_bad_field_is_not_a_done_cell(tiny_run: Path, tmp_path: Path) -> None:
    """The sweep's reader of done cells: a real run of the cell, one field damaged, is not
    done (one warning); the whole run is."""
    from harness.sweep.spec import load_sweep
    from harness.sweep.store import completed_runs, find_completed

    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP)
    cell = load_sweep(sweep).cells[0]
    runs = tmp_path / "runs"
    _copy_run(tiny_run, runs / "1")
    (runs / "1" / rundir.CONFIG).write_text(json.dumps(cell.config))  # this cell's run
    reasons: list[str] = []

    def heard(path: Path, reason: str) -> None:
        reasons.append(reason)

    assert find_completed(cell, completed_runs(runs, heard), heard) == "1"
    _set_field(runs / "1", rundir.CONFIG, ("seed",), "0")
    assert find_completed(cell, completed_runs(runs, heard), heard) is None
    assert len(reasons) == 1 and "seed" in reasons[0]


# -- Ctrl-C at the very start -----------------------------------------------------------------

#: A ``sitecustomize`` that sends this process SIGINT as it is about to import ``TARGET``:
#: a Ctrl-C landing at that moment of the start, every time.
SIGINT_AT_IMPORT = """
import os, signal, sys

class _SigintAt:
    def find_spec(self, name, path=None, target=None):
        if name == {target!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _SigintAt())
"""


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "harness"
    return [str(script)] if script.is_file() else []


@pytest.mark.parametrize("target", ["harness.cli", "harness.commands", "harness.schema", "yaml"])
@pytest.mark.parametrize("entry", ["module", "console_script"])
def test_ctrl_c_in_the_first_milliseconds_is_one_line(
    target: str, entry: str, tmp_path: Path
) -> None:
    """SIGINT 40-50 ms after start (the package's own imports, before ``harness.cli``
    runs) once gave a KeyboardInterrupt traceback."""
    command = [sys.executable, "-m", "harness.cli"] if entry == "module" else _console_script()
    if not command:
        pytest.skip("no harness console script beside this Python")
    (tmp_path / "sitecustomize.py").write_text(SIGINT_AT_IMPORT.format(target=target))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run(
        [*command, "list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path, "HARNESS_PROGRESS": "0"},
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (130, 2), (result.returncode, result.stderr)
    assert result.stderr.strip().splitlines() == ["harness: interrupted"], result.stderr


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    """`harness list | head -1`: the pipe closes under the listing; the command ends quietly."""
    harness = Path(sys.executable).with_name("harness")
    listing = subprocess.Popen(
        [str(harness), "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert listing.stdout is not None and listing.stderr is not None
    listing.stdout.readline()
    listing.stdout.close()  # the reader is gone before the listing is written
    stderr = listing.stderr.read().decode()
    assert listing.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
