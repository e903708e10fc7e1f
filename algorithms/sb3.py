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
* the network is ``net_arch`` (separate actor and critic of those sizes) with
  ``activation`` when set, as the zoo's ``policy_kwargs``; otherwise the
  policy section's hidden sizes and activation. A ``linear`` policy becomes
  ``net_arch=[]``: the action mean is then linear in the observation (for
  LunarLanderContinuous the same 18 weights), but SB3 acts with a Gaussian
  whose mean is clipped to the bounds, not squashed by tanh, and adds a
  critic and a log-std; it is not the ES's 18-parameter policy exactly.
  ``discretize`` applies to ES policies only. LSTM policies need sb3-contrib's
  RecurrentPPO (``recurrent-ppo``, :mod:`algorithms.sb3_recurrent`): PPO and A2C refuse
  them;
* ``learning_rate_decay_timesteps > 0`` decays the learning rate linearly to
  zero over that many timesteps (the zoo's ``lin_X`` over its
  ``n_timesteps``), counted across the harness's chunked ``learn`` calls;
* one :meth:`SB3Algorithm.step` is ``updates_per_step`` iterations of
  rollout (``n_steps`` per env) plus update, one
  ``model.learn(..., reset_num_timesteps=False)`` call. Its ``fitness_*``
  are the returns of the training episodes that finished in the chunk (NaN
  when none did), ``timesteps`` the env steps taken, ``bytes_*`` zero (no
  evaluation workers);
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
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True)
class RLEnvConfig:
    """Knobs of every SB3 baseline that are the harness's: envs, network, schedule."""

    n_envs: int = doc("parallel training envs (rl-zoo's n_envs; independent of --workers)", 1)
    net_arch: list[int] | None = doc(  # noqa: RUF009 - None is immutable; ruff sees a list
        "hidden sizes of the separate actor and critic(s) (null: the policy section's)", None
    )
    activation: str | None = doc("tanh or relu (null: the policy section's)", None)
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
        """Collects the returns and lengths of training episodes as ``Monitor`` reports them."""

        def __init__(self) -> None:
            super().__init__(verbose=0)
            self.returns: list[float] = []
            self.lengths: list[int] = []

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


_SB3_CLASSES: dict[str, type] = {}
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
}


class SB3Algorithm(Algorithm):
    """A stable-baselines3 on-policy algorithm stepped one rollout/update chunk at a time."""

    family = "rl"
    sb3_class_name: ClassVar[str]
    #: the package that defines ``sb3_class_name`` (sb3-contrib's TQC, RecurrentPPO)
    sb3_module: ClassVar[str] = "stable_baselines3"
    sb3_policy: ClassVar[str] = "MlpPolicy"
    #: whether ``policy.kind=lstm`` is accepted (sb3-contrib's RecurrentPPO)
    accepts_lstm: ClassVar[bool] = False
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
        if config["policy"].get("kind") == "lstm" and not cls.accepts_lstm:
            raise ValueError(
                f"{cls.name} needs a feed-forward policy, got policy.kind=lstm (an LSTM needs "
                "sb3-contrib's RecurrentPPO: --algo recurrent-ppo): use --set policy.kind=mlp"
            )
        transform = str(config.get("reward_transform") or "none")
        if RewardTransform.parse(transform).anneals:
            raise ValueError(
                f"{cls.name} cannot anneal reward_transform {transform!r}: the anneal follows "
                "the ES head's broadcasts; give PPO/A2C a transform without anneal"
            )

    def __init__(self, context: RunContext, config: Any) -> None:
        super().__init__(context, config)
        config.validate()
        spec = context.policy_spec
        self.check_config({"policy": {"kind": spec.kind}})
        if self.continuous_actions_only and spec.action_kind != "box":
            raise ValueError(
                f"{self.name} needs a Box (continuous) action space; {context.env_name} is discrete"
            )
        if getattr(config, "use_sde", False) and spec.action_kind != "box":
            raise ValueError(f"use_sde needs a Box action space; {context.env_name} is discrete")
        if spec.discretize:
            print(
                f"{self.name}: policy.discretize={spec.discretize} applies to ES policies only;"
                " SB3 acts with a Gaussian clipped to the action bounds",
                flush=True,
            )
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

    def _network(self) -> tuple[list[int], Any]:
        """Hidden sizes and activation class: the config's, else the policy section's."""
        from torch import nn

        spec = self.context.policy_spec
        if self.config.net_arch is not None:
            net_arch = list(self.config.net_arch)
        else:
            net_arch = list(spec.hidden_sizes) if spec.kind == "mlp" else []
        activation = self.config.activation or spec.activation
        return net_arch, nn.ReLU if activation == "relu" else nn.Tanh

    def _policy_kwargs(self) -> dict[str, Any]:
        spec = self.context.policy_spec
        net_arch, activation_fn = self._network()
        kwargs: dict[str, Any] = {
            "net_arch": {"pi": net_arch, "vf": list(net_arch)},
            "activation_fn": activation_fn,
            "ortho_init": self.config.ortho_init,
        }
        if spec.action_kind == "box":
            kwargs["log_std_init"] = self.config.log_std_init
        return kwargs

    def _sb3_kwargs(self) -> dict[str, Any]:
        cfg = asdict(self.config)
        for key in self.harness_only:
            cfg.pop(key, None)
        if self.config.learning_rate_decay_timesteps:
            from stable_baselines3.common.utils import LinearSchedule

            cfg["learning_rate"] = LinearSchedule(self.config.learning_rate, 0.0, 1.0)
        return cfg

    def _sb3_class(self) -> Any:
        import importlib

        if self.sb3_class_name not in _SB3_CLASSES:
            base = getattr(importlib.import_module(self.sb3_module), self.sb3_class_name)
            _SB3_CLASSES[self.sb3_class_name] = _sb3_subclass(base)
        return _SB3_CLASSES[self.sb3_class_name]

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
    Config = A2CConfig
    config: A2CConfig
