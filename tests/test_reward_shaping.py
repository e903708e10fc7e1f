"""Training-reward transforms: parsing, the reward they give on real envs, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs.registry import make_env
from envs.reward_shaping import (
    RewardTransform,
    RewardTransformError,
    TrainingReward,
    shape_training_reward,
)
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


def test_limits_weighs_the_joints_at_limit_cost_on_its_own() -> None:
    transform = "locomotion:alive=0,costs=0.1,limits=1,fall=100"
    env = shape_training_reward(make_env("AntBulletEnv"), transform)
    rng = np.random.default_rng(0)
    at_limit = 0
    try:
        env.reset(seed=1)
        for _ in range(60):
            _, shaped, terminated, truncated, _ = env.step(rng.uniform(-1, 1, size=8))
            _, progress, electricity, limits, feet = env.unwrapped.rewards  # type: ignore[attr-defined]
            at_limit += limits != 0
            fall = 100.0 if terminated else 0.0
            assert shaped == pytest.approx(progress + 0.1 * (electricity + feet) + limits - fall)
            if terminated or truncated:
                break
    finally:
        env.close()
    assert at_limit  # random actions drive joints to their limits: the term was exercised


def test_locomotion_rebuilds_mujoco_ant_reward_from_its_info_parts() -> None:
    env = shape_training_reward(make_env("Ant"), "locomotion:alive=0.25,costs=0.5,fall=7")
    rng = np.random.default_rng(0)
    terminated = False
    try:
        env.reset(seed=1)
        for _ in range(300):
            _, shaped, terminated, truncated, info = env.step(rng.uniform(-1, 1, size=8))
            costs = info["reward_ctrl"] + info["reward_contact"]
            expected = info["reward_forward"] + 0.25 * info["reward_survive"] + 0.5 * costs
            assert shaped == pytest.approx(expected - (7.0 if terminated else 0.0))
            assert info["env_reward"] == pytest.approx(
                info["reward_forward"] + info["reward_survive"] + costs
            )
            if terminated or truncated:
                break
    finally:
        env.close()
    assert terminated  # random actions bounce Ant-v5 out of its z range: the fall was exercised


@pytest.mark.parametrize("env_name", ["AntBulletEnv", "Ant"])
def test_locomotion_with_everything_kept_is_the_env_reward(env_name: str) -> None:
    rows = _play(env_name, "locomotion:alive=1,costs=1,fall=0", 30)
    assert rows and all(shaped == pytest.approx(plain) for shaped, _, plain, _ in rows)


def test_anneal_moves_every_weight_to_the_env_reward_between_its_generations() -> None:
    transform = RewardTransform.parse("locomotion:alive=0,costs=0.1,fall=100,anneal=10:30")
    assert transform.anneal == (10, 30) and transform.anneal_timesteps is None
    assert transform.in_force(0, 0) == transform.in_force(10, 9_000_000)
    halfway = transform.in_force(20, 0)
    assert (halfway.alive, halfway.costs, halfway.limits, halfway.fall) == pytest.approx(
        (0.5, 0.55, 0.55, 50.0)
    )
    for generation in (30, 31, 500):
        done = transform.in_force(generation, 0)
        assert (done.alive, done.costs, done.limits, done.fall) == (1.0, 1.0, 1.0, 0.0)
    assert RewardTransform.parse("locomotion:fall=5").in_force(99, 10**9).fall == 5.0


def test_anneal_timesteps_moves_the_weights_by_timesteps_whatever_the_generation() -> None:
    transform = RewardTransform.parse(
        "locomotion:alive=0,costs=0.1,fall=100,anneal_timesteps=1e6:3000000"
    )
    assert transform.anneal_timesteps == (1_000_000, 3_000_000) and transform.anneal is None
    assert transform.in_force(500, 999_999) == transform.in_force(0, 0)
    for generation in (1, 40, 200):
        halfway = transform.in_force(generation, 2_000_000)
        assert (halfway.alive, halfway.costs, halfway.fall) == pytest.approx((0.5, 0.55, 50.0))
    done = transform.in_force(2, 3_000_000)
    assert (done.alive, done.costs, done.limits, done.fall) == (1.0, 1.0, 1.0, 0.0)


def test_an_annealed_ant_reward_is_the_env_reward_after_its_last_generation() -> None:
    env = make_env("AntBulletEnv")
    shaped_env = TrainingReward(
        env, RewardTransform.parse("locomotion:alive=0,costs=0.1,fall=100,anneal=0:4")
    )
    rng = np.random.default_rng(3)
    try:
        for generation, expect_env_reward in ((0, False), (4, True)):
            shaped_env.set_progress(generation, 0)
            shaped_env.reset(seed=2)
            for _ in range(25):
                _, shaped, *_ = shaped_env.step(rng.uniform(-1, 1, size=8))
                env_reward = sum(env.unwrapped.rewards)  # type: ignore[attr-defined]
                assert (shaped == pytest.approx(env_reward)) is expect_env_reward
    finally:
        shaped_env.close()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("shift:x", "shift takes a number"),
        ("locomotion:anneal=5", "anneal takes generations G0:G1"),
        ("locomotion:anneal=9:3", "got '9:3'"),
        ("locomotion:anneal=1e3:2e3", "anneal takes generations G0:G1"),
        ("locomotion:anneal_timesteps=5e6", "anneal_timesteps takes timesteps T0:T1"),
        ("locomotion:anneal_timesteps=2e6:1e6", "got '2e6:1e6'"),
        ("locomotion:anneal_timesteps=0:inf", "got '0:inf'"),
        ("locomotion:anneal=1:2,anneal_timesteps=0:9", "not both"),
        ("locomotion:speed=1", "unknown part 'speed=1'"),
        ("locomotion:fall=abc", "fall must be a number"),
        ("locomotion:limits=", "limits must be a number"),
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


def _lander_params(seed: int = 0) -> tuple[np.ndarray, object]:
    from envs.policies import policy_spec_for

    env = make_env("LunarLanderContinuous")
    spec = policy_spec_for(env, "linear")
    env.close()
    return np.random.default_rng(seed).normal(0, 0.5, spec.num_params).astype(np.float32), spec


def test_es_rollouts_rank_shaped_returns_and_report_the_env_ones() -> None:
    from envs.rollout import RolloutWorker

    params, spec = _lander_params()
    seeds = [11, 12, 13]
    with RolloutWorker("LunarLanderContinuous", spec) as plain:  # type: ignore[arg-type]
        expected = plain.run(params, None, None, seeds)
    with RolloutWorker("LunarLanderContinuous", spec, "shift:2.5") as shaped:  # type: ignore[arg-type]
        batch = shaped.run(params, None, None, seeds)
    assert expected.training_returns is None
    np.testing.assert_array_equal(batch.returns, expected.returns)
    np.testing.assert_array_equal(batch.lengths, expected.lengths)
    assert batch.training_returns is not None
    np.testing.assert_allclose(batch.training_returns, expected.returns - 2.5 * expected.lengths)


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_evaluators_carry_the_transform_to_their_workers(backend: str) -> None:
    from algorithms.es_common import fitness_of
    from evaluation.backends import EvaluatorSettings
    from evaluation.protocol import Broadcast, EvalTask
    from evaluation.registry import make_evaluator

    params, spec = _lander_params(1)
    tasks = [EvalTask(task_id=i, env_seeds=(20 + i,), max_steps=None) for i in range(3)]
    broadcast = Broadcast(0, params, 0.0, None, None)
    fitness = {}
    for transform in ("none", "shift:1"):
        settings = EvaluatorSettings("LunarLanderContinuous", spec, None, 2, None, transform)
        with make_evaluator(backend, settings) as ev:
            results, _ = ev.evaluate(broadcast, tasks)
        lengths = np.array([r.lengths.sum() for r in results], dtype=np.float64)
        fitness[transform] = (
            fitness_of(results, True, training=True)[0],
            fitness_of(results, True, training=False)[0],
            lengths,
        )
    plain_train, plain_eval, lengths = fitness["none"]
    shaped_train, shaped_eval, _ = fitness["shift:1"]
    np.testing.assert_array_equal(plain_train, plain_eval)
    np.testing.assert_array_equal(shaped_eval, plain_eval)
    np.testing.assert_allclose(shaped_train, plain_eval - lengths)


def test_process_workers_anneal_by_the_generation_of_each_broadcast() -> None:
    from envs.policies import policy_spec_for
    from evaluation.backends import EvaluatorSettings
    from evaluation.protocol import Broadcast, EvalTask
    from evaluation.registry import make_evaluator

    env = make_env("AntBulletEnv")
    spec = policy_spec_for(env, "linear")
    env.close()
    params = np.random.default_rng(5).normal(0, 0.3, spec.num_params).astype(np.float32)
    tasks = [EvalTask(task_id=i, env_seeds=(30 + i,), max_steps=60) for i in range(2)]
    transform = "locomotion:alive=0,costs=0.1,fall=100,anneal=2:6"
    settings = EvaluatorSettings("AntBulletEnv", spec, None, 2, None, transform)
    with make_evaluator("process", settings) as evaluator:
        by_generation = {
            generation: evaluator.evaluate(Broadcast(generation, params, 0.0, None, None), tasks)[0]
            for generation in (0, 4, 6)
        }
    env_returns = [np.concatenate([r.returns for r in by_generation[g]]) for g in (0, 4, 6)]
    trained = [np.concatenate([r.training_returns for r in by_generation[g]]) for g in (0, 4, 6)]
    np.testing.assert_array_equal(env_returns[0], env_returns[2])  # same episodes throughout
    assert not np.allclose(trained[0], env_returns[0])
    assert not np.allclose(trained[1], env_returns[1]) and not np.allclose(trained[1], trained[0])
    np.testing.assert_allclose(trained[2], env_returns[2], rtol=1e-9)


@pytest.mark.parametrize(
    ("algo", "sync", "episodes"),
    [
        ("optimes", "broadcast", 1),
        ("optimes", "seeds", 2),
        ("cma", "broadcast", 1),
    ],
)
def test_workers_anneal_by_the_heads_timesteps(algo: str, sync: str, episodes: int) -> None:
    """Process workers train on the env's reward from the generation the head has counted
    ``anneal_timesteps``' last timestep, in either sync mode and whatever k."""
    from algorithms.base import RunContext
    from algorithms.registry import get_algorithm
    from envs.policies import policy_spec_for
    from harness.config import validate_params
    from harness.runner import create_algorithm

    env = make_env("AntBulletEnv")
    spec = policy_spec_for(env, "linear")
    env.close()
    end = 500
    context = RunContext(
        "AntBulletEnv",
        spec,
        7,
        episodes,
        2,
        backend="process",
        sync=sync,
        max_episode_steps=40,
        reward_transform=f"locomotion:alive=0,costs=0.1,fall=100,anneal_timesteps=0:{end}",
    )
    algo_cls = get_algorithm(algo)
    params = {"population": 4, "noise_size": 1 << 20} if algo == "optimes" else {"population": 4}
    algorithm = create_algorithm(algo_cls, context, validate_params(params, algo_cls.Config, algo))
    seen: list[tuple[int, bool]] = []
    evaluate = algorithm.evaluator.evaluate

    def watched(target, tasks):  # type: ignore[no-untyped-def]
        results, stats = evaluate(target, tasks)
        trained = np.concatenate([r.training_returns for r in results])
        plain = np.concatenate([r.returns for r in results])
        seen.append((counted, bool(np.allclose(trained, plain, rtol=1e-9))))
        return results, stats

    algorithm.evaluator.evaluate = watched  # type: ignore[method-assign]
    try:
        counted = 0
        for _ in range(6):
            counted = algorithm.timesteps  # type: ignore[attr-defined]
            record = algorithm.step()
            assert algorithm.timesteps == counted + record.timesteps  # type: ignore[attr-defined]
    finally:
        algorithm.close()
    assert seen[0] == (0, False)  # shaped before the window's end
    assert any(env_reward for _, env_reward in seen)
    assert all(env_reward == (before >= end) for before, env_reward in seen)


