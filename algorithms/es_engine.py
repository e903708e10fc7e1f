"""The one ES generation loop, which every evolution strategy here runs.

An :class:`ESAlgorithm` owns a generation: seeds, tasks, evaluation, fitness, tell, record,
its timing, the evaluation of the current policy and the checkpoint of the strategy's
state. The strategy is an ask/tell object over explicit state (as in evosax, pycma and
Nevergrad), built once by :meth:`ESAlgorithm.build_strategy`. Two families differ only in
what a candidate is, and so in how its task is written and what the workers are sent:

* noise-table strategies (:class:`algorithms.es_engine.NoiseTableES`: OpenAI-ES/ARS,
  PGPE, SNES): a candidate is a *(noise index, sign)* pair of the shared table (Salimans
  et al. 2017, Algorithm 2); the centre, sigma and the observation statistics travel in a
  broadcast once per generation, or every worker keeps a replica (``sync=seeds``);
* vector strategies (:class:`algorithms.vector_es.VectorES`: CMA-ES, Nevergrad, the
  plugin's CEM): a candidate is a parameter vector, carried inside its task.

Env seeds of every episode come from ``stream_rng(seed, STREAM_GENERATION, generation)``
and the initial parameters from ``stream_rng(seed, STREAM_INIT)`` for every ES alike.
"""

from __future__ import annotations

import copy
import math
import time
import zlib
from abc import abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import Algorithm, RunContext, StepRecord, config_defaults, doc
from algorithms.es_common import (
    SEED_BOUND,
    STREAM_GENERATION,
    STREAM_INIT,
    count_evaluation,
    fitness_of,
    generation_record,
    new_time_counters,
    stream_rng,
)
from algorithms.es_core import (
    SGD,
    Adam,
    Candidate,
    ClipUp,
    FitnessShaping,
    MirroredES,
    UpdateRule,
    sigma_summary,
)
from envs.obs_norm import RunningStat
from envs.policies import build_policy
from evaluation.backends import Evaluator
from evaluation.noise import DEFAULT_NOISE_SIZE, NoiseSpec, NoiseTable
from evaluation.protocol import (
    Broadcast,
    EvalResult,
    EvalTask,
    GenerationStats,
    ReplicaRef,
)


