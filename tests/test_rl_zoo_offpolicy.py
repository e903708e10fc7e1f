"""SAC, TD3, TQC and RecurrentPPO at rl-baselines3-zoo's settings, as the models see them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.config import complete_config
from tests.test_rl_settings import _algorithm


def _budget(algo: str, env: str) -> Any:
    config = complete_config({"algo": algo, "env": env, "seed": 0, "workers": 1})
    return config["timesteps"]


@pytest.mark.parametrize("algo", ["sac", "tqc"])
def test_ant_sac_and_tqc_take_the_zoos_pybullet_defaults(algo: str) -> None:
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    algorithm = _algorithm(algo, "AntBulletEnv")
    try:
        model = algorithm.model
        assert not isinstance(model.env, VecNormalize) and model.n_envs == 1
        assert model.learning_rate == pytest.approx(7.3e-4)
        assert (model.buffer_size, model.batch_size, model.learning_starts) == (300000, 256, 10000)
        assert (model.gamma, model.tau, model.gradient_steps) == (0.98, 0.02, 8)
        assert model.train_freq.frequency == 8 and model.ent_coef == "auto"
        assert model.use_sde and model.policy.actor.use_sde
        assert float(model.policy.actor.log_std.detach().mean()) == pytest.approx(-3.0)
        assert model.policy.net_arch == [400, 300] and model.policy.activation_fn is nn.ReLU
        if algo == "tqc":
            assert model.top_quantiles_to_drop_per_net == 2
            assert model.critic.n_quantiles == 25 and model.critic.n_critics == 2
    finally:
        algorithm.close()
    assert _budget(algo, "AntBulletEnv") == 1_000_000  # the zoo's n_timesteps, not the env's 5M


def test_lander_td3_takes_the_zoos_entry_with_its_gaussian_action_noise() -> None:
    from stable_baselines3.common.noise import NormalActionNoise

    algorithm = _algorithm("td3", "LunarLanderContinuous")
    try:
        model = algorithm.model
        assert isinstance(model.action_noise, NormalActionNoise)
        np.testing.assert_array_equal(model.action_noise._sigma, [0.1, 0.1])
        assert (model.gamma, model.buffer_size, model.learning_starts) == (0.98, 200000, 10000)
        assert model.learning_rate == pytest.approx(1e-3) and model.policy.net_arch == [400, 300]
    finally:
        algorithm.close()
    assert _budget("td3", "LunarLanderContinuous") == 300_000


@pytest.mark.slow
def test_lander_sac_learning_rate_decays_over_the_zoos_budget() -> None:
    algorithm = _algorithm("sac", "LunarLanderContinuous", buffer_size=1000)
    try:
        assert algorithm.model.lr_schedule(1.0) == pytest.approx(7.3e-4)
        assert algorithm.model.lr_schedule(0.5) == pytest.approx(7.3e-4 / 2)
        assert algorithm.model.schedule_timesteps == 500_000
    finally:
        algorithm.close()


def test_pendulum_po_recurrent_ppo_is_the_zoos_pendulum_novel_entry() -> None:
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    algorithm = _algorithm("recurrent-ppo", "PendulumPO")
    try:
        model = algorithm.model
        policy = model.policy
        assert isinstance(policy, RecurrentActorCriticPolicy)
        assert isinstance(model.env, VecNormalize)
        assert (model.n_envs, model.n_steps, model.batch_size, model.n_epochs) == (4, 1024, 128, 10)
        assert (model.gamma, model.gae_lambda, model.learning_rate) == (0.9, 0.95, 1e-3)
        assert model.use_sde and model.sde_sample_freq == 4
        assert policy.lstm_actor.hidden_size == 64 and policy.lstm_critic is not None
        assert policy.net_arch == {"pi": [64], "vf": [64]} and policy.activation_fn is nn.ReLU
        assert policy.ortho_init is False
        assert model.observation_space.shape == (3,)  # velocity zeroed, not dropped
        returns = algorithm.evaluate_policy([5, 6])  # the LSTM state carried through
        assert returns.shape == (2,) and np.isfinite(returns).all()
    finally:
        algorithm.close()
    assert _budget("recurrent-ppo", "PendulumPO") == 100_000


def test_off_policy_algorithms_refuse_a_discrete_env() -> None:
    with pytest.raises(ValueError, match="Box"):
        _algorithm("sac", "CartPole")
