"""NSR-ES and NSRA-ES (algorithms/novelty_es.py) and the behaviour characterisations they
need (envs/behaviour.py): real envs, real workers, real runs through the CLI."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from algorithms.base import Algorithm, RunContext
from algorithms.es_common import stream_rng
from algorithms.novelty_es import NoveltyArchive, NoveltyStrategy
from algorithms.registry import get_algorithm
from envs import behaviour
from envs.behaviour import Episode, pendulum_swing
from envs.policies import PolicySpec, build_policy, policy_spec_for
from envs.registry import make_env
from envs.rollout import RolloutWorker
from evaluation.protocol import Broadcast, EvalTask
from evaluation.worker import TaskRunner, decode, encode
from harness.checkpoint import INTERRUPT_ENV, load_checkpoint
from harness.config import validate_params
from harness.repro import diff_metrics
from harness.runner import create_algorithm
from tests.conftest import deterministic_metrics, harness_cli, only_run_dir, read_run

# Slow: end-to-end novelty runs on the process backend, resumed and compared bit for bit; CI
# runs them in `make test-slow`.
pytestmark = pytest.mark.slow


def spec_of(env_name: str) -> PolicySpec:
    """The linear policy of ``env_name``."""
    env = make_env(env_name)
    try:
        return policy_spec_for(env, "linear", (8,), "tanh")
    finally:
        env.close()


def random_params(spec: PolicySpec, seed: int) -> np.ndarray:
    return build_policy(spec).init_params(np.random.default_rng(seed))


# -- novelty and the archive -------------------------------------------------------------------
def test_novelty_is_the_mean_distance_to_the_k_nearest_in_the_archive() -> None:
    archive = NoveltyArchive(neighbours=2)
    assert archive.novelty(np.zeros((2, 2))).tolist() == [0.0, 0.0]  # nothing seen yet
    for point in ([0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [10.0, 10.0]):
        archive.add(np.array(point))
    novelty = archive.novelty(np.array([[0.0, 0.0], [3.0, 4.0], [np.nan, np.nan]]))
    # (0,0): distances 0, 3, 4, 14.1 -> (0 + 3) / 2; (3,4): 5, 4, 3, 9.2 -> (3 + 4) / 2
    assert novelty[:2].tolist() == [1.5, 3.5]
    assert novelty[2] == -np.inf  # a candidate without a BC ranks below every other
    with pytest.raises(ValueError, match="3 floats"):
        archive.add(np.zeros(3))


# -- the behaviour characterisations of real envs ------------------------------------------------
def test_the_pendulum_bc_recovers_the_velocity_the_observation_hides() -> None:
    env = make_env("PendulumPO")
    inner: Any = env.unwrapped
    obs, _ = env.reset(seed=5)
    observed, speeds = [], []
    for _ in range(120):  # full torque one way: the pendulum swings up and over
        observed.append(obs)
        obs, *_ = env.step(np.array([2.0], dtype=np.float32))
        speeds.append(abs(float(inner.state[1])))
    observations = np.array(observed, dtype=np.float64)
    assert not observations[:, 2].any()  # PendulumPO: the velocity is zeroed
    cos, sin, speed = pendulum_swing(Episode(env, observations, np.asarray(obs), None))
    assert speed == pytest.approx(np.mean(speeds) / inner.max_speed, rel=1e-5)
    assert speed > 0.2  # it did swing
    assert (cos, sin) == pytest.approx(observations[:, :2].mean(axis=0).tolist())
    env.close()


def test_lander_and_locomotion_bcs_are_the_final_positions() -> None:
    from gymnasium.envs.box2d.lunar_lander import LEG_DOWN, SCALE, VIEWPORT_H, VIEWPORT_W

    spec = spec_of("LunarLanderContinuous")
    with RolloutWorker("LunarLanderContinuous", spec) as worker:
        batch = worker.run(random_params(spec, 1), None, None, [7], behaviour=True)
        lander: Any = worker.env.unwrapped
        x, y = lander.lander.position
        half_w, half_h = VIEWPORT_W / SCALE / 2, VIEWPORT_H / SCALE / 2
        expected = ((x - half_w) / half_w, (y - (lander.helipad_y + LEG_DOWN / SCALE)) / half_h)
        assert batch.behaviour == pytest.approx(expected, abs=1e-6)

    spec = spec_of("Ant")
    with RolloutWorker("Ant", spec) as worker:
        batch = worker.run(random_params(spec, 2), None, None, [3], 60, behaviour=True)
        ant: Any = worker.env.unwrapped
        end = ant.data.qpos[:2].copy()
        worker.env.reset(seed=3)
        start = ant.data.qpos[:2]
        assert batch.behaviour == pytest.approx(tuple(end - start))
        assert np.linalg.norm(batch.behaviour) > 1e-3  # 60 steps of random torques move the body


def test_a_worker_sends_the_episodes_mean_bc_only_when_asked() -> None:
    spec = spec_of("LunarLanderContinuous")
    centre = random_params(spec, 4)
    runner = TaskRunner("LunarLanderContinuous", spec, None)
    runner.set_broadcast(Broadcast(0, centre, 0.0, None, None))
    seeds = (11, 12, 13)
    plain = EvalTask(0, seeds, None)
    asked = dataclasses.replace(plain, behaviour=True)
    assert b"behaviour" not in encode(plain) and b"behaviour" in encode(asked)
    without, with_bc = runner.run(plain), runner.run(asked)
    assert without.behaviour == () and b"behaviour" not in encode(without)
    singles = [runner.run(EvalTask(0, (s,), None, behaviour=True)).behaviour for s in seeds]
    assert with_bc.behaviour == pytest.approx(tuple(np.mean(singles, axis=0)), abs=1e-12)
    np.testing.assert_array_equal(with_bc.returns, without.returns)  # asking changes nothing else
    # the BC's floats are on the wire, so bytes_from_workers counts them
    assert len(encode(with_bc)) >= len(encode(without)) + 8 * len(with_bc.behaviour)
    assert decode(encode(with_bc)).behaviour == with_bc.behaviour
    runner.rollout.close()


class _Probe(CartPoleEnv):
    """CartPole whose env declares its own BC (a method on the env)."""

    def behaviour_characterisation(self, episode: Episode) -> tuple[float, ...]:
        return (float(len(episode.observations)),)


def test_an_env_declares_its_own_bc_by_method_or_by_registration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(behaviour, "_REGISTRY", dict(behaviour._REGISTRY))
    spec = spec_of("CartPole")
    params = random_params(spec, 0)
    with RolloutWorker("CartPole", spec) as worker:  # nothing declared: the mean observation
        fallback = worker.run(params, None, None, [1], behaviour=True).behaviour
        assert len(fallback) == 4

    def cart_end(episode: Episode) -> tuple[float, float]:
        return float(episode.final_observation[0]), 42.0

    assert behaviour.register_behaviour("CartPole-v1", cart_end) is cart_end
    with pytest.raises(ValueError, match="already declares"):
        behaviour.register_behaviour("CartPole-v1", behaviour.mean_observation)
    with pytest.raises(ValueError, match="replace=True"):  # a built-in one too
        behaviour.register_behaviour("Pendulum-v1", cart_end)
    behaviour.register_behaviour("Pendulum-v1", cart_end, replace=True)
    with RolloutWorker("CartPole", spec) as worker:
        declared = worker.run(params, None, None, [1], behaviour=True).behaviour
        assert declared[1] == 42.0 and len(declared) == 2

    gym.register("BehaviourProbe-v0", entry_point=lambda **_: _Probe())
    try:
        env = make_env("BehaviourProbe-v0")
        name, found = behaviour.behaviour_for(["BehaviourProbe-v0", "CartPole-v1"], env)
        assert name.endswith("behaviour_characterisation")  # the env's method wins
        assert found(Episode(env, np.zeros((9, 4)), np.zeros(4), None)) == (9.0,)
        env.close()
    finally:
        gym.registry.pop("BehaviourProbe-v0")


# -- the algorithm ---------------------------------------------------------------------------------
def build(name: str, backend: str = "inline", workers: int = 1, **params: Any) -> Algorithm:
    """A real nsr-es/nsra-es on the lander's linear policy with its own evaluator."""
    algo_cls = get_algorithm(name)
    context = RunContext(
        "LunarLanderContinuous",
        spec_of("LunarLanderContinuous"),
        3,
        1,
        workers,
        backend=backend,
        max_episode_steps=300,
    )
    tiny = {"population": 10, "centre_episodes": 2, "meta_population": 3, **params}
    return create_algorithm(algo_cls, context, validate_params(tiny, algo_cls.Config, name))


