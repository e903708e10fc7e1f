"""Environments, policies over flat parameter vectors, and rollouts."""

from envs.obs_norm import RunningStat
from envs.policies import (
    Action,
    FeedForwardPolicy,
    LSTMPolicy,
    Policy,
    PolicySpec,
    build_policy,
    policy_spec_for,
)
from envs.registry import (
    ENV_ALIASES,
    ENVS,
    EnvEntry,
    UnknownEnvError,
    canonical_env_name,
    list_envs,
    make_env,
    quiet_output,
    register_pybullet_envs,
    resolve_env_id,
)
from envs.rollout import EpisodeBatch, NonFiniteError, RolloutWorker
from envs.wrappers import ZeroVelocityPendulum

__all__ = [
    "ENVS",
    "ENV_ALIASES",
    "Action",
    "EnvEntry",
    "EpisodeBatch",
    "FeedForwardPolicy",
    "LSTMPolicy",
    "NonFiniteError",
    "Policy",
    "PolicySpec",
    "RolloutWorker",
    "RunningStat",
    "UnknownEnvError",
    "ZeroVelocityPendulum",
    "build_policy",
    "canonical_env_name",
    "list_envs",
    "make_env",
    "policy_spec_for",
    "quiet_output",
    "register_pybullet_envs",
    "resolve_env_id",
]
