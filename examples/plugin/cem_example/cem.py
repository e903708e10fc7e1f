"""The cross-entropy method over flat policy parameters, as an es-harness algorithm.

Each generation samples ``population`` parameter vectors from a diagonal Gaussian,
keeps the best ``elite_fraction`` of them and refits the mean and the standard
deviation to those (Rubinstein 1999; Szita and Lorincz 2006 for policies).

The strategy is ask/tell over explicit state (:class:`CEMStrategy`, an
:class:`~algorithms.es_core.Strategy`); it is registered as data with
:func:`~algorithms.es_engine.register_es` (its config, its strategy, and the vector codec:
a candidate crosses the wire as its vector), and the harness's one ES loop does the rest:
candidates are evaluated by the run's workers (any backend), env seeds and the initial
parameters derive from the run seed, and the config's :class:`VectorRunKnobs` give it
observation normalisation, the episode cap, action noise and the schedules. Every draw below
comes from the strategy's own RandomState, seeded from the run seed and kept in checkpoints,
so runs repeat bit for bit, at any worker count, and after ``harness resume``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_core import Strategy
from algorithms.es_engine import StrategyStart, VectorRunKnobs, register_es


@dataclass(frozen=True)
class CEMConfig(VectorRunKnobs):
    """Hyperparameters of the cross-entropy method (``--set population=40``)."""

    population: int = doc("candidates per generation", 20)
    elite_fraction: float = doc("share of the best candidates the next Gaussian is fitted to", 0.2)
    sigma: float = doc("initial standard deviation of every parameter", 0.5)
    sigma_floor: float = doc("smallest standard deviation kept (keeps exploring)", 0.01)

    #: no learning rate to schedule (sigma_decay scales the refitted std)
    SCHEDULES = ("sigma",)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        self.validate_run()
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


class CEMStrategy(Strategy):
    """A diagonal Gaussian refitted to the elite of every generation."""

    def __init__(self, config: CEMConfig, start: StrategyStart) -> None:
        self.config = config
        self.schedule = config.schedule()
        self.mean = start.params.astype(np.float64)
        self.std = np.full_like(self.mean, config.sigma)
        self.random = np.random.RandomState(start.library_seed)
        #: the generation's candidates, from ask to tell
        self.asked = np.empty((0, self.mean.size))

    def ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        noise = self.random.standard_normal((self.config.population, self.mean.size))
        self.asked = self.mean + self.std * noise
        return list(self.asked)

    def tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        best = np.argsort(-np.asarray(fitness), kind="stable")[: self.config.elites()]
        elite = self.asked[best]
        self.mean = elite.mean(axis=0)
        std = np.maximum(elite.std(axis=0), self.config.sigma_floor)
        self.std = self.schedule.sigma(std)

    def centre(self) -> np.ndarray:
        return self.mean

    def metrics(self) -> dict[str, float]:
        return {"sigma": float(self.std.mean())}

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean.copy(),
            "std": self.std.copy(),
            "numpy_global_rng": self.random.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float64).copy()
        self.std = np.asarray(state["std"], dtype=np.float64).copy()
        self.random.set_state(state["numpy_global_rng"])


def describe_update(params: dict[str, Any]) -> str:
    """What the report's settings table says about the update."""
    kept = max(1, math.ceil(float(params["elite_fraction"]) * int(params["population"])))
    return f"mean and std of the best {kept} of {params['population']}"


#: the algorithm the entry point names: registered as it is imported
CROSS_ENTROPY_METHOD = register_es(
    "cem",
    Config=CEMConfig,
    strategy=CEMStrategy,
    codec="vector",
    summary="cross-entropy method (plugin example): refit a diagonal Gaussian to the elite",
    describe_update=describe_update,
)
