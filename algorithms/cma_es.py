"""CMA-ES by pycma over the flat policy parameters (``cma``).

Hansen and Ostermeier (2001); pycma's ``CMAEvolutionStrategy`` with
``ask()``/``tell()``, one whole population per generation, every candidate
sent to the workers as its full vector.

Full or diagonal covariance. Full CMA keeps a ``d x d`` covariance ``C``, its
eigenvectors ``B`` and the eigendecomposition's work arrays: about three
``d^2`` float64 matrices, and ``O(d^3)`` per decomposition. At the AntBulletEnv
policy's ``d = 6536`` that is about 1 GiB and seconds per update; GoodAI's
CMA run there died of running out of memory. So when ``d`` exceeds
``diagonal_threshold`` or that estimate exceeds ``max_covariance_mb`` the run
uses pycma's diagonal variant (``CMA_diagonal=True``, sep-CMA-ES of Ros and
Hansen 2008: ``O(d)`` memory and time). The choice is printed once (it lands in
the run's ``cout.txt``), logged every step as the metric ``diagonal`` (0/1) and
stored in ``summary.json`` as ``covariance`` (``full`` or ``diagonal``) with its
reason (``covariance_reason``), so a report's settings table can say which CMA ran.

IPOP restarts (Auger and Hansen 2005): when pycma's stop conditions fire
(flat fitness, ``tolfun``, ``tolx``, ...) and fewer than ``restarts`` restarts
were made, a new strategy starts with twice the population and ``sigma0``,
from the last mean (``restart_from: mean``, which keeps the policy the runner
evaluates) or from the initial parameters (``init``, pycma's ``fmin`` habit).
Without restarts left the strategy just carries on.

``evaluate_policy`` plays the distribution mean ``es.mean``. pycma draws from
numpy's global RNG, seeded through its ``seed`` option from the run seed; the
strategy keeps that state private to this run (:class:`PrivateGlobalRNG`) and in
checkpoints. pycma's console output and its ``outcmaes`` files are switched off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_common import default_population, finite_losses, optimizer_seed, to_loss
from algorithms.es_core import NO_SCHEDULE, Schedule, Strategy
from algorithms.es_engine import VectorRunKnobs, register_es
from algorithms.private_rng import PrivateGlobalRNG, dumps_optimizer, loads_optimizer

#: Float64 matrices of size d x d that full CMA holds at once (C, B, eigendecomposition work).
FULL_COVARIANCE_MATRICES = 3


def covariance_mb(dim: int) -> float:
    """Estimated memory of full CMA's ``d x d`` matrices, in MiB."""
    return FULL_COVARIANCE_MATRICES * dim * dim * 8 / 2**20


@dataclass(frozen=True)
class CMAConfig(VectorRunKnobs):
    """Hyperparameters of ``cma``; defaults per env live in ``experiments/defaults.yaml``."""

    population: int = doc("candidates per generation (pycma popsize); 0: 4 + 3 ln(d)", 0)
    sigma0: float = doc("initial step size (standard deviation of every coordinate)", 0.1)
    diagonal_threshold: int = doc(
        "use diagonal (sep-)CMA when the parameter count exceeds this", 2000
    )
    max_covariance_mb: float = doc(
        "also use diagonal CMA when full CMA's matrices (3 x d^2 float64) would exceed this"
        " many MiB",
        512.0,
    )
    restarts: int = doc(
        "IPOP: on pycma's stop conditions restart with doubled population, at most this often", 0
    )
    restart_from: str = doc("where a restart starts: 'mean' (the last mean) or 'init'", "mean")

    #: pycma has no learning rate to schedule
    SCHEDULES = ("sigma",)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        if self.population < 0 or self.population == 1:
            raise ValueError(f"population must be 0 (pycma default) or >= 2, got {self.population}")
        if not self.sigma0 > 0:
            raise ValueError(f"sigma0 must be positive, got {self.sigma0}")
        if self.diagonal_threshold < 0:
            raise ValueError(f"diagonal_threshold must be >= 0, got {self.diagonal_threshold}")
        if not self.max_covariance_mb > 0:
            raise ValueError(f"max_covariance_mb must be positive, got {self.max_covariance_mb}")
        if self.restarts < 0:
            raise ValueError(f"restarts must be >= 0, got {self.restarts}")
        if self.restart_from not in ("mean", "init"):
            raise ValueError(f"restart_from must be mean or init, got {self.restart_from!r}")
        self.validate_run()

    def use_diagonal(self, dim: int) -> tuple[bool, str]:
        """Whether ``dim`` parameters get diagonal CMA, and why (one line)."""
        memory = covariance_mb(dim)
        if dim > self.diagonal_threshold:
            return True, (
                f"d={dim} exceeds diagonal_threshold={self.diagonal_threshold} "
                f"(full covariance would need ~{memory:.0f} MiB)"
            )
        if memory > self.max_covariance_mb:
            return True, (
                f"full covariance would need ~{memory:.0f} MiB > "
                f"max_covariance_mb={self.max_covariance_mb:g}"
            )
        return False, f"d={dim}, full covariance ~{memory:.1f} MiB"


