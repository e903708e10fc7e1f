"""The strategy protocol every ES implements, and the parts of the mirrored noise-table ones.

:class:`Strategy` is ask/tell over explicit state, maximising (as in evosax, pycma and
Nevergrad); :mod:`algorithms.es_engine` runs any of them in its one generation loop. The
mirrored strategies here search a Gaussian around a centre ``mu`` with a standard deviation
``sigma`` (a scalar, or one per coordinate) and perturbs by slices of the shared noise
table (Salimans et al. 2017, Algorithm 2), so a candidate on the wire is always a noise
index and a sign. One generation is::

    candidates = sampler.ask(rng)               # mirrored pairs (+z_i, -z_i), i = 1..n
    x_i^+- = mu +- sigma * z_i                  # rebuilt by the workers from the table
    kept, s = shaping(F)                        # fitness shaping, optionally top pairs
    g = sum_i (s_i^+ - s_i^-) z_i / (2 |kept|)  # the mirrored estimate, in z space   (E1)
    mu += update(-gradient(g) + l2 mu)          # SGD, Adam or ClipUp on the loss      (E2)
    sigma = schedule(sigma_rule(sigma, s, z))   # none, PGPE's or SNES's; the schedule (E3)

The parts, and the papers their formulas come from:

* sampling: :class:`MirroredSampler`, antithetic pairs of table indices (Salimans et al.
  2017, section 2.1; Sehnke et al. 2010's symmetric sampling; Brockhoff et al. 2010);
* fitness shaping (:class:`FitnessShaping`, given a :class:`Shaping` object): centred ranks
  (``CENTRED_RANKS``; Salimans et al. 2017, section 2.1: ranks onto [-0.5, 0.5]), returns
  over their std (``REWARD_STD``) with ``top_directions`` (Mania, Guy, Recht 2018,
  Algorithm 2 lines 6-7: the b best pairs), raw returns, and NES utilities
  (``NES_UTILITIES``; Wierstra et al. 2014, JMLR 15, eq. 13 / Schaul et al. 2011, section 2)::

      u_k = max(0, log(lambda/2 + 1) - log k) / sum_j max(0, log(lambda/2 + 1) - log j)
            - 1/lambda                                                         (NES-13)

  with ``k`` the rank, 1 the best;
* the centre gradient (E2's ``gradient``), a function the strategy is given: OpenAI-ES's
  (:func:`openai_gradient`: ``g``, the ``1/sigma`` folded into the step size), PGPE's
  (:func:`algorithms.pgpe.pgpe_gradient`; Sehnke et al. 2010, section 2.3, symmetric
  sampling: ``grad_mu = sum_i (r_i^+ - r_i^-)/2 * eps_i / n`` with ``eps_i = sigma * z_i``,
  i.e. ``sigma * g``; EvoTorch divides by the number of directions, so does this), SNES's
  (:func:`algorithms.snes.snes_gradient`; Schaul, Glasmachers, Schmidhuber 2011,
  Algorithm 2 line "mu <- mu + eta_mu sigma grad_mu", with ``grad_mu = sum_k u_k z_k``:
  over mirrored pairs that is ``2 |kept| sigma * g``);
* update rules, injected objects that minimise a loss gradient and return the step (the
  algorithm's config builds the one it names): :class:`SGD` with
  momentum and :class:`Adam` (Kingma and Ba 2015) as in OpenAI's ``es_distributed``, and
  :class:`ClipUp` (Toklu, Liskowski, Srivastava 2020, arXiv:2008.02387, section 3)::

      v <- m v + alpha * grad / ||grad||        (ClipUp-1: normalised gradient, momentum)
      v <- v_max * v / ||v||  if ||v|| > v_max  (ClipUp-2: the update is clipped)
      mu <- mu + v

* sigma adaptation (E3): none (OpenAI-ES, ARS); :class:`PGPESigma` (Sehnke et al. 2010,
  section 2.3: ``grad_sigma = sum_i ((r_i^+ + r_i^-)/2 - b) (eps_i^2 - sigma^2)/sigma / n``
  with the baseline ``b`` zero for centred ranks; ``sigma += eta_sigma grad_sigma``, each
  coordinate's relative change clipped to ``max_change`` as EvoTorch's
  ``stdev_max_change``); :class:`SNESSigma` (Schaul et al. 2011, Algorithm 2:
  ``grad_sigma = sum_k u_k (z_k^2 - 1)``, ``sigma <- sigma * exp(eta_sigma/2 grad_sigma)``);
  then the run's :class:`Schedule`, a rule inside the strategy, so replicas replay it.

:class:`MirroredES` composes them. ``OpenAI-ES``/ARS (:mod:`algorithms.optimes`), PGPE
(:mod:`algorithms.pgpe`) and SNES (:mod:`algorithms.snes`) are each a choice of parts. The
arithmetic of the plain path is the one optimes has always used (float32 ``g``, the step
added to the centre), so optimes' results are bitwise what they were.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from evaluation.noise import NoiseTable
from evaluation.protocol import EvalResult

#: A scalar standard deviation, or one per coordinate (float32).
Sigma = float | np.ndarray


@dataclass(frozen=True)
class Candidate:
    """A member of the population: a slice of the noise table and a sign."""

    noise_index: int
    sign: int


# -- sampling --------------------------------------------------------------------------------
class MirroredSampler:
    """Mirrored pairs ``(+z_i, -z_i)`` of table slices, adjacent: ``[+0, -0, +1, -1, ...]``."""

    def __init__(self, population: int) -> None:
        if population < 2 or population % 2:
            raise ValueError(f"population must be an even number >= 2, got {population}")
        self.population = population

    def ask(self, rng: np.random.Generator, noise: NoiseTable, dim: int) -> list[Candidate]:
        candidates: list[Candidate] = []
        for _ in range(self.population // 2):
            index = noise.sample_index(rng, dim)
            candidates += [Candidate(index, +1), Candidate(index, -1)]
        return candidates


# -- fitness shaping -------------------------------------------------------------------------
def centered_ranks(fitness: np.ndarray) -> np.ndarray:
    """Fitness shaping of Salimans et al. section 2.1: ranks mapped linearly onto ``[-0.5, 0.5]``.

    Ties are broken by position (stable sort), so the result is deterministic.
    """
    flat = np.asarray(fitness).ravel()
    ranks = np.empty(flat.size, dtype=np.float32)
    ranks[np.argsort(flat, kind="stable")] = np.arange(flat.size, dtype=np.float32)
    if flat.size > 1:
        ranks /= flat.size - 1
    return (ranks - np.float32(0.5)).reshape(np.shape(fitness))


def _finite(fitness: np.ndarray) -> np.ndarray:
    """A failed candidate (``-inf``) counts as the worst finite return (all failed: 0)."""
    flat = np.asarray(fitness, dtype=np.float64).copy()
    finite = np.isfinite(flat)
    flat[~finite] = flat[finite].min() if finite.any() else 0.0
    return flat


def reward_std_scaled(fitness: np.ndarray) -> np.ndarray:
    """ARS's shaping (Algorithm 2, line 7): raw returns over their standard deviation.

    A population that scored alike (std 0) gives a zero update, never a division by zero;
    a failed candidate (``-inf``) counts as the worst finite return.
    """
    flat = _finite(fitness)
    std = float(flat.std())
    scaled = flat / std if std > 0 and np.isfinite(std) else np.zeros_like(flat)
    return scaled.astype(np.float32)


def raw_fitness(fitness: np.ndarray) -> np.ndarray:
    """No shaping: the returns themselves (a failed candidate as the worst finite one)."""
    return _finite(fitness).astype(np.float32)


def nes_utilities(fitness: np.ndarray) -> np.ndarray:
    """NES utilities (NES-13): log-rank weights of the better half, summing to zero.

    Ties are broken by position (the earlier candidate ranks better), so it is deterministic.
    """
    flat = np.asarray(fitness, dtype=np.float64).ravel()
    size = flat.size
    k = np.arange(1, size + 1, dtype=np.float64)
    raw = np.maximum(0.0, np.log(size / 2 + 1) - np.log(k))
    weights = raw / raw.sum() - 1.0 / size
    utilities = np.empty(size, dtype=np.float64)
    utilities[np.argsort(-flat, kind="stable")] = weights
    return utilities.astype(np.float32)


@dataclass(frozen=True)
class Shaping:
    """A fitness shaping as the object a strategy is given: the function and its words."""

    shape: Callable[[np.ndarray], np.ndarray]
    words: str

    def __call__(self, fitness: np.ndarray) -> np.ndarray:
        return self.shape(fitness)


CENTRED_RANKS = Shaping(centered_ranks, "centred ranks")
REWARD_STD = Shaping(reward_std_scaled, "returns / their std (ARS)")
NES_UTILITIES = Shaping(nes_utilities, "NES utilities")
RAW_RETURNS = Shaping(raw_fitness, "raw returns")
#: the shapings a ``fitness_shaping`` knob names
SHAPINGS: dict[str, Shaping] = {
    "centered_ranks": CENTRED_RANKS,
    "reward_std": REWARD_STD,
    "nes": NES_UTILITIES,
    "raw": RAW_RETURNS,
}


def top_pairs(fitness: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` mirrored pairs with the highest ``max(F+, F-)``, in order.

    ARS V1-t/V2-t (Algorithm 2, line 6); ties keep the earlier pair, so it is deterministic.
    """
    pairs = np.asarray(fitness, dtype=np.float64).reshape(-1, 2)
    if count <= 0 or count >= len(pairs):
        return np.arange(len(pairs))
    best = np.argsort(-pairs.max(axis=1), kind="stable")[:count]
    return np.sort(best)


