"""Sweep cells as Ray work on a real multi-node cluster on this machine.

Nodes share this machine's disk, but the cells never rely on it: each runs in a
temporary runs directory of its own and ships its run back to the driver's runs
directory (harness.sweep.ray_cells), exactly as on separate machines.
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
from pathlib import Path
from typing import Any

import pytest

from harness.checkpoint import CheckpointError, load_checkpoint
from tests.conftest import ROOT, deterministic_metrics, harness_cli

# Slow: each test starts Ray clusters (head and worker nodes, 5-10 s each) and sweeps on them;
# the process-pool sweeps of test_sweep.py check the same scheduling in the fast suite.
pytestmark = pytest.mark.slow

STORE = {"object_store_memory": 80 * 1024 * 1024}


def write_sweep(folder: Path, timesteps: int, seeds: str = "[0]") -> Path:
    path = folder / "cells.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: raycells
        grid:
          algo: [optimes, ppo]
          env: [CartPole]
          seed: {seeds}
          workers: [1]
        budget:
          timesteps: {timesteps}
        set:
          - eval_every_timesteps=1000
          - eval_episodes=2
          - checkpoint_every=1
        """)
    )
    return path


def runs_by_cell(runs_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    found = {}
    for path in sorted(p for p in runs_dir.iterdir() if p.name.isdigit()):
        record = {
            name: json.loads((path / f"{name}.json").read_text())
            for name in ("config", "run", "metrics")
        }
        if record["run"]["status"] == "COMPLETED":
            found[(record["config"]["algo"], record["config"]["seed"])] = record
    return found


def checkpoint_step(path: Path) -> int:
    """The step of the checkpoint at ``path``; -1 while there is none (or it is half-shipped)."""
    try:
        return int(load_checkpoint(path)["progress"]["step"])
    except (FileNotFoundError, CheckpointError):
        return -1


def start_driver(sweep: Path, runs: Path, address: str, *extra: str) -> subprocess.Popen[str]:
    """`harness sweep` on the cluster in the background, shipping every half second."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "sweep",
            str(sweep),
            *extra,
            "--runs-dir",
            str(runs),
            "--ray-address",
            address,
            "--ship-every",
            "0.5",
        ],
        cwd=ROOT,
        env={**os.environ, "HARNESS_PROGRESS": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("HARNESS_RAY_PY_MODULES", "0")  # every node runs this checkout
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **STORE}
    )
    cluster.add_node(num_cpus=1, **STORE)
    cluster.add_node(num_cpus=1, **STORE)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


def test_cells_on_a_cluster_match_a_local_sweep_and_rerun_skips(
    tmp_path: Path, cluster: Any
) -> None:
    sweep = write_sweep(tmp_path, 3000)
    local, remote = tmp_path / "local", tmp_path / "remote"
    harness_cli("sweep", str(sweep), "--runs-dir", str(local), "--no-progress")
    ran = harness_cli(
        "sweep",
        str(sweep),
        "--runs-dir",
        str(remote),
        "--ray-address",
        cluster.address,
        "--ship-every",
        "1",
    )
    assert "2 cells, 0 already completed, 2 ran" in ran.stdout
    mine, theirs = runs_by_cell(local), runs_by_cell(remote)
    assert sorted(mine) == sorted(theirs) == [("optimes", 0), ("ppo", 0)]
    nodes = {cell: record["run"]["head"]["ray_node"] for cell, record in theirs.items()}
    workers = {n.node_id for n in cluster.worker_nodes}
    assert set(nodes.values()) <= workers, "cells ran on the worker nodes, not the driver's"
    for cell in mine:
        assert mine[cell]["config"] == theirs[cell]["config"]
        assert deterministic_metrics(mine[cell]["metrics"]) == deterministic_metrics(
            theirs[cell]["metrics"]
        ), cell
    again = harness_cli(
        "sweep", str(sweep), "--runs-dir", str(remote), "--ray-address", cluster.address
    )
    assert "2 already completed, 0 ran" in again.stdout


def test_a_lost_node_s_cell_finishes_elsewhere_from_its_last_checkpoint(
    tmp_path: Path, cluster: Any
) -> None:
    sweep = write_sweep(tmp_path, 40000)
    (tmp_path / "cells.yaml").write_text(
        (tmp_path / "cells.yaml").read_text().replace("[optimes, ppo]", "[optimes]")
    )
    reference = tmp_path / "reference"
    harness_cli("sweep", str(sweep), "--runs-dir", str(reference), "--no-progress")
    remote = tmp_path / "remote"
    driver = start_driver(sweep, remote, cluster.address)
    try:
        run_json, checkpoint = remote / "1" / "run.json", remote / "1" / "checkpoint.pkl"
        deadline = time.monotonic() + 240
        # A fresh run checkpoints step 0 first; the node is lost only once a later one shipped.
        while not (run_json.is_file() and checkpoint_step(checkpoint) >= 1):
            assert time.monotonic() < deadline and driver.poll() is None, "no checkpoint shipped"
            time.sleep(0.2)
        first = json.loads(run_json.read_text())["head"]["ray_node"]
        lost = next(n for n in cluster.worker_nodes if n.node_id == first)
        cluster.remove_node(lost, allow_graceful=False)
        output, _ = driver.communicate(timeout=400)
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGINT)
            driver.wait(60)
    assert driver.returncode == 0, output
    record = runs_by_cell(remote)[("optimes", 0)]
    assert record["run"]["head"]["ray_node"] != first, "finished on another node"
    resumed = record["run"]["resumed"]
    assert len(resumed) == 1 and resumed[0]["from_step"] >= 1, "continued, not restarted"
    assert resumed[0]["previous_status"] == "RUNNING"
    assert [p.name for p in remote.iterdir() if p.name.isdigit()] == ["1"], "the same run"
    expected = runs_by_cell(reference)[("optimes", 0)]
    assert deterministic_metrics(record["metrics"]) == deterministic_metrics(expected["metrics"])


def test_an_interrupted_cluster_sweep_reruns_skipping_completed_cells(
    tmp_path: Path, cluster: Any
) -> None:
    sweep = tmp_path / "cells.yaml"
    sweep.write_text(
        textwrap.dedent("""\
        name: raycells
        grid:
          algo: [optimes]
          env: [CartPole]
          seed: [0, 1]
        budget:
          timesteps: 3000
        set:
          - eval_every_timesteps=1000
          - eval_episodes=2
          - checkpoint_every=1
        overrides:
          optimes: []
        """)
    )
    # Seed 1 runs longer: it is still training when the driver is stopped.
    long = ["--grid", "seed=1", "--set", "timesteps=60000"]
    reference = tmp_path / "reference"
    harness_cli("sweep", str(sweep), *long, "--runs-dir", str(reference), "--no-progress")
    remote = tmp_path / "remote"
    harness_cli(
        "sweep",
        str(sweep),
        "--grid",
        "seed=0",
        "--runs-dir",
        str(remote),
        "--ray-address",
        cluster.address,
    )
    driver = start_driver(sweep, remote, cluster.address, *long)
    checkpoint = remote / "2" / "checkpoint.pkl"
    deadline = time.monotonic() + 240
    while not checkpoint.is_file():
        assert time.monotonic() < deadline and driver.poll() is None, "no checkpoint shipped"
        time.sleep(0.2)
    driver.send_signal(signal.SIGTERM)
    output, _ = driver.communicate(timeout=120)
    assert driver.returncode != 0, output
    stopped = json.loads((remote / "2" / "run.json").read_text())
    assert stopped["status"] in ("INTERRUPTED", "RUNNING"), output

    again = harness_cli(
        "sweep", str(sweep), *long, "--runs-dir", str(remote), "--ray-address", cluster.address
    )
    assert "0 ran, 1 resumed" in again.stdout, again.stdout
    record = runs_by_cell(remote)[("optimes", 1)]
    assert record["run"]["resumed"], "continued from its checkpoint"
    expected = runs_by_cell(reference)[("optimes", 1)]
    assert deterministic_metrics(record["metrics"]) == deterministic_metrics(expected["metrics"])
    for cells in (long, ["--grid", "seed=0"]):
        rerun = harness_cli(
            "sweep", str(sweep), *cells, "--runs-dir", str(remote), "--ray-address", cluster.address
        )
        assert "1 already completed, 0 ran" in rerun.stdout


def test_the_documented_ray_start_commands_run_a_sweep(tmp_path: Path) -> None:
    """docs/cluster.md's `ray start --head` and `ray start --address`, on this machine."""
    import secrets
    import socket

    import psutil

    ray_cli = str(Path(sys.executable).with_name("ray"))
    # Only this test's Ray processes name it, so they are the ones stopped below; short, as
    # Ray's socket paths under it must fit in 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    # Token authentication as docs/cluster.md sets it up: every node and the driver are
    # given the cluster's token (here a fresh one, so no ~/.ray/auth_token is needed).
    env = {
        **os.environ,
        "HARNESS_RAY_PY_MODULES": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }
    env.pop("RAY_ADDRESS", None)
    common = [
        "--disable-usage-stats",
        "--node-ip-address",
        "127.0.0.1",
        "--object-store-memory",
        str(STORE["object_store_memory"]),
    ]
    try:
        subprocess.run(
            [
                ray_cli,
                "start",
                "--head",
                "--port",
                str(port),
                "--num-cpus",
                "0",
                "--temp-dir",
                str(temp),
                "--include-dashboard",
                "false",
                *common,
            ],
            check=True,
            env=env,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [ray_cli, "start", "--address", address, "--num-cpus", "1", *common],
            check=True,
            env=env,
            capture_output=True,
            timeout=120,
        )
        sweep = write_sweep(tmp_path, 2000)
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "sweep",
                str(sweep),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--ray-address",
                address,
            ],
            env={**env, "HARNESS_PROGRESS": "0"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "2 cells, 0 already completed, 2 ran" in ran.stdout, ran.stdout + ran.stderr
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            with_temp = any(str(temp) in part for part in proc.info["cmdline"] or [])
            if with_temp:
                proc.kill()
        shutil.rmtree(temp, ignore_errors=True)
