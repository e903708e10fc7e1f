"""Off-policy RL baselines: ``sac``, ``td3`` (stable-baselines3) and ``tqc`` (sb3-contrib).

The rl-baselines3-zoo benchmark's leaders on the pybullet locomotion tasks are off-policy
(AntBulletEnv-v0 at 1M timesteps: TQC 3,457, TD3 3,300, SAC 3,073; PPO 2,866 at 2M):

* SAC: Haarnoja, Zhou, Abbeel, Levine (2018), *Soft Actor-Critic*, arXiv:1801.01290, with
  the automatic entropy temperature of Haarnoja et al. (2018b), arXiv:1812.05905;
* TD3: Fujimoto, van Hoof, Meger (2018), *Addressing Function Approximation Error in
  Actor-Critic Methods*, arXiv:1802.09477;
* TQC: Kuznetsov, Shvechikov, Grishin, Vetrov (2020), *Controlling Overestimation Bias
  with Truncated Mixture of Continuous Distributional Quantile Critics*, arXiv:2005.04269.

They run behind the interface of :mod:`algorithms.sb3` (the same env factory, Monitor,
``time_feature``, ``normalize``, evaluation seeds, private global RNGs, CPU device with one
torch thread, ``model.zip`` export). What differs:

* a :meth:`~SB3Algorithm.step` is ``chunk_timesteps`` env steps (one ``learn`` call; a
  multiple of ``train_freq x n_envs`` keeps the zoo's update rhythm exactly);
* ``net_arch`` is the actor's and each critic's hidden sizes (the zoo's
  ``policy_kwargs=dict(net_arch=[400, 300])``); the configs' defaults are SB3's own
  (SAC and TQC 256-256, TD3 400-300, ReLU; SAC's and TQC's gSDE log-std -3);
* ``ent_coef`` is ``auto``, ``auto_INIT`` or a number, as SB3 and the zoo write it;
* TD3's ``noise_type``/``noise_std`` are the zoo's names for a Gaussian (``normal``) or
  Ornstein-Uhlenbeck action noise of that standard deviation on every action dimension;
* a checkpoint also carries the replay buffer (``model.save`` leaves it out), so a resumed
  run trains on the transitions it had collected;
* ``library`` picks the implementation of SAC and TQC: ``sbx`` (SBX,
  https://github.com/araffin/sbx, by SB3's authors: the same algorithms in JAX, 1.6-2.1x
  the training steps per CPU-second on these machines, docs/performance.md; SAC's default
  since a parity run at the zoo's Pendulum-v1 settings, reports/sbx_parity) or ``sb3``
  (stable-baselines3 and sb3-contrib, torch; TQC's default, and wherever gSDE is used:
  SBX has none). A one-worker SBX run is held to one core (:func:`hold_one_core`).

Box (continuous) action spaces only: a discrete env is refused with a usage error.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from algorithms.base import doc
from algorithms.registry import register
from algorithms.sb3 import (
    ACTIVATION_DOC,
    NET_ARCH_DOC,
    RLEnvConfig,
    SB3Algorithm,
    network_sources,
    validate_rl_common,
)

NOISE_TYPES = ("none", "normal", "ornstein-uhlenbeck")
#: Implementations of SAC and TQC (the ``library`` knob).
LIBRARIES = ("sb3", "sbx")
#: JAX on the CPU, set before JAX starts (a process that started JAX keeps its own). XLA's
#: thread options here do not hold its pool to one thread (measured: 1.6 cores in use);
#: :func:`hold_one_core` does.
XLA_ONE_THREAD = {
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_PLATFORMS": "cpu",
}


@dataclass(frozen=True)
class OffPolicyConfig(RLEnvConfig):
    """Knobs every off-policy baseline shares (SB3 names where SB3 has one)."""

    net_arch: list[int] | None = doc(  # noqa: RUF009 - doc() makes a dataclasses.field
        NET_ARCH_DOC, default_factory=lambda: [256, 256]
    )
    activation: str | None = doc(ACTIVATION_DOC, "relu")
    learning_rate: float = doc("Adam step size of actor and critics", 3e-4)
    buffer_size: int = doc("replay buffer capacity in transitions", 1_000_000)
    learning_starts: int = doc("env steps of random actions before the first update", 100)
    batch_size: int = doc("minibatch size of each gradient step", 256)
    tau: float = doc("soft update coefficient of the target networks", 0.005)
    gamma: float = doc("discount factor", 0.99)
    train_freq: int = doc("env steps (per env) between two training phases", 1)
    gradient_steps: int = doc("gradient steps per training phase (-1: as many as env steps)", 1)
    normalize: bool = doc("VecNormalize: running normalisation of observations and rewards", False)
    chunk_timesteps: int = doc("env timesteps per harness step (one metrics row)", 1000)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        validate_rl_common(self)
        for name in ("batch_size", "train_freq", "chunk_timesteps", "buffer_size"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.learning_starts < 0:
            raise ValueError(f"learning_starts must be >= 0, got {self.learning_starts}")
        if self.gradient_steps == 0 or self.gradient_steps < -1:
            raise ValueError(f"gradient_steps must be >= 1 or -1, got {self.gradient_steps}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")


def _check_ent_coef(value: str) -> None:
    """``auto``, ``auto_INIT`` (INIT > 0) or a non-negative number, as SB3 accepts."""
    text = str(value)
    number = text[len("auto_") :] if text.startswith("auto_") else text
    if text == "auto":
        return
    try:
        ok = float(number) > 0 if text.startswith("auto_") else float(number) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"ent_coef must be auto, auto_INIT or a number >= 0, got {value!r}")


LIBRARY_DOC = (
    "implementation: sbx (SBX, JAX: 1.6-2.1x the steps per CPU-second; no gSDE) or sb3 "
    "(stable-baselines3 / sb3-contrib, torch)"
)


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """Hyperparameters of ``sac`` (SB3 names); defaults per env in ``experiments/defaults.yaml``."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources(
        "SB3 SAC MlpPolicy default", "log_std_init", "use_expln"
    )

    library: str = doc(LIBRARY_DOC, "sbx")
    ent_coef: str = doc("entropy temperature: auto, auto_INIT or a number", "auto")
    target_update_interval: int = doc("gradient steps between target-network updates", 1)
    use_sde: bool = doc("generalised state-dependent exploration", False)
    sde_sample_freq: int = doc("gSDE: resample the noise every N steps (-1: per rollout)", -1)
    use_sde_at_warmup: bool = doc("gSDE instead of uniform actions before learning_starts", False)
    log_std_init: float = doc("initial log standard deviation (gSDE)", -3.0)
    use_expln: bool = doc(
        "gSDE: a positive std by exp for log-std <= 0 and ln(x+1)+1 above, instead of exp "
        "(SB3's use_expln; the zoo's pybullet SAC/TQC)",
        False,
    )

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        _check_ent_coef(self.ent_coef)
        if self.library not in LIBRARIES:
            raise ValueError(f"library must be one of {', '.join(LIBRARIES)}, got {self.library!r}")
        if self.library == "sbx" and (self.use_sde or self.use_sde_at_warmup):
            raise ValueError("library=sbx has no gSDE: set use_sde=false or library=sb3")
        if self.library == "sbx" and self.target_update_interval != 1:
            raise ValueError(
                "library=sbx updates its targets every gradient step: set "
                f"target_update_interval=1 or library=sb3, got {self.target_update_interval}"
            )
        if self.target_update_interval < 1:
            raise ValueError(
                f"target_update_interval must be >= 1, got {self.target_update_interval}"
            )