class CMAStrategy(Strategy):
    """pycma's ``CMAEvolutionStrategy`` with IPOP restarts, over explicit state."""

    def __init__(
        self, config: CMAConfig, x0: np.ndarray, seed: int, schedule: Schedule = NO_SCHEDULE
    ) -> None:
        self.config = config
        self.schedule = schedule
        self.dim = x0.size
        #: where ``restart_from: init`` restarts
        self.initial = np.asarray(x0, dtype=np.float64).copy()
        #: the run seed, from which every (re)start's library seed derives
        self.seed = seed
        #: numpy's global RNG as pycma sees it, private to this run, checkpointed
        self.rng = PrivateGlobalRNG(("numpy",), seed=optimizer_seed(seed, 0))
        self.diagonal, self.covariance_reason = config.use_diagonal(self.dim)
        variant = "diagonal (sep-)CMA" if self.diagonal else "full-covariance CMA"
        print(f"cma: {variant}: {self.covariance_reason}", flush=True)
        self.restarts_done = 0
        self.stop_reported = False
        self.last_stop: list[str] = []
        #: generations told, for the restart messages
        self.told = 0
        with self.rng.active():
            self.es: Any = self._start(x0, config.population or default_population(self.dim))

    def _start(self, x0: np.ndarray, popsize: int) -> Any:
        import cma

        options = {
            "popsize": popsize,
            "seed": optimizer_seed(self.seed, self.restarts_done),
            "CMA_diagonal": self.diagonal,
            "verbose": -9,
            "verb_log": 0,
            "verb_disp": 0,
            "verb_time": False,
        }
        return cma.CMAEvolutionStrategy(
            np.asarray(x0, dtype=np.float64), self.config.sigma0, options
        )

    def ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        with self.rng.active():
            return list(self.es.ask())

    def tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        with self.rng.active():
            self.es.tell(candidates, [float(v) for v in finite_losses(to_loss(fitness))])
            self.es.sigma = self.schedule.sigma(self.es.sigma)
            self.told += 1
            stop = self.es.stop()
            if stop:
                self._stopped([str(key) for key in stop])

    def _stopped(self, reasons: list[str]) -> None:
        """pycma's stop conditions: an IPOP restart if one is left, else carry on."""
        self.last_stop = reasons
        if self.restarts_done < self.config.restarts:
            self.restarts_done += 1
            popsize = 2 * int(self.es.popsize)
            x0 = self.es.mean if self.config.restart_from == "mean" else self.initial
            print(
                f"cma: IPOP restart {self.restarts_done}/{self.config.restarts} at generation "
                f"{self.told} ({', '.join(reasons)}), population {popsize}",
                flush=True,
            )
            self.es = self._start(np.asarray(x0, dtype=np.float64), popsize)
        elif not self.stop_reported:
            self.stop_reported = True
            print(
                f"cma: stop conditions met ({', '.join(reasons)}) at generation "
                f"{self.told} and no restart left; carrying on",
                flush=True,
            )

    def centre(self) -> np.ndarray:
        return np.asarray(self.es.mean, dtype=np.float64)

    def metrics(self) -> dict[str, float]:
        return {
            "sigma": float(self.es.sigma),
            "diagonal": float(self.diagonal),
            "restarts": float(self.restarts_done),
        }

    def artifacts(self) -> dict[str, Any]:
        """Which covariance ran and why, for ``summary.json``: the settings say only the
        bounds (``diagonal_threshold``, ``max_covariance_mb``), the choice depends on d."""
        return {
            "covariance": "diagonal" if self.diagonal else "full",
            "covariance_reason": self.covariance_reason,
        }

    def state_dict(self) -> dict[str, Any]:
        assert self.rng.states is not None  # seeded in the constructor
        return {
            "numpy_global_rng": self.rng.states["numpy"],
            "optimizer": dumps_optimizer(self.es),
            "restarts_done": self.restarts_done,
            "stop_reported": self.stop_reported,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.states = {"numpy": state["numpy_global_rng"]}
        self.es = loads_optimizer(state["optimizer"])
        self.restarts_done = int(state["restarts_done"])
        self.stop_reported = bool(state["stop_reported"])
        self.told = int(state["generation"])


def describe_update(params: dict[str, Any]) -> str:
    """pycma's update: weighted recombination, rank-one and rank-mu covariance updates and
    cumulative step-size adaptation (Hansen 2016, "The CMA Evolution Strategy: A Tutorial"),
    with the restarts the config asks for."""
    text = "weighted recombination, rank-1 + rank-mu covariance, CSA step size"
    restarts = int(params.get("restarts") or 0)
    if restarts:
        text += f"; IPOP: up to {restarts} restarts from the {params.get('restart_from')}"
    return text


register_es(
    "cma",
    Config=CMAConfig,
    strategy=lambda config, start: CMAStrategy(
        config, start.params.astype(np.float64), start.seed, config.schedule()
    ),
    codec="vector",
    summary="pycma CMA-ES; sep-CMA above a size/memory bound; IPOP restarts; vectors on wire",
    describe_update=describe_update,
    describe_population=lambda params: (
        "pycma default (4 + 3 ln d)" if params.get("population") == 0 else None
    ),
)
