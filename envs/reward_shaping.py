"""Training-reward transforms for locomotion: leave the standing-still optimum, never reward a fall.

Locomotion rewards pay an *alive bonus* on every step the body is upright (pybullet's
Ant/Hopper/Walker/Humanoid: +1, and -1 on the falling step; MuJoCo's Ant-v5: 1,
Humanoid-v5: 5). Standing still then earns about the bonus times the episode length, a
local optimum an ES finds first. ARS (Mania et al. 2018, arXiv:1803.07055, Sec. 3) trains
with the bonus subtracted (``shift``) and evaluates on the true reward. On pybullet's Ant
that alone is not enough: each step's electricity and joint costs then outweigh its
progress and the cheapest policy falls at once. ``locomotion`` therefore rebuilds the
reward from its parts with a penalty for falling::

    r_train = progress + alive * a + costs * c + limits * l - fall * [terminated]

``shift:C`` subtracts C from every step's reward; ``locomotion:alive=A,costs=C,fall=F``
keeps a fraction A of the alive bonus and C of the costs and charges F when the episode
terminates (a fall, not the time limit). ``limits=L`` weighs pybullet's joints-at-limit
cost (0.1 per joint held at its limit, each step) on its own instead of with the other
costs: on AntBulletEnv it is the largest cost of the gaits an ES finds when all costs
are trained at a tenth (a posture, not effort), and the true return pays it in full.
``anneal=G0:G1`` is a curriculum: from ES generation G0 to G1 every weight moves linearly
to the env's own (alive, costs and limits to 1, fall and shift to 0), so the shaping that
lets an ES leave standing still is gone once a gait exists, and the last generations train
on the reward they are evaluated on. ``anneal_timesteps=T0:T1`` is the same move over the
run's training timesteps (``3.4e6:6.9e6`` is accepted): a generation with k episodes per
fitness costs k times the timesteps, so a window in generations arrives k times later in
timesteps, and one in timesteps arrives at the same sample count whatever k. Workers learn
the generation and the head's timestep count (before the generation) from each broadcast;
PPO/A2C broadcast neither and refuse both.
Only training sees the transform: the wrapper returns the shaped reward and keeps the
env's own in ``info["env_reward"]``, and every evaluation plays an unwrapped env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym

#: Per-step alive bonus of the locomotion envs whose reward the transforms know how to split.
ALIVE_BONUS = {
    "AntBulletEnv-v0": 1.0,
    "HopperBulletEnv-v0": 1.0,
    "Walker2DBulletEnv-v0": 1.0,
    "HumanoidBulletEnv-v0": 1.0,
    "HalfCheetahBulletEnv-v0": 0.0,
    "Ant-v5": 1.0,
    "Humanoid-v5": 5.0,
    "Hopper-v5": 1.0,
    "Walker2d-v5": 1.0,
}
LOCOMOTION_KEYS = ("alive", "costs", "fall", "limits", "anneal", "anneal_timesteps")


class RewardTransformError(ValueError):
    """A bad ``reward_transform`` value; the message names it."""


@dataclass(frozen=True)
class RewardTransform:
    """A parsed ``reward_transform``: ``none``, ``shift:C`` or ``locomotion:alive=..,...``."""

    kind: str = "none"
    shift: float = 0.0
    alive: float = 1.0
    costs: float = 1.0
    fall: float = 0.0
    #: weight of pybullet's joints-at-limit cost (``parse``: the ``costs`` weight unless given)
    limits: float = 1.0
    #: (first, last) ES generation of the move to the env's own reward; None: no curriculum
    anneal: tuple[int, int] | None = None
    #: (first, last) training timestep of that move, instead of ``anneal``'s generations
    anneal_timesteps: tuple[int, int] | None = None

    @classmethod
    def parse(cls, text: str | None) -> RewardTransform:
        """Parse the knob's text; raise :class:`RewardTransformError` naming a bad part."""
        text = (text or "none").strip()
        kind, _, args = text.partition(":")
        if kind == "none" and not args:
            return cls()
        if kind == "shift":
            try:
                return cls(kind="shift", shift=float(args) if args else 1.0)
            except ValueError:
                raise RewardTransformError(
                    f"reward_transform {text!r}: shift takes a number, e.g. shift:1"
                ) from None
        if kind == "locomotion":
            values: dict[str, float] = {"alive": 0.0, "costs": 1.0, "fall": 0.0}
            windows: dict[str, tuple[int, int]] = {}
            for part in filter(None, (p.strip() for p in args.split(","))):
                key, eq, value = part.partition("=")
                if key not in LOCOMOTION_KEYS or not eq:
                    raise RewardTransformError(
                        f"reward_transform {text!r}: unknown part {part!r} "
                        f"(locomotion takes {', '.join(k + '=X' for k in LOCOMOTION_KEYS)})"
                    )
                if key in ("anneal", "anneal_timesteps"):
                    windows[key] = cls._parse_window(text, key, value)
                    continue
                try:
                    values[key] = float(value)
                except ValueError:
                    raise RewardTransformError(
                        f"reward_transform {text!r}: {key} must be a number, got {value!r}"
                    ) from None
            values.setdefault("limits", values["costs"])
            if len(windows) > 1:
                raise RewardTransformError(
                    f"reward_transform {text!r}: give anneal (generations) or "
                    "anneal_timesteps, not both"
                )
            return cls(
                kind="locomotion",
                anneal=windows.get("anneal"),
                anneal_timesteps=windows.get("anneal_timesteps"),
                **values,
            )
        raise RewardTransformError(
            f"unknown reward_transform {text!r} (none, shift:C or "
            "locomotion:alive=A,costs=C,fall=F[,limits=L][,anneal=G0:G1|,anneal_timesteps=T0:T1])"
        )

    @staticmethod
    def _parse_window(text: str, key: str, value: str) -> tuple[int, int]:
        first, colon, last = value.partition(":")
        try:
            start, end = int(float(first)), int(float(last))
        except (ValueError, OverflowError):
            start = end = -1
        if key == "anneal" and colon and not (first.isdigit() and last.isdigit()):
            start = end = -1  # generations are whole numbers
        if not colon or start < 0 or end < start:
            unit, low, high = (
                ("generations", "G0", "G1") if key == "anneal" else ("timesteps", "T0", "T1")
            )
            raise RewardTransformError(
                f"reward_transform {text!r}: {key} takes {unit} {low}:{high} with "
                f"0 <= {low} <= {high}, got {value!r}"
            )
        return start, end

    @property
    def anneals(self) -> bool:
        """Whether the weights move during the run (``anneal`` or ``anneal_timesteps``)."""
        return self.anneal is not None or self.anneal_timesteps is not None

    def in_force(self, generation: int, timesteps: int) -> RewardTransform:
        """The transform in force at ``generation``, after ``timesteps`` training timesteps.

        Weights move part of the way to the env's own: before the window the transform as
        written; after it, the env's reward (alive, costs and limits weighed 1, no fall
        penalty). The window is ``anneal`` in generations or ``anneal_timesteps``.
        """
        if self.anneal is not None:
            (start, end), now = self.anneal, generation
        elif self.anneal_timesteps is not None:
            (start, end), now = self.anneal_timesteps, timesteps
        else:
            return self
        done = 1.0 if now >= end else max(0.0, (now - start) / max(1, end - start))
        return RewardTransform(
            kind=self.kind,
            shift=self.shift * (1.0 - done),
            alive=self.alive + done * (1.0 - self.alive),
            costs=self.costs + done * (1.0 - self.costs),
            fall=self.fall * (1.0 - done),
            limits=self.limits + done * (1.0 - self.limits),
        )

    @property
    def active(self) -> bool:
        """Whether training sees anything but the env's own reward."""
        return self.kind != "none"

    def check_env(self, env_id: str) -> None:
        """``locomotion`` needs an env whose reward it can split into its parts."""
        if self.kind == "locomotion" and env_id not in ALIVE_BONUS:
            raise RewardTransformError(
                f"reward_transform locomotion does not know the reward parts of {env_id} "
                f"(known: {', '.join(sorted(ALIVE_BONUS))}); use shift:C or none"
            )


