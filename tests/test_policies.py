"""Numpy policies: parameter counts, layout equivalence with torch, heads and specs."""

from __future__ import annotations

import itertools
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from envs import PolicySpec, build_policy, make_env, policy_spec_for
from envs.policies import FeedForwardPolicy, LSTMPolicy

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("env_name", "kind", "hidden", "expected"),
    [
        ("LunarLanderContinuous", "linear", (), 18),
        ("AntBulletEnv", "mlp", (64, 64), 6536),
        ("PendulumPO", "lstm", (16,), 1361),
    ],
)
def test_goodai_param_counts(
    env_name: str, kind: str, hidden: tuple[int, ...], expected: int
) -> None:
    env = make_env(env_name)
    spec = policy_spec_for(env, kind, hidden)  # type: ignore[arg-type]
    env.close()
    policy = build_policy(spec)
    assert spec.num_params == policy.num_params == expected
    params = policy.init_params(np.random.default_rng(0))
    assert params.shape == (expected,) and params.dtype == np.float32


def _box_spec(
    kind: str, hidden: tuple[int, ...], obs_dim: int, act_dim: int, activation: str = "tanh"
) -> PolicySpec:
    return PolicySpec(
        kind=kind,  # type: ignore[arg-type]
        hidden_sizes=hidden,
        activation=activation,  # type: ignore[arg-type]
        obs_dim=obs_dim,
        action_kind="box",
        action_dim=act_dim,
        action_low=(-2.0,) * act_dim,
        action_high=(2.0,) * act_dim,
    )


