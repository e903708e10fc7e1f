"""Reinforcement-learning baselines from stable-baselines3: ``ppo`` and ``a2c``.

Both run behind the same interface as the evolution strategies (and so do the off-policy
``sac``, ``td3``, ``tqc`` of :mod:`algorithms.sb3_offpolicy` and ``recurrent-ppo`` of
:mod:`algorithms.sb3_recurrent`, subclasses of :class:`SB3Algorithm`); every run exports
the trained model as SB3's ``model.zip``:

* environments come from :func:`envs.registry.make_env` (so ``PendulumPO`` is
  the zeroed-velocity env): ``n_envs`` of them, a hyperparameter with
  rl-baselines3-zoo's value per env in ``experiments/defaults.yaml``, never
  the worker count, so the numbers do not depend on the machine. ``vec_env:
  auto`` steps them in this process (``DummyVecEnv``) when ``--workers`` is 1
  and one process per env (``SubprocVecEnv``) when it is more, so RL gets the
  cores ES gets; both give identical numbers. Each env is wrapped in SB3's
  ``Monitor``; ``max_episode_steps`` adds a ``TimeLimit``, ``time_feature``
  sb3-contrib's ``TimeFeatureWrapper`` (as the zoo does for pybullet A2C), and
  a run's ``reward_transform`` shapes the training reward (evaluation always
  uses the env's own reward);
* the network is the algorithm's own, never the run's ``policy`` section (that is the
  ES's policy: its knobs do not apply to this family): ``net_arch`` (separate actor and
  critic of those sizes), ``activation``, ``ortho_init`` and ``log_std_init``, as the
  zoo's ``policy_kwargs`` where ``experiments/defaults.yaml`` carries a zoo entry, else
  the config's defaults, which are SB3's own for the algorithm (PPO and A2C
  ``MlpPolicy``: 64-64 tanh, orthogonal initialisation, log-std 0; the off-policy and
  recurrent subclasses declare theirs). :attr:`RLEnvConfig.DEFAULT_SOURCES` names where each
  default comes from, which ``--print-config`` shows; null stands for that default.
  ``net_arch=[]`` makes the action mean linear in the observation, but SB3 still acts
  with a Gaussian whose mean is clipped to the bounds and adds a critic and a log-std.
  Memory needs sb3-contrib's RecurrentPPO (``recurrent-ppo``,
  :mod:`algorithms.sb3_recurrent`);
* ``learning_rate_decay_timesteps > 0`` decays the learning rate linearly to
  zero over that many timesteps (the zoo's ``lin_X`` over its
  ``n_timesteps``), counted across the harness's chunked ``learn`` calls;
* one :meth:`SB3Algorithm.step` is ``updates_per_step`` iterations of
  rollout (``n_steps`` per env) plus update, one
  ``model.learn(..., reset_num_timesteps=False)`` call. Its ``fitness_*``
  are the returns of the training episodes that finished in the chunk (NaN
  when none did), ``timesteps`` the env steps taken, ``bytes_*`` zero (no
  evaluation workers), ``rollout_s`` the seconds SB3 spent collecting rollouts and
  ``update_s`` the rest of ``learn`` (the gradient updates), which the runner books as
  ``head_update``;
* ``evaluate_policy`` plays the deterministic policy (``model.predict(...,
  deterministic=True)``) for one episode per seed the runner passes, on a
  fresh env from ``make_env``, exactly the seeds the ES get;
* ``normalize: true`` wraps the envs in ``VecNormalize`` (running observation
  and reward normalisation, as rl-baselines3-zoo does for several tasks); the
  evaluation feeds the policy observations normalised by the same statistics
  (not updated by evaluation), and checkpoints carry them;
* ``--episodes`` and ``--backend`` do not apply.

Progress bars: the issue asks for SB3's own progress bar; inside a chunked
``learn`` it would restart every step, so the harness's own bar (which counts
the same timesteps) is shown for RL runs as for ES runs; ``--no-progress``
hides it.

Reproducibility: the model is seeded with the run seed (SB3 seeds Python,
numpy and torch and the training envs ``seed + i``), torch uses one thread
and the device is the CPU. SB3 draws from the *global* RNGs, so this module
keeps private copies of the three global states and swaps them in around
every call; the same seed gives the same metrics. A checkpoint holds
``model.save`` bytes (weights, optimizer state, counters) and those RNG
states. Not reproduced after a resume: the in-flight training episodes (the
envs cannot be pickled, so they are reset with a seed derived from the run
seed and the timestep count) and the ``Monitor`` episode statistics.
"""

