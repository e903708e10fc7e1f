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

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_common import SEED_BOUND, STREAM_INIT, STREAM_NOVELTY, stream_rng
from algorithms.es_core import (
    Candidate,
    MirroredSampler,
    Probe,
    Strategy,
    UpdateRule,
    centered_ranks,
    mirrored_estimate,
    sigma_summary,
)
from algorithms.es_engine import (
    CentreRuleKnobs,
    NoiseTableKnobs,
    RunKnobs,
    StrategyStart,
    known_params,
    register_es,
    validate_population,
)
from envs.behaviour import mean_of_episodes
from evaluation.protocol import EvalResult

#: the shaping of the tell, in the report's words
WEIGHTED_RANKS = "w x centred reward ranks + (1 - w) x centred novelty ranks"


@dataclass(frozen=True)
class NSRESConfig(RunKnobs, NoiseTableKnobs, CentreRuleKnobs):
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


class NoveltyStrategy(Strategy):
    """The meta-population around OpenAI-ES's mirrored update (see the module docstring).

    Its ``mean`` is the centre chosen for the generation, which the table codec broadcasts;
    its :meth:`centre` the centre of best measured return (centre 0 before any), which the
    run evaluates and stores. It asks for its centres' measurements as probes.
    """

    wants_behaviour = True

    def __init__(self, config: NSRESConfig, start: StrategyStart) -> None:
        assert start.noise is not None
        self.config = config
        self.noise = start.noise
        self.seed = start.seed
        self.adaptive = isinstance(config, NSRAESConfig)
        self.sampler = MirroredSampler(config.population)
        self.sigma = float(config.sigma)
        self.schedule = config.schedule()
        size, dim = config.meta_population, start.params.size
        draws = (stream_rng(start.seed, STREAM_INIT, j) for j in range(1, size))
        self.centres: list[np.ndarray] = [np.asarray(start.params, dtype=np.float32).copy()] + [
            np.asarray(start.init_params(rng), dtype=np.float32) for rng in draws
        ]
        self.optimizers: list[UpdateRule] = [config.update_rule(dim) for _ in range(size)]
        self.current = 0
        self.generation = 0
        self.archive = NoveltyArchive(config.novelty_neighbours)
        #: each centre's last measured BC (rows of NaN until measured) and training return
        self.centre_behaviours = np.zeros((size, 0))
        self.centre_returns = np.full(size, -np.inf)
        self.reward_weight = float(config.reward_weight)
        self.best_return = -math.inf
        self.stagnant = 0
        self.measured = False
        self.last_grad_norm = 0.0
        self._behaviours = np.zeros((0, 0))
        self._novelty = np.zeros(0)
        self._rng = stream_rng(start.seed, STREAM_NOVELTY, 1)
        self._pending: list[Probe] = [self._initial_probe()]

    @property
    def mean(self) -> np.ndarray:
        return self.centres[self.current]

    # -- the generation -------------------------------------------------------------------
    def ask(self, rng: np.random.Generator) -> list[Candidate]:
        """NS-select (a centre with probability proportional to its novelty, uniform while
        none has any), then mirrored pairs around it."""
        self._rng = stream_rng(self.seed, STREAM_NOVELTY, self.generation + 1)
        novelty = np.nan_to_num(self.archive.novelty(self.centre_behaviours), neginf=0.0)
        total = float(novelty.sum())
        chances = novelty / total if total > 0 else np.full(len(novelty), 1.0 / len(novelty))
        self.current = int(self._rng.choice(len(chances), p=chances))
        return self.sampler.ask(rng, self.noise, self.mean.size)

    def observe(self, results: list[EvalResult]) -> None:
        """The candidates' BCs, one row each (NaN for a failed candidate)."""
        size = next((len(r.behaviour) for r in results if r.failed is None), 0)
        self._behaviours = np.array(
            [r.behaviour if r.failed is None else (math.nan,) * size for r in results],
            dtype=np.float64,
        ).reshape(len(results), size)

    def tell(self, candidates: list[Candidate], fitness: np.ndarray) -> None:
        """NSR-update: the weighted centred ranks of return and novelty, OpenAI-ES's step;
        then the updated centre's measurement is asked for (NS-archive)."""
        self._novelty = self.archive.novelty(self._behaviours)
        weight = np.float32(self.reward_weight)
        shaped = weight * centered_ranks(fitness) + (np.float32(1.0) - weight) * centered_ranks(
            self._novelty
        )
        shaped = np.asarray(shaped, dtype=np.float32)
        kept = np.arange(shaped.size // 2)
        grad, _ = mirrored_estimate(self.noise, candidates, kept, shaped, self.mean.size)
        self.last_grad_norm = float(np.linalg.norm(grad))
        centre, rule = self.mean, self.optimizers[self.current]
        self.centres[self.current] = centre + rule.step(-grad + self.config.l2_coeff * centre)
        self.sigma = self.schedule.sigma(self.sigma)
        for every in self.optimizers:
            every.stepsize = self.schedule.rate(every.stepsize)
        self.generation += 1
        episodes = self.config.centre_episodes
        seeds = [int(s) for s in self._rng.integers(0, SEED_BOUND, size=episodes)]
        self._pending = [Probe([None], seeds, self._measured_updated)]

    def probes(self) -> list[Probe]:
        pending, self._pending = self._pending, []
        return pending

    # -- the centres' measurements ----------------------------------------------------------
    def _initial_probe(self) -> Probe:
        """The M initial centres' BCs enter the archive before the first generation."""
        rng = stream_rng(self.seed, STREAM_NOVELTY, 0)
        seeds = [int(s) for s in rng.integers(0, SEED_BOUND, size=self.config.centre_episodes)]
        return Probe(list(self.centres), seeds, self._measured_initial)

    def _measured_initial(self, results: list[EvalResult], returns: np.ndarray) -> None:
        episodes = self.config.centre_episodes
        for j in range(len(self.centres)):
            self._record_centre(j, results[j * episodes : (j + 1) * episodes], returns[j])
        finite = returns[np.isfinite(returns)]
        self.best_return = float(finite.max()) if finite.size else -math.inf
        self.measured = True

    def _measured_updated(self, results: list[EvalResult], returns: np.ndarray) -> None:
        """NS-archive: the updated centre's BC and return; NSRA-adapt moves ``w``."""
        self._record_centre(self.current, results, float(returns[0]))
        if self.adaptive:
            self._adapt(float(returns[0]))

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

    # -- the policy, metrics, state -------------------------------------------------------------
    def centre(self) -> np.ndarray:
        """The centre of best measured return (centre 0 before any measurement)."""
        return self.centres[int(np.argmax(self.centre_returns))]

    def metrics(self) -> dict[str, float]:
        finite = self._novelty[np.isfinite(self._novelty)]
        return {
            "sigma": sigma_summary(self.sigma),
            "lr": self.optimizers[self.current].stepsize,
            "grad_norm": self.last_grad_norm,
            "param_norm": float(np.linalg.norm(self.mean)),
            "centre_index": float(self.current),
            "novelty_mean": float(finite.mean()) if finite.size else 0.0,
            "novelty_max": float(finite.max()) if finite.size else 0.0,
            "reward_weight": self.reward_weight,
            "centre_return": float(self.centre_returns[self.current]),
            "best_centre_return": float(self.centre_returns.max()),
            "archive_size": float(len(self.archive)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "centre": self.mean.copy(),
            "sigma": copy.copy(self.sigma),
            "optimizer": self.optimizers[self.current].state_dict(),
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

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state["novelty"]
        self.sigma = float(np.asarray(state["sigma"]))
        self.generation = int(state["generation"])
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
        self._pending = [] if self.measured else [self._initial_probe()]


def describe_update(params: dict[str, Any]) -> str:
    """The meta-population, the weighted ranks, the rule the config names, and how w moves."""
    adaptive = "weight_delta" in params
    config = known_params(NSRAESConfig if adaptive else NSRESConfig, params)
    l2 = f", L2 {config.l2_coeff:g}" if config.l2_coeff else ""
    text = (
        f"{config.meta_population} centres, one a generation by novelty (k "
        f"{config.novelty_neighbours}); all {config.population // 2} pairs, "
        f"{WEIGHTED_RANKS}, {config.update_rule(1).describe()}{l2}; "
    )
    if not adaptive:
        return f"{text}w {config.reward_weight:g} fixed"
    return (
        f"{text}w from {config.reward_weight:g}, +{config.weight_delta:g} on a better centre "
        f"return, -{config.weight_delta:g} after {config.stagnation_generations} generations "
        "without"
    )


register_es(
    "nsr-es",
    Config=NSRESConfig,
    strategy=NoveltyStrategy,
    codec="table",
    summary="NSR-ES (Conti et al. 2018): M centres, novelty archive of BCs; noise table",
    describe_update=describe_update,
)
register_es(
    "nsra-es",
    Config=NSRAESConfig,
    strategy=NoveltyStrategy,
    codec="table",
    summary="NSRA-ES (Conti et al. 2018): NSR-ES with w adapted to progress; noise table",
    describe_update=describe_update,
)
