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

from algorithms.base import doc
from algorithms.es_core import SHAPINGS, FitnessShaping, MirroredES, MirroredSampler
from algorithms.es_engine import (
    CentreRuleKnobs,
    NoiseTableKnobs,
    RunKnobs,
    StrategyStart,
    describe_mirrored_update,
    known_params,
    register_es,
    validate_population,
)


@dataclass(frozen=True)
class OptimESConfig(RunKnobs, NoiseTableKnobs, CentreRuleKnobs):
    """Hyperparameters of optimes; defaults per env live in ``experiments/defaults.yaml``."""

    population: int = doc("candidates per generation (even: mirrored pairs)", 40)
    sigma: float = doc("standard deviation of the parameter noise", 0.02)
    top_directions: int = doc(
        "ARS V2-t's b: only the b mirrored pairs with the best max(F+, F-) enter the update"
        " (0: all)",
        0,
    )
    fitness_shaping: str = doc(
        "centered_ranks (OpenAI-ES), reward_std (ARS: raw returns over their std), nes or raw",
        "centered_ranks",
    )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        validate_population(self.population, self.top_directions)
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        self.validate_rule()
        if self.fitness_shaping not in SHAPINGS:
            raise ValueError(
                f"fitness_shaping must be one of {', '.join(SHAPINGS)}, "
                f"got {self.fitness_shaping!r}"
            )
        self.validate_run()

    def shaping(self) -> FitnessShaping:
        """The shaping ``fitness_shaping`` names on the ``top_directions`` best pairs."""
        return FitnessShaping(SHAPINGS[self.fitness_shaping], self.top_directions)


def openai_es(config: OptimESConfig, start: StrategyStart) -> MirroredES:
    """OpenAI-ES/ARS from the parts: mirrored table slices, the configured shaping and update
    rule on ``-grad + l2 theta``, one scalar sigma that only the schedule moves."""
    assert start.noise is not None
    return MirroredES(
        start.params,
        start.noise,
        config.sigma,
        sampler=MirroredSampler(config.population),
        shaping=config.shaping(),
        update=config.update_rule(start.params.size),
        l2_coeff=config.l2_coeff,
        schedule=config.schedule(),
    )


def describe_update(params: dict[str, Any]) -> str:
    """OpenAI-ES's centred ranks or ARS V2-t's top b pairs, and the rule the config names."""
    config = known_params(OptimESConfig, params)
    return describe_mirrored_update(asdict(config), config.shaping(), config.update_rule(1), None)


register_es(
    "optimes",
    Config=OptimESConfig,
    strategy=openai_es,
    codec="table",
    summary="OpenAI-ES (Salimans et al. 2017): noise table, mirrored pairs, ranks, Adam",
    describe_update=describe_update,
    supports_replicated=True,
)
