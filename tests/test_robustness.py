"""Issue 26: full disks, damaged files, stop signals at start-up and planted checkpoints.

Every case drives the real CLI in real processes over real Sacred run
directories; the full-disk cases write to a real tmpfs of a few kilobytes
(mounting one needs root: skipped with the reason otherwise). Resumed runs are
compared with uninterrupted ones metric by metric (timings aside): bitwise.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation.backends import sigint_held_from_children
from harness.checkpoint import (
    MAGIC,
    CheckpointError,
    encode_state,
    load_checkpoint,
    save_checkpoint,
)
from harness.repro import diff_metrics
from tests.conftest import ROOT, harness_cli, only_run_dir, read_run

SEED = ("--seed", "1")
CARTPOLE = ("--algo", "optimes", "--env", "CartPole", *SEED)
#: The full-disk case of the issue, at a budget a test can afford.
DISK_RUN = (
    "run",
    *CARTPOLE,
    "--timesteps",
    "60000",
    "--set",
    "eval_every_timesteps=5000",
    "--set",
    "checkpoint_every=2",
    "--no-progress",
)


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({result.stderr.strip() or 'not root'})")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 200 KB tmpfs; unmounted afterwards."""
    where = tmp_path / "disk"
    _mount_tmpfs(where, "200k")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _deterministic(metrics: dict[str, Any], other: dict[str, Any]) -> list[str]:
    return diff_metrics(other, metrics, "uninterrupted", "resumed")


def _assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@pytest.fixture(scope="module")
def uninterrupted_disk_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = tmp_path_factory.mktemp("uninterrupted")
    harness_cli(*DISK_RUN, "--runs-dir", str(runs))
    metrics: dict[str, Any] = read_run(only_run_dir(runs))["metrics"]
    return metrics


# -- 1. a full disk ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_full_disk_fails_the_run_and_resume_continues_with_no_hole(
    small_disk: Path, uninterrupted_disk_run: dict[str, Any]
) -> None:
    runs = small_disk / "runs"
    result = harness_cli(*DISK_RUN, "--runs-dir", str(runs), check=False)
    assert result.returncode == 1, result.stderr
    _assert_no_traceback(result)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("harness: run 1 FAILED: cannot write "), last
    assert "No space left on device" in last
    run_dir = runs / "1"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "FAILED"
    state = load_checkpoint(run_dir / "checkpoint.pkl")
    steps = json.loads((run_dir / "metrics.json").read_text())["timesteps"]["steps"]
    checkpoint_step = int(state["progress"]["step"])
    assert set(range(1, checkpoint_step + 1)) <= set(steps)  # never ahead of the metrics
    source = (ROOT / "harness" / "experiment.py").read_bytes()
    for stored in (runs / "_sources").glob("*"):
        assert stored.read_bytes() == source  # no truncated copy left behind

    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    resumed = harness_cli("resume", str(run_dir), "--no-progress", check=False)
    assert resumed.returncode == 0, resumed.stderr
    metrics = read_run(run_dir)["metrics"]
    assert metrics["timesteps"]["steps"] == list(range(1, len(metrics["timesteps"]["steps"]) + 1))
    assert _deterministic(metrics, uninterrupted_disk_run) == []


@pytest.mark.parametrize("size", ["12k", "28k", "64k"])
def test_no_traceback_at_any_disk_size(tmp_path: Path, size: str) -> None:
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, size)
    try:
        result = harness_cli(*DISK_RUN, "--runs-dir", str(disk / "runs"), check=False)
        assert result.returncode == 1, result.stderr
        _assert_no_traceback(result)
        assert result.stderr.strip().splitlines()[-1].startswith("harness: "), result.stderr
        run_json = disk / "runs" / "1" / "run.json"
        if run_json.exists():  # recorded wherever anything could still be written
            assert json.loads(run_json.read_text())["status"] == "FAILED"
        for stored in (disk / "runs" / "_sources").glob("*"):
            assert stored.read_bytes() == (ROOT / "harness" / "experiment.py").read_bytes()
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- 2. one undecodable byte ----------------------------------------------------------------


