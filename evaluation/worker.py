"""The evaluation side: turn tasks into results. Shared by every backend.

A ``TaskRunner`` holds one env, one policy and a view of the noise table,
built once per worker process and reused for every task. Every backend talks to
it through :meth:`TaskRunner.handle`, with messages serialised by :func:`encode`,
so the byte counters add up exactly what is shipped. The messages, ``(kind, body)``:

=============  =======================================  ===================================
kind           body                                     reply
=============  =======================================  ===================================
``broadcast``  :class:`Broadcast` (centre, obs stats)   none
``sync``       a :class:`Replica` (the full state)      none
``replica``    :class:`ReplicaRef` (a generation id)    none
``tasks``      ``(tag, [EvalTask, ...])``               ``("results", tag, [EvalResult])``
``update``     the algorithm's replica update           ``("checksum", generation, crc)``
``close``      ``None``                                 none; the worker exits
=============  =======================================  ===================================
"""

from __future__ import annotations

import os
import pickle
import signal
import time
import traceback
from typing import Any

import numpy as np

from envs.policies import PolicySpec
from envs.rollout import RolloutWorker
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalResult, EvalTask, Replica, ReplicaRef


def encode(message: Any) -> bytes:
    """Serialise one wire message; its length is what the byte counters add up."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def decode(payload: bytes) -> Any:
    """Inverse of :func:`encode`."""
    return pickle.loads(payload)


CLOSE = encode(("close", None))


def is_close(payload: bytes) -> bool:
    """Whether ``payload`` is the close message."""
    return payload == CLOSE


class TaskRunner:
    """Evaluates tasks against the latest broadcast."""

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise: NoiseTable | None,
        worker_id: int = 0,
        fail_on_error: bool = True,
        *,
        reward_transform: str = "none",
    ) -> None:
        self.env_name = env_name
        self.rollout = RolloutWorker(env_name, policy_spec, reward_transform)
        self.noise = noise
        self.worker_id = worker_id
        self.fail_on_error = fail_on_error
        self.broadcast: Broadcast | None = None
        self.replica: Replica | None = None

    def set_broadcast(self, broadcast: Broadcast) -> None:
        """Adopt the generation's centre and observation normalisation."""
        self.broadcast = broadcast

    def sync(self, replica: Replica) -> None:
        """Replicated mode: adopt a full copy of the head's state."""
        replica.bind(self.noise)
        self.replica = replica

    def use_replica(self, ref: ReplicaRef) -> None:
        """Replicated mode: evaluate the next tasks against this worker's replica."""
        if self.replica is None:
            raise RuntimeError(
                f"worker {self.worker_id}: generation {ref.generation} "
                "asked for a replica before any sync"
            )
        if self.replica.generation != ref.generation:
            raise RuntimeError(
                f"worker {self.worker_id}: replica is at generation "
                f"{self.replica.generation}, head asked for {ref.generation}"
            )
        self.broadcast = self.replica.broadcast()

    def apply_update(self, update: Any) -> tuple[int, int]:
        """Replicated mode: apply the head's update; return (generation, checksum)."""
        if self.replica is None:
            raise RuntimeError(f"worker {self.worker_id}: an update arrived before any sync")
        self.replica.apply(update)
        self.broadcast = None
        return self.replica.generation, self.replica.checksum()

    def handle(self, payload: bytes) -> bytes | None:
        """Serve one encoded message; return the encoded reply, if the message has one."""
        kind, body = decode(payload)
        if kind == "broadcast":
            self.set_broadcast(body)
        elif kind == "sync":
            self.sync(body)
        elif kind == "replica":
            self.use_replica(body)
        elif kind == "tasks":
            tag, tasks = body
            return encode(("results", tag, [self.run(task) for task in tasks]))
        elif kind == "update":
            return encode(("checksum", *self.apply_update(body)))
        elif kind != "close":
            raise ValueError(f"unknown message kind {kind!r}")
        return None

    def run(self, task: EvalTask) -> EvalResult:
        """Evaluate one task; an exception inside the env becomes a failed result."""
        broadcast = self.broadcast
        if broadcast is None:
            raise RuntimeError("a task arrived before any broadcast")
        start = time.perf_counter()
        noise = self.noise.array if self.noise is not None else None
        try:
            self.rollout.set_progress(broadcast.generation, broadcast.timesteps)
            params = task.parameters(broadcast, noise)
            batch = self.rollout.run(
                params,
                broadcast.obs_mean,
                broadcast.obs_std,
                task.env_seeds,
                task.max_steps,
                task.collect_obs,
                action_noise_std=task.action_noise_std,
                action_noise_seed=task.action_noise_seed,
                behaviour=task.behaviour,
            )
        except Exception as error:
            message = (
                f"env {self.env_name}, generation {broadcast.generation}, task {task.task_id}: "
                f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
            )
            empty = np.zeros(0)
            return EvalResult(
                task.task_id,
                broadcast.generation,
                empty,
                empty.astype(np.int64),
                0,
                worker_id=self.worker_id,
                duration_s=time.perf_counter() - start,
                failed=message,
            )
        return EvalResult(
            task_id=task.task_id,
            generation=broadcast.generation,
            returns=batch.returns,
            training_returns=batch.training_returns,
            lengths=batch.lengths,
            steps=batch.steps,
            obs_sum=batch.obs_sum,
            obs_sumsq=batch.obs_sumsq,
            obs_count=batch.obs_count,
            worker_id=self.worker_id,
            duration_s=time.perf_counter() - start,
            behaviour=batch.behaviour,
        )


def process_worker_main(
    conn: Any,
    worker_id: int,
    env_name: str,
    policy_spec: dict[str, Any],
    noise_spec: NoiseSpec | None,
    noise_shm_name: str | None,
    reward_transform: str = "none",
) -> None:
    """Entry point of a pool worker process: serve broadcasts and task batches until closed."""
    # Started with SIGINT blocked (backends.sigint_held_from_children); Ctrl-C is the head's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    noise: NoiseTable | None = None
    if noise_spec is not None:
        noise = (
            NoiseTable.attach(noise_spec, noise_shm_name)
            if noise_shm_name is not None
            else NoiseTable.create(noise_spec)
        )
    runner = TaskRunner(
        env_name,
        PolicySpec.from_dict(policy_spec),
        noise,
        worker_id,
        reward_transform=reward_transform,
    )
    try:
        while True:
            try:
                payload = conn.recv_bytes()
            except (EOFError, OSError):
                return
            reply = runner.handle(payload)
            if reply is not None:
                conn.send_bytes(reply)
            elif is_close(payload):
                return
    finally:
        if noise is not None:
            noise.close()