from __future__ import annotations

import copy
import io
import multiprocessing
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from algorithms.base import Algorithm, RunContext, StepRecord, doc
from algorithms.es_common import SEED_BOUND, fitness_summary, stream_rng
from algorithms.private_rng import PrivateGlobalRNG
from algorithms.registry import register
from envs.registry import make_env
from envs.reward_shaping import RewardTransform, shape_training_reward

#: SeedSequence stream of the env seeds used when training resumes from a checkpoint.
STREAM_RESUME_ENVS = 100
#: The run artifact holding the trained SB3 model (``model.save``).


def validate_rl_common(config: Any) -> None:
    """Checks every SB3 config shares (on- and off-policy); ValueError names the bad value."""
    if config.n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {config.n_envs}")
    if not config.learning_rate > 0:
        raise ValueError(f"learning_rate must be positive, got {config.learning_rate}")
    if not 0 < config.gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {config.gamma}")
    if config.vec_env not in ("auto", "dummy", "subproc"):
        raise ValueError(f"vec_env must be auto, dummy or subproc, got {config.vec_env!r}")
    if config.learning_rate_decay_timesteps < 0:
        raise ValueError(
            "learning_rate_decay_timesteps must be >= 0, got "
            f"{config.learning_rate_decay_timesteps}"
        )
    if config.activation not in (None, "tanh", "relu"):
        raise ValueError(f"activation must be tanh, relu or null, got {config.activation!r}")
    if config.net_arch is not None and (
        not isinstance(config.net_arch, (list, tuple))
        or not all(isinstance(n, int) and n > 0 for n in config.net_arch)
    ):
        raise ValueError(f"net_arch must be a list of positive sizes, got {config.net_arch!r}")


def _validate_common(config: Any) -> None:
    for name in ("n_steps", "updates_per_step"):
        value = getattr(config, name)
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    validate_rl_common(config)
    if not 0 <= config.gae_lambda <= 1:
        raise ValueError(f"gae_lambda must be in [0, 1], got {config.gae_lambda}")


#: what ``net_arch`` and ``activation`` are (every SB3 config declares them with its default)
NET_ARCH_DOC = (
    "hidden sizes of the separate actor and critic(s), the zoo's policy_kwargs net_arch "
    "(default and null: SB3's for the algorithm)"
)
ACTIVATION_DOC = "tanh or relu, the zoo's activation_fn (default and null: SB3's for the algorithm)"


def network_sources(label: str, *extra: str) -> dict[str, str]:
    """``DEFAULT_SOURCES`` of a config whose network defaults are one library's (``label``,
    e.g. ``SB3 PPO MlpPolicy default``): ``net_arch``, ``activation`` and the ``extra``
    fields (``ortho_init``, ``log_std_init``, ``lstm_hidden_size``, ...)."""
    return dict.fromkeys(("net_arch", "activation", *extra), label)


