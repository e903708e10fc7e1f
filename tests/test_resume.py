"""Checkpoints, Ctrl-C, SIGKILL and `harness resume`, through real processes and real files.

The reference is an uninterrupted 30-generation OptimES run on CartPole. The
interrupted runs start with a huge budget, get a real signal once a
checkpoint exists, and are resumed with ``--generations 30``: the budget only
decides where a run stops, so their metrics must equal the reference's exactly
(timings and byte counts aside), whatever step the signal landed on.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.checkpoint import (
    INTERRUPT_ENV,
    CheckpointError,
    load_checkpoint,
    remove_stale_temporaries,
    save_checkpoint,
)
from harness.repro import diff_metrics
from tests.conftest import ROOT, harness_cli, only_run_dir, read_run

GENERATIONS = 30
CARTPOLE = ("--algo", "optimes", "--env", "CartPole", "--seed", "2")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = tmp_path_factory.mktemp("reference")
    harness_cli(
        "run",
        *CARTPOLE,
        "--generations",
        str(GENERATIONS),
        "--backend",
        "inline",
        "--runs-dir",
        str(runs),
    )
    record = read_run(only_run_dir(runs))
    assert record["run"]["status"] == "COMPLETED"
    metrics: dict[str, Any] = record["metrics"]
    return metrics


def _start_long_run(runs: Path, *extra: str) -> subprocess.Popen[str]:
    """A run with a budget it will not reach, in its own session (its own process group)."""
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            *CARTPOLE,
            "--timesteps",
            "100000000",
            "--runs-dir",
            str(runs),
            "--set",
            "checkpoint_every=2",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_checkpoint(runs: Path, proc: subprocess.Popen[str], step: int) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        path = runs / "1" / "checkpoint.pkl"
        if path.exists():
            try:
                reached = int(load_checkpoint(path)["progress"]["step"])
            except CheckpointError:  # the rename is atomic: this must never happen
                raise
            if reached >= step:
                return reached
        time.sleep(0.02)
    raise AssertionError("no checkpoint appeared")


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [
            p
            for p in pids
            if Path(f"/proc/{p}").exists()
            and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()
        ]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _assert_same(reference: dict[str, Any], metrics: dict[str, Any]) -> None:
    assert diff_metrics(reference, metrics, "uninterrupted", "resumed") == []
    steps = metrics["timesteps"]["steps"]
    assert steps == list(range(1, GENERATIONS + 1))


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl-c", "kill"])
def test_ctrl_c_writes_a_checkpoint_and_resume_matches(
    reference: dict[str, Any], tmp_path: Path, stop: str
) -> None:
    runs = tmp_path / "runs"
    proc = _start_long_run(runs, "--backend", "process", "--workers", "2")
    _wait_for_checkpoint(runs, proc, 3)
    workers = _children(proc.pid)
    if stop == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole group
    else:
        proc.terminate()  # `kill PID`: SIGTERM to the head alone
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "harness resume" in stderr
    assert _gone(workers), "worker processes outlived the interrupted head"

    run_dir = runs / "1"
    assert read_run(run_dir)["run"]["status"] == "INTERRUPTED"
    step = int(load_checkpoint(run_dir / "checkpoint.pkl")["progress"]["step"])
    assert 3 <= step < GENERATIONS

    harness_cli("resume", str(run_dir), "--generations", str(GENERATIONS))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    (resumed,) = record["run"]["resumed"]
    assert resumed["from_step"] == step and resumed["previous_status"] == "INTERRUPTED"
    assert record["config"]["generations"] == GENERATIONS
    _assert_same(reference, record["metrics"])
    assert "--- resumed" in (run_dir / "cout.txt").read_text()


@pytest.mark.slow
def test_killed_head_resumes_from_its_last_checkpoint(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    proc = _start_long_run(runs, "--backend", "process", "--workers", "2")
    _wait_for_checkpoint(runs, proc, 3)
    run_dir = runs / "1"
    # Stopped, the head still holds its run's lock but takes no more steps: on a busy machine
    # it would otherwise pass GENERATIONS while the refused resume below starts up.
    os.kill(proc.pid, signal.SIGSTOP)

    refused = harness_cli("resume", str(run_dir), check=False)  # the head is alive
    assert refused.returncode == 2
    assert "still running" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    workers = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _gone(workers), "worker processes outlived the killed head"
    assert read_run(run_dir)["run"]["status"] == "RUNNING"  # nobody could record the end

    state = load_checkpoint(run_dir / "checkpoint.pkl")
    step = int(state["progress"]["step"])
    assert 3 <= step < GENERATIONS and step % 2 == 0  # a periodic checkpoint
    # A heartbeat may have stored metrics after the checkpoint; resume must re-do them.
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for series in metrics.values():
        series["steps"] += [step + 1, step + 2]
        series["values"] += [-1.0, -2.0]
        series["timestamps"] += [series["timestamps"][-1]] * 2
    (run_dir / "metrics.json").write_text(json.dumps(metrics))

    harness_cli("resume", str(run_dir), "--generations", str(GENERATIONS))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    (resumed,) = record["run"]["resumed"]
    assert resumed["from_step"] == step and resumed["previous_status"] == "RUNNING"
    _assert_same(reference, record["metrics"])


@pytest.mark.slow
def test_a_checkpoint_every_few_seconds_when_steps_never_trigger_one(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    proc = _start_long_run(
        runs,
        "--backend",
        "inline",
        "--set",
        "checkpoint_every=0",
        "--set",
        "checkpoint_every_seconds=0.05",
    )
    _wait_for_checkpoint(runs, proc, 3)  # checkpoint_every=0 writes only step 0 and the end
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    run_dir = runs / "1"
    step = int(load_checkpoint(run_dir / "checkpoint.pkl")["progress"]["step"])
    assert 3 <= step < GENERATIONS
    harness_cli("resume", str(run_dir), "--generations", str(GENERATIONS))
    record = read_run(run_dir)
    assert record["run"]["resumed"][0]["from_step"] == step
    assert record["config"]["checkpoint_every"] == 0  # the later --set won
    _assert_same(reference, record["metrics"])


@pytest.mark.slow
def test_a_larger_budget_extends_a_completed_run_exactly(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    harness_cli(
        "run", *CARTPOLE, "--generations", "12", "--backend", "inline", "--runs-dir", str(runs)
    )
    run_dir = only_run_dir(runs)

    again = harness_cli("resume", str(run_dir), check=False)
    assert again.returncode == 2 and "already COMPLETED" in again.stderr
    smaller = harness_cli("resume", str(run_dir), "--generations", "8", check=False)
    assert smaller.returncode == 2 and "already used" in smaller.stderr

    harness_cli("resume", str(run_dir), "--generations", str(GENERATIONS))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    assert record["run"]["resumed"][0]["reopened"] is True
    # The evaluation made only because 12 generations ran out is undone: the extended
    # run logs exactly what a 30-generation run logs.
    _assert_same(reference, record["metrics"])
    assert record["run"]["artifacts"].count("final_params.npy") == 1


WORKERS_INTERRUPT_STEP = 7


@pytest.mark.slow
def test_a_run_resumed_with_more_workers_equals_an_uninterrupted_run(
    reference: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started on one worker goes on with two (a bigger machine), then with one
    again: every metric is the uninterrupted one's, and the record says which count ran."""
    runs = tmp_path / "runs"
    monkeypatch.setenv(INTERRUPT_ENV, str(WORKERS_INTERRUPT_STEP))
    started = harness_cli(
        "run", *CARTPOLE, "--generations", str(GENERATIONS), "--backend", "process",
        "--workers", "1", "--runs-dir", str(runs), "--set", "checkpoint_every=2", check=False,
    )  # fmt: skip
    assert started.returncode == 130, started.stderr
    run_dir = only_run_dir(runs)
    monkeypatch.setenv(INTERRUPT_ENV, str(2 * WORKERS_INTERRUPT_STEP))
    moved = harness_cli("resume", str(run_dir), "--workers", "2", check=False)
    assert moved.returncode == 130, moved.stderr
    assert read_run(run_dir)["config"]["workers"] == 2
    monkeypatch.delenv(INTERRUPT_ENV)

    harness_cli("resume", str(run_dir), "--workers", "1")
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    assert record["config"]["workers"] == 1
    first, second = record["run"]["resumed"]
    assert (first["workers"], first["previous_workers"]) == (2, 1)
    assert (second["workers"], second["previous_workers"]) == (1, 2)
    assert first["from_step"] == WORKERS_INTERRUPT_STEP
    _assert_same(reference, record["metrics"])


