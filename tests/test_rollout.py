"""Rollouts: determinism, step caps, observation statistics, non-finite detection."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import pytest

from envs import (
    NonFiniteError,
    PolicySpec,
    RolloutWorker,
    build_policy,
    make_env,
    policy_spec_for,
)


def _spec(env_name: str, kind: str = "linear", hidden: tuple[int, ...] = ()) -> PolicySpec:
    env = make_env(env_name)
    spec = policy_spec_for(env, kind, hidden)  # type: ignore[arg-type]
    env.close()
    return spec


def _params(spec: PolicySpec, seed: int, scale: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal(spec.num_params)).astype(np.float32)


@pytest.mark.parametrize(
    ("env_name", "kind", "hidden"),
    [("LunarLanderContinuous", "linear", ()), ("CartPole", "mlp", (16,))],
)
def test_same_inputs_give_bitwise_identical_returns(
    env_name: str, kind: str, hidden: tuple[int, ...]
) -> None:
    spec = _spec(env_name, kind, hidden)
    params = _params(spec, 0)
    mean = np.linspace(-0.5, 0.5, spec.obs_dim)
    std = np.linspace(0.5, 2.0, spec.obs_dim)
    seeds = [11, 12, 13]
    first = RolloutWorker(env_name, spec)
    second = RolloutWorker(env_name, spec)
    a = first.run(params, mean, std, seeds, max_steps=400)
    second.run(_params(spec, 1), None, None, [99], max_steps=50)  # history must not matter
    b = second.run(params, mean, std, seeds[::-1], max_steps=400)
    c = first.run(params, mean, std, seeds, max_steps=400)
    assert a.returns.dtype == np.float64 and a.lengths.dtype == np.int64
    assert np.array_equal(a.returns, b.returns[::-1])
    assert np.array_equal(a.returns, c.returns)
    assert np.array_equal(a.lengths, c.lengths)
    assert a.steps == int(a.lengths.sum())
    if spec.action_kind == "box":  # CartPole returns are small integers and may coincide
        d = first.run(params, mean, std, [14], max_steps=400)
        assert d.returns[0] != a.returns[0]  # seeds do matter


def test_max_steps_cap_and_env_time_limit() -> None:
    spec = _spec("Pendulum")
    worker = RolloutWorker("Pendulum", spec)
    params = _params(spec, 0)
    capped = worker.run(params, None, None, [1, 2], max_steps=37)
    assert capped.lengths.tolist() == [37, 37] and capped.steps == 74
    full = worker.run(params, None, None, [1], max_steps=None)
    assert full.lengths.tolist() == [200]  # Pendulum-v1's TimeLimit
    longer = worker.run(params, None, None, [1], max_steps=500)
    assert longer.lengths.tolist() == [200]
    lunar = RolloutWorker("LunarLanderContinuous", _spec("LunarLanderContinuous"))
    batch = lunar.run(_params(lunar.spec, 3), None, None, [5, 6, 7], max_steps=25)
    assert batch.lengths.max() <= 25
    with pytest.raises(ValueError, match="max_steps"):
        worker.run(params, None, None, [1], max_steps=0)


def test_observation_stats_match_manual_rollout() -> None:
    spec = _spec("LunarLanderContinuous")
    params = _params(spec, 4)
    mean = np.full(spec.obs_dim, 0.1)
    std = np.full(spec.obs_dim, 0.8)
    seeds = [21, 22]
    worker = RolloutWorker("LunarLanderContinuous", spec)
    batch = worker.run(params, mean, std, seeds, max_steps=120, collect_obs=True)

    env = make_env("LunarLanderContinuous")
    policy = build_policy(spec)
    policy.set_params(params, mean, std)
    seen: list[np.ndarray] = []
    returns: list[float] = []
    for seed in seeds:
        policy.reset()
        obs, _ = env.reset(seed=seed)
        total = 0.0
        for _ in range(120):
            seen.append(np.asarray(obs, dtype=np.float64))
            obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
            total += float(reward)
            if terminated or truncated:
                break
        returns.append(total)
    observed = np.stack(seen)
    assert batch.obs_count == len(seen) == batch.steps
    assert batch.obs_sum is not None and batch.obs_sumsq is not None
    np.testing.assert_allclose(batch.obs_sum, observed.sum(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(batch.obs_sumsq, np.square(observed).sum(0), rtol=1e-12)
    assert batch.returns.tolist() == returns

    plain = worker.run(params, mean, std, seeds, max_steps=120)
    assert plain.obs_sum is None and plain.obs_sumsq is None and plain.obs_count == 0
    assert np.array_equal(plain.returns, batch.returns)


def test_action_noise_is_seeded() -> None:
    spec = _spec("LunarLanderContinuous")
    worker = RolloutWorker("LunarLanderContinuous", spec)
    params = _params(spec, 5)
    clean = worker.run(params, None, None, [1, 2], max_steps=100)
    a = worker.run(params, None, None, [1, 2], 100, False, 0.3, 123)
    b = worker.run(params, None, None, [1, 2], 100, False, 0.3, 123)
    c = worker.run(params, None, None, [1, 2], 100, False, 0.3, 124)
    assert np.array_equal(a.returns, b.returns)
    assert not np.array_equal(a.returns, c.returns)
    assert not np.array_equal(a.returns, clean.returns)
    with pytest.raises(ValueError, match="seed"):
        worker.run(params, None, None, [1], 10, False, 0.3, None)
    cart = RolloutWorker("CartPole", _spec("CartPole"))
    with pytest.raises(ValueError, match="Box"):
        cart.run(_params(cart.spec, 0), None, None, [1], 10, False, 0.1, 1)


def test_spec_must_fit_env() -> None:
    with pytest.raises(ValueError, match="does not fit CartPole-v1"):
        RolloutWorker("CartPole", _spec("LunarLanderContinuous"))


class _Corrupt(gym.Wrapper[Any, Any, Any, Any]):
    """Replace the observation or reward at one step with a non-finite value."""

    def __init__(self, env: gym.Env[Any, Any], at_step: int, what: str, value: float) -> None:
        super().__init__(env)
        self.at_step, self.what, self.value = at_step, what, value
        self.t = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.t == self.at_step:
            if self.what == "obs":
                obs = np.array(obs, copy=True)
                obs[1] = self.value
            else:
                reward = self.value
        return obs, reward, terminated, truncated, info


def _register(env_id: str, at_step: int, what: str, value: float) -> None:
    if env_id not in gym.registry:
        gym.register(
            id=env_id,
            entry_point=lambda **kw: _Corrupt(gym.make("Pendulum-v1", **kw), at_step, what, value),
            max_episode_steps=200,
        )


@pytest.mark.parametrize(
    ("env_id", "at_step", "what", "value", "message"),
    [
        ("TestNaNReward-v0", 5, "reward", float("nan"), "non-finite reward nan"),
        ("TestNaNObs-v0", 7, "obs", float("nan"), "non-finite observation"),
        ("TestInfObs-v0", 3, "obs", float("inf"), "non-finite observation"),
    ],
)
def test_non_finite_values_raise(
    env_id: str, at_step: int, what: str, value: float, message: str
) -> None:
    _register(env_id, at_step, what, value)
    worker = RolloutWorker(env_id, _spec("Pendulum", "mlp", (8,)))
    params = _params(worker.spec, 0)
    with pytest.raises(NonFiniteError) as info:
        worker.run(params, None, None, [3, 4], max_steps=50)
    err = info.value
    # A corrupted step-k reward happens at step index k-1; a step-k observation is row k.
    expected_step = at_step - 1 if what == "reward" else at_step
    assert (err.env_id, err.seed, err.step) == (env_id, 3, expected_step)
    assert message in str(err)
    assert f"'{env_id}' (episode seed 3) at step {expected_step}" in str(err)
