"""Separable natural evolution strategies ("snes") on the shared noise table.

Schaul, Glasmachers, Schmidhuber (2011), *High dimensions and heavy tails for natural
evolution strategies*, GECCO; SNES is their Algorithm 2, its defaults their Table 1
(as in evosax's and EvoTorch's SNES). Tags are those of :mod:`algorithms.es_core`.

The search distribution is ``N(mu, diag(sigma^2))``. Per generation, with ``z_k`` the
candidates' standard-normal perturbations and ``u_k`` their NES utilities by rank
(NES-13: ``max(0, log(lambda/2 + 1) - log k)`` normalised to sum to one, minus
``1/lambda``)::

    grad_mu    = sum_k u_k z_k                                  (SNES-mu)
    grad_sigma = sum_k u_k (z_k^2 - 1)                          (SNES-sigma)
    mu    <- mu + eta_mu * sigma * grad_mu                      (SNES-update-mu, E2)
    sigma <- sigma * exp(eta_sigma / 2 * grad_sigma)            (SNES-update-sigma, E3)

Defaults (Table 1): ``lambda = 4 + floor(3 ln d)``, ``eta_mu = 1``,
``eta_sigma = (3 + ln d) / (5 sqrt d)``, the initial sigma 1. Here the candidates are
mirrored pairs of noise-table slices (``z`` and ``-z`` share env seeds), so ``lambda`` is
rounded up to an even number; SNES's own sampling is not mirrored. ``grad_mu`` over
mirrored pairs is ``sum_pairs (u^+ - u^-) z``, ``grad_sigma`` ``sum_pairs (u^+ + u^-)
(z^2 - 1)``; the step on mu is SGD without momentum at ``learning_rate = eta_mu`` (Adam
or ClipUp can be chosen instead).

Everything else (tasks, seeds, observation normalisation, checkpoints, replicas) is the
ES loop with the table codec (:mod:`algorithms.es_engine`); the per-coordinate sigma travels
in the broadcast once per generation, or is adapted by every replica with ``sync=seeds``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.es_common import default_population
from algorithms.es_core import NES_UTILITIES, FitnessShaping, MirroredES, MirroredSampler, SNESSigma
from algorithms.es_engine import (
    ClipUpKnobs,
    NoiseTableKnobs,
    RunKnobs,
    StrategyStart,
    describe_mirrored_update,
    known_params,
    register_es,
    validate_population,
)

#: Table 1's ``eta_sigma`` in words, for a config that leaves it to the parameter count
TABLE_1_ETA_SIGMA = "(3 + ln d) / (5 sqrt d)"


def default_sigma_learning_rate(dim: int) -> float:
    """Table 1's ``eta_sigma = (3 + ln d) / (5 sqrt d)``."""
    return (3 + math.log(dim)) / (5 * math.sqrt(dim))


@dataclass(frozen=True)
class SNESConfig(RunKnobs, NoiseTableKnobs, ClipUpKnobs):
    """Hyperparameters of ``snes``; class defaults are the paper's (Table 1)."""

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("sgd", "adam", "clipup")
    #: knobs an older snes had, with the one value it accepted (its records still resume)
    RETIRED: ClassVar[dict[str, Any]] = {"fitness_shaping": "nes"}

    population: int = doc("candidates per generation, even (0: 4 + floor(3 ln d), rounded up)", 0)
    sigma: float = doc("initial standard deviation of every coordinate", 1.0)
    learning_rate: float = doc("eta_mu, the step size on mu (in units of sigma)", 1.0)
    optimizer: str = doc("sgd (the paper's plain step), adam or clipup", "sgd")
    momentum: float = doc("SGD (or ClipUp) momentum", 0.0)
    sigma_learning_rate: float = doc("eta_sigma (0: the paper's (3 + ln d) / (5 sqrt d))", 0.0)
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.0)
    top_directions: int = doc(
        "only the b mirrored pairs with the best max(F+, F-) enter the update (0: all)", 0
    )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        # population 0 is resolved from the parameter count when the policy is known (a
        # top_directions above its pairs then keeps them all)
        validate_population(self.population or 2 * max(self.top_directions, 1), self.top_directions)
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        self.validate_rule()
        if self.sigma_learning_rate < 0:
            raise ValueError(f"sigma_learning_rate must be >= 0, got {self.sigma_learning_rate}")
        self.validate_run()

    def shaping(self) -> FitnessShaping:
        """NES utilities on the ``top_directions`` best pairs."""
        return FitnessShaping(NES_UTILITIES, self.top_directions)


def snes_gradient(g: np.ndarray, sigma: Any, selected: int) -> np.ndarray:
    """SNES-mu times sigma: ``sigma * sum_k u_k z_k`` over ``selected`` mirrored candidates,
    i.e. ``selected * sigma * g`` (Schaul et al. 2011, Algorithm 2)."""
    scaled = (sigma * g).astype(np.float32)
    return (scaled * np.float32(selected)).astype(np.float32)


def snes(config: SNESConfig, start: StrategyStart) -> MirroredES:
    """SNES's parts: one sigma per coordinate, the centre moved by ``eta_mu sigma grad_mu``."""
    assert start.noise is not None
    dim = start.params.size
    return MirroredES(
        start.params,
        start.noise,
        np.full(dim, config.sigma, dtype=np.float32),
        sampler=MirroredSampler(config.population or default_population(dim, mirrored=True)),
        shaping=config.shaping(),
        update=config.update_rule(dim),
        gradient=snes_gradient,
        sigma_rule=SNESSigma(config.sigma_learning_rate or default_sigma_learning_rate(dim)),
        l2_coeff=config.l2_coeff,
        schedule=config.schedule(),
    )


def describe_update(params: dict[str, Any]) -> str:
    """NES utilities, the rule the config names (plain SGD by default), SNES's sigma step."""
    config = known_params(SNESConfig, params)
    rate = config.sigma_learning_rate
    sigma = SNESSigma(rate).describe() if rate else SNESSigma.WORDS.format(TABLE_1_ETA_SIGMA)
    return describe_mirrored_update(asdict(config), config.shaping(), config.update_rule(1), sigma)


register_es(
    "snes",
    Config=SNESConfig,
    strategy=snes,
    codec="table",
    summary="SNES (Schaul et al. 2011): noise table, mirrored pairs, per-coordinate sigma",
    describe_update=describe_update,
    describe_population=lambda params: (
        "paper default (4 + 3 ln d, even)" if params.get("population") == 0 else None
    ),
    supports_replicated=True,
)
