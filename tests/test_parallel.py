"""Evaluation backends: identical results on inline and process, real worker faults, bytes.

Helpers here are shared by ``test_ray.py`` and ``test_replicated.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from algorithms.base import Algorithm, RunContext, StepRecord
from algorithms.registry import get_algorithm
from envs.policies import PolicySpec, policy_spec_for
from envs.registry import make_env
from evaluation.backends import (
    InlineEvaluator,
    PoolEvaluator,
    ProcessEvaluator,
    WorkerLostError,
    chunk_count,
    chunk_size,
)
from evaluation.noise import NoiseSpec
from evaluation.protocol import Broadcast, EvalResult, EvalTask
from evaluation.worker import encode
from harness.config import validate_params
from harness.runner import create_algorithm

ENV = "CartPole"
#: The ES algorithms: nevergrad and cma are hard dependencies, so none may drop out silently.
ES_ALGORITHMS = ["optimes", "nevergrad-es", "cma"]
#: Small populations and a small noise table keep a generation at a few milliseconds.
TINY_PARAMS: dict[str, dict[str, Any]] = {
    "optimes": {
        "population": 12,
        "sigma": 0.1,
        "learning_rate": 0.05,
        "noise_size": 1 << 20,
        "obs_fraction": 0.25,
    },
    "nevergrad-es": {"population": 8},
    "cma": {"population": 8},
}
GENERATIONS = 3
#: Fault tests: Pendulum episodes always last 200 steps, two per task, so a killed
#: worker is still busy with its chunk (tens of milliseconds) when the signal lands.
SLOW = {"env": "Pendulum", "episodes": 2}


def policy_spec(env_name: str = ENV, hidden: tuple[int, ...] = (16,)) -> PolicySpec:
    env = make_env(env_name)
    try:
        return policy_spec_for(env, "mlp", hidden, "tanh")
    finally:
        env.close()


def cartpole_spec(hidden: tuple[int, ...] = (16,)) -> PolicySpec:
    return policy_spec(ENV, hidden)


def make_algorithm(
    name: str,
    backend: str,
    workers: int,
    sync: str = "broadcast",
    hidden: tuple[int, ...] = (16,),
    seed: int = 3,
    env: str = ENV,
    episodes: int = 1,
    **overrides: Any,
) -> Algorithm:
    """A real algorithm (CartPole by default) with its own evaluator of the given backend."""
    algo_cls = get_algorithm(name)
    context = RunContext(
        env,
        policy_spec(env, hidden),
        seed,
        episodes,
        workers,
        backend=backend,
        sync=sync,
        max_episode_steps=200,
    )
    params = validate_params({**TINY_PARAMS[name], **overrides}, algo_cls.Config, name)
    return create_algorithm(algo_cls, context, params)


@dataclass
class Outcome:
    """What must not depend on backend, worker count or faults, plus what the wire cost."""

    records: list[StepRecord]
    params: np.ndarray
    eval_returns: np.ndarray

    def deterministic(self) -> list[dict[str, Any]]:
        keep = []
        for record in self.records:
            extras = {
                k: v
                for k, v in record.extras.items()
                if not k.endswith("_s") and k not in ("retried_tasks", "resyncs")
            }
            keep.append(
                {
                    "timesteps": record.timesteps,
                    "episodes": record.episodes,
                    "fitness": (record.fitness_mean, record.fitness_max, record.fitness_min),
                    **extras,
                }
            )
        return keep

    def assert_same(self, other: Outcome) -> None:
        assert self.deterministic() == other.deterministic()
        np.testing.assert_array_equal(self.params, other.params)
        np.testing.assert_array_equal(self.eval_returns, other.eval_returns)


def run_generations(
    algorithm: Algorithm, generations: int = GENERATIONS, before_step: Any = None
) -> Outcome:
    """Step ``algorithm``, evaluate its centre, close it."""
    try:
        records = []
        for generation in range(generations):
            if before_step is not None:
                before_step(algorithm, generation)
            records.append(algorithm.step())
        returns = np.asarray(algorithm.evaluate_policy([11, 12]))
        return Outcome(records, algorithm.current_parameters(), returns)
    finally:
        algorithm.close()


_REFERENCES: dict[tuple[Any, ...], Outcome] = {}


def reference(name: str, sync: str = "broadcast", env: str = ENV, episodes: int = 1) -> Outcome:
    """The inline, one-worker outcome (cached for the session)."""
    key = (name, sync, env, episodes)
    if key not in _REFERENCES:
        algorithm = make_algorithm(name, "inline", 1, sync, env=env, episodes=episodes)
        _REFERENCES[key] = run_generations(algorithm)
    return _REFERENCES[key]


def _reply_arrived(worker: Any) -> bool:
    if hasattr(worker, "conn"):  # process backend: bytes waiting in the pipe
        return bool(worker.conn.poll())
    import ray

    ready, _ = ray.wait([worker.pending], timeout=0)
    return bool(ready)


def kill_busy_worker(evaluator: PoolEvaluator) -> int:
    """SIGKILL the process of a worker that is still running its chunk; return its task count.

    The worker is stopped first and killed only if no reply of it has arrived, so the
    kill is certainly mid-task.
    """
    pids = evaluator.worker_pids()  # type: ignore[attr-defined]
    for worker, pid in zip(evaluator.workers, pids, strict=True):
        if worker.outstanding is None:
            continue
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.05)  # a reply already on its way lands meanwhile
        if _reply_arrived(worker):
            os.kill(pid, signal.SIGCONT)
            continue
        os.kill(pid, signal.SIGKILL)
        return len(worker.outstanding[1])
    raise AssertionError("no worker was still running its chunk right after dispatch")


def kill_in_generation(target_generation: int, killed: list[int]) -> Any:
    """A ``before_step`` hook: SIGKILL a busy worker mid-way through one generation."""

    def before_step(algorithm: Any, generation: int) -> None:
        evaluator = algorithm.evaluator
        if generation != target_generation:
            evaluator.after_dispatch = None
            return

        def hook(pool: PoolEvaluator) -> None:
            killed.append(kill_busy_worker(pool))

        evaluator.after_dispatch = hook

    return before_step


# -- determinism --------------------------------------------------------------------------
# 4 workers slow: on 2 cores they add time, not a new case (1 and 2 cover the split).
@pytest.mark.parametrize("workers", [1, 2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ES_ALGORITHMS)
def test_process_backend_matches_inline(name: str, workers: int) -> None:
    outcome = run_generations(make_algorithm(name, "process", workers))
    outcome.assert_same(reference(name))
    assert all(r.bytes_to_workers > 0 and r.bytes_from_workers > 0 for r in outcome.records)


def test_inline_bytes_are_the_encoded_message_lengths() -> None:
    spec = cartpole_spec()
    centre = np.zeros(spec.num_params, dtype=np.float32)
    broadcast = Broadcast(0, centre, 0.1, None, None)
    tasks = [EvalTask(i, (i,), 50, noise_index=i, sign=1) for i in range(4)]
    evaluator = InlineEvaluator(ENV, spec, NoiseSpec(1 << 16, 0))
    results, stats = evaluator.evaluate(broadcast, tasks)
    sent = len(encode(("broadcast", broadcast))) + len(encode(("tasks", (0, tasks))))
    assert stats.bytes_to_workers == sent
    assert stats.bytes_from_workers == len(encode(("results", 0, results)))
    assert stats.bytes_to_workers > centre.nbytes  # the centre itself crosses the wire


# -- the backend table and who builds the evaluator -------------------------------------------
def test_backend_table_gives_the_classes_and_the_flag_help() -> None:
    from evaluation.registry import BACKENDS, UnknownBackendError, get_backend
    from harness.schema import BY_NAME

    assert list(BACKENDS) == ["inline", "process", "ray"]
    assert get_backend("inline") is InlineEvaluator and get_backend("process") is ProcessEvaluator
    knob = BY_NAME["backend"]
    assert knob.metavar == "{inline,process,ray}" and knob.default in BACKENDS
    for backend in BACKENDS.values():
        assert "\n" not in backend.doc and f"{backend.name}: {backend.doc}" in knob.doc
    with pytest.raises(UnknownBackendError, match="unknown backend 'cluster'; choose one of"):
        get_backend("cluster")


def _fail_in_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make pycma's set-up raise, as a library would on an option it refuses."""
    from algorithms.cma_es import CMAStrategy

    def refuse(self: Any, *args: Any) -> None:
        raise RuntimeError("pycma refused an option")

    monkeypatch.setattr(CMAStrategy, "__init__", refuse)


