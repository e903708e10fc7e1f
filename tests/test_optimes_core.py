"""OpenAI-ES core: centred ranks, the update rule, and the seeds' quadratic example."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.es_core import (
    REWARD_STD,
    SGD,
    Adam,
    Candidate,
    FitnessShaping,
    MirroredES,
    MirroredSampler,
    UpdateRule,
    centered_ranks,
)
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalTask


def openai_es(
    centre: np.ndarray,
    noise: NoiseTable,
    population: int,
    sigma: float,
    update: UpdateRule,
    *,
    l2_coeff: float = 0.0,
    shaping: FitnessShaping | None = None,
) -> MirroredES:
    """OpenAI-ES's parts: mirrored pairs, the shaping (centred ranks), the rule, L2."""
    return MirroredES(
        centre,
        noise,
        sigma,
        sampler=MirroredSampler(population),
        shaping=shaping or FitnessShaping(),
        update=update,
        l2_coeff=l2_coeff,
    )


def test_centered_ranks_match_hand_computed_values() -> None:
    fitness = np.array([3.0, -1.0, 10.0, 0.5])
    # ranks 2, 0, 3, 1 over n-1 = 3, minus one half
    expected = np.array([2 / 3 - 0.5, -0.5, 0.5, 1 / 3 - 0.5], dtype=np.float32)
    np.testing.assert_allclose(centered_ranks(fitness), expected, rtol=0, atol=1e-7)


def test_centered_ranks_break_ties_by_position_and_handle_minus_infinity() -> None:
    shaped = centered_ranks(np.array([1.0, 1.0, -np.inf]))
    np.testing.assert_array_equal(shaped, np.array([0.0, 0.5, -0.5], dtype=np.float32))


def test_sgd_update_equals_hand_computed_step() -> None:
    table = NoiseTable(NoiseSpec(6, 0), np.arange(6, dtype=np.float32), None, owner=True)
    es = openai_es(
        np.zeros(2, np.float32),
        table,
        population=4,
        sigma=0.1,
        update=SGD(2, 1.0, momentum=0.0),
    )
    candidates = [Candidate(0, +1), Candidate(0, -1), Candidate(3, +1), Candidate(3, -1)]
    es.tell(candidates, np.array([4.0, 1.0, 2.0, 3.0]))
    # ranks: [3,0,1,2]/3 - .5 = [.5,-.5,-1/6,1/6]; pair diffs 1 and -1/3
    # grad = (1*[0,1] - 1/3*[3,4]) / 4 = [-0.25, -1/12]; SGD lr 1 => centre += grad
    np.testing.assert_allclose(es.mean, [-0.25, -1 / 12], atol=1e-6)


def test_adam_first_step_moves_each_coordinate_by_the_stepsize() -> None:
    adam = Adam(3, stepsize=0.01)
    step = adam.step(np.array([2.0, -0.5, 1e-3], dtype=np.float32))
    np.testing.assert_allclose(step, [-0.01, 0.01, -0.01], rtol=1e-3)


def test_l2_decay_adds_exactly_l2_times_theta_to_the_loss_gradient() -> None:
    """The step is taken on ``-grad + l2 * theta`` (module docstring; ``es_distributed/es.py``:
    ``optimizer.update(-g + config.l2coeff * theta)``), so with SGD, momentum 0 and lr 0.1:
    ``theta' = theta + 0.1 * grad - 0.1 * l2 * theta``.
    """
    table = NoiseTable(NoiseSpec(6, 0), np.arange(6, dtype=np.float32), None, owner=True)
    theta = np.array([1.0, -2.0], dtype=np.float32)
    candidates = [Candidate(0, +1), Candidate(0, -1), Candidate(3, +1), Candidate(3, -1)]

    def centre_after_one_flat_step(l2_coeff: float) -> np.ndarray:
        es = openai_es(theta, table, 4, 0.1, SGD(2, 0.1, momentum=0.0), l2_coeff=l2_coeff)
        es.tell(candidates, np.zeros(4))
        return es.mean

    # Flat fitness is ranked by position: shaped [-.5, -1/6, 1/6, .5], pair differences
    # -1/3 and -1/3, so grad = (-1/3 * [0, 1] - 1/3 * [3, 4]) / 4 = [-1/4, -5/12].
    grad = np.array([-1 / 4, -5 / 12])
    plain = centre_after_one_flat_step(0.0)
    np.testing.assert_allclose(plain, theta + 0.1 * grad, rtol=0, atol=1e-6)  # no decay term
    decayed = centre_after_one_flat_step(0.5)
    np.testing.assert_allclose(decayed, theta + 0.1 * grad - 0.1 * 0.5 * theta, rtol=0, atol=1e-6)


