"""The sweep's ETA per kind of cell: a PPO cell is not estimated from ES cells' times
while its own kind has finished, and the bar says "ETA unknown" before anything has."""

from __future__ import annotations

import math

import pytest

from harness.sweep.estimate import CostEstimator

ES = {"algo": "optimes", "env": "mine:Reach-v0", "timesteps": 100_000, "workers": 1}
PPO = {"algo": "ppo", "env": "mine:Reach-v0", "timesteps": 100_000, "workers": 1}


def test_eta_is_unknown_until_a_cell_finishes_then_per_kind() -> None:
    # a user's own env: the benchmark plan knows nothing of it, and no default is assumed
    estimator = CostEstimator(plan={}, start_s=0.0)
    waiting = [ES, ES, PPO, PPO]
    assert not estimator.estimate(PPO).known and math.isnan(estimator.estimate(PPO).seconds)
    assert estimator.remaining(waiting, [], jobs=1) is None
    assert estimator.describe(waiting, [], jobs=1) == "ETA unknown (no cell finished yet)"

    # two ES cells finished (7 s each): the PPO cells are a guess from them, and said so
    estimator.observe(ES, 7.0)
    estimator.observe(ES, 7.0)
    assert estimator.estimate(ES).source == "measured"
    assert estimator.estimate(PPO).source == "mean"
    assert estimator.estimate(PPO).seconds == pytest.approx(7.0)
    shown = estimator.describe([PPO, PPO], [(PPO, 3.0)], jobs=1)
    assert shown == "ETA ~18s (ppo guessed from other cells)"

    # a PPO cell finished at 200 s: the other PPO cells cost what it did, not what ES did
    estimator.observe(PPO, 200.0)
    assert estimator.estimate(PPO).source == "measured"
    assert estimator.estimate(PPO).seconds == pytest.approx(200.0)
    assert estimator.estimate(ES).seconds == pytest.approx(7.0)
    # one PPO waiting, one running for 50 s, one ES waiting, over 2 jobs
    left = estimator.remaining([PPO, ES], [(PPO, 50.0)], jobs=2)
    assert left == pytest.approx((200.0 + 150.0 + 7.0) / 2)
    assert estimator.describe([PPO, ES], [(PPO, 50.0)], jobs=2) == "ETA ~2m58s (measured)"
    # a PPO cell with twice the budget: twice the measured seconds per timestep
    assert estimator.estimate({**PPO, "timesteps": 200_000}).seconds == pytest.approx(400.0)
    assert estimator.describe([], [], jobs=1) == "ETA ~0s (done)"


def test_eta_of_other_envs_and_the_plan() -> None:
    # the plan still serves a cell of its kind before one finished; a stated default too
    estimator = CostEstimator(plan={("ppo", "mine:Reach-v0"): 0.002}, start_s=0.0)
    assert estimator.estimate(PPO).source == "plan"
    assert estimator.estimate(PPO).seconds == pytest.approx(200.0)
    assert estimator.describe([ES, PPO], [], jobs=1) == "ETA unknown (no cell finished yet)"
    assert CostEstimator(default_s=60.0).estimate(ES).source == "default"
    # a finished run of one (algorithm, env) is not a measurement of another env
    estimator.observe({**ES, "env": "CartPole"}, 5.0)
    assert estimator.estimate(ES).source == "mean"
    assert estimator.describe([ES, PPO], [], jobs=1) == (
        "ETA ~3m25s (plan; optimes guessed from other cells)"
    )