def field_default(config_type: type, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``config_type`` (a fresh copy)."""
    for item in fields(config_type):
        if item.name == name:
            if item.default_factory is not MISSING:
                return item.default_factory()
            return item.default
    raise KeyError(f"{config_type.__name__} has no field {name!r}")


@dataclass(frozen=True)
class RLEnvConfig:
    """Knobs of every SB3 baseline that are the harness's: envs, network, schedule.

    The network fields default to SB3's own for the algorithm (PPO and A2C ``MlpPolicy``
    here; subclasses redeclare theirs), never to the run's ``policy`` section.
    """

    #: where a field's default comes from, as ``--print-config`` names it (others: the
    #: config class's own default)
    DEFAULT_SOURCES: ClassVar[dict[str, str]] = {}

    n_envs: int = doc("parallel training envs (rl-zoo's n_envs; independent of --workers)", 1)
    net_arch: list[int] | None = doc(  # noqa: RUF009 - doc() makes a dataclasses.field
        NET_ARCH_DOC, default_factory=lambda: [64, 64]
    )
    activation: str | None = doc(ACTIVATION_DOC, "tanh")
    learning_rate_decay_timesteps: int = doc(
        "decay learning_rate linearly to 0 over this many timesteps (rl-zoo lin_X; 0: constant)", 0
    )
    time_feature: bool = doc(
        "append the remaining-time feature (sb3-contrib TimeFeatureWrapper)", False
    )
    vec_env: str = doc(
        "auto (subproc when --workers > 1), dummy (this process) or subproc (a process per env)",
        "auto",
    )


@dataclass(frozen=True)
class SharedRLConfig(RLEnvConfig):
    """Knobs of both on-policy SB3 baselines that are the harness's, not SB3's arguments."""

    ortho_init: bool = doc("orthogonal initialisation of the network (SB3 default)", True)
    sde_sample_freq: int = doc(
        "gSDE: resample the noise matrix every N steps (-1: per rollout)", -1
    )


@dataclass(frozen=True)
class PPOConfig(SharedRLConfig):
    """Hyperparameters of ``ppo`` (SB3 names); defaults per env in ``experiments/defaults.yaml``."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources(
        "SB3 PPO MlpPolicy default", "ortho_init", "log_std_init"
    )

    n_steps: int = doc("rollout steps per env per update (a chunk is n_steps x n_envs)", 2048)
    batch_size: int = doc("minibatch size of the update", 64)
    n_epochs: int = doc("passes over the rollout per update", 10)
    learning_rate: float = doc("Adam step size (constant)", 3e-4)
    gamma: float = doc("discount factor", 0.99)
    gae_lambda: float = doc("GAE lambda", 0.95)
    clip_range: float = doc("PPO clipping of the probability ratio", 0.2)
    ent_coef: float = doc("entropy bonus coefficient", 0.0)
    vf_coef: float = doc("value loss coefficient", 0.5)
    max_grad_norm: float = doc("gradient clipping norm", 0.5)
    normalize_advantage: bool = doc("normalise advantages per minibatch", True)
    log_std_init: float = doc("initial log standard deviation of Box actions", 0.0)
    normalize: bool = doc(
        "VecNormalize: running normalisation of observations and rewards (as rl-zoo)", False
    )
    use_sde: bool = doc("generalised state-dependent exploration (Box actions only)", False)
    updates_per_step: int = doc("rollout/update iterations per harness step (metrics row)", 1)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        _validate_common(self)
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2, got {self.batch_size}")
        if self.n_epochs < 1:
            raise ValueError(f"n_epochs must be >= 1, got {self.n_epochs}")
        if not self.clip_range > 0:
            raise ValueError(f"clip_range must be positive, got {self.clip_range}")


@dataclass(frozen=True)
class A2CConfig(SharedRLConfig):
    """Hyperparameters of ``a2c`` (SB3 names); defaults per env in ``experiments/defaults.yaml``."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources(
        "SB3 A2C MlpPolicy default", "ortho_init", "log_std_init"
    )

    n_steps: int = doc("rollout steps per env per update (a chunk is n_steps x n_envs)", 5)
    learning_rate: float = doc("RMSprop/Adam step size (constant)", 7e-4)
    gamma: float = doc("discount factor", 0.99)
    gae_lambda: float = doc("GAE lambda (1.0: plain n-step returns)", 1.0)
    ent_coef: float = doc("entropy bonus coefficient", 0.0)
    vf_coef: float = doc("value loss coefficient", 0.5)
    max_grad_norm: float = doc("gradient clipping norm", 0.5)
    use_rms_prop: bool = doc("RMSprop (as in the A3C paper) instead of Adam", True)
    rms_prop_eps: float = doc("RMSprop epsilon", 1e-5)
    normalize_advantage: bool = doc("normalise advantages", False)
    log_std_init: float = doc("initial log standard deviation of Box actions", 0.0)
    normalize: bool = doc(
        "VecNormalize: running normalisation of observations and rewards (as rl-zoo)", False
    )
    use_sde: bool = doc("generalised state-dependent exploration (Box actions only)", False)
    updates_per_step: int = doc("rollout/update iterations per harness step (metrics row)", 100)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        _validate_common(self)
        if not self.rms_prop_eps > 0:
            raise ValueError(f"rms_prop_eps must be positive, got {self.rms_prop_eps}")


def _rms_state(rms: Any) -> dict[str, Any]:
    """SB3's ``RunningMeanStd`` as arrays (checkpoints hold no pickled objects)."""
    return {"mean": np.asarray(rms.mean), "var": np.asarray(rms.var), "count": rms.count}