def test_workers_stay_when_the_population_is_per_worker(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    harness_cli(
        "run", *CARTPOLE, "--generations", "2", "--backend", "inline", "--runs-dir", str(runs),
        "--set", "population_per_worker=8",
    )  # fmt: skip
    run_dir = only_run_dir(runs)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    refused = harness_cli("resume", str(run_dir), "--generations", "4", "--workers", "2",
                          check=False)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--workers 2" in refused.stderr, refused.stderr
    assert "population_per_worker (8)" in refused.stderr
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


#: Vector ES on a real env: small enough for a case to take about 20 s on two cores.
VECTOR_ES = ("cma", "nevergrad-es", "xnes")
VECTOR_GENERATIONS = 12
VECTOR_INTERRUPT_STEP = 5  # between periodic checkpoints: the interrupt writes its own


def _vector_es_run(algo: str, runs: Path) -> list[str]:
    return [
        "run",
        "--algo",
        algo,
        "--env",
        "CartPole",
        "--seed",
        "4",
        "--generations",
        str(VECTOR_GENERATIONS),
        "--backend",
        "inline",
        "--runs-dir",
        str(runs),
        "--set",
        "population=10",
        "--set",
        "checkpoint_every=2",
        "--set",
        "eval_every_timesteps=1000",
        "--set",
        "eval_episodes=2",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("algo", VECTOR_ES)
def test_vector_es_resumed_through_the_cli_equals_an_uninterrupted_run(
    algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pycma's and Nevergrad's whole state crosses a real SIGINT and `harness resume`.

    The run delivers itself the SIGINT after step 5 (the hook `harness check-repro`
    uses), so the interruption lands on the same step however busy the machine is.
    """
    straight = tmp_path / "straight"
    harness_cli(*_vector_es_run(algo, straight))
    reference = read_run(only_run_dir(straight))
    assert reference["run"]["status"] == "COMPLETED"

    runs = tmp_path / "interrupted"
    monkeypatch.setenv(INTERRUPT_ENV, str(VECTOR_INTERRUPT_STEP))
    stopped = harness_cli(*_vector_es_run(algo, runs), check=False)
    monkeypatch.delenv(INTERRUPT_ENV)
    assert stopped.returncode == 130, stopped.stderr
    assert "harness resume" in stopped.stderr and "Traceback" not in stopped.stderr
    run_dir = only_run_dir(runs)
    partial = read_run(run_dir)
    assert partial["run"]["status"] == "INTERRUPTED"
    assert partial["metrics"]["timesteps"]["steps"] == list(range(1, VECTOR_INTERRUPT_STEP + 1))
    state = load_checkpoint(run_dir / "checkpoint.pkl")
    assert int(state["progress"]["step"]) == VECTOR_INTERRUPT_STEP

    harness_cli("resume", str(run_dir))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    (resumed,) = record["run"]["resumed"]
    assert resumed["from_step"] == VECTOR_INTERRUPT_STEP
    assert resumed["previous_status"] == "INTERRUPTED"
    assert diff_metrics(reference["metrics"], record["metrics"], "uninterrupted", "resumed") == []
    steps = list(range(1, VECTOR_GENERATIONS + 1))
    assert record["metrics"]["timesteps"]["steps"] == steps
    assert len(record["metrics"]["eval_return_mean"]["values"]) >= 3  # before, after, at the end
    np.testing.assert_array_equal(
        np.load(run_dir / "final_params.npy"), np.load(only_run_dir(straight) / "final_params.npy")
    )


WRITER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from harness.checkpoint import save_checkpoint
    path = Path(sys.argv[1])
    i = 0
    while True:
        i += 1
        save_checkpoint(path, {"i": i, "blob": os.urandom(3_000_000)})
        if i == 1:
            print("saved", flush=True)
""")


def test_checkpoint_writes_are_atomic_under_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pkl"
    rng = random.Random(0)
    for _ in range(8):
        with subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        ) as writer:
            # Kill at a random point of the writing loop after its first complete write,
            # however long the start took on a loaded machine.
            assert writer.stdout is not None and writer.stdout.readline() == "saved\n"
            time.sleep(rng.random() * 0.3)
            writer.send_signal(signal.SIGKILL)
        state = load_checkpoint(path)  # never half a file
        assert len(state["blob"]) == 3_000_000
        remove_stale_temporaries(tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pkl"]
        path.unlink()


def test_damaged_files_are_refused_with_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    harness_cli(
        "run", *CARTPOLE, "--generations", "3", "--backend", "inline", "--runs-dir", str(runs)
    )
    good = only_run_dir(runs)

    def damaged(name: str, damage: Any) -> subprocess.CompletedProcess[str]:
        copy = tmp_path / name
        shutil.copytree(good, copy)
        damage(copy)
        before = sorted(p.name for p in copy.iterdir())
        result = harness_cli("resume", str(copy), "--generations", "6", check=False)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert sorted(p.name for p in copy.iterdir()) == before  # nothing written
        return result

    def truncate(d: Path) -> None:
        data = (d / "checkpoint.pkl").read_bytes()
        (d / "checkpoint.pkl").write_bytes(data[: len(data) // 2])

    def flip(d: Path) -> None:
        data = bytearray((d / "checkpoint.pkl").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (d / "checkpoint.pkl").write_bytes(bytes(data))

    result = damaged("truncated", truncate)
    assert "checkpoint.pkl is damaged" in result.stderr
    result = damaged("flipped", flip)
    assert "checksum mismatch" in result.stderr
    result = damaged("no-checkpoint", lambda d: (d / "checkpoint.pkl").unlink())
    assert "no checkpoint at" in result.stderr
    result = damaged(
        "bad-metrics", lambda d: (d / "metrics.json").write_text('{"timesteps": {"ste')
    )
    assert "metrics.json is damaged" in result.stderr
    result = damaged("no-config", lambda d: (d / "config.json").unlink())
    assert "no config.json" in result.stderr

    missing = harness_cli("resume", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_a_head_that_inherited_sigint_ignored_still_stops_on_sigint(tmp_path: Path) -> None:
    """A background job (``nohup harness sweep ... &``) starts with SIGINT ignored; the head
    must still stop on the sweep's SIGINT and write its checkpoint."""
    runs = tmp_path / "runs"
    env = {**os.environ, "HARNESS_PROGRESS": "0", INTERRUPT_ENV: "3"}
    command = [sys.executable, "-m", "harness.cli", "run", "--algo", "optimes"]
    command += ["--env", "CartPole", "--generations", "50", "--backend", "inline"]
    command += ["--runs-dir", str(runs)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.returncode == 130, done.stderr
    run = read_run(only_run_dir(runs))
    assert run["run"]["status"] == "INTERRUPTED"
    assert run["metrics"]["timesteps"]["steps"][-1] == 3


@pytest.mark.slow
def test_a_run_recorded_before_a_knob_existed_resumes(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    harness_cli(
        "run", *CARTPOLE, "--generations", "12", "--backend", "inline", "--runs-dir", str(runs)
    )
    run_dir = only_run_dir(runs)
    # An older harness wrote neither config.json nor the checkpoint with this knob.
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text())
    del config["params"]["train_episode_steps"]
    config_path.write_text(json.dumps(config))
    checkpoint = run_dir / "checkpoint.pkl"
    state = load_checkpoint(checkpoint)
    del state["config"]["params"]["train_episode_steps"]
    save_checkpoint(checkpoint, state)

    harness_cli("resume", str(run_dir), "--generations", str(GENERATIONS))
    _assert_same(reference, read_run(run_dir)["metrics"])

    # a value that differs from the checkpoint is still refused
    config = json.loads(config_path.read_text())
    config["params"]["sigma"] = 0.5
    config_path.write_text(json.dumps(config))
    edited = harness_cli("resume", str(run_dir), "--generations", "40", check=False)
    assert edited.returncode == 2 and "was the record edited?" in edited.stderr


def test_a_pgpe_run_recorded_with_its_retired_knobs_resumes(tmp_path: Path) -> None:
    """An older pgpe had optimes' shaping knob fixed at one value (and the sigma schedule's
    fixed at theirs, which every ES now has); its records (config.json and checkpoint)
    still resume, to the same numbers."""
    pgpe = ("--algo", "pgpe", "--env", "CartPole", "--seed", "3", "--set", "population=10")
    straight = tmp_path / "straight"
    harness_cli(
        "run", *pgpe, "--generations", "6", "--backend", "inline", "--runs-dir", str(straight)
    )
    runs = tmp_path / "runs"
    harness_cli("run", *pgpe, "--generations", "3", "--backend", "inline", "--runs-dir", str(runs))
    run_dir = only_run_dir(runs)
    retired = {"fitness_shaping": "centered_ranks", "sigma_decay": 1.0, "sigma_min": 0.0}
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["params"].update(retired)
    config_path.write_text(json.dumps(config))
    checkpoint = run_dir / "checkpoint.pkl"
    state = load_checkpoint(checkpoint)
    state["config"]["params"].update(retired)
    state["algorithm"]["config"].update(retired)
    save_checkpoint(checkpoint, state)

    harness_cli("resume", str(run_dir), "--generations", "6")
    reference = read_run(only_run_dir(straight))["metrics"]
    resumed = read_run(run_dir)["metrics"]
    assert diff_metrics(reference, resumed, "uninterrupted", "resumed") == []

    # a value the older pgpe refused is refused now, saying why
    config["params"]["fitness_shaping"] = "nes"
    config_path.write_text(json.dumps(config))
    edited = harness_cli("resume", str(run_dir), "--generations", "8", check=False)
    assert edited.returncode == 2 and "only 'centered_ranks' was ever accepted" in edited.stderr
