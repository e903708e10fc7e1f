"""Observation wrappers used by the environment registry."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ZeroVelocityPendulum(gym.ObservationWrapper[np.ndarray, Any, np.ndarray]):
    """Pendulum-v1 with the angular velocity hidden (a partially observed task).

    Pendulum-v1 observes ``[cos θ, sin θ, θdot]``. This wrapper sets ``θdot`` to zero and keeps
    three dimensions, so a memoryless policy cannot see the velocity while the observation shape
    (and hence an LSTM's input size of 3) stays the same as the original task.
    """

    def __init__(self, env: gym.Env[np.ndarray, Any]) -> None:
        """Wrap ``env``, which must have a 1-D Box observation space of size 3."""
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or space.shape != (3,):
            raise ValueError(
                f"ZeroVelocityPendulum expects a Box observation of shape (3,), got {space}"
            )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """Return a copy of ``observation`` with the velocity component set to zero."""
        out = np.array(observation, copy=True)
        out[2] = 0.0
        return out
