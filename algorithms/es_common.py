"""Pieces every evolution strategy here shares: seeding, fitness, task building, faults."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from algorithms.base import StepRecord
from evaluation.protocol import EvalResult, GenerationStats

# Independent streams derived from the run seed: SeedSequence([seed, stream, index]).
STREAM_INIT = 0
STREAM_GENERATION = 1
STREAM_EVAL = 2
#: Seeds of third-party optimizers' own RNGs (pycma, Nevergrad); index = restart number.
STREAM_OPTIMIZER = 3
#: Env seeds of the confirmation of a target return; index = confirmation number.
STREAM_CONFIRM = 4
#: Novelty search's own draws (algorithms.novelty_es): index 0 the initial centres'
#: measurement, g + 1 generation g's choice of centre and its measurement's env seeds.
STREAM_NOVELTY = 5
#: Env seeds of the endpoint evaluation (harness.runner), under the fixed ENDPOINT_SEED.
STREAM_ENDPOINT = 6
#: Not a run's seed: the endpoint's episodes are the same for every run and algorithm.
ENDPOINT_SEED = 0
#: Metrics of the endpoint evaluation, logged at a run's final step (harness.runner).
ENDPOINT_METRICS = ("endpoint_return_mean", "endpoint_return_std", "endpoint_episodes")

#: Parts of the wall-clock an ES algorithm measures itself, as cumulative seconds in its
#: ``time_counters``; the runner books the rest of a step as rollouts (see harness.runner).
ES_TIME_PARTS = ("worker_start", "stragglers", "head_update", "obs_sync")

SEED_BOUND = 2**31 - 1


class EnvironmentFault(RuntimeError):
    """An environment raised or produced a non-finite value while evaluating a candidate."""


def default_population(dim: int, mirrored: bool = False) -> int:
    """The population of Hansen's CMA-ES and of NES (Schaul et al. 2011, Table 1) for ``dim``
    parameters, ``4 + floor(3 ln d)``; ``mirrored``: rounded up to an even number (the
    noise-table family's pairs)."""
    size = 4 + math.floor(3 * math.log(dim))
    return size + size % 2 if mirrored else size


def stream_rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """A generator that depends only on ``(seed, stream, index)``: stateless, so resumable."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream, index])))


def optimizer_seed(seed: int, index: int = 0) -> int:
    """A positive seed for a library optimizer's RNG (pycma treats 0 as "seed from the clock")."""
    return int(stream_rng(seed, STREAM_OPTIMIZER, index).integers(1, SEED_BOUND))


def eval_seeds(seed: int, eval_index: int, episodes: int) -> list[int]:
    """Env seeds of the ``eval_index``-th evaluation; identical for every algorithm."""
    rng = stream_rng(seed, STREAM_EVAL, eval_index)
    return [int(s) for s in rng.integers(0, SEED_BOUND, size=episodes)]


def endpoint_seeds(episodes: int) -> list[int]:
    """Env seeds of the endpoint evaluation of a final policy: the same ``episodes`` for every
    run, seed and algorithm, so that final scores compare on one set of episodes."""
    rng = stream_rng(ENDPOINT_SEED, STREAM_ENDPOINT)
    return [int(s) for s in rng.integers(0, SEED_BOUND, size=episodes)]


def confirm_seeds(seed: int, confirm_index: int, episodes: int) -> list[int]:
    """Env seeds of the ``confirm_index``-th confirmation: a stream apart from :func:`eval_seeds`,
    so confirming a target leaves the regular evaluations' seeds unchanged."""
    rng = stream_rng(seed, STREAM_CONFIRM, confirm_index)
    return [int(s) for s in rng.integers(0, SEED_BOUND, size=episodes)]


def new_time_counters() -> dict[str, float]:
    """Zeroed cumulative seconds for :data:`ES_TIME_PARTS`."""
    return dict.fromkeys(ES_TIME_PARTS, 0.0)


def count_evaluation(counters: dict[str, float], stats: GenerationStats) -> None:
    """Add an evaluator call's idle shares (worker start-up, barrier) to ``counters``."""
    counters["worker_start"] += stats.worker_start_s
    counters["stragglers"] += stats.straggler_s


def to_loss(fitness: np.ndarray) -> np.ndarray:
    """The one place a return becomes a loss, for optimisers that minimise (CMA, Nevergrad)."""
    return -np.asarray(fitness, dtype=np.float64)


def finite_losses(losses: np.ndarray) -> np.ndarray:
    """Replace non-finite losses (failed candidates) by one worse than every finite loss.

    pycma and several Nevergrad optimizers misbehave on ``inf``; rank-based methods only
    need the failed candidate to be last.
    """
    losses = np.asarray(losses, dtype=np.float64).copy()
    bad = ~np.isfinite(losses)
    if bad.any():
        finite = losses[~bad]
        worst = float(finite.max()) if finite.size else 0.0
        losses[bad] = worst + max(1.0, abs(worst))
    return losses


def fitness_of(
    results: Sequence[EvalResult], fail_on_env_error: bool, training: bool = True
) -> tuple[np.ndarray, list[str]]:
    """Mean return per task; a failed task raises, or scores worst (-inf) when allowed.

    ``training``: the returns the run's reward transform shaped (what the optimizer ranks);
    otherwise the env's own (what evaluation reports).
    """
    fitness = np.empty(len(results), dtype=np.float64)
    failures: list[str] = []
    for i, result in enumerate(results):
        if result.failed is not None:
            if fail_on_env_error:
                raise EnvironmentFault(result.failed)
            failures.append(result.failed.splitlines()[0])
            fitness[i] = -np.inf
        else:
            returns = result.fitness_returns if training else result.returns
            fitness[i] = float(np.mean(returns))
    return fitness, failures


def fitness_summary(fitness: np.ndarray) -> tuple[float, float, float]:
    """Mean, max and min over the finite fitness values."""
    finite = fitness[np.isfinite(fitness)]
    if finite.size == 0:
        return float("nan"), float("nan"), float("nan")
    return float(finite.mean()), float(finite.max()), float(finite.min())


def generation_record(
    results: Sequence[EvalResult],
    fitness: np.ndarray,
    stats: GenerationStats,
    extras: dict[str, float],
) -> StepRecord:
    """The runner's record of one ES generation: steps, episodes, fitness, measured bytes."""
    mean, best, worst = fitness_summary(fitness)
    return StepRecord(
        timesteps=int(sum(r.steps for r in results)),
        episodes=int(sum(len(r.lengths) for r in results)),
        fitness_mean=mean,
        fitness_max=best,
        fitness_min=worst,
        bytes_to_workers=stats.bytes_to_workers,
        bytes_from_workers=stats.bytes_from_workers,
        worker_seconds=stats.worker_seconds,
        extras=extras,
    )
