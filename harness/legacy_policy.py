"""SB3 policies stored before their constructor arguments were recorded, rebuilt from data.

Runs of earlier versions wrote ``policy_spec.json`` without ``policy_kwargs`` and
``spaces`` (see :mod:`harness.policy_io`); their policy was readable only through
``model.zip``, which SB3 opens by unpickling. Their ``config.json`` says the same thing
as data: the algorithm derived its policy's arguments from it (``_policy_kwargs`` of
:class:`algorithms.sb3.SB3Algorithm`, plus ``use_sde``), and the spaces are the env's.
:func:`legacy_sb3_fields` derives them again so that the reader builds the policy from
the closed lists and loads ``final_params.npy`` into it, as for a run of this version.
The reader checks the result against the stored spec (``net_arch``, ``activation``) and
the parameter count, so a config that no longer matches is refused, not guessed at.

Those versions read a null ``net_arch``/``activation`` (and recurrent-ppo's
``lstm_hidden_size`` 0) from the run's ``policy`` section; today null is SB3's default for
the algorithm. :func:`as_trained` spells the old rule out, so an old record is rebuilt as
it trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from harness import rundir
from harness.policy_io import PolicyLoadError, policy_kwargs_data, space_data

__all__ = ["as_trained", "legacy_sb3_fields"]


def as_trained(config: dict[str, Any]) -> dict[str, Any]:
    """The ``params`` of an RL run's config with the network it trained spelled out: a run
    recorded before RL networks were their own took a null ``net_arch`` (an ``mlp`` policy's
    hidden sizes, else none), a null ``activation`` and recurrent-ppo's ``lstm_hidden_size``
    0 (the first hidden size, 64 without one) from its ``policy`` section."""
    params = dict(config["params"])
    policy = config.get("policy") or {}
    kind = policy.get("kind", "mlp")
    hidden = list(policy.get("hidden_sizes") or [])
    if "net_arch" in params and params["net_arch"] is None:
        params["net_arch"] = hidden if kind == "mlp" else []
    if "activation" in params and params["activation"] is None:
        params["activation"] = policy.get("activation", "tanh")
    if params.get("lstm_hidden_size") == 0:
        params["lstm_hidden_size"] = hidden[0] if kind != "linear" and hidden else 64
    return params


def _make_env(config: dict[str, Any]) -> Any:
    """The env of the run's evaluation: its env, with the time feature where it trained so."""
    from envs.registry import make_env

    env = make_env(str(config["env"]))
    if bool((config.get("params") or {}).get("time_feature")):
        from sb3_contrib.common.wrappers import TimeFeatureWrapper

        env = TimeFeatureWrapper(env)
    return env


def legacy_sb3_fields(run_dir: Path, config: Any) -> dict[str, Any]:
    """``policy_kwargs`` and ``spaces`` of the run's SB3 policy, derived from its config.

    :class:`PolicyLoadError` (one line naming the run) when the config cannot say.
    """
    import gymnasium as gym

    from algorithms.base import Algorithm
    from algorithms.registry import get_algorithm
    from harness.config import validate_params
    from harness.runner import build_context

    try:
        if not isinstance(config, dict):
            raise TypeError(f"{rundir.CONFIG} is not a mapping")
        algo_cls = cast(type[Algorithm], get_algorithm(str(config["algo"])))
        params = validate_params(as_trained(config), algo_cls.Config, "params")
        probe: Any = algo_cls.__new__(algo_cls)  # the algorithm's settings only: no envs, no model
        Algorithm.__init__(probe, build_context(config), params)
        kwargs = dict(probe._policy_kwargs())
        if getattr(params, "use_sde", False):
            kwargs["use_sde"] = True  # on-policy algorithms pass it beside policy_kwargs
        env = _make_env(config)
        try:
            spaces = {
                "observation": space_data(env.observation_space),
                "action": space_data(env.action_space),
            }
        finally:
            env.close()
        return {"policy_kwargs": policy_kwargs_data(kwargs), "spaces": spaces}
    except (KeyError, TypeError, ValueError, AttributeError, gym.error.Error) as error:
        message = f"run {run_dir}: {rundir.CONFIG} does not describe its SB3 policy: {error}"
        raise PolicyLoadError(message.splitlines()[0]) from None
