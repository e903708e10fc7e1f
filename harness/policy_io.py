"""A run's trained policy on disk: the formats, the writer and the reader.

Each run keeps its final policy in its field's own format (written by
:func:`save_policy`, which the runner calls when a run finishes):

* an evolution strategy: ``final_params.npy`` (the flat float32 centre),
  ``policy_spec.json`` (the harness policy it parameterises:
  :class:`envs.policies.PolicySpec`, whose ``num_params`` is the vector's size)
  and ``obs_norm.json`` (the observation mean and standard deviation the policy
  normalises with, float32 values, or ``null`` where the run used none);
* a stable-baselines3 algorithm (PPO, A2C, any algorithm holding an SB3 model as
  ``model``): ``model.zip`` exactly as ``model.save`` writes it, readable by
  ``PPO.load`` in a plain SB3 session; ``vecnormalize.pkl`` (``VecNormalize.save``,
  rl-baselines3-zoo's name) when the run normalised observations;
  ``final_params.npy`` (every parameter of the SB3 policy, actor, critic and
  log-std, in ``model.policy.parameters()`` order) and a ``policy_spec.json``
  that names the SB3 policy (``"format": "stable-baselines3"``), not a harness
  policy it never used.

:func:`load_stored` reads either back as ``(act, reset)``;
:func:`harness.load_policy` (in :mod:`harness.replay`) is the public face.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness import rundir

__all__ = [
    "OBS_NORM",
    "SB3_FORMAT",
    "SB3_MODEL",
    "VEC_NORMALIZE",
    "PolicyLoadError",
    "has_policy",
    "load_stored",
    "read_json",
    "save_policy",
]

SB3_MODEL = "model.zip"
VEC_NORMALIZE = "vecnormalize.pkl"
OBS_NORM = "obs_norm.json"
#: ``format`` of the ``policy_spec.json`` of a run whose policy is an SB3 model.
SB3_FORMAT = "stable-baselines3"


class PolicyLoadError(ValueError):
    """A run's policy cannot be read; the message is one line naming the run."""


# -- writing ------------------------------------------------------------------------------


def _sb3_model(algorithm: Any) -> Any:
    """The algorithm's stable-baselines3 model, or None for a flat-parameter policy."""
    model = getattr(algorithm, "model", None)
    try:
        from stable_baselines3.common.base_class import BaseAlgorithm
    except ImportError:  # pragma: no cover - a dependency
        return None
    return model if isinstance(model, BaseAlgorithm) else None


def _sb3_class_name(model: Any) -> str:
    """The SB3 (or sb3-contrib) class a model is, through the harness's own subclasses."""
    for cls in type(model).__mro__:
        if cls.__module__.split(".")[0] in ("stable_baselines3", "sb3_contrib"):
            return cls.__name__
    return type(model).__name__


def save_policy(algorithm: Any, folder: Path) -> list[str]:
    """Write the algorithm's current policy into ``folder``; return the file names written."""
    model = _sb3_model(algorithm)
    params = np.asarray(algorithm.current_parameters(), dtype=np.float32)
    np.save(folder / rundir.FINAL_PARAMS, params)
    if model is not None:
        return [rundir.FINAL_PARAMS, *_save_sb3(algorithm, model, params.size, folder)]
    spec = algorithm.context.policy_spec
    if spec.num_params != params.size:
        raise ValueError(f"policy spec has {spec.num_params} parameters, the run {params.size}")
    (folder / rundir.POLICY_SPEC).write_text(json.dumps(spec.to_dict(), indent=2))
    facts = algorithm.artifacts()
    mean, std = facts.get("obs_mean"), facts.get("obs_std")
    stats = None if mean is None or std is None else {"mean": mean, "std": std}
    (folder / OBS_NORM).write_text(json.dumps(stats, indent=2))
    return [rundir.FINAL_PARAMS, rundir.POLICY_SPEC, OBS_NORM]


def _save_sb3(algorithm: Any, model: Any, n_params: int, folder: Path) -> list[str]:
    from stable_baselines3.common.vec_env import VecNormalize

    model.save(folder / SB3_MODEL)
    names = [SB3_MODEL]
    vec_env = getattr(algorithm, "vec_env", None)
    normalized = isinstance(vec_env, VecNormalize)
    if isinstance(vec_env, VecNormalize):
        vec_env.save(str(folder / VEC_NORMALIZE))
        names.append(VEC_NORMALIZE)
    space = model.observation_space
    spec = {
        "format": SB3_FORMAT,
        "sb3_class": _sb3_class_name(model),
        "policy": type(model.policy).__name__,
        "net_arch": model.policy_kwargs.get("net_arch"),
        "activation": getattr(model.policy_kwargs.get("activation_fn"), "__name__", None),
        "obs_dim": int(np.prod(space.shape)),
        "action_space": repr(model.action_space),
        "num_params": int(n_params),
        "model": SB3_MODEL,
        "vec_normalize": VEC_NORMALIZE if normalized else None,
        "final_params": "every parameter of model.policy.parameters(), in order, flattened",
    }
    (folder / rundir.POLICY_SPEC).write_text(json.dumps(spec, indent=2))
    return [*names, rundir.POLICY_SPEC]