def test_nsra_es_raises_w_on_improvement_and_lowers_it_after_t_max_stagnant() -> None:
    algorithm: Any = build("nsra-es", weight_delta=0.25, stagnation_generations=2)
    strategy = algorithm.strategy
    assert isinstance(strategy, NoveltyStrategy)
    try:
        strategy.reward_weight, strategy.best_return = 0.5, 0.0
        trajectory = []
        for value in (1.0, 1.0, 0.5, 0.9, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0):
            strategy._adapt(value)
            trajectory.append(strategy.reward_weight)
        assert trajectory == [
            0.75,  # better: up
            0.75,
            0.5,  # two without: down, counter restarts
            0.5,
            0.75,
            1.0,  # capped at 1
            1.0,
            0.75,
            0.75,
            0.5,
            0.5,
            0.25,
            0.25,
            0.0,  # floored at 0
        ]
    finally:
        algorithm.close()


def test_a_centre_is_chosen_with_probability_proportional_to_its_novelty() -> None:
    algorithm: Any = build("nsr-es")
    strategy = algorithm.strategy
    assert isinstance(strategy, NoveltyStrategy)
    try:
        strategy.archive = NoveltyArchive(neighbours=1)
        strategy.archive.add(np.zeros(1))
        strategy.centre_behaviours = np.array([[0.0], [1.0], [3.0]])  # novelty 0, 1, 3
        chosen = np.zeros(3)
        for index in range(4000):
            strategy.generation = index  # each generation's choice has its own stream
            strategy.ask(stream_rng(9, 1, index))
            chosen[strategy.current] += 1
            assert strategy.mean is strategy.centres[strategy.current]
        assert chosen[0] == 0
        assert chosen[2] / chosen.sum() == pytest.approx(0.75, abs=0.03)
    finally:
        algorithm.close()


