"""Recurrent PPO from sb3-contrib: ``recurrent-ppo``, the RL reference on partial observation.

PPO (Schulman, Wolski, Dhariwal, Radford, Klimov (2017), arXiv:1707.06347) with an LSTM
(Hochreiter and Schmidhuber 1997) in front of the actor and, with ``enable_critic_lstm``,
of the critic: sb3-contrib's ``RecurrentPPO`` and its ``MlpLstmPolicy``. rl-baselines3-zoo
runs it as ``ppo_lstm`` on the velocity-free control tasks (its benchmark: PendulumNoVel-v1
-218 +- 140 at 100k timesteps); here it is the RL side of ``PendulumPO``, the pendulum
whose angular velocity is zeroed (obs 3 with the velocity slot at 0; the zoo's
PendulumNoVel drops it, obs 2: the same information).

It runs behind :mod:`algorithms.sb3`'s interface, so everything that module's docstring
says holds; in addition ``evaluate_policy`` carries the LSTM state through each episode
and resets it at the episode's start, as training does. With ``policy.kind=lstm`` and no
``lstm_hidden_size``/``net_arch`` the network is the policy section's: one LSTM of its
first hidden size, linear heads (the ES's LSTM(3->16)+Linear(16->1) has the same actor
trunk; SB3 adds a critic and a log-std).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from algorithms.base import doc
from algorithms.registry import register
from algorithms.sb3 import PPOConfig, SB3Algorithm


@dataclass(frozen=True)
class RecurrentPPOConfig(PPOConfig):
    """Hyperparameters of ``recurrent-ppo``: PPO's plus the LSTM's (sb3-contrib names)."""

    lstm_hidden_size: int = doc("LSTM units (0: the policy section's first hidden size)", 0)
    n_lstm_layers: int = doc("stacked LSTM layers", 1)
    enable_critic_lstm: bool = doc("the critic has an LSTM of its own", True)
    shared_lstm: bool = doc("actor and critic share one LSTM (needs enable_critic_lstm off)", False)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        if self.lstm_hidden_size < 0:
            raise ValueError(f"lstm_hidden_size must be >= 0, got {self.lstm_hidden_size}")
        if self.n_lstm_layers < 1:
            raise ValueError(f"n_lstm_layers must be >= 1, got {self.n_lstm_layers}")
        if self.shared_lstm and self.enable_critic_lstm:
            raise ValueError("shared_lstm needs enable_critic_lstm=false (sb3-contrib's rule)")


@register("recurrent-ppo")
class RecurrentPPO(SB3Algorithm):
    """PPO with LSTM actor and critic (sb3-contrib RecurrentPPO, rl-zoo's ``ppo_lstm``)."""

    summary = "sb3-contrib RecurrentPPO (LSTM actor/critic), the RL side of PendulumPO"
    sb3_class_name = "RecurrentPPO"
    sb3_module = "sb3_contrib"
    sb3_policy = "MlpLstmPolicy"
    accepts_lstm = True
    harness_only: ClassVar[tuple[str, ...]] = (
        *SB3Algorithm.harness_only,
        "lstm_hidden_size",
        "n_lstm_layers",
        "enable_critic_lstm",
        "shared_lstm",
    )
    Config = RecurrentPPOConfig
    config: RecurrentPPOConfig

    def _policy_kwargs(self) -> dict[str, Any]:
        kwargs = super()._policy_kwargs()
        spec = self.context.policy_spec
        if self.config.net_arch is None and spec.kind == "lstm":
            kwargs["net_arch"] = {"pi": [], "vf": []}  # the LSTM is the trunk
        hidden = self.config.lstm_hidden_size
        if hidden == 0:
            hidden = spec.hidden_sizes[0] if spec.kind != "linear" and spec.hidden_sizes else 64
        kwargs.update(
            lstm_hidden_size=hidden,
            n_lstm_layers=self.config.n_lstm_layers,
            enable_critic_lstm=self.config.enable_critic_lstm,
            shared_lstm=self.config.shared_lstm,
        )
        return kwargs