# -- reading ------------------------------------------------------------------------------

#: ``act(observation, deterministic) -> action`` and ``reset()`` of a stored policy.
Act = Callable[[np.ndarray, bool], Any]
Reset = Callable[[], None]


def read_json(path: Path) -> Any:
    """A JSON file of a stored policy; :class:`PolicyLoadError` names it when unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyLoadError(f"{path} is missing") from None
    except (OSError, ValueError) as error:
        raise PolicyLoadError(f"{path} cannot be read: {error}") from None


def has_policy(folder: Path) -> bool:
    """Whether ``folder`` holds a complete stored policy (either format)."""
    spec = folder / rundir.POLICY_SPEC
    try:
        data = json.loads(spec.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if isinstance(data, dict) and data.get("format") == SB3_FORMAT:
        return (folder / SB3_MODEL).exists()
    return (folder / rundir.FINAL_PARAMS).exists()


def _es_policy(folder: Path) -> tuple[Act, Reset]:
    from envs.policies import PolicySpec, build_policy

    try:
        spec = PolicySpec.from_dict(read_json(folder / rundir.POLICY_SPEC))
    except (TypeError, ValueError) as error:
        raise PolicyLoadError(f"{folder / rundir.POLICY_SPEC}: {error}") from None
    params = np.load(folder / rundir.FINAL_PARAMS)
    if params.shape != (spec.num_params,):
        raise PolicyLoadError(
            f"{folder}: {rundir.FINAL_PARAMS} holds {params.size} numbers, "
            f"{rundir.POLICY_SPEC} describes {spec.num_params} ({spec.describe()})"
        )
    if (folder / OBS_NORM).exists():
        stats = read_json(folder / OBS_NORM)
    else:  # runs stored before obs_norm.json: the statistics were in summary.json
        summary = read_json(folder / rundir.SUMMARY) if (folder / rundir.SUMMARY).exists() else {}
        has = summary.get("obs_mean") is not None and summary.get("obs_std") is not None
        stats = {"mean": summary["obs_mean"], "std": summary["obs_std"]} if has else None
    mean = None if stats is None else np.asarray(stats["mean"], dtype=np.float32)
    std = None if stats is None else np.asarray(stats["std"], dtype=np.float32)
    policy = build_policy(spec)
    try:
        policy.set_params(params, mean, std)
    except ValueError as error:  # statistics of another size, non-finite values
        raise PolicyLoadError(f"{folder}: {OBS_NORM} does not fit the policy: {error}") from None

    def act(obs: np.ndarray, deterministic: bool) -> Any:
        return policy.act(obs)  # an ES policy has no exploration noise of its own

    return act, policy.reset


def _sb3_policy(folder: Path, spec: dict[str, Any]) -> tuple[Act, Reset]:
    import stable_baselines3
    import torch
    from gymnasium.spaces import Box

    torch.set_num_threads(1)  # as the run evaluated: the same kernels, the same actions
    name = str(spec.get("sb3_class"))
    module: Any = stable_baselines3
    if not hasattr(module, name):
        import sb3_contrib

        module = sb3_contrib
    model = getattr(module, name).load(folder / SB3_MODEL, device="cpu")
    normalizer = None
    if spec.get("vec_normalize"):
        with (folder / str(spec["vec_normalize"])).open("rb") as stream:
            normalizer = pickle.load(stream)  # what VecNormalize.load reads, with no venv to wrap

    policy = model.policy
    policy.set_training_mode(False)  # once: predict() walks every module to set it per call
    space = policy.action_space

    def act(obs: np.ndarray, deterministic: bool) -> Any:
        """``model.predict`` for one observation, its steps in its order, less the mode switch."""
        seen = normalizer.normalize_obs(obs) if normalizer is not None else obs
        tensor, vectorized = policy.obs_to_tensor(seen)
        with torch.no_grad():
            actions = policy._predict(tensor, deterministic=deterministic)
        actions = actions.cpu().numpy().reshape((-1, *space.shape))
        if isinstance(space, Box):
            if policy.squash_output:
                actions = policy.unscale_action(actions)
            else:
                actions = np.clip(actions, space.low, space.high)
        return actions if vectorized else actions.squeeze(axis=0)

    return act, lambda: None


def load_stored(folder: Path) -> tuple[Act, Reset]:
    """The policy stored in ``folder`` (a run directory or an export) as ``(act, reset)``."""
    spec = read_json(folder / rundir.POLICY_SPEC)
    if isinstance(spec, dict) and spec.get("format") == SB3_FORMAT:
        return _sb3_policy(folder, spec)
    return _es_policy(folder)