def run(algorithm: Algorithm, generations: int) -> tuple[list[Any], np.ndarray]:
    try:
        records = [algorithm.step() for _ in range(generations)]
        return records, algorithm.current_parameters()
    finally:
        algorithm.close()


def comparable(records: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "timesteps": r.timesteps,
            "episodes": r.episodes,
            "fitness": (r.fitness_mean, r.fitness_max, r.fitness_min),
            **{k: v for k, v in r.extras.items() if not k.endswith("_s")},
        }
        for r in records
    ]


def test_the_process_backend_with_two_workers_repeats_the_inline_run_exactly() -> None:
    knobs: dict[str, Any] = {"weight_delta": 0.25, "stagnation_generations": 1}
    inline, inline_params = run(build("nsra-es", **knobs), 5)
    pool, pool_params = run(build("nsra-es", "process", 2, **knobs), 5)
    assert comparable(inline) == comparable(pool)
    np.testing.assert_array_equal(inline_params, pool_params)
    assert len({r.extras["reward_weight"] for r in inline}) > 1  # w did move
    assert [r.extras["archive_size"] for r in inline] == [4.0, 5.0, 6.0, 7.0, 8.0]  # M + t
    # the generation's candidates and the centre's measurement: both are training steps
    assert all(r.timesteps > 10 * r.extras["episode_length_mean"] for r in inline)
    assert all(r.bytes_from_workers > 0 for r in pool)


# -- real runs through the CLI -------------------------------------------------------------------
def cli_run(algo: str, runs: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--algo",
        algo,
        "--env",
        "LunarLanderContinuous",
        "--seed",
        "5",
        "--generations",
        "8",
        "--runs-dir",
        str(runs),
        "--set",
        "population=10",
        "--set",
        "centre_episodes=2",
        "--set",
        "checkpoint_every=3",
        "--set",
        "eval_every_timesteps=5000",
        "--set",
        "eval_episodes=2",
        *extra,
    ]