class ESAlgorithm(Algorithm):
    """One generation loop over a strategy's ask/tell; a family says what a candidate is."""

    family = "es"

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        config.validate()
        self.evaluator = evaluator
        self.policy = build_policy(context.policy_spec)
        #: the parameters every ES of this seed starts from
        self.initial: np.ndarray = self.policy.init_params(stream_rng(context.seed, STREAM_INIT))
        self.generation = 0
        #: training timesteps so far (the runner's count), broadcast for ``anneal_timesteps``
        self.timesteps = 0
        #: cumulative seconds per part of the wall-clock (es_common.ES_TIME_PARTS)
        self.time_counters = new_time_counters()

    # -- what a family provides ------------------------------------------------------------
    @abstractmethod
    def _ask(self, rng: np.random.Generator) -> list[Any]:
        """The generation's candidates (``rng``: the generation's stream)."""

    @abstractmethod
    def _tasks(self, candidates: list[Any], rng: np.random.Generator) -> list[EvalTask]:
        """The candidates' tasks, their env seeds drawn from ``rng``."""

    @abstractmethod
    def _target(self) -> Broadcast | ReplicaRef:
        """What the workers evaluate the generation's tasks against."""

    @abstractmethod
    def _policy_target(self) -> Broadcast | ReplicaRef:
        """What the workers evaluate the current policy against."""

    @abstractmethod
    def _population_of(self, candidates: list[Any], fitness: np.ndarray) -> dict[str, Any]:
        """The population log's record of the generation (before the tell)."""

    @abstractmethod
    def _tell(self, candidates: list[Any], fitness: np.ndarray) -> None:
        """Tell the strategy the candidates' fitness (returns: higher is better)."""

    def _observe(self, results: list[EvalResult]) -> None:
        """Take from the generation's results, just before the tell, what the strategy needs
        besides fitness (novelty search: each candidate's behaviour characterisation, which
        its tasks asked for with ``EvalTask.behaviour``); by default nothing."""

    def _after_tell(
        self,
        candidates: list[Any],
        fitness: np.ndarray,
        results: list[EvalResult],
        stats: GenerationStats,
        extras: dict[str, float],
    ) -> float:
        """The family's bookkeeping after the tell and the counts; returns sync seconds."""
        return 0.0

    def _extras(self) -> dict[str, float]:
        """The family's and the strategy's metrics of the step just taken."""
        return {}

    @abstractmethod
    def _strategy_state(self) -> dict[str, Any]:
        """The strategy's part of a checkpoint."""

    @abstractmethod
    def _load_strategy_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_strategy_state` captured."""

    # -- one generation --------------------------------------------------------------------
    def step(self) -> StepRecord:
        step_started = started = time.perf_counter()
        rng = stream_rng(self.context.seed, STREAM_GENERATION, self.generation)
        candidates = self._ask(rng)
        ask_s = time.perf_counter() - started
        tasks = self._tasks(candidates, rng)
        started = time.perf_counter()
        target = self._target()
        sync_s = time.perf_counter() - started
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(target, tasks)
        evaluate_s = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, failures = fitness_of(results, self.context.fail_on_env_error)
        self._population = self._population_of(candidates, fitness)
        started = time.perf_counter()
        self._observe(results)
        self._tell(candidates, fitness)
        update_s = time.perf_counter() - started + ask_s
        finished = [r.lengths for r in results if r.failed is None]
        lengths = np.concatenate(finished) if finished else np.zeros(0, dtype=np.int64)
        extras = {
            "episode_length_mean": float(lengths.mean()) if lengths.size else 0.0,
            "evaluate_s": evaluate_s,
            "update_s": update_s,
            "straggler_s": stats.straggler_s,
            # the slowest task's own seconds (harness.bench.project: the generation's tail)
            "longest_task_s": max((r.duration_s for r in results), default=0.0),
            "worker_start_s": stats.worker_start_s,
            "failed_candidates": float(len(failures)),
            "retried_tasks": float(stats.retried_tasks),
        }
        self.generation += 1
        self.timesteps += int(sum(r.steps for r in results))
        sync_s += self._after_tell(candidates, fitness, results, stats, extras)
        extras.update(self._extras())
        self.time_counters["obs_sync"] += sync_s
        self.time_counters["head_update"] += (
            time.perf_counter() - step_started - evaluate_s - sync_s
        )
        return generation_record(results, fitness, stats, extras)

    # -- evaluation, state -----------------------------------------------------------------
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        tasks = [
            EvalTask(task_id=i, env_seeds=(s,), max_steps=self.context.max_episode_steps)
            for i, s in enumerate(env_seeds)
        ]
        results, stats = self.evaluator.evaluate(self._policy_target(), tasks)
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, fail_on_env_error=True, training=False)
        return fitness

    def state_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "timesteps": self.timesteps,
            **self._strategy_state(),
            "config": asdict(self.config),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generation = int(state["generation"])
        # checkpoints from before the count carried none; only anneal_timesteps reads it
        self.timesteps = int(state.get("timesteps", 0))
        self._load_strategy_state(state)

    def close(self) -> None:
        self.evaluator.close()


# -- the noise-table family ----------------------------------------------------------------
SYNC_MODES = ("broadcast", "seeds")


@dataclass(frozen=True)
class ReplicaUpdate:
    """One generation's update in replicated mode: O(population) scalars, independent of d.

    The shaped fitness is a function of ``fitness`` (centred ranks), so sending the raw
    fitness lets every replica run the head's own ``tell``, bit for bit.
    """

    generation: int
    noise_indices: np.ndarray  # int64, one per mirrored pair (+eps, -eps)
    fitness: np.ndarray  # float64, one per candidate, as the head told it
    obs_increments: list[tuple[np.ndarray, np.ndarray, int]]  # in the head's order
    #: after this generation's schedules; None when sigma is per coordinate (PGPE, SNES):
    #: every replica's own tell adapts it, bit for bit, so it never travels
    sigma: float | None
    learning_rate: float
    timesteps: int = 0  # the head's training timesteps after this generation


def obs_normalisation(
    obs_stat: RunningStat, obs_norm: bool
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The observation mean and std every worker applies (None, None: no normalisation)."""
    if not obs_norm:
        return None, None
    return obs_stat.mean.astype(np.float32), obs_stat.std.astype(np.float32)


def make_broadcast(
    es: MirroredES, obs_stat: RunningStat, obs_norm: bool, generation: int, timesteps: int
) -> Broadcast:
    """What the workers evaluate against: centre, sigma (scalar or per coordinate), obs stats.

    The one place a broadcast is built, by the head and by every replica alike.
    """
    mean, std = obs_normalisation(obs_stat, obs_norm)
    return Broadcast(generation, es.centre, es.sigma, mean, std, timesteps)


class OptimESReplica:
    """A worker's copy of the head's state for replicated mode (Algorithm 2 of the paper).

    Pickled as the full sync (centre, optimizer moments, obs statistics, sigma) without
    the noise table: the worker binds its own view of it.
    """

    def __init__(
        self,
        es: MirroredES,
        obs_stat: RunningStat,
        obs_norm: bool,
        generation: int,
        timesteps: int = 0,
    ) -> None:
        self.es = es
        self.obs_stat = obs_stat
        self.obs_norm = obs_norm
        self.generation = generation
        self.timesteps = timesteps

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        es = copy.copy(self.es)
        vars(es)["noise"] = None  # never ship the table
        state["es"] = es
        return state

    def bind(self, noise: Any) -> None:
        self.es.noise = noise

    def apply(self, update: ReplicaUpdate) -> None:
        candidates = [Candidate(int(i), sign) for i in update.noise_indices for sign in (1, -1)]
        self.es.tell(candidates, update.fitness)
        for obs_sum, obs_sumsq, count in update.obs_increments:
            self.obs_stat.increment(obs_sum, obs_sumsq, count)
        if update.sigma is not None:
            self.es.sigma = update.sigma
        self.es.learning_rate = update.learning_rate
        self.generation = update.generation
        self.timesteps = update.timesteps

    def broadcast(self) -> Broadcast:
        return make_broadcast(
            self.es, self.obs_stat, self.obs_norm, self.generation, self.timesteps
        )

    def checksum(self) -> int:
        """CRC-32 of the centre, the optimizer moments, sigma and the obs statistics."""
        crc = zlib.crc32(np.ascontiguousarray(self.es.centre).data)
        for value in self.es.optimizer.state_dict().values():
            crc = zlib.crc32(np.ascontiguousarray(value).data, crc)
        if self.es.sigma_per_coordinate:
            crc = zlib.crc32(np.ascontiguousarray(self.es.sigma).data, crc)
            crc = zlib.crc32(np.array([self.obs_stat.count]).data, crc)
        else:
            crc = zlib.crc32(np.array([self.es.sigma, self.obs_stat.count]).data, crc)
        crc = zlib.crc32(self.obs_stat.sum.data, crc)
        return zlib.crc32(self.obs_stat.sumsq.data, crc)


# -- config pieces of the noise-table family ---------------------------------------------------
@dataclass(frozen=True)
class NoiseTableRunKnobs:
    """What the loop of every noise-table ES reads: observations, episodes, the table."""

    obs_norm: bool = doc("normalise observations by running mean and std", True)
    obs_fraction: float = doc("fraction of rollouts whose observations update the stats", 0.01)
    action_noise_std: float = doc("Gaussian noise added to continuous actions in training", 0.0)
    episode_cap: str = doc("'env' (the env's own limit) or 'adaptive' (2x mean length)", "env")
    train_episode_steps: int = doc(
        "cap on training episodes in steps, 0 for none (evaluation keeps the env's limit)", 0
    )
    lr_decay: float = doc("learning rate multiplied by this every generation", 1.0)
    lr_min: float = doc("floor for the learning-rate schedule", 0.0)
    noise_size: int = doc("floats in the shared noise table", DEFAULT_NOISE_SIZE)
    noise_seed: int = doc("seed of the noise table; -1 uses the run seed", -1)

    def validate_run(self) -> None:
        """Raise ValueError naming the first bad value of these knobs."""
        if self.episode_cap not in ("env", "adaptive"):
            raise ValueError(f"episode_cap must be env or adaptive, got {self.episode_cap!r}")
        if self.train_episode_steps < 0:
            raise ValueError(
                f"train_episode_steps must be >= 0 (0: no cap), got {self.train_episode_steps}"
            )
        if not 0.0 <= self.obs_fraction <= 1.0:
            raise ValueError(f"obs_fraction must be in [0, 1], got {self.obs_fraction}")


@dataclass(frozen=True)
class CentreRuleKnobs:
    """The update rule on the centre: Adam or SGD with momentum (OpenAI's es_distributed)."""

    #: the rules :meth:`update_rule` builds, by the ``optimizer`` knob
    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("adam", "sgd")

    learning_rate: float = doc("optimizer step size (1/sigma folded in, as in OpenAI's code)", 0.01)
    optimizer: str = doc("adam or sgd (with momentum)", "adam")
    momentum: float = doc("SGD momentum", 0.9)
    beta1: float = doc("Adam beta1", 0.9)
    beta2: float = doc("Adam beta2", 0.999)
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.005)

    def update_rule(self, dim: int) -> UpdateRule:
        """The rule on the centre that ``optimizer`` names, as the object a strategy is given."""
        if self.optimizer == "sgd":
            return SGD(dim, self.learning_rate, self.momentum)
        if self.optimizer == "adam":
            return Adam(dim, self.learning_rate, self.beta1, self.beta2)
        raise ValueError(
            f"optimizer must be {' or '.join(self.OPTIMIZERS)}, got {self.optimizer!r}"
        )

    def validate_rule(self) -> None:
        """Raise ValueError naming the first bad value of these knobs."""
        if not 0 < self.learning_rate < math.inf:
            raise ValueError(
                f"learning_rate must be a positive finite number, got {self.learning_rate}"
            )
        if self.optimizer not in self.OPTIMIZERS:
            raise ValueError(
                f"optimizer must be {' or '.join(self.OPTIMIZERS)}, got {self.optimizer!r}"
            )


@dataclass(frozen=True)
class ClipUpKnobs(CentreRuleKnobs):
    """Adam, SGD, or ClipUp with its maximum speed (Toklu et al. 2020)."""

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("clipup", "adam", "sgd")

    max_speed: float = doc("ClipUp's maximum speed (0: twice learning_rate)", 0.0)

    def update_rule(self, dim: int) -> UpdateRule:
        """ClipUp (``max_speed`` 0: twice ``learning_rate``), else Adam or SGD."""
        if self.optimizer == "clipup":
            return ClipUp(dim, self.learning_rate, self.max_speed, self.momentum)
        return super().update_rule(dim)

    def validate_rule(self) -> None:
        super().validate_rule()
        if self.max_speed < 0:
            raise ValueError(f"max_speed must be >= 0, got {self.max_speed}")


def describe_mirrored_update(
    params: dict[str, Any], shaping: FitnessShaping, rule: UpdateRule, sigma: str | None
) -> str:
    """A mirrored-sampling update in words: which pairs enter, their shaping, the rule on the
    centre, L2, and how sigma moves (if it moves by itself)."""
    pairs = int(params.get("population", 0) or 0) // 2
    top = int(params.get("top_directions", 0) or 0)
    if not pairs:  # a population the algorithm derives from the parameter count
        kept = "all pairs"
    else:
        kept = f"top {top} of {pairs} pairs" if 0 < top < pairs else f"all {pairs} pairs"
    decay = params.get("l2_coeff", 0.0)
    l2 = f", L2 {float(decay):g}" if decay else ""
    return f"{kept}, {shaping.describe()}, {rule.describe()}{l2}" + (f"; {sigma}" if sigma else "")


def known_params(config_class: type, params: dict[str, Any]) -> Any:
    """The config a record's params describe, its defaults filling what they leave out."""
    defaults = config_defaults(config_class)
    return config_class(**{**defaults, **{k: v for k, v in params.items() if k in defaults}})


def validate_population(population: int, top_directions: int) -> None:
    """Mirrored pairs: an even population >= 2, and ARS's b within its pairs."""
    if population < 2 or population % 2:
        raise ValueError(f"population must be an even number >= 2, got {population}")
    if not 0 <= top_directions <= population // 2:
        raise ValueError(
            f"top_directions must be in [0, population/2 = {population // 2}], got {top_directions}"
        )


class NoiseTableES(ESAlgorithm):
    """The noise-table family: candidates are (index, sign) of the shared table.

    A subclass gives its ``Config`` (with :class:`NoiseTableRunKnobs`, ``population``,
    ``sigma`` and ``l2_coeff``) and :meth:`build_strategy`; the centre starts at the
    policy's init, the run's schedule moves a scalar sigma (``sigma_decay``, if the config
    has one) and the learning rate.
    """

    supports_replicated = True

    @classmethod
    def noise_spec_for(cls, context: RunContext, config: Any) -> NoiseSpec:
        """The table of Algorithm 2: ``noise_size`` floats from ``noise_seed`` (else the run's)."""
        noise_seed = context.seed if config.noise_seed < 0 else config.noise_seed
        return NoiseSpec(config.noise_size, noise_seed)

    @abstractmethod
    def build_strategy(self, centre: np.ndarray, noise: NoiseTable) -> MirroredES:
        """The strategy at ``centre`` over ``noise``, from :attr:`config`."""

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        if context.sync not in SYNC_MODES:
            raise ValueError(f"sync must be broadcast or seeds, got {context.sync!r}")
        self.replicated = context.sync == "seeds"
        self.noise_spec: NoiseSpec = self.noise_spec_for(context, config)
        if evaluator.noise_spec != self.noise_spec:
            # Workers would decode (index, sign) from another table: wrong results, silently.
            raise ValueError(
                f"the evaluator holds noise table {evaluator.noise_spec}, {self.name} needs "
                f"{self.noise_spec} (build it with noise_spec_for)"
            )
        # The head reconstructs perturbations from the table; it borrows the evaluator's
        # copy in this process when there is one rather than drawing 128 MiB again.
        local = evaluator.noise
        self._owns_noise = local is None or local.spec != self.noise_spec
        self.noise: NoiseTable = (
            local
            if local is not None and not self._owns_noise
            else NoiseTable.create(self.noise_spec)
        )
        self.strategy: MirroredES = self.build_strategy(self.initial, self.noise)
        self.obs_stat = RunningStat((context.policy_spec.obs_dim,))
        self.episode_cap: int | None = self._training_limit()
        if self.replicated:
            self.evaluator.attach_replica(self._replica)

    @property
    def es(self) -> MirroredES:
        """The strategy (its older name)."""
        return self.strategy

    def _training_limit(self) -> int | None:
        """The longest training episode: the run's limit, lowered by ``train_episode_steps``."""
        limits = [self.context.max_episode_steps, self.config.train_episode_steps or None]
        known = [limit for limit in limits if limit is not None]
        return min(known) if known else None

    def _replica(self) -> OptimESReplica:
        """The head's state as a replica (shares its arrays; pickling copies them)."""
        return OptimESReplica(
            self.strategy, self.obs_stat, self.config.obs_norm, self.generation, self.timesteps
        )

    def _broadcast(self) -> Broadcast:
        return make_broadcast(
            self.strategy, self.obs_stat, self.config.obs_norm, self.generation, self.timesteps
        )

    # -- the family's parts of the loop ----------------------------------------------------
    def _ask(self, rng: np.random.Generator) -> list[Candidate]:
        return self.strategy.ask(rng)

    def _tasks(self, candidates: list[Candidate], rng: np.random.Generator) -> list[EvalTask]:
        k = self.context.episodes_per_fitness
        pairs = len(candidates) // 2
        env_seeds = rng.integers(0, SEED_BOUND, size=(pairs, k))
        collect = rng.random(len(candidates)) < self.config.obs_fraction
        action_seeds = rng.integers(0, SEED_BOUND, size=len(candidates))
        return [
            EvalTask(
                task_id=i,
                env_seeds=tuple(int(s) for s in env_seeds[i // 2]),
                max_steps=self.episode_cap,
                noise_index=c.noise_index,
                sign=c.sign,
                collect_obs=bool(collect[i]) and self.config.obs_norm,
                action_noise_std=self.config.action_noise_std,
                action_noise_seed=int(action_seeds[i]),
            )
            for i, c in enumerate(candidates)
        ]

    def _target(self) -> Broadcast | ReplicaRef:
        return ReplicaRef(self.generation) if self.replicated else self._broadcast()

    _policy_target = _target

    def _population_of(self, candidates: list[Candidate], fitness: np.ndarray) -> dict[str, Any]:
        """(index, sign) with a scalar sigma, else the candidates' vectors."""
        es = self.strategy
        record: dict[str, Any] = {"fitness": fitness, "centre": es.centre.copy()}
        if not es.sigma_per_coordinate:
            record["sigma"] = float(es.sigma)
            record["noise_index"] = np.array([c.noise_index for c in candidates], np.int64)
            record["sign"] = np.array([c.sign for c in candidates], np.int8)
            return record
        broadcast = self._broadcast()
        record["candidates"] = np.stack(
            [
                EvalTask(i, (), None, noise_index=c.noise_index, sign=c.sign).parameters(
                    broadcast, self.noise.array
                )
                for i, c in enumerate(candidates)
            ]
        )
        return record

    def _tell(self, candidates: list[Candidate], fitness: np.ndarray) -> None:
        self.strategy.tell(candidates, fitness)

    def _after_tell(
        self,
        candidates: list[Any],
        fitness: np.ndarray,
        results: list[EvalResult],
        stats: GenerationStats,
        extras: dict[str, float],
    ) -> float:
        """Observation statistics, the adaptive episode cap, schedules, replicas."""
        started = time.perf_counter()
        increments = self._update_obs_stat(results)
        sync_s = time.perf_counter() - started
        finished = [r.lengths for r in results if r.failed is None]
        lengths = np.concatenate(finished) if finished else np.zeros(1, dtype=np.int64)
        if self.config.episode_cap == "adaptive" and lengths.size:
            cap = max(int(2 * lengths.mean()), 1)
            limit = self._training_limit()
            self.episode_cap = cap if limit is None else min(cap, limit)
        self._apply_schedules()
        if self.replicated:
            started = time.perf_counter()
            es = self.strategy
            update = ReplicaUpdate(
                self.generation,
                np.array([c.noise_index for c in candidates[0::2]], dtype=np.int64),
                np.asarray(fitness, dtype=np.float64),
                increments,
                None if es.sigma_per_coordinate else float(es.sigma),
                es.learning_rate,
                self.timesteps,
            )
            synced = self.evaluator.update_replicas(
                update, self.generation, self._replica().checksum()
            )
            stats.bytes_to_workers += synced.bytes_to_workers
            stats.bytes_from_workers += synced.bytes_from_workers
            extras["sync_s"] = time.perf_counter() - started
            extras["resyncs"] = float(synced.resyncs)
            sync_s += extras["sync_s"]
        extras["obs_sync_s"] = sync_s
        return sync_s

    def _extras(self) -> dict[str, float]:
        es = self.strategy
        return {
            "sigma": sigma_summary(es.sigma),
            "lr": es.learning_rate,
            "grad_norm": es.last_grad_norm,
            "param_norm": float(np.linalg.norm(es.centre)),
        }

    def _update_obs_stat(
        self, results: list[EvalResult]
    ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        increments = [
            (result.obs_sum, result.obs_sumsq, result.obs_count)
            for result in results
            if result.obs_count and result.obs_sum is not None and result.obs_sumsq is not None
        ]
        for obs_sum, obs_sumsq, count in increments:
            self.obs_stat.increment(obs_sum, obs_sumsq, count)
        return increments

    def _apply_schedules(self) -> None:
        """The run's schedules after a generation: the learning rate's (every strategy of
        the family); a strategy with a scheduled sigma adds its own (OpenAI-ES)."""
        es = self.strategy
        es.learning_rate = max(es.learning_rate * self.config.lr_decay, self.config.lr_min)

    # -- state -----------------------------------------------------------------------------
    def current_parameters(self) -> np.ndarray:
        return self.strategy.centre.copy()

    def _strategy_state(self) -> dict[str, Any]:
        es = self.strategy
        return {
            "centre": es.centre.copy(),
            "sigma": copy.copy(es.sigma),
            "optimizer": es.optimizer.state_dict(),
            "obs_stat": self.obs_stat.state_dict(),
            "episode_cap": self.episode_cap,
        }

    def _load_strategy_state(self, state: dict[str, Any]) -> None:
        es = self.strategy
        es.centre = np.asarray(state["centre"], dtype=np.float32).copy()
        es.sigma = es.as_sigma(state["sigma"])
        es.optimizer.load_state_dict(state["optimizer"])
        self.obs_stat.load_state_dict(state["obs_stat"])
        self.episode_cap = state["episode_cap"]
        self.evaluator.invalidate_replicas()

    def artifacts(self) -> dict[str, Any]:
        mean, std = obs_normalisation(self.obs_stat, self.config.obs_norm)
        return {
            "obs_mean": None if mean is None else mean.tolist(),
            "obs_std": None if std is None else std.tolist(),
        }

    def close(self) -> None:
        super().close()
        if self._owns_noise:
            self.noise.close()
