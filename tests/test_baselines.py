"""Nevergrad, CMA-ES, PPO and A2C behind the common interface: names, signs, diagonal CMA."""

from __future__ import annotations

import dataclasses
import io
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from algorithms.base import RunContext
from algorithms.cma_es import CMAConfig, covariance_mb, default_population
from algorithms.es_common import eval_seeds, finite_losses
from algorithms.es_engine import ESAlgorithm, ESDefinition
from algorithms.nevergrad_es import NevergradConfig
from algorithms.registry import UnknownAlgorithmError, algorithm_names, get_algorithm
from algorithms.sb3 import A2CConfig, PPOConfig
from envs.policies import PolicySpec, policy_spec_for
from envs.registry import make_env
from evaluation.backends import Evaluator
from evaluation.protocol import Broadcast, EvalResult, EvalTask, GenerationStats
from harness import cli

# -- a synthetic task: the return is minus the squared distance to a target -----------------


def linear_spec(obs_dim: int, action_dim: int) -> PolicySpec:
    return PolicySpec(
        "linear", (), "tanh", obs_dim, "box", action_dim, (-1.0,) * action_dim, (1.0,) * action_dim
    )


class QuadraticEvaluator(Evaluator):
    """Evaluates ``-||x - target||^2`` (or a constant): a noiseless task with a known optimum."""

    def __init__(self, spec: PolicySpec, target: np.ndarray, flat: bool = False) -> None:
        super().__init__("none", spec, None)
        self.target = target
        self.flat = flat

    def evaluate(
        self, broadcast: Broadcast, tasks: list[EvalTask]
    ) -> tuple[list[EvalResult], GenerationStats]:
        results = []
        for task in tasks:
            x = task.parameters(broadcast, None)
            value = 0.0 if self.flat else -float(np.sum((x - self.target) ** 2))
            returns = np.full(len(task.env_seeds), value)
            results.append(
                EvalResult(
                    task.task_id,
                    broadcast.generation,
                    returns,
                    np.ones(len(task.env_seeds), np.int64),
                    len(task.env_seeds),
                )
            )
        return results, GenerationStats(bytes_to_workers=1)


def context_for(spec: PolicySpec, seed: int = 0, env: str = "none") -> RunContext:
    return RunContext(
        env_name=env,
        policy_spec=spec,
        seed=seed,
        episodes_per_fitness=1,
        workers=1,
        backend="inline",
    )


TARGET_SPEC = linear_spec(3, 2)  # 8 parameters
TARGET = np.linspace(-1.0, 1.0, TARGET_SPEC.num_params)


@pytest.mark.parametrize(
    ("algo", "params"),
    [
        ("cma", {"sigma0": 0.5}),
        ("nevergrad-es", {"population": 20, "sigma": 0.2}),
        ("ng:DiagonalCMA", {"population": 10, "sigma": 0.5}),
    ],
)
def test_vector_es_maximise_returns(algo: str, params: dict[str, float]) -> None:
    """The sign convention: returns are maximised (losses minimised), not the other way round."""
    cls = get_algorithm(algo)
    algorithm = cls(
        context_for(TARGET_SPEC), cls.Config(**params), QuadraticEvaluator(TARGET_SPEC, TARGET)
    )
    start = float(np.sum((algorithm.current_parameters() - TARGET) ** 2))
    records = [algorithm.step() for _ in range(60)]
    end = float(np.sum((algorithm.current_parameters() - TARGET) ** 2))
    assert end < 0.25 * start, (start, end)  # a flipped sign would move away
    early = np.mean([r.fitness_mean for r in records[:5]])
    assert np.mean([r.fitness_mean for r in records[-5:]]) > early
    # evaluate_policy plays the current centre/recommendation: its return is -distance^2
    returns = algorithm.evaluate_policy([1, 2])
    np.testing.assert_allclose(returns, -end, rtol=1e-4)


def test_cma_improves_cartpole_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a real task: evaluation returns rise well above a random policy's."""
    from tests.test_algorithm_contract import only_run_dir, read_run

    monkeypatch.setenv("HARNESS_PROGRESS", "0")
    assert (
        cli.main(
            [
                "run",
                "--algo",
                "cma",
                "--env",
                "CartPole",
                "--timesteps",
                "20000",
                "--seed",
                "0",
                "--backend",
                "inline",
                "--runs-dir",
                str(tmp_path),
                "--no-progress",
                "--set",
                "eval_every_timesteps=5000",
                "--set",
                "eval_episodes=5",
                "--set",
                "sigma0=0.5",
            ]
        )
        == 0
    )
    evals = read_run(only_run_dir(tmp_path))["metrics"]["eval_return_mean"]["values"]
    assert max(evals) >= 200 and max(evals) > 2 * evals[0], evals


