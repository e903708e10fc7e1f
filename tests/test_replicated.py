"""Replicated mode (``sync=seeds``, Algorithm 2): same results as broadcast, seeds-only wire."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from algorithms.es_engine import ESAlgorithm, ReplicaUpdate
from tests.test_parallel import make_algorithm, reference, run_generations


@pytest.mark.parametrize(("backend", "workers"), [("inline", 1), ("process", 2)])
def test_seeds_mode_equals_broadcast_mode_exactly(backend: str, workers: int) -> None:
    outcome = run_generations(make_algorithm("optimes", backend, workers, "seeds"))
    outcome.assert_same(reference("optimes", "broadcast"))
    assert [r.extras["resyncs"] for r in outcome.records] == [0.0] * len(outcome.records)


def test_seeds_mode_bytes_do_not_grow_with_the_parameter_count() -> None:
    def steady_bytes(sync: str, hidden: tuple[int, ...]) -> tuple[int, int]:
        outcome = run_generations(make_algorithm("optimes", "process", 2, sync, hidden))
        later = outcome.records[1:]  # generation 0 of seeds mode carries the full sync
        return (max(r.bytes_to_workers for r in later), max(r.bytes_from_workers for r in later))

    small, large = (16,), (512,)  # 98 and 3,074 parameters
    grow = (3074 - 98) * 4 * 2  # two workers each receive the larger centre
    seeds_small, seeds_large = steady_bytes("seeds", small), steady_bytes("seeds", large)
    broadcast_small, broadcast_large = (
        steady_bytes("broadcast", small),
        steady_bytes("broadcast", large),
    )
    assert abs(seeds_large[0] - seeds_small[0]) < 64  # fitness values pickle to equal sizes
    assert broadcast_large[0] - broadcast_small[0] >= grow
    assert seeds_large[0] < broadcast_large[0]
    assert seeds_large[1] - seeds_small[1] < 64  # results and checksums: scalars either way


def _diverge_at(generation: int) -> Any:
    """Corrupt the update every replica receives in one generation (the head's stays right)."""

    def before_step(algorithm: ESAlgorithm, step: int) -> None:
        if step != generation:
            return
        evaluator = algorithm.evaluator
        original = evaluator.update_replicas

        def corrupted(update: ReplicaUpdate, gen: int, checksum: int) -> Any:
            evaluator.update_replicas = original  # type: ignore[method-assign]
            reversed_fitness = update.fitness[::-1].copy()
            bad = ReplicaUpdate(
                update.generation,
                update.noise_indices,
                reversed_fitness,
                update.obs_increments,
                update.timesteps,
            )
            return original(bad, gen, checksum)

        evaluator.update_replicas = corrupted  # type: ignore[method-assign]

    return before_step


@pytest.mark.parametrize(("backend", "workers"), [("inline", 1), ("process", 2)])
def test_diverged_replica_is_detected_resynced_and_results_still_match(
    backend: str, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    algorithm = make_algorithm("optimes", backend, workers, "seeds")
    outcome = run_generations(algorithm, before_step=_diverge_at(1))  # type: ignore[arg-type]
    outcome.assert_same(reference("optimes", "broadcast"))
    assert [r.extras["resyncs"] for r in outcome.records] == [0.0, float(workers), 0.0]
    assert "replica diverged at generation 2" in caplog.text


def test_seeds_mode_resumes_from_a_checkpoint_exactly() -> None:
    straight = run_generations(make_algorithm("optimes", "inline", 1, "seeds"), 4)
    first = make_algorithm("optimes", "inline", 1, "seeds")
    try:
        for _ in range(2):
            first.step()
        state = first.state_dict()
    finally:
        first.close()
    resumed = make_algorithm("optimes", "inline", 1, "seeds")
    resumed.step()  # its replica moves ahead; loading must resync it
    resumed.load_state_dict(state)
    outcome = run_generations(resumed, 2)
    assert outcome.deterministic() == straight.deterministic()[2:]
    np.testing.assert_array_equal(outcome.params, straight.params)


def test_bad_sync_value_is_refused() -> None:
    with pytest.raises(ValueError, match="sync must be broadcast or seeds"):
        make_algorithm("optimes", "inline", 1, "gossip")
