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

from algorithms.base import config_defaults, doc
from algorithms.es_core import (
    Adam,
    Candidate,
    FitnessShaping,
    MirroredES,
    MirroredSampler,
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

FITNESS_SHAPINGS = ("centered_ranks", "reward_std")
#: fitness shapings in the report's words
SHAPING_WORDS = {
    "centered_ranks": "centred ranks",
    "reward_std": "returns / their std (ARS)",
    "nes": "NES utilities",
}


def describe_mirrored_update(
    params: dict[str, Any], shaping: str, rule: UpdateRule, sigma: str | None
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
    shaped = SHAPING_WORDS.get(shaping, shaping)
    return f"{kept}, {shaped}, {rule.describe()}{l2}" + (f"; {sigma}" if sigma else "")


def known_params(config_class: type, params: dict[str, Any]) -> Any:
    """The config a record's params describe, its defaults filling what they leave out."""
    defaults = config_defaults(config_class)
    return config_class(**{**defaults, **{k: v for k, v in params.items() if k in defaults}})


class OpenAIES(MirroredES):
    """Ask/tell core of OpenAI-ES/ARS built from :mod:`algorithms.es_core`'s parts.

    Mirrored table indices, centred ranks (or ARS's reward-std on the top directions),
    an injected update rule (Adam or SGD) on ``-grad + l2 theta``, one scalar sigma that only
    the run's schedule moves.
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
        return describe_mirrored_update(
            asdict(config),
            config.fitness_shaping,
            config.update_rule(1),
            None,
        )

    def build_strategy(self, centre: np.ndarray, noise: NoiseTable) -> MirroredES:
        config = self.config
        return OpenAIES(
            centre,
            noise,
            config.population,
            config.sigma,
            config.update_rule(centre.size),
            l2_coeff=config.l2_coeff,
            top_directions=config.top_directions,
            fitness_shaping=config.fitness_shaping,
        )

    def _apply_schedules(self) -> None:
        """The run's sigma schedule (one scalar sigma), then the learning rate's."""
        es, config = self.strategy, self.config
        es.sigma = max(float(es.sigma) * config.sigma_decay, config.sigma_min)
        super()._apply_schedules()
