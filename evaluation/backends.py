"""Evaluation backends: ``inline`` (this process), ``process`` (a pool here), ``ray`` (a cluster).

The names a run chooses from are the table in :mod:`evaluation.registry`; every
backend class builds itself from a run's settings through :meth:`Evaluator.create`.

Every backend speaks the same serialised messages (see :mod:`evaluation.worker`),
so the byte counters measure what actually crosses the wire, and every backend
returns results ordered by task id so that an algorithm never sees which worker ran what.

Two ways to tell workers what to evaluate against:

* broadcast mode: ``evaluate(Broadcast(...), tasks)`` sends the centre to every worker;
* replicated mode (Algorithm 2 of Salimans et al.): after :meth:`Evaluator.attach_replica`,
  ``evaluate(ReplicaRef(generation), tasks)`` sends only the generation id; every worker
  holds a replica of the optimizer and :meth:`Evaluator.update_replicas` ships the small
  per-generation update. A worker whose checksum differs from the head's is resynced with
  the full state, and so is every fresh worker before its first task.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing as mp
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from envs.policies import PolicySpec
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import (
    Broadcast,
    EvalResult,
    EvalTask,
    GenerationStats,
    Replica,
    ReplicaRef,
)
from evaluation.spawning import main_module_hidden
from evaluation.worker import CLOSE, TaskRunner, decode, encode, process_worker_main

log = logging.getLogger(__name__)

Target = Broadcast | ReplicaRef
Snapshot = Callable[[], Replica]


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT in this block (a second Ctrl-C must not cut a final checkpoint short).

    A SIGINT that arrives in the block is lost: to start child processes, use
    :func:`sigint_held_from_children`, which loses none.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def sigint_held_from_children() -> Iterator[None]:
    """Start child processes in this block: they never act on SIGINT, and the head loses none.

    Ctrl-C in a terminal goes to the whole foreground process group; the head stops
    its workers cleanly, so the workers must not act on it (no worker tracebacks).
    SIGINT is blocked in this thread for the block: children inherit the mask across
    ``fork`` and ``exec`` (pool workers then ignore SIGINT outright; Ray's processes
    keep it blocked, and so do threads started in the block). Ignoring
    it in the head instead would drop a stop that arrives meanwhile (a sweep stopping
    a cell while it starts its workers); blocked, it is held and delivered after.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class WorkerLostError(RuntimeError):
    """Workers kept dying or could not be reached; the generation could not be completed."""


def _target_message(target: Target) -> bytes:
    if isinstance(target, ReplicaRef):
        return encode(("replica", target))
    return encode(("broadcast", target))


@dataclass(frozen=True)
class EvaluatorSettings:
    """What a run asks of its evaluator; every backend's :meth:`Evaluator.create` takes it
    and ignores what it has no use for."""

    #: env id or short name each worker builds
    env_name: str
    #: the policy the parameter vectors fill
    policy_spec: PolicySpec
    #: the shared noise table (None: candidates travel as vectors)
    noise_spec: NoiseSpec | None
    #: evaluation processes or actors
    workers: int = 1
    #: Ray cluster address (the ray backend only)
    ray_address: str | None = None
    #: training-reward transform the workers' rollouts apply (envs.reward_shaping)
    reward_transform: str = "none"
    #: top-level packages a remote worker must import (a cluster backend ships them); the
    #: caller names them, so this layer imports nothing above it
    py_modules: tuple[str, ...] = ()


