"""Exponential natural evolution strategies ("xnes"), full covariance.

Glasmachers, Schaul, Sun, Wierstra, Schmidhuber (2010), *Exponential natural evolution
strategies*, GECCO, Algorithm 1. Search distribution ``N(mu, sigma^2 B B^T)``, ``det B = 1``;
with ``z_k ~ N(0, I)``, ``x_k = mu + sigma B z_k`` and ``u_k`` the shaped fitness (NES
utilities, NES-13, by default)::

    G_delta = sum_k u_k z_k,   G_M = sum_k u_k (z_k z_k^T - I)        (xNES-delta, xNES-M)
    G_sigma = tr(G_M) / d,     G_B = G_M - G_sigma I                  (xNES-split)
    mu <- mu + eta_mu sigma B G_delta                                (xNES-mu)
    sigma <- sigma exp(eta_sigma / 2 G_sigma),  B <- B exp(eta_B / 2 G_B)   (xNES-sigma, -B)

xNES-mu is the injected update rule's step on the loss gradient ``-sigma B G_delta`` (plain
SGD at ``eta_mu`` is the paper's; Adam or ClipUp can be chosen). Defaults: ``lambda = 4 +
floor(3 ln d)``, ``eta_mu = 1``, ``eta_sigma = eta_B`` below. A candidate is a vector
(workers cannot rebuild ``B z`` from a table slice); ``z`` comes from the strategy's own
RandomState, seeded from the run seed and checkpointed. SNES is this rule with ``B``
diagonal (:mod:`algorithms.snes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.es_common import default_population
from algorithms.es_core import NO_SCHEDULE, SHAPINGS, Schedule, Shaping, Strategy, UpdateRule
from algorithms.es_engine import (
    ClipUpKnobs,
    StrategyStart,
    VectorRunKnobs,
    known_params,
    register_es,
)

TABLE_ETA = "3 (3 + ln d) / (5 d sqrt d)"


@dataclass(frozen=True)
class XNESConfig(VectorRunKnobs, ClipUpKnobs):
    """Hyperparameters of ``xnes``; 0 takes the paper's default for the parameter count."""

    OPTIMIZERS: ClassVar[tuple[str, ...]] = ("sgd", "adam", "clipup")

    population: int = doc("candidates per generation (0: 4 + floor(3 ln d))", 0)
    sigma: float = doc("initial step size sigma (B starts as the identity)", 0.1)
    learning_rate: float = doc("eta_mu, the step size on mu", 1.0)
    optimizer: str = doc("the rule on mu: sgd (the paper's plain step), adam or clipup", "sgd")
    momentum: float = doc("SGD (or ClipUp) momentum", 0.0)
    l2_coeff: float = doc("L2 weight decay added to the loss gradient", 0.0)
    sigma_learning_rate: float = doc(f"eta_sigma = eta_B (0: {TABLE_ETA})", 0.0)
    fitness_shaping: str = doc(
        "nes (utilities, the paper's), centered_ranks, reward_std or raw", "nes"
    )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        self.validate_run()
        self.validate_rule()
        bad = ["sigma"] * (not 0 < self.sigma < math.inf)
        bad += ["population"] * (self.population == 1 or self.population < 0)
        bad += ["sigma_learning_rate"] * (not 0 <= self.sigma_learning_rate < math.inf)
        bad += ["fitness_shaping"] * (self.fitness_shaping not in SHAPINGS)
        if bad:
            raise ValueError(f"{bad[0]} is out of range, got {getattr(self, bad[0])!r}")


class XNESStrategy(Strategy):
    """xNES's ask/tell over ``mu``, ``sigma`` and ``B`` (float64)."""

    def __init__(
        self, x0: np.ndarray, population: int, sigma: float, eta: float, shaping: Shaping,
        update: UpdateRule, seed: int, l2_coeff: float = 0.0, schedule: Schedule = NO_SCHEDULE,
    ) -> None:  # fmt: skip
        self.population, self.eta, self.shaping, self.update = population, eta, shaping, update
        self.l2_coeff, self.schedule = l2_coeff, schedule
        self.mu, self.sigma, self.B = np.array(x0, dtype=np.float64), sigma, np.eye(x0.size)
        self.random = np.random.RandomState(seed)
        self.z = np.zeros((0, x0.size))  # the generation's draws, from ask to tell

    def ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        self.z = self.random.standard_normal((self.population, self.mu.size))
        return list(self.mu + self.sigma * self.z @ self.B.T)

    def tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        u, z, eye = self.shaping(fitness).astype(np.float64), self.z, np.eye(self.mu.size)
        g_m = (z * u[:, None]).T @ z - u.sum() * eye  # (xNES-M)
        g_sigma = float(np.trace(g_m)) / self.mu.size  # (xNES-split)
        loss_gradient = -(self.sigma * self.B @ (u @ z)) + self.l2_coeff * self.mu
        self.mu = self.mu + self.update.step(loss_gradient)  # (xNES-mu)
        self.sigma = self.schedule.sigma(self.sigma * math.exp(self.eta / 2 * g_sigma))
        w, v = np.linalg.eigh(self.eta / 2 * (g_m - g_sigma * eye))  # (xNES-B)
        self.B = self.B @ (v * np.exp(w)) @ v.T
        self.update.stepsize = self.schedule.rate(self.update.stepsize)

    def centre(self) -> np.ndarray:
        return self.mu

    def metrics(self) -> dict[str, float]:
        return {"sigma": self.sigma, "lr": self.update.stepsize}

    def state_dict(self) -> dict[str, Any]:
        return {
            "mu": self.mu.copy(),
            "sigma": self.sigma,
            "B": self.B.copy(),
            "optimizer": self.update.state_dict(),
            "numpy_global_rng": self.random.get_state(),  # the key of its older layout
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mu, self.sigma, self.B = np.array(state["mu"]), state["sigma"], np.array(state["B"])
        if "optimizer" in state:
            self.update.load_state_dict(state["optimizer"])
        self.random.set_state(state["numpy_global_rng"])


def xnes(config: XNESConfig, start: StrategyStart) -> XNESStrategy:
    """xNES at the policy's init, with the configured shaping and rule on mu."""
    dim = start.params.size
    return XNESStrategy(
        start.params,
        config.population or default_population(dim),
        config.sigma,
        config.sigma_learning_rate or 3 * (3 + math.log(dim)) / (5 * dim**1.5),
        SHAPINGS[config.fitness_shaping],
        config.update_rule(dim),
        start.library_seed,
        config.l2_coeff,
        config.schedule(),
    )


def describe_update(params: dict[str, Any]) -> str:
    """The shaping; natural-gradient steps on mu (by the rule), sigma and B."""
    config = known_params(XNESConfig, params)
    eta = config.sigma_learning_rate or TABLE_ETA
    rule = config.update_rule(1).describe()
    words = SHAPINGS[config.fitness_shaping].words
    return f"{words}, {rule} on mu; sigma: natural gradient with B (exp), eta_sigma = eta_B {eta}"


register_es(
    "xnes",
    Config=XNESConfig,
    strategy=xnes,
    codec="vector",
    summary="xNES (Glasmachers et al. 2010): full covariance, NES utilities; vectors on wire",
    describe_update=describe_update,
)