def test_rl_refuses_an_annealed_transform_before_any_run_exists(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = harness_cli(
        "run",
        "--algo",
        "ppo",
        "--env",
        "AntBulletEnv",
        "--timesteps",
        "1000",
        "--runs-dir",
        str(runs),
        "--set",
        "reward_transform=locomotion:alive=0,fall=100,anneal=0:10",
        check=False,
    )
    assert result.returncode != 0
    assert "the anneal follows the ES head's broadcasts" in result.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_an_es_run_with_a_transform_records_it_and_evaluates_on_the_env_reward(
    tmp_path: Path,
) -> None:
    import json

    runs = tmp_path / "runs"
    common = ["run", "--algo", "optimes", "--env", "LunarLanderContinuous", "--seed", "4"]
    common += [
        "--timesteps",
        "6000",
        "--set",
        "eval_every_timesteps=3000",
        "--set",
        "eval_episodes=2",
    ]
    harness_cli(*common, "--runs-dir", str(runs / "shaped"), "--set", "reward_transform=shift:1")
    harness_cli(*common, "--runs-dir", str(runs / "plain"))
    shaped = json.loads((runs / "shaped" / "1" / "config.json").read_text())
    assert shaped["reward_transform"] == "shift:1"
    metrics = {
        name: json.loads((runs / name / "1" / "metrics.json").read_text())
        for name in ("shaped", "plain")
    }
    # training ranked shaped fitness: every generation's fitness is the env's minus the episode
    # lengths, i.e. far below the plain run's, while both evaluations report env returns
    shaped_fit = np.array(metrics["shaped"]["fitness_mean"]["values"])
    plain_fit = np.array(metrics["plain"]["fitness_mean"]["values"])
    assert (shaped_fit < plain_fit - 50).all()
    shaped_eval = np.array(metrics["shaped"]["eval_return_mean"]["values"])
    plain_eval = np.array(metrics["plain"]["eval_return_mean"]["values"])
    assert shaped_eval.shape == plain_eval.shape
    np.testing.assert_allclose(shaped_eval, plain_eval, atol=5.0)