@dataclass(frozen=True)
class FitnessShaping:
    """Keep the ``top_directions`` best pairs (0: all), then shape their returns by ``shape``."""

    shape: Shaping = CENTRED_RANKS
    top_directions: int = 0

    def __call__(self, fitness: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(kept, shaped)``: the kept pairs' indices and their 2|kept| shaped values."""
        fitness = np.asarray(fitness, dtype=np.float64)
        kept = top_pairs(fitness, self.top_directions)
        selected = fitness.reshape(-1, 2)[kept].ravel()
        return kept, self.shape(selected)

    def describe(self) -> str:
        """The shaping in the report's words."""
        return self.shape.words


# -- update rules (minimise a loss gradient, return the step) ---------------------------------
class UpdateRule(Protocol):
    """What a strategy is given to move its centre: minimise a loss gradient, return the step."""

    stepsize: float

    def describe(self) -> str: ...

    def step(self, loss_gradient: np.ndarray) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Adam:
    """Adam (Kingma and Ba 2015) as in ``es_distributed/optimizers.py``; minimises."""

    def __init__(
        self,
        dim: int,
        stepsize: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        self.stepsize, self.beta1, self.beta2, self.epsilon = stepsize, beta1, beta2, epsilon
        self.m: np.ndarray = np.zeros(dim, dtype=np.float32)
        self.v: np.ndarray = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def describe(self) -> str:
        """The rule in the report's words."""
        return "Adam"

    def step(self, loss_gradient: np.ndarray) -> np.ndarray:
        """The change to apply to the parameters."""
        self.t += 1
        a = self.stepsize * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * loss_gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * (loss_gradient * loss_gradient)
        return (-a * self.m / (np.sqrt(self.v) + self.epsilon)).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"m": self.m.copy(), "v": self.v.copy(), "t": self.t, "stepsize": self.stepsize}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.m, self.v = state["m"].copy(), state["v"].copy()
        self.t, self.stepsize = int(state["t"]), float(state["stepsize"])


class SGD:
    """SGD with momentum as in ``es_distributed/optimizers.py``; minimises."""

    def __init__(self, dim: int, stepsize: float, momentum: float = 0.9) -> None:
        self.stepsize, self.momentum = stepsize, momentum
        self.v: np.ndarray = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def describe(self) -> str:
        """The rule in the report's words."""
        return f"SGD, momentum {self.momentum:g}" if self.momentum else "SGD"

    def step(self, loss_gradient: np.ndarray) -> np.ndarray:
        self.t += 1
        self.v = self.momentum * self.v + (1.0 - self.momentum) * loss_gradient
        # in the gradient's precision: float32 for the noise-table strategies, float64 xNES's
        return (-self.stepsize * self.v).astype(np.asarray(loss_gradient).dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"v": self.v.copy(), "t": self.t, "stepsize": self.stepsize}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.v, self.t, self.stepsize = state["v"].copy(), int(state["t"]), float(state["stepsize"])


class ClipUp:
    """ClipUp (ClipUp-1, ClipUp-2): normalised gradient, heavy-ball momentum, clipped speed.

    Minimises like the others: the ascent direction is ``-loss_gradient``. A zero gradient
    adds nothing (no division by zero).
    """

    def __init__(
        self, dim: int, stepsize: float, max_speed: float = 0.0, momentum: float = 0.9
    ) -> None:
        """``max_speed`` 0: twice the step size (EvoTorch's default)."""
        self.stepsize, self.momentum = stepsize, momentum
        self.max_speed = max_speed or 2.0 * stepsize
        self.v: np.ndarray = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def describe(self) -> str:
        """The rule in the report's words."""
        return f"ClipUp, max speed {self.max_speed:g}, momentum {self.momentum:g}"

    def step(self, loss_gradient: np.ndarray) -> np.ndarray:
        self.t += 1
        ascent = -np.asarray(loss_gradient, dtype=np.float64)
        norm = float(np.linalg.norm(ascent))
        direction = ascent / norm if norm > 0 else np.zeros_like(ascent)
        velocity = self.momentum * self.v.astype(np.float64) + self.stepsize * direction
        speed = float(np.linalg.norm(velocity))
        if speed > self.max_speed:
            velocity *= self.max_speed / speed
        self.v = velocity.astype(np.float32)
        return self.v.copy()

    def state_dict(self) -> dict[str, Any]:
        return {"v": self.v.copy(), "t": self.t, "stepsize": self.stepsize}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.v, self.t, self.stepsize = state["v"].copy(), int(state["t"]), float(state["stepsize"])


# -- sigma adaptation (E3) -------------------------------------------------------------------
class SigmaRule(Protocol):
    def update(self, sigma: Sigma, plus: np.ndarray, minus: np.ndarray, z: np.ndarray) -> Sigma: ...

    def describe(self) -> str:
        """How sigma moves, in the report's words."""


@dataclass(frozen=True)
class PGPESigma:
    """PGPE's per-coordinate sigma step on shaped returns (baseline 0: centred ranks)."""

    learning_rate: float
    max_change: float = 0.2

    def describe(self) -> str:
        clip = f", change clipped to {self.max_change:g}" if self.max_change > 0 else ""
        return f"sigma: PGPE gradient step, rate {self.learning_rate:g}{clip}"

    def update(self, sigma: Sigma, plus: np.ndarray, minus: np.ndarray, z: np.ndarray) -> Sigma:
        s = np.asarray(sigma, dtype=np.float64)
        mean_fitness = (plus.astype(np.float64) + minus.astype(np.float64)) / 2.0
        eps = s * z.astype(np.float64)  # (pairs, d): the perturbations themselves
        grad = mean_fitness @ ((eps * eps - s * s) / s) / len(plus)
        new = s + self.learning_rate * grad
        if self.max_change > 0:
            new = np.clip(new, s * (1 - self.max_change), s * (1 + self.max_change))
        return new.astype(np.float32)


@dataclass(frozen=True)
class SNESSigma:
    """SNES's multiplicative sigma step on NES utilities of the mirrored candidates."""

    learning_rate: float
    #: the report's words, with the rate (or the rule that gives it) in the braces
    WORDS: ClassVar[str] = (
        "sigma: SNES natural gradient, sigma * exp(eta_sigma / 2 grad), eta_sigma {}"
    )

    def describe(self) -> str:
        return self.WORDS.format(f"{self.learning_rate:g}")

    def update(self, sigma: Sigma, plus: np.ndarray, minus: np.ndarray, z: np.ndarray) -> Sigma:
        s = np.asarray(sigma, dtype=np.float64)
        z2 = z.astype(np.float64) ** 2  # (+z)^2 = (-z)^2: both members share the term
        weight = plus.astype(np.float64) + minus.astype(np.float64)
        grad = weight @ (z2 - 1.0)
        return (s * np.exp(self.learning_rate / 2.0 * grad)).astype(np.float32)


# -- schedules ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """The run's schedules, a rule inside the strategy (so replicas replay them): after each
    tell, ``sigma <- max(sigma * sigma_decay, sigma_min)`` and the step size
    ``eta <- max(eta * lr_decay, lr_min)``."""

    sigma_decay: float = 1.0
    sigma_min: float = 0.0
    lr_decay: float = 1.0
    lr_min: float = 0.0

    def sigma(self, value: Any) -> Any:
        """``value`` (a scalar, or one per coordinate) after one generation's schedule."""
        if self.sigma_decay == 1.0 and self.sigma_min == 0.0:
            return value
        if np.ndim(value) == 0:
            return max(float(value) * self.sigma_decay, self.sigma_min)
        scaled = np.asarray(value) * self.sigma_decay
        return np.maximum(scaled, self.sigma_min).astype(np.asarray(value).dtype)

    def rate(self, value: float) -> float:
        """A step size after one generation's schedule."""
        return max(value * self.lr_decay, self.lr_min)


#: no schedule: sigma and the step size move only by the strategy's own rules
NO_SCHEDULE = Schedule()


# -- the strategy protocol --------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """Episodes a strategy asks for besides its candidates' (novelty search: its centres').

    Each policy plays every seed of ``env_seeds`` with its behaviour characterisation
    returned; ``None`` plays the centre of the generation's target. ``receive`` gets the
    results (policy by policy) and each policy's mean training return.
    """

    policies: list[np.ndarray | None]
    env_seeds: list[int]
    receive: Callable[[list[EvalResult], np.ndarray], None]


class Strategy(ABC):
    """Ask/tell over flat parameter vectors with explicit state; maximises fitness.

    The one protocol every ES here implements, whatever its candidates are on the wire
    (noise-table slices or vectors: its codec's business). ``ask(rng)`` draws from the
    generation's stream ``rng``; a strategy that wraps a library drawing from its own
    generator keeps that generator's state in :meth:`state_dict`.
    """

    #: its candidates' tasks also return their behaviour characterisations (:meth:`observe`)
    wants_behaviour: ClassVar[bool] = False

    @abstractmethod
    def ask(self, rng: np.random.Generator) -> list[Any]:
        """The generation's candidates."""

    @abstractmethod
    def tell(self, candidates: list[Any], fitness: np.ndarray) -> None:
        """The candidates' fitness (returns: higher is better; a failed candidate -inf)."""

    @abstractmethod
    def centre(self) -> np.ndarray:
        """The parameters that stand for the current policy (mean or recommendation)."""

    def metrics(self) -> dict[str, float]:
        """Metrics of the generation just told."""
        return {}

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything the strategy needs to continue bit for bit (its checkpoint keys)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` captured (``state`` is the whole checkpoint)."""

    def observe(self, results: list[EvalResult]) -> None:  # noqa: B027 - optional
        """The generation's results, just before the tell (behaviour characterisations)."""

    def probes(self) -> list[Probe]:
        """Extra episodes needed now: asked before each ask and after each tell."""
        return []

    def artifacts(self) -> dict[str, Any]:
        """Extra facts for the run record."""
        return {}


# -- the composed strategy -------------------------------------------------------------------
def openai_gradient(g: np.ndarray, sigma: Sigma, selected: int) -> np.ndarray:
    """E2 for OpenAI-ES: the estimate ``g`` itself (``1/sigma`` is in the step size)."""
    return g


def mirrored_estimate(
    noise: NoiseTable,
    candidates: list[Candidate],
    kept: np.ndarray,
    shaped: np.ndarray,
    dim: int,
) -> tuple[np.ndarray, np.ndarray]:
    """E1 over the kept pairs: ``g`` (float32) and the pairs' perturbations ``z``."""
    plus, minus = shaped[0::2], shaped[1::2]
    eps = np.stack([noise.get(candidates[2 * int(i)].noise_index, dim) for i in kept])
    grad = ((plus - minus).astype(np.float32) @ eps) / np.float32(shaped.size)
    return grad, eps


class MirroredES(Strategy):
    """Ask/tell over a flat float32 mean from the parts above (maximises fitness).

    OpenAI-ES, PGPE and SNES are each a choice of parts: the centre gradient (E2; OpenAI-ES
    the estimate itself, ``1/sigma`` folded into the step size), the sigma rule (E3) and
    the shape of sigma (a scalar, or one float32 per coordinate, as it is given).
    """

    def __init__(
        self,
        mean: np.ndarray,
        noise: NoiseTable,
        sigma: Sigma,
        *,
        sampler: MirroredSampler,
        shaping: FitnessShaping,
        update: UpdateRule,
        gradient: Callable[[np.ndarray, Sigma, int], np.ndarray] = openai_gradient,
        sigma_rule: SigmaRule | None = None,
        l2_coeff: float = 0.0,
        schedule: Schedule = NO_SCHEDULE,
    ) -> None:
        self.mean = np.asarray(mean, dtype=np.float32).copy()
        self.noise = noise
        self.sigma: Sigma = (
            float(sigma) if np.ndim(sigma) == 0 else np.array(sigma, dtype=np.float32)
        )
        self.sampler = sampler
        self.shaping = shaping
        self.optimizer = update
        self.gradient = gradient
        self.sigma_rule = sigma_rule
        self.l2_coeff = l2_coeff
        self.schedule = schedule
        self.last_grad_norm = 0.0

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the noise table (a replica binds its worker's own view of it)."""
        return {**self.__dict__, "noise": None}

    def bind(self, noise: NoiseTable) -> None:
        """Draw from ``noise``: a worker's view of the shared table."""
        self.noise = noise

    def ask(self, rng: np.random.Generator) -> list[Candidate]:
        return self.sampler.ask(rng, self.noise, self.mean.size)

    def tell(self, candidates: list[Candidate], fitness: np.ndarray) -> None:
        """Update the mean (E1, E2) and sigma (E3) from mirrored pairs' fitness, then the
        schedules."""
        kept, shaped = self.shaping(fitness)
        grad, eps = mirrored_estimate(self.noise, candidates, kept, shaped, self.mean.size)
        grad = self.gradient(grad, self.sigma, shaped.size)
        self.last_grad_norm = float(np.linalg.norm(grad))
        self.mean = self.mean + self.optimizer.step(-grad + self.l2_coeff * self.mean)
        sigma = self.sigma
        if self.sigma_rule is not None:
            sigma = self.sigma_rule.update(sigma, shaped[0::2], shaped[1::2], eps)
        self.sigma = self.schedule.sigma(sigma)
        self.optimizer.stepsize = self.schedule.rate(self.optimizer.stepsize)

    def centre(self) -> np.ndarray:
        return self.mean

    def metrics(self) -> dict[str, float]:
        return {
            "sigma": sigma_summary(self.sigma),
            "lr": self.optimizer.stepsize,
            "grad_norm": self.last_grad_norm,
            "param_norm": float(np.linalg.norm(self.mean)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "centre": self.mean.copy(),
            "sigma": copy.copy(self.sigma),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["centre"], dtype=np.float32).copy()
        if np.ndim(self.sigma) == 0:
            self.sigma = float(np.asarray(state["sigma"]))
        else:
            sigma = np.array(state["sigma"], dtype=np.float32)
            if sigma.shape != self.mean.shape:
                raise ValueError(
                    f"one sigma per coordinate: expected shape {self.mean.shape}, got {sigma.shape}"
                )
            self.sigma = sigma
        self.optimizer.load_state_dict(state["optimizer"])


def sigma_summary(sigma: Sigma) -> float:
    """One number for a metric: the scalar, or the mean of per-coordinate sigmas."""
    return float(np.mean(sigma))
