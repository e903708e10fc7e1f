"""Limited-memory matrix adaptation evolution strategy ("lm-ma-es").

Loshchilov, Glasmachers, Beyer (2019), *Large scale black-box optimization by limited-memory
matrix adaptation*, IEEE Transactions on Evolutionary Computation 23(2), 353-358
(arXiv:1705.06693), Algorithm 1; tags ``(L1)``... are its line numbers. MA-ES's ``d x d``
transformation matrix is replaced by ``m`` direction vectors ``m_1..m_m`` (evolution paths
with learning rates spread over a factor of 4 each), so memory and time per sample are
``O(m d)``: at the AntBulletEnv policy's ``d = 6,536``, where full CMA needs a ``d x d``
matrix and its eigendecomposition, this keeps ``m = 30`` vectors. Per generation ``t``::

    z_i ~ N(0, I),  d_i <- z_i                                               (L5, L6)
    d_i <- (1 - c_d,j) d_i + c_d,j m_j (m_j^T d_i),  j = 1..min(t, m)         (L7, L8)
    f_i <- f(y + sigma d_i)                                                     (L9)
    y <- y + sigma sum_{i<=mu} w_i d_{i:lambda}                                 (L10)
    p_sigma <- (1 - c_sigma) p_sigma + sqrt(mu_w c_sigma (2 - c_sigma)) sum w_i z_{i:lambda}  (L11)
    m_i <- (1 - c_c,i) m_i + sqrt(mu_w c_c,i (2 - c_c,i)) sum w_i z_{i:lambda}, i = 1..m  (L12, L13)
    sigma <- sigma exp(c_sigma / 2 (||p_sigma||^2 / d - 1))                     (L14)

with ``i:lambda`` the i-th best candidate. Defaults (L1): ``lambda = 4 + floor(3 ln d)``,
``mu = floor(lambda / 2)``, ``w_i = (ln(mu + 1/2) - ln i) / sum_j (ln(mu + 1/2) - ln j)``,
``mu_w = 1 / sum w_i^2``, ``c_sigma = 2 lambda / d``, ``c_d,i = 1 / (1.5^(i-1) d)``,
``c_c,i = lambda / (4^(i-1) d)``, and ``m = 4 + floor(3 ln d)`` (the paper's setting). These rates
are meant for ``lambda`` well below ``d``; where ``c_sigma`` or ``c_c,i`` would exceed 1
(``d < 2 lambda``, small policies) they are capped at 1, so a path is then the last step
alone instead of an oscillating sum.

A candidate is a vector (workers cannot rebuild ``d_i`` from a table slice); ``z`` is drawn
from the strategy's own RandomState, seeded from the run seed and checkpointed. All arithmetic is
float64; the state (``y``, ``sigma``, ``p_sigma``, the ``m x d`` matrix of vectors, ``t``)
is what a checkpoint holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_common import default_population
from algorithms.es_core import NO_SCHEDULE, Schedule, Strategy
from algorithms.es_engine import VectorRunKnobs, register_es

DEFAULT_WORDS = "4 + floor(3 ln d)"


@dataclass(frozen=True)
class LMMAESConfig(VectorRunKnobs):
    """Hyperparameters of ``lm-ma-es``; 0 takes the paper's default for the parameter count."""

    population: int = doc(f"lambda, candidates per generation (0: {DEFAULT_WORDS})", 0)
    memory: int = doc(f"m, direction vectors kept (0: {DEFAULT_WORDS})", 0)
    sigma: float = doc("initial step size sigma", 0.1)

    #: LM-MA-ES has no learning rate to schedule
    SCHEDULES = ("sigma",)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        self.validate_run()
        if self.population == 1 or self.population < 0:
            raise ValueError(f"population must be 0 (default) or >= 2, got {self.population}")
        if self.memory < 0:
            raise ValueError(f"memory must be >= 0 (0: default), got {self.memory}")
        if not 0 < self.sigma < math.inf:
            raise ValueError(f"sigma must be a positive finite number, got {self.sigma}")


