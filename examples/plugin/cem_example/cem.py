"""The cross-entropy method over flat policy parameters, as an es-harness algorithm.

Each generation samples ``population`` parameter vectors from a diagonal Gaussian,
keeps the best ``elite_fraction`` of them and refits the mean and the standard
deviation to those (Rubinstein 1999; Szita and Lorincz 2006 for policies).

The strategy is ask/tell over explicit state (:class:`CEMStrategy`); the harness's
:class:`~algorithms.vector_es.VectorES` runs it in the ES generation loop and does the rest:
candidates are evaluated by the run's workers (any backend), env seeds and the
initial parameters derive from the run seed, and every draw below comes from numpy's
global RNG, which VectorES swaps for a private state seeded from the run seed
and saves in checkpoints. So runs repeat bit for bit, at any worker count, and
after ``harness resume``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.vector_es import VectorES, VectorStrategy


@dataclass
class CEMConfig:
    """Hyperparameters of the cross-entropy method (``--set population=40``)."""

    population: int = doc("candidates per generation", 20)
    elite_fraction: float = doc("share of the best candidates the next Gaussian is fitted to", 0.2)
    sigma: float = doc("initial standard deviation of every parameter", 0.5)
    sigma_floor: float = doc("smallest standard deviation kept (keeps exploring)", 0.01)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        if self.population < 2:
            raise ValueError(f"population must be at least 2, got {self.population}")
        if not 0.0 < self.elite_fraction <= 1.0:
            raise ValueError(f"elite_fraction must be in (0, 1], got {self.elite_fraction}")
        if self.sigma <= 0:
            raise ValueError(f"sigma must be positive, got {self.sigma}")
        if self.sigma_floor < 0:
            raise ValueError(f"sigma_floor must be >= 0, got {self.sigma_floor}")

    def elites(self) -> int:
        """How many candidates the refit keeps."""
        return max(1, math.ceil(self.elite_fraction * self.population))


class CEMStrategy(VectorStrategy):
    """A diagonal Gaussian refitted to the elite of every generation."""

    def __init__(self, config: CEMConfig, x0: np.ndarray) -> None:
        self.config = config
        self.mean = x0.copy()
        self.std = np.full_like(x0, config.sigma)
        #: the generation's candidates, from ask to tell
        self.asked = np.empty((0, x0.size))

    def ask(self) -> tuple[list[Any], list[np.ndarray]]:
        # numpy's global RNG here is the private, checkpointed state (VectorES.rng)
        noise = np.random.standard_normal((self.config.population, self.mean.size))
        self.asked = self.mean + self.std * noise
        return list(range(len(self.asked))), list(self.asked)

    def tell(self, handles: list[Any], losses: np.ndarray) -> None:
        best = np.argsort(losses, kind="stable")[: self.config.elites()]
        elite = self.asked[[handles[i] for i in best]]
        self.mean = elite.mean(axis=0)
        self.std = np.maximum(elite.std(axis=0), self.config.sigma_floor)

    def centre(self) -> np.ndarray:
        return self.mean

    def metrics(self) -> dict[str, float]:
        return {"sigma": float(self.std.mean())}

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "std": self.std.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float64).copy()
        self.std = np.asarray(state["std"], dtype=np.float64).copy()


class CrossEntropyMethod(VectorES):
    """Diagonal-Gaussian cross-entropy method; a vector per candidate on the wire."""

    summary = "cross-entropy method (plugin example): refit a diagonal Gaussian to the elite"
    Config = CEMConfig
    config: CEMConfig

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str:
        """What the report's settings table says about the update."""
        kept = CEMConfig(**params).elites()
        return f"mean and std of the best {kept} of {params['population']}"

    def build_strategy(self, x0: np.ndarray) -> CEMStrategy:
        return CEMStrategy(self.config, x0)