def test_failed_candidates_get_the_worst_finite_loss() -> None:
    losses = finite_losses(np.array([3.0, np.inf, -1.0, np.nan]))
    assert np.isfinite(losses).all()
    assert losses[1] > 3.0 and losses[3] > 3.0 and losses[0] == 3.0


# -- names --------------------------------------------------------------------------------


def test_registry_lists_the_baselines() -> None:
    assert {"optimes", "nevergrad-es", "cma", "ppo", "a2c"} <= set(algorithm_names())


def test_ng_prefix_builds_named_cached_classes() -> None:
    cls = get_algorithm("ng:CMA")
    assert cls.name == "ng:CMA" and isinstance(cls, ESDefinition)
    assert cls.defaults_section == "nevergrad" and cls.Config is NevergradConfig
    assert get_algorithm("ng:CMA") is cls
    assert get_algorithm("ng:TwoPointsDE").name == "ng:TwoPointsDE"
    assert get_algorithm("nevergrad-es").name == "nevergrad-es"


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("ng:CMAA", "ng:CMA"), ("ng:cma", "ng:CMA"), ("ng:TwoPointDE", "ng:TwoPointsDE")],
)
def test_unknown_nevergrad_name_suggests_close_matches(name: str, suggestion: str) -> None:
    with pytest.raises(UnknownAlgorithmError, match=suggestion):
        get_algorithm(name)


def test_unknown_nevergrad_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    code = cli.main(
        ["run", "--algo", "ng:NoSuchThing", "--env", "CartPole", "--runs-dir", str(runs)]
    )
    assert code == cli.EXIT_USAGE
    assert "ng:NoSuchThing" in capsys.readouterr().err
    assert not runs.exists()


def test_list_says_a2c_stands_in_for_a3c(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    a2c_line = next(line for line in out.splitlines() if line.strip().startswith("a2c"))
    assert "A3C" in a2c_line
    for name in ("nevergrad-es", "cma", "ppo"):
        assert name in out


# -- configs ------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", [*algorithm_names(), "ng:CMA"])
def test_every_hyperparameter_is_documented(algo: str) -> None:
    for field in dataclasses.fields(get_algorithm(algo).Config):
        assert field.metadata.get("doc"), f"{algo}.{field.name} has no doc"


@pytest.mark.parametrize(
    ("config", "bad"),
    [
        (CMAConfig(sigma0=-1.0), "-1.0"),
        (CMAConfig(population=1), "1"),
        (CMAConfig(restart_from="best"), "'best'"),
        (NevergradConfig(init="random"), "'random'"),
        (NevergradConfig(population=0), "0"),
        (PPOConfig(vec_env="gpu"), "'gpu'"),
        (PPOConfig(n_steps=0), "0"),
        (A2CConfig(gamma=1.5), "1.5"),
    ],
)
def test_validate_names_the_bad_value(config: object, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        config.validate()  # type: ignore[attr-defined]


def test_set_override_is_type_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "run",
            "--algo",
            "cma",
            "--env",
            "CartPole",
            "--set",
            "sigma0=abc",
            "--runs-dir",
            str(tmp_path / "runs"),
        ]
    )
    assert code == cli.EXIT_USAGE
    assert "sigma0" in capsys.readouterr().err


def test_nevergrad_es_reads_the_nevergrad_section() -> None:
    from harness.config import complete_config

    for algo in ("nevergrad-es", "ng:CMA"):
        config = complete_config({"algo": algo, "env": "LunarLanderContinuous"})
        assert config["params"]["sigma"] == 1.0


# -- CMA: full or diagonal ----------------------------------------------------------------


def test_cma_switches_to_diagonal_by_dimension_and_by_memory() -> None:
    config = CMAConfig()
    assert config.use_diagonal(1361)[0] is False  # PendulumPO's LSTM: full CMA fits
    diagonal, reason = config.use_diagonal(6536)  # AntBulletEnv's 28-64-64-8 MLP
    assert diagonal and "6536" in reason
    assert covariance_mb(6536) > 900
    diagonal, reason = CMAConfig(diagonal_threshold=10**9, max_covariance_mb=1.0).use_diagonal(400)
    assert diagonal and "max_covariance_mb" in reason


def _cma(spec: PolicySpec, **params: float) -> ESAlgorithm:
    target = np.zeros(spec.num_params)
    return get_algorithm("cma")(  # type: ignore[return-value]
        context_for(spec),
        CMAConfig(**params),  # type: ignore[arg-type]
        QuadraticEvaluator(spec, target),
    )