class LMMAESStrategy(Strategy):
    """LM-MA-ES's ask/tell over ``y``, ``sigma``, ``p_sigma`` and the direction vectors."""

    def __init__(
        self, config: LMMAESConfig, x0: np.ndarray, seed: int, schedule: Schedule = NO_SCHEDULE
    ) -> None:
        dim = x0.size
        self.random = np.random.RandomState(seed)
        self.schedule = schedule
        # (L1) the strategy's constants
        self.population = config.population or default_population(dim)
        self.memory = config.memory or default_population(dim)
        self.mu = self.population // 2
        ranks = np.arange(1, self.mu + 1, dtype=np.float64)
        raw = math.log(self.mu + 0.5) - np.log(ranks)
        self.weights = raw / raw.sum()
        self.mu_w = 1.0 / float(np.sum(self.weights**2))
        self.c_sigma = min(1.0, 2 * self.population / dim)
        order = np.arange(self.memory, dtype=np.float64)
        self.c_d = 1.0 / (1.5**order * dim)
        self.c_c = np.minimum(1.0, self.population / (4.0**order * dim))
        # (L2) the state
        self.t = 0
        self.y = np.array(x0, dtype=np.float64)
        self.sigma = float(config.sigma)
        self.p_sigma = np.zeros(dim)
        self.M = np.zeros((self.memory, dim))
        # the generation's draws and directions, from ask to tell
        self.z = np.zeros((0, dim))
        self.d = np.zeros((0, dim))

    def ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        self.z = self.random.standard_normal((self.population, self.y.size))  # (L5)
        d = self.z.copy()  # (L6)
        for j in range(min(self.t, self.memory)):  # (L7, L8), for all candidates at once, in place
            m_j = self.M[j]
            projection = (d @ m_j) * self.c_d[j]
            d *= 1.0 - self.c_d[j]
            d += projection[:, None] * m_j
        self.d = d
        return list(self.y + self.sigma * d)  # (L9)

    def tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        order = np.argsort(-np.asarray(fitness, dtype=np.float64), kind="stable")[: self.mu]
        self.y = self.y + self.sigma * (self.weights @ self.d[order])  # (L10)
        weighted_z = self.weights @ self.z[order]
        self.p_sigma = (1.0 - self.c_sigma) * self.p_sigma + math.sqrt(
            self.mu_w * self.c_sigma * (2.0 - self.c_sigma)
        ) * weighted_z  # (L11)
        rates = np.sqrt(self.mu_w * self.c_c * (2.0 - self.c_c))
        self.M = (1.0 - self.c_c)[:, None] * self.M + rates[:, None] * weighted_z  # (L12, L13)
        norm2 = float(self.p_sigma @ self.p_sigma)
        self.sigma *= math.exp(self.c_sigma / 2.0 * (norm2 / self.y.size - 1.0))  # (L14)
        self.sigma = self.schedule.sigma(self.sigma)
        self.t += 1  # (L15)

    def centre(self) -> np.ndarray:
        return self.y

    def metrics(self) -> dict[str, float]:
        return {"sigma": self.sigma, "path_norm": float(np.linalg.norm(self.p_sigma))}

    def state_dict(self) -> dict[str, Any]:
        return {
            "y": self.y.copy(),
            "sigma": self.sigma,
            "p_sigma": self.p_sigma.copy(),
            "M": self.M.copy(),
            "t": self.t,
            "numpy_global_rng": self.random.get_state(),  # the key of its older layout
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.y, self.p_sigma = np.array(state["y"]), np.array(state["p_sigma"])
        self.M, self.sigma, self.t = np.array(state["M"]), float(state["sigma"]), int(state["t"])
        self.random.set_state(state["numpy_global_rng"])


def describe_update(params: dict[str, Any]) -> str:
    """Weighted recombination of the best half; m direction vectors; CSA on sigma."""
    memory = params.get("memory") or DEFAULT_WORDS
    return (
        f"log-rank weights on the best half; {memory} direction vectors (c_d,i = "
        "1/(1.5^(i-1) d), c_c,i = lambda/(4^(i-1) d)); sigma by CSA, c_sigma = 2 lambda/d"
    )


register_es(
    "lm-ma-es",
    Config=LMMAESConfig,
    strategy=lambda config, start: LMMAESStrategy(
        config, start.params.astype(np.float64), start.library_seed, config.schedule()
    ),
    codec="vector",
    summary="LM-MA-ES (Loshchilov et al. 2019): O(m d) matrix adaptation; vectors on wire",
    describe_update=describe_update,
    describe_population=lambda params: (
        f"paper default ({DEFAULT_WORDS})" if params.get("population") == 0 else None
    ),
)