@dataclass(frozen=True)
class TQCConfig(SACConfig):
    """Hyperparameters of ``tqc`` (sb3-contrib names): SAC's plus the quantile critics."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources(
        "sb3-contrib TQC MlpPolicy default",
        *("log_std_init", "use_expln", "n_quantiles", "n_critics"),
    )

    library: str = doc(LIBRARY_DOC + "; TQC's default stays sb3 (no parity run on SBX's)", "sb3")
    top_quantiles_to_drop_per_net: int = doc("quantiles dropped per critic (the truncation d)", 2)
    n_quantiles: int = doc("quantiles per critic (M)", 25)
    n_critics: int = doc("critic networks (N)", 2)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        if self.n_quantiles < 1 or self.n_critics < 1:
            raise ValueError(
                f"n_quantiles and n_critics must be >= 1, got {self.n_quantiles}, {self.n_critics}"
            )
        if self.library == "sbx" and self.n_critics != 2:
            raise ValueError(
                f"library=sbx's TQC has 2 critics: set n_critics=2, got {self.n_critics}"
            )
        if not 0 <= self.top_quantiles_to_drop_per_net < self.n_quantiles:
            raise ValueError(
                "top_quantiles_to_drop_per_net must be in [0, n_quantiles), got "
                f"{self.top_quantiles_to_drop_per_net}"
            )


@dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    """Hyperparameters of ``td3`` (SB3 names); defaults per env in ``experiments/defaults.yaml``."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources("SB3 TD3 MlpPolicy default")

    net_arch: list[int] | None = doc(  # noqa: RUF009 - doc() makes a dataclasses.field
        NET_ARCH_DOC, default_factory=lambda: [400, 300]
    )
    learning_rate: float = doc("Adam step size of actor and critics", 1e-3)
    policy_delay: int = doc("critic updates per actor (and target) update", 2)
    target_policy_noise: float = doc("std of the target policy smoothing noise", 0.2)
    target_noise_clip: float = doc("clip of the target policy smoothing noise", 0.5)
    noise_type: str = doc("exploration noise: none, normal or ornstein-uhlenbeck (rl-zoo)", "none")
    noise_std: float = doc("std of the exploration noise on every action dimension", 0.1)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        if self.noise_type not in NOISE_TYPES:
            raise ValueError(
                f"noise_type must be one of {', '.join(NOISE_TYPES)}, got {self.noise_type!r}"
            )
        if self.noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {self.noise_std}")
        if self.policy_delay < 1:
            raise ValueError(f"policy_delay must be >= 1, got {self.policy_delay}")


