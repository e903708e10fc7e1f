"""Behaviour characterisations (BCs): a few floats that say what a policy did in an episode.

Novelty search (Lehman and Stanley 2011) rewards a policy for behaving unlike those seen
before; with evolution strategies (NS-ES, NSR-ES, NSRA-ES: Conti et al. 2018, NeurIPS,
arXiv:1712.06560, section 3) a policy's novelty is the mean distance of its BC to the k
nearest BCs of an archive. A BC is declared with the env, here: the worker computes it at
the end of each episode (:meth:`envs.rollout.RolloutWorker.run` with ``behaviour=True``)
and sends the mean over the candidate's episodes back with its returns.

The built-in BCs (each a function of an :class:`Episode`):

* locomotion (``AntBulletEnv-v0``, ``Ant-v5``, ``HalfCheetah-v5``, ``Hopper-v5``,
  ``Humanoid-v5``): the torso's final position relative to where the episode started,
  :func:`final_displacement` (Conti et al.'s humanoid BC is its final x, y). The second
  coordinate is y for the quadrupeds and the humanoid, the root's height z for the planar
  HalfCheetah and Hopper (MuJoCo's ``qpos[:2]``);
* ``LunarLanderContinuous-v3``: where the lander ended, :func:`lander_final_position` (the
  final observation's x and y, in the env's units relative to the pad);
* ``Pendulum-v1`` (``Pendulum`` and ``PendulumPO``): the time-averaged cos and sin of the
  angle and the mean absolute angular velocity over the env's maximum speed,
  :func:`pendulum_swing` (balancing up: about (1, 0, 0); spinning: (0, 0, large)). The
  velocity is recovered from consecutive angles, so it is the same whether the observation
  shows it (``Pendulum``) or not (``PendulumPO``);
* any other env: the time-averaged observation, :func:`mean_observation`.

An env of your own declares its BC in one of two ways (docs/extending.md): a method
``behaviour_characterisation(episode)`` on the env (found on ``env.unwrapped``), or
:func:`register_behaviour` called in the module that registers the env (the module named
with ``--import``, which every worker imports too). The env's method wins over the
registry, a registered name over the fallback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Behaviour",
    "Episode",
    "behaviour_for",
    "body_position",
    "final_displacement",
    "lander_final_position",
    "mean_observation",
    "mean_of_episodes",
    "pendulum_swing",
    "register_behaviour",
]


@dataclass(frozen=True)
class Episode:
    """What a BC function sees of one finished episode.

    ``env`` is the env as the episode ended (before the next reset; its ``unwrapped`` holds
    the simulator's state); ``observations`` the raw observations the policy acted on, one
    row per step (the reset observation first); ``final_observation`` the one the episode
    ended with; ``start`` :func:`body_position` right after the reset (None where the env
    has no body).
    """

    env: Any
    observations: np.ndarray
    final_observation: np.ndarray
    start: tuple[float, float] | None


#: A behaviour characterisation: the floats of one episode (the same count every episode).
Behaviour = Callable[[Episode], Sequence[float]]


def body_position(env: Any) -> tuple[float, float] | None:
    """Where the agent's body is (x, y in the env's world units), where the env says.

    pybullet locomotion (``robot.body_xyz``), MuJoCo (``data.qpos[:2]``, the root's
    x and y for the locomotion tasks) and Box2D's lander (``lander.position``); None
    for other envs.
    """
    inner = env.unwrapped
    robot = getattr(inner, "robot", None)
    if robot is not None and getattr(robot, "body_xyz", None) is not None:
        x, y = robot.body_xyz[:2]
        return float(x), float(y)
    lander = getattr(inner, "lander", None)
    if lander is not None:
        return float(lander.position[0]), float(lander.position[1])
    data = getattr(inner, "data", None)
    if data is not None and getattr(data, "qpos", None) is not None and len(data.qpos) >= 2:
        return float(data.qpos[0]), float(data.qpos[1])
    return None


def final_displacement(episode: Episode) -> tuple[float, float]:
    """The torso's final position relative to its start: (x, y), in the env's metres."""
    end = body_position(episode.env)
    if end is None or episode.start is None:
        raise ValueError(f"{type(episode.env.unwrapped).__name__} reports no body position")
    return end[0] - episode.start[0], end[1] - episode.start[1]


def lander_final_position(episode: Episode) -> tuple[float, float]:
    """Where the lander ended: the final observation's x and y (relative to the pad's centre,
    in the env's scaled units)."""
    final = episode.final_observation
    return float(final[0]), float(final[1])


