"""Novelty-seeking evolution strategies with a meta-population ("nsr-es", "nsra-es").

Conti, Madhavan, Petroski Such, Lehman, Stanley, Clune (2018), *Improving exploration in
evolution strategies for deep reinforcement learning via a population of novelty-seeking
agents*, NeurIPS, arXiv:1712.06560, section 3 and Algorithms 1-3 of its supplement. Tags
``(NS-...)`` below name their steps.

A meta-population of ``M`` centres ``theta^1..theta^M``, each with its own optimizer state,
and an archive ``A`` of behaviour characterisations (BCs, :mod:`envs.behaviour`): a few
floats per episode, declared with the env. The novelty of a policy is the mean Euclidean
distance of its BC to its ``k`` nearest neighbours in ``A`` (NS-novelty). One generation::

    P(theta^m) = N(theta^m, A) / sum_j N(theta^j, A)                (NS-select, eq. 3)
    theta^{i,m} = theta^m +- sigma eps_i        (mirrored pairs of the shared noise table)
    g = sum_i [w rank(f_i) + (1 - w) rank(N(theta^{i,m}, A))] eps_i      (NSR-update)
    theta^m <- theta^m + update(-g + l2 theta^m)          (Adam, OpenAI-ES's arithmetic)
    A <- A + {b(theta^m)};  f(theta^m) measured                     (NS-archive)

with ``rank`` OpenAI-ES's centred ranks (the authors' released code, ``es_distributed/
nses.py``, averages the centred ranks of returns and of novelties: ``(rew_ranks +
nov_ranks) / 2``). NSR-ES fixes ``w = 0.5``; NSR-ES with ``reward_weight = 0`` is NS-ES.
NSRA-ES adapts ``w`` (NSRA-adapt): it starts at 1.0; when a measured centre return beats
the best so far ``w <- min(1, w + delta)``, and after ``t_max`` generations without such an
improvement ``w <- max(0, w - delta)`` (the counter restarts), with ``delta = 0.05``.

Defaults: ``M = 5``, ``k = 10`` and 5 rollouts to measure a centre are the authors' released
configurations (``configurations/humanoid_nsres.json``: ``population_size 5``, ``k 10``,
``num_rollouts 5``); sigma 0.02, Adam at 0.01 and L2 0.005 are OpenAI-ES's (the same
files); ``w`` starting at 1.0 and ``delta = 0.05`` are section 3.3's. ``t_max = 50`` is the
value goktug97/estorch's NSRA_ES uses (``weight_t=50``); this module's author could not
check it against the paper's supplement. The initial centres are the policy's init drawn
from ``stream_rng(seed, STREAM_INIT, j)``, ``j = 0..M-1`` (centre 0 is every ES's start).

On the wire a candidate stays a noise index and a sign: the chosen centre is the
generation's broadcast, and its tasks ask the workers (``EvalTask.behaviour``) to send each
candidate's BC, averaged over its episodes, back with its returns (a few floats, counted in
``bytes_from_workers``). After the tell the updated centre is played on ``centre_episodes``
fresh episodes (NS-archive): their BC enters the archive, their mean (training) return is
the centre's ``f`` for NSRA-ES and for choosing the policy the run evaluates and stores (the
centre of best measured return). Those episodes count as training timesteps. The initial
centres are measured the same way before the first generation.

Deviations: the centres share one set of observation-normalisation statistics (the
released code keeps one per centre); a centre's novelty for the selection is that of its
last measured BC (the released code re-measures every centre each generation, which only
differs on stochastic envs). Every random choice comes from the run seed
(``STREAM_NOVELTY``), and the archive, the centres, their optimizers, ``w`` and its counter
are in the checkpoint, so runs repeat bit for bit and resume exactly.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import RunContext, StepRecord, config_defaults, doc
from algorithms.es_common import (
    SEED_BOUND,
    STREAM_INIT,
    STREAM_NOVELTY,
    count_evaluation,
    fitness_of,
    stream_rng,
)
from algorithms.es_core import (
    Candidate,
    FitnessShaping,
    MirroredES,
    MirroredSampler,
    UpdateRule,
    centered_ranks,
)
from algorithms.es_engine import (
    CentreRuleKnobs,
    NoiseTableES,
    NoiseTableRunKnobs,
    obs_normalisation,
    validate_population,
)
from algorithms.registry import register
from envs.behaviour import mean_of_episodes
from evaluation.backends import Evaluator
from evaluation.noise import NoiseTable
from evaluation.protocol import Broadcast, EvalResult, EvalTask, GenerationStats, ReplicaRef


@dataclass(frozen=True)
class NSRESConfig(NoiseTableRunKnobs, CentreRuleKnobs):
    """Hyperparameters of ``nsr-es``: OpenAI-ES's, and the meta-population's (Conti et al.)."""

    population: int = doc("candidates per generation (even: mirrored pairs)", 40)
    sigma: float = doc("standard deviation of the parameter noise", 0.02)
    meta_population: int = doc("M, the centres kept (Conti et al.'s configurations: 5)", 5)
    novelty_neighbours: int = doc("k: novelty is the mean distance to the k nearest BCs", 10)
    reward_weight: float = doc(
        "w, weight of the reward ranks against the novelty ranks (NSR-ES 0.5; 0 is NS-ES)", 0.5
    )
    centre_episodes: int = doc("episodes that measure an updated centre's BC and return", 5)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        validate_population(self.population, 0)
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        for name in ("meta_population", "novelty_neighbours", "centre_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.reward_weight <= 1.0:
            raise ValueError(f"reward_weight must be in [0, 1], got {self.reward_weight}")
        self.validate_rule()
        self.validate_run()


@dataclass(frozen=True)
class NSRAESConfig(NSRESConfig):
    """Hyperparameters of ``nsra-es``: NSR-ES's, with ``w`` adapted (Conti et al. 3.3)."""

    reward_weight: float = doc("w at the start (adapted in [0, 1]; the paper: 1.0)", 1.0)
    weight_delta: float = doc("delta: w's change on improvement or stagnation (paper: 0.05)", 0.05)
    stagnation_generations: int = doc(
        "t_max: generations without a better centre return before w drops by delta", 50
    )

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.weight_delta <= 1.0:
            raise ValueError(f"weight_delta must be in (0, 1], got {self.weight_delta}")
        if self.stagnation_generations < 1:
            raise ValueError(
                f"stagnation_generations must be >= 1, got {self.stagnation_generations}"
            )


