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
and resets it at the episode's start, as training does. The network is the config's:
its defaults are sb3-contrib's ``MlpLstmPolicy`` (an LSTM of 256 units for the actor and
one for the critic, then 64-64 tanh layers, orthogonal initialisation), the zoo's
``ppo_lstm.yml`` ``policy_kwargs`` where ``experiments/defaults.yaml`` carries an entry;
never the run's ``policy`` section (the ES's LSTM(3->16)+Linear(16->1) on PendulumPO).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from algorithms.base import doc
from algorithms.registry import register
from algorithms.sb3 import PPOConfig, SB3Algorithm, network_sources


@dataclass(frozen=True)
class RecurrentPPOConfig(PPOConfig):
    """Hyperparameters of ``recurrent-ppo``: PPO's plus the LSTM's (sb3-contrib names)."""

    DEFAULT_SOURCES: ClassVar[dict[str, str]] = network_sources(
        "sb3-contrib RecurrentPPO MlpLstmPolicy default",
        *("ortho_init", "log_std_init", "lstm_hidden_size", "n_lstm_layers"),
        *("enable_critic_lstm", "shared_lstm"),
    )

    lstm_hidden_size: int = doc("LSTM units", 256)
    n_lstm_layers: int = doc("stacked LSTM layers", 1)
    enable_critic_lstm: bool = doc("the critic has an LSTM of its own", True)
    shared_lstm: bool = doc("actor and critic share one LSTM (needs enable_critic_lstm off)", False)

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        super().validate()
        if self.lstm_hidden_size < 1:
            raise ValueError(f"lstm_hidden_size must be >= 1, got {self.lstm_hidden_size}")
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
    zoo_hyperparams = "ppo_lstm.yml"
    harness_only: ClassVar[tuple[str, ...]] = (
        *SB3Algorithm.harness_only,
        "lstm_hidden_size",
        "n_lstm_layers",
        "enable_critic_lstm",
        "shared_lstm",
    )
    Config = RecurrentPPOConfig
    config: RecurrentPPOConfig

    @classmethod
    def policy_kwargs_for(cls, config: Any, box_actions: bool) -> dict[str, Any]:
        """PPO's ``policy_kwargs`` plus the LSTM's."""
        kwargs = super().policy_kwargs_for(config, box_actions)
        kwargs.update(
            lstm_hidden_size=config.lstm_hidden_size,
            n_lstm_layers=config.n_lstm_layers,
            enable_critic_lstm=config.enable_critic_lstm,
            shared_lstm=config.shared_lstm,
        )
        return kwargs
