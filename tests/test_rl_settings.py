"""RL baselines at their published settings: n_envs apart from --workers, the zoo's knobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import deterministic_metrics, harness_cli, read_run


def _runs(runs_dir: Path) -> list[Path]:
    return sorted((p for p in runs_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def _is_timing(name: str) -> bool:
    return name.endswith("_s") or name.startswith("time_") or name == "cpu_seconds"


@pytest.mark.slow
def test_ppo_numbers_do_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    """W=1 steps the zoo's 8 CartPole envs in-process, W=2 in subprocesses: same numbers."""
    runs = tmp_path / "runs"
    for workers in ("1", "2"):
        harness_cli(
            "run", "--algo", "ppo", "--env", "CartPole", "--workers", workers,
            "--timesteps", "500", "--runs-dir", str(runs), "--no-progress",
        )  # fmt: skip
    first, second = (read_run(run) for run in _runs(runs))
    assert first["config"]["params"]["n_envs"] == 8 == second["config"]["params"]["n_envs"]
    assert first["config"]["workers"] == 1 and second["config"]["workers"] == 2
    ours, theirs = (
        {k: v for k, v in deterministic_metrics(r["metrics"]).items() if not _is_timing(k)}
        for r in (first, second)
    )
    assert ours == theirs
    assert ours["timesteps"][0] == 8 * 32  # one chunk is n_steps x n_envs, whatever W is


def _algorithm(algo: str, env: str, **overrides: Any) -> Any:
    """The algorithm a run builds, its ``overrides`` given as ``--set`` would give them."""
    from harness.config import build_run_config
    from harness.runner import build_algorithm

    base = {
        "algo": algo, "env": env, "seed": 0, "episodes": 1, "workers": 1,
        "backend": "inline", "timesteps": 1000,
    }  # fmt: skip
    assignments = [f"{k}={v}" for k, v in overrides.items()]
    config = build_run_config(base, source="given", overrides=assignments, refuse="never")
    return build_algorithm(config.config)


def test_ant_ppo_takes_every_zoo_hyperparameter() -> None:
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    algorithm = _algorithm("ppo", "AntBulletEnv")
    try:
        model = algorithm.model
        assert model.n_envs == 16 and isinstance(model.env, VecNormalize)
        assert (model.n_steps, model.batch_size, model.n_epochs) == (512, 128, 20)
        assert (model.gamma, model.gae_lambda, model.ent_coef) == (0.99, 0.9, 0.0)
        assert model.clip_range(1.0) == 0.4 and model.use_sde and model.sde_sample_freq == 4
        assert model.learning_rate == pytest.approx(3e-5)
        policy = model.policy
        assert policy.ortho_init is False and policy.activation_fn is nn.ReLU
        assert policy.net_arch == {"pi": [256, 256], "vf": [256, 256]}
        assert float(policy.log_std.detach().mean()) == pytest.approx(-1.0)
    finally:
        algorithm.close()


def test_ant_a2c_sees_the_time_feature_in_training_and_evaluation() -> None:
    algorithm = _algorithm("a2c", "AntBulletEnv")
    try:
        assert algorithm.model.n_envs == 4
        assert algorithm.model.observation_space.shape == (29,)  # 28 + remaining time
        returns = algorithm.evaluate_policy([11])
        assert returns.shape == (1,)
    finally:
        algorithm.close()


def test_learning_rate_decays_over_the_run_not_over_one_chunk() -> None:
    """rl-zoo's lin_X schedule: lr0 * (1 - t / horizon), with t counted across chunks."""
    algorithm = _algorithm(
        "ppo", "CartPole", n_envs=1, n_steps=64, batch_size=32, n_epochs=1,
        learning_rate=0.001, learning_rate_decay_timesteps=256,
    )  # fmt: skip
    try:
        rates = [algorithm.step().extras["lr"] for _ in range(3)]
    finally:
        algorithm.close()
    assert rates == pytest.approx([0.001 * (1 - 64 / 256), 0.001 * 0.5, 0.001 * 0.25])


def test_training_envs_see_the_transform_and_evaluation_does_not() -> None:
    algorithm = _algorithm("ppo", "LunarLanderContinuous", n_envs=1, reward_transform="shift:1000")
    try:
        record = algorithm.step()
        returns = algorithm.evaluate_policy([3, 4])
    finally:
        algorithm.close()
    # every training step costs 1000, so training episodes score far below any real return
    assert record.fitness_max < -1000 * 50
    assert (returns > -1000).all()
