"""OpenAI-style evolution strategies ("optimes").

Salimans, Ho, Chen, Sidor, Sutskever (2017), *Evolution Strategies as a Scalable
Alternative to Reinforcement Learning*, arXiv:1703.03864. Equation and algorithm
numbers below refer to that paper.

The search distribution is an isotropic Gaussian around the centre ``theta``
with standard deviation ``sigma``. The gradient of the expected fitness is
estimated by the score function (eq. 2 / Algorithm 1)::

    grad ~= 1/(n sigma) * sum_i F(theta + sigma eps_i) eps_i

with three variance reductions from section 2.1 and 2.2:

* mirrored (antithetic) sampling: ``eps`` and ``-eps`` share env seeds, so the
  estimate uses ``F(theta + sigma eps) - F(theta - sigma eps)``;
* fitness shaping by centred ranks in ``[-0.5, 0.5]``;
* the shared noise table of Algorithm 2: a perturbation is a slice of a fixed
  table and travels as ``(index, sign)``, never as a vector.

As in OpenAI's ``es_distributed`` code the ``1/sigma`` factor is folded into
the step size and the update is taken by Adam (or SGD with momentum) on
``-grad + l2 * theta`` (L2 weight decay). Observation normalisation statistics
are gathered from a random fraction of rollouts and applied to every policy.

Two options turn the update into Augmented Random Search's V2-t (Mania, Guy, Recht
(2018), *Simple random search provides a competitive approach to reinforcement
learning*, arXiv:1803.07055, Algorithm 2): ``top_directions`` keeps only the b mirrored
pairs whose better member scored highest (line 6), and ``fitness_shaping="reward_std"``
divides the raw returns by the standard deviation ``sigma_R`` of the 2b kept returns
(line 7) instead of ranking them. With SGD at momentum 0 the step is then ARS's::

    theta += alpha / (b sigma_R) * sum_k (r(+delta_k) - r(-delta_k)) delta_k

where this module divides by the 2b kept candidates, so ``learning_rate = 2 alpha``.
"""

from __future__ import annotations

import copy
import math
import time
import zlib
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
    FitnessShaping,
    MirroredES,
    MirroredSampler,
    Sigma,
    SigmaRule,
    UpdateRule,
    centered_ranks,
    reward_std_scaled,
    sigma_summary,
    top_pairs,
)
from algorithms.registry import register
from envs.obs_norm import RunningStat
from envs.policies import build_policy
from evaluation.backends import Evaluator
from evaluation.noise import DEFAULT_NOISE_SIZE, NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalResult, EvalTask, ReplicaRef

#: The core's parts that optimes' callers (tests, benches) import from here.
__all__ = [
    "Adam",
    "Candidate",
    "OpenAIES",
    "OptimES",
    "OptimESConfig",
    "ReplicaUpdate",
    "centered_ranks",
    "reward_std_scaled",
    "top_pairs",
]

SYNC_MODES = ("broadcast", "seeds")
FITNESS_SHAPINGS = ("centered_ranks", "reward_std")
#: fitness shapings in the report's words (subclasses' shapings included)
SHAPING_WORDS = {
    "centered_ranks": "centred ranks",
    "reward_std": "returns / their std (ARS)",
    "nes": "NES utilities",
}


class OpenAIES(MirroredES):
    """Ask/tell core of OpenAI-ES/ARS built from :mod:`algorithms.es_core`'s parts.

    Mirrored table indices, centred ranks (or ARS's reward-std on the top directions),
    Adam or SGD on ``-grad + l2 theta``, one scalar sigma that only the run's schedule moves.
    """

    def __init__(
        self,
        centre: np.ndarray,
        noise: NoiseTable,
        population: int,
        sigma: float,
        update: UpdateRule,
        *,
        l2_coeff: float = 0.0,
        top_directions: int = 0,
        fitness_shaping: str = "centered_ranks",
    ) -> None:
        if fitness_shaping not in FITNESS_SHAPINGS:
            raise ValueError(
                f"fitness_shaping must be one of {', '.join(FITNESS_SHAPINGS)}, "
                f"got {fitness_shaping!r}"
            )
        super().__init__(
            centre,
            noise,
            sigma,
            sampler=MirroredSampler(population),
            shaping=FitnessShaping(fitness_shaping, top_directions),
            update=update,
            l2_coeff=l2_coeff,
        )
        self.top_directions = top_directions
        self.fitness_shaping = fitness_shaping