@pytest.mark.parametrize(
    ("name", "sync"),
    [("optimes", "gossip"), ("cma", "broadcast")],
)
def test_failing_algorithm_setup_leaves_no_workers(
    name: str, sync: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner starts the workers first; if the algorithm's constructor raises, it stops them."""
    import harness.runner

    started: list[Any] = []  # the worker processes, as the evaluator started them
    original = harness.runner.make_evaluator

    def recording(*args: Any, **kwargs: Any) -> Any:
        evaluator = original(*args, **kwargs)
        started.extend(worker.process for worker in evaluator.workers)
        return evaluator

    monkeypatch.setattr(harness.runner, "make_evaluator", recording)
    if name == "cma":
        _fail_in_setup(monkeypatch)
    with pytest.raises((ValueError, RuntimeError), match=r"gossip|pycma refused"):
        make_algorithm(name, "process", 2, sync)
    assert len(started) == 2  # the workers did start before the constructor ran
    assert all(process.exitcode is not None for process in started)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("es-harness")]


def test_optimes_refuses_an_evaluator_with_another_noise_table() -> None:
    algo_cls = get_algorithm("optimes")
    context = RunContext(ENV, cartpole_spec(), 3, 1, 1, max_episode_steps=200)
    params = validate_params(TINY_PARAMS["optimes"], algo_cls.Config, "optimes")
    other = NoiseSpec(1 << 16, 3)  # the run's seed, not the size optimes asks for
    with (
        InlineEvaluator(ENV, context.policy_spec, other) as evaluator,
        pytest.raises(ValueError, match="noise table"),
    ):
        algo_cls(context, params, evaluator)  # type: ignore[call-arg]