def test_cma_uses_pycma_diagonal_variant_and_logs_it() -> None:
    spec = linear_spec(10, 4)  # 44 parameters
    out = io.StringIO()
    with redirect_stdout(out):
        full = _cma(spec)
        diag = _cma(spec, diagonal_threshold=20)
    assert "full-covariance" in out.getvalue() and "diagonal (sep-)CMA" in out.getvalue()
    assert full.step().extras["diagonal"] == 0.0
    assert diag.step().extras["diagonal"] == 1.0
    pycma_full, pycma_diag = full.strategy.es, diag.strategy.es  # type: ignore[attr-defined]
    assert pycma_full.opts["CMA_diagonal"] is False and pycma_diag.opts["CMA_diagonal"] is True
    assert type(pycma_full.sm).__name__ == "GaussFullSampler"
    assert type(pycma_diag.sm).__name__ != "GaussFullSampler"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_cma_on_ant_sized_policy_stays_small() -> None:
    env = make_env("AntBulletEnv")
    try:
        spec = policy_spec_for(env, "mlp", (64, 64), "relu")
    finally:
        env.close()
    assert spec.num_params == 6536
    before = _rss_mb()
    with redirect_stdout(io.StringIO()):
        algorithm = _cma(spec)
    records = [algorithm.step() for _ in range(3)]
    assert records[-1].extras["diagonal"] == 1.0
    assert records[-1].extras["population"] == default_population(6536)
    # full CMA would hold ~1 GiB of d x d matrices; the diagonal variant holds vectors
    assert _rss_mb() - before < 150


def test_cma_ipop_restart_doubles_the_population() -> None:
    spec = linear_spec(3, 2)
    with redirect_stdout(io.StringIO()) as out:
        algorithm = get_algorithm("cma")(
            context_for(spec), CMAConfig(restarts=1), QuadraticEvaluator(spec, TARGET, flat=True)
        )
        records = [algorithm.step() for _ in range(6)]
    assert "IPOP restart 1/1" in out.getvalue()
    assert "no restart left" in out.getvalue()
    populations = [r.extras["population"] for r in records]
    assert populations[0] == default_population(spec.num_params)
    assert populations[-1] == 2 * populations[0]
    assert records[-1].extras["restarts"] == 1.0


# -- checkpoints --------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["cma", "nevergrad-es", "ng:CMA", "ng:TwoPointsDE"])
def test_vector_es_resume_continues_bit_for_bit(algo: str) -> None:
    cls = get_algorithm(algo)
    config = cls.Config(population=10) if algo != "cma" else cls.Config()

    def fresh() -> object:
        return cls(
            context_for(TARGET_SPEC, seed=3), config, QuadraticEvaluator(TARGET_SPEC, TARGET)
        )

    with redirect_stdout(io.StringIO()):
        straight, interrupted, resumed = fresh(), fresh(), fresh()
    for _ in range(3):
        straight.step()  # type: ignore[attr-defined]
        interrupted.step()  # type: ignore[attr-defined]
    state = interrupted.state_dict()  # type: ignore[attr-defined]
    np.random.seed(12345)  # other users of the global RNG must not matter
    resumed.load_state_dict(state)  # type: ignore[attr-defined]
    for _ in range(3):
        a = straight.step()  # type: ignore[attr-defined]
        b = resumed.step()  # type: ignore[attr-defined]
        assert (a.fitness_mean, a.fitness_max) == (b.fitness_mean, b.fitness_max)
    np.testing.assert_array_equal(
        straight.current_parameters(),  # type: ignore[attr-defined]
        resumed.current_parameters(),
    )  # type: ignore[attr-defined]


# -- SB3 ----------------------------------------------------------------------------------


def _sb3(algo: str, kind: str = "mlp", **params: object) -> object:
    env = make_env("CartPole")
    try:
        spec = policy_spec_for(env, kind, (16,), "tanh")  # type: ignore[arg-type]
    finally:
        env.close()
    cls = get_algorithm(algo)
    return cls(context_for(spec, seed=5, env="CartPole"), cls.Config(**params))


def test_sb3_network_comes_from_its_own_config_never_the_es_policy() -> None:
    """An empty ``net_arch`` makes SB3's actor linear; the ES policy in the run context
    (linear or LSTM) changes nothing: RL builds SB3's 64-64 unless its own config says."""
    linear = _sb3("ppo", net_arch=[], n_steps=64)
    try:
        model = linear.model  # type: ignore[attr-defined]
        actor = sum(p.numel() for p in model.policy.action_net.parameters())
        assert actor == (4 + 1) * 2  # CartPole: 4 observations, 2 action logits
        assert list(model.policy.mlp_extractor.policy_net) == []
    finally:
        linear.close()  # type: ignore[attr-defined]
    for kind in ("linear", "lstm"):
        algorithm = _sb3("a2c", kind=kind)
        try:
            layers = algorithm.model.policy.mlp_extractor.policy_net  # type: ignore[attr-defined]
            sizes = [m.out_features for m in layers if hasattr(m, "out_features")]
            assert sizes == [64, 64], kind
        finally:
            algorithm.close()  # type: ignore[attr-defined]


