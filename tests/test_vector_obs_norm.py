"""Observation normalisation for the vector family (cma, Nevergrad), as optimes has it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.config import build_run_config, complete_config
from harness.runner import build_algorithm

#: the statistics start at count eps (mean 0, std 1): envs.obs_norm.RunningStat
EPS = 1e-2


def _algorithm(algo: str, *sets: str) -> Any:
    base = {
        "algo": algo, "env": "Pendulum", "seed": 4, "episodes": 1, "workers": 1,
        "backend": "inline", "generations": 3,
    }  # fmt: skip
    config = build_run_config(base, source="given", overrides=["population=6", *sets])
    return build_algorithm(config.config)


@pytest.mark.parametrize("algo", ["cma", "nevergrad-es"])
def test_on_every_rollout_feeds_the_statistics_the_next_generation_is_normalised_by(
    algo: str,
) -> None:
    algorithm = _algorithm(algo, "obs_norm=true", "obs_fraction=1.0")
    try:
        first = algorithm.codec.target()
        np.testing.assert_array_equal(first.obs_mean, np.zeros(3, np.float32))
        np.testing.assert_array_equal(first.obs_std, np.ones(3, np.float32))
        tasks = algorithm.codec.tasks(
            [np.zeros(algorithm.initial.size)] * 6, np.random.default_rng(0)
        )
        assert all(task.collect_obs for task in tasks)
        record = algorithm.step()
        # every step of every rollout counted, once
        assert algorithm.run.obs_stat.count == pytest.approx(EPS + record.timesteps)
        after = algorithm.codec.target()
        np.testing.assert_array_equal(
            after.obs_mean, algorithm.run.obs_stat.mean.astype(np.float32)
        )
        assert np.abs(after.obs_mean).max() > 0.05 and not np.allclose(after.obs_std, 1.0)
        policy_target = algorithm.codec.policy_target()
        np.testing.assert_array_equal(policy_target.obs_std, after.obs_std)
        facts = algorithm.artifacts()
        assert facts["obs_mean"] == after.obs_mean.tolist()  # the stored policy's statistics
        state = algorithm.state_dict()
        expected = algorithm.step().fitness_mean
    finally:
        algorithm.close()
    resumed = _algorithm(algo, "obs_norm=true", "obs_fraction=1.0")
    try:
        resumed.load_state_dict(state)
        np.testing.assert_array_equal(resumed.run.obs_stat.sum, state["obs_stat"]["sum"])
        assert resumed.step().fitness_mean == expected  # the same next generation, bitwise
    finally:
        resumed.close()


def test_off_is_raw_observations_and_the_statistics_stay_untouched() -> None:
    algorithm = _algorithm("cma")
    try:
        assert algorithm.config.obs_norm is False
        tasks = algorithm.codec.tasks(
            [np.zeros(algorithm.initial.size)] * 6, np.random.default_rng(0)
        )
        assert not any(task.collect_obs for task in tasks)
        algorithm.step()
        target = algorithm.codec.target()
        assert target.obs_mean is None and target.obs_std is None
        assert algorithm.run.obs_stat.count == EPS  # no rollout fed the statistics
        assert "obs_mean" not in algorithm.artifacts()
    finally:
        algorithm.close()


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    from harness.config import ConfigError

    with pytest.raises(ConfigError, match="obs_fraction must be in"):
        _algorithm("nevergrad-es", "obs_norm=true", "obs_fraction=1.5")


@pytest.mark.parametrize("env", ["HalfCheetah-v5", "Hopper-v5", "Ant-v5"])
def test_every_benchmark_es_normalises_observations_on_mujoco_where_optimes_does(env: str) -> None:
    def params(algo: str) -> dict[str, Any]:
        config = complete_config({"algo": algo, "env": env, "seed": 100, "workers": 1})
        return dict(config["params"])

    assert params("optimes")["obs_norm"] is True
    for algo in ("cma", "nevergrad-es", "pgpe", "snes"):
        assert (params(algo)["obs_norm"], params(algo)["obs_fraction"]) == (True, 1.0), algo
