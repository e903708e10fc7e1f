"""The one ES algorithm: a generation loop given a strategy, a candidate codec and run parts.

:class:`ESAlgorithm` owns a generation: seeds, tasks, evaluation, fitness, tell, record, its
timing, the evaluation of the current policy and the checkpoint. It is composed, not
subclassed (as evosax's strategies and stable-baselines3's adapters are given their parts):

* a **strategy** (:class:`algorithms.es_core.Strategy`): ask/tell over explicit state,
  maximising, with its shaping, update rule and schedules injected;
* a **candidate codec**, what a candidate is on the wire: :class:`TableCodec`, a *(noise
  index, sign)* pair of the shared table (Salimans et al. 2017, Algorithm 2), whose centre
  and sigma travel in a broadcast once per generation or live in every worker's replica
  (``sync=seeds``); or :class:`VectorCodec`, a parameter vector carried in its task
  (CMA-ES, Nevergrad, xNES, LM-MA-ES: the "simple parallelisation" of the GoodAI post);
* the **run parts** every ES gets whatever its codec (:class:`RunParts`): observation
  normalisation, the training episode cap and action noise, from :class:`RunKnobs`.

An ES is registered as data, :func:`register_es` (name, config, strategy, codec). Env
seeds of every episode come from ``stream_rng(seed, STREAM_GENERATION, generation)`` and the
initial parameters from ``stream_rng(seed, STREAM_INIT)`` for every ES alike.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, final

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
    optimizer_seed,
    stream_rng,
)
from algorithms.es_core import (
    SGD,
    Adam,
    Candidate,
    ClipUp,
    FitnessShaping,
    MirroredES,
    Probe,
    Schedule,
    Strategy,
    UpdateRule,
)
from algorithms.registry import register_definition
from envs.obs_norm import RunningStat
from envs.policies import build_policy
from evaluation.backends import Evaluator
from evaluation.noise import DEFAULT_NOISE_SIZE, NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalResult, EvalTask, GenerationStats, ReplicaRef

#: Candidates are logged for the UMAP map only while a generation holds at most this many floats.
POPULATION_LOG_MAX_FLOATS = 200_000


# -- the knobs every ES has --------------------------------------------------------------------
@dataclass(frozen=True)
class RunKnobs:
    """What every ES run gets, whatever its codec: observations, episodes, schedules."""

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

    #: the schedules this ES's strategy can apply ("sigma", "lr"); a knob of another is refused
    SCHEDULES: ClassVar[tuple[str, ...]] = ("sigma", "lr")

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
        if not 0.0 <= self.action_noise_std < math.inf:
            raise ValueError(f"action_noise_std must be >= 0, got {self.action_noise_std}")
        for kind in ("sigma", "lr"):
            decay, floor = getattr(self, f"{kind}_decay"), getattr(self, f"{kind}_min")
            if not (0.0 < decay < math.inf and 0.0 <= floor < math.inf):
                raise ValueError(f"{kind}_decay must be > 0 and {kind}_min >= 0, got {decay}")
            if (decay, floor) != (1.0, 0.0) and kind not in self.SCHEDULES:
                raise ValueError(
                    f"{kind}_decay and {kind}_min need a strategy with a {kind} to schedule; "
                    f"this one has none (got {decay}, {floor})"
                )

    def schedule(self) -> Schedule:
        """The schedules as the rule the strategy is given."""
        return Schedule(self.sigma_decay, self.sigma_min, self.lr_decay, self.lr_min)


@dataclass(frozen=True)
class VectorRunKnobs(RunKnobs):
    """:class:`RunKnobs` with observation normalisation off by default (as GoodAI's Nevergrad
    and CMA runs had none) and, on, gathered from every rollout."""

    obs_norm: bool = doc(
        "normalise observations by the running mean and std of the training rollouts (as "
        "optimes; off: raw observations, as GoodAI's Nevergrad and CMA runs)",
        False,
    )
    obs_fraction: float = doc(
        "fraction of training rollouts whose observations update the statistics", 1.0
    )


@dataclass(frozen=True)
class NoiseTableKnobs:
    """The shared noise table of a table-codec ES."""

    noise_size: int = doc("floats in the shared noise table", DEFAULT_NOISE_SIZE)
    noise_seed: int = doc("seed of the noise table; -1 uses the run seed", -1)


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


# -- the run parts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class StrategyStart:
    """What a strategy is built from besides its config."""

    #: the parameters every ES of this seed starts from (float32)
    params: np.ndarray
    #: the run seed
    seed: int
    #: the shared noise table (a table-codec ES), else None
    noise: NoiseTable | None
    #: the policy's initialisation (more starting points: a meta-population's centres)
    init_params: Callable[[np.random.Generator], np.ndarray]

    @property
    def library_seed(self) -> int:
        """The seed of a strategy's own generator (pycma's, Nevergrad's, a RandomState)."""
        return optimizer_seed(self.seed, 0)