def _rms(state: Any) -> Any:
    """Inverse of :func:`_rms_state`; checkpoints of earlier versions hold the object itself."""
    if not isinstance(state, dict):
        return state
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    rms = RunningMeanStd(shape=np.shape(state["mean"]))
    rms.mean, rms.var, rms.count = state["mean"], state["var"], state["count"]
    return rms


def _episode_collector() -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class EpisodeCollector(BaseCallback):
        """Collects the returns and lengths of training episodes as ``Monitor`` reports them,
        and the seconds spent collecting rollouts (the rest of ``learn`` is the update)."""

        def __init__(self) -> None:
            super().__init__(verbose=0)
            self.returns: list[float] = []
            self.lengths: list[int] = []
            self.rollout_s = 0.0
            self._rollout_started = 0.0

        def _on_rollout_start(self) -> None:
            self._rollout_started = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.rollout_s += time.perf_counter() - self._rollout_started

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                episode = info.get("episode")
                if episode is not None:
                    self.returns.append(float(episode["r"]))
                    self.lengths.append(int(episode["l"]))
            return True

    return EpisodeCollector()


def _env_factory(
    env_name: str,
    max_episode_steps: int | None,
    time_feature: bool,
    reward_transform: str = "none",
) -> Callable[[], Any]:
    """A picklable builder of one env as training (``Monitor``) or evaluation sees it."""

    def build() -> Any:
        import gymnasium as gym
        from stable_baselines3.common.monitor import Monitor

        env = make_env(env_name)
        if max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
        if time_feature:
            from sb3_contrib.common.wrappers import TimeFeatureWrapper

            env = TimeFeatureWrapper(env)
        env = shape_training_reward(env, reward_transform)
        return Monitor(env)

    return build


def _sb3_subclass(base: type) -> type:
    """``base`` whose learning-rate progress runs over the whole run, not one ``learn`` chunk.

    SB3 computes ``progress_remaining`` from the ``total_timesteps`` of the current
    ``learn`` call; the harness calls ``learn`` once per step, so a zoo ``lin_X`` schedule
    would restart every chunk. With ``schedule_timesteps`` set, progress is measured
    against it (the zoo's ``n_timesteps``).
    """

    class Chunked(base):
        schedule_timesteps: int = 0

        def _update_current_progress_remaining(
            self, num_timesteps: int, total_timesteps: int
        ) -> None:
            horizon = self.schedule_timesteps or total_timesteps
            self._current_progress_remaining = max(0.0, 1.0 - num_timesteps / horizon)

    Chunked.__name__ = Chunked.__qualname__ = f"Chunked{base.__name__}"
    return Chunked


_SB3_CLASSES: dict[tuple[str, str], type] = {}


def chunked_class(module: str, name: str) -> Any:
    """``module.name`` (an SB3-style algorithm class) stepped in chunks (:func:`_sb3_subclass`)."""
    import importlib

    if (module, name) not in _SB3_CLASSES:
        base = getattr(importlib.import_module(module), name)
        _SB3_CLASSES[module, name] = _sb3_subclass(base)
    return _SB3_CLASSES[module, name]


