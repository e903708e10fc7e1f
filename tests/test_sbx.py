"""``sac`` and ``tqc`` on SBX (JAX) as well as stable-baselines3: ``--set library=sbx``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from algorithms.registry import get_algorithm
from envs.policies import policy_spec_for
from envs.registry import make_env
from harness import cli
from harness.policy_io import PolicyLoadError, load_stored, save_policy
from harness.replay import load_policy
from tests.test_algorithm_contract import deterministic, run_algorithm
from tests.test_baselines import context_for
from tests.test_rl_settings import _algorithm

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

SMALL = {"learning_starts": 200, "batch_size": 32, "net_arch": [16], "chunk_timesteps": 200}


def _sbx(algo: str = "sac", **params: Any) -> Any:
    env = make_env("Pendulum")
    try:
        spec = policy_spec_for(env, "linear", (), "tanh")
    finally:
        env.close()
    cls = get_algorithm(algo)
    return cls(context_for(spec, seed=5, env="Pendulum"), cls.Config(library="sbx", **params))


def test_sbx_runs_through_the_cli_and_repeats_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    algo = "sac"
    cores = os.sched_getaffinity(0)
    run_dir, first = run_algorithm(
        tmp_path / "a", algo, "--set", "library=sbx", seed=3, monkeypatch=monkeypatch
    )
    assert first["run"]["status"] == "COMPLETED"
    assert first["config"]["params"]["library"] == "sbx"
    assert "critic_loss" in first["metrics"]  # SBX's own logger keys reach the metrics
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["machine_load"]["cpu_affinity"]) == 1  # XLA's pool held to one core
    assert os.sched_getaffinity(0) == cores  # and this process given its cores back
    spec = json.loads((run_dir / "policy_spec.json").read_text())
    assert spec["sb3_class"] == algo.upper() and spec["policy"] == "sbx.SACPolicy"
    assert load_policy(run_dir).act(np.zeros(3), deterministic=True).shape == (1,)
    _, second = run_algorithm(
        tmp_path / "b", algo, "--set", "library=sbx", seed=3, monkeypatch=monkeypatch
    )
    assert deterministic(first["metrics"]) == deterministic(second["metrics"])


def test_sbx_chunks_equal_one_plain_sbx_learn_call() -> None:
    """The harness steps SBX's own SAC and changes nothing of what it learns."""
    import jax
    import sbx
    import stable_baselines3
    from flax import linen
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    algorithm = _sbx(**SMALL)
    try:
        steps = sum(algorithm.step().timesteps for _ in range(3))
        ours = algorithm.current_parameters()
    finally:
        algorithm.close()
    env = DummyVecEnv([lambda: Monitor(make_env("Pendulum"))])
    plain_args = {k: v for k, v in SMALL.items() if k not in ("net_arch", "chunk_timesteps")}
    model = sbx.SAC(
        "MlpPolicy",
        env,
        seed=5,
        **plain_args,
        policy_kwargs={"net_arch": [16], "activation_fn": linen.relu},
    )
    model.learn(steps)
    qf = model.policy.qf_state
    leaves = jax.tree_util.tree_leaves(
        (model.policy.actor_state.params, qf.params, qf.target_params)
    )
    plain = np.concatenate([np.asarray(leaf, dtype=np.float32).ravel() for leaf in leaves])
    np.testing.assert_array_equal(ours, plain)
    # counted as SB3 counts its SAC's (actor, critics, target critics): runs compare by size
    torch_sac = stable_baselines3.SAC(
        "MlpPolicy", env, buffer_size=10, device="cpu", policy_kwargs={"net_arch": [16]}
    )
    assert ours.size == sum(p.numel() for p in torch_sac.policy.parameters())
    env.close()


@pytest.mark.parametrize("algo", ["sac", "tqc"])
def test_sbx_checkpoint_restores_the_policy_and_its_replay_buffer(algo: str) -> None:
    algorithm, restored = _sbx(algo, **SMALL), _sbx(algo, **SMALL)
    try:
        algorithm.step()
        algorithm.step()
        restored.load_state_dict(algorithm.state_dict())
        np.testing.assert_array_equal(algorithm.current_parameters(), restored.current_parameters())
        assert restored.model.replay_buffer.size() == algorithm.model.replay_buffer.size() == 400
        seeds = [11, 12]
        np.testing.assert_array_equal(
            algorithm.evaluate_policy(seeds), restored.evaluate_policy(seeds)
        )
        assert restored.step().timesteps == 200 and restored.model.num_timesteps == 600
    finally:
        algorithm.close()
        restored.close()


@pytest.mark.parametrize("algo", ["sac", "tqc"])
def test_a_stored_sbx_policy_reads_back_as_numpy_and_acts_as_the_run_did(
    algo: str, tmp_path: Path
) -> None:
    """The reader imports no JAX: it runs the actor's layers in NumPy from the stored data."""
    algorithm = _sbx(algo, **SMALL)
    try:
        algorithm.step()
        algorithm.step()
        save_policy(algorithm, tmp_path)
        act, _ = load_stored(tmp_path)
        observations = np.random.default_rng(0).uniform(-1, 1, size=(50, 3))
        theirs = np.stack(
            [algorithm.model.predict(obs, deterministic=True)[0] for obs in observations]
        )
        ours = np.stack([act(obs, True) for obs in observations])
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
        assert np.ptp(theirs) > 0.01  # a policy that acts, not a constant
        batch = act(observations, False)
        assert batch.shape == (50, 1) and (np.abs(batch) <= 2.0).all()  # Pendulum's torque
    finally:
        algorithm.close()
    spec_file = tmp_path / "policy_spec.json"
    spec = json.loads(spec_file.read_text())
    spec["policy_kwargs"]["net_arch"] = [17]  # a spec that does not fit its parameters
    spec_file.write_text(json.dumps(spec))
    with pytest.raises(PolicyLoadError, match=r"cannot build sbx.*parameters"):
        load_stored(tmp_path)


def test_hopper_sac_on_sbx_takes_the_zoos_mujoco_defaults() -> None:
    algorithm = _algorithm("sac", "Hopper-v5", library="sbx")
    try:
        model = algorithm.model
        assert type(model).__mro__[1].__module__.startswith("sbx.")
        assert (model.learning_starts, model.batch_size, model.buffer_size) == (10000, 256, 10**6)
        assert (model.gamma, model.tau, model.gradient_steps) == (0.99, 0.005, 1)
        assert model.policy_kwargs["net_arch"] == [256, 256]
        assert model.policy_kwargs["activation_fn"].__name__ == "relu"
    finally:
        algorithm.close()


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (["library=jax"], "'jax'"),
        (["library=sbx", "use_sde=true"], "use_sde"),
        (["library=sbx", "target_update_interval=2"], "target_update_interval"),
    ],
)
def test_sbx_refuses_what_it_cannot_run_in_one_line(
    sets: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--algo", "sac", "--env", "Pendulum", "--runs-dir", str(tmp_path)]
    for knob in sets:
        argv += ["--set", knob]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and named in error
    assert not any(tmp_path.iterdir())
