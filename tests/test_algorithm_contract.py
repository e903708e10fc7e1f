"""Every registered algorithm through the real `harness run` path: complete, named, reproducible.

Runs go through :func:`harness.cli.main` in this process (the same code path as the
console script, without a second interpreter's start-up) into a Sacred FileStorage
directory, and are read back from ``run.json`` and ``metrics.json``.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from algorithms.registry import algorithm_names, get_algorithm
from harness import cli
from harness.runner import COMMON_METRICS
from tests.conftest import only_run_dir, read_run

#: Nevergrad optimizers reached through the ``ng:`` prefix, checked like registered names.
NG_NAMES = ["ng:CMA", "ng:TwoPointsDE"]

#: Knobs that keep each algorithm's CartPole run to about a second.
TINY: dict[str, list[str]] = {
    "ppo": ["n_steps=128", "batch_size=64", "n_epochs=2"],
    "a2c": ["updates_per_step=20"],
    "nevergrad-es": ["population=10"],
    "ng:CMA": ["population=10"],
    "ng:TwoPointsDE": ["population=10"],
    "pgpe": ["population=10"],
    # novelty search also measures its centres (meta_population x centre_episodes episodes)
    "nsr-es": ["population=10", "meta_population=2", "centre_episodes=1"],
    "nsra-es": ["population=10", "meta_population=2", "centre_episodes=1"],
    # off-policy: 1000 random steps, then ~500 small gradient steps
    "sac": ["learning_starts=1000", "batch_size=32", "net_arch=[16]", "chunk_timesteps=500"],
    "tqc": ["learning_starts=1000", "batch_size=32", "net_arch=[16]", "chunk_timesteps=500"],
    "td3": ["learning_starts=1000", "batch_size=32", "net_arch=[16]", "chunk_timesteps=500"],
    "recurrent-ppo": [
        *("n_steps=128", "batch_size=64", "n_epochs=2", "net_arch=[]", "lstm_hidden_size=16")
    ],
}


def env_for(algo: str) -> str:
    """CartPole, or Pendulum for an algorithm that learns continuous actions only."""
    continuous = getattr(get_algorithm(algo), "continuous_actions_only", False)
    return "Pendulum" if continuous else "CartPole"


BUDGET = 1500


def _is_timing(name: str) -> bool:
    return name.endswith("_s") or name in ("worker_seconds", "cpu_seconds")


def run_algorithm(
    runs_dir: Path, algo: str, *extra: str, seed: int = 0, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, Any]]:
    """One tiny CartPole (or Pendulum) run through the CLI; returns its directory and records."""
    monkeypatch.setenv("HARNESS_PROGRESS", "0")
    sets = [arg for knob in TINY.get(algo, []) for arg in ("--set", knob)]
    argv = [
        "run",
        "--algo",
        algo,
        "--env",
        env_for(algo),
        "--timesteps",
        str(BUDGET),
        "--seed",
        str(seed),
        "--runs-dir",
        str(runs_dir),
        "--no-progress",
        "--set",
        "eval_episodes=3",
        "--set",
        "eval_every_timesteps=1000",
        *sets,
        *extra,
    ]
    # an RL algorithm refuses ES-only flags
    if "--backend" not in extra and get_algorithm(algo).family == "es":
        argv += ["--backend", "inline"]
    assert cli.main(argv) == 0
    run_dir = only_run_dir(runs_dir)
    return run_dir, read_run(run_dir)


def deterministic(metrics: dict[str, Any], drop_bytes: bool = False) -> dict[str, Any]:
    """Every metric series that must repeat exactly (steps and values), timings left out."""
    return {
        name: (series["steps"], series["values"])
        for name, series in metrics.items()
        if not _is_timing(name) and not (drop_bytes and name.startswith("bytes_"))
    }


#: the RL adapters whose contract run builds torch or JAX models for tens of seconds on a slow
#: machine: in make test-slow; ppo keeps the RL side of the contract in make test
HEAVY_CONTRACT = {"sac", "tqc", "td3", "a2c", "recurrent-ppo"}


@pytest.mark.parametrize(
    "algo",
    [
        pytest.param(a, marks=pytest.mark.slow) if a in HEAVY_CONTRACT else a
        for a in [*algorithm_names(), *NG_NAMES]
    ],
)
def test_algorithm_completes_with_common_metrics_and_repeats_exactly(
    algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, first = run_algorithm(tmp_path / "a", algo, seed=7, monkeypatch=monkeypatch)
    assert first["run"]["status"] == "COMPLETED"
    assert first["config"]["algo"] == algo
    metrics = first["metrics"]
    assert set(metrics) >= set(COMMON_METRICS), set(COMMON_METRICS) - set(metrics)
    timesteps = metrics["timesteps"]["values"]
    assert timesteps == sorted(timesteps) and timesteps[-1] >= BUDGET
    assert len(metrics["eval_return_mean"]["values"]) >= 2  # first step and the end
    assert np.isfinite(metrics["eval_return_mean"]["values"]).all()
    params = np.load(run_dir / "final_params.npy")
    assert params.dtype == np.float32 and np.isfinite(params).all()
    if get_algorithm(algo).family == "rl":  # SB3's own export, loadable by CLASS.load
        assert (run_dir / "model.zip").stat().st_size > 0

    _, second = run_algorithm(tmp_path / "b", algo, seed=7, monkeypatch=monkeypatch)
    assert deterministic(first["metrics"]) == deterministic(second["metrics"])


@pytest.mark.parametrize("algo", ["cma", "nevergrad-es"])
def test_vector_candidates_are_counted_on_the_wire(
    algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, record = run_algorithm(tmp_path / "v", algo, seed=1, monkeypatch=monkeypatch)
    dim = np.load(run_dir / "final_params.npy").size
    metrics = record["metrics"]
    sent = np.asarray(metrics["bytes_to_workers"]["values"])
    population = np.asarray(metrics["population"]["values"])
    # Each candidate crosses as d float32 values, plus pickling overhead.
    assert (sent >= population * dim * 4).all()
    assert (sent <= population * (dim * 4 + 400) + 2000).all()
    assert (np.asarray(metrics["bytes_from_workers"]["values"]) > 0).all()


def test_optimes_sends_far_fewer_bytes_than_cma(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cma = run_algorithm(tmp_path / "c", "cma", seed=1, monkeypatch=monkeypatch)
    _, opt = run_algorithm(tmp_path / "o", "optimes", seed=1, monkeypatch=monkeypatch)

    def per_candidate(record: dict[str, Any], population: float) -> float:
        return float(np.mean(record["metrics"]["bytes_to_workers"]["values"])) / population

    cma_pop = float(record_value(cma, "population"))
    opt_pop = float(opt["config"]["params"]["population"])
    assert per_candidate(opt, opt_pop) < 0.5 * per_candidate(cma, cma_pop)


def record_value(record: dict[str, Any], name: str) -> float:
    return float(record["metrics"][name]["values"][0])


def test_vector_es_metrics_do_not_depend_on_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, inline = run_algorithm(tmp_path / "i", "cma", seed=2, monkeypatch=monkeypatch)
    _, pool = run_algorithm(
        tmp_path / "p",
        "cma",
        "--backend",
        "process",
        "--workers",
        "2",
        seed=2,
        monkeypatch=monkeypatch,
    )
    assert deterministic(inline["metrics"], drop_bytes=True) == deterministic(
        pool["metrics"], drop_bytes=True
    )


def test_different_seeds_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for algo in ("cma", "ppo"):
        _, one = run_algorithm(tmp_path / algo / "1", algo, seed=1, monkeypatch=monkeypatch)
        _, two = run_algorithm(tmp_path / algo / "2", algo, seed=2, monkeypatch=monkeypatch)
        assert deterministic(one["metrics"]) != deterministic(two["metrics"]), algo


#: every update rule's name in a description; a description names its own rule and no other
RULE_WORDS = {"adam": "Adam", "sgd": "SGD", "clipup": "ClipUp"}
ES_NAMES = [name for name in algorithm_names() if get_algorithm(name).family == "es"]


@pytest.mark.parametrize("algo", ES_NAMES)
def test_every_es_describes_the_update_its_config_names(algo: str) -> None:
    """The report's "ES update" comes from the config: the rule it names, no other."""
    cls = get_algorithm(algo)
    params = asdict(cls.Config())
    described = cls.describe_update(params)
    assert described is None or (isinstance(described, str) and described)
    for rule in getattr(cls.Config, "OPTIMIZERS", ()):
        text = cls.describe_update({**params, "optimizer": rule})
        assert text is not None and RULE_WORDS[rule] in text, (algo, rule, text)
        others = [word for name, word in RULE_WORDS.items() if name != rule]
        assert not any(word in text for word in others), (algo, rule, text)
        if "sigma_learning_rate" in params:
            assert "sigma:" in text, (algo, text)  # a sigma that adapts says how
    if "optimizer" in params:
        assert described is not None and RULE_WORDS[params["optimizer"]] in described