class Evaluator(ABC):
    """Evaluates a generation's tasks; results come back ordered by task id."""

    num_workers: int = 1
    #: The noise table as held in this process, if the backend keeps one here; the head
    #: reads perturbations from it instead of drawing a second copy.
    noise: NoiseTable | None = None

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        *,
        reward_transform: str = "none",
    ):
        self.env_name = env_name
        self.policy_spec = policy_spec
        self.noise_spec = noise_spec
        #: The training-reward transform each worker's rollouts apply (envs.reward_shaping).
        self.reward_transform = reward_transform
        self._snapshot: Snapshot | None = None

    @classmethod
    def create(cls, settings: EvaluatorSettings) -> Evaluator:
        """Build this backend from a run's settings."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from a run's settings")

    @abstractmethod
    def evaluate(
        self, target: Target, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        """Run every task against ``target``; return results sorted by ``task_id``."""

    def attach_replica(self, snapshot: Snapshot) -> None:
        """Enable replicated mode; ``snapshot()`` gives the head's current full state."""
        self._snapshot = snapshot
        self.invalidate_replicas()

    def invalidate_replicas(self) -> None:  # noqa: B027 - a no-op without replicas
        """Forget what the workers hold: each gets a full sync before its next task."""

    def update_replicas(self, update: Any, generation: int, checksum: int) -> GenerationStats:
        """Send ``update`` to every replica; resync each whose checksum is not ``checksum``."""
        raise NotImplementedError(f"{type(self).__name__} does not keep replicas")

    def _sync_message(self) -> bytes:
        if self._snapshot is None:
            raise RuntimeError("replicated mode needs attach_replica() first")
        return encode(("sync", self._snapshot()))

    def close(self) -> None:  # noqa: B027 - nothing to release by default
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
        *,
        reward_transform: str = "none",
    ):
        super().__init__(env_name, policy_spec, noise_spec, reward_transform=reward_transform)
        if noise is None and noise_spec is not None:
            noise = NoiseTable.create(noise_spec)
        self.noise = noise
        self.runner = TaskRunner(env_name, policy_spec, noise, reward_transform=reward_transform)
        self._replica_generation: int | None = None

    @classmethod
    def create(cls, settings: EvaluatorSettings) -> InlineEvaluator:
        """One runner here, whatever ``workers`` says (results do not depend on it)."""
        return cls(
            settings.env_name,
            settings.policy_spec,
            settings.noise_spec,
            reward_transform=settings.reward_transform,
        )

    def _send(self, payload: bytes, stats: GenerationStats) -> bytes | None:
        stats.bytes_to_workers += len(payload)
        reply = self.runner.handle(payload)
        if reply is not None:
            stats.bytes_from_workers += len(reply)
        return reply

    def evaluate(
        self, target: Target, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        stats = GenerationStats()
        if isinstance(target, ReplicaRef) and self._replica_generation != target.generation:
            self._send(self._sync_message(), stats)
            self._replica_generation = target.generation
            stats.extras["replica_syncs"] = 1
        self._send(_target_message(target), stats)
        reply = self._send(encode(("tasks", (0, tasks))), stats)
        assert reply is not None
        _, _, results = decode(reply)
        stats.worker_seconds = sum(result.duration_s for result in results)
        return sorted(results, key=lambda r: r.task_id), stats

    def invalidate_replicas(self) -> None:
        self._replica_generation = None

    def update_replicas(self, update: Any, generation: int, checksum: int) -> GenerationStats:
        stats = GenerationStats()
        if self._replica_generation is None:
            return stats
        reply = self._send(encode(("update", update)), stats)
        assert reply is not None
        _, got_generation, got = decode(reply)
        if (got_generation, got) != (generation, checksum):
            log.warning(
                "inline replica diverged at generation %d (checksum %08x, head %08x): resynced",
                generation,
                got,
                checksum,
            )
            self._send(self._sync_message(), stats)
            stats.resyncs += 1
        self._replica_generation = generation
        return stats


class PoolWorker:
    """The head's view of one worker: what it holds and what it owes."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id
        #: ``(tag, tasks)`` of the chunk this worker is running, or None when idle
        self.outstanding: tuple[Any, list[EvalTask]] | None = None
        #: generation of this worker's replica; None when it holds none (or a stale one)
        self.replica_generation: int | None = None
        #: True until its first reply: the wait for it includes its start-up
        self.fresh = True


def chunk_size(remaining: int, workers: int, chunks_per_worker: int) -> int:
    """Tasks in the next chunk: ``ceil(remaining / (chunks_per_worker * workers))``.

    Guided self-scheduling (Polychronopoulos and Kuck, 1987): chunks shrink as the
    queue drains, so early chunks are large (few messages) and the last ones are single
    tasks. Episode lengths vary widely (LunarLander: about 60 to 1000 steps) and are
    unknown before a task runs, so what a worker still holds when the others run dry
    is at most about one task, not a fixed-size chunk.
    """
    return max(1, math.ceil(remaining / (chunks_per_worker * workers)))


def request_number(count: int) -> bytes:
    """The request counter as it travels in a chunk's tag: always 8 bytes.

    The counter only tells a stale reply from the current one, but it starts again at 0 in
    every process, and pickle writes a small int in 1, 2 or 4 bytes as it grows: sent as
    an int, a resumed run's messages were a byte shorter each (9 to 13 bytes a generation)
    until its counter caught up, so its ``bytes_to_workers`` and ``bytes_from_workers``
    differed from an uninterrupted run's. A fixed width keeps the byte counts a function
    of the run's work alone.
    """
    return count.to_bytes(8, "little")


def chunk_count(tasks: int, workers: int, chunks_per_worker: int) -> int:
    """How many chunks (request messages) :func:`chunk_size` cuts ``tasks`` into."""
    count = 0
    while tasks > 0:
        tasks -= chunk_size(tasks, workers, chunks_per_worker)
        count += 1
    return count


class PoolEvaluator(Evaluator):
    """Scheduling shared by the process and Ray backends.

    Tasks are handed out in shrinking chunks (:func:`chunk_size`) as workers free up,
    so a slow episode does not idle the others. A worker that dies mid-generation is
    replaced and only its
    outstanding chunk is re-run; a reply for an older request or an older
    generation is dropped. Subclasses supply the transport: start, post a message,
    send a request, wait for replies, stop.
    """

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        num_workers: int,
        chunks_per_worker: int = 4,
        max_restarts: int = 8,
        *,
        reward_transform: str = "none",
    ):
        super().__init__(env_name, policy_spec, noise_spec, reward_transform=reward_transform)
        if num_workers < 1:
            raise ValueError(f"workers must be positive, got {num_workers}")
        self.num_workers = num_workers
        self.chunks_per_worker = chunks_per_worker
        self.max_restarts = max_restarts
        self.restarts = 0
        self.workers: list[Any] = []
        self._requests = 0
        #: test hook: called once per evaluate, right after the first chunks went out
        self.after_dispatch: Callable[[PoolEvaluator], None] | None = None

    # -- transport, per backend ---------------------------------------------
    @abstractmethod
    def _start(self, worker_id: int) -> PoolWorker:
        """Start a worker."""

    @abstractmethod
    def _post(self, worker: Any, payload: bytes) -> bool:
        """Send a message without a reply; False if the worker is evidently dead."""

    @abstractmethod
    def _request(self, worker: Any, payload: bytes) -> bool:
        """Send a message whose reply :meth:`_wait` will deliver; False if dead."""

    @abstractmethod
    def _wait(self, busy: Sequence[Any]) -> list[tuple[Any, bytes | None]]:
        """Block until some busy workers reply: ``(worker, reply)``, reply None if it died."""

    @abstractmethod
    def _stop(self, worker: Any, graceful: bool) -> None:
        """Stop a worker (politely, or kill it)."""

    def _describe_death(self, worker: Any) -> str:
        return f"worker {worker.worker_id}"

    # -- worker lifecycle ------------------------------------------------------
    def _replace(self, worker: Any) -> Any:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise WorkerLostError(
                f"{self.restarts} workers died (more than max_restarts={self.max_restarts}); "
                f"last: {self._describe_death(worker)}"
            )
        log.warning("%s died; starting a replacement", self._describe_death(worker))
        self._stop(worker, graceful=False)
        fresh = self._start(worker.worker_id)
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    def _prime(
        self,
        worker: Any,
        target: Target,
        target_payload: bytes,
        sync: list[bytes],
        stats: GenerationStats,
    ) -> Any:
        """Make ``worker`` ready for this generation's tasks; replace it while it is dead."""
        while True:
            payloads = []
            if isinstance(target, ReplicaRef) and worker.replica_generation != target.generation:
                if not sync:
                    sync.append(self._sync_message())
                payloads.append(sync[0])
            payloads.append(target_payload)
            if all(self._post(worker, payload) for payload in payloads):
                for payload in payloads:
                    stats.bytes_to_workers += len(payload)
                if len(payloads) > 1:
                    stats.extras["replica_syncs"] = stats.extras.get("replica_syncs", 0) + 1
                if isinstance(target, ReplicaRef):
                    worker.replica_generation = target.generation
                return worker
            worker = self._replace(worker)

    # -- one generation ----------------------------------------------------------
    def _next_chunk(self, todo: deque[EvalTask]) -> list[EvalTask]:
        """Take the next chunk off ``todo``: guided self-scheduling (see :func:`chunk_size`)."""
        size = chunk_size(len(todo), self.num_workers, self.chunks_per_worker)
        return [todo.popleft() for _ in range(size)]

    def evaluate(
        self, target: Target, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        stats = GenerationStats()
        started = time.perf_counter()
        target_payload = _target_message(target)
        sync: list[bytes] = []  # the full-state message, built at most once per call
        todo: deque[EvalTask] = deque(tasks)
        retry: deque[list[EvalTask]] = deque()  # chunks of dead workers, run again first
        results: dict[int, EvalResult] = {}
        idle: list[Any] = []
        for worker in list(self.workers):
            worker.outstanding = None
            idle.append(self._prime(worker, target, target_payload, sync, stats))
        idle.reverse()  # pop() hands the first chunk to worker 0
        hook = self.after_dispatch
        sent_at: dict[int, float] = {}  # worker id -> when its current chunk went out
        last_reply: dict[int, float] = {}  # worker id -> when its last reply of this call came
        startup_idle = 0.0

        while len(results) < len(tasks):
            while idle and (retry or todo):
                worker = idle.pop()
                batch = retry.popleft() if retry else self._next_chunk(todo)
                self._requests += 1
                tag = (target.generation, request_number(self._requests))
                payload = encode(("tasks", (tag, batch)))
                if self._request(worker, payload):
                    stats.bytes_to_workers += len(payload)
                    worker.outstanding = (tag, batch)
                    sent_at[worker.worker_id] = time.perf_counter()
                else:
                    retry.appendleft(batch)
                    fresh = self._replace(worker)
                    idle.append(self._prime(fresh, target, target_payload, sync, stats))
            busy = [w for w in self.workers if w.outstanding is not None]
            if not busy:
                missing = len(tasks) - len(results)
                raise WorkerLostError(f"no live worker holds the {missing} outstanding tasks")
            if hook is not None:
                fire, hook = hook, None
                fire(self)
            for worker, reply in self._wait(busy):
                if worker.outstanding is None:
                    continue
                if reply is None:
                    tag, batch = worker.outstanding
                    retry.appendleft(batch)
                    stats.retried_tasks += len(batch)
                    worker.outstanding = None
                    fresh = self._replace(worker)
                    idle.append(self._prime(fresh, target, target_payload, sync, stats))
                    continue
                stats.bytes_from_workers += len(reply)
                _, tag, batch_results = decode(reply)
                if tag != worker.outstanding[0]:
                    stats.extras["stale_replies"] = stats.extras.get("stale_replies", 0) + 1
                    continue  # a reply to an older request; the current one is still due
                now = time.perf_counter()
                worker.outstanding = None
                idle.append(worker)
                last_reply[worker.worker_id] = now
                busy_s = 0.0
                for result in batch_results:
                    busy_s += result.duration_s
                    if result.generation != target.generation:
                        stats.extras["stale_results"] = stats.extras.get("stale_results", 0) + 1
                        continue
                    if result.task_id not in results:
                        results[result.task_id] = result
                        stats.worker_seconds += result.duration_s
                if worker.fresh:
                    # Its first reply ever: the wait beyond the chunk's own work was start-up.
                    worker.fresh = False
                    startup_idle += max(0.0, now - sent_at[worker.worker_id] - busy_s)
        finished = time.perf_counter()
        # Idle at the barrier: each worker from its last reply (or, with fewer chunks than
        # workers, from the start) until the last result of the call arrived.
        barrier_idle = sum(
            finished - last_reply.get(worker.worker_id, started) for worker in self.workers
        )
        stats.worker_start_s = startup_idle / self.num_workers
        stats.straggler_s = barrier_idle / self.num_workers
        return [results[task.task_id] for task in sorted(tasks, key=lambda t: t.task_id)], stats

    # -- replicated mode -------------------------------------------------------------
    def invalidate_replicas(self) -> None:
        for worker in self.workers:
            worker.replica_generation = None

    def update_replicas(self, update: Any, generation: int, checksum: int) -> GenerationStats:
        stats = GenerationStats()
        payload = encode(("update", update))
        pending: list[Any] = []
        for worker in list(self.workers):
            if worker.replica_generation is None:
                continue  # synced in full before its next task
            if self._request(worker, payload):
                stats.bytes_to_workers += len(payload)
                worker.outstanding = (("update", generation), [])
                pending.append(worker)
            else:
                self._replace(worker)
        sync: list[bytes] = []
        while pending:
            for worker, reply in self._wait(pending):
                if worker not in pending:
                    continue
                pending.remove(worker)
                worker.outstanding = None
                if reply is None:
                    self._replace(worker)  # the fresh one is synced before its next task
                    continue
                stats.bytes_from_workers += len(reply)
                kind, got_generation, got = decode(reply)
                if kind == "results":  # a stale task reply queued before the update's
                    pending.append(worker)
                    worker.outstanding = (("update", generation), [])
                    continue
                if (got_generation, got) == (generation, checksum):
                    worker.replica_generation = generation
                    continue
                log.warning(
                    "worker %d replica diverged at generation %d (checksum %08x at %d, head "
                    "%08x): resynced",
                    worker.worker_id,
                    generation,
                    got,
                    got_generation,
                    checksum,
                )
                if not sync:
                    sync.append(self._sync_message())
                if self._post(worker, sync[0]):
                    stats.bytes_to_workers += len(sync[0])
                    stats.resyncs += 1
                    worker.replica_generation = generation
                else:
                    self._replace(worker)
        return stats


class _ProcessWorker(PoolWorker):
    def __init__(self, process: Any, conn: Connection, worker_id: int) -> None:
        super().__init__(worker_id)
        self.process = process
        self.conn = conn


class ProcessEvaluator(PoolEvaluator):
    """A pool of ``num_workers`` processes here; the noise table once, in shared memory."""

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        num_workers: int,
        chunks_per_worker: int = 4,
        max_restarts: int = 8,
        *,
        reward_transform: str = "none",
    ):
        super().__init__(
            env_name,
            policy_spec,
            noise_spec,
            num_workers,
            chunks_per_worker,
            max_restarts,
            reward_transform=reward_transform,
        )
        self._context = mp.get_context("spawn")
        # The block is mapped first and drawn while the workers start (imports, env
        # construction take longer); they read it only for tasks, which come later.
        self.noise = NoiseTable.allocate(noise_spec) if noise_spec else None
        self._spec_dict = policy_spec.to_dict()
        self.workers = [self._start(worker_id) for worker_id in range(num_workers)]
        if self.noise is not None:
            self.noise.fill()

    @classmethod
    def create(cls, settings: EvaluatorSettings) -> ProcessEvaluator:
        """``workers`` processes on this machine (they share this checkout: nothing to ship)."""
        return cls(
            settings.env_name,
            settings.policy_spec,
            settings.noise_spec,
            settings.workers,
            reward_transform=settings.reward_transform,
        )

    def _start(self, worker_id: int) -> _ProcessWorker:
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
                self.reward_transform,
            ),
            daemon=True,
            name=f"es-harness-worker-{worker_id}",
        )
        with sigint_held_from_children(), main_module_hidden():
            process.start()  # the worker needs nothing of __main__ (evaluation.spawning)
        worker_conn.close()
        return _ProcessWorker(process, head_conn, worker_id)

    def worker_pids(self) -> list[int]:
        """Operating-system ids of the live workers (fault tests kill these)."""
        return [int(worker.process.pid) for worker in self.workers]

    def _describe_death(self, worker: _ProcessWorker) -> str:
        worker.process.join(timeout=1)
        return (
            f"worker {worker.worker_id} (pid {worker.process.pid}, "
            f"exit code {worker.process.exitcode})"
        )

    def _post(self, worker: _ProcessWorker, payload: bytes) -> bool:
        try:
            worker.conn.send_bytes(payload)
        except (BrokenPipeError, OSError):
            return False
        return True

    _request = _post

    def _wait(self, busy: Sequence[_ProcessWorker]) -> list[tuple[Any, bytes | None]]:
        by_handle: dict[Any, _ProcessWorker] = {}
        for worker in busy:
            by_handle[worker.conn] = worker
            by_handle[worker.process.sentinel] = worker
        replies: list[tuple[Any, bytes | None]] = []
        seen: set[int] = set()
        for ready in wait(list(by_handle)):
            worker = by_handle[ready]
            if id(worker) in seen:
                continue
            seen.add(id(worker))
            try:
                # A reply written before the worker died is still in the pipe: read it.
                if ready is worker.conn or worker.conn.poll():
                    replies.append((worker, worker.conn.recv_bytes()))
                    continue
            except (EOFError, OSError):
                pass
            replies.append((worker, None))
        return replies

    def _stop(self, worker: _ProcessWorker, graceful: bool) -> None:
        if graceful:
            with contextlib.suppress(BrokenPipeError, OSError):
                worker.conn.send_bytes(CLOSE)
        else:
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join(timeout=5)
            worker.conn.close()

    def close(self) -> None:
        for worker in self.workers:
            self._stop(worker, graceful=True)
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