_SUBPROC_START = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


#: SB3 logger keys reported as step extras, and their metric names.
_TRAIN_KEYS = {
    "train/learning_rate": "lr",
    "train/loss": "loss",
    "train/policy_gradient_loss": "policy_loss",
    "train/policy_loss": "policy_loss",
    "train/value_loss": "value_loss",
    "train/entropy_loss": "entropy_loss",
    "train/approx_kl": "approx_kl",
    "train/clip_fraction": "clip_fraction",
    "train/explained_variance": "explained_variance",
    "train/std": "action_std",
    "train/actor_loss": "actor_loss",
    "train/critic_loss": "critic_loss",
    "train/ent_coef": "entropy_coef",
}


class SB3Algorithm(Algorithm):
    """A stable-baselines3 on-policy algorithm stepped one rollout/update chunk at a time."""

    family = "rl"
    sb3_class_name: ClassVar[str]
    #: the package that defines ``sb3_class_name`` (sb3-contrib's TQC, RecurrentPPO)
    sb3_module: ClassVar[str] = "stable_baselines3"
    sb3_policy: ClassVar[str] = "MlpPolicy"
    #: whether only Box action spaces can be learned (SAC, TD3, TQC)
    continuous_actions_only: ClassVar[bool] = False
    #: config fields that are the harness's, not the SB3 constructor's
    harness_only: ClassVar[tuple[str, ...]] = (
        "updates_per_step",
        "vec_env",
        "log_std_init",
        "normalize",
        "n_envs",
        "net_arch",
        "activation",
        "ortho_init",
        "learning_rate_decay_timesteps",
        "time_feature",
    )

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        super().check_config(config)
        transform = str(config.get("reward_transform") or "none")
        if RewardTransform.parse(transform).anneals:
            raise ValueError(
                f"{cls.name} cannot anneal reward_transform {transform!r}: the anneal follows "
                "the ES head's broadcasts; give PPO/A2C a transform without anneal"
            )

    def __init__(self, context: RunContext, config: Any) -> None:
        super().__init__(context, config)
        config.validate()
        spec = context.policy_spec  # its spaces only: the network is the config's
        if self.continuous_actions_only and spec.action_kind != "box":
            raise ValueError(
                f"{self.name} needs a Box (continuous) action space; {context.env_name} is discrete"
            )
        if getattr(config, "use_sde", False) and spec.action_kind != "box":
            raise ValueError(f"use_sde needs a Box action space; {context.env_name} is discrete")
        import torch

        torch.set_num_threads(1)
        self.rngs = PrivateGlobalRNG(("python", "numpy", "torch"))
        self.chunks = 0
        self._eval_env: Any = None
        self.vec_env = self._make_vec_env()
        with self.rngs.active():
            self.model = self._build_model()
        self._quiet_logger()

    # -- construction ---------------------------------------------------------------------
    def _make_vec_env(self) -> Any:
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

        factories = [
            _env_factory(
                self.context.env_name,
                self.context.max_episode_steps,
                self.config.time_feature,
                self.context.reward_transform,
            )
            for _ in range(self.config.n_envs)
        ]
        kind = self.config.vec_env
        if kind == "auto":
            kind = "subproc" if self.context.workers > 1 else "dummy"
        vec_env: Any = (
            # fork: the children inherit the imported env packages instead of importing them
            # again each (seconds per env for pybullet and torch)
            SubprocVecEnv(factories, start_method=_SUBPROC_START)
            if kind == "subproc" and len(factories) > 1
            else DummyVecEnv(factories)
        )
        if self.config.normalize:
            from stable_baselines3.common.vec_env import VecNormalize

            vec_env = VecNormalize(vec_env, gamma=self.config.gamma)
        return vec_env

    @classmethod
    def network(cls, config: Any) -> tuple[list[int], str]:
        """Hidden sizes and activation (``tanh``/``relu``) of the SB3 policy ``config``
        describes: its ``net_arch`` and ``activation``, null standing for the config class's
        default (SB3's for the algorithm). Nothing else is read: not the run's ``policy``
        section, which is the ES's."""
        net_arch = config.net_arch
        if net_arch is None:
            net_arch = field_default(cls.Config, "net_arch")
        activation = config.activation or field_default(cls.Config, "activation")
        return [int(size) for size in net_arch], str(activation)

    @classmethod
    def policy_kwargs_for(cls, config: Any, box_actions: bool) -> dict[str, Any]:
        """The ``policy_kwargs`` SB3 builds the policy from (``box_actions``: a Box action
        space, which has a log-std)."""
        from torch import nn

        net_arch, activation = cls.network(config)
        kwargs: dict[str, Any] = {
            "net_arch": {"pi": net_arch, "vf": list(net_arch)},
            "activation_fn": nn.ReLU if activation == "relu" else nn.Tanh,
            "ortho_init": config.ortho_init,
        }
        if box_actions:
            kwargs["log_std_init"] = config.log_std_init
        return kwargs

    def _policy_kwargs(self) -> dict[str, Any]:
        box_actions = self.context.policy_spec.action_kind == "box"
        return self.policy_kwargs_for(self.config, box_actions)

    def _sb3_kwargs(self) -> dict[str, Any]:
        cfg = asdict(self.config)
        for key in self.harness_only:
            cfg.pop(key, None)
        if self.config.learning_rate_decay_timesteps:
            from stable_baselines3.common.utils import LinearSchedule

            cfg["learning_rate"] = LinearSchedule(self.config.learning_rate, 0.0, 1.0)
        return cfg

    def _sb3_class(self) -> Any:
        return chunked_class(self.sb3_module, self.sb3_class_name)

    def _build_model(self) -> Any:
        model = self._sb3_class()(
            self.sb3_policy,
            self.vec_env,
            policy_kwargs=self._policy_kwargs(),
            device="cpu",
            seed=self.context.seed,
            verbose=0,
            **self._sb3_kwargs(),
        )
        model.schedule_timesteps = self.config.learning_rate_decay_timesteps
        return model

    def _quiet_logger(self) -> None:
        from stable_baselines3.common.logger import Logger

        self.model.set_logger(Logger(folder=None, output_formats=[]))

    # -- one chunk ------------------------------------------------------------------------
    def chunk_timesteps(self) -> int:
        """Env timesteps of one :meth:`step` (one ``learn`` call)."""
        return int(self.config.n_steps * self.config.n_envs * self.config.updates_per_step)

    def step(self) -> StepRecord:
        collector = _episode_collector()
        before = int(self.model.num_timesteps)
        chunk = self.chunk_timesteps()
        started = time.perf_counter()
        with self.rngs.active():
            self.model.learn(
                total_timesteps=chunk,
                callback=collector,
                reset_num_timesteps=False,
                progress_bar=False,
            )
        learn_s = time.perf_counter() - started
        update_s = max(0.0, learn_s - collector.rollout_s)
        # booked by the runner as head_update; the rest of the step stays rollouts
        self.time_counters["head_update"] = self.time_counters.get("head_update", 0.0) + update_s
        self.chunks += 1
        returns = np.asarray(collector.returns, dtype=np.float64)
        mean, best, worst = fitness_summary(returns)
        logged = self.model.logger.name_to_value
        extras = {
            metric: float(logged[key]) for key, metric in _TRAIN_KEYS.items() if key in logged
        }
        extras.update(
            {
                "param_norm": float(np.linalg.norm(self.current_parameters())),
                "episode_length_mean": float(np.mean(collector.lengths))
                if collector.lengths
                else float("nan"),
                "learn_s": learn_s,
                "rollout_s": collector.rollout_s,
                "update_s": update_s,
                "updates": float(getattr(self.model, "_n_updates", 0)),
            }
        )
        return StepRecord(
            timesteps=int(self.model.num_timesteps) - before,
            episodes=len(collector.returns),
            fitness_mean=mean,
            fitness_max=best,
            fitness_min=worst,
            extras=extras,
        )

    # -- evaluation, parameters, state ------------------------------------------------------
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        if self._eval_env is None:
            # The env as training sees it (time feature included) but with its own reward.
            self._eval_env = _env_factory(self.context.env_name, None, self.config.time_feature)()
        env = self._eval_env
        cap = self.context.max_episode_steps
        returns = np.zeros(len(env_seeds), dtype=np.float64)
        with self.rngs.active():
            for k, seed in enumerate(env_seeds):
                obs, _ = env.reset(seed=int(seed))
                total, steps, done = 0.0, 0, False
                state = None  # a recurrent policy's hidden state (None for the others)
                while not done and (cap is None or steps < cap):
                    seen = self.vec_env.normalize_obs(obs) if self.config.normalize else obs
                    action, state = self.model.predict(
                        seen,
                        state=state,
                        episode_start=np.array([steps == 0]),
                        deterministic=True,
                    )
                    obs, reward, terminated, truncated, _ = env.step(action)
                    total += float(reward)
                    steps += 1
                    done = bool(terminated or truncated)
                returns[k] = total
        return returns

    def current_parameters(self) -> np.ndarray:
        """Every parameter of the SB3 policy (actor, critic, log-std) as one float32 vector."""
        from torch.nn.utils import parameters_to_vector

        vector = parameters_to_vector(self.model.policy.parameters())
        return np.asarray(vector.detach().cpu().numpy(), dtype=np.float32)

    def state_dict(self) -> dict[str, Any]:
        buffer = io.BytesIO()
        self.model.save(buffer)
        return {
            "model": buffer.getvalue(),
            "rngs": self.rngs.plain_states(),
            "chunks": self.chunks,
            "num_timesteps": int(self.model.num_timesteps),
            "config": asdict(self.config),
            "normalization": (
                [_rms_state(self.vec_env.obs_rms), _rms_state(self.vec_env.ret_rms)]
                if self.config.normalize
                else None
            ),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.vec_env.close()
        self.vec_env = self._make_vec_env()
        with self.rngs.active():
            self.model = self._sb3_class().load(
                io.BytesIO(state["model"]),
                env=self.vec_env,
                device="cpu",
                force_reset=True,
            )
        self.model.schedule_timesteps = self.config.learning_rate_decay_timesteps
        self._quiet_logger()
        if state.get("normalization") is not None:
            obs_rms, ret_rms = copy.deepcopy(state["normalization"])
            self.vec_env.obs_rms, self.vec_env.ret_rms = _rms(obs_rms), _rms(ret_rms)
        self.chunks = int(state["chunks"])
        # The envs' in-flight episodes are lost: restart them from seeds of this point in time.
        rng = stream_rng(self.context.seed, STREAM_RESUME_ENVS, int(state["num_timesteps"]))
        self.vec_env.seed(int(rng.integers(0, SEED_BOUND - self.config.n_envs)))
        self.rngs.states = state["rngs"]

    def artifacts(self) -> dict[str, Any]:
        return {
            "sb3_class": self.sb3_class_name,
            "sb3_policy": str(self._policy_kwargs()["net_arch"]),
            "sb3_num_params": int(self.current_parameters().size),
        }

    def close(self) -> None:
        self.vec_env.close()
        if self._eval_env is not None:
            self._eval_env.close()
            self._eval_env = None


@register("ppo")
class PPO(SB3Algorithm):
    """Proximal Policy Optimization (Schulman et al. 2017), stable-baselines3."""

    summary = (
        "stable-baselines3 PPO; n_envs parallel envs, same env factory, eval seeds and metrics"
    )
    sb3_class_name = "PPO"
    zoo_hyperparams = "ppo.yml"
    Config = PPOConfig
    config: PPOConfig


@register("a2c")
class A2C(SB3Algorithm):
    """Advantage actor-critic, stable-baselines3: the synchronous variant of A3C."""

    summary = (
        "stable-baselines3 A2C, standing in for the seeds' A3C (its synchronous "
        "variant); n_envs parallel envs"
    )
    sb3_class_name = "A2C"
    zoo_hyperparams = "a2c.yml"
    Config = A2CConfig
    config: A2CConfig