def test_worker_perturbation_equals_head_reconstruction() -> None:
    spec = NoiseSpec(10_000, 7)
    head = NoiseTable.create(spec)
    worker = NoiseTable.create(spec, shared=True)
    try:
        attached = NoiseTable.attach(spec, worker.shm_name or "")
        centre = np.random.default_rng(1).standard_normal(50).astype(np.float32)
        broadcast = Broadcast(0, centre, 0.02, None, None)
        index = head.sample_index(np.random.default_rng(2), 50)
        for sign in (+1, -1):
            task = EvalTask(task_id=0, env_seeds=(1,), max_steps=None, noise_index=index, sign=sign)
            on_worker = task.parameters(broadcast, attached.array)
            on_head = centre + np.float32(sign * 0.02) * head.get(index, 50)
            np.testing.assert_array_equal(on_worker, on_head)
        attached.close()
    finally:
        worker.close()


def test_openai_es_solves_the_seeds_quadratic() -> None:
    """The OpenAI blog's example: maximise -|w - solution|^2 from a random start."""
    solution = np.array([0.5, 0.1, -0.3], dtype=np.float32)
    rng = np.random.default_rng(0)
    table = NoiseTable.create(NoiseSpec(100_000, 0))
    es = openai_es(
        rng.standard_normal(3).astype(np.float32),
        table,
        population=50,
        sigma=0.1,
        update=Adam(3, 0.03),
    )
    for _ in range(300):
        candidates = es.ask(rng)
        params = [es.mean + c.sign * es.sigma * table.get(c.noise_index, 3) for c in candidates]
        es.tell(candidates, np.array([-np.sum((p - solution) ** 2) for p in params]))
    assert np.abs(es.mean - solution).max() < 0.03


def test_population_must_be_even() -> None:
    table = NoiseTable.create(NoiseSpec(100, 0))
    with pytest.raises(ValueError, match="even"):
        openai_es(np.zeros(2, np.float32), table, 5, 0.1, Adam(2, 0.1))


def test_ars_top_directions_keep_the_best_pairs_and_scale_by_their_std() -> None:
    """ARS V2-t (Mania et al. 2018, Algorithm 2 lines 6-7), worked out by hand.

    Pairs (F+, F-): (4, 1), (0, 0.5), (2, 3). With b = 2 the pairs whose better member
    is highest are the first (4) and the third (3); the second drops out. sigma_R is the
    std of the four kept returns [4, 1, 2, 3] = sqrt(1.25); the update with SGD, lr 1, is
    ((4 - 1) * eps_0 + (2 - 3) * eps_2) / (sigma_R * 4).
    """
    table = NoiseTable(NoiseSpec(9, 0), np.arange(9, dtype=np.float32), None, owner=True)
    es = openai_es(
        np.zeros(2, np.float32),
        table,
        population=6,
        sigma=0.1,
        update=SGD(2, 1.0, momentum=0.0),
        shaping=FitnessShaping(REWARD_STD, top_directions=2),
    )
    candidates = [Candidate(index, sign) for index in (0, 3, 6) for sign in (+1, -1)]
    es.tell(candidates, np.array([4.0, 1.0, 0.0, 0.5, 2.0, 3.0]))
    sigma_r = np.sqrt(1.25)
    expected = (3 * np.array([0.0, 1.0]) - np.array([6.0, 7.0])) / (sigma_r * 4)
    np.testing.assert_allclose(es.mean, expected, rtol=1e-6)


def test_reward_std_shaping_survives_a_flat_population_and_a_failed_candidate() -> None:
    table = NoiseTable(NoiseSpec(6, 0), np.arange(6, dtype=np.float32), None, owner=True)
    es = openai_es(
        np.ones(2, np.float32),
        table,
        4,
        0.1,
        SGD(2, 1.0, momentum=0.0),
        shaping=FitnessShaping(REWARD_STD),
    )
    candidates = [Candidate(0, +1), Candidate(0, -1), Candidate(3, +1), Candidate(3, -1)]
    es.tell(candidates, np.full(4, 7.0))
    np.testing.assert_array_equal(es.mean, np.ones(2, np.float32))  # no signal, no step
    es.tell(candidates, np.array([1.0, -np.inf, 0.0, 0.0]))
    assert np.all(np.isfinite(es.mean))
    assert es.mean[1] > 1.0  # eps_0 = [0, 1] beat its failed mirror


def test_top_directions_must_fit_the_population() -> None:
    from algorithms.optimes import OptimESConfig

    with pytest.raises(ValueError, match="top_directions"):
        OptimESConfig(population=10, top_directions=6).validate()
    with pytest.raises(ValueError, match="fitness_shaping"):
        OptimESConfig(fitness_shaping="z-score").validate()
