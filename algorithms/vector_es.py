"""The shared generation loop of evolution strategies whose candidates are explicit vectors.

Nevergrad's optimizers and pycma's CMA-ES hand out each candidate as a full
parameter vector, so every candidate crosses the wire as ``d`` float32 values
(the "simple parallelisation" of the GoodAI post). This module holds what
they have in common:

* one generation = ask the whole population, evaluate it in parallel through
  the run's :class:`~evaluation.backends.Evaluator` (tasks carry
  ``vector=``; no noise table), tell the losses;
* env seeds of every episode are drawn from
  ``stream_rng(seed, STREAM_GENERATION, generation)`` exactly as optimes does:
  ``K = episodes_per_fitness`` seeds per candidate;
* returns become losses in exactly one place, :func:`algorithms.es_common.to_loss`;
  a failed candidate (``fail_on_env_error: false``) scores worse than every
  finite loss of its generation;
* the initial parameters are ``policy.init_params(stream_rng(seed, STREAM_INIT))``
  as for optimes, so every ES starts from the same policy;
* the libraries' own randomness is seeded from the run seed. pycma (and
  Nevergrad's CMA wrappers, which call pycma) draw from numpy's *global*
  RNG; :class:`PrivateGlobalRNG` swaps a private state in around every call,
  so other code cannot perturb them and a checkpoint can capture the state.

No observation normalisation is applied (the GoodAI runs of Nevergrad and CMA
had none); policies still clip observations to ``±obs_clip``.
"""

from __future__ import annotations

import io
import pickle
import time
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import numpy as np

from algorithms.base import Algorithm, RunContext, StepRecord
from algorithms.es_common import (
    SEED_BOUND,
    STREAM_GENERATION,
    STREAM_INIT,
    count_evaluation,
    fitness_of,
    generation_record,
    new_time_counters,
    stream_rng,
    to_loss,
)
from envs.policies import build_policy
from evaluation.backends import Evaluator
from evaluation.protocol import Broadcast, EvalTask

#: Candidates are logged for the UMAP map only while a generation holds at most this many floats.
POPULATION_LOG_MAX_FLOATS = 200_000


class PrivateGlobalRNG:
    """A private copy of numpy's global RNG state, active only inside :meth:`active`."""

    def __init__(self, seed: int) -> None:
        self.state: Any = np.random.RandomState(seed).get_state()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make the private state numpy's global one for the duration; save it afterwards."""
        saved = np.random.get_state()
        np.random.set_state(self.state)
        try:
            yield
        finally:
            self.state = np.random.get_state()
            np.random.set_state(saved)


_GLOBAL_RNG_ID = "numpy.random global RandomState"


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> str | None:
        return _GLOBAL_RNG_ID if obj is np.random.mtrand._rand else None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        if pid == _GLOBAL_RNG_ID:
            return np.random.mtrand._rand
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def dumps_optimizer(optimizer: Any) -> bytes:
    """Pickle a library optimizer, keeping references to numpy's global RNG as references.

    pycma holds ``np.random.randn``, a method of the global ``RandomState``;
    plain pickle would copy that generator into the checkpoint, and the restored
    optimizer would then draw from a detached copy instead of the state that
    :class:`PrivateGlobalRNG` restores.
    """
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(optimizer)
    return buffer.getvalue()


def loads_optimizer(payload: bytes) -> Any:
    """Inverse of :func:`dumps_optimizer`."""
    return _Unpickler(io.BytesIO(payload)).load()


def finite_losses(losses: np.ndarray) -> np.ndarray:
    """Replace non-finite losses (failed candidates) by one worse than every finite loss.

    pycma and several Nevergrad optimizers misbehave on ``inf``; rank-based
    methods only need the failed candidate to be last.
    """
    losses = np.asarray(losses, dtype=np.float64).copy()
    bad = ~np.isfinite(losses)
    if bad.any():
        finite = losses[~bad]
        worst = float(finite.max()) if finite.size else 0.0
        losses[bad] = worst + max(1.0, abs(worst))
    return losses