def test_nsra_es_resumed_after_sigint_equals_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive, the centres and their optimizers, w and its counter cross a checkpoint."""
    knobs = ("--set", "stagnation_generations=2", "--backend", "inline")
    harness_cli(*cli_run("nsra-es", tmp_path / "straight", *knobs))
    straight = only_run_dir(tmp_path / "straight")
    reference = read_run(straight)
    assert reference["run"]["status"] == "COMPLETED"
    assert len(set(reference["metrics"]["reward_weight"]["values"])) > 1  # w moved

    runs = tmp_path / "interrupted"
    monkeypatch.setenv(INTERRUPT_ENV, "4")
    stopped = harness_cli(*cli_run("nsra-es", runs, *knobs), check=False)
    monkeypatch.delenv(INTERRUPT_ENV)
    assert stopped.returncode == 130, stopped.stderr
    run_dir = only_run_dir(runs)
    state = load_checkpoint(run_dir / "checkpoint.pkl")
    assert int(state["progress"]["step"]) == 4
    harness_cli("resume", str(run_dir))
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    assert diff_metrics(reference["metrics"], record["metrics"], "uninterrupted", "resumed") == []
    np.testing.assert_array_equal(
        np.load(run_dir / "final_params.npy"), np.load(straight / "final_params.npy")
    )


SAME_BC = textwrap.dedent("""
    import gymnasium as gym
    from envs.behaviour import register_behaviour

    gym.register(
        "SameLander-v0",
        entry_point="gymnasium.envs.box2d.lunar_lander:LunarLander",
        kwargs={"continuous": True},
        max_episode_steps=1000,
    )

    def same_everywhere(episode):
        return (1.0, 2.0)

    register_behaviour("SameLander-v0", same_everywhere)
""")


def test_a_plugin_module_declares_the_bc_every_worker_uses(tmp_path: Path) -> None:
    """An env and its BC declared in a module named with --import: the workers import it
    too, so every BC is the same point and no candidate is novel (the lander's built-in BC,
    its final position, makes them differ)."""
    (tmp_path / "samebc.py").write_text(SAME_BC)
    for env, runs in (("SameLander-v0", "same"), ("LunarLanderContinuous", "own")):
        args = cli_run("nsr-es", tmp_path / runs, "--backend", "process", "--workers", "2")
        args[args.index("8")] = "2"  # two generations
        args[args.index("LunarLanderContinuous")] = env
        harness_cli(
            *args,
            "--import",
            "samebc",
            "--set",
            "policy.kind=linear",
            env={"PYTHONPATH": str(tmp_path)},
        )
    same = read_run(only_run_dir(tmp_path / "same"))["metrics"]
    assert same["novelty_max"]["values"] == [0.0, 0.0]
    assert same["archive_size"]["values"] == [6.0, 7.0]
    own = read_run(only_run_dir(tmp_path / "own"))["metrics"]
    assert min(own["novelty_max"]["values"]) > 0.0


@pytest.mark.parametrize(
    ("knob", "named"),
    [("reward_weight=1.5", "reward_weight"), ("meta_population=0", "meta_population")],
)
def test_bad_values_exit_2_with_one_line_and_no_run(tmp_path: Path, knob: str, named: str) -> None:
    result = harness_cli(*cli_run("nsr-es", tmp_path / "runs", "--set", knob), check=False)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and named in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_nsr_es_on_ray_equals_inline_and_ships_the_process_bytes(tmp_path: Path) -> None:
    records = {}
    for backend in ("inline", "process", "ray"):
        runs = tmp_path / backend
        args = cli_run("nsr-es", runs, "--backend", backend, "--workers", "2")
        args[args.index("8")] = "3"
        if backend == "inline":
            args = args[: args.index("--workers")]
        harness_cli(*args, timeout=600)
        records[backend] = json.loads((only_run_dir(runs) / "metrics.json").read_text())
    assert deterministic_metrics(records["ray"]) == deterministic_metrics(records["inline"])
    for name in ("bytes_to_workers", "bytes_from_workers"):
        assert records["ray"][name]["values"] == records["process"][name]["values"]
