"""Episode rollouts of a flat-parameter policy: the evaluation hot path.

A :class:`RolloutWorker` builds its environment and policy once; each :meth:`RolloutWorker.run`
loads a parameter vector and plays one episode per env seed. The worker holds no random state
of its own: episodes are seeded by the caller, and optional action noise comes from a generator
seeded by the caller, so the same inputs give bitwise identical returns.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from envs.behaviour import Behaviour, Episode, behaviour_for, body_position, mean_of_episodes
from envs.policies import Policy, PolicySpec, build_policy, policy_spec_for
from envs.registry import make_env, resolve_env_id
from envs.reward_shaping import RewardTransform, TrainingReward

__all__ = ["EpisodeBatch", "NonFiniteError", "RolloutWorker"]


@dataclass
class EpisodeBatch:
    """Results of the episodes of one :meth:`RolloutWorker.run` call.

    ``obs_sum``/``obs_sumsq`` (float64) and ``obs_count`` cover every observation the policy
    acted on (the reset observation and each non-final one, as in OpenAI-ES); they are None and
    0 unless ``collect_obs`` was set. ``returns`` are always the env's own rewards;
    ``training_returns`` the transformed ones when the worker has a reward transform, else None.
    ``behaviour`` is the episodes' mean behaviour characterisation (:mod:`envs.behaviour`)
    when ``behaviour`` was asked, else empty.
    """

    returns: np.ndarray
    lengths: np.ndarray
    steps: int
    obs_sum: np.ndarray | None = None
    obs_sumsq: np.ndarray | None = None
    obs_count: int = 0
    training_returns: np.ndarray | None = None
    behaviour: tuple[float, ...] = ()


class NonFiniteError(RuntimeError):
    """The environment produced a NaN or infinite reward or observation."""

    def __init__(self, env_id: str, seed: int, step: int, what: str) -> None:
        """Record where it happened; ``what`` says which value was bad."""
        self.env_id = env_id
        self.seed = seed
        self.step = step
        super().__init__(
            f"non-finite {what} from environment {env_id!r} (episode seed {seed}) at step {step}"
        )


#: gymnasium's wrappers of ``gym.make`` that pass observations, rewards and actions through
PASS_THROUGH = (
    gym.wrappers.TimeLimit,
    gym.wrappers.OrderEnforcing,
    gym.wrappers.PassiveEnvChecker,
)


def own_step(env: gym.Env[Any, Any]) -> tuple[Any, int | None]:
    """The env's own ``step`` and the TimeLimit's steps, where ``env`` is only ``gym.make``'s
    pass-through wrappers around it (each a Python call per step); else ``(None, None)``.

    The rollout resets through the wrappers (so their order checks and time limit restart)
    and ends an episode at the limit itself, which is all TimeLimit does: same episodes,
    bitwise, without three calls a step.
    """
    limit = None
    while isinstance(env, PASS_THROUGH):
        if isinstance(env, gym.wrappers.TimeLimit):
            limit = env._max_episode_steps
        env = env.env
    if isinstance(env, gym.Wrapper):
        return None, None
    return env.step, limit


def _first_nonfinite_row(buf: np.ndarray, n: int) -> int | None:
    """Index of the first row of ``buf[:n]`` holding a NaN or inf, or None."""
    if n <= 0:
        return None
    bad = ~np.isfinite(buf[:n]).all(axis=1)
    return int(bad.argmax()) if bad.any() else None


class RolloutWorker:
    """Plays episodes of one environment with one policy architecture.

    Built once per worker process (environment construction is expensive); ``run`` may be
    called any number of times with different parameters.
    """

    def __init__(
        self, env_name: str, policy_spec: PolicySpec, reward_transform: str | None = None
    ) -> None:
        """Build the environment (short name or gymnasium id) and the policy for ``policy_spec``.

        With a ``reward_transform`` (see :mod:`envs.reward_shaping`) every episode also sums
        the transformed reward into ``training_returns``; ``returns`` stay the env's own.
        Raises ValueError when the spec does not fit the environment's spaces, and
        :class:`~envs.reward_shaping.RewardTransformError` for a transform the env cannot take.
        """
        self.env_name = env_name
        self.env_id: str = resolve_env_id(env_name)
        self.env: gym.Env[Any, Any] = make_env(env_name)
        #: the env's behaviour characterisation, looked up on the first run that asks for it
        self._behaviour: Behaviour | None = None
        transform = RewardTransform.parse(reward_transform)
        self.shaped = transform.active
        if self.shaped:
            try:
                self.env = TrainingReward(self.env, transform)
            except Exception:
                self.env.close()
                raise
        expected = policy_spec_for(
            self.env,
            policy_spec.kind,
            policy_spec.hidden_sizes or (1,),
            policy_spec.activation,
            policy_spec.discretize,
        )
        if (
            expected.obs_dim != policy_spec.obs_dim
            or expected.action_kind != policy_spec.action_kind
            or expected.action_dim != policy_spec.action_dim
        ):
            self.env.close()
            raise ValueError(
                f"policy spec ({policy_spec.describe()}) does not fit {self.env_id}: it needs "
                f"obs_dim={expected.obs_dim}, {expected.action_kind}({expected.action_dim})"
            )
        self.spec = policy_spec
        self.policy: Policy = build_policy(policy_spec)
        self.obs_dim = policy_spec.obs_dim
        spec = self.env.spec
        self.env_max_steps: int | None = spec.max_episode_steps if spec is not None else None
        #: the env's own step under gymnasium's pass-through wrappers, whose one effect (the
        #: time limit) the loop applies itself; None: step through the wrappers
        self._own_step, self._time_limit = own_step(self.env)
        self._buf = np.zeros((self._capacity_for(None), self.obs_dim), dtype=np.float64)

    def set_progress(self, generation: int, timesteps: int) -> None:
        """Tell a curriculum transform (``anneal``) the ES generation and timesteps so far."""
        if isinstance(self.env, TrainingReward):
            self.env.set_progress(generation, timesteps)

    def behaviour(self) -> Behaviour:
        """The env's behaviour characterisation (:func:`envs.behaviour.behaviour_for`)."""
        if self._behaviour is None:
            _, self._behaviour = behaviour_for((self.env_name, self.env_id), self.env)
        return self._behaviour

    def _capacity_for(self, max_steps: int | None) -> int:
        limits = [m for m in (max_steps, getattr(self, "env_max_steps", None)) if m is not None]
        return max(1, min(limits)) if limits else 1024

    def close(self) -> None:
        """Close the environment."""
        self.env.close()

    def __enter__(self) -> RolloutWorker:
        """Use as a context manager that closes the environment."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the environment."""
        self.close()

    def run(
        self,
        params: np.ndarray,
        obs_mean: np.ndarray | None,
        obs_std: np.ndarray | None,
        env_seeds: Sequence[int],
        max_steps: int | None = None,
        collect_obs: bool = False,
        action_noise_std: float = 0.0,
        action_noise_seed: int | None = None,
        behaviour: bool = False,
    ) -> EpisodeBatch:
        """Play one episode per seed in ``env_seeds`` with the policy ``params``.

        Episode k starts with ``env.reset(seed=env_seeds[k])`` and ends on termination,
        truncation (the env's TimeLimit) or after ``max_steps`` steps (None: no extra cap).
        ``action_noise_std > 0`` (Box actions only) adds Gaussian noise to each action, drawn
        from ``np.random.default_rng(action_noise_seed)``; a seed is then required. With
        ``collect_obs``, raw observation sums are returned for normalisation statistics. With
        ``behaviour``, each episode's behaviour characterisation is computed as it ends and
        their mean returned. Raises :class:`NonFiniteError` on a NaN/inf reward or observation.
        """
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"max_steps must be positive or None, got {max_steps}")
        noise_buf: np.ndarray | None = None
        rng: np.random.Generator | None = None
        if action_noise_std:
            if action_noise_std < 0:
                raise ValueError(f"action_noise_std must be >= 0, got {action_noise_std}")
            if self.spec.action_kind != "box":
                raise ValueError("action noise needs a Box action space")
            if action_noise_seed is None:
                raise ValueError("action noise needs an action_noise_seed (workers hold no RNG)")
            rng = np.random.default_rng(action_noise_seed)
            noise_buf = np.empty(self.spec.action_dim, dtype=np.float64)
        policy = self.policy
        policy.set_params(params, obs_mean, obs_std)

        n_eps = len(env_seeds)
        returns = np.zeros(n_eps, dtype=np.float64)
        shaped_returns = np.zeros(n_eps, dtype=np.float64) if self.shaped else None
        lengths = np.zeros(n_eps, dtype=np.int64)
        obs_sum = np.zeros(self.obs_dim, dtype=np.float64) if collect_obs else None
        obs_sumsq = np.zeros(self.obs_dim, dtype=np.float64) if collect_obs else None
        limit = max_steps if max_steps is not None else sys.maxsize
        cap = self._capacity_for(max_steps)
        if self._buf.shape[0] < cap:
            self._buf = np.zeros((cap, self.obs_dim), dtype=np.float64)
        env_step = self._own_step or self.env.step
        if self._own_step is not None and self._time_limit is not None:
            limit = min(limit, self._time_limit)  # TimeLimit's truncation, as the loop's end
        act = policy.actor()
        isfinite = math.isfinite
        characterise = self.behaviour() if behaviour else None
        behaviours: list[Sequence[float]] = []
        start: tuple[float, float] | None = None

        for k, raw_seed in enumerate(env_seeds):
            seed = int(raw_seed)
            buf = self._buf
            cap = buf.shape[0]
            policy.reset()
            obs, _ = self.env.reset(seed=seed)
            if characterise is not None:
                start = body_position(self.env)
            ret = 0.0
            shaped_ret = 0.0
            t = 0
            try:
                while t < limit:
                    if t == cap:
                        buf = self._grow()
                        cap = buf.shape[0]
                    buf[t] = obs  # for finiteness checks and observation statistics
                    if rng is not None and noise_buf is not None:
                        rng.standard_normal(out=noise_buf)
                        noise_buf *= action_noise_std
                        action = act(obs, noise_buf)
                    else:
                        action = act(obs)
                    obs, reward, terminated, truncated, info = env_step(action)
                    r = float(reward)
                    if shaped_returns is not None:
                        shaped_ret += r
                        r = info["env_reward"]
                    if not isfinite(r):
                        raise self._nonfinite(buf, min(t + 1, cap), seed, t, f"reward {r}")
                    ret += r
                    t += 1
                    if terminated or truncated:
                        break
            except NonFiniteError:
                raise
            except Exception as exc:
                # A NaN observation fed to the policy can make the env itself fail; name it.
                bad = _first_nonfinite_row(buf, min(t + 1, cap))
                if bad is not None:
                    raise NonFiniteError(self.env_id, seed, bad, "observation") from exc
                raise
            seg = buf[:t]
            ep_sum = seg.sum(axis=0)
            if not np.isfinite(ep_sum).all():
                raise self._nonfinite(buf, t, seed, t, "observation")
            if not np.isfinite(obs).all():
                raise NonFiniteError(self.env_id, seed, t, "observation")
            if obs_sum is not None and obs_sumsq is not None:
                obs_sum += ep_sum
                obs_sumsq += np.einsum("ij,ij->j", seg, seg)
            returns[k] = ret
            if shaped_returns is not None:
                shaped_returns[k] = shaped_ret
            lengths[k] = t
            if characterise is not None:
                behaviours.append(characterise(Episode(self.env, seg, np.asarray(obs), start)))

        steps = int(lengths.sum())
        return EpisodeBatch(
            returns=returns,
            lengths=lengths,
            steps=steps,
            obs_sum=obs_sum,
            obs_sumsq=obs_sumsq,
            obs_count=steps if collect_obs else 0,
            training_returns=shaped_returns,
            behaviour=mean_of_episodes(behaviours),
        )

    def _nonfinite(
        self, buf: np.ndarray, rows: int, seed: int, step: int, what: str
    ) -> NonFiniteError:
        """The error to raise: the earliest non-finite observation if any, else ``what``."""
        bad = _first_nonfinite_row(buf, rows)
        if bad is not None and bad <= step:
            return NonFiniteError(self.env_id, seed, bad, "observation")
        return NonFiniteError(self.env_id, seed, step, what)

    def _grow(self) -> np.ndarray:
        """Double the observation buffer (episodes longer than any known limit)."""
        old = self._buf
        new = np.zeros((old.shape[0] * 2, self.obs_dim), dtype=np.float64)
        new[: old.shape[0]] = old
        self._buf = new
        return new