class VectorES(Algorithm):
    """Base of ES algorithms that ask and tell explicit parameter vectors.

    Subclasses implement :meth:`_library_seed`, :meth:`_create`, :meth:`_ask`,
    :meth:`_tell`, :meth:`_centre` and, for checkpoints, :meth:`_optimizer_object`
    (or :meth:`_optimizer_state`) and :meth:`_load_optimizer_state`. Every call
    into the library runs with :attr:`rng` active.
    """

    family = "es"

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        validate = getattr(config, "validate", None)
        if validate is not None:
            validate()
        self.policy = build_policy(context.policy_spec)
        self.dim = context.policy_spec.num_params
        self.initial = self.policy.init_params(stream_rng(context.seed, STREAM_INIT))
        self.generation = 0
        #: training timesteps so far (the runner's count), broadcast for ``anneal_timesteps``
        self.timesteps = 0
        #: cumulative seconds per part of the wall-clock (es_common.ES_TIME_PARTS)
        self.time_counters = new_time_counters()
        self.rng = PrivateGlobalRNG(self._library_seed(0))
        with self.rng.active():
            self._create(self.initial.astype(np.float64))
        # Candidates travel as vectors: the evaluator holds no noise table (noise_spec_for).
        # If the setup above raises, the runner closes the evaluator: no workers are left.
        self.evaluator = evaluator

    # -- what a subclass provides ---------------------------------------------------------
    @abstractmethod
    def _library_seed(self, index: int) -> int:
        """Seed of the library's RNG for the ``index``-th (re)start."""

    @abstractmethod
    def _create(self, x0: np.ndarray) -> None:
        """Build the library optimizer around ``x0`` (float64)."""

    @abstractmethod
    def _ask(self) -> tuple[list[Any], list[np.ndarray]]:
        """The generation's candidates: opaque handles for :meth:`_tell`, and their vectors."""

    @abstractmethod
    def _tell(self, handles: list[Any], losses: np.ndarray) -> None:
        """Report the losses (to minimise) of the handles :meth:`_ask` gave."""

    @abstractmethod
    def _centre(self) -> np.ndarray:
        """The parameters that stand for the current policy (mean or recommendation)."""

    def _extras(self) -> dict[str, float]:
        """Algorithm-specific metrics of the step just taken."""
        return {}

    def _optimizer_state(self) -> dict[str, Any]:
        return {"optimizer": dumps_optimizer(self._optimizer_object())}

    def _load_optimizer_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError(f"{self.name} cannot be restored from a checkpoint")

    def _optimizer_object(self) -> Any:
        raise NotImplementedError(f"{self.name} cannot be checkpointed")

    # -- one generation -------------------------------------------------------------------
    def step(self) -> StepRecord:
        step_started = started = time.perf_counter()
        with self.rng.active():
            handles, vectors = self._ask()
        ask_s = time.perf_counter() - started
        rng = stream_rng(self.context.seed, STREAM_GENERATION, self.generation)
        k = self.context.episodes_per_fitness
        env_seeds = rng.integers(0, SEED_BOUND, size=(len(vectors), k))
        tasks = [
            EvalTask(
                task_id=i,
                env_seeds=tuple(int(s) for s in env_seeds[i]),
                max_steps=self.context.max_episode_steps,
                vector=np.ascontiguousarray(vector, dtype=np.float32),
            )
            for i, vector in enumerate(vectors)
        ]
        # Candidates travel inside their tasks; the broadcast carries no centre.
        broadcast = Broadcast(self.generation, None, 0.0, None, None, self.timesteps)
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(broadcast, tasks)
        evaluate_s = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, failures = fitness_of(results, self.context.fail_on_env_error)
        small = len(vectors) * vectors[0].size <= POPULATION_LOG_MAX_FLOATS
        self._population = {
            "fitness": fitness,
            "centre": self.current_parameters().copy(),
            "candidates": np.stack(vectors).astype(np.float32) if small else None,
        }
        started = time.perf_counter()
        with self.rng.active():
            self._tell(handles, finite_losses(to_loss(fitness)))
        update_s = time.perf_counter() - started + ask_s
        self.generation += 1
        self.timesteps += int(sum(r.steps for r in results))
        done = [r.lengths for r in results if r.failed is None]
        lengths = np.concatenate(done) if done else np.zeros(0, dtype=np.int64)
        extras = {
            "population": float(len(vectors)),
            "param_norm": float(np.linalg.norm(self.current_parameters())),
            "episode_length_mean": float(lengths.mean()) if lengths.size else 0.0,
            "evaluate_s": evaluate_s,
            "update_s": update_s,
            "straggler_s": stats.straggler_s,
            "worker_start_s": stats.worker_start_s,
            "failed_candidates": float(len(failures)),
            "retried_tasks": float(stats.retried_tasks),
            **self._extras(),
        }
        self.time_counters["head_update"] += time.perf_counter() - step_started - evaluate_s
        return generation_record(results, fitness, stats, extras)

    # -- evaluation, state --------------------------------------------------------------
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        centre = self.current_parameters()
        broadcast = Broadcast(self.generation, centre, 0.0, None, None)
        tasks = [
            EvalTask(task_id=i, env_seeds=(s,), max_steps=self.context.max_episode_steps)
            for i, s in enumerate(env_seeds)
        ]
        results, stats = self.evaluator.evaluate(broadcast, tasks)
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, fail_on_env_error=True, training=False)
        return fitness

    def current_parameters(self) -> np.ndarray:
        with self.rng.active():
            centre = self._centre()
        return np.asarray(centre, dtype=np.float32).copy()

    def state_dict(self) -> dict[str, Any]:
        try:
            optimizer = self._optimizer_state()
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise NotImplementedError(f"{self.name} optimizer cannot be pickled: {error}") from None
        return {
            "generation": self.generation,
            "timesteps": self.timesteps,
            "numpy_global_rng": self.rng.state,
            "config": asdict(self.config),
            **optimizer,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generation = int(state["generation"])
        # checkpoints from before the count carried none; only anneal_timesteps reads it
        self.timesteps = int(state.get("timesteps", 0))
        self.rng.state = state["numpy_global_rng"]
        self._load_optimizer_state(state)

    def close(self) -> None:
        self.evaluator.close()
