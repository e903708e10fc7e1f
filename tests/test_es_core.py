"""The ES core's parts, PGPE and SNES: hand-computed updates, and bitwise determinism
across backends, worker counts, replicated mode and a state-dict resume."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from algorithms.es_common import default_population
from algorithms.es_core import (
    CENTRED_RANKS,
    NES_UTILITIES,
    SGD,
    Candidate,
    ClipUp,
    FitnessShaping,
    MirroredES,
    MirroredSampler,
    PGPESigma,
    SNESSigma,
    nes_utilities,
)
from algorithms.pgpe import PGPEConfig, initial_sigma, pgpe_gradient
from algorithms.snes import SNESConfig, default_sigma_learning_rate, snes_gradient
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.protocol import Broadcast, EvalTask
from harness.config import ConfigError, validate_params
from tests import test_parallel
from tests.test_parallel import make_algorithm, run_generations

#: z_0 = table[0:2] = [0, 1], z_1 = table[3:5] = [3, 4]
TABLE = NoiseTable(NoiseSpec(6, 0), np.arange(6, dtype=np.float32), None, owner=True)
PAIRS = [Candidate(0, +1), Candidate(0, -1), Candidate(3, +1), Candidate(3, -1)]
Z = np.array([[0.0, 1.0], [3.0, 4.0]])
#: Ranked: +z_0 best, -z_1 ... centred ranks [0.5, 1/6, -0.5, -1/6].
FITNESS = np.array([4.0, 3.0, 1.0, 2.0])
SIGMA = np.array([0.5, 2.0], dtype=np.float32)


def told(shaping: FitnessShaping, update: Any, sigma_rule: Any, gradient: Any) -> MirroredES:
    """A core with centre gradient ``gradient`` at 0 and sigma SIGMA after one tell of FITNESS."""
    es = MirroredES(
        np.zeros(2, np.float32),
        TABLE,
        SIGMA.copy(),
        sampler=MirroredSampler(4),
        shaping=shaping,
        update=update,
        gradient=gradient,
        sigma_rule=sigma_rule,
    )
    es.tell(PAIRS, FITNESS)
    return es


def test_clipup_normalises_the_gradient_and_clips_the_velocity() -> None:
    """ClipUp-1 and ClipUp-2 (Toklu et al. 2020) by hand: alpha 1, v_max 1.5, m 0.9."""
    clipup = ClipUp(2, stepsize=1.0, max_speed=1.5, momentum=0.9)
    loss_gradient = np.array([-3.0, -4.0], dtype=np.float32)  # ascent [3, 4], norm 5
    np.testing.assert_allclose(clipup.step(loss_gradient), [0.6, 0.8], rtol=1e-6)
    # v = 0.9 [0.6, 0.8] + [0.6, 0.8] = [1.14, 1.52], |v| = 1.9 > 1.5: scaled to 1.5
    np.testing.assert_allclose(clipup.step(loss_gradient), [0.9, 1.2], rtol=1e-6)
    np.testing.assert_array_equal(clipup.step(np.zeros(2, np.float32)), 0.9 * clipup.v / 0.9)


def test_pgpe_step_equals_the_hand_computed_one() -> None:
    """Sehnke et al.'s symmetric-sampling gradients with EvoTorch's 1/n, ClipUp, 20% clip."""
    sigma = SIGMA
    es = told(
        FitnessShaping(CENTRED_RANKS),
        ClipUp(2, stepsize=0.3, max_speed=1.0),
        PGPESigma(learning_rate=0.1, max_change=0.2),
        pgpe_gradient,
    )
    ranks = np.array([0.5, 1 / 6, -0.5, -1 / 6])
    plus, minus = ranks[0::2], ranks[1::2]
    eps = sigma * Z  # the perturbations themselves
    grad_mu = ((plus - minus) / 2) @ eps / 2
    np.testing.assert_allclose(grad_mu, [-0.125, -0.5])  # (1/6 [0, 2] - 1/6 [1.5, 8]) / 2
    # ClipUp's first step: alpha times the unit gradient (|v| = 0.3 < v_max)
    np.testing.assert_allclose(es.mean, 0.3 * grad_mu / np.linalg.norm(grad_mu), rtol=1e-6)
    grad_sigma = ((plus + minus) / 2) @ ((eps**2 - sigma**2) / sigma) / 2  # [-0.75, -5]
    np.testing.assert_allclose(grad_sigma, [-0.75, -5.0])
    # 0.5 - 0.075 = 0.425 stays within 20%; 2 - 0.5 = 1.5 is clipped to 0.8 * 2 = 1.6
    np.testing.assert_allclose(es.sigma, [0.425, 1.6], rtol=1e-6)


def test_nes_utilities_follow_the_papers_formula() -> None:
    lam = 4
    raw = [max(0.0, math.log(lam / 2 + 1) - math.log(k)) for k in range(1, lam + 1)]
    weights = [r / sum(raw) - 1 / lam for r in raw]  # by rank k = 1 (best) .. 4
    # fitness [4, 3, 1, 2]: ranks 1, 2, 4, 3
    expected = [weights[0], weights[1], weights[3], weights[2]]
    np.testing.assert_allclose(nes_utilities(FITNESS), expected, rtol=1e-6)
    assert abs(float(nes_utilities(np.arange(12.0)).sum())) < 1e-6


def test_snes_step_equals_the_hand_computed_one() -> None:
    """Schaul et al. 2011, Algorithm 2, over the mirrored candidates s = +z_0, -z_0, +z_1, -z_1."""
    sigma = SIGMA
    es = told(
        FitnessShaping(NES_UTILITIES),
        SGD(2, 1.0, momentum=0.0),
        SNESSigma(learning_rate=0.2),
        snes_gradient,
    )
    u = nes_utilities(FITNESS).astype(np.float64)
    s = np.array([Z[0], -Z[0], Z[1], -Z[1]])
    grad_mu = u @ s
    grad_sigma = u @ (s**2 - 1)
    np.testing.assert_allclose(es.mean, 1.0 * sigma * grad_mu, rtol=1e-5)
    np.testing.assert_allclose(es.sigma, sigma * np.exp(0.2 / 2 * grad_sigma), rtol=1e-6)


def test_snes_defaults_are_the_papers_table() -> None:
    # d = 114: 4 + floor(3 ln 114) = 4 + 14 = 18; eta_sigma = (3 + ln d) / (5 sqrt d)
    assert default_population(114, mirrored=True) == 18
    assert default_population(18, mirrored=True) == 12  # 4 + floor(8.67) = 12
    assert default_population(6536, mirrored=True) == 30  # 4 + floor(26.38) = 30
    assert default_population(3, mirrored=True) == 8  # 4 + floor(3.30) = 7, rounded up
    assert default_population(3) == 7  # CMA's (pycma's) rule is not rounded
    assert default_sigma_learning_rate(100) == pytest.approx((3 + math.log(100)) / 50)
    SNESConfig().validate()  # population 0 (automatic) is valid


def test_pgpe_initial_sigma_is_evotorchs_radius_over_sqrt_d() -> None:
    np.testing.assert_allclose(initial_sigma(PGPEConfig(radius_init=4.5), 18), 4.5 / math.sqrt(18))
    np.testing.assert_array_equal(
        initial_sigma(PGPEConfig(radius_init=0.0, sigma=0.3), 3), np.full(3, 0.3, np.float32)
    )
    # an older record holding the one shaping PGPE ever accepted still reads, any other is
    # refused; the schedules are every ES's (PGPESigma adapts, the schedule scales after it)
    with pytest.raises(ConfigError, match=r"fitness_shaping .* \(only 'centered_ranks' was"):
        validate_params({"fitness_shaping": "nes"}, PGPEConfig, "params")
    assert validate_params({"fitness_shaping": "centered_ranks"}, PGPEConfig, "p") == PGPEConfig()
    assert validate_params({"sigma_decay": 0.99}, PGPEConfig, "p").sigma_decay == 0.99
    with pytest.raises(ValueError, match="optimizer must be clipup or adam or sgd"):
        PGPEConfig(optimizer="rmsprop").validate()


def test_a_per_coordinate_sigma_is_rebuilt_by_the_worker_exactly() -> None:
    centre = np.array([1.0, -1.0], dtype=np.float32)
    sigma = np.array([0.5, 2.0], dtype=np.float32)
    broadcast = Broadcast(0, centre, sigma, None, None)
    for sign in (+1, -1):
        task = EvalTask(0, (1,), None, noise_index=3, sign=sign)
        expected = centre + np.float32(sign) * (sigma * TABLE.array[3:5])
        np.testing.assert_array_equal(task.parameters(broadcast, TABLE.array), expected)


# -- whole algorithms: determinism -----------------------------------------------------------
TINY: dict[str, dict[str, Any]] = {
    "pgpe": {"population": 12, "noise_size": 1 << 20, "obs_fraction": 0.25, "radius_init": 1.0},
    "snes": {"population": 12, "noise_size": 1 << 20, "obs_fraction": 0.25, "sigma": 0.1},
}


@pytest.fixture(autouse=True)
def _tiny_params(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_parallel, "TINY_PARAMS", {**test_parallel.TINY_PARAMS, **TINY})


@pytest.mark.parametrize("algo", ["pgpe", "snes"])
def test_sigma_adapts_and_results_do_not_depend_on_backend_workers_or_sync(algo: str) -> None:
    inline = run_generations(make_algorithm(algo, "inline", 1))
    sigmas = [r.extras["sigma"] for r in inline.records]
    assert len(set(sigmas)) == len(sigmas)  # a per-coordinate sigma that moves
    for backend, workers, sync in [("process", 2, "broadcast"), ("inline", 1, "seeds")]:
        other = run_generations(make_algorithm(algo, backend, workers, sync))
        other.assert_same(inline)
    seeds = run_generations(make_algorithm(algo, "process", 2, "seeds"))
    seeds.assert_same(inline)
    assert [r.extras["resyncs"] for r in seeds.records] == [0.0] * len(seeds.records)


@pytest.mark.parametrize("algo", ["pgpe", "snes"])
def test_population_log_holds_the_candidates_the_workers_evaluated(algo: str) -> None:
    from algorithms.es_common import STREAM_GENERATION, stream_rng

    algorithm: Any = make_algorithm(algo, "inline", 1)
    try:
        centre, sigma = algorithm.strategy.mean.copy(), algorithm.strategy.sigma.copy()
        # generation 0's candidates, drawn again from the run seed's stream
        asked = algorithm.strategy.ask(stream_rng(3, STREAM_GENERATION, 0))
        algorithm.step()
        record = algorithm.population_record()
        assert "noise_index" not in record and len(record["candidates"]) == 12
        for candidate, row in zip(asked, record["candidates"], strict=True):
            eps = algorithm.codec.noise.get(candidate.noise_index, centre.size)
            expected = centre + np.float32(candidate.sign) * (sigma * eps)
            np.testing.assert_array_equal(row, expected)
    finally:
        algorithm.close()
