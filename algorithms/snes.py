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

Everything else (tasks, seeds, observation normalisation, checkpoints, replicas) is
optimes' adapter (:class:`algorithms.optimes.OptimES`); the per-coordinate sigma travels
in the broadcast once per generation, or is adapted by every replica with ``sync=seeds``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.es_core import ClipUp, MirroredES, SNESSigma, UpdateRule
from algorithms.optimes import OptimES, OptimESConfig
from algorithms.pgpe import check_no_sigma_schedule
from algorithms.registry import register


def default_population(dim: int) -> int:
    """Table 1's ``4 + floor(3 ln d)``, rounded up to an even number (mirrored pairs)."""
    size = 4 + math.floor(3 * math.log(dim))
    return size + size % 2


#: Table 1's ``eta_sigma`` in words, for a config that leaves it to the parameter count
TABLE_1_ETA_SIGMA = "(3 + ln d) / (5 sqrt d)"


def default_sigma_learning_rate(dim: int) -> float:
    """Table 1's ``eta_sigma = (3 + ln d) / (5 sqrt d)``."""
    return (3 + math.log(dim)) / (5 * math.sqrt(dim))


@dataclass(frozen=True)
class SNESConfig(OptimESConfig):
    """Hyperparameters of ``snes``; class defaults are the paper's (Table 1)."""

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("sgd", "adam", "clipup")
    SHAPINGS: ClassVar[tuple[str, ...]] = ("nes",)

    population: int = doc("candidates per generation, even (0: 4 + floor(3 ln d), rounded up)", 0)
    sigma: float = doc("initial standard deviation of every coordinate", 1.0)
    learning_rate: float = doc("eta_mu, the step size on mu (in units of sigma)", 1.0)
    optimizer: str = doc("sgd (the paper's plain step), adam or clipup", "sgd")
    momentum: float = doc("SGD (or ClipUp) momentum", 0.0)
    max_speed: float = doc("ClipUp's maximum speed (0: twice learning_rate)", 0.0)
    sigma_learning_rate: float = doc("eta_sigma (0: the paper's (3 + ln d) / (5 sqrt d))", 0.0)
    fitness_shaping: str = doc("nes: the NES log-rank utilities", "nes")
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.0)

    def update_rule(self, dim: int) -> UpdateRule:
        """ClipUp (``max_speed`` 0: twice ``learning_rate``), else SGD (the paper's) or Adam."""
        if self.optimizer == "clipup":
            return ClipUp(dim, self.learning_rate, self.max_speed, self.momentum)
        return super().update_rule(dim)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        # population 0 is resolved from the parameter count when the policy is known
        OptimESConfig.validate(dataclasses.replace(self, population=self.population or 2))
        check_no_sigma_schedule(self, "snes")
        if self.sigma_learning_rate < 0:
            raise ValueError(f"sigma_learning_rate must be >= 0, got {self.sigma_learning_rate}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")


class SNESStrategy(MirroredES):
    """SNES's core: one sigma per coordinate, the centre moved by ``eta_mu sigma grad_mu``."""

    sigma_per_coordinate = True

    def centre_gradient(self, g: np.ndarray, selected: int) -> np.ndarray:
        """SNES-mu times sigma: ``sigma * sum_k u_k z_k`` over ``selected`` mirrored
        candidates, i.e. ``selected * sigma * g`` (Schaul et al. 2011, Algorithm 2)."""
        scaled = (self.sigma * g).astype(np.float32)
        return (scaled * np.float32(selected)).astype(np.float32)


@register("snes")
class SNES(OptimES):
    """SNES (Schaul et al. 2011): per-coordinate sigma, NES utilities, the paper's defaults."""

    summary = "SNES (Schaul et al. 2011): noise table, mirrored pairs, per-coordinate sigma"
    Config = SNESConfig
    config: SNESConfig

    @classmethod
    def describe_population(cls, params: dict[str, Any]) -> str | None:
        """Table 1's size for 0, which depends on the parameter count."""
        return "paper default (4 + 3 ln d, even)" if params.get("population") == 0 else None

    @classmethod
    def describe_sigma_rule(cls, params: dict[str, Any]) -> str:
        """SNES's multiplicative natural-gradient step on sigma (Schaul et al. 2011)."""
        rate = float(params["sigma_learning_rate"])
        return SNESSigma(rate).describe() if rate else SNESSigma.WORDS.format(TABLE_1_ETA_SIGMA)

    def _build_strategy(self, centre: np.ndarray) -> MirroredES:
        config, dim = self.config, centre.size
        return self._core(
            SNESStrategy,
            centre,
            np.full(dim, config.sigma, dtype=np.float32),
            config.population or default_population(dim),
            SNESSigma(config.sigma_learning_rate or default_sigma_learning_rate(dim)),
        )