class SB3OffPolicy(SB3Algorithm):
    """An SB3 off-policy algorithm stepped ``chunk_timesteps`` env steps at a time."""

    continuous_actions_only = True
    #: learns from a replay buffer of past steps (the report says where only on-policy RL ran)
    off_policy = True
    harness_only: ClassVar[tuple[str, ...]] = (
        "n_envs",
        "net_arch",
        "activation",
        "learning_rate_decay_timesteps",
        "normalize",
        "time_feature",
        "vec_env",
        "chunk_timesteps",
        "log_std_init",
        "use_expln",
        "noise_type",
        "noise_std",
        "n_quantiles",
        "n_critics",
        "library",
    )

    def chunk_timesteps(self) -> int:
        return int(self.config.chunk_timesteps)

    @classmethod
    def policy_kwargs_for(cls, config: Any, box_actions: bool) -> dict[str, Any]:
        """The ``policy_kwargs`` of the actor and critics: one ``net_arch`` for each (Box
        actions only, so ``box_actions`` is always true here)."""
        net_arch, activation = cls.network(config)
        if getattr(config, "library", "sb3") == "sbx":
            import flax.linen

            activation_fn: Any = flax.linen.relu if activation == "relu" else flax.linen.tanh
        else:
            from torch import nn

            activation_fn = nn.ReLU if activation == "relu" else nn.Tanh
        kwargs: dict[str, Any] = {"net_arch": net_arch, "activation_fn": activation_fn}
        if getattr(config, "use_sde", False):
            kwargs["log_std_init"] = config.log_std_init
            kwargs["use_expln"] = config.use_expln
        for key in ("n_quantiles", "n_critics"):
            if hasattr(config, key):
                kwargs[key] = getattr(config, key)
        return kwargs

    def _sb3_kwargs(self) -> dict[str, Any]:
        kwargs = super()._sb3_kwargs()
        if "ent_coef" in kwargs and kwargs["ent_coef"] != "auto":
            text = str(kwargs["ent_coef"])
            kwargs["ent_coef"] = text if text.startswith("auto_") else float(text)
        if self.library == "sbx":
            del kwargs["target_update_interval"]  # SBX's is 1 always (validated)
        return kwargs

    @property
    def library(self) -> str:
        """``sbx`` or ``sb3`` (TD3 has no ``library`` knob: always ``sb3``)."""
        return str(getattr(self.config, "library", "sb3"))

    def _build_model(self) -> Any:
        if self.library == "sbx" and self.context.workers == 1:
            self._given_cores = hold_one_core()
        return super()._build_model()

    def close(self) -> None:
        super().close()
        given = getattr(self, "_given_cores", None)
        if given:  # the process goes on (the Python API, tests): give its cores back
            import os

            os.sched_setaffinity(0, given)
            self._given_cores = None

    def _sb3_class(self) -> Any:
        if self.library == "sb3":
            return super()._sb3_class()
        return sbx_class(self.sb3_class_name)

    def current_parameters(self) -> np.ndarray:
        """Every parameter of the policy as one float32 vector (SBX: those of its train
        states, ``actor_state`` then the critics' ``qf*_state`` by name, then the critics'
        target copies, each in the order of JAX's flattening of its parameter tree)."""
        if self.library == "sb3":
            return super().current_parameters()
        return sbx_parameters(self.model.policy)

    def artifacts(self) -> dict[str, Any]:
        return {**super().artifacts(), "library": self.library}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["replay_buffer"] = pickle.dumps(self.model.replay_buffer)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if state.get("replay_buffer") is not None:
            self.model.replay_buffer = pickle.load(io.BytesIO(state["replay_buffer"]))