# -- faults -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sync", ["broadcast", "seeds"])
def test_sigkill_mid_generation_reruns_only_its_tasks(sync: str) -> None:
    killed: list[int] = []
    algorithm = make_algorithm("optimes", "process", 2, sync, **SLOW)
    evaluator = algorithm.evaluator  # type: ignore[attr-defined]
    outcome = run_generations(algorithm, before_step=kill_in_generation(1, killed))
    outcome.assert_same(reference("optimes", sync, **SLOW))
    assert len(killed) == 1 and killed[0] > 0
    retried = [r.extras["retried_tasks"] for r in outcome.records]
    assert retried == [0.0, float(killed[0]), 0.0]  # only the dead worker's chunk ran twice
    assert killed[0] < TINY_PARAMS["optimes"]["population"]
    assert evaluator.restarts == 1


def test_stale_reply_of_an_older_generation_is_discarded() -> None:
    spec = cartpole_spec()
    centre = np.zeros(spec.num_params, dtype=np.float32)
    tasks = [EvalTask(i, (i,), 50, noise_index=i, sign=1) for i in range(8)]
    evaluator = ProcessEvaluator(ENV, spec, NoiseSpec(1 << 16, 0), 2)
    try:
        expected, _ = evaluator.evaluate(Broadcast(0, centre, 0.1, None, None), tasks)

        def late_reply(pool: PoolEvaluator) -> None:
            # Worker 0 answers a request of generation 0 after its current chunk.
            worker = pool.workers[0]
            assert pool._post(
                worker, encode(("broadcast", Broadcast(0, centre + 1, 0.1, None, None)))
            )
            assert pool._post(worker, encode(("tasks", ((0, -1), tasks[:2]))))
            assert pool._post(worker, encode(("broadcast", Broadcast(1, centre, 0.1, None, None))))

        evaluator.after_dispatch = late_reply
        results, stats = evaluator.evaluate(Broadcast(1, centre, 0.1, None, None), tasks)
        evaluator.after_dispatch = None
        # On a loaded machine the late reply can arrive after generation 1 is complete;
        # it is then read, and discarded, during the next generation.
        later, later_stats = evaluator.evaluate(Broadcast(2, centre, 0.1, None, None), tasks)
    finally:
        evaluator.close()
    stale = [s.extras.get("stale_replies", 0) for s in (stats, later_stats)]
    assert sum(stale) == 1, stale
    assert [r.generation for r in results] == [1] * len(tasks)
    assert [r.generation for r in later] == [2] * len(tasks)
    for generation in (results, later):
        assert [r.returns.tolist() for r in generation] == [r.returns.tolist() for r in expected]


