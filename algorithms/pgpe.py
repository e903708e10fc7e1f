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
seeds, observation normalisation, checkpoints, replicas) is optimes' adapter
(:class:`algorithms.optimes.OptimES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.es_core import ClipUp, MirroredES, PGPESigma, UpdateRule
from algorithms.optimes import OptimES, OptimESConfig
from algorithms.registry import register


def check_no_sigma_schedule(config: OptimESConfig, name: str) -> None:
    """A per-coordinate sigma adapts itself: the scalar schedule knobs must stay off."""
    if config.sigma_decay != 1.0 or config.sigma_min != 0.0:
        raise ValueError(
            f"{name} adapts sigma itself: sigma_decay must be 1 and sigma_min 0, got "
            f"{config.sigma_decay} and {config.sigma_min}"
        )


@dataclass(frozen=True)
class PGPEConfig(OptimESConfig):
    """Hyperparameters of ``pgpe``; class defaults are EvoTorch's ``rl_clipup.py`` defaults."""

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("clipup", "adam", "sgd")
    SHAPINGS: ClassVar[tuple[str, ...]] = ("centered_ranks",)

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

    def update_rule(self, dim: int) -> UpdateRule:
        """ClipUp (``max_speed`` 0: twice ``learning_rate``), else Adam or SGD."""
        if self.optimizer == "clipup":
            return ClipUp(dim, self.learning_rate, self.max_speed, self.momentum)
        return super().update_rule(dim)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        check_no_sigma_schedule(self, "pgpe")
        for name in ("learning_rate", "sigma_learning_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_speed < 0 or self.radius_init < 0:
            raise ValueError(
                f"max_speed and radius_init must be >= 0, got {self.max_speed}, {self.radius_init}"
            )
        if not 0 <= self.sigma_max_change < 1:
            raise ValueError(f"sigma_max_change must be in [0, 1), got {self.sigma_max_change}")


def initial_sigma(config: PGPEConfig, dim: int) -> np.ndarray:
    """One sigma per coordinate: ``radius_init / sqrt(d)`` (EvoTorch), else ``sigma``."""
    value = config.radius_init / math.sqrt(dim) if config.radius_init > 0 else config.sigma
    return np.full(dim, value, dtype=np.float32)


class PGPEStrategy(MirroredES):
    """PGPE's core: one sigma per coordinate and the centre gradient in parameter space."""

    sigma_per_coordinate = True

    def centre_gradient(self, g: np.ndarray, selected: int) -> np.ndarray:
        """PGPE-mu: ``sum_i (r_i^+ - r_i^-)/2 eps_i / n`` with ``eps_i = sigma z_i``, i.e.
        ``sigma * g`` (Sehnke et al. 2010, section 2.3)."""
        return (self.sigma * g).astype(np.float32)


@register("pgpe")
class PGPE(OptimES):
    """PGPE (Sehnke et al. 2010) with ClipUp (Toklu et al. 2020): per-coordinate sigma."""

    summary = "PGPE + ClipUp (Sehnke 2010; Toklu 2020): noise table, per-coordinate sigma"
    Config = PGPEConfig
    config: PGPEConfig

    @classmethod
    def describe_sigma_rule(cls, params: dict[str, Any]) -> str:
        """PGPE's per-coordinate sigma ascent, clipped (Sehnke et al. 2010; EvoTorch)."""
        rule = PGPESigma(float(params["sigma_learning_rate"]), float(params["sigma_max_change"]))
        return rule.describe()

    def _build_strategy(self, centre: np.ndarray) -> MirroredES:
        config = self.config
        return self._core(
            PGPEStrategy,
            centre,
            initial_sigma(config, centre.size),
            config.population,
            PGPESigma(config.sigma_learning_rate, config.sigma_max_change),
        )
