"""Training-reward transforms: parsing, the reward they give on real envs, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs.registry import make_env
from envs.reward_shaping import RewardTransform, RewardTransformError, shape_training_reward
from tests.conftest import harness_cli


def _play(env_name: str, transform: str, steps: int, seed: int = 3) -> list[tuple[float, ...]]:
    """(shaped, env reward, plain env reward, terminated) per step on twin envs, same actions."""
    shaped_env = shape_training_reward(make_env(env_name), transform)
    plain_env = make_env(env_name)
    rng = np.random.default_rng(seed)
    rows: list[tuple[float, ...]] = []
    try:
        shaped_env.reset(seed=seed)
        plain_env.reset(seed=seed)
        for _ in range(steps):
            action = rng.uniform(-1, 1, size=shaped_env.action_space.shape)
            _, shaped, term, trunc, info = shaped_env.step(action)
            _, plain, *_ = plain_env.step(action)
            rows.append((float(shaped), info["env_reward"], float(plain), float(term)))
            if term or trunc:
                break
    finally:
        shaped_env.close()
        plain_env.close()
    return rows


def test_shift_subtracts_a_constant_and_keeps_the_env_reward() -> None:
    rows = _play("LunarLanderContinuous", "shift:2.5", 50)
    for shaped, env_reward, plain, _ in rows:
        assert env_reward == plain
        assert shaped == pytest.approx(plain - 2.5)


def test_locomotion_rebuilds_ant_reward_from_its_parts() -> None:
    env = shape_training_reward(make_env("AntBulletEnv"), "locomotion:alive=0.25,costs=0.5,fall=7")
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=1)
        for _ in range(40):
            _, shaped, terminated, truncated, info = env.step(rng.uniform(-1, 1, size=8))
            alive, progress, *costs = env.unwrapped.rewards  # type: ignore[attr-defined]
            expected = progress + 0.25 * alive + 0.5 * sum(costs) - (7.0 if terminated else 0.0)
            assert shaped == pytest.approx(expected)
            assert info["env_reward"] == pytest.approx(alive + progress + sum(costs))
            if terminated or truncated:
                break
    finally:
        env.close()


def test_locomotion_with_everything_kept_is_the_env_reward() -> None:
    rows = _play("AntBulletEnv", "locomotion:alive=1,costs=1,fall=0", 30)
    assert rows and all(shaped == pytest.approx(plain) for shaped, _, plain, _ in rows)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("shift:x", "shift takes a number"),
        ("locomotion:speed=1", "unknown part 'speed=1'"),
        ("locomotion:fall=abc", "fall must be a number"),
        ("sparse", "unknown reward_transform 'sparse'"),
    ],
)
def test_bad_transforms_name_the_bad_part(text: str, fragment: str) -> None:
    with pytest.raises(RewardTransformError, match=fragment):
        RewardTransform.parse(text)


def test_locomotion_refuses_an_env_whose_reward_it_cannot_split() -> None:
    with pytest.raises(RewardTransformError, match="CartPole-v1"):
        RewardTransform.parse("locomotion").check_env("CartPole-v1")


def test_a_bad_transform_exits_2_and_writes_no_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = harness_cli(
        "run",
        "--algo",
        "ppo",
        "--env",
        "CartPole",
        "--generations",
        "1",
        "--runs-dir",
        str(runs),
        "--set",
        "reward_transform=locomotion",
        check=False,
    )
    assert done.returncode == 2
    assert "CartPole-v1" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not [p for p in runs.glob("*") if p.name.isdigit()]