class RunParts:
    """Observation normalisation, the training episode cap and action noise of one run."""

    def __init__(self, knobs: RunKnobs, context: RunContext) -> None:
        self.knobs = knobs
        self.context = context
        self.obs_stat = RunningStat((context.policy_spec.obs_dim,))
        self.episode_cap: int | None = self.limit()

    def limit(self) -> int | None:
        """The longest training episode: the run's limit, lowered by ``train_episode_steps``."""
        limits = [self.context.max_episode_steps, self.knobs.train_episode_steps or None]
        known = [limit for limit in limits if limit is not None]
        return min(known) if known else None

    def normalisation(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The observation mean and std every worker applies (None, None: no normalisation)."""
        if not self.knobs.obs_norm:
            return None, None
        return self.obs_stat.mean.astype(np.float32), self.obs_stat.std.astype(np.float32)

    def tasks(
        self,
        candidates: int,
        rng: np.random.Generator,
        every_draw: bool,
        make: Callable[..., EvalTask],
        behaviour: bool = False,
    ) -> list[EvalTask]:
        """The candidates' tasks with this run's fields, drawn from ``rng`` after the env seeds.

        ``every_draw``: draw the observation choice and the action-noise seed for every task
        whether used or not (the table codec's stream, as its recorded runs drew it); else
        only those used.
        """
        knobs = self.knobs
        collect = np.zeros(candidates, dtype=bool)
        if every_draw or knobs.obs_norm:
            collect = (rng.random(candidates) < knobs.obs_fraction) & knobs.obs_norm
        seeds: list[int | None] = [None] * candidates
        if every_draw or knobs.action_noise_std > 0:
            seeds = [int(s) for s in rng.integers(0, SEED_BOUND, size=candidates)]
        noise_std = knobs.action_noise_std if every_draw or knobs.action_noise_std > 0 else 0.0
        return [
            make(
                i,
                max_steps=self.episode_cap,
                collect_obs=bool(collect[i]),
                action_noise_std=noise_std,
                action_noise_seed=seeds[i],
                behaviour=behaviour,
            )
            for i in range(candidates)
        ]

    def absorb(self, results: list[EvalResult]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """The generation's observation sums into the statistics (the one place they enter)."""
        increments = [
            (result.obs_sum, result.obs_sumsq, result.obs_count)
            for result in results
            if result.obs_count and result.obs_sum is not None and result.obs_sumsq is not None
        ]
        for obs_sum, obs_sumsq, count in increments:
            self.obs_stat.increment(obs_sum, obs_sumsq, count)
        return increments

    def adapt(self, lengths: np.ndarray) -> None:
        """``episode_cap: adaptive``: twice the finished episodes' mean length (none: kept)."""
        if self.knobs.episode_cap == "adaptive" and lengths.size:
            cap = max(int(2 * lengths.mean()), 1)
            limit = self.limit()
            self.episode_cap = cap if limit is None else min(cap, limit)

    def state_dict(self) -> dict[str, Any]:
        return {"obs_stat": self.obs_stat.state_dict(), "episode_cap": self.episode_cap}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # checkpoints of vector ES without obs_norm from before the run parts held neither
        if "obs_stat" in state:
            self.obs_stat.load_state_dict(state["obs_stat"])
        self.episode_cap = state.get("episode_cap", self.limit())

    def artifacts(self) -> dict[str, Any]:
        mean, std = self.normalisation()
        return {
            "obs_mean": None if mean is None else mean.tolist(),
            "obs_std": None if std is None else std.tolist(),
        }


# -- replicated mode ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaUpdate:
    """One generation's update in replicated mode: O(population) scalars, independent of d.

    The shaped fitness is a function of ``fitness`` and the schedules are rules inside the
    strategy, so every replica runs the head's own ``tell``, bit for bit.
    """

    generation: int
    noise_indices: np.ndarray  # int64, one per mirrored pair (+eps, -eps)
    fitness: np.ndarray  # float64, one per candidate, as the head told it
    obs_increments: list[tuple[np.ndarray, np.ndarray, int]]  # in the head's order
    timesteps: int = 0  # the head's training timesteps after this generation


class Replica:
    """A worker's copy of the head's state for replicated mode (Algorithm 2 of the paper).

    Pickled as the full sync (mean, optimizer moments, obs statistics, sigma) without the
    noise table: the worker binds its own view of it.
    """

    def __init__(self, strategy: MirroredES, run: RunParts, generation: int, steps: int) -> None:
        self.strategy, self.run = strategy, run
        self.generation, self.timesteps = generation, steps

    def bind(self, noise: Any) -> None:
        self.strategy.bind(noise)

    def apply(self, update: ReplicaUpdate) -> None:
        candidates = [Candidate(int(i), sign) for i in update.noise_indices for sign in (1, -1)]
        self.strategy.tell(candidates, update.fitness)
        for obs_sum, obs_sumsq, count in update.obs_increments:
            self.run.obs_stat.increment(obs_sum, obs_sumsq, count)
        self.generation = update.generation
        self.timesteps = update.timesteps

    def broadcast(self) -> Broadcast:
        mean, std = self.run.normalisation()
        strategy = self.strategy
        return Broadcast(self.generation, strategy.mean, strategy.sigma, mean, std, self.timesteps)

    def checksum(self) -> int:
        """CRC-32 of the mean, the optimizer moments, sigma and the obs statistics."""
        stat = self.run.obs_stat
        parts = [self.strategy.mean, *self.strategy.optimizer.state_dict().values()]
        parts += [np.asarray(self.strategy.sigma), np.array([stat.count]), stat.sum, stat.sumsq]
        crc = 0
        for part in parts:
            crc = zlib.crc32(np.ascontiguousarray(part).data, crc)
        return crc


# -- candidate codecs ---------------------------------------------------------------------------
class CandidateCodec(ABC):
    """What a candidate is on the wire: it writes the candidates' tasks, the target the
    workers evaluate them against, and the population log's record of them."""

    #: the shared noise table the strategy draws from (None: none)
    noise: NoiseTable | None = None

    def __init__(self, es: ESAlgorithm, spec: NoiseSpec | None) -> None:
        self.es = es

    @abstractmethod
    def tasks(self, candidates: list[Any], rng: np.random.Generator) -> list[EvalTask]:
        """The candidates' tasks, their env seeds drawn from ``rng`` (the generation's)."""

    @abstractmethod
    def target(self) -> Broadcast | ReplicaRef:
        """What the workers evaluate the generation's tasks against."""

    @abstractmethod
    def policy_target(self) -> Broadcast | ReplicaRef:
        """What the workers evaluate the current policy against."""

    @abstractmethod
    def population(self, candidates: list[Any], fitness: np.ndarray) -> dict[str, Any]:
        """The population log's record of the generation (before the tell)."""

    def synchronise(
        self,
        candidates: list[Any],
        fitness: np.ndarray,
        increments: list[tuple[np.ndarray, np.ndarray, int]],
        stats: GenerationStats,
        extras: dict[str, float],
    ) -> float:
        """After the tell: bring what the workers keep up to date; returns its seconds."""
        return 0.0

    def extras(self, candidates: list[Any]) -> dict[str, float]:
        """The codec's metrics of the generation."""
        return {}

    def close(self) -> None:  # noqa: B027 - most codecs hold nothing
        """Release what the codec holds."""


class TableCodec(CandidateCodec):
    """A candidate is a *(noise index, sign)* of the shared table; mirrored pairs share their
    env seeds; the mean and sigma travel in the broadcast, or live in replicas."""

    def __init__(self, es: ESAlgorithm, spec: NoiseSpec) -> None:
        if es.context.sync not in ("broadcast", "seeds"):
            raise ValueError(f"sync must be broadcast or seeds, got {es.context.sync!r}")
        if es.evaluator.noise_spec != spec:
            # Workers would decode (index, sign) from another table: wrong results, silently.
            raise ValueError(
                f"the evaluator holds noise table {es.evaluator.noise_spec}, {es.name} needs "
                f"{spec} (build it with noise_spec_for)"
            )
        self.es = es
        self.replicated = es.context.sync == "seeds"
        # The head rebuilds perturbations from the table; it borrows the evaluator's copy in
        # this process when there is one rather than drawing 128 MiB again.
        local = es.evaluator.noise
        self._owns_noise = local is None or local.spec != spec
        self.noise: NoiseTable | None = (
            local if local is not None and not self._owns_noise else NoiseTable.create(spec)
        )
        if self.replicated:  # the snapshot is taken when a worker first needs it
            es.evaluator.attach_replica(self.replica)

    def replica(self) -> Replica:
        """The head's state as a replica (shares its arrays; pickling copies them)."""
        es = self.es
        assert isinstance(es.strategy, MirroredES)
        return Replica(es.strategy, es.run, es.generation, es.timesteps)

    def broadcast(self) -> Broadcast:
        es = self.es
        strategy: Any = es.strategy
        mean, std = es.run.normalisation()
        return Broadcast(es.generation, strategy.mean, strategy.sigma, mean, std, es.timesteps)

    def tasks(self, candidates: list[Candidate], rng: np.random.Generator) -> list[EvalTask]:
        es = self.es
        env_seeds = rng.integers(0, SEED_BOUND, size=(len(candidates) // 2, es.episodes))

        def make(i: int, **fields: Any) -> EvalTask:
            seeds = tuple(int(s) for s in env_seeds[i // 2])
            noise_index, sign = candidates[i].noise_index, candidates[i].sign
            return EvalTask(i, seeds, noise_index=noise_index, sign=sign, **fields)

        return es.run.tasks(len(candidates), rng, True, make, es.strategy.wants_behaviour)

    def target(self) -> Broadcast | ReplicaRef:
        return ReplicaRef(self.es.generation) if self.replicated else self.broadcast()

    def policy_target(self) -> Broadcast | ReplicaRef:
        if self.replicated:
            return ReplicaRef(self.es.generation)
        # the strategy's centre: its mean, or the centre a meta-population chooses
        broadcast = self.broadcast()
        return dataclasses.replace(broadcast, centre=self.es.strategy.centre())

    def population(self, candidates: list[Candidate], fitness: np.ndarray) -> dict[str, Any]:
        """(index, sign) with a scalar sigma, else the candidates' vectors."""
        strategy: Any = self.es.strategy
        record: dict[str, Any] = {"fitness": fitness, "centre": strategy.mean.copy()}
        if np.ndim(strategy.sigma) == 0:
            record["sigma"] = float(strategy.sigma)
            record["noise_index"] = np.array([c.noise_index for c in candidates], np.int64)
            record["sign"] = np.array([c.sign for c in candidates], np.int8)
            return record
        assert self.noise is not None
        broadcast = self.broadcast()
        record["candidates"] = np.stack(
            [
                EvalTask(i, (), None, noise_index=c.noise_index, sign=c.sign).parameters(
                    broadcast, self.noise.array
                )
                for i, c in enumerate(candidates)
            ]
        )
        return record

    def synchronise(
        self,
        candidates: list[Candidate],
        fitness: np.ndarray,
        increments: list[tuple[np.ndarray, np.ndarray, int]],
        stats: GenerationStats,
        extras: dict[str, float],
    ) -> float:
        """Replicated mode: the generation's update to every replica; returns its seconds."""
        if not self.replicated:
            return 0.0
        started = time.perf_counter()
        es = self.es
        update = ReplicaUpdate(
            es.generation,
            np.array([c.noise_index for c in candidates[0::2]], dtype=np.int64),
            np.asarray(fitness, dtype=np.float64),
            increments,
            es.timesteps,
        )
        synced = es.evaluator.update_replicas(update, es.generation, self.replica().checksum())
        stats.bytes_to_workers += synced.bytes_to_workers
        stats.bytes_from_workers += synced.bytes_from_workers
        extras["sync_s"] = time.perf_counter() - started
        extras["resyncs"] = float(synced.resyncs)
        return extras["sync_s"]

    def close(self) -> None:
        if self._owns_noise and self.noise is not None:
            self.noise.close()


class VectorCodec(CandidateCodec):
    """A candidate is a parameter vector, sent inside its task as ``d`` float32 values; each
    candidate has its own env seeds; the broadcast carries no centre."""

    def tasks(self, candidates: list[np.ndarray], rng: np.random.Generator) -> list[EvalTask]:
        es = self.es
        env_seeds = rng.integers(0, SEED_BOUND, size=(len(candidates), es.episodes))

        def make(i: int, **fields: Any) -> EvalTask:
            vector = np.ascontiguousarray(candidates[i], dtype=np.float32)
            return EvalTask(i, tuple(int(s) for s in env_seeds[i]), vector=vector, **fields)

        return es.run.tasks(len(candidates), rng, False, make, es.strategy.wants_behaviour)

    def target(self) -> Broadcast | ReplicaRef:
        mean, std = self.es.run.normalisation()
        return Broadcast(self.es.generation, None, 0.0, mean, std, self.es.timesteps)

    def policy_target(self) -> Broadcast | ReplicaRef:
        mean, std = self.es.run.normalisation()
        return Broadcast(self.es.generation, self.es.current_parameters(), 0.0, mean, std)

    def population(self, candidates: list[np.ndarray], fitness: np.ndarray) -> dict[str, Any]:
        small = len(candidates) * candidates[0].size <= POPULATION_LOG_MAX_FLOATS
        return {
            "fitness": fitness,
            "centre": self.es.current_parameters().copy(),
            "candidates": np.stack(candidates).astype(np.float32) if small else None,
        }

    def extras(self, candidates: list[Any]) -> dict[str, float]:
        return {"population": float(len(candidates))}


CODECS: dict[str, type[CandidateCodec]] = {
    "table": TableCodec,
    "vector": VectorCodec,
}


# -- registration as data -----------------------------------------------------------------------
@dataclass(frozen=True)
class ESDefinition:
    """An ES as data: its config, its strategy and its codec. Behaves as an algorithm class
    to the harness (what :func:`algorithms.registry.get_algorithm` returns): calling it
    builds the :class:`ESAlgorithm`."""

    name: str
    Config: type
    #: builds the strategy from the config and where it starts
    strategy: Callable[[Any, StrategyStart], Strategy]
    codec: Literal["table", "vector"]
    summary: str = ""
    describe_update: Callable[[dict[str, Any]], str | None] = lambda params: None
    describe_population: Callable[[dict[str, Any]], str | None] = lambda params: None
    defaults_section: str | None = None
    #: whether ``sync=seeds`` (replicated optimizer state on every worker) is supported
    supports_replicated: bool = False
    #: a search space for ``harness tune`` (as experiments/search_spaces.yaml entries)
    search_space: dict[str, Any] | None = None
    family: Literal["es"] = "es"
    zoo_hyperparams: None = None

    def __call__(
        self, context: RunContext, config: Any, evaluator: Evaluator | None = None
    ) -> ESAlgorithm:
        if evaluator is None:
            raise ValueError(f"{self.name} is an ES: it needs the run's evaluator")
        return ESAlgorithm(self, context, config, evaluator)

    def section_in_defaults(self) -> str:
        return self.defaults_section or self.name

    def noise_spec_for(self, context: RunContext, config: Any) -> NoiseSpec | None:
        """The table of Algorithm 2: ``noise_size`` floats from ``noise_seed`` (else the
        run's); None for the vector codec."""
        if self.codec != "table":
            return None
        noise_seed = context.seed if config.noise_seed < 0 else config.noise_seed
        return NoiseSpec(config.noise_size, noise_seed)

    def check_config(self, config: dict[str, Any]) -> None:
        """Refuse, with a ValueError naming the value, a run config this cannot run."""
        if config.get("sync") == "seeds" and not self.supports_replicated:
            raise ValueError(f"{self.name} has no replicated mode: sync=seeds is for optimes")


def register_es(name: str, **fields: Any) -> ESDefinition:
    """Register an ES under ``name`` (see :class:`ESDefinition` for the fields)."""
    definition = ESDefinition(name, **fields)
    register_definition(definition, f"module {sys._getframe(1).f_globals.get('__name__')}")
    return definition


# -- the loop -------------------------------------------------------------------------------------
@final
class ESAlgorithm(Algorithm):
    """One generation loop over a strategy's ask/tell, given a codec and the run parts."""

    family = "es"

    def __init__(
        self, definition: ESDefinition, context: RunContext, config: Any, evaluator: Evaluator
    ) -> None:
        super().__init__(context, config, evaluator)
        config.validate()
        self.definition = definition
        self.name = definition.name
        self.evaluator = evaluator
        self.episodes = context.episodes_per_fitness
        self.policy = build_policy(context.policy_spec)
        #: the parameters every ES of this seed starts from
        self.initial: np.ndarray = self.policy.init_params(stream_rng(context.seed, STREAM_INIT))
        self.generation = 0
        #: training timesteps so far (the runner's count), broadcast for ``anneal_timesteps``
        self.timesteps = 0
        #: cumulative seconds per part of the wall-clock (es_common.ES_TIME_PARTS)
        self.time_counters = new_time_counters()
        knobs = config if isinstance(config, RunKnobs) else VectorRunKnobs()
        self.run = RunParts(knobs, context)
        self.noise_spec = definition.noise_spec_for(context, config)
        # If the set-up raises, the runner closes the evaluator: no workers are left.
        self.codec = CODECS[definition.codec](self, self.noise_spec)
        start = StrategyStart(self.initial, context.seed, self.codec.noise, self.policy.init_params)
        self.strategy: Strategy = definition.strategy(config, start)

    def _probe(self, probe: Probe) -> tuple[list[EvalResult], GenerationStats, float]:
        """Play a strategy's probe: each policy on every seed, behaviour returned."""
        episodes = len(probe.env_seeds)
        tasks = [
            EvalTask(
                i * episodes + e,
                (seed,),
                self.run.episode_cap,
                vector=policy,
                behaviour=True,
            )
            for i, policy in enumerate(probe.policies)
            for e, seed in enumerate(probe.env_seeds)
        ]
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(self.codec.target(), tasks)
        seconds = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, self.context.fail_on_env_error)
        probe.receive(results, fitness.reshape(len(probe.policies), episodes).mean(axis=1))
        return results, stats, seconds

    def step(self) -> StepRecord:
        probed = [self._probe(probe) for probe in self.strategy.probes()]
        step_started = started = time.perf_counter()
        rng = stream_rng(self.context.seed, STREAM_GENERATION, self.generation)
        candidates = self.strategy.ask(rng)
        ask_s = time.perf_counter() - started
        tasks = self.codec.tasks(candidates, rng)
        started = time.perf_counter()
        target = self.codec.target()
        sync_s = time.perf_counter() - started
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(target, tasks)
        evaluate_s = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, failures = fitness_of(results, self.context.fail_on_env_error)
        self._population = self.codec.population(candidates, fitness)
        started = time.perf_counter()
        self.strategy.observe(results)
        self.strategy.tell(candidates, fitness)
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
        started = time.perf_counter()
        increments = self.run.absorb(results)
        self.run.adapt(lengths)
        sync_s += time.perf_counter() - started
        sync_s += self.codec.synchronise(candidates, fitness, increments, stats, extras)
        extras["obs_sync_s"] = sync_s
        self.time_counters["obs_sync"] += sync_s
        self.time_counters["head_update"] += (
            time.perf_counter() - step_started - evaluate_s - sync_s
        )
        probed += [self._probe(probe) for probe in self.strategy.probes()]
        extras.update(self.codec.extras(candidates))
        extras.update(self.strategy.metrics())
        if "param_norm" not in extras:  # the mirrored strategies report their own
            extras["param_norm"] = float(np.linalg.norm(self.current_parameters()))
        record = generation_record(results, fitness, stats, extras)
        for results, stats, seconds in probed:
            steps = int(sum(r.steps for r in results))
            self.timesteps += steps
            record.timesteps += steps
            record.episodes += int(sum(len(r.lengths) for r in results))
            record.bytes_to_workers += stats.bytes_to_workers
            record.bytes_from_workers += stats.bytes_from_workers
            record.worker_seconds += stats.worker_seconds
            extras["measure_evaluate_s"] = extras.get("measure_evaluate_s", 0.0) + seconds
        return record

    # -- evaluation, state -----------------------------------------------------------------
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        tasks = [
            EvalTask(task_id=i, env_seeds=(s,), max_steps=self.context.max_episode_steps)
            for i, s in enumerate(env_seeds)
        ]
        results, stats = self.evaluator.evaluate(self.codec.policy_target(), tasks)
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, fail_on_env_error=True, training=False)
        return fitness

    def current_parameters(self) -> np.ndarray:
        return np.asarray(self.strategy.centre(), dtype=np.float32).copy()

    def state_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "timesteps": self.timesteps,
            **self.strategy.state_dict(),
            **self.run.state_dict(),
            "config": asdict(self.config),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generation = int(state["generation"])
        # checkpoints from before the count carried none; only anneal_timesteps reads it
        self.timesteps = int(state.get("timesteps", 0))
        self.strategy.load_state_dict(state)
        self.run.load_state_dict(state)
        self.evaluator.invalidate_replicas()  # what the workers keep is stale

    def artifacts(self) -> dict[str, Any]:
        facts = self.strategy.artifacts()
        if self.definition.codec == "table" or self.run.knobs.obs_norm:
            facts.update(self.run.artifacts())
        return facts

    def close(self) -> None:
        self.evaluator.close()
        self.codec.close()
