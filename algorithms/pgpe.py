"""PGPE with the ClipUp optimiser ("pgpe"), EvoTorch's flagship, on the shared noise table.

Sehnke, Osendorfer, Rückstieß, Graves, Peters, Schmidhuber (2010), *Parameter-exploring
policy gradients*, Neural Networks 23(4); Toklu, Liskowski, Srivastava (2020), *ClipUp: a
simple and powerful optimizer for distribution-based policy evolution*, PPSN XVI,
arXiv:2008.02387. The tags below are those of :mod:`algorithms.es_core`.

The search distribution is a Gaussian with one standard deviation per parameter. With
symmetric (mirrored) sampling, ``eps_i = sigma * z_i`` and the shaped returns
``r_i^+-`` (centred ranks, EvoTorch's default), Sehnke et al. section 2.3 gives::

    grad_mu    = 1/n sum_i (r_i^+ - r_i^-)/2 eps_i                        (PGPE-mu, E1-E2)
    grad_sigma = 1/n sum_i ((r_i^+ + r_i^-)/2 - b) (eps_i^2 - sigma^2) / sigma   (PGPE-sigma)

with ``n`` the number of directions and ``b = 0`` (ranks are centred). The centre follows
``grad_mu`` through ClipUp (ClipUp-1: ``v <- m v + alpha grad/||grad||``; ClipUp-2: ``v``
clipped to ``max_speed``; ``mu <- mu + v``), sigma by plain ascent
``sigma <- sigma + eta_sigma grad_sigma`` with each coordinate's relative change clipped
to ``sigma_max_change`` (EvoTorch's ``stdev_max_change``, Toklu et al. section 4). Adam
and SGD are available as ``optimizer`` for comparison. The initial sigma is
``radius_init / sqrt(d)`` per coordinate when ``radius_init`` is set (EvoTorch's
``radius_init`` is the norm of the sigma vector), else ``sigma``.

A candidate on the wire stays a noise index and a sign: the per-coordinate sigma is part
of the generation's broadcast (once per generation), and with ``sync=seeds`` every
replica adapts it itself from the fitness it is told, bit for bit. Everything else (tasks,
seeds, observation normalisation, checkpoints, replicas) is the noise-table family's
generation loop (:class:`algorithms.es_engine.ESAlgorithm` with the table codec).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.es_core import CENTRED_RANKS, FitnessShaping, MirroredES, MirroredSampler, PGPESigma
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


@dataclass(frozen=True)
class PGPEConfig(RunKnobs, NoiseTableKnobs, ClipUpKnobs):
    """Hyperparameters of ``pgpe``; class defaults are EvoTorch's ``rl_clipup.py`` defaults."""

    #: knobs an older pgpe had, with the one value it accepted (its records still resume)
    RETIRED: ClassVar[dict[str, Any]] = {"fitness_shaping": "centered_ranks"}

    population: int = doc("candidates per generation (even: mirrored pairs)", 100)
    sigma: float = doc("initial standard deviation of every coordinate (radius_init unset)", 0.1)
    radius_init: float = doc(
        "initial norm of the sigma vector (EvoTorch's radius_init; 0: use sigma)", 2.25
    )
    learning_rate: float = doc("centre step size (ClipUp's alpha; EvoTorch center_lr)", 0.1125)
    optimizer: str = doc("clipup, adam or sgd", "clipup")
    max_speed: float = doc("ClipUp's maximum speed (0: twice learning_rate)", 0.15)
    momentum: float = doc("ClipUp (or SGD) momentum", 0.9)
    sigma_learning_rate: float = doc("sigma step size (EvoTorch stdev_learning_rate)", 0.1)
    sigma_max_change: float = doc(
        "largest relative change of a sigma per generation (EvoTorch stdev_max_change)", 0.2
    )
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.0)
    top_directions: int = doc(
        "only the b mirrored pairs with the best max(F+, F-) enter the update (0: all)", 0
    )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        validate_population(self.population, self.top_directions)
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")
        self.validate_rule()
        if not self.sigma_learning_rate > 0:
            raise ValueError(
                f"sigma_learning_rate must be positive, got {self.sigma_learning_rate}"
            )
        if self.radius_init < 0:
            raise ValueError(f"radius_init must be >= 0, got {self.radius_init}")
        if not 0 <= self.sigma_max_change < 1:
            raise ValueError(f"sigma_max_change must be in [0, 1), got {self.sigma_max_change}")
        self.validate_run()

    def shaping(self) -> FitnessShaping:
        """Centred ranks on the ``top_directions`` best pairs."""
        return FitnessShaping(CENTRED_RANKS, self.top_directions)


def initial_sigma(config: PGPEConfig, dim: int) -> np.ndarray:
    """One sigma per coordinate: ``radius_init / sqrt(d)`` (EvoTorch), else ``sigma``."""
    value = config.radius_init / math.sqrt(dim) if config.radius_init > 0 else config.sigma
    return np.full(dim, value, dtype=np.float32)


def pgpe_gradient(g: np.ndarray, sigma: Any, selected: int) -> np.ndarray:
    """PGPE-mu: ``sum_i (r_i^+ - r_i^-)/2 eps_i / n`` with ``eps_i = sigma z_i``, i.e.
    ``sigma * g`` (Sehnke et al. 2010, section 2.3)."""
    return (sigma * g).astype(np.float32)


def pgpe(config: PGPEConfig, start: StrategyStart) -> MirroredES:
    """PGPE's parts: one sigma per coordinate, the centre gradient in parameter space."""
    assert start.noise is not None
    dim = start.params.size
    return MirroredES(
        start.params,
        start.noise,
        initial_sigma(config, dim),
        sampler=MirroredSampler(config.population),
        shaping=config.shaping(),
        update=config.update_rule(dim),
        gradient=pgpe_gradient,
        sigma_rule=PGPESigma(config.sigma_learning_rate, config.sigma_max_change),
        l2_coeff=config.l2_coeff,
        schedule=config.schedule(),
    )


def describe_update(params: dict[str, Any]) -> str:
    """Centred ranks, the rule the config names (ClipUp by default), PGPE's sigma step."""
    config = known_params(PGPEConfig, params)
    sigma_rule = PGPESigma(config.sigma_learning_rate, config.sigma_max_change)
    return describe_mirrored_update(
        asdict(config), config.shaping(), config.update_rule(1), sigma_rule.describe()
    )


register_es(
    "pgpe",
    Config=PGPEConfig,
    strategy=pgpe,
    codec="table",
    summary="PGPE + ClipUp (Sehnke 2010; Toklu 2020): noise table, per-coordinate sigma",
    describe_update=describe_update,
    supports_replicated=True,
)
