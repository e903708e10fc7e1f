"""The Ray backend on a real Ray instance with a capped object store, and a two-node cluster.

Kept few and short (CI has two cores): one local instance serves every test of
:class:`TestLocalRay`; the cluster tests start their own nodes afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import ray  # a hard dependency (pyproject): a missing Ray must fail here, not skip the module

from evaluation.backends import WorkerLostError
from evaluation.noise import NoiseSpec
from evaluation.protocol import Broadcast, EvalTask
from evaluation.ray_backend import RayEvaluator, quiet_ray_logging
from tests.conftest import ROOT
from tests.test_parallel import (
    ENV,
    ES_ALGORITHMS,
    SLOW,
    TINY_PARAMS,
    cartpole_spec,
    kill_in_generation,
    make_algorithm,
    reference,
    run_generations,
)

OBJECT_STORE = 80 * 1024 * 1024


@pytest.fixture(scope="class")
def local_ray() -> Iterator[None]:
    if ray.is_initialized():
        ray.shutdown()
    quiet_ray_logging()
    ray.init(
        num_cpus=4,
        object_store_memory=OBJECT_STORE,
        include_dashboard=False,
        log_to_driver=False,
        address="local",
        configure_logging=False,
    )
    yield
    ray.shutdown()


@pytest.mark.usefixtures("local_ray")
class TestLocalRay:
    # 4 workers slow: on 2 cores they add time, not a new case (1 and 2 cover the split).
    @pytest.mark.parametrize("workers", [1, 2, pytest.param(4, marks=pytest.mark.slow)])
    @pytest.mark.parametrize("name", ES_ALGORITHMS)
    def test_ray_matches_inline_and_ships_the_same_bytes_as_process(
        self, name: str, workers: int
    ) -> None:
        outcome = run_generations(make_algorithm(name, "ray", workers))
        outcome.assert_same(reference(name))
        process = run_generations(make_algorithm(name, "process", workers))
        for on_ray, on_process in zip(outcome.records, process.records, strict=True):
            assert on_ray.bytes_to_workers == on_process.bytes_to_workers > 0
            assert on_ray.bytes_from_workers == on_process.bytes_from_workers > 0

    def test_seeds_mode_on_ray_equals_broadcast(self) -> None:
        outcome = run_generations(make_algorithm("optimes", "ray", 2, "seeds"))
        outcome.assert_same(reference("optimes", "broadcast"))
        assert all(r.extras["resyncs"] == 0 for r in outcome.records)

    @pytest.mark.parametrize("sync", ["broadcast", "seeds"])
    def test_sigkill_of_an_actor_mid_generation_reruns_only_its_tasks(self, sync: str) -> None:
        killed: list[int] = []
        algorithm = make_algorithm("optimes", "ray", 2, sync, **SLOW)
        evaluator = algorithm.evaluator  # type: ignore[attr-defined]
        pids_before = evaluator.worker_pids()
        outcome = run_generations(algorithm, before_step=kill_in_generation(1, killed))
        outcome.assert_same(reference("optimes", sync, **SLOW))
        assert len(killed) == 1 and 0 < killed[0] < TINY_PARAMS["optimes"]["population"]
        assert [r.extras["retried_tasks"] for r in outcome.records] == [0.0, killed[0], 0.0]
        assert evaluator.restarts == 1
        assert len(set(pids_before)) == 2

    def test_actors_read_the_noise_table_from_the_object_store(self) -> None:
        evaluator = RayEvaluator(ENV, cartpole_spec(), NoiseSpec(1 << 20, 0), 2)
        try:
            placement = evaluator.placement()
            assert all(p["noise_zero_copy"] and p["noise_read_only"] for p in placement)
            assert len(evaluator.noise_placement()) == 1  # one node, one copy
        finally:
            evaluator.close()


def test_cluster_jobs_ship_the_packages_the_runner_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray`` is in the backend table; a cluster job ships, found by name, the packages
    the runner names plus the evaluation layer's own (the evaluation code imports none)."""
    import evaluation.ray_backend as ray_backend
    from evaluation.backends import EvaluatorSettings
    from evaluation.registry import get_backend, make_evaluator
    from harness.runner import WORKER_PY_MODULES

    assert get_backend("ray") is RayEvaluator
    seen: dict[str, Any] = {}

    def no_cluster(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise ConnectionError("no cluster here")

    monkeypatch.setattr(ray_backend.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_backend.ray, "init", no_cluster)
    monkeypatch.setattr(ray_backend, "probe_address", lambda address: None)
    monkeypatch.delenv("HARNESS_RAY_PY_MODULES", raising=False)
    with pytest.raises(WorkerLostError, match=r"cannot connect to the Ray cluster at 10\.0\.0\.1"):
        make_evaluator(
            "ray",
            EvaluatorSettings(
                ENV, cartpole_spec(), None, 1, "10.0.0.1:6379", py_modules=WORKER_PY_MODULES
            ),
        )
    shipped = seen["runtime_env"]["py_modules"]
    assert shipped == [str(ROOT / name) for name in ("algorithms", "evaluation", "envs")]
    with pytest.raises(ValueError, match="cannot ship 'textwrap'"):
        ray_backend.package_dir("textwrap")  # a module, not a package


def _small_generation(spec: Any) -> tuple[Broadcast, list[EvalTask]]:
    centre = np.zeros(spec.num_params, dtype=np.float32)
    tasks = [EvalTask(i, (i,), 50, noise_index=i, sign=1) for i in range(8)]
    return Broadcast(0, centre, 0.1, None, None), tasks


@pytest.mark.slow
def test_two_node_cluster_places_the_noise_table_once_per_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three actors on two nodes: two copies of the table; losing a node is a clear error."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    quiet_ray_logging()
    monkeypatch.setenv("HARNESS_RAY_PY_MODULES", "0")  # both nodes run this checkout
    store = {"object_store_memory": OBJECT_STORE}
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, **store}
    )
    try:
        second = cluster.add_node(num_cpus=2, **store)
        spec = cartpole_spec()
        # Starting three actors on a busy machine can take longer than the 8 s the
        # node-loss check below waits for a replacement.
        evaluator = RayEvaluator(
            ENV, spec, NoiseSpec(1 << 20, 0), 3, cluster.address, start_timeout_s=120
        )
        try:
            placement = evaluator.placement()
            actor_nodes = [p["node_id"] for p in placement]
            assert len(set(actor_nodes)) == 2 and len(actor_nodes) == 3
            assert all(p["noise_zero_copy"] and p["noise_read_only"] for p in placement)
            # one copy per node that hosts actors, however many actors it hosts
            assert evaluator.noise_placement() == sorted(set(actor_nodes))
            broadcast, tasks = _small_generation(spec)
            results, _ = evaluator.evaluate(broadcast, tasks)
            assert len(results) == len(tasks)

            cluster.remove_node(second)  # its two actors die; no CPU is left for them
            evaluator.start_timeout_s = 8
            with pytest.raises(WorkerLostError, match="not running after 8 s"):
                evaluator.evaluate(Broadcast(1, broadcast.centre, 0.1, None, None), tasks)
        finally:
            evaluator.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