def _flip_to_ff(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] = 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_an_undecodable_byte_damages_one_run_not_the_runs_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: damage\ngrid: {algo: [optimes], env: [CartPole], seed: [0, 1]}\n"
        "budget: {generations: 2}\nbackend: inline\n"
    )
    harness_cli("sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    _flip_to_ff(runs / "1" / "run.json", 10)
    _flip_to_ff(runs / "2" / "metrics.json", 50)

    report = harness_cli("report", str(runs), "--out", str(tmp_path / "report"), check=False)
    _assert_no_traceback(report)
    warnings = [line for line in report.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2 and "not UTF-8" in warnings[0], report.stderr

    rerun = harness_cli("sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    _assert_no_traceback(rerun)
    assert "2 ran" in rerun.stdout, rerun.stdout  # both cells again, as new runs
    assert "skipping damaged run directory" in rerun.stderr
    assert {p.name for p in runs.iterdir() if p.name.isdigit()} == {"1", "2", "3", "4"}

    for run_id, name in (("1", "run.json"), ("2", "metrics.json")):
        result = harness_cli("resume", str(runs / run_id), check=False)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and name in lines[0] and "not UTF-8" in lines[0], lines

    report = harness_cli("report", str(runs), "--out", str(tmp_path / "report2"))
    assert report.stderr.count("skipping run directory") == 2


# -- 3. stop signals at start-up ------------------------------------------------------------


def _start(runs: Path, *extra: str, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)  # a local Ray instance of its own

    def background() -> None:  # what a shell does to a job started with `&`
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", *CARTPOLE, "--runs-dir", str(runs), *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=background if ignore_sigint else None,
    )


def _wait_for_record(runs: Path, proc: subprocess.Popen[str]) -> None:
    """Until the run record exists (the earliest moment the issue's signals arrive)."""
    deadline = time.monotonic() + 60
    while not (runs / "1" / "run.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)


def test_a_sigint_while_workers_start_is_held_for_the_head_not_lost() -> None:
    """Workers start with SIGINT blocked; a stop that arrives meanwhile reaches the head after."""
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        with sigint_held_from_children():
            child = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import signal; print(signal.SIGINT in "
                    "signal.pthread_sigmask(signal.SIG_BLOCK, set()))",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            os.kill(os.getpid(), signal.SIGINT)  # another thread may take it: still the head's
        time.sleep(0.05)
        assert received == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
    assert child.stdout.strip() == "True", "a child started in the block acts on Ctrl-C"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "ignore_sigint"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["sigterm", "sigint-to-a-background-head"],
)
def test_a_stop_signal_at_start_up_leaves_a_resumable_run(
    tmp_path: Path, signum: int, ignore_sigint: bool
) -> None:
    runs = tmp_path / "runs"
    budget = ("--generations", "6", "--workers", "2")
    proc = _start(runs, *budget, ignore_sigint=ignore_sigint)
    _wait_for_record(runs, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err, err
    run_dir = runs / "1"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "INTERRUPTED"
    assert load_checkpoint(run_dir / "checkpoint.pkl")["progress"]["step"] == 0

    harness_cli("resume", str(run_dir), "--no-progress")
    reference = tmp_path / "reference"
    harness_cli("run", *CARTPOLE, *budget, "--runs-dir", str(reference), "--no-progress")
    resumed = read_run(run_dir)
    assert resumed["run"]["status"] == "COMPLETED"
    assert _deterministic(resumed["metrics"], read_run(reference / "1")["metrics"]) == []


# Slow: starts a real Ray instance (4-5 s, 700 MB) to land a SIGTERM inside ray.init.
@pytest.mark.slow
def test_sigterm_while_ray_starts_leaves_an_interrupted_resumable_run(tmp_path: Path) -> None:
    """``ray.init`` takes seconds; a SIGTERM in them used to record FAILED."""
    runs = tmp_path / "runs"
    budget = ("--generations", "3", "--backend", "ray", "--workers", "1")
    proc = _start(runs, *budget)
    _wait_for_record(runs, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, (out, err)
    run_dir = runs / "1"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "INTERRUPTED", err
    assert load_checkpoint(run_dir / "checkpoint.pkl")["progress"]["step"] == 0
    harness_cli("resume", str(run_dir), "--no-progress", timeout=300)
    assert read_run(run_dir)["run"]["status"] == "COMPLETED"


def test_a_ctrl_c_just_after_a_metrics_write_does_not_write_its_rows_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop lands after ``metrics.json`` is replaced, before the writer forgets the rows.

    The interrupted run then flushes its metrics again before its last checkpoint; were
    the rows added twice, the resumed run would hold a step twice (seen on a Ray sweep).
    """
    from harness import rundir
    from harness.experiment import RunStorageObserver

    observer = RunStorageObserver(str(tmp_path))
    observer.dir = str(tmp_path)
    stamp = datetime.datetime(2026, 1, 1)

    def rows(step: int) -> dict[str, Any]:
        series = {"steps": [step], "values": [float("nan")], "timestamps": [stamp]}
        return {"fitness_max": series, "timesteps": {**series, "values": [10.0 * step]}}

    write = rundir.write_json_atomic

    def write_then_stop(path: Path, obj: Any) -> None:
        write(path, obj)
        raise KeyboardInterrupt

    observer.log_metrics(rows(1), None)
    monkeypatch.setattr(rundir, "write_json_atomic", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        observer.log_metrics(rows(2), None)
    monkeypatch.setattr(rundir, "write_json_atomic", write)
    observer.log_metrics(rows(3), None)  # the flush before the interrupted run's checkpoint
    saved = rundir.read_metrics(tmp_path)
    assert saved["timesteps"]["steps"] == [1, 2, 3]
    assert saved["timesteps"]["values"] == [10.0, 20.0, 30.0]
    assert saved["fitness_max"]["steps"] == [1, 2, 3], "NaN rows are rows too"


# -- 5. a planted checkpoint ----------------------------------------------------------------


class _RunsCode:
    """A pickle that runs a shell command when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _plant(path: Path, marker: Path, legacy: bool) -> None:
    """Replace a checkpoint by a code-running pickle with a correct SHA-256 header."""
    payload = pickle.dumps({"progress": _RunsCode(marker)})
    digest = hashlib.sha256(payload).hexdigest().encode()
    if legacy:
        header = b"%s 1 %s\n" % (MAGIC, digest)
    else:  # the current header, its HMAC forged without the key
        header = b"%s 2 pickle %s %s\n" % (
            MAGIC,
            digest,
            hashlib.sha256(b"guess").hexdigest().encode(),
        )
    path.write_bytes(header + payload)


@pytest.fixture
def interrupted_cell(tmp_path: Path) -> tuple[Path, Path]:
    """A sweep file and a runs directory holding its one cell INTERRUPTED at step 2."""
    runs = tmp_path / "runs"
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: planted\ngrid: {algo: [optimes], env: [CartPole], seed: [1]}\n"
        "budget: {generations: 4}\nbackend: inline\n"
    )
    env = {**os.environ, "HARNESS_PROGRESS": "0", "HARNESS_INTERRUPT_AT_STEP": "2"}
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "sweep", str(sweep), "--runs-dir", str(runs)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert json.loads((runs / "1" / "run.json").read_text())["status"] == "INTERRUPTED"
    return sweep, runs


@pytest.mark.parametrize("legacy", [False, True], ids=["forged-signature", "unsigned-legacy"])
def test_a_planted_checkpoint_is_refused_before_it_is_unpickled(
    tmp_path: Path, interrupted_cell: tuple[Path, Path], legacy: bool
) -> None:
    sweep, runs = interrupted_cell
    marker = tmp_path / "pwned"
    _plant(runs / "1" / "checkpoint.pkl", marker, legacy)

    result = harness_cli("resume", str(runs / "1"), check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "checkpoint.pkl" in lines[0], lines
    assert ("unsigned pickle" if legacy else "checkpoint key") in lines[0]
    assert not marker.exists()

    swept = harness_cli("sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    assert "1 ran, 0 resumed" in swept.stdout, swept.stdout  # afresh, as a new run
    said = swept.stdout + swept.stderr
    assert "run 1 not resumed" in said and "checkpoint.pkl" in said, said
    assert not marker.exists()
    assert read_run(runs / "2")["run"]["status"] == "COMPLETED"


def test_a_legacy_checkpoint_resumes_once_trusted_and_bitwise(
    tmp_path: Path, interrupted_cell: tuple[Path, Path]
) -> None:
    """Runs of the earlier version (unsigned pickles) resume with the explicit opt-in."""
    sweep, runs = interrupted_cell
    path = runs / "1" / "checkpoint.pkl"
    payload = pickle.dumps(load_checkpoint(path), protocol=pickle.HIGHEST_PROTOCOL)
    path.write_bytes(b"%s 1 %s\n" % (MAGIC, hashlib.sha256(payload).hexdigest().encode()) + payload)

    refused = harness_cli("resume", str(path.parent), check=False)
    assert refused.returncode == 2 and "--trust-legacy-checkpoint" in refused.stderr
    harness_cli("resume", str(path.parent), "--trust-legacy-checkpoint", "--no-progress")
    assert path.read_bytes().startswith(MAGIC + b" 2 ")  # its next checkpoint is signed

    reference = tmp_path / "reference"
    harness_cli("sweep", str(sweep), "--runs-dir", str(reference), "--no-progress")
    assert (
        _deterministic(read_run(runs / "1")["metrics"], read_run(reference / "1")["metrics"]) == []
    )


# -- the checkpoint codec ---------------------------------------------------------------------


def test_arrays_and_json_restore_exactly_what_was_saved(tmp_path: Path) -> None:
    state = {
        "centre": np.arange(5, dtype=np.float32) / 3,
        "moments": {"m": np.zeros(3), "t": 7, "stepsize": 0.1 + 0.2},
        "scalar": np.float32(1.5),
        "count": np.int64(2**40),
        "final_eval": (3, None, -0.0),
        "nan": float("nan"),
        "rng": np.random.default_rng(5).bit_generator.state,
        "blob": b"\x00\xffbytes",
        "text": "é",
    }
    encoded = encode_state(state)
    assert encoded.encoding == "arrays"
    path = tmp_path / "checkpoint.pkl"
    save_checkpoint(path, state)
    loaded = load_checkpoint(path)
    assert loaded["centre"].dtype == np.float32
    np.testing.assert_array_equal(loaded["centre"], state["centre"])
    assert type(loaded["scalar"]) is np.float32 and type(loaded["count"]) is np.int64
    assert loaded["final_eval"] == (3, None, -0.0) and str(loaded["final_eval"][2]) == "-0.0"
    assert loaded["moments"]["stepsize"] == 0.1 + 0.2 and np.isnan(loaded["nan"])
    assert loaded["rng"] == state["rng"] and loaded["blob"] == state["blob"]
    assert loaded["text"] == "é"

    assert encode_state({"object": _RunsCode(tmp_path / "x")}).encoding == "pickle"


def test_a_flipped_bit_and_a_foreign_key_are_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pkl"
    save_checkpoint(path, {"step": 1})
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is damaged: checksum mismatch"):
        load_checkpoint(path)
    save_checkpoint(path, {"step": 1})
    other_key = tmp_path / "other.key"
    other_key.write_text("ab" * 32 + "\n")
    env = {**os.environ, "HARNESS_CHECKPOINT_KEY_FILE": str(other_key)}
    check = (
        "import sys; from pathlib import Path; from harness.checkpoint import load_checkpoint, "
        "CheckpointError\ntry:\n load_checkpoint(Path(sys.argv[1]))\n"
        "except CheckpointError as e:\n print(e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", check, str(path)], env=env, cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert "was not written with this user's checkpoint key" in out, out


def test_sb3_checkpoints_hold_arrays_and_restore_as_the_state_itself(tmp_path: Path) -> None:
    """PPO's checkpoint: SB3's own ``model.save`` zip, RNG states and normalisation as arrays."""
    from tests.test_baselines import _sb3

    params = {"n_steps": 64, "batch_size": 32, "n_epochs": 1, "normalize": True}
    algorithm, direct, through_file = (_sb3("ppo", **params) for _ in range(3))
    try:
        algorithm.step()  # type: ignore[attr-defined]
        state = algorithm.state_dict()  # type: ignore[attr-defined]
        path = tmp_path / "checkpoint.pkl"
        save_checkpoint(path, state)
        assert path.read_bytes().split(b" ")[2] == b"arrays"
        direct.load_state_dict(state)  # type: ignore[attr-defined]
        through_file.load_state_dict(load_checkpoint(path))  # type: ignore[attr-defined]
        for restored in (direct, through_file):
            restored.step()  # type: ignore[attr-defined]
        np.testing.assert_array_equal(
            direct.current_parameters(),  # type: ignore[attr-defined]
            through_file.current_parameters(),  # type: ignore[attr-defined]
        )
        np.testing.assert_array_equal(
            direct.vec_env.obs_rms.var,  # type: ignore[attr-defined]
            through_file.vec_env.obs_rms.var,  # type: ignore[attr-defined]
        )
    finally:
        for each in (algorithm, direct, through_file):
            each.close()  # type: ignore[attr-defined]
