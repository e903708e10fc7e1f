"""PointReach: steer a point to a target on the plane, registered as ``PointReach-v0``.

Importing this module registers the env with gymnasium, so gymnasium's own
``module:Id`` form finds it: ``harness run --env cem_example.envs:PointReach-v0``.
Its constructor takes no ``render_mode``: it draws nothing.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: Steps of an episode (the registration's limit).
EPISODE_STEPS = 50


class PointReach(gym.Env[np.ndarray, np.ndarray]):
    """Observation: position and target (4 floats); action: a velocity in [-1, 1]^2.

    The reward is minus the distance to the target after the move, so a return near 0
    means the point went straight there; a random policy scores about -50.
    """

    observation_space = gym.spaces.Box(-5.0, 5.0, shape=(4,), dtype=np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)

    def __init__(self, speed: float = 0.2) -> None:
        self.speed = speed
        self.position = np.zeros(2)
        self.target = np.zeros(2)

    def _observation(self) -> np.ndarray:
        return np.concatenate([self.position, self.target]).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-2.0, 2.0, size=2)
        self.target = self.np_random.uniform(-2.0, 2.0, size=2)
        return self._observation(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0) * self.speed
        self.position = np.clip(self.position + move, -5.0, 5.0)
        distance = float(np.linalg.norm(self.position - self.target))
        return self._observation(), -distance, False, False, {}


gym.register("PointReach-v0", entry_point=f"{__name__}:PointReach", max_episode_steps=EPISODE_STEPS)
