"""Group labels name only the knobs a group has: ``k`` (episodes per fitness) is an ES
knob, so an RL group is never labelled "ppo k=1"; the family the algorithm declares
decides, never its name."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from algorithms import registry
from algorithms.base import Algorithm
from harness.report.data import GROUP, add_groups, episodes_knob_applies
from harness.report.scaling import scaling_frame


class _OwnRL(Algorithm):
    """A user's RL algorithm whose name says nothing of its family."""

    family = "rl"


@pytest.fixture
def own_rl(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    registry.algorithm_names()  # the built-in ones first, so the lookup finds ours beside
    monkeypatch.setitem(registry._REGISTRY, "reacher-opt", _OwnRL)
    episodes_knob_applies.cache_clear()
    yield "reacher-opt"
    episodes_knob_applies.cache_clear()


def _runs(algos: list[str], ks: list[int], workers: list[int] | None = None) -> pd.DataFrame:
    n = len(algos)
    return pd.DataFrame(
        {
            "run": [str(i) for i in range(n)],
            "env": ["E"] * n,
            "algo": algos,
            "seed": list(range(n)),
            "episodes_per_fitness": ks,
            "workers": workers or [1] * n,
        }
    )


def test_rl_groups_carry_no_k(own_rl: str) -> None:
    runs = _runs(["optimes", "optimes", "ppo", own_rl, "not-installed"], [1, 5, 1, 5, 5])
    labels = add_groups(runs)[GROUP].tolist()
    assert labels == ["optimes k=1", "optimes k=5", "ppo", own_rl, "not-installed k=5"]
    assert not any("k=" in label for label in labels[2:4])


def test_an_rl_k_that_differs_neither_splits_nor_labels(own_rl: str) -> None:
    # only the RL runs record two k: it is no knob of theirs, so one group, no k anywhere
    runs = _runs(["cma", "cma", "a2c", "a2c", own_rl], [5, 5, 1, 4, 2])
    labels = add_groups(runs)[GROUP].tolist()
    assert labels == ["cma", "cma", "a2c", "a2c", own_rl]


def test_rl_scaling_series_carry_no_k() -> None:
    runs = _runs(["ppo", "ppo", "optimes", "optimes"], [1, 1, 1, 1], workers=[1, 2, 1, 2])
    runs = runs.assign(steps_per_s=[100.0, 180.0, 1000.0, 1900.0], backend="process")
    series = sorted(set(scaling_frame(add_groups(runs))["series"]))
    assert series == ["optimes k=1", "ppo"]
