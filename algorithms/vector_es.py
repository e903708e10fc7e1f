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
  RNG; :class:`PrivateGlobalRNG` swaps a private state in around every call
  into the strategy, so other code cannot perturb them and a checkpoint can
  capture the state.

A strategy here (:class:`VectorStrategy`) is ask/tell over explicit state, built
in its constructor; :class:`VectorES` runs it in the one generation loop of
:class:`algorithms.es_engine.ESAlgorithm`.

Observation normalisation is a knob (:class:`VectorObsNormKnobs`), off by default (the
GoodAI runs of Nevergrad and CMA had none; policies still clip observations to
``±obs_clip``). On, it is optimes': the head keeps a :class:`~envs.obs_norm.RunningStat`,
a generation's tasks ask ``obs_fraction`` of the rollouts for their observation sums, the
workers normalise by the statistics the generation's broadcast carries, and the head adds
the returned sums after the tell; the evaluation and the stored policy use the same
statistics.
"""

from __future__ import annotations

import io
import pickle
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import RunContext, doc
from algorithms.es_common import SEED_BOUND, optimizer_seed, to_loss
from algorithms.es_engine import ESAlgorithm, obs_normalisation
from algorithms.private_rng import PrivateGlobalRNG
from envs.obs_norm import RunningStat
from evaluation.backends import Evaluator
from evaluation.protocol import Broadcast, EvalResult, EvalTask, GenerationStats, ReplicaRef

#: Candidates are logged for the UMAP map only while a generation holds at most this many floats.
POPULATION_LOG_MAX_FLOATS = 200_000


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


@dataclass(frozen=True)
class VectorObsNormKnobs:
    """Observation normalisation of a vector-family config (cma, Nevergrad): optimes' own
    (OpenAI-ES's running mean and std), off by default as in the GoodAI runs."""

    obs_norm: bool = doc(
        "normalise observations by the running mean and std of the training rollouts (as "
        "optimes; off: raw observations, as GoodAI's Nevergrad and CMA runs)",
        False,
    )
    obs_fraction: float = doc(
        "fraction of training rollouts whose observations update the statistics", 1.0
    )

    def validate_obs_norm(self) -> None:
        """Raise ValueError naming a bad value of these knobs."""
        if not 0.0 <= self.obs_fraction <= 1.0:
            raise ValueError(f"obs_fraction must be in [0, 1], got {self.obs_fraction}")


class VectorStrategy(ABC):
    """Ask/tell over explicit parameter vectors, minimising losses.

    Built around ``x0`` (float64) in its constructor, which declares all its state; every
    call into it runs with the run's private numpy global RNG active (:class:`VectorES`).
    """

    @abstractmethod
    def ask(self) -> tuple[list[Any], list[np.ndarray]]:
        """The generation's candidates: opaque handles for :meth:`tell`, and their vectors."""

    @abstractmethod
    def tell(self, handles: list[Any], losses: np.ndarray) -> None:
        """Report the losses (to minimise) of the handles :meth:`ask` gave."""

    @abstractmethod
    def centre(self) -> np.ndarray:
        """The parameters that stand for the current policy (mean or recommendation)."""

    def metrics(self) -> dict[str, float]:
        """Strategy-specific metrics of the step just taken."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Everything the strategy needs to continue bit for bit (its checkpoint keys)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be checkpointed")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be restored from a checkpoint")

    def artifacts(self) -> dict[str, Any]:
        """Extra facts for the run record."""
        return {}


class VectorES(ESAlgorithm):
    """The vector family: candidates are explicit parameter vectors, carried in their tasks.

    A subclass gives its ``Config`` and :meth:`build_strategy`. A config with
    :class:`VectorObsNormKnobs` may switch on observation normalisation; one without them
    (the plugin's CEM) runs on raw observations.
    """

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        self.dim = context.policy_spec.num_params
        #: numpy's global RNG as the strategy sees it, private to this run, checkpointed
        self.rng = PrivateGlobalRNG(("numpy",), seed=optimizer_seed(context.seed, 0))
        #: the handles of the generation asked and not yet told
        self._handles: list[Any] = []
        self._population_size = 0
        knobs = config if isinstance(config, VectorObsNormKnobs) else None
        self.obs_norm = bool(knobs is not None and knobs.obs_norm)
        self.obs_fraction = float(knobs.obs_fraction) if knobs is not None else 0.0
        #: the running observation statistics (used only with obs_norm)
        self.obs_stat = RunningStat((context.policy_spec.obs_dim,))
        # Candidates travel as vectors: the evaluator holds no noise table (noise_spec_for).
        # If the set-up raises, the runner closes the evaluator: no workers are left.
        with self.rng.active():
            self.strategy: VectorStrategy = self.build_strategy(self.initial.astype(np.float64))

    @abstractmethod
    def build_strategy(self, x0: np.ndarray) -> VectorStrategy:
        """The strategy around ``x0`` (float64), from :attr:`config` and the run seed."""

    # -- the family's parts of the loop ----------------------------------------------------
    def _ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        with self.rng.active():
            handles, vectors = self.strategy.ask()
        self._handles = handles
        return vectors

    def _tasks(self, candidates: list[np.ndarray], rng: np.random.Generator) -> list[EvalTask]:
        k = self.context.episodes_per_fitness
        env_seeds = rng.integers(0, SEED_BOUND, size=(len(candidates), k))
        # drawn only with obs_norm, after the env seeds: without it the stream is unchanged
        collect = (
            rng.random(len(candidates)) < self.obs_fraction
            if self.obs_norm
            else np.zeros(len(candidates), dtype=bool)
        )
        return [
            EvalTask(
                task_id=i,
                env_seeds=tuple(int(s) for s in env_seeds[i]),
                max_steps=self.context.max_episode_steps,
                vector=np.ascontiguousarray(vector, dtype=np.float32),
                collect_obs=bool(collect[i]),
            )
            for i, vector in enumerate(candidates)
        ]

    def _target(self) -> Broadcast | ReplicaRef:
        # Candidates travel inside their tasks; the broadcast carries no centre.
        mean, std = obs_normalisation(self.obs_stat, self.obs_norm)
        return Broadcast(self.generation, None, 0.0, mean, std, self.timesteps)

    def _policy_target(self) -> Broadcast | ReplicaRef:
        mean, std = obs_normalisation(self.obs_stat, self.obs_norm)
        return Broadcast(self.generation, self.current_parameters(), 0.0, mean, std)

    def _population_of(self, candidates: list[np.ndarray], fitness: np.ndarray) -> dict[str, Any]:
        small = len(candidates) * candidates[0].size <= POPULATION_LOG_MAX_FLOATS
        return {
            "fitness": fitness,
            "centre": self.current_parameters().copy(),
            "candidates": np.stack(candidates).astype(np.float32) if small else None,
        }

    def _tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        handles, self._handles = self._handles, []
        with self.rng.active():
            self.strategy.tell(handles, finite_losses(to_loss(fitness)))
        self._population_size = len(candidates)

    def _after_tell(
        self,
        candidates: list[Any],
        fitness: np.ndarray,
        results: list[EvalResult],
        stats: GenerationStats,
        extras: dict[str, float],
    ) -> float:
        """With obs_norm: the generation's observation sums join the statistics (after the
        tell, as optimes), for the next generation's broadcast; returns their seconds."""
        if not self.obs_norm:
            return 0.0
        started = time.perf_counter()
        for result in results:
            if result.obs_count and result.obs_sum is not None and result.obs_sumsq is not None:
                self.obs_stat.increment(result.obs_sum, result.obs_sumsq, result.obs_count)
        extras["obs_sync_s"] = time.perf_counter() - started
        return extras["obs_sync_s"]

    def _extras(self) -> dict[str, float]:
        with self.rng.active():
            metrics = self.strategy.metrics()
        return {
            "population": float(self._population_size),
            "param_norm": float(np.linalg.norm(self.current_parameters())),
            **metrics,
        }

    # -- state -----------------------------------------------------------------------------
    def current_parameters(self) -> np.ndarray:
        with self.rng.active():
            centre = self.strategy.centre()
        return np.asarray(centre, dtype=np.float32).copy()

    def _strategy_state(self) -> dict[str, Any]:
        try:
            strategy = self.strategy.state_dict()
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise NotImplementedError(f"{self.name} optimizer cannot be pickled: {error}") from None
        assert self.rng.states is not None  # seeded in the constructor
        # the statistics only where they are used: a run without obs_norm keeps its layout
        obs = {"obs_stat": self.obs_stat.state_dict()} if self.obs_norm else {}
        return {"numpy_global_rng": self.rng.states["numpy"], **strategy, **obs}

    def _load_strategy_state(self, state: dict[str, Any]) -> None:
        self.rng.states = {"numpy": state["numpy_global_rng"]}
        self.strategy.load_state_dict(state)
        if "obs_stat" in state:
            self.obs_stat.load_state_dict(state["obs_stat"])

    def artifacts(self) -> dict[str, Any]:
        facts = self.strategy.artifacts()
        if self.obs_norm:  # what the stored policy normalises by (obs_norm.json)
            mean, std = obs_normalisation(self.obs_stat, True)
            assert mean is not None and std is not None
            facts.update(obs_mean=mean.tolist(), obs_std=std.tolist())
        return facts