@dataclass(frozen=True)
class ReplicaUpdate:
    """One generation's update in replicated mode: O(population) scalars, independent of d.

    The shaped fitness is a function of ``fitness`` (centred ranks), so sending the raw
    fitness lets every replica run the head's own :meth:`OpenAIES.tell`, bit for bit.
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


@dataclass(frozen=True)
class OptimESConfig:
    """Hyperparameters of optimes; defaults per env live in ``experiments/defaults.yaml``."""

    #: the update rules and fitness shapings this algorithm's core accepts
    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("adam", "sgd")
    SHAPINGS: ClassVar[tuple[str, ...]] = FITNESS_SHAPINGS

    population: int = doc("candidates per generation (even: mirrored pairs)", 40)
    sigma: float = doc("standard deviation of the parameter noise", 0.02)
    learning_rate: float = doc("optimizer step size (1/sigma folded in, as in OpenAI's code)", 0.01)
    optimizer: str = doc("adam or sgd (with momentum)", "adam")
    momentum: float = doc("SGD momentum", 0.9)
    beta1: float = doc("Adam beta1", 0.9)
    beta2: float = doc("Adam beta2", 0.999)
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.005)
    top_directions: int = doc(
        "ARS V2-t's b: only the b mirrored pairs with the best max(F+, F-) enter the update"
        " (0: all)",
        0,
    )
    fitness_shaping: str = doc(
        "centered_ranks (OpenAI-ES) or reward_std (ARS: raw returns over their std)",
        "centered_ranks",
    )
    obs_norm: bool = doc("normalise observations by running mean and std", True)
    obs_fraction: float = doc("fraction of rollouts whose observations update the stats", 0.01)
    action_noise_std: float = doc("Gaussian noise added to continuous actions in training", 0.0)
    episode_cap: str = doc("'env' (the env's own limit) or 'adaptive' (2x mean length)", "env")
    train_episode_steps: int = doc(
        "cap on training episodes in steps, 0 for none (evaluation keeps the env's limit)", 0
    )
    sigma_decay: float = doc("sigma multiplied by this every generation", 1.0)
    sigma_min: float = doc("floor for the sigma schedule", 0.0)
    lr_decay: float = doc("learning rate multiplied by this every generation", 1.0)
    lr_min: float = doc("floor for the learning-rate schedule", 0.0)
    noise_size: int = doc("floats in the shared noise table", DEFAULT_NOISE_SIZE)
    noise_seed: int = doc("seed of the noise table; -1 uses the run seed", -1)

    def update_rule(self, dim: int) -> UpdateRule:
        """The rule on the centre that ``optimizer`` names, as the object a strategy is given."""
        if self.optimizer == "sgd":
            return SGD(dim, self.learning_rate, self.momentum)
        if self.optimizer == "adam":
            return Adam(dim, self.learning_rate, self.beta1, self.beta2)
        raise ValueError(
            f"optimizer must be {' or '.join(self.OPTIMIZERS)}, got {self.optimizer!r}"
        )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        if self.population < 2 or self.population % 2:
            raise ValueError(f"population must be an even number >= 2, got {self.population}")
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        if not 0 < self.learning_rate < math.inf:
            raise ValueError(
                f"learning_rate must be a positive finite number, got {self.learning_rate}"
            )
        if self.optimizer not in self.OPTIMIZERS:
            raise ValueError(
                f"optimizer must be {' or '.join(self.OPTIMIZERS)}, got {self.optimizer!r}"
            )
        if not 0 <= self.top_directions <= self.population // 2:
            raise ValueError(
                f"top_directions must be in [0, population/2 = {self.population // 2}], "
                f"got {self.top_directions}"
            )
        if self.fitness_shaping not in self.SHAPINGS:
            raise ValueError(
                f"fitness_shaping must be one of {', '.join(self.SHAPINGS)}, "
                f"got {self.fitness_shaping!r}"
            )
        if self.episode_cap not in ("env", "adaptive"):
            raise ValueError(f"episode_cap must be env or adaptive, got {self.episode_cap!r}")
        if self.train_episode_steps < 0:
            raise ValueError(
                f"train_episode_steps must be >= 0 (0: no cap), got {self.train_episode_steps}"
            )
        if not 0.0 <= self.obs_fraction <= 1.0:
            raise ValueError(f"obs_fraction must be in [0, 1], got {self.obs_fraction}")


@register("optimes")
class OptimES(Algorithm):
    """OpenAI-ES with a shared noise table, mirrored sampling, centred ranks and Adam."""

    family = "es"
    supports_replicated = True
    summary = "OpenAI-ES (Salimans et al. 2017): noise table, mirrored pairs, ranks, Adam"
    Config = OptimESConfig
    config: OptimESConfig

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """The update in words, from the config: which pairs enter, their shaping, the rule
        on the centre (the config's ``optimizer``), L2, and how sigma moves (if it does)."""
        full = {**config_defaults(cls.Config), **params}
        pairs = int(full.get("population", 0) or 0) // 2
        top = int(full.get("top_directions", 0) or 0)
        if not pairs:  # a population the algorithm derives from the parameter count
            kept = "all pairs"
        else:
            kept = f"top {top} of {pairs} pairs" if 0 < top < pairs else f"all {pairs} pairs"
        shaping = str(full.get("fitness_shaping"))
        shaped = SHAPING_WORDS.get(shaping, shaping)
        decay = full.get("l2_coeff", 0.0)
        l2 = f", L2 {float(decay):g}" if decay else ""
        sigma = cls.describe_sigma_rule(full)
        config = cls.Config(**{k: v for k, v in full.items() if k in config_defaults(cls.Config)})
        rule = config.update_rule(1).describe()
        return f"{kept}, {shaped}, {rule}{l2}" + (f"; {sigma}" if sigma else "")

    @classmethod
    def describe_sigma_rule(cls, params: dict[str, Any]) -> str | None:
        """How sigma moves, in words (None: only the run's schedule, if any, moves it)."""
        return None

    @classmethod
    def noise_spec_for(cls, context: RunContext, config: OptimESConfig) -> NoiseSpec:
        """The table of Algorithm 2: ``noise_size`` floats from ``noise_seed`` (else the run's)."""
        noise_seed = context.seed if config.noise_seed < 0 else config.noise_seed
        return NoiseSpec(config.noise_size, noise_seed)

    def __init__(self, context: RunContext, config: OptimESConfig, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        config.validate()
        if context.sync not in SYNC_MODES:
            raise ValueError(f"sync must be broadcast or seeds, got {context.sync!r}")
        self.replicated = context.sync == "seeds"
        #: cumulative seconds per part of the wall-clock (es_common.ES_TIME_PARTS)
        self.time_counters = new_time_counters()
        self.noise_spec: NoiseSpec = self.noise_spec_for(context, config)
        if evaluator.noise_spec != self.noise_spec:
            # Workers would decode (index, sign) from another table: wrong results, silently.
            raise ValueError(
                f"the evaluator holds noise table {evaluator.noise_spec}, optimes needs "
                f"{self.noise_spec} (build it with noise_spec_for)"
            )
        # The runner built the evaluator first: its workers start (imports, envs) while the
        # head builds the rest.
        self.evaluator = evaluator
        self.policy = build_policy(context.policy_spec)
        # The head reconstructs perturbations from the table; it borrows the evaluator's
        # copy in this process when there is one rather than drawing 128 MiB again.
        local = self.evaluator.noise
        self._owns_noise = local is None or local.spec != self.noise_spec
        self.noise: NoiseTable = (
            local
            if local is not None and not self._owns_noise
            else NoiseTable.create(self.noise_spec)
        )
        centre = self.policy.init_params(stream_rng(context.seed, STREAM_INIT))
        self.es: MirroredES = self._build_strategy(centre)
        obs_dim = context.policy_spec.obs_dim
        self.obs_stat = RunningStat((obs_dim,))
        self.generation = 0
        #: training timesteps so far (the runner's count), broadcast for ``anneal_timesteps``
        self.timesteps = 0
        self.episode_cap: int | None = self._training_limit()
        if self.replicated:
            self.evaluator.attach_replica(self._replica)

    def _build_strategy(self, centre: np.ndarray) -> MirroredES:
        """The ask/tell core from :mod:`algorithms.es_core`'s parts (PGPE, SNES: their own)."""
        config = self.config
        return OpenAIES(
            centre,
            self.noise,
            config.population,
            config.sigma,
            config.update_rule(centre.size),
            l2_coeff=config.l2_coeff,
            top_directions=config.top_directions,
            fitness_shaping=config.fitness_shaping,
        )

    def _core(
        self,
        strategy: type[MirroredES],
        centre: np.ndarray,
        sigma: Sigma,
        population: int,
        sigma_rule: SigmaRule,
    ) -> MirroredES:
        """A core of class ``strategy`` with this config's shaping, update rule and L2."""
        config = self.config
        return strategy(
            centre,
            self.noise,
            sigma,
            sampler=MirroredSampler(population),
            shaping=FitnessShaping(config.fitness_shaping, config.top_directions),
            update=config.update_rule(centre.size),
            sigma_rule=sigma_rule,
            l2_coeff=config.l2_coeff,
        )

    def _training_limit(self) -> int | None:
        """The longest training episode: the run's limit, lowered by ``train_episode_steps``."""
        limits = [self.context.max_episode_steps, self.config.train_episode_steps or None]
        known = [limit for limit in limits if limit is not None]
        return min(known) if known else None

    def _replica(self) -> OptimESReplica:
        """The head's state as a replica (shares its arrays; pickling copies them)."""
        return OptimESReplica(
            self.es, self.obs_stat, self.config.obs_norm, self.generation, self.timesteps
        )

    # -- one generation ---------------------------------------------------
    def _broadcast(self) -> Broadcast:
        return make_broadcast(
            self.es, self.obs_stat, self.config.obs_norm, self.generation, self.timesteps
        )

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

    def step(self) -> StepRecord:
        step_started = time.perf_counter()
        rng = stream_rng(self.context.seed, STREAM_GENERATION, self.generation)
        candidates = self.es.ask(rng)
        tasks = self._tasks(candidates, rng)
        started = time.perf_counter()
        target = ReplicaRef(self.generation) if self.replicated else self._broadcast()
        obs_sync_s = time.perf_counter() - started
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(target, tasks)
        evaluate_s = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, failures = fitness_of(results, self.context.fail_on_env_error)
        self._population = self._population_of(candidates, fitness)
        started = time.perf_counter()
        self.es.tell(candidates, fitness)
        update_s = time.perf_counter() - started
        started = time.perf_counter()
        increments = self._update_obs_stat(results)
        obs_sync_s += time.perf_counter() - started
        finished = [r.lengths for r in results if r.failed is None]
        lengths = np.concatenate(finished) if finished else np.zeros(1, dtype=np.int64)
        if self.config.episode_cap == "adaptive" and lengths.size:
            cap = max(int(2 * lengths.mean()), 1)
            limit = self._training_limit()
            self.episode_cap = cap if limit is None else min(cap, limit)
        self.generation += 1
        self.timesteps += int(sum(r.steps for r in results))
        self._apply_schedules()
        extras = {
            "sigma": sigma_summary(self.es.sigma),
            "lr": self.es.learning_rate,
            "grad_norm": self.es.last_grad_norm,
            "param_norm": float(np.linalg.norm(self.es.centre)),
            "episode_length_mean": float(lengths.mean()) if lengths.size else 0.0,
            "evaluate_s": evaluate_s,
            "update_s": update_s,
            "straggler_s": stats.straggler_s,
            "worker_start_s": stats.worker_start_s,
            "failed_candidates": float(len(failures)),
            "retried_tasks": float(stats.retried_tasks),
        }
        if self.replicated:
            started = time.perf_counter()
            update = ReplicaUpdate(
                self.generation,
                np.array([c.noise_index for c in candidates[0::2]], dtype=np.int64),
                np.asarray(fitness, dtype=np.float64),
                increments,
                None if self.es.sigma_per_coordinate else float(self.es.sigma),
                self.es.learning_rate,
                self.timesteps,
            )
            synced = self.evaluator.update_replicas(
                update, self.generation, self._replica().checksum()
            )
            stats.bytes_to_workers += synced.bytes_to_workers
            stats.bytes_from_workers += synced.bytes_from_workers
            extras["sync_s"] = time.perf_counter() - started
            extras["resyncs"] = float(synced.resyncs)
            obs_sync_s += extras["sync_s"]
        extras["obs_sync_s"] = obs_sync_s
        self.time_counters["obs_sync"] += obs_sync_s
        self.time_counters["head_update"] += (
            time.perf_counter() - step_started - evaluate_s - obs_sync_s
        )
        return generation_record(results, fitness, stats, extras)

    def _population_of(self, candidates: list[Candidate], fitness: np.ndarray) -> dict[str, Any]:
        """The population log's record: (index, sign) with a scalar sigma, else the vectors."""
        record: dict[str, Any] = {"fitness": fitness, "centre": self.es.centre.copy()}
        if not self.es.sigma_per_coordinate:
            record["sigma"] = float(self.es.sigma)
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
        cfg = self.config
        if not self.es.sigma_per_coordinate:  # per-coordinate sigmas adapt themselves
            self.es.sigma = max(float(self.es.sigma) * cfg.sigma_decay, cfg.sigma_min)
        self.es.learning_rate = max(self.es.learning_rate * cfg.lr_decay, cfg.lr_min)

    # -- evaluation, state ------------------------------------------------
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        tasks = [
            EvalTask(task_id=i, env_seeds=(s,), max_steps=self.context.max_episode_steps)
            for i, s in enumerate(env_seeds)
        ]
        target = ReplicaRef(self.generation) if self.replicated else self._broadcast()
        results, stats = self.evaluator.evaluate(target, tasks)
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, fail_on_env_error=True, training=False)
        return fitness

    def current_parameters(self) -> np.ndarray:
        return self.es.centre.copy()

    def state_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "timesteps": self.timesteps,
            "centre": self.es.centre.copy(),
            "sigma": copy.copy(self.es.sigma),
            "optimizer": self.es.optimizer.state_dict(),
            "obs_stat": self.obs_stat.state_dict(),
            "episode_cap": self.episode_cap,
            "config": asdict(self.config),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generation = int(state["generation"])
        # checkpoints from before the count carried none; only anneal_timesteps reads it
        self.timesteps = int(state.get("timesteps", 0))
        self.es.centre = np.asarray(state["centre"], dtype=np.float32).copy()
        self.es.sigma = self.es.as_sigma(state["sigma"])
        self.es.optimizer.load_state_dict(state["optimizer"])
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
        self.evaluator.close()
        if self._owns_noise:
            self.noise.close()