@dataclass(frozen=True)
class GivenRanks(FitnessShaping):
    """The tell is given each candidate's weighted ranks (reward and novelty): kept as given."""

    def __call__(self, fitness: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.asarray(fitness, dtype=np.float32)
        return np.arange(values.size // 2), values

    def describe(self) -> str:
        return "w x centred reward ranks + (1 - w) x centred novelty ranks"


class NoveltyArchive:
    """The behaviour characterisations seen so far (NS-archive) and novelty against them."""

    def __init__(self, neighbours: int) -> None:
        self.neighbours = neighbours
        self.points = np.zeros((0, 0))

    def __len__(self) -> int:
        return len(self.points)

    def add(self, behaviour: np.ndarray) -> None:
        row = np.asarray(behaviour, dtype=np.float64).reshape(1, -1)
        if len(self.points) and row.shape[1] != self.points.shape[1]:
            raise ValueError(
                f"a behaviour characterisation of {row.shape[1]} floats, the archive holds "
                f"{self.points.shape[1]}"
            )
        self.points = np.concatenate([self.points.reshape(-1, row.shape[1]), row])

    def novelty(self, behaviours: np.ndarray) -> np.ndarray:
        """Mean distance of each row to its k nearest archive points (NS-novelty); a row of
        NaN (a candidate without a BC) scores -inf, below every novelty."""
        rows = np.asarray(behaviours, dtype=np.float64)
        if not len(rows):
            return np.zeros(0)
        if not len(self.points):
            return np.zeros(len(rows))
        gaps = rows[:, None, :] - self.points[None, :, :]
        distances = np.sqrt(np.einsum("ijk,ijk->ij", gaps, gaps))
        k = min(self.neighbours, len(self.points))
        nearest = np.sort(distances, axis=1)[:, :k].mean(axis=1)
        return np.where(np.isnan(nearest), -np.inf, nearest)


class NoveltySearchES(NoiseTableES):
    """The meta-population loop around OpenAI-ES's mirrored update (see the module docstring).

    The engine's generation is one centre's; :meth:`step` wraps it with the choice of the
    centre before and the measurement of the updated centre after, whose episodes, bytes
    and seconds it adds to the generation's record.
    """

    supports_replicated = False
    #: NSRA-ES: ``w`` moves with the measured returns
    adaptive: ClassVar[bool] = False
    Config: ClassVar[type] = NSRESConfig
    config: NSRESConfig

    def build_strategy(self, centre: np.ndarray, noise: NoiseTable) -> MirroredES:
        config = self.config
        return MirroredES(
            centre,
            noise,
            config.sigma,
            sampler=MirroredSampler(config.population),
            shaping=GivenRanks(),
            update=config.update_rule(centre.size),
            l2_coeff=config.l2_coeff,
        )

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator) -> None:
        super().__init__(context, config, evaluator)
        size = self.config.meta_population
        draws = (stream_rng(context.seed, STREAM_INIT, j) for j in range(1, size))
        self.centres: list[np.ndarray] = [self.strategy.centre] + [
            np.asarray(self.policy.init_params(rng), dtype=np.float32) for rng in draws
        ]
        self.optimizers: list[UpdateRule] = [self.strategy.optimizer] + [
            self.config.update_rule(self.initial.size) for _ in range(1, size)
        ]
        self.current = 0
        self.archive = NoveltyArchive(self.config.novelty_neighbours)
        #: each centre's last measured BC (rows of NaN until measured) and training return
        self.centre_behaviours = np.zeros((size, 0))
        self.centre_returns = np.full(size, -np.inf)
        self.reward_weight = float(self.config.reward_weight)
        self.best_return = -math.inf
        self.stagnant = 0
        self.measured = False
        self._behaviours = np.zeros((0, 0))
        self._novelty = np.zeros(0)

    # -- the meta-population around the engine's generation --------------------------------
    def step(self) -> StepRecord:
        measurements = []
        if not self.measured:
            measurements.append(self._measure_initial())
        rng = stream_rng(self.context.seed, STREAM_NOVELTY, self.generation + 1)
        self._select(rng)
        record = super().step()
        measurements.append(self._measure_updated(rng))
        for results, stats, seconds in measurements:
            steps = int(sum(r.steps for r in results))
            self.timesteps += steps
            record.timesteps += steps
            record.episodes += int(sum(len(r.lengths) for r in results))
            record.bytes_to_workers += stats.bytes_to_workers
            record.bytes_from_workers += stats.bytes_from_workers
            record.worker_seconds += stats.worker_seconds
            record.extras["measure_evaluate_s"] = (
                record.extras.get("measure_evaluate_s", 0.0) + seconds
            )
        record.extras.update(
            {
                "reward_weight": self.reward_weight,
                "centre_return": float(self.centre_returns[self.current]),
                "best_centre_return": float(self.centre_returns.max()),
                "archive_size": float(len(self.archive)),
            }
        )
        return record

    def _select(self, rng: np.random.Generator) -> None:
        """NS-select: a centre with probability proportional to its novelty (uniform while
        no centre has any), made the strategy's centre with its own optimizer."""
        novelty = np.nan_to_num(self.archive.novelty(self.centre_behaviours), neginf=0.0)
        total = float(novelty.sum())
        chances = novelty / total if total > 0 else np.full(len(novelty), 1.0 / len(novelty))
        self.current = int(rng.choice(len(chances), p=chances))
        self.strategy.centre = self.centres[self.current]
        self.strategy.optimizer = self.optimizers[self.current]

    def _measure(
        self, target: Broadcast, vectors: list[np.ndarray | None], rng: np.random.Generator
    ) -> tuple[list[EvalResult], GenerationStats, float, np.ndarray]:
        """Play each policy (a vector, or the broadcast centre for None) on the same
        ``centre_episodes`` fresh episodes, one task each; returns their training returns
        per policy as well."""
        episodes = self.config.centre_episodes
        seeds = [int(s) for s in rng.integers(0, SEED_BOUND, size=episodes)]
        tasks = [
            EvalTask(
                task_id=i * episodes + e,
                env_seeds=(seed,),
                max_steps=self.episode_cap,
                vector=vector,
                behaviour=True,
            )
            for i, vector in enumerate(vectors)
            for e, seed in enumerate(seeds)
        ]
        started = time.perf_counter()
        results, stats = self.evaluator.evaluate(target, tasks)
        seconds = time.perf_counter() - started
        count_evaluation(self.time_counters, stats)
        fitness, _ = fitness_of(results, self.context.fail_on_env_error)
        return results, stats, seconds, fitness.reshape(len(vectors), episodes).mean(axis=1)

    def _record_centre(self, index: int, results: list[EvalResult], value: float) -> None:
        """A centre's measurement: its BC into the archive, its return; a failed episode
        leaves the centre's last BC (NaN before any) and scores its return worst."""
        if any(r.failed is not None for r in results):
            self.centre_returns[index] = -np.inf
            return
        behaviour = np.asarray(mean_of_episodes([r.behaviour for r in results]))
        if self.centre_behaviours.shape[1] != behaviour.size:
            self.centre_behaviours = np.full((len(self.centres), behaviour.size), np.nan)
        self.centre_behaviours[index] = behaviour
        self.centre_returns[index] = value
        self.archive.add(behaviour)

    def _measure_initial(self) -> tuple[list[EvalResult], GenerationStats, float]:
        """The M initial centres' BCs enter the archive before the first generation."""
        rng = stream_rng(self.context.seed, STREAM_NOVELTY, 0)
        vectors: list[np.ndarray | None] = list(self.centres)
        results, stats, seconds, returns = self._measure(self._broadcast(), vectors, rng)
        episodes = self.config.centre_episodes
        for j in range(len(self.centres)):
            self._record_centre(j, results[j * episodes : (j + 1) * episodes], returns[j])
        finite = returns[np.isfinite(returns)]
        self.best_return = float(finite.max()) if finite.size else -math.inf
        self.measured = True
        return results, stats, seconds

    def _measure_updated(
        self, rng: np.random.Generator
    ) -> tuple[list[EvalResult], GenerationStats, float]:
        """NS-archive: the updated centre's BC and return; NSRA-adapt moves ``w``."""
        results, stats, seconds, returns = self._measure(self._broadcast(), [None], rng)
        self._record_centre(self.current, results, float(returns[0]))
        if self.adaptive:
            self._adapt(float(returns[0]))
        return results, stats, seconds

    def _adapt(self, value: float) -> None:
        """NSRA-adapt: ``w`` up by delta on a better centre return, down after ``t_max``
        generations without one."""
        config = self.config
        assert isinstance(config, NSRAESConfig)
        if value > self.best_return:
            self.best_return = value
            self.reward_weight = round(min(1.0, self.reward_weight + config.weight_delta), 12)
            self.stagnant = 0
            return
        self.stagnant += 1
        if self.stagnant >= config.stagnation_generations:
            self.reward_weight = round(max(0.0, self.reward_weight - config.weight_delta), 12)
            self.stagnant = 0

    # -- the engine's hooks ------------------------------------------------------------------
    def _tasks(self, candidates: list[Candidate], rng: np.random.Generator) -> list[EvalTask]:
        return [dataclasses.replace(t, behaviour=True) for t in super()._tasks(candidates, rng)]

    def _observe(self, results: list[EvalResult]) -> None:
        """The candidates' BCs, one row each (NaN for a failed candidate)."""
        size = next((len(r.behaviour) for r in results if r.failed is None), 0)
        self._behaviours = np.array(
            [r.behaviour if r.failed is None else (math.nan,) * size for r in results],
            dtype=np.float64,
        ).reshape(len(results), size)

    def _tell(self, candidates: list[Candidate], fitness: np.ndarray) -> None:
        """NSR-update: the weighted centred ranks of return and novelty, OpenAI-ES's step."""
        self._novelty = self.archive.novelty(self._behaviours)
        weight = np.float32(self.reward_weight)
        shaped = weight * centered_ranks(fitness) + (np.float32(1.0) - weight) * centered_ranks(
            self._novelty
        )
        self.strategy.tell(candidates, shaped)
        self.centres[self.current] = self.strategy.centre

    def _apply_schedules(self) -> None:
        """The learning-rate schedule moves every centre's optimizer alike."""
        config = self.config
        for rule in self.optimizers:
            rule.stepsize = max(rule.stepsize * config.lr_decay, config.lr_min)

    def _extras(self) -> dict[str, float]:
        finite = self._novelty[np.isfinite(self._novelty)]
        return {
            **super()._extras(),
            "centre_index": float(self.current),
            "novelty_mean": float(finite.mean()) if finite.size else 0.0,
            "novelty_max": float(finite.max()) if finite.size else 0.0,
        }

    # -- the policy the run evaluates, state -------------------------------------------------
    def _best(self) -> np.ndarray:
        """The centre of best measured return (centre 0 before any measurement)."""
        return self.centres[int(np.argmax(self.centre_returns))]

    def _policy_target(self) -> Broadcast | ReplicaRef:
        mean, std = obs_normalisation(self.obs_stat, self.config.obs_norm)
        sigma = float(self.strategy.sigma)
        return Broadcast(self.generation, self._best(), sigma, mean, std, self.timesteps)

    def current_parameters(self) -> np.ndarray:
        return self._best().copy()

    def _strategy_state(self) -> dict[str, Any]:
        return {
            **super()._strategy_state(),
            "novelty": {
                "centres": [centre.copy() for centre in self.centres],
                "optimizers": [rule.state_dict() for rule in self.optimizers],
                "current": self.current,
                "archive": self.archive.points.copy(),
                "centre_behaviours": self.centre_behaviours.copy(),
                "centre_returns": self.centre_returns.copy(),
                "reward_weight": self.reward_weight,
                "best_return": self.best_return,
                "stagnant": self.stagnant,
                "measured": self.measured,
            },
        }

    def _load_strategy_state(self, state: dict[str, Any]) -> None:
        super()._load_strategy_state(state)
        saved = state["novelty"]
        self.centres = [np.asarray(c, dtype=np.float32).copy() for c in saved["centres"]]
        for rule, rule_state in zip(self.optimizers, saved["optimizers"], strict=True):
            rule.load_state_dict(rule_state)
        self.current = int(saved["current"])
        self.archive.points = np.asarray(saved["archive"], dtype=np.float64).copy()
        self.centre_behaviours = np.asarray(saved["centre_behaviours"], dtype=np.float64).copy()
        self.centre_returns = np.asarray(saved["centre_returns"], dtype=np.float64).copy()
        self.reward_weight = float(saved["reward_weight"])
        self.best_return = float(saved["best_return"])
        self.stagnant = int(saved["stagnant"])
        self.measured = bool(saved["measured"])
        self.strategy.centre = self.centres[self.current]
        self.strategy.optimizer = self.optimizers[self.current]

    # -- the report's words --------------------------------------------------------------------
    @classmethod
    def _words(cls, params: dict[str, Any]) -> tuple[Any, str]:
        defaults = config_defaults(cls.Config)
        config = cls.Config(**{**defaults, **{k: v for k, v in params.items() if k in defaults}})
        l2 = f", L2 {config.l2_coeff:g}" if config.l2_coeff else ""
        text = (
            f"{config.meta_population} centres, one a generation by novelty (k "
            f"{config.novelty_neighbours}); all {config.population // 2} pairs, "
            f"{GivenRanks().describe()}, {config.update_rule(1).describe()}{l2}"
        )
        return config, text


@register("nsr-es")
class NSRES(NoveltySearchES):
    """NSR-ES (Conti et al. 2018): reward and novelty ranks averaged, w fixed."""

    summary = "NSR-ES (Conti et al. 2018): M centres, novelty archive of BCs; noise table"
    Config = NSRESConfig

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """The meta-population, the weighted ranks with w fixed, the rule the config names."""
        config, text = cls._words(params)
        return f"{text}; w {config.reward_weight:g} fixed"


@register("nsra-es")
class NSRAES(NoveltySearchES):
    """NSRA-ES (Conti et al. 2018): NSR-ES with w adapted to progress."""

    summary = "NSRA-ES (Conti et al. 2018): NSR-ES with w adapted to progress; noise table"
    Config = NSRAESConfig
    adaptive = True

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """NSR-ES's words, and how w moves."""
        config, text = cls._words(params)
        return (
            f"{text}; w from {config.reward_weight:g}, +{config.weight_delta:g} on a better "
            f"centre return, -{config.weight_delta:g} after {config.stagnation_generations} "
            "generations without"
        )
