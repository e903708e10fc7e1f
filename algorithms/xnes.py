"""Exponential natural evolution strategies ("xnes"), full covariance.

Glasmachers, Schaul, Sun, Wierstra, Schmidhuber (2010), *Exponential natural evolution
strategies*, GECCO, Algorithm 1. Search distribution ``N(mu, sigma^2 B B^T)``, ``det B = 1``;
with ``z_k ~ N(0, I)``, ``x_k = mu + sigma B z_k`` and ``u_k`` the NES utilities (NES-13)::

    G_delta = sum_k u_k z_k,   G_M = sum_k u_k (z_k z_k^T - I)        (xNES-delta, xNES-M)
    G_sigma = tr(G_M) / d,     G_B = G_M - G_sigma I                  (xNES-split)
    mu <- mu + eta_mu sigma B G_delta                                (xNES-mu)
    sigma <- sigma exp(eta_sigma / 2 G_sigma),  B <- B exp(eta_B / 2 G_B)   (xNES-sigma, -B)

Defaults: ``lambda = 4 + floor(3 ln d)``, ``eta_mu = 1``, ``eta_sigma = eta_B`` below. A
candidate is a vector (workers cannot rebuild ``B z`` from a table slice); ``z`` comes from the
run's private, checkpointed RNG. SNES is this rule with ``B`` diagonal (:mod:`algorithms.snes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_common import default_population
from algorithms.es_core import nes_utilities
from algorithms.registry import register
from algorithms.vector_es import VectorES, VectorObsNormKnobs, VectorStrategy

TABLE_ETA = "3 (3 + ln d) / (5 d sqrt d)"


@dataclass(frozen=True)
class XNESConfig(VectorObsNormKnobs):
    """Hyperparameters of ``xnes``; 0 takes the paper's default for the parameter count."""

    population: int = doc("candidates per generation (0: 4 + floor(3 ln d))", 0)
    sigma: float = doc("initial step size sigma (B starts as the identity)", 0.1)
    learning_rate: float = doc("eta_mu, the step size on mu", 1.0)
    sigma_learning_rate: float = doc(f"eta_sigma = eta_B (0: {TABLE_ETA})", 0.0)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        self.validate_obs_norm()
        bad = [n for n in ("sigma", "learning_rate") if not 0 < getattr(self, n) < math.inf]
        bad += ["population"] * (self.population == 1 or self.population < 0)
        bad += ["sigma_learning_rate"] * (not 0 <= self.sigma_learning_rate < math.inf)
        if bad:
            raise ValueError(f"{bad[0]} is out of range, got {getattr(self, bad[0])}")


class XNESStrategy(VectorStrategy):
    """xNES's ask/tell over ``mu``, ``sigma`` and ``B`` (float64)."""

    def __init__(self, config: XNESConfig, x0: np.ndarray) -> None:
        dim = x0.size
        self.population = config.population or default_population(dim)
        self.eta_mu = config.learning_rate
        self.eta = config.sigma_learning_rate or 3 * (3 + math.log(dim)) / (5 * dim**1.5)
        self.mu, self.sigma, self.B = np.array(x0, dtype=np.float64), config.sigma, np.eye(dim)
        self.z = np.zeros((0, dim))  # the generation's draws, from ask to tell

    def ask(self) -> tuple[list[Any], list[np.ndarray]]:
        self.z = np.random.standard_normal((self.population, self.mu.size))
        return list(range(self.population)), list(self.mu + self.sigma * self.z @ self.B.T)

    def tell(self, handles: list[Any], losses: np.ndarray) -> None:
        u, z, eye = nes_utilities(-losses).astype(np.float64), self.z[handles], np.eye(self.mu.size)
        g_m = (z * u[:, None]).T @ z - u.sum() * eye
        g_sigma = float(np.trace(g_m)) / self.mu.size
        self.mu = self.mu + self.eta_mu * self.sigma * self.B @ (u @ z)
        self.sigma *= math.exp(self.eta / 2 * g_sigma)
        w, v = np.linalg.eigh(self.eta / 2 * (g_m - g_sigma * eye))
        self.B = self.B @ (v * np.exp(w)) @ v.T

    def centre(self) -> np.ndarray:
        return self.mu

    def metrics(self) -> dict[str, float]:
        return {"sigma": self.sigma}

    def state_dict(self) -> dict[str, Any]:
        return {"mu": self.mu.copy(), "sigma": self.sigma, "B": self.B.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mu, self.sigma, self.B = np.array(state["mu"]), state["sigma"], np.array(state["B"])


@register("xnes")
class XNES(VectorES):
    """xNES (Glasmachers et al. 2010): full covariance by the exponential parametrisation."""

    summary = "xNES (Glasmachers et al. 2010): full covariance, NES utilities; vectors on wire"
    Config = XNESConfig

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """NES utilities; natural-gradient steps on mu, sigma and B."""
        eta = params.get("sigma_learning_rate") or TABLE_ETA
        return f"NES utilities; natural gradient on mu, sigma and B (exp), eta_sigma = eta_B {eta}"

    def build_strategy(self, x0: np.ndarray) -> XNESStrategy:
        return XNESStrategy(self.config, x0)