def _random_params(n: int, seed: int, scale: float = 0.4) -> np.ndarray:
    return (scale * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


def _obs_stats(obs_dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.normal(0.0, 1.0, obs_dim), rng.uniform(0.5, 2.0, obs_dim)


def _normalised(obs: np.ndarray, mean: np.ndarray, std: np.ndarray, clip: float) -> torch.Tensor:
    x = torch.as_tensor(obs, dtype=torch.float32) - torch.as_tensor(mean, dtype=torch.float32)
    x = x / torch.as_tensor(std, dtype=torch.float32)
    return torch.clamp(x, -clip, clip)


@pytest.mark.parametrize(
    ("hidden", "activation"),
    [((64, 64), "tanh"), ((32,), "relu"), ((), "tanh")],
)
def test_feedforward_matches_torch(hidden: tuple[int, ...], activation: str) -> None:
    obs_dim, act_dim = 28, 8
    spec = _box_spec("mlp" if hidden else "linear", hidden, obs_dim, act_dim, activation)
    policy = build_policy(spec)
    assert isinstance(policy, FeedForwardPolicy)
    flat = _random_params(policy.num_params, 1)
    mean, std = _obs_stats(obs_dim)
    policy.set_params(flat, mean, std)

    sizes = [obs_dim, *hidden, act_dim]
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(n_in, n_out))
        if k < len(sizes) - 2:
            layers.append(nn.Tanh() if activation == "tanh" else nn.ReLU())
    net = nn.Sequential(*layers)
    nn.utils.vector_to_parameters(torch.from_numpy(flat.copy()), net.parameters())
    assert sum(p.numel() for p in net.parameters()) == policy.num_params

    rng = np.random.default_rng(2)
    with torch.no_grad():
        for _ in range(50):
            obs = rng.normal(0.0, 3.0, obs_dim).astype(np.float32)
            ref = net(_normalised(obs, mean, std, spec.obs_clip)).numpy()
            np.testing.assert_allclose(policy.forward(obs), ref, rtol=1e-5, atol=1e-5)
            action = policy.act(obs)
            assert isinstance(action, np.ndarray)
            np.testing.assert_allclose(action, 2.0 * np.tanh(ref), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden", [(16,), (8, 8)])
def test_lstm_matches_torch(hidden: tuple[int, ...]) -> None:
    obs_dim, act_dim = 3, 1
    spec = _box_spec("lstm", hidden, obs_dim, act_dim)
    policy = build_policy(spec)
    assert isinstance(policy, LSTMPolicy)
    mean, std = _obs_stats(obs_dim)
    lstm = nn.LSTM(obs_dim, hidden[0], num_layers=len(hidden))
    head = nn.Linear(hidden[-1], act_dim)
    params = list(lstm.parameters()) + list(head.parameters())
    assert sum(p.numel() for p in params) == policy.num_params

    rng = np.random.default_rng(3)
    for flat in (
        _random_params(policy.num_params, 4, scale=0.5),
        policy.init_params(np.random.default_rng(5)),
    ):
        policy.set_params(flat, mean, std)
        nn.utils.vector_to_parameters(torch.from_numpy(flat.copy()), params)
        state = None
        with torch.no_grad():
            for t in range(60):
                if t == 30:  # a new episode: both start from zero state
                    policy.reset()
                    state = None
                obs = rng.normal(0.0, 2.0, obs_dim).astype(np.float32)
                x = _normalised(obs, mean, std, spec.obs_clip).reshape(1, 1, obs_dim)
                out, state = lstm(x, state)
                ref = head(out[0, 0]).numpy()
                np.testing.assert_allclose(policy.forward(obs), ref, rtol=1e-5, atol=1e-5)


def test_init_params_openai_normc() -> None:
    spec = _box_spec("mlp", (64, 64), 28, 8)
    policy = build_policy(spec)
    flat = policy.init_params(np.random.default_rng(0))
    blocks = policy.split_params(flat)
    np.testing.assert_allclose(np.linalg.norm(blocks["l0.weight"], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(blocks["l1.weight"], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(blocks["out.weight"], axis=1), 0.01, rtol=1e-5)
    for name in ("l0.bias", "l1.bias", "out.bias"):
        assert not blocks[name].any()
    again = policy.init_params(np.random.default_rng(0))
    np.testing.assert_array_equal(flat, again)

    lstm = build_policy(_box_spec("lstm", (16,), 3, 1))
    lflat = lstm.init_params(np.random.default_rng(0))
    lblocks = lstm.split_params(lflat)
    assert np.abs(lblocks["lstm0.weight_ih"]).max() <= 0.25
    assert np.abs(lblocks["lstm0.bias_hh"]).max() <= 0.25
    np.testing.assert_allclose(np.linalg.norm(lblocks["out.weight"], axis=1), 0.01, rtol=1e-5)


@pytest.mark.parametrize("kind", ["linear", "mlp", "lstm"])
def test_init_params_torch_is_nn_linears_uniform_bound(kind: str) -> None:
    hidden = {"linear": (), "mlp": (64, 64), "lstm": (16,)}[kind]
    spec = PolicySpec(**{**_box_spec(kind, hidden, 28, 8).to_dict(), "init": "torch"})
    policy = build_policy(spec)
    flat = policy.init_params(np.random.default_rng(0))
    blocks = policy.split_params(flat)
    fan_ins = {"out": hidden[-1] if hidden else 28, "l0": 28, "l1": 64}
    for name, block in blocks.items():
        layer = name.partition(".")[0]
        bound = 1 / np.sqrt(fan_ins.get(layer, 16))  # lstm0: torch's 1/sqrt(hidden)
        assert np.abs(block).max() <= bound and np.abs(block).max() > 0.5 * bound, name
    linear = nn.Linear(fan_ins["out"], 8)  # what PyTorch itself draws for the output layer
    torch_bound = float(torch.cat([linear.weight.flatten(), linear.bias]).detach().abs().max())
    assert 0.75 / np.sqrt(fan_ins["out"]) < torch_bound <= 1 / np.sqrt(fan_ins["out"])
    assert spec.describe().count("init=torch") == 1
    assert PolicySpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="policy init must be one of"):
        PolicySpec(**{**spec.to_dict(), "init": "xavier"})


def test_discrete_head_and_discretized_box() -> None:
    env = gym.make("CartPole-v1")
    spec = policy_spec_for(env, "mlp", (8,))
    assert spec.action_kind == "discrete" and spec.action_dim == 2
    policy = build_policy(spec)
    policy.set_params(_random_params(policy.num_params, 0))
    action = policy.act(np.zeros(4, dtype=np.float32))
    assert isinstance(action, int) and action in (0, 1)

    box = PolicySpec(
        kind="linear",
        hidden_sizes=(),
        activation="tanh",
        obs_dim=4,
        action_kind="box",
        action_dim=3,
        action_low=(-1.0, 0.0, -2.0),
        action_high=(1.0, 1.0, 2.0),
        discretize=5,
    )
    disc = build_policy(box)
    assert disc.num_params == 15  # same as continuous
    levels = [
        np.linspace(lo, hi, 5) for lo, hi in zip(box.action_low, box.action_high, strict=True)
    ]
    rng = np.random.default_rng(1)
    for _ in range(20):
        disc.set_params(_random_params(15, int(rng.integers(1000)), scale=3.0))
        a = disc.act(rng.normal(size=4).astype(np.float32))
        assert isinstance(a, np.ndarray)
        for value, lv in zip(a, levels, strict=True):
            assert np.min(np.abs(lv - value)) < 1e-6


def test_box_actions_respect_bounds_and_noise_clip() -> None:
    spec = PolicySpec(
        kind="linear",
        hidden_sizes=(),
        activation="tanh",
        obs_dim=2,
        action_kind="box",
        action_dim=2,
        action_low=(-0.4, 1.0),
        action_high=(0.4, 3.0),
    )
    policy = build_policy(spec)
    policy.set_params(_random_params(policy.num_params, 0, scale=10.0))
    obs = np.array([1.0, -1.0], dtype=np.float32)
    a = policy.act(obs)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    assert np.all(a >= np.array([-0.4, 1.0], np.float32)) and np.all(
        a <= np.array([0.4, 3.0], np.float32)
    )
    noisy = policy.act(obs, np.array([100.0, -100.0]))
    assert isinstance(noisy, np.ndarray)
    np.testing.assert_allclose(noisy, [0.4, 1.0])


def test_observation_clip_and_stats_validation() -> None:
    spec = PolicySpec(
        kind="linear",
        hidden_sizes=(),
        activation="tanh",
        obs_dim=2,
        action_kind="box",
        action_dim=1,
        action_low=(-1.0,),
        action_high=(1.0,),
    )
    policy = build_policy(spec)
    flat = np.array([1.0, 0.0, 0.0], dtype=np.float32)  # output = first normalised input
    policy.set_params(flat, np.array([1.0, 0.0]), np.array([2.0, 1.0]))
    assert policy.forward(np.array([5.0, 0.0]))[0] == pytest.approx(2.0)
    assert policy.forward(np.array([1e6, 0.0]))[0] == pytest.approx(5.0)  # clipped
    assert policy.forward(np.array([-1e6, 0.0]))[0] == pytest.approx(-5.0)
    with pytest.raises(ValueError, match="shape"):
        policy.set_params(flat, np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="positive"):
        policy.set_params(flat, np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="parameters"):
        policy.set_params(np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        policy.set_params(np.array([np.nan, 0, 0], dtype=np.float32))


def test_spec_roundtrip_and_validation() -> None:
    env = make_env("LunarLanderContinuous")
    spec = policy_spec_for(env, "mlp", (32, 16), "relu", discretize=7)
    data = json.loads(json.dumps(spec.to_dict()))
    assert PolicySpec.from_dict(data) == spec
    assert spec.describe() == "mlp 8-32-16-2 relu, box(2) discretize=7, 850 params"
    with pytest.raises(ValueError, match="unknown PolicySpec fields"):
        PolicySpec.from_dict({**data, "bogus": 1})
    with pytest.raises(ValueError, match="hidden"):
        PolicySpec(
            kind="mlp",
            hidden_sizes=(),
            activation="tanh",
            obs_dim=2,
            action_kind="discrete",
            action_dim=2,
        )
    with pytest.raises(ValueError, match="discretize"):
        PolicySpec(
            kind="linear",
            hidden_sizes=(),
            activation="tanh",
            obs_dim=2,
            action_kind="discrete",
            action_dim=2,
            discretize=3,
        )
    with pytest.raises(ValueError, match="policy kind"):
        PolicySpec(
            kind="gru",  # type: ignore[arg-type]
            hidden_sizes=(4,),
            activation="tanh",
            obs_dim=2,
            action_kind="discrete",
            action_dim=2,
        )


def test_unsupported_spaces_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="1-D Box observation space; Taxi-v4"):
        policy_spec_for(gym.make("Taxi-v4"), "linear")
    with pytest.raises(ValueError, match="1-D Box observation space; Blackjack-v1"):
        policy_spec_for(gym.make("Blackjack-v1"), "mlp")


def _reference_act(policy: FeedForwardPolicy, obs: np.ndarray, noise: np.ndarray | None) -> object:
    """The feed-forward action computed op by op as the policy did before its step function
    (np.matmul, np.minimum then np.maximum): the bits the step function must keep."""
    x = obs.astype(np.float32)
    if policy._normalize:
        x = np.subtract(obs, policy._obs_mean).astype(np.float32)
        x = np.divide(x, policy._obs_std)
    x = np.maximum(np.minimum(x, policy._clip_hi), policy._clip_lo)
    h = np.append(x, np.float32(1))
    for w in policy._mats[:-1]:
        z = np.matmul(w, h)
        z = np.maximum(z, np.float32(0)) if policy._relu else np.tanh(z)
        h = np.append(z, np.float32(1))
    y = np.matmul(policy._mats[-1], h)
    return policy._head(y, noise)


@pytest.mark.parametrize(
    ("env_id", "kind", "activation", "discretize"),
    [
        ("LunarLanderContinuous-v3", "linear", "tanh", 0),
        ("LunarLanderContinuous-v3", "mlp", "relu", 0),
        ("Pendulum-v1", "mlp", "tanh", 0),
        ("Pendulum-v1", "linear", "tanh", 5),
        ("CartPole-v1", "mlp", "tanh", 0),
    ],
)
def test_the_step_function_acts_as_act_bit_for_bit(
    env_id: str, kind: str, activation: str, discretize: int
) -> None:
    env = gym.make(env_id)
    spec = policy_spec_for(env, kind, (16, 8), activation, discretize)  # type: ignore[arg-type]
    policy = build_policy(spec)
    assert isinstance(policy, FeedForwardPolicy)
    rng = np.random.default_rng(3)
    params = policy.init_params(rng) + rng.normal(0, 0.5, spec.num_params).astype(np.float32)
    box = spec.action_kind == "box"
    for stats in (None, (rng.normal(size=spec.obs_dim), rng.uniform(0.1, 3, spec.obs_dim))):
        policy.set_params(params, *(stats or (None, None)))
        act = policy.actor()
        for scale in (0.1, 1.0, 30.0):  # the last beyond the observation clip
            obs = (rng.normal(size=spec.obs_dim) * scale).astype(np.float32)
            noise = rng.normal(0, 0.3, spec.action_dim) if box else None
            for n in (None, noise):
                got, want = act(obs, n), _reference_act(policy, obs, n)
                assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
                assert np.asarray(policy.act(obs, n)).tobytes() == np.asarray(want).tobytes()