def test_sb3_step_record_and_deterministic_evaluation() -> None:
    algorithm = _sb3("ppo", n_steps=256, batch_size=64, n_epochs=2)
    try:
        record = algorithm.step()  # type: ignore[attr-defined]
        assert record.timesteps == 256 and record.episodes > 0
        assert record.fitness_min <= record.fitness_mean <= record.fitness_max
        assert "lr" in record.extras and record.bytes_to_workers == 0
        seeds = eval_seeds(5, 0, 3)
        first = algorithm.evaluate_policy(seeds)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(first, algorithm.evaluate_policy(seeds))  # type: ignore[attr-defined]
    finally:
        algorithm.close()  # type: ignore[attr-defined]


def test_sb3_checkpoint_restores_weights_and_keeps_training() -> None:
    algorithm = _sb3("a2c", updates_per_step=10)
    restored = _sb3("a2c", updates_per_step=10)
    try:
        algorithm.step()  # type: ignore[attr-defined]
        state = algorithm.state_dict()  # type: ignore[attr-defined]
        restored.load_state_dict(state)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(
            algorithm.current_parameters(),  # type: ignore[attr-defined]
            restored.current_parameters(),
        )  # type: ignore[attr-defined]
        record = restored.step()  # type: ignore[attr-defined]
        assert record.timesteps == 50
        assert restored.model.num_timesteps == 100  # type: ignore[attr-defined]
    finally:
        algorithm.close()  # type: ignore[attr-defined]
        restored.close()  # type: ignore[attr-defined]


def test_nevergrad_init_choice() -> None:
    """``init: policy`` starts from the harness init (as optimes); ``zeros`` from Nevergrad's."""
    cls = get_algorithm("nevergrad-es")
    policy = cls(
        context_for(TARGET_SPEC), NevergradConfig(), QuadraticEvaluator(TARGET_SPEC, TARGET)
    )
    zeros = cls(
        context_for(TARGET_SPEC),
        NevergradConfig(init="zeros"),
        QuadraticEvaluator(TARGET_SPEC, TARGET),
    )
    np.testing.assert_array_equal(policy.current_parameters(), policy.initial)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(zeros.current_parameters(), np.zeros(TARGET_SPEC.num_params))


def test_sb3_observation_normalisation_is_used_and_checkpointed() -> None:
    algorithm = _sb3("ppo", n_steps=64, batch_size=32, n_epochs=1, normalize=True)
    restored = _sb3("ppo", n_steps=64, batch_size=32, n_epochs=1, normalize=True)
    try:
        algorithm.step()  # type: ignore[attr-defined]
        seeds = eval_seeds(5, 0, 2)
        returns = algorithm.evaluate_policy(seeds)  # type: ignore[attr-defined]
        restored.load_state_dict(algorithm.state_dict())  # type: ignore[attr-defined]
        mean = algorithm.vec_env.obs_rms.mean  # type: ignore[attr-defined]
        assert np.abs(mean).sum() > 0
        np.testing.assert_array_equal(restored.vec_env.obs_rms.mean, mean)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(restored.evaluate_policy(seeds), returns)  # type: ignore[attr-defined]
    finally:
        algorithm.close()  # type: ignore[attr-defined]
        restored.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("algo", "params"),
    [("ppo", {"n_steps": 64, "batch_size": 32, "n_epochs": 2}), ("a2c", {"updates_per_step": 8})],
)
def test_sb3_chunks_equal_one_plain_learn_call(algo: str, params: dict[str, int]) -> None:
    """Stepping in chunks is exactly SB3's own ``learn`` over the same number of timesteps."""
    import stable_baselines3
    import torch
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv
    from torch.nn.utils import parameters_to_vector

    algorithm = _sb3(algo, net_arch=[16], activation="tanh", **params)
    try:
        steps = sum(algorithm.step().timesteps for _ in range(3))  # type: ignore[attr-defined]
        ours = algorithm.current_parameters()  # type: ignore[attr-defined]
    finally:
        algorithm.close()  # type: ignore[attr-defined]
    sb3_params = {k: v for k, v in params.items() if k != "updates_per_step"}
    env = DummyVecEnv([lambda: Monitor(make_env("CartPole"))])
    model = getattr(stable_baselines3, algo.upper())(
        "MlpPolicy",
        env,
        device="cpu",
        seed=5,
        **sb3_params,
        policy_kwargs={"net_arch": [16], "activation_fn": torch.nn.Tanh},
    )
    model.learn(steps)
    plain = parameters_to_vector(model.policy.parameters()).detach().numpy()
    env.close()
    np.testing.assert_array_equal(ours, plain)