LOST_HEAD = textwrap.dedent(
    """
    import time, numpy as np, ray
    from ray.cluster_utils import Cluster
    from evaluation.backends import WorkerLostError
    from evaluation.noise import NoiseSpec
    from evaluation.protocol import Broadcast, EvalTask
    from evaluation.ray_backend import RayEvaluator, quiet_ray_logging
    from tests.test_parallel import cartpole_spec
    quiet_ray_logging()
    store = {"object_store_memory": 80 << 20}
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False, **store})
    cluster.add_node(num_cpus=1, **store)
    spec = cartpole_spec()
    evaluator = RayEvaluator("CartPole", spec, NoiseSpec(1 << 16, 0), 1, cluster.address,
                             head_timeout_s=8)
    centre = np.zeros(spec.num_params, dtype=np.float32)
    tasks = [EvalTask(i, (i,), 20) for i in range(2)]
    cluster.head_node.kill_all_processes(check_alive=False, allow_graceful=False)
    killed = time.monotonic()
    try:
        for generation in range(10**6):
            evaluator.evaluate(Broadcast(generation, centre, 0.1, None, None), tasks)
    except WorkerLostError as error:
        print(f"LOST after {time.monotonic() - killed:.0f} s: {error}", flush=True)
    """
)


# Slow: Ray itself waits about 60 s before it ends a driver whose head is gone.
@pytest.mark.slow
def test_lost_cluster_head_is_a_clear_error_not_a_hang() -> None:
    """Ray ends a driver whose head is gone for 60 s; the evaluator must say so first."""
    env = {**os.environ, "HARNESS_RAY_PY_MODULES": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", LOST_HEAD],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    lost = [line for line in done.stdout.splitlines() if line.startswith("LOST")]
    assert lost, done.stdout[-2000:] + done.stderr[-2000:]
    assert "head (GCS) has not answered" in lost[0] and "resume the run" in lost[0]
    seconds = int(lost[0].split()[2])
    assert seconds < 30
