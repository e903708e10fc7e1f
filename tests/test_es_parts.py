"""The one ES algorithm's parts, over every registered ES: the run parts and schedules every
ES gets whatever its codec, bitwise resume through a real checkpoint file, the adaptive cap
of a generation in which every candidate failed, and xNES with an injected ClipUp."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from algorithms.base import RunContext
from algorithms.es_core import ClipUp
from algorithms.es_engine import ESAlgorithm, ESDefinition
from algorithms.registry import algorithm_names, get_algorithm
from evaluation.protocol import EvalResult
from harness.checkpoint import checkpoint_key, load_checkpoint, save_checkpoint
from harness.config import ConfigError, validate_params
from harness.runner import build_policy_spec, create_algorithm

ES_NAMES = [name for name in algorithm_names() if get_algorithm(name).family == "es"]
assert ES_NAMES, "no ES registered"

#: Knobs that keep one Pendulum generation of each ES to a fraction of a second.
SMALL: dict[str, dict[str, Any]] = {
    "optimes": {"population": 6},
    "pgpe": {"population": 6},
    "snes": {"population": 6},
    "nsr-es": {"population": 6, "meta_population": 2, "centre_episodes": 1},
    "nsra-es": {"population": 6, "meta_population": 2, "centre_episodes": 1},
    "cma": {"population": 6},
    "nevergrad-es": {"population": 6},
    "lm-ma-es": {"population": 6},
    "xnes": {"population": 6},
    "cem": {"population": 6},
}


def build(name: str, seed: int = 5, limit: int | None = 200, **knobs: Any) -> ESAlgorithm:
    """A real ES on Pendulum (linear policy, 200-step episodes), inline evaluator; ``limit``:
    the run's episode limit (None: the env's own)."""
    definition = get_algorithm(name)
    assert isinstance(definition, ESDefinition)
    config = {
        "env": "Pendulum",
        "policy": {"kind": "linear", "hidden_sizes": [], "activation": "tanh"},
    }
    context = RunContext(
        "Pendulum", build_policy_spec(config), seed, 1, 1, "inline", max_episode_steps=limit
    )
    params = {"noise_size": 1 << 16} if definition.codec == "table" else {}
    params |= {**SMALL.get(name, {}), **knobs}
    config_object = validate_params(params, definition.Config, name)
    algorithm = create_algorithm(definition, context, config_object)
    assert isinstance(algorithm, ESAlgorithm)
    return algorithm


def generation_tasks(algorithm: ESAlgorithm) -> list[Any]:
    """The tasks the codec writes for the next generation (asked of a copy of its stream)."""
    from algorithms.es_common import STREAM_GENERATION, stream_rng

    rng = stream_rng(algorithm.context.seed, STREAM_GENERATION, algorithm.generation)
    candidates = algorithm.strategy.ask(rng)
    return algorithm.codec.tasks(candidates, rng)


@pytest.mark.parametrize("name", ES_NAMES)
def test_every_es_gets_observation_statistics_the_cap_and_action_noise(name: str) -> None:
    knobs = {"obs_norm": True, "obs_fraction": 1.0, "action_noise_std": 0.3}
    algorithm = build(name, train_episode_steps=50, **knobs)
    try:
        record = algorithm.step()
        # every training rollout fed the statistics, once per step
        count = algorithm.run.obs_stat.count - algorithm.run.obs_stat.eps
        assert 0 < count <= record.timesteps  # novelty search's probes collect none
        assert algorithm.codec.target().obs_mean is not None  # what workers normalise by
        tasks = generation_tasks(algorithm)
        assert all(task.max_steps == 50 for task in tasks)  # train_episode_steps
        assert all(task.collect_obs for task in tasks)
        assert all(task.action_noise_std == 0.3 for task in tasks)
        seeds = {task.action_noise_seed for task in tasks}
        assert None not in seeds and len(seeds) == len(tasks)  # each its own noise
        assert record.extras["episode_length_mean"] == 50.0
    finally:
        algorithm.close()
    adaptive = build(name, limit=None, episode_cap="adaptive")
    try:
        adaptive.step()
        assert adaptive.run.episode_cap == 400  # 2 x the 200-step episodes' mean
    finally:
        adaptive.close()


@pytest.mark.parametrize("name", ES_NAMES)
def test_every_es_applies_the_schedules_it_has_and_refuses_the_others(name: str) -> None:
    definition = get_algorithm(name)
    schedules = definition.Config.SCHEDULES  # type: ignore[attr-defined]
    for kind, metric in (("sigma", "sigma"), ("lr", "lr")):
        if kind not in schedules:
            with pytest.raises(ConfigError, match=f"{kind}_decay and {kind}_min need"):
                build(name, **{f"{kind}_decay": 0.5})
            continue
        plain, halved = build(name), build(name, **{f"{kind}_decay": 0.5})
        try:
            before = plain.step().extras[metric]
            after = halved.step().extras[metric]
        finally:
            plain.close()
            halved.close()
        assert after == pytest.approx(0.5 * before, rel=1e-6), (kind, before, after)


@pytest.mark.parametrize("name", ES_NAMES)
def test_every_es_resumes_from_a_checkpoint_file_bit_for_bit(name: str, tmp_path: Path) -> None:
    knobs = {"obs_norm": True, "obs_fraction": 0.5}
    straight = build(name, **knobs)
    try:
        expected = [straight.step() for _ in range(4)]
        expected_params = straight.current_parameters()
    finally:
        straight.close()
    first = build(name, **knobs)
    try:
        head = [first.step() for _ in range(2)]
        checkpoint_key(create=True)
        save_checkpoint(tmp_path / "checkpoint", first.state_dict())
    finally:
        first.close()
    second = build(name, **knobs)
    try:
        second.load_state_dict(load_checkpoint(tmp_path / "checkpoint"))
        tail = [second.step() for _ in range(2)]
        params = second.current_parameters()
    finally:
        second.close()

    def same(record: Any) -> tuple[Any, ...]:
        extras = {k: v for k, v in record.extras.items() if not k.endswith("_s")}
        return record.timesteps, record.fitness_mean, record.fitness_max, extras

    assert [same(r) for r in head + tail] == [same(r) for r in expected]
    np.testing.assert_array_equal(params, expected_params)


def test_a_generation_in_which_every_candidate_failed_keeps_the_adaptive_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    algorithm = build("optimes", limit=None, episode_cap="adaptive")
    algorithm.context = dataclasses.replace(algorithm.context, fail_on_env_error=False)
    try:
        algorithm.step()
        assert algorithm.run.episode_cap == 400
        evaluate = algorithm.evaluator.evaluate

        def every_candidate_fails(target: Any, tasks: Any) -> Any:
            results, stats = evaluate(target, tasks)
            failed = [
                EvalResult(r.task_id, r.generation, r.returns[:0], r.lengths[:0], 0, failed="boom")
                for r in results
            ]
            return failed, stats

        monkeypatch.setattr(algorithm.evaluator, "evaluate", every_candidate_fails)
        record = algorithm.step()
        assert record.extras["failed_candidates"] == 6
        assert algorithm.run.episode_cap == 400  # no finished episode: no evidence to move it
    finally:
        algorithm.close()


def test_xnes_takes_clipup_and_its_step_on_mu_is_clipped() -> None:
    algorithm = build("xnes", optimizer="clipup", learning_rate=0.05, max_speed=0.08)
    try:
        strategy: Any = algorithm.strategy
        assert isinstance(strategy.update, ClipUp)
        assert "ClipUp" in str(get_algorithm("xnes").describe_update({"optimizer": "clipup"}))
        for _ in range(4):
            before = strategy.mu.copy()
            algorithm.step()
            assert 0 < np.linalg.norm(strategy.mu - before) <= 0.08 + 1e-6
    finally:
        algorithm.close()
