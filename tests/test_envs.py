"""Environment registry, wrappers, quiet construction and observation statistics."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envs import (
    ENV_ALIASES,
    ENVS,
    EnvEntry,
    RunningStat,
    UnknownEnvError,
    ZeroVelocityPendulum,
    canonical_env_name,
    list_envs,
    make_env,
    resolve_env_id,
)


def test_aliases_resolve_to_gym_ids() -> None:
    assert resolve_env_id("AntBulletEnv") == "AntBulletEnv-v0"
    assert resolve_env_id("LunarLanderContinuous") == "LunarLanderContinuous-v3"
    assert resolve_env_id("PendulumPO") == "Pendulum-v1"
    assert resolve_env_id("Pendulum") == "Pendulum-v1"
    assert resolve_env_id("CartPole") == "CartPole-v1"
    assert resolve_env_id("Ant") == "Ant-v5"
    assert resolve_env_id("Humanoid") == "Humanoid-v5"
    assert resolve_env_id("HalfCheetah") == "HalfCheetah-v5"


def test_registered_ids_pass_through() -> None:
    assert resolve_env_id("Acrobot-v1") == "Acrobot-v1"
    assert resolve_env_id("LunarLanderContinuous-v3") == "LunarLanderContinuous-v3"
    assert resolve_env_id("HopperBulletEnv-v0") == "HopperBulletEnv-v0"  # registered on demand


def test_canonical_names() -> None:
    assert canonical_env_name("antbulletenv") == "AntBulletEnv"
    assert canonical_env_name("AntBulletEnv-v0") == "AntBulletEnv"
    assert canonical_env_name("Pendulum-v1") == "Pendulum"
    assert canonical_env_name("PendulumPO") == "PendulumPO"
    assert canonical_env_name("Acrobot-v1") == "Acrobot-v1"


def test_list_envs_covers_aliases() -> None:
    rows = list_envs()
    assert [r[0] for r in rows] == list(ENV_ALIASES)
    assert all(r[1] == ENV_ALIASES[r[0]] and r[2] and "\n" not in r[2] for r in rows)


def test_unknown_name_is_one_line_with_close_matches() -> None:
    with pytest.raises(UnknownEnvError) as info:
        resolve_env_id("LunarLanderContinous")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("unknown environment 'LunarLanderContinous'; did you mean: ")
    assert "LunarLanderContinuous" in info.value.suggestions
    assert "known short names: AntBulletEnv, " in msg
    assert isinstance(info.value, ValueError)


def test_unknown_name_suggests_registry_ids() -> None:
    with pytest.raises(UnknownEnvError) as info:
        make_env("Acrobot-v9")
    assert "Acrobot-v1" in info.value.suggestions


def test_unknown_name_without_matches() -> None:
    with pytest.raises(UnknownEnvError, match=r"^unknown environment 'zzzz'; known short names"):
        make_env("zzzz")


def test_pendulum_po_zeroes_velocity() -> None:
    env = make_env("PendulumPO")
    assert isinstance(env, ZeroVelocityPendulum)
    assert env.observation_space.shape == (3,)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (3,) and obs[2] == 0.0
    plain = make_env("Pendulum")
    plain_obs, _ = plain.reset(seed=3)
    np.testing.assert_array_equal(obs[:2], plain_obs[:2])
    for _ in range(20):
        obs, *_ = env.step(np.array([2.0], dtype=np.float32))
        plain_obs, *_ = plain.step(np.array([2.0], dtype=np.float32))
        assert obs[2] == 0.0
        np.testing.assert_array_equal(obs[:2], plain_obs[:2])
    assert plain_obs[2] != 0.0


def test_zero_velocity_rejects_other_spaces() -> None:
    with pytest.raises(ValueError, match="shape"):
        ZeroVelocityPendulum(gym.make("CartPole-v1"))


def test_bullet_env_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    env = make_env("AntBulletEnv")
    obs, _ = env.reset(seed=0)
    env.step(env.action_space.sample())
    second = make_env("AntBulletEnv-v0")
    second.reset(seed=1)
    out, err = capfd.readouterr()
    assert "argv[0]" not in out
    assert "pybullet build time" not in err
    assert obs.shape == (28,)
    env.close()
    second.close()


def test_running_stat_openai_semantics() -> None:
    stat = RunningStat(3)
    np.testing.assert_allclose(stat.mean, 0.0)
    np.testing.assert_allclose(stat.std, 1.0)  # sumsq = count = eps initially
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=(500, 3))
    x[:, 2] = 7.0  # constant column: variance floored at 1e-2
    stat.increment(x[:200].sum(0), np.square(x[:200]).sum(0), 200)
    stat.increment(x[200:].sum(0), np.square(x[200:]).sum(0), 300)
    count = 500 + 1e-2
    mean = x.sum(0) / count
    var = (np.square(x).sum(0) + 1e-2) / count - mean**2
    np.testing.assert_allclose(stat.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(stat.std, np.sqrt(np.maximum(var, 1e-2)), rtol=1e-12)
    assert stat.std[2] == pytest.approx(0.1)  # floored
    assert stat.sum.dtype == np.float64


def test_running_stat_state_roundtrip() -> None:
    stat = RunningStat((2,))
    stat.increment(np.array([1.0, 2.0]), np.array([3.0, 5.0]), 4)
    state = stat.state_dict()
    other = RunningStat(2)
    other.load_state_dict(
        {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    )
    np.testing.assert_array_equal(other.mean, stat.mean)
    np.testing.assert_array_equal(other.std, stat.std)
    assert other.count == stat.count
    state["sum"][0] = 99.0  # state_dict holds copies
    assert stat.sum[0] == 1.0
    with pytest.raises(ValueError):
        RunningStat(3).load_state_dict(state)


@pytest.mark.parametrize("entry", ENVS, ids=lambda entry: entry.name)
def test_every_registered_env_builds_resets_and_steps(entry: EnvEntry) -> None:
    """The env table's contract: each row builds its id, and the same seed gives the same start."""
    env = entry.make()
    twin = entry.make()
    try:
        assert env.spec is not None and env.spec.id == entry.gym_id
        first, _ = env.reset(seed=5)
        again, _ = twin.reset(seed=5)
        np.testing.assert_array_equal(first, again)
        assert env.observation_space.contains(first.astype(env.observation_space.dtype))
        env.action_space.seed(0)
        obs, reward, *_ = env.step(env.action_space.sample())
        assert np.isfinite(reward) and np.isfinite(obs).all()
    finally:
        env.close()
        twin.close()


def test_ant_no_contact_is_ant_v5_without_the_contact_forces() -> None:
    full, proprio = make_env("Ant"), make_env("AntNoContact")
    try:
        assert full.observation_space.shape == (105,)
        assert proprio.observation_space.shape == (27,)
        assert proprio.spec is not None and proprio.spec.id == "Ant-v5"
        first, _ = full.reset(seed=3)
        second, _ = proprio.reset(seed=3)
        np.testing.assert_array_equal(first[:27], second)  # the same body state
    finally:
        full.close()
        proprio.close()
