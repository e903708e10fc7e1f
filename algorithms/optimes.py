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

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_core import (
    CENTRED_RANKS,
    REWARD_STD,
    Adam,
    Candidate,
    FitnessShaping,
    MirroredES,
    MirroredSampler,
    Shaping,
    UpdateRule,
    centered_ranks,
    reward_std_scaled,
    top_pairs,
)
from algorithms.es_engine import (
    CentreRuleKnobs,
    NoiseTableES,
    NoiseTableRunKnobs,
    OptimESReplica,
    ReplicaUpdate,
    describe_mirrored_update,
    known_params,
    validate_population,
)
from algorithms.registry import register
from evaluation.noise import NoiseTable

#: The core's parts that optimes' callers (tests, benches) import from here.
__all__ = [
    "Adam",
    "Candidate",
    "OpenAIES",
    "OptimES",
    "OptimESConfig",
    "OptimESReplica",
    "ReplicaUpdate",
    "centered_ranks",
    "reward_std_scaled",
    "top_pairs",
]

#: OpenAI-ES's shaping: centred ranks of every candidate
CENTRED_RANKS_OF_ALL = FitnessShaping(CENTRED_RANKS)
#: the shapings optimes' ``fitness_shaping`` knob names
FITNESS_SHAPINGS: dict[str, Shaping] = {"centered_ranks": CENTRED_RANKS, "reward_std": REWARD_STD}


class OpenAIES(MirroredES):
    """Ask/tell core of OpenAI-ES/ARS built from :mod:`algorithms.es_core`'s parts.

    Mirrored table indices, an injected shaping (centred ranks, or ARS's reward-std on the
    top directions) and update rule (Adam or SGD) on ``-grad + l2 theta``, one scalar sigma
    that only the run's schedule moves.
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
        shaping: FitnessShaping = CENTRED_RANKS_OF_ALL,
    ) -> None:
        super().__init__(
            centre,
            noise,
            sigma,
            sampler=MirroredSampler(population),
            shaping=shaping,
            update=update,
            l2_coeff=l2_coeff,
        )


@dataclass(frozen=True)
class OptimESConfig(NoiseTableRunKnobs, CentreRuleKnobs):
    """Hyperparameters of optimes; defaults per env live in ``experiments/defaults.yaml``."""

    population: int = doc("candidates per generation (even: mirrored pairs)", 40)
    sigma: float = doc("standard deviation of the parameter noise", 0.02)
    top_directions: int = doc(
        "ARS V2-t's b: only the b mirrored pairs with the best max(F+, F-) enter the update"
        " (0: all)",
        0,
    )
    fitness_shaping: str = doc(
        "centered_ranks (OpenAI-ES) or reward_std (ARS: raw returns over their std)",
        "centered_ranks",
    )
    sigma_decay: float = doc("sigma multiplied by this every generation", 1.0)
    sigma_min: float = doc("floor for the sigma schedule", 0.0)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        validate_population(self.population, self.top_directions)
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        self.validate_rule()
        if self.fitness_shaping not in FITNESS_SHAPINGS:
            raise ValueError(
                f"fitness_shaping must be one of {', '.join(FITNESS_SHAPINGS)}, "
                f"got {self.fitness_shaping!r}"
            )
        self.validate_run()

    def shaping(self) -> FitnessShaping:
        """The shaping ``fitness_shaping`` names on the ``top_directions`` best pairs."""
        return FitnessShaping(FITNESS_SHAPINGS[self.fitness_shaping], self.top_directions)


@register("optimes")
class OptimES(NoiseTableES):
    """OpenAI-ES with a shared noise table, mirrored sampling, centred ranks and Adam."""

    summary = "OpenAI-ES (Salimans et al. 2017): noise table, mirrored pairs, ranks, Adam"
    Config = OptimESConfig
    config: OptimESConfig

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """OpenAI-ES's centred ranks or ARS V2-t's top b pairs, and the rule the config names."""
        config = known_params(OptimESConfig, params)
        rule = config.update_rule(1)
        return describe_mirrored_update(asdict(config), config.shaping(), rule, None)

    def build_strategy(self, centre: np.ndarray, noise: NoiseTable) -> MirroredES:
        config = self.config
        return OpenAIES(
            centre,
            noise,
            config.population,
            config.sigma,
            config.update_rule(centre.size),
            l2_coeff=config.l2_coeff,
            shaping=config.shaping(),
        )

    def _apply_schedules(self) -> None:
        """The run's sigma schedule (one scalar sigma), then the learning rate's."""
        es, config = self.strategy, self.config
        es.sigma = max(float(es.sigma) * config.sigma_decay, config.sigma_min)
        super()._apply_schedules()
