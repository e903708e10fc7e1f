"""Gymnasium environments that go wrong on purpose, for the fault tests.

Importing this module registers them. Each env is a small balancing task
(4 observations, 2 discrete actions, 40-step episodes) that behaves until its
``fault_reset``-th ``reset`` (counted per env instance, so per worker), and in
that episode at step ``fault_step`` does one of:

* ``FaultyNanReward-v0``: returns a NaN reward;
* ``FaultyInfObs-v0``: returns an observation holding +inf;
* ``FaultyStepRaise-v0``: raises inside ``step``.

``Unseeded-v0`` never faults but draws from an unseeded RNG: a non-reproducible env
for ``harness check-repro`` to catch.

Worker processes must import this module too: the tests put a
``sitecustomize.py`` that imports it on ``PYTHONPATH``, so that every Python
process of the run (the CLI and the spawned workers) has the envs registered.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

MODES = {
    "FaultyNanReward-v0": "nan_reward",
    "FaultyInfObs-v0": "inf_obs",
    "FaultyStepRaise-v0": "raise",
}


class EnvStepError(RuntimeError):
    """What ``FaultyStepRaise-v0`` raises."""


class FaultyEnv(gym.Env[np.ndarray, Any]):
    """A deterministic toy task with one planted fault."""

    def __init__(
        self, mode: str, fault_reset: int = 3, fault_step: int = 5, render_mode: str | None = None
    ) -> None:
        self.mode = mode
        self.render_mode = render_mode
        self.fault_reset = fault_reset
        self.fault_step = fault_step
        self.observation_space = gym.spaces.Box(-10.0, 10.0, shape=(4,), dtype=np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.resets = 0
        self.t = 0
        self.state = np.zeros(4)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.resets += 1
        self.t = 0
        self.state = self.np_random.uniform(-0.5, 0.5, size=4)
        return self.state.copy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        push = 0.1 if int(action) == 1 else -0.1
        self.state = np.clip(self.state * 0.95 + push, -10.0, 10.0)
        reward = 1.0 - float(abs(self.state[0]))
        obs = self.state.copy()
        if self.resets == self.fault_reset and self.t == self.fault_step:
            if self.mode == "nan_reward":
                reward = float("nan")
            elif self.mode == "inf_obs":
                obs[2] = np.inf
            else:
                raise EnvStepError(f"planted failure in step {self.t}")
        return obs, reward, False, self.t >= 40, {}


for env_id, mode in MODES.items():
    if env_id not in gym.registry:
        gym.register(env_id, entry_point="faulty_env:FaultyEnv", kwargs={"mode": mode})


class UnseededEnv(FaultyEnv):
    """Never faults, but its rewards use the process-global NumPy RNG, which the head seeds
    (Sacred does) and a fresh worker process does not: results differ from run to run."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__("none", fault_reset=-1, render_mode=render_mode)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward + 1e-3 * float(np.random.random()), terminated, truncated, info


if "Unseeded-v0" not in gym.registry:
    gym.register("Unseeded-v0", entry_point="faulty_env:UnseededEnv")