def pendulum_swing(episode: Episode) -> tuple[float, float, float]:
    """Mean cos and sin of the angle, and mean |angular velocity| / the env's maximum speed.

    The velocity of step t is the change of angle to the next observation over the env's
    ``dt``: Pendulum-v1 integrates ``theta += theta_dot * dt`` with ``|theta_dot| <=
    max_speed``, so the change (under pi) is exact however the observation hides the speed.
    """
    inner = episode.env.unwrapped
    observed = episode.observations
    if not len(observed):
        return 0.0, 0.0, 0.0
    angles = np.arctan2(
        np.append(observed[:, 1], episode.final_observation[1]),
        np.append(observed[:, 0], episode.final_observation[0]),
    )
    change = (np.diff(angles) + np.pi) % (2 * np.pi) - np.pi  # wrapped into [-pi, pi)
    speed = np.abs(change).mean() / float(inner.dt) / float(inner.max_speed)
    return float(observed[:, 0].mean()), float(observed[:, 1].mean()), float(speed)


def mean_observation(episode: Episode) -> tuple[float, ...]:
    """The fallback: every observation dimension averaged over the episode."""
    observed = episode.observations
    if not len(observed):
        return tuple(float(v) for v in np.ravel(episode.final_observation))
    return tuple(float(v) for v in observed.mean(axis=0))


_REGISTRY: dict[str, Behaviour] = {
    "AntBulletEnv-v0": final_displacement,
    "Ant-v5": final_displacement,
    "HalfCheetah-v5": final_displacement,
    "Hopper-v5": final_displacement,
    "Humanoid-v5": final_displacement,
    "LunarLanderContinuous-v3": lander_final_position,
    "Pendulum-v1": pendulum_swing,
}


def register_behaviour(env: str, behaviour: Behaviour, *, replace: bool = False) -> Behaviour:
    """Declare ``behaviour`` as the BC of ``env`` (a gymnasium id or a short name).

    Call it in the module that registers the env; returns ``behaviour``. A name that
    already has another BC (a built-in one, or one declared twice) is refused unless
    ``replace``.
    """
    known = _REGISTRY.get(env)
    if known is not None and known is not behaviour and not replace:
        raise ValueError(
            f"env {env!r} already declares the behaviour characterisation "
            f"{getattr(known, '__qualname__', known)!r} (replace=True to replace it)"
        )
    _REGISTRY[env] = behaviour
    return behaviour


def behaviour_for(names: Sequence[str], env: Any) -> tuple[str, Behaviour]:
    """The BC of an env and what declared it: the env's own ``behaviour_characterisation``,
    else the first of ``names`` (its short name, its gymnasium id) that is registered, else
    :func:`mean_observation`."""
    own = getattr(env.unwrapped, "behaviour_characterisation", None)
    if callable(own):
        return f"{type(env.unwrapped).__name__}.behaviour_characterisation", own
    for name in names:
        key = name.rpartition(":")[2]  # gymnasium's module:Id form
        if key in _REGISTRY:
            found = _REGISTRY[key]
            return getattr(found, "__name__", key), found
    return mean_observation.__name__, mean_observation


def mean_of_episodes(behaviours: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The candidate's BC: the mean over its episodes (float64), as plain floats.

    Raises ValueError where the episodes' BCs differ in length or one is not finite.
    """
    if not behaviours:
        return ()
    sizes = {len(b) for b in behaviours}
    if len(sizes) != 1:
        raise ValueError(f"behaviour characterisations of different lengths: {sorted(sizes)}")
    mean = np.asarray(behaviours, dtype=np.float64).mean(axis=0)
    if not all(math.isfinite(v) for v in mean):
        raise ValueError(f"non-finite behaviour characterisation {mean.tolist()}")
    return tuple(float(v) for v in mean)