def test_workers_that_keep_dying_raise_worker_lost() -> None:
    spec = policy_spec(SLOW["env"])
    tasks = [EvalTask(i, (i, i + 1), 200) for i in range(4)]
    evaluator = ProcessEvaluator(SLOW["env"], spec, None, 1, max_restarts=0)
    broadcast = Broadcast(0, np.zeros(spec.num_params, dtype=np.float32), 0.1, None, None)
    try:
        evaluator.after_dispatch = kill_busy_worker
        with pytest.raises(WorkerLostError, match=r"max_restarts=0\); last: worker 0 \(pid"):
            evaluator.evaluate(broadcast, tasks)
    finally:
        evaluator.close()


# -- scheduling -----------------------------------------------------------------------------
def test_chunks_shrink_to_single_tasks() -> None:
    sizes = []
    remaining = 40
    while remaining:
        sizes.append(chunk_size(remaining, 2, 4))
        remaining -= sizes[-1]
    assert sum(sizes) == 40 and sizes == sorted(sizes, reverse=True)
    assert sizes[0] == 5 and sizes[-4:] == [1, 1, 1, 1]  # the tail is one task at a time
    assert chunk_count(40, 2, 4) == len(sizes)
    assert chunk_count(3, 16, 4) == 3 and chunk_count(0, 2, 4) == 0


def test_idle_shares_split_the_call() -> None:
    """Worker start-up and barrier idle are parts of the call's wall-clock, not more."""
    spec = policy_spec(SLOW["env"])
    centre = np.zeros(spec.num_params, dtype=np.float32)
    # one long task and many one-step ones: one worker idles at the barrier
    tasks = [EvalTask(0, (0, 1), 200)] + [EvalTask(i, (i,), 1) for i in range(1, 9)]
    evaluator = ProcessEvaluator(SLOW["env"], spec, None, 2)
    try:
        calls = []
        for generation in range(2):  # fresh workers, then the same ones again
            started = time.perf_counter()
            results, stats = evaluator.evaluate(
                Broadcast(generation, centre, 0.0, None, None), tasks
            )
            calls.append((time.perf_counter() - started, stats))
            assert [r.task_id for r in results] == list(range(9))
    finally:
        evaluator.close()
    for wall, stats in calls:
        assert stats.worker_start_s >= 0 and stats.straggler_s > 0
        assert stats.worker_start_s + stats.straggler_s <= wall
    assert calls[1][1].worker_start_s == 0  # only a worker's first reply includes its start


def test_a_result_pays_wire_bytes_only_for_the_fields_it_carries() -> None:
    plain = EvalResult(
        task_id=3, generation=1, returns=np.ones(2), lengths=np.ones(2, dtype=np.int64), steps=2
    )
    shaped = EvalResult(**{**plain.__dict__, "training_returns": np.zeros(2)})
    plain_back, shaped_back = pickle.loads(pickle.dumps(plain)), pickle.loads(pickle.dumps(shaped))
    assert "training_returns" not in pickle.dumps(plain).decode("latin-1")
    assert plain_back.training_returns is None and plain_back.failed is None
    np.testing.assert_array_equal(plain_back.fitness_returns, plain.returns)
    np.testing.assert_array_equal(shaped_back.fitness_returns, np.zeros(2))
    assert len(pickle.dumps(plain)) < len(pickle.dumps(shaped))
