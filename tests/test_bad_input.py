"""Bad input: exit status 2, one line naming the bad value, and no run directory.

Every case runs the real CLI as a subprocess.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

RUN = ("run", "--algo", "optimes", "--env", "CartPole", "--generations", "2")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HARNESS_PROGRESS": "0"}
    full_env.pop("RAY_ADDRESS", None)  # only the case that sets it uses one
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=120,
    )


def _assert_usage_error(result: subprocess.CompletedProcess[str], *named: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("harness: error: "), lines[0]  # one prefix everywhere
    for text in named:
        assert text in lines[0], (text, lines[0])
    assert result.stdout == ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


RUN_CASES = [
    (["--algo", "nope"], ["'nope'", "unknown algorithm"]),
    (["--algo", "cma", "--set", "sync=seeds"], ["cma", "sync=seeds"]),
    (["--algo", "ppo", "--set", "policy.kind=lstm"], ["policy.kind", "does not apply to ppo"]),
    (["--env", "NoSuchEnv"], ["'NoSuchEnv'", "unknown environment"]),
    (["--episodes", "0"], ["episodes", "0"]),
    (["--episodes", "-2"], ["episodes", "-2"]),
    (["--workers", "0"], ["workers", "0"]),
    (["--timesteps", "0"], ["timesteps", "0"]),
    (["--generations", "-5"], ["generations", "-5"]),
    (["--time-limit", "-1"], ["time limit", "-1"]),
    (["--cpu-limit", "0"], ["cpu limit", "0"]),
    (["--set", "timesteps=0"], ["timesteps", "0"]),
    (["--set", "nope=1"], ["'nope'", "unknown --set key"]),
    (["--set", "popultion=10"], ["'popultion'", "population"]),
    (["--set", "population=many"], ["population", "'many'"]),
    (["--set", "sigma=[1, 2]"], ["sigma", "[1, 2]"]),
    (["--set", "fail_on_env_error=maybe"], ["fail_on_env_error", "'maybe'"]),
    (["--set", "population"], ["'population'", "key=value"]),
    (["--set", "policy.kind=cnn"], ["policy.kind", "'cnn'"]),
    (["--set", "eval_episodes=0"], ["eval_episodes", "0"]),
    (["--backend", "cluster"], ["'cluster'", "backend"]),
    (["--seed", "-1"], ["seed", "-1"]),
    (["--workers", "many"], ["workers", "'many'"]),
    # numbers as people write them: an integer knob takes 1e5, not a fraction
    (["--timesteps", "1.5e0"], ["timesteps", "'1.5e0'"]),
    (["--set", "timesteps=1.5e0"], ["timesteps", "1.5"]),
    (["--set", "population=2.55e1"], ["population", "25.5"]),
    # knobs the algorithm does not use are refused, not ignored
    (["--algo", "ppo", "--episodes", "5"], ["--episodes-per-fitness (episodes)", "ppo"]),
    (["--algo", "a2c", "--episodes-per-fitness", "1"], ["episodes", "a2c"]),
    (["--algo", "ppo", "--backend", "inline"], ["--backend", "ppo"]),
    (["--algo", "ppo", "--set", "sync=seeds"], ["sync", "ppo"]),
    (["--algo", "ppo", "--set", "policy.discretize=5"], ["policy.discretize", "ppo"]),
    (["--algo", "ppo", "--set", "population_per_worker=4"], ["population_per_worker", "ppo"]),
    # names users know elsewhere are suggested
    (["--set", "popsize=10"], ["'popsize'", "did you mean: population"]),
    (["--set", "lr=0.1"], ["'lr'", "learning_rate"]),
    (["--algo", "cma", "--set", "sigma=0.5"], ["'sigma'", "sigma0"]),
    (["--set", "sigma0=0.5"], ["'sigma0'", "did you mean: sigma"]),
    (["--set", "num_envs=4"], ["'num_envs'", "--workers"]),
    (["--algo", "ppo", "--set", "num_envs=4"], ["'num_envs'", "n_envs"]),
    (["--set", "episodes=5"], ["'episodes'", "--episodes-per-fitness"]),
    # issue 26: values that used to get through
    (["--seed", "4294967296"], ["seed", "4294967296"]),
    (["--set", "sigma=.nan"], ["sigma", "nan"]),
    (["--set", "sigma=.inf"], ["sigma", "inf"]),
    (["--set", "noise_size=10"], ["noise_size 10", "parameters"]),
    (["--time-limit", "nan"], ["time limit", "'nan'"]),
    (["--target-return", "nan"], ["target return", "'nan'"]),
    (["--set", "target_return=.inf"], ["target_return", "inf"]),
    (["--set", "learning_rate=-1"], ["learning_rate", "-1"]),
    (["--workers", "100000"], ["workers 100000", "--oversubscribe"]),
    (["--set", "population=10000000000"], ["population 10000000000", "memory"]),
    (["--timesteps", "100", "--set", "population=1000"], ["population 1000", "100 timesteps"]),
]


@pytest.mark.parametrize(("extra", "named"), RUN_CASES, ids=[" ".join(c[0]) for c in RUN_CASES])
def test_bad_run_flags(tmp_path: Path, extra: list[str], named: list[str]) -> None:
    runs = tmp_path / "runs"
    _assert_usage_error(_cli(*RUN, "--runs-dir", str(runs), *extra), *named)
    assert not runs.exists()


def test_unwritable_runs_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _assert_usage_error(
        _cli(*RUN, "--runs-dir", str(blocker / "runs")), str(blocker / "runs"), "which is a file"
    )
    _assert_usage_error(_cli(*RUN, "--runs-dir", str(blocker)), str(blocker), "is a file")
    # /proc refuses new entries even to root
    _assert_usage_error(
        _cli(*RUN, "--runs-dir", "/proc/es-harness-runs"), "/proc/es-harness-runs", "not writable"
    )
    if os.geteuid() != 0:  # root may write anywhere a mode bit forbids
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        _assert_usage_error(_cli(*RUN, "--runs-dir", str(locked / "runs")), "not writable")
        assert list(locked.iterdir()) == []


def test_unreachable_ray_address(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    port = _free_port()
    ray = (
        "run",
        "--algo",
        "optimes",
        "--env",
        "CartPole",
        "--generations",
        "2",
        "--backend",
        "ray",
        "--runs-dir",
        str(runs),
    )
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        _assert_usage_error(_cli(*ray, "--ray-address", address), repr(address), "unreachable")
    _assert_usage_error(_cli(*ray, "--ray-address", "localhost:http"), "'http'")
    _assert_usage_error(
        _cli(*ray, env={"RAY_ADDRESS": f"127.0.0.1:{port}"}), f"'127.0.0.1:{port}'", "unreachable"
    )
    empty = tmp_path / "no-ray"
    empty.mkdir()
    _assert_usage_error(
        _cli(*ray, "--ray-address", "auto", env={"RAY_TMPDIR": str(empty)}),
        "'auto'",
        "no running Ray cluster",
    )
    assert not runs.exists()


YAML_CASES = [
    ("malformed", "algo: optimes\nenv: [CartPole\n", ["malformed YAML", "line"]),
    ("unknown-key", "algo: optimes\nenv: CartPole\nbudgett: {timesteps: 10}\n", ["'budgett'"]),
    ("unknown-budget", "algo: optimes\nenv: CartPole\nbudget: {steps: 10}\n", ["'steps'"]),
    ("not-a-mapping", "- optimes\n- CartPole\n", ["must be a mapping"]),
    (
        "bad-seed",
        "algo: optimes\nenv: CartPole\nseed: one\nbudget: {timesteps: 10}\n",
        ["seed", "'one'"],
    ),
    (
        "bad-episodes",
        "algo: optimes\nenv: CartPole\nepisodes: 0\nbudget: {timesteps: 10}\n",
        ["episodes", "0"],
    ),
    (
        "bad-set",
        "algo: optimes\nenv: CartPole\nbudget: {timesteps: 10}\nset: {sigmaa: 1}\n",
        ["'sigmaa'"],
    ),
    (
        "bad-budget",
        "algo: optimes\nenv: CartPole\nbudget: {timesteps: -10}\n",
        ["timesteps", "-10"],
    ),
    ("time-limit", "algo: optimes\nenv: CartPole\nbudget: {time_limit: 10}\n", ["time_limit"]),
    ("cpu-limit", "algo: optimes\nenv: CartPole\nbudget: {cpu_limit: 10}\n", ["cpu_limit"]),
    (
        "unsafe",
        "algo: !!python/object/apply:os.system ['echo pwned']\nenv: CartPole\n",
        ["malformed YAML"],
    ),
]


@pytest.mark.parametrize(("name", "text", "named"), YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_bad_check_repro_yaml(tmp_path: Path, name: str, text: str, named: list[str]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    keep = tmp_path / "keep"
    result = _cli("check-repro", "--config", str(path), "--keep", str(keep))
    _assert_usage_error(result, *named)
    assert not keep.exists()


def test_missing_yaml_file(tmp_path: Path) -> None:
    _assert_usage_error(
        _cli("check-repro", "--config", str(tmp_path / "absent.yaml")), "absent.yaml"
    )


def _million_cells() -> str:
    axis = ", ".join(str(value) for value in range(1, 1001))
    return (
        "name: big\ngrid: {algo: [optimes], env: [CartPole], "
        f"seed: [{axis}], episodes: [{axis}]}}\n"
    )


GRID = "grid: {algo: [optimes], env: [CartPole]}\n"
#: Sweep files that used to be accepted or to crash: (id, contents, what the line names).
SWEEP_CASES = [
    ("duplicate-key", f"name: a\nname: b\n{GRID}", ["duplicate key 'name'"]),
    ("top-level-seed", f"name: a\nseed: [1]\n{GRID}", ["'seed'", "did you mean grid.seed"]),
    ("binary", "name: a\udcff\n", ["not a text file"]),
    ("million-cells", _million_cells(), ["1000000 cells", "--force"]),
    (
        "workers-far-above-cpus",
        "name: a\ngrid: {algo: [optimes], env: [CartPole], workers: [100000]}\n",
        ["workers 100000", "--oversubscribe"],
    ),
    (
        "seed-too-large",
        "name: a\ngrid: {algo: [optimes], env: [CartPole], seed: [4294967296]}\n",
        ["seed", "4294967296"],
    ),
]


@pytest.mark.parametrize(("name", "text", "named"), SWEEP_CASES, ids=[c[0] for c in SWEEP_CASES])
def test_bad_sweep_files(tmp_path: Path, name: str, text: str, named: list[str]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    runs = tmp_path / "runs"
    _assert_usage_error(_cli("sweep", str(path), "--runs-dir", str(runs)), *named)
    assert not runs.exists()


def test_bad_report_out(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "1").mkdir(parents=True)
    existing = tmp_path / "a-file"
    existing.write_text("not a directory")
    _assert_usage_error(_cli("report", str(runs), "--out", str(existing)), "is a file")
    _assert_usage_error(
        _cli("report", str(runs), "--out", str(existing / "report")), "which is a file"
    )
    _assert_usage_error(
        _cli("report", str(runs), "--out", "/proc/es-harness-report"), "not writable"
    )
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", str(read_only)], check=False
    )
    if mounted.returncode == 0:  # a read-only place even for root
        try:
            _assert_usage_error(
                _cli("report", str(runs), "--out", str(read_only / "report")), "not writable"
            )
        finally:
            subprocess.run(["umount", str(read_only)], check=False)
    assert existing.read_text() == "not a directory"
