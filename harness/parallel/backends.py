"""Evaluation backends: ``inline`` (this process), ``process`` (a pool on this machine).

Every backend speaks the same serialised messages (see :mod:`harness.parallel.worker`),
so the byte counters measure what actually crosses the wire, and every backend
returns results ordered by task id so that an algorithm never sees which worker ran what.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from abc import ABC, abstractmethod
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Any

from envs.policies import PolicySpec
from harness.parallel.noise import NoiseSpec, NoiseTable
from harness.parallel.protocol import Broadcast, EvalResult, EvalTask, GenerationStats
from harness.parallel.worker import TaskRunner, decode, encode, process_worker_main

BACKENDS = ("inline", "process", "ray")


class WorkerLostError(RuntimeError):
    """Workers kept dying; the generation could not be completed."""


class Evaluator(ABC):
    """Evaluates a generation's tasks; results come back ordered by task id."""

    num_workers: int = 1

    def __init__(self, env_name: str, policy_spec: PolicySpec, noise_spec: NoiseSpec | None):
        self.env_name = env_name
        self.policy_spec = policy_spec
        self.noise_spec = noise_spec

    @abstractmethod
    def evaluate(
        self, broadcast: Broadcast, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        """Run every task against ``broadcast``; return results sorted by ``task_id``."""

    def close(self) -> None:
        """Release workers and shared memory."""

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InlineEvaluator(Evaluator):
    """Runs tasks in this process. Messages still go through the codec, so bytes are real."""

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        noise: NoiseTable | None = None,
    ):
        super().__init__(env_name, policy_spec, noise_spec)
        if noise is None and noise_spec is not None:
            noise = NoiseTable.create(noise_spec)
        self.runner = TaskRunner(env_name, policy_spec, noise)

    def evaluate(
        self, broadcast: Broadcast, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        stats = GenerationStats()
        payload = encode(("broadcast", broadcast))
        stats.bytes_to_workers += len(payload)
        self.runner.set_broadcast(decode(payload)[1])
        payload = encode(("tasks", tasks))
        stats.bytes_to_workers += len(payload)
        results = [self.runner.run(task) for task in decode(payload)[1]]
        payload = encode(results)
        stats.bytes_from_workers += len(payload)
        results = decode(payload)
        stats.worker_seconds = sum(result.duration_s for result in results)
        return sorted(results, key=lambda r: r.task_id), stats


class _PoolWorker:
    def __init__(self, process: Any, conn: Connection, worker_id: int) -> None:
        self.process = process
        self.conn = conn
        self.worker_id = worker_id
        self.outstanding: list[EvalTask] | None = None


class ProcessEvaluator(Evaluator):
    """A pool of ``num_workers`` processes; the noise table lives once in shared memory.

    Tasks are handed out in small chunks as workers free up, so a slow episode
    does not idle the others. A worker that dies mid-generation is replaced and
    only its outstanding chunk is re-run; a result from an older generation is dropped.
    """

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        num_workers: int,
        chunks_per_worker: int = 4,
        max_restarts: int = 8,
    ):
        super().__init__(env_name, policy_spec, noise_spec)
        if num_workers < 1:
            raise ValueError(f"workers must be positive, got {num_workers}")
        self.num_workers = num_workers
        self.chunks_per_worker = chunks_per_worker
        self.max_restarts = max_restarts
        self.restarts = 0
        self._context = mp.get_context("spawn")
        self.noise = NoiseTable.create(noise_spec, shared=True) if noise_spec else None
        self._spec_dict = policy_spec.to_dict()
        self.workers = [self._start(worker_id) for worker_id in range(num_workers)]

    def _start(self, worker_id: int) -> _PoolWorker:
        head_conn, worker_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=process_worker_main,
            args=(
                worker_conn,
                worker_id,
                self.env_name,
                self._spec_dict,
                self.noise_spec,
                self.noise.shm_name if self.noise is not None else None,
            ),
            daemon=True,
            name=f"es-harness-worker-{worker_id}",
        )
        process.start()
        worker_conn.close()
        return _PoolWorker(process, head_conn, worker_id)

    def worker_pids(self) -> list[int]:
        """Operating-system ids of the live workers (fault tests kill these)."""
        return [int(worker.process.pid) for worker in self.workers]

    def _replace(self, worker: _PoolWorker) -> _PoolWorker:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise WorkerLostError(
                f"{self.restarts} worker processes died; last exit code {worker.process.exitcode}"
            )
        worker.conn.close()
        worker.process.join(timeout=1)
        fresh = self._start(worker.worker_id)
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    def evaluate(
        self, broadcast: Broadcast, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        stats = GenerationStats()
        broadcast_payload = encode(("broadcast", broadcast))
        chunk = max(1, math.ceil(len(tasks) / (self.num_workers * self.chunks_per_worker)))
        queue: deque[list[EvalTask]] = deque(
            tasks[start : start + chunk] for start in range(0, len(tasks), chunk)
        )
        results: dict[int, EvalResult] = {}
        idle: list[_PoolWorker] = []
        for worker in list(self.workers):
            worker.outstanding = None
            if not self._send(worker, broadcast_payload, stats):
                worker = self._replace(worker)
                self._send(worker, broadcast_payload, stats)
            idle.append(worker)

        while len(results) < len(tasks):
            while idle and queue:
                worker = idle.pop()
                batch = queue.popleft()
                if self._send(worker, encode(("tasks", batch)), stats):
                    worker.outstanding = batch
                else:
                    queue.appendleft(batch)
                    idle.append(self._respawn(worker, broadcast_payload, stats))
            busy = {w.conn: w for w in self.workers if w.outstanding is not None}
            sentinels = {w.process.sentinel: w for w in self.workers if w.outstanding is not None}
            if not busy:
                raise WorkerLostError("no live worker holds outstanding tasks")
            for ready in wait([*busy, *sentinels]):
                worker = busy.get(ready) or sentinels[ready]  # type: ignore[call-overload]
                if worker.outstanding is None:
                    continue
                try:
                    payload = worker.conn.recv_bytes()
                except (EOFError, OSError):
                    queue.appendleft(worker.outstanding)
                    stats.retried_tasks += len(worker.outstanding)
                    worker.outstanding = None
                    idle.append(self._respawn(worker, broadcast_payload, stats))
                    continue
                stats.bytes_from_workers += len(payload)
                worker.outstanding = None
                idle.append(worker)
                for result in decode(payload):
                    if result.generation == broadcast.generation:
                        results[result.task_id] = result
                        stats.worker_seconds += result.duration_s
        return [results[task.task_id] for task in sorted(tasks, key=lambda t: t.task_id)], stats

    def _send(self, worker: _PoolWorker, payload: bytes, stats: GenerationStats) -> bool:
        try:
            worker.conn.send_bytes(payload)
        except (BrokenPipeError, OSError):
            return False
        stats.bytes_to_workers += len(payload)
        return True

    def _respawn(
        self, worker: _PoolWorker, broadcast_payload: bytes, stats: GenerationStats
    ) -> _PoolWorker:
        fresh = self._replace(worker)
        if not self._send(fresh, broadcast_payload, stats):
            raise WorkerLostError(f"replacement worker {fresh.worker_id} died at start")
        return fresh

    def close(self) -> None:
        for worker in self.workers:
            try:
                worker.conn.send_bytes(encode(("close", None)))
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + 5
        for worker in self.workers:
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers = []
        if self.noise is not None:
            self.noise.close()
            self.noise = None


def make_evaluator(
    backend: str,
    env_name: str,
    policy_spec: PolicySpec,
    noise_spec: NoiseSpec | None,
    num_workers: int,
    ray_address: str | None = None,
) -> Evaluator:
    """Build the evaluator a run asked for."""
    if backend == "inline":
        return InlineEvaluator(env_name, policy_spec, noise_spec)
    if backend == "process":
        return ProcessEvaluator(env_name, policy_spec, noise_spec, num_workers)
    if backend == "ray":
        from harness.parallel.ray_backend import RayEvaluator

        return RayEvaluator(env_name, policy_spec, noise_spec, num_workers, ray_address)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