class TrainingReward(gym.Wrapper[Any, Any, Any, Any]):
    """Returns the transformed reward; the env's own stays in ``info["env_reward"]``."""

    def __init__(self, env: gym.Env[Any, Any], transform: RewardTransform) -> None:
        super().__init__(env)
        self.transform = transform
        spec = env.spec
        self.env_id = spec.id if spec is not None else ""
        transform.check_env(self.env_id)
        self.set_progress(0, 0)

    def set_progress(self, generation: int, timesteps: int) -> None:
        """Weigh the reward parts as the anneal has them at this generation and timestep."""
        self._in_force = self.transform.in_force(generation, timesteps)

    def _locomotion_parts(
        self, reward: float, info: dict[str, Any]
    ) -> tuple[float, float, float, float]:
        """(progress, alive, costs, joints-at-limit cost) of this step's reward.

        MuJoCo's walkers have no joints-at-limit term: all their costs are in ``costs``.
        """
        unwrapped: Any = self.env.unwrapped
        parts = getattr(unwrapped, "rewards", None)
        if parts is not None and self.env_id.endswith("BulletEnv-v0"):
            # pybullet walkers: [alive, progress, electricity, joints_at_limit, feet_collision]
            return (
                float(parts[1]),
                float(parts[0]),
                float(parts[2]) + float(sum(parts[4:])),
                float(parts[3]),
            )
        forward = float(info.get("reward_forward", 0.0))
        alive = float(info.get("reward_survive", info.get("reward_healthy", 0.0)))
        return forward, alive, reward - forward - alive, 0.0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        env_reward = float(reward)
        t = self._in_force
        if t.kind == "shift":
            shaped = env_reward - t.shift
        else:
            progress, alive, costs, limits = self._locomotion_parts(env_reward, info)
            shaped = progress + t.alive * alive + t.costs * costs + t.limits * limits
            if terminated:
                shaped -= t.fall
        info = {**info, "env_reward": env_reward}
        return obs, shaped, terminated, truncated, info


def shape_training_reward(env: gym.Env[Any, Any], transform: str | None) -> gym.Env[Any, Any]:
    """``env`` with the training-reward transform named by ``transform`` (``none``: as is)."""
    parsed = RewardTransform.parse(transform)
    return TrainingReward(env, parsed) if parsed.active else env
