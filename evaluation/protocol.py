"""Messages between the head and its workers.

A task names its candidate either as ``(noise_index, sign)`` into the shared
noise table (OpenAI-ES; a few integers on the wire) or as an explicit parameter
vector (Nevergrad, CMA-ES: ``d`` floats on the wire). The head assigns every
random choice (noise indices, env seeds, action-noise seeds), so a result never
depends on which worker produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Broadcast:
    """What every worker needs once per generation: the centre and the obs normalisation."""

    generation: int
    centre: np.ndarray | None
    #: one scalar, or one per coordinate (float32, PGPE and SNES): sent once per generation
    sigma: float | np.ndarray
    obs_mean: np.ndarray | None
    obs_std: np.ndarray | None
    #: training timesteps the head had counted before this generation (for ``anneal_timesteps``)
    timesteps: int = 0


@dataclass(frozen=True)
class ReplicaRef:
    """Replicated mode: evaluate against the worker's own replica, which must be at ``generation``.

    This is all that crosses the wire in place of a :class:`Broadcast`: no centre, no obs stats.
    """

    generation: int


@runtime_checkable
class Replica(Protocol):
    """A worker-side copy of an optimizer's state (replicated mode, Algorithm 2 of the paper).

    The algorithm ships one, pickled, as a full sync; afterwards only its small per-generation
    updates travel, and every replica applies them with the head's own code. The evaluation
    layer never imports an algorithm: it only calls these methods.
    """

    generation: int

    def bind(self, noise: Any) -> None:
        """Attach the worker's noise table (a :class:`~evaluation.noise.NoiseTable`)."""

    def apply(self, update: Any) -> None:
        """Apply one generation's update; afterwards ``generation`` is the update's generation."""

    def broadcast(self) -> Broadcast:
        """What tasks are evaluated against: this replica's centre and obs normalisation."""

    def checksum(self) -> int:
        """A checksum of the state (the centre and optimizer moments) that the head compares."""


@dataclass(frozen=True)
class EvalTask:
    """One candidate to evaluate on ``len(env_seeds)`` episodes."""

    task_id: int
    env_seeds: tuple[int, ...]
    max_steps: int | None
    noise_index: int = -1
    sign: int = 0
    vector: np.ndarray | None = None
    collect_obs: bool = False
    action_noise_std: float = 0.0
    action_noise_seed: int | None = None
    #: return each episode's behaviour characterisation (:mod:`envs.behaviour`), averaged
    behaviour: bool = False

    def __getstate__(self) -> dict[str, Any]:
        # A task that does not ask for behaviour pays no wire bytes for the flag: the class
        # default stands in on the other side, as for EvalResult's optional fields.
        state = dict(self.__dict__)
        if not state.get("behaviour"):
            state.pop("behaviour", None)
        return state

    def parameters(self, broadcast: Broadcast, noise: np.ndarray | None) -> np.ndarray:
        """Rebuild the candidate's parameters: the explicit vector, or centre + sign*sigma*eps
        (``sigma`` a scalar or, coordinate by coordinate, a vector)."""
        if self.vector is not None:
            return self.vector
        if broadcast.centre is None:
            raise ValueError(f"task {self.task_id} has no vector and no centre was broadcast")
        if self.sign == 0:
            return broadcast.centre
        if noise is None:
            raise ValueError(f"task {self.task_id} needs the noise table")
        dim = broadcast.centre.size
        eps = noise[self.noise_index : self.noise_index + dim]
        # one float32 product for a scalar sigma and a per-coordinate one alike; the sign
        # (+-1) multiplies exactly, so this is bitwise ``centre + float32(sign sigma) eps``
        sigma = np.asarray(broadcast.sigma, dtype=np.float32)
        return broadcast.centre + np.float32(self.sign) * (sigma * eps)


@dataclass
class EvalResult:
    """What a worker sends back: scalars and, when asked, observation statistics.

    ``returns`` are always the env's own rewards (what evaluation reports);
    ``training_returns`` are the transformed ones when the run has a reward transform,
    else None; ``behaviour`` is the episodes' mean behaviour characterisation when the task
    asked for one (novelty search). Optional fields left at None (or an empty behaviour)
    are not pickled (their class default stands in on the other side), so a result pays
    wire bytes only for what it carries.
    """

    task_id: int
    generation: int
    returns: np.ndarray
    lengths: np.ndarray
    steps: int
    obs_sum: np.ndarray | None = None
    obs_sumsq: np.ndarray | None = None
    obs_count: int = 0
    worker_id: int = 0
    duration_s: float = 0.0
    failed: str | None = None
    training_returns: np.ndarray | None = None
    #: the behaviour characterisation averaged over the episodes (a few floats), when the
    #: task asked for it (:attr:`EvalTask.behaviour`); empty otherwise
    behaviour: tuple[float, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        return {
            key: value
            for key, value in self.__dict__.items()
            if value is not None and not (isinstance(value, tuple) and not value)
        }

    @property
    def fitness_returns(self) -> np.ndarray:
        """The returns training ranks: transformed where the run has a transform."""
        return self.returns if self.training_returns is None else self.training_returns


@dataclass
class GenerationStats:
    """Measured cost of one ``Evaluator.evaluate`` (or ``update_replicas``) call.

    ``retried_tasks``: tasks re-run because their worker died; ``resyncs``: replicas
    whose checksum differed from the head's and were sent the full state again;
    ``extras``: counts such as ``replica_syncs`` and ``stale_replies``.

    ``worker_start_s`` and ``straggler_s`` split the call's wall-clock: the idle
    worker-seconds, divided by the number of workers, spent waiting for a fresh worker
    to start and, at the end, for the last chunks while other workers had nothing left
    to do (the generation barrier). The rest of the call is rollouts and dispatch.
    """

    bytes_to_workers: int = 0
    bytes_from_workers: int = 0
    worker_seconds: float = 0.0
    retried_tasks: int = 0
    resyncs: int = 0
    worker_start_s: float = 0.0
    straggler_s: float = 0.0
    extras: dict[str, float] = field(default_factory=dict)