def hold_one_core() -> set[int] | None:
    """Hold this process to the idlest of the cores it may use, if it may use several;
    return the cores it had (None where it had one).

    XLA's CPU runtime sizes its thread pool by the process's CPU affinity when JAX starts and
    ignores ``XLA_FLAGS``' thread options (measured here: an SBX SAC run on 2 free cores used
    1.6 of them); so a one-worker run is held to one core, as torch's one thread holds
    the others' runs to theirs. Where it runs changes no result."""
    import os

    import psutil

    cores = os.sched_getaffinity(0)
    if len(cores) == 1:
        return None
    busy = psutil.cpu_percent(interval=0.1, percpu=True)
    idlest = min(sorted(cores), key=lambda core: busy[core] if core < len(busy) else 100.0)
    os.sched_setaffinity(0, {idlest})
    return cores


def sbx_parameters(policy: Any) -> np.ndarray:
    """The parameters of an SBX policy's train states as one float32 vector."""
    import jax

    states = [getattr(policy, name) for name in sorted(vars(policy)) if name.endswith("_state")]
    # the critics' target copies too, as SB3's policy.parameters() counts them
    trees = [state.params for state in states]
    trees += [state.target_params for state in states if hasattr(state, "target_params")]
    leaves = jax.tree_util.tree_leaves(trees)
    return np.concatenate([np.asarray(leaf, dtype=np.float32).ravel() for leaf in leaves])


def sbx_class(name: str) -> Any:
    """SBX's ``name`` (SAC, TQC) as the harness steps it, JAX held to one CPU thread."""
    import os

    from algorithms.sb3 import chunked_class

    for key, value in XLA_ONE_THREAD.items():
        os.environ.setdefault(key, value)
    return chunked_class("sbx", name)


@register("sac")
class SAC(SB3OffPolicy):
    """Soft Actor-Critic (Haarnoja et al. 2018), stable-baselines3."""

    summary = "stable-baselines3 SAC (off-policy, entropy-regularised); Box actions only"
    sb3_class_name = "SAC"
    zoo_hyperparams = "sac.yml"
    Config = SACConfig
    config: SACConfig


@register("tqc")
class TQC(SB3OffPolicy):
    """Truncated Quantile Critics (Kuznetsov et al. 2020), sb3-contrib."""

    summary = "sb3-contrib TQC (SAC with truncated quantile critics); Box actions only"
    sb3_class_name = "TQC"
    zoo_hyperparams = "tqc.yml"
    sb3_module = "sb3_contrib"
    Config = TQCConfig
    config: TQCConfig


@register("td3")
class TD3(SB3OffPolicy):
    """Twin Delayed DDPG (Fujimoto et al. 2018), stable-baselines3."""

    summary = "stable-baselines3 TD3 (off-policy, deterministic actor); Box actions only"
    sb3_class_name = "TD3"
    zoo_hyperparams = "td3.yml"
    Config = TD3Config
    config: TD3Config

    def _sb3_kwargs(self) -> dict[str, Any]:
        kwargs = super()._sb3_kwargs()
        kwargs["action_noise"] = self._action_noise()
        return kwargs

    def _action_noise(self) -> Any:
        """The zoo's ``noise_type``/``noise_std`` as an SB3 action-noise object."""
        from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

        if self.config.noise_type == "none":
            return None
        dim = self.context.policy_spec.action_dim
        mean, std = np.zeros(dim), self.config.noise_std * np.ones(dim)
        if self.config.noise_type == "normal":
            return NormalActionNoise(mean, std)
        return OrnsteinUhlenbeckActionNoise(mean, std)
