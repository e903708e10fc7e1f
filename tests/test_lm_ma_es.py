"""LM-MA-ES (algorithms/lm_ma_es.py): the paper's constants, finite at the Ant policy's size,
better than a diagonal method where the metric is rotated, and resumed bitwise by the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import cma
import numpy as np
import pytest

from algorithms.lm_ma_es import LMMAESConfig, LMMAESStrategy
from harness.checkpoint import INTERRUPT_ENV, load_checkpoint
from harness.repro import diff_metrics
from tests.conftest import harness_cli, only_run_dir, read_run

#: The AntBulletEnv MLP 28-64-64-8 (DESIGN.md), where full CMA does not fit.
ANT_DIM = 6536


def strategy(dim: int, sigma: float, x0: float = 1.0, seed: int = 0) -> LMMAESStrategy:
    return LMMAESStrategy(LMMAESConfig(sigma=sigma), np.full(dim, x0), seed)


def minimise(es: LMMAESStrategy, f: object, generations: int) -> list[float]:
    """Run ask/tell on a batch objective; the value at the mean after each generation."""
    values = []
    for _ in range(generations):
        vectors = es.ask(np.random.default_rng(0))  # it draws from its own RandomState
        es.tell(vectors, -f(np.array(vectors)))  # type: ignore[operator]
        values.append(float(f(es.y[None])[0]))  # type: ignore[operator]
    return values


def sphere(x: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", x, x)


def rosenbrock(x: np.ndarray) -> np.ndarray:
    return np.sum(100 * (x[:, 1:] - x[:, :-1] ** 2) ** 2 + (1 - x[:, :-1]) ** 2, axis=1)


def test_the_defaults_are_the_papers() -> None:
    es = strategy(ANT_DIM, 0.1)
    assert es.population == es.memory == 4 + math.floor(3 * math.log(ANT_DIM)) == 30
    assert es.mu == 15 and es.weights.sum() == pytest.approx(1.0)
    assert np.all(np.diff(es.weights) < 0)
    assert es.mu_w == pytest.approx(1 / np.sum(es.weights**2))
    assert es.c_sigma == pytest.approx(2 * 30 / ANT_DIM)
    assert es.c_d[:3] == pytest.approx([1 / ANT_DIM, 1 / (1.5 * ANT_DIM), 1 / (2.25 * ANT_DIM)])
    assert es.c_c[:3] == pytest.approx([30 / ANT_DIM, 30 / (4 * ANT_DIM), 30 / (16 * ANT_DIM)])
    small = strategy(18, 0.1)  # the lander's linear policy: 2 lambda > d, rates capped at 1
    assert small.c_sigma == 1.0 and small.c_c.max() <= 1.0


def test_memory_and_state_are_m_vectors_of_d_not_a_matrix() -> None:
    es = strategy(ANT_DIM, 0.05)
    minimise(es, sphere, 3)
    state = es.state_dict()
    assert state["M"].shape == (es.memory, ANT_DIM)
    arrays = [value for key, value in state.items() if key != "numpy_global_rng"]
    assert max(np.size(value) for value in arrays) == es.memory * ANT_DIM


@pytest.mark.slow
def test_finite_and_progressing_over_hundreds_of_generations_at_the_ant_size() -> None:
    """evosax#55 reports NaNs at d = 2,000; here d = 6,536 for 300 generations."""
    es = strategy(ANT_DIM, 0.05)
    values = minimise(es, sphere, 300)
    for array in (es.y, es.p_sigma, es.M):
        assert np.isfinite(array).all()
    assert math.isfinite(es.sigma) and es.sigma > 0
    assert values[-1] < 0.8 * ANT_DIM  # f(1, ..., 1) = d
    assert np.abs(es.M).max() > 0  # the vectors did adapt

    es = strategy(ANT_DIM, 0.002, x0=0.0)
    values = minimise(es, rosenbrock, 300)
    assert np.isfinite(es.M).all() and math.isfinite(es.sigma)
    assert values[-1] < ANT_DIM - 1  # f(0, ..., 0) = d - 1


def test_a_rotated_ellipsoid_is_solved_far_better_than_by_sep_cma() -> None:
    """The direction vectors learn a rotated metric that a diagonal covariance cannot."""
    dim, budget = 30, 40_000
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((dim, dim)))
    scales = 10 ** (6 * np.arange(dim) / (dim - 1))  # condition number 1e6

    def ellipsoid(x: np.ndarray) -> np.ndarray:
        return ((x @ rotation.T) ** 2) @ scales

    es = strategy(dim, 1.0)
    lm = minimise(es, ellipsoid, budget // es.population)[-1]
    sep = cma.CMAEvolutionStrategy(
        np.ones(dim),
        1.0,
        {
            "CMA_diagonal": True,
            "popsize": es.population,
            "seed": 1,
            "verbose": -9,
            **dict.fromkeys(("tolfun", "tolx", "tolfunhist"), 0),
            "tolstagnation": 10**9,
        },
    )
    for _ in range(budget // es.population):
        candidates = sep.ask()
        sep.tell(candidates, list(ellipsoid(np.array(candidates))))
    separable = float(ellipsoid(np.asarray(sep.mean)[None])[0])
    start = float(ellipsoid(np.ones((1, dim)))[0])
    assert lm < 1e-4 * start
    assert 10 * lm < separable, (lm, separable)


def _run(runs: Path) -> list[str]:
    return [
        "run",
        "--algo",
        "lm-ma-es",
        "--env",
        "CartPole",
        "--seed",
        "4",
        "--generations",
        "10",
        "--backend",
        "inline",
        "--runs-dir",
        str(runs),
        "--set",
        "checkpoint_every=3",
        "--set",
        "eval_every_timesteps=1000",
        "--set",
        "eval_episodes=2",
    ]


def test_resumed_through_the_cli_equals_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """y, sigma, p_sigma, the vectors and the private RNG cross a real SIGINT and resume."""
    harness_cli(*_run(tmp_path / "straight"))
    reference = read_run(only_run_dir(tmp_path / "straight"))
    assert reference["run"]["status"] == "COMPLETED"
    assert len(set(reference["metrics"]["sigma"]["values"])) > 1  # sigma adapts

    runs = tmp_path / "interrupted"
    monkeypatch.setenv(INTERRUPT_ENV, "4")
    stopped = harness_cli(*_run(runs), check=False)
    monkeypatch.delenv(INTERRUPT_ENV)
    assert stopped.returncode == 130, stopped.stderr
    run_dir = only_run_dir(runs)
    assert int(load_checkpoint(run_dir / "checkpoint.pkl")["progress"]["step"]) == 4
    harness_cli("resume", str(run_dir))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    assert diff_metrics(reference["metrics"], record["metrics"], "uninterrupted", "resumed") == []
    np.testing.assert_array_equal(
        np.load(run_dir / "final_params.npy"),
        np.load(only_run_dir(tmp_path / "straight") / "final_params.npy"),
    )
