"""A run's trained policy on disk: the formats, the writer and the reader.

Each run keeps its final policy in its field's own format (written by
:func:`save_policy`, which the runner calls when a run finishes):

* an evolution strategy: ``final_params.npy`` (the flat float32 centre),
  ``policy_spec.json`` (the harness policy it parameterises:
  :class:`envs.policies.PolicySpec`, whose ``num_params`` is the vector's size)
  and ``obs_norm.json`` (the observation mean and standard deviation the policy
  normalises with, float32 values, or ``null`` where the run used none);
* a stable-baselines3 algorithm (PPO, A2C, SAC, TD3, TQC, RecurrentPPO: any algorithm
  holding an SB3 model as ``model``): ``final_params.npy`` (every parameter of the SB3
  policy, actor, critic and log-std, in ``model.policy.parameters()`` order) and a
  ``policy_spec.json`` (``"format": "stable-baselines3"``) that says, as data, how to
  build that policy again: its class (one of :data:`POLICY_CLASSES`), the constructor
  arguments that shape it (``policy_kwargs``; the activation by name, one of
  :data:`ACTIVATIONS`) and its observation and action spaces (``spaces``); with
  ``VecNormalize``, its observation statistics as ``vec_normalize.json``. For people
  who want ``PPO.load``, the run also exports ``model.zip`` exactly as ``model.save``
  writes it and ``vecnormalize.pkl`` (``VecNormalize.save``, rl-baselines3-zoo's name).

Reading never executes anything from the run directory (a run may come from someone
else): :func:`load_stored` reads JSON and ``.npy`` files only (``allow_pickle=False``,
the header checked against the file's size before an array is allocated), builds the
SB3 policy from the closed lists and loads the parameters into it. ``model.zip`` and
``vecnormalize.pkl`` are never opened: SB3 unpickles entries of the first (its
``policy_class``) and the second is a pickle. A run stored before ``policy_kwargs``
were recorded is rebuilt from its ``config.json`` (the ``legacy`` argument of
:func:`load_stored`); one whose observations were normalised by ``VecNormalize`` kept
its statistics only in the pickle and cannot be read (:class:`PolicyLoadError`).

:func:`load_stored` reads either back as ``(act, reset)``;
:func:`harness.load_policy` (in :mod:`harness.replay`) is the public face.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness import rundir

__all__ = [
    "ACTIVATIONS",
    "OBS_NORM",
    "POLICY_CLASSES",
    "SB3_FORMAT",
    "SB3_MODEL",
    "VEC_NORMALIZE",
    "VEC_NORMALIZE_STATS",
    "PolicyLoadError",
    "has_policy",
    "load_stored",
    "policy_kwargs_data",
    "read_json",
    "read_npy",
    "save_policy",
    "space_data",
]

SB3_MODEL = "model.zip"
VEC_NORMALIZE = "vecnormalize.pkl"
VEC_NORMALIZE_STATS = "vec_normalize.json"
OBS_NORM = "obs_norm.json"
#: ``format`` of the ``policy_spec.json`` of a run whose policy is an SB3 model.
SB3_FORMAT = "stable-baselines3"

#: The SB3 policy classes a stored policy may name: name -> (module, class). Closed, so a
#: spec can only pick one of these, never name code of its own.
POLICY_CLASSES: dict[str, tuple[str, str]] = {
    "ActorCriticPolicy": ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    "SACPolicy": ("stable_baselines3.sac.policies", "SACPolicy"),
    "TD3Policy": ("stable_baselines3.td3.policies", "TD3Policy"),
    "TQCPolicy": ("sb3_contrib.tqc.policies", "TQCPolicy"),
    "RecurrentActorCriticPolicy": (
        "sb3_contrib.common.recurrent.policies",
        "RecurrentActorCriticPolicy",
    ),
}
#: Activation functions by name (classes of ``torch.nn``); closed for the same reason.
ACTIVATIONS = ("Tanh", "ReLU", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid")
#: Constructor arguments that shape a policy, and the kind of value each takes. The
#: optimizer's (``optimizer_class``, ``optimizer_kwargs``) are left out: they do not change
#: the actions. ``ortho_init`` is recorded but a rebuilt policy skips it (its parameters
#: are overwritten anyway).
_BOOL_KWARGS = (
    "ortho_init",
    "use_sde",
    "full_std",
    "use_expln",
    "squash_output",
    "share_features_extractor",
    "normalize_images",
    "shared_lstm",
    "enable_critic_lstm",
)
_FLOAT_KWARGS = ("log_std_init", "clip_mean")
_INT_KWARGS = ("n_critics", "n_quantiles", "lstm_hidden_size", "n_lstm_layers")
#: Bounds of the sizes a spec may ask for: a planted spec must not make the reader allocate
#: gigabytes before the parameter count is compared with ``final_params.npy``.
MAX_WIDTH = 4096
MAX_DEPTH = 8
MAX_COUNT = 64
MAX_SPACE_SIZE = 1 << 16
#: Most parameters a stored policy may have (128 MiB of float32; the largest policies the
#: harness trains, SAC's 256-256 networks on Humanoid, have a few hundred thousand).
MAX_POLICY_PARAMS = 1 << 25
_SPACE_TYPES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
_SPACE_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


class PolicyLoadError(ValueError):
    """A run's policy cannot be read; the message is one line naming the run."""


# -- data forms of SB3 objects ---------------------------------------------------------------


def space_data(space: Any) -> dict[str, Any]:
    """A gymnasium space as JSON data (Box, Discrete, MultiDiscrete, MultiBinary).

    ValueError for any other space: it has no data form here, so the policy cannot be
    stored rebuildable.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
            "low": space.low.tolist(),
            "high": space.high.tolist(),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise ValueError(f"{type(space).__name__} spaces have no data form")


def _int(value: Any, name: str, low: int = 0, high: int = MAX_SPACE_SIZE) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _shape(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > MAX_DEPTH:
        raise ValueError(f"{name} must be a list of sizes, got {value!r}")
    shape = tuple(_int(n, name, 0) for n in value)
    if math.prod(shape) > MAX_SPACE_SIZE:
        raise ValueError(f"{name} {list(shape)} is larger than {MAX_SPACE_SIZE} elements")
    return shape


def _space(data: Any) -> Any:
    """Inverse of :func:`space_data`; ValueError names the bad field."""
    from gymnasium import spaces

    if not isinstance(data, Mapping):
        raise ValueError(f"a space must be an object, got {data!r}")
    kind = data.get("type")
    if kind == "Box":
        shape = _shape(data.get("shape"), "Box shape")
        dtype = data.get("dtype")
        if dtype not in _SPACE_DTYPES:
            raise ValueError(f"Box dtype must be one of {', '.join(_SPACE_DTYPES)}, got {dtype!r}")
        low = np.asarray(data.get("low"), dtype=np.float64)
        high = np.asarray(data.get("high"), dtype=np.float64)
        if low.shape != shape or high.shape != shape:
            raise ValueError(f"Box low/high must have shape {list(shape)}")
        return spaces.Box(low=low.astype(dtype), high=high.astype(dtype), shape=shape, dtype=dtype)
    if kind == "Discrete":
        start = _int(data.get("start", 0), "Discrete start", -MAX_SPACE_SIZE)
        return spaces.Discrete(_int(data.get("n"), "Discrete n", 1), start=start)
    if kind == "MultiDiscrete":
        nvec = np.asarray(data.get("nvec"), dtype=np.int64)
        starts = np.asarray(data.get("start", np.zeros_like(nvec)), dtype=np.int64)
        if nvec.size > MAX_SPACE_SIZE or nvec.shape != starts.shape:
            raise ValueError(f"MultiDiscrete nvec/start do not fit: {data.get('nvec')!r}")
        return spaces.MultiDiscrete(nvec, start=starts)
    if kind == "MultiBinary":
        n = data.get("n")
        shape = _shape(n if isinstance(n, list) else [n], "MultiBinary n")
        return spaces.MultiBinary(list(shape))
    raise ValueError(f"space type must be one of {', '.join(_SPACE_TYPES)}, got {kind!r}")


def policy_kwargs_data(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor arguments of an SB3 policy as JSON data.

    ValueError names an argument with no data form here (an activation outside
    :data:`ACTIVATIONS`, a features extractor other than SB3's default, ...).
    """
    from stable_baselines3.common.torch_layers import FlattenExtractor
    from torch import nn

    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in ("optimizer_class", "optimizer_kwargs"):
            continue  # training only: the actions do not depend on them
        if key == "features_extractor_class" and value is FlattenExtractor:
            continue  # SB3's default for vector observations
        if key in ("features_extractor_kwargs", "lstm_kwargs") and not value:
            continue
        if key == "activation_fn":
            name = getattr(value, "__name__", None)
            if name not in ACTIVATIONS or getattr(nn, name) is not value:
                raise ValueError(f"activation_fn {value!r} is not one of {', '.join(ACTIVATIONS)}")
            out[key] = name
        elif key == "net_arch":
            out[key] = _net_arch(value)
        elif key in _BOOL_KWARGS + _FLOAT_KWARGS + _INT_KWARGS:
            out[key] = _plain(key, value)
        else:
            raise ValueError(f"policy argument {key}={value!r} has no data form")
    return out


def _net_arch(value: Any) -> Any:
    """``net_arch``: a list of sizes, or lists per network (``pi``, ``vf``, ``qf``)."""

    def sizes(name: str, widths: Any) -> list[int]:
        if not isinstance(widths, (list, tuple)) or len(widths) > MAX_DEPTH:
            raise ValueError(f"net_arch {name} must be at most {MAX_DEPTH} sizes, got {widths!r}")
        return [_int(w, f"net_arch {name} size", 1, MAX_WIDTH) for w in widths]

    if isinstance(value, Mapping):
        unknown = set(value) - {"pi", "vf", "qf"}
        if unknown:
            raise ValueError(f"net_arch networks must be pi, vf or qf, got {sorted(unknown)}")
        return {str(k): sizes(str(k), v) for k, v in value.items()}
    if value is None:
        return None
    return sizes("", value)


def _plain(key: str, value: Any) -> Any:
    """A bool, float or integer argument, checked against its kind (None: SB3's default)."""
    if value is None:
        return None
    if key in _BOOL_KWARGS:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return bool(value)
    if key in _FLOAT_KWARGS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ValueError(f"{key} must be finite, got {value!r}")
        return float(value)
    high = MAX_WIDTH if key == "lstm_hidden_size" else MAX_COUNT
    return _int(value, key, 1, high)


def _policy_kwargs(data: Any) -> dict[str, Any]:
    """Inverse of :func:`policy_kwargs_data`: the arguments to build the policy with."""
    from torch import nn

    if not isinstance(data, Mapping):
        raise ValueError(f"policy_kwargs must be an object, got {data!r}")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "activation_fn":
            if value not in ACTIVATIONS:
                raise ValueError(f"activation_fn must be one of {', '.join(ACTIVATIONS)}")
            kwargs[key] = getattr(nn, str(value))
        elif key == "net_arch":
            kwargs[key] = _net_arch(value)
        elif key in _BOOL_KWARGS + _FLOAT_KWARGS + _INT_KWARGS:
            kwargs[key] = _plain(key, value)
        else:
            raise ValueError(f"policy_kwargs {key!r} is not an argument the reader knows")
    return {k: v for k, v in kwargs.items() if v is not None}


# -- writing ------------------------------------------------------------------------------


def _sb3_model(algorithm: Any) -> Any:
    """The algorithm's stable-baselines3 model, or None for a flat-parameter policy."""
    model = getattr(algorithm, "model", None)
    if model is None or "stable_baselines3" not in sys.modules:
        return None  # no SB3 model can exist unless SB3 was imported: spare its 1.5 s import
    from stable_baselines3.common.base_class import BaseAlgorithm

    return model if isinstance(model, BaseAlgorithm) else None


def _sb3_class_name(model: Any) -> str:
    """The SB3 (or sb3-contrib) class a model is, through the harness's own subclasses."""
    for cls in type(model).__mro__:
        if cls.__module__.split(".")[0] in ("stable_baselines3", "sb3_contrib", "sbx"):
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


def _vec_normalize_stats(vec_env: Any) -> dict[str, Any] | None:
    """What ``VecNormalize.normalize_obs`` uses, as data (None: a dict observation space)."""
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    rms = vec_env.obs_rms
    if not isinstance(rms, RunningMeanStd):
        return None
    return {
        "norm_obs": bool(vec_env.norm_obs),
        "clip_obs": float(vec_env.clip_obs),
        "epsilon": float(vec_env.epsilon),
        "obs_rms": {
            "mean": np.asarray(rms.mean, dtype=np.float64).tolist(),
            "var": np.asarray(rms.var, dtype=np.float64).tolist(),
            "count": float(rms.count),
        },
    }


def _rebuild_fields(model: Any) -> dict[str, Any]:
    """The spec fields that rebuild the policy from data: arguments and spaces.

    The arguments are those the algorithm built its policy with (``model.policy_kwargs``;
    on-policy algorithms pass ``use_sde`` beside them). A policy with no data form gets
    ``policy_kwargs: null`` and the reason: the run still finishes, its reader says why.
    """
    kwargs = dict(model.policy_kwargs)
    if getattr(model, "use_sde", False):
        kwargs["use_sde"] = True
    try:
        return {
            "policy_kwargs": policy_kwargs_data(kwargs),
            "spaces": {
                "observation": space_data(model.observation_space),
                "action": space_data(model.action_space),
            },
        }
    except ValueError as error:
        return {"policy_kwargs": None, "spaces": None, "not_rebuildable": str(error)}


#: SBX policies the reader rebuilds, as NumPy forward passes of their actors (SBX's actor
#: is a flax module; the reader imports neither JAX nor flax).
SBX_POLICIES = ("sbx.SACPolicy", "sbx.TQCPolicy")
#: SBX's activations (flax functions) by the names the specs use for torch's.
_SBX_ACTIVATIONS = {"relu": "ReLU", "tanh": "Tanh"}


def _sbx_rebuild_fields(model: Any) -> dict[str, Any]:
    """An SBX policy's spec fields: its actor's shape, as data, and its parameter count
    (the actor's parameters come first in ``final_params.npy``)."""
    import jax

    activation = getattr(model.policy_kwargs.get("activation_fn"), "__name__", None)
    actor = jax.tree_util.tree_leaves(model.policy.actor_state.params)
    try:
        if activation not in _SBX_ACTIVATIONS:
            raise ValueError(f"activation_fn {activation!r} is not one of relu, tanh")
        return {
            "policy_kwargs": {
                "net_arch": _net_arch(model.policy_kwargs.get("net_arch")),
                "activation_fn": _SBX_ACTIVATIONS[activation],
            },
            "spaces": {
                "observation": space_data(model.observation_space),
                "action": space_data(model.action_space),
            },
            "actor_params": int(sum(np.size(leaf) for leaf in actor)),
        }
    except ValueError as error:
        return {"policy_kwargs": None, "spaces": None, "not_rebuildable": str(error)}


def _save_sb3(algorithm: Any, model: Any, n_params: int, folder: Path) -> list[str]:
    from stable_baselines3.common.vec_env import VecNormalize

    model.save(folder / SB3_MODEL)  # an export for PPO.load; the harness never reads it
    names = [SB3_MODEL]
    vec_env = getattr(algorithm, "vec_env", None)
    normalized = isinstance(vec_env, VecNormalize)
    stats = None
    if isinstance(vec_env, VecNormalize):
        vec_env.save(str(folder / VEC_NORMALIZE))  # the zoo's export, never read back
        names.append(VEC_NORMALIZE)
        stats = _vec_normalize_stats(vec_env)
        if stats is not None:
            (folder / VEC_NORMALIZE_STATS).write_text(json.dumps(stats, indent=2))
            names.append(VEC_NORMALIZE_STATS)
    space = model.observation_space
    policy_class = type(model.policy).__name__
    sbx = type(model.policy).__module__.startswith("sbx.")
    if sbx:
        policy_class = f"sbx.{policy_class}"  # SBX's SACPolicy is JAX's, not SB3's
    spec = {
        "format": SB3_FORMAT,
        "sb3_class": _sb3_class_name(model),
        "policy": policy_class,
        "net_arch": model.policy_kwargs.get("net_arch"),
        "activation": getattr(model.policy_kwargs.get("activation_fn"), "__name__", None),
        "obs_dim": int(np.prod(space.shape)),
        "action_space": repr(model.action_space),
        "num_params": int(n_params),
        "model": SB3_MODEL,
        "vec_normalize": VEC_NORMALIZE if normalized else None,
        "vec_normalize_stats": VEC_NORMALIZE_STATS if stats is not None else None,
        "final_params": (
            "the actor's, the critics' and their targets' parameters, in JAX's tree order"
            if policy_class.startswith("sbx.")
            else "every parameter of model.policy.parameters(), in order, flattened"
        ),
        **(_sbx_rebuild_fields(model) if sbx else _rebuild_fields(model)),
    }
    if policy_class not in POLICY_CLASSES and policy_class not in SBX_POLICIES:
        spec["not_rebuildable"] = f"policy class {policy_class} is not one the reader builds"
    (folder / rundir.POLICY_SPEC).write_text(json.dumps(spec, indent=2))
    return [*names, rundir.POLICY_SPEC]


# -- reading ------------------------------------------------------------------------------

#: ``act(observation, deterministic) -> action`` and ``reset()`` of a stored policy.
Act = Callable[[np.ndarray, bool], Any]
Reset = Callable[[], None]
#: The spec fields a policy stored before they were recorded lacks (``policy_kwargs``,
#: ``spaces``), derived from the run's config (:func:`harness.replay.load_policy` gives it).
Legacy = Callable[[], dict[str, Any]]


def read_json(path: Path) -> Any:
    """A JSON file of a stored policy, read as the run's other JSON files are
    (:func:`harness.rundir.read_json`: a regular file within ``HARNESS_JSON_MAX_BYTES``,
    nesting past the parser's stack refused); :class:`PolicyLoadError`, one line naming
    the file, when it cannot be read."""
    try:
        return rundir.read_json(path)
    except rundir.MissingRunFile:
        raise PolicyLoadError(f"{path} is missing") from None
    except rundir.UnreadableRun as error:
        message = str(error)  # names the file by its name: say which run's it is
        if message.startswith(path.name):
            message = f"{path}{message.removeprefix(path.name)}"
        else:
            message = f"{path}: {message}"
        raise PolicyLoadError(message.splitlines()[0]) from None


def read_npy(path: Path, size: int | None = None) -> np.ndarray:
    """A flat numeric ``.npy`` array, its header checked before any array is allocated.

    ``size``: the number of values it must hold (None: any). The header's dtype must be a
    plain number (no objects: ``allow_pickle=False``) and the file must hold every byte
    the header's shape promises, so a forged header cannot make this allocate more than
    the file's own size. :class:`PolicyLoadError` names the file otherwise.
    """
    fmt = np.lib.format
    try:
        with rundir.open_regular(path) as stream:  # no FIFO, no link to a device
            version = fmt.read_magic(stream)
            if version == (1, 0):
                shape, _fortran, dtype = fmt.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, _fortran, dtype = fmt.read_array_header_2_0(stream)
            else:
                raise ValueError(f"format version {version} is not 1.0 or 2.0")
            if dtype.kind not in "biuf" or dtype.hasobject:
                raise ValueError(f"dtype {dtype} is not a plain number")
            count = math.prod(shape)
            if size is not None and (count != size or len(shape) != 1):
                raise ValueError(f"shape {shape} is not ({size},) as the policy's spec says")
            available = os.fstat(stream.fileno()).st_size - stream.tell()
            if count * dtype.itemsize > available:
                raise ValueError(
                    f"truncated: shape {shape} needs {count * dtype.itemsize} bytes, "
                    f"the file holds {available}"
                )
            stream.seek(0)
            array = fmt.read_array(stream, allow_pickle=False)
    except (FileNotFoundError, rundir.MissingRunFile):
        raise PolicyLoadError(f"{path} is missing") from None
    except (OSError, ValueError, TypeError, EOFError) as error:
        raise PolicyLoadError(f"{path} cannot be read: {error}".splitlines()[0]) from None
    return np.asarray(array).ravel()


def has_policy(folder: Path) -> bool:
    """Whether ``folder`` holds a stored policy (either format): a spec and its parameters."""
    try:
        read_json(folder / rundir.POLICY_SPEC)
    except PolicyLoadError:
        return False
    return (folder / rundir.FINAL_PARAMS).is_file()


def _es_policy(folder: Path) -> tuple[Act, Reset]:
    from envs.policies import PolicySpec, build_policy

    try:
        spec = PolicySpec.from_dict(read_json(folder / rundir.POLICY_SPEC))
    except (TypeError, ValueError) as error:
        raise PolicyLoadError(f"{folder / rundir.POLICY_SPEC}: {error}"[:300]) from None
    _check_param_count(folder, spec.num_params)
    params = read_npy(folder / rundir.FINAL_PARAMS, spec.num_params)
    if (folder / OBS_NORM).exists():
        stats = read_json(folder / OBS_NORM)
        where = folder / OBS_NORM
    else:  # runs stored before obs_norm.json: the statistics were in summary.json
        where = folder / rundir.SUMMARY
        summary = read_json(where) if where.exists() else {}
        has = (
            isinstance(summary, dict)
            and summary.get("obs_mean") is not None
            and summary.get("obs_std") is not None
        )
        stats = {"mean": summary["obs_mean"], "std": summary["obs_std"]} if has else None
    try:
        if stats is not None and not isinstance(stats, dict):
            raise TypeError(f"expected an object with mean and std or null, got {stats!r}")
        mean = None if stats is None else np.asarray(stats["mean"], dtype=np.float32)
        std = None if stats is None else np.asarray(stats["std"], dtype=np.float32)
        policy = build_policy(spec)
        policy.set_params(params, mean, std)
    except (KeyError, TypeError, ValueError) as error:  # another size, non-finite values
        message = f"{where} does not fit the policy: {error}".splitlines()[0]
        raise PolicyLoadError(message[:300]) from None

    def act(obs: np.ndarray, deterministic: bool) -> Any:
        return policy.act(obs)  # an ES policy has no exploration noise of its own

    return act, policy.reset


def _normalizer(folder: Path, spec: Mapping[str, Any], space: Any) -> Callable[[Any], Any] | None:
    """``VecNormalize.normalize_obs`` from the statistics of ``vec_normalize.json``.

    A run stored before that file existed kept them only in ``vecnormalize.pkl``, a pickle
    the reader does not open: :class:`PolicyLoadError` says so.
    """
    if not spec.get("vec_normalize_stats"):
        if spec.get("vec_normalize"):
            raise PolicyLoadError(
                f"run {folder}: its observations were normalised by VecNormalize, whose "
                f"statistics it stored only as the pickle {VEC_NORMALIZE} (no "
                f"{VEC_NORMALIZE_STATS}); pickles of a run are not read"
            )
        return None
    path = folder / VEC_NORMALIZE_STATS
    data = read_json(path)
    try:
        rms = data["obs_rms"]
        mean = np.asarray(rms["mean"], dtype=np.float64)
        var = np.asarray(rms["var"], dtype=np.float64)
        clip, epsilon = float(data["clip_obs"]), float(data["epsilon"])
        norm_obs = data.get("norm_obs", True)
        if mean.shape != space.shape or var.shape != space.shape:
            raise ValueError(f"statistics of shape {mean.shape}, observations {space.shape}")
        if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
            raise ValueError("statistics are not finite or a variance is negative")
        if not isinstance(norm_obs, bool):
            raise ValueError(f"norm_obs must be true or false, got {norm_obs!r}")
    except (KeyError, TypeError, ValueError) as error:
        raise PolicyLoadError(f"{path} does not fit the policy: {error}".splitlines()[0]) from None
    if not norm_obs:
        return None
    scale = np.sqrt(var + epsilon)

    def normalize(obs: Any) -> Any:
        # VecNormalize.normalize_obs of a Box observation, step for step
        return np.clip((obs - mean) / scale, -clip, clip).astype(np.float32)

    return normalize


def _check_param_count(folder: Path, count: int) -> None:
    """Refuse a spec of more than :data:`MAX_POLICY_PARAMS` parameters before any is read."""
    if count > MAX_POLICY_PARAMS:
        raise PolicyLoadError(
            f"{folder / rundir.POLICY_SPEC}: {count:,} parameters, over the "
            f"{MAX_POLICY_PARAMS:,} a stored policy may have"
        )


def _flat_size(space: Any) -> int:
    """How many inputs (observation) or outputs (action) a space gives a network, at most."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return sum(int(n) for n in np.asarray(space.nvec).ravel())  # one-hot per dimension
    return math.prod(space.shape)


def _param_bound(name: str, kwargs: Mapping[str, Any], observation: Any, action: Any) -> int:
    """An upper bound on the parameters of any SB3 policy built from ``kwargs`` on these
    spaces (PPO, A2C, SAC, TD3, TQC, RecurrentPPO): every network an MLP as wide as the
    widest layer asked for (or SB3's widest default, 400), as deep as the deepest, on the
    largest input, with the largest output (TQC's quantiles included), for the actor, the
    critics and their target copies; plus the LSTMs of a recurrent policy. Computed from the
    checked arguments, so a planted spec cannot make the reader allocate its network first.
    """
    arch = kwargs.get("net_arch")
    lists = list(arch.values()) if isinstance(arch, Mapping) else [arch or []]
    recurrent = name == "RecurrentActorCriticPolicy"
    hidden = int(kwargs.get("lstm_hidden_size") or 256) if recurrent else 0
    widths = [w for sizes in lists for w in sizes]
    width = max([hidden, *widths] if widths and arch is not None else [400, hidden])
    depth = max([2, *(len(sizes) for sizes in lists)])
    inputs = max(_flat_size(observation), hidden)
    quantiles = int(kwargs.get("n_quantiles") or 25) if name == "TQCPolicy" else 1
    outputs = _flat_size(action) * quantiles + 1
    # actor and critic; or actor (and its target) with the critics and their targets
    critics = int(kwargs.get("n_critics") or 2)
    networks = 2 if name.endswith("ActorCriticPolicy") else 2 + 2 * critics
    mlp = (inputs + 1) * width + depth * (width + 1) * width + (width + 1) * outputs
    mlp += width * _flat_size(action)  # gSDE's exploration matrix, log-stds
    layers = int(kwargs.get("n_lstm_layers") or 1)
    lstm = 2 * layers * 4 * hidden * (inputs + hidden + 2) if recurrent else 0
    return networks * mlp + lstm


def _build_sb3_policy(folder: Path, spec: Mapping[str, Any], params: np.ndarray) -> Any:
    """The SB3 policy the spec describes, from the closed lists, holding ``params``."""
    import importlib

    import torch
    from torch.nn.utils import vector_to_parameters

    name = spec.get("policy")
    if name not in POLICY_CLASSES:
        raise PolicyLoadError(
            f"{folder / rundir.POLICY_SPEC}: policy {name!r} is not one of "
            f"{', '.join(POLICY_CLASSES)}"
        )
    module, attribute = POLICY_CLASSES[str(name)]
    policy_class = getattr(importlib.import_module(module), attribute)
    try:
        kwargs = _policy_kwargs(spec.get("policy_kwargs"))
        spaces = spec.get("spaces")
        if not isinstance(spaces, Mapping):
            raise ValueError(f"spaces must be an object, got {spaces!r}")
        observation_space = _space(spaces.get("observation"))
        action_space = _space(spaces.get("action"))
        if "ortho_init" in kwargs:
            kwargs["ortho_init"] = False  # initial values only: the parameters are loaded next
        most = _param_bound(str(name), kwargs, observation_space, action_space)
        if most > MAX_POLICY_PARAMS:  # refused before a network of that size is allocated
            raise ValueError(
                f"the policy it describes may hold up to {most:,} parameters, over the "
                f"{MAX_POLICY_PARAMS:,} a stored policy may have"
            )
        policy = policy_class(observation_space, action_space, lambda _: 0.0, **kwargs)
    except (TypeError, ValueError, KeyError, AssertionError, RuntimeError) as error:
        message = f"{folder / rundir.POLICY_SPEC}: cannot build {name}: {error}"
        raise PolicyLoadError(message.splitlines()[0]) from None
    count = sum(p.numel() for p in policy.parameters())
    if count != params.size:
        raise PolicyLoadError(
            f"{folder}: {rundir.FINAL_PARAMS} holds {params.size} numbers, the {name} that "
            f"{rundir.POLICY_SPEC} describes has {count}"
        )
    with torch.no_grad():
        vector_to_parameters(torch.from_numpy(params.astype(np.float32)), policy.parameters())
    policy.set_training_mode(False)  # once: predict() walks every module to set it per call
    return policy


def _sb3_policy(folder: Path, spec: dict[str, Any], legacy: Legacy | None) -> tuple[Act, Reset]:
    import torch
    from gymnasium.spaces import Box

    torch.set_num_threads(1)  # as the run evaluated: the same kernels, the same actions
    if spec.get("not_rebuildable"):
        raise PolicyLoadError(f"run {folder}: {spec['not_rebuildable']}".splitlines()[0])
    if spec.get("policy_kwargs") is None or spec.get("spaces") is None:
        if legacy is None:
            raise PolicyLoadError(
                f"run {folder}: {rundir.POLICY_SPEC} records no policy_kwargs or spaces "
                f"(stored by an earlier version) and there is no {rundir.CONFIG} to derive them"
            )
        derived = legacy()
        kwargs = derived.get("policy_kwargs") or {}
        for field, key in (("net_arch", "net_arch"), ("activation", "activation_fn")):
            if spec.get(field) is not None and spec.get(field) != kwargs.get(key):
                raise PolicyLoadError(
                    f"run {folder}: {rundir.POLICY_SPEC} has {field} {spec.get(field)!r}, its "
                    f"{rundir.CONFIG} gives {kwargs.get(key)!r}"
                )
        spec = {**spec, **derived}
    num_params = spec.get("num_params")
    if isinstance(num_params, bool) or not isinstance(num_params, int) or num_params < 1:
        raise PolicyLoadError(f"{folder / rundir.POLICY_SPEC}: num_params is {num_params!r}")
    _check_param_count(folder, num_params)
    params = read_npy(folder / rundir.FINAL_PARAMS, num_params)
    if spec.get("policy") in SBX_POLICIES:
        return _sbx_policy(folder, spec, params)
    policy = _build_sb3_policy(folder, spec, params)
    normalizer = _normalizer(folder, spec, policy.observation_space)
    space = policy.action_space

    if spec.get("policy") == "RecurrentActorCriticPolicy":
        # The LSTM state goes through the episode, as the run's evaluation carried it.
        memory: dict[str, Any] = {"state": None, "start": True}

        def act_recurrent(obs: np.ndarray, deterministic: bool) -> Any:
            seen = normalizer(obs) if normalizer is not None else obs
            actions, memory["state"] = policy.predict(
                seen,
                state=memory["state"],
                episode_start=np.array([memory["start"]]),
                deterministic=deterministic,
            )
            memory["start"] = False
            return actions

        def reset() -> None:
            memory.update(state=None, start=True)

        return act_recurrent, reset

    def act(obs: np.ndarray, deterministic: bool) -> Any:
        """``model.predict`` for one observation, its steps in its order, less the mode switch."""
        seen = normalizer(obs) if normalizer is not None else obs
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


def _sbx_policy(folder: Path, spec: Mapping[str, Any], params: np.ndarray) -> tuple[Act, Reset]:
    """An SBX SAC/TQC actor (flax's ``SquashedGaussianActor``) as a NumPy forward pass.

    Its layers are flax ``Dense_0`` .. ``Dense_{k+1}`` (the hidden layers, then the mean and
    the log-std heads), flattened by JAX in the order of their sorted names, each its bias
    then its ``(inputs, outputs)`` kernel. The deterministic action is ``tanh(mean)``, the
    stochastic one ``tanh(mean + std * noise)`` (noise from NumPy's global generator), both
    scaled to the Box as SBX's ``predict`` does. Float32 as JAX computes, so the actions
    agree with the run's to float32 rounding, not bit for bit.
    """
    try:
        data = spec.get("policy_kwargs")
        spaces = spec.get("spaces")
        if not isinstance(data, Mapping) or not isinstance(spaces, Mapping):
            raise ValueError("policy_kwargs and spaces must be objects")
        net_arch = _net_arch(data.get("net_arch"))
        if not isinstance(net_arch, list):
            raise ValueError(f"net_arch must be a list of sizes, got {net_arch!r}")
        activation = data.get("activation_fn")
        functions: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "ReLU": lambda x: np.maximum(x, 0),
            "Tanh": np.tanh,
        }
        if activation not in functions:
            raise ValueError(f"activation_fn must be ReLU or Tanh, got {activation!r}")
        observation, action = _space(spaces.get("observation")), _space(spaces.get("action"))
        if not (hasattr(action, "low") and hasattr(observation, "low")):
            raise ValueError("SBX's actors take and give Box spaces")
        inputs, outputs = _flat_size(observation), _flat_size(action)
        sizes = [(a, b) for a, b in zip([inputs, *net_arch], net_arch, strict=False)]
        last = net_arch[-1] if net_arch else inputs
        sizes += [(last, outputs), (last, outputs)]  # the mean and log-std heads
        layers, at = [], 0
        for n_in, n_out in sizes:
            bias = params[at : at + n_out]
            kernel = params[at + n_out : at + n_out + n_in * n_out].reshape(n_in, n_out)
            layers.append((kernel.astype(np.float32), bias.astype(np.float32)))
            at += n_out + n_in * n_out
        if at > params.size or spec.get("actor_params") != at:
            raise ValueError(
                f"its actor has {at} parameters, the spec says {spec.get('actor_params')!r} "
                f"of the {params.size} stored"
            )
    except (TypeError, ValueError) as error:
        message = f"{folder / rundir.POLICY_SPEC}: cannot build {spec.get('policy')}: {error}"
        raise PolicyLoadError(message.splitlines()[0]) from None
    hidden, (mean_head, log_std_head) = layers[:-2], layers[-2:]
    forward = functions[str(activation)]
    normalizer = _normalizer(folder, spec, observation)
    low, high = action.low.astype(np.float32), action.high.astype(np.float32)

    def act(obs: np.ndarray, deterministic: bool) -> Any:
        seen = normalizer(obs) if normalizer is not None else obs
        batch = np.asarray(seen, dtype=np.float32).reshape(-1, inputs)
        for kernel, bias in hidden:
            batch = forward(batch @ kernel + bias)
        mean = batch @ mean_head[0] + mean_head[1]
        if not deterministic:
            log_std = np.clip(batch @ log_std_head[0] + log_std_head[1], -20.0, 2.0)
            mean = mean + np.exp(log_std) * np.random.standard_normal(mean.shape)
        scaled = low + 0.5 * (np.tanh(mean) + 1.0) * (high - low)
        single = np.asarray(obs).shape == observation.shape
        return scaled.reshape(action.shape) if single else scaled

    return act, lambda: None


def load_stored(folder: Path, legacy: Legacy | None = None) -> tuple[Act, Reset]:
    """The policy stored in ``folder`` (a run directory or an export) as ``(act, reset)``.

    ``legacy``: gives the spec fields an SB3 policy stored by an earlier version lacks
    (from the run's config); without it such a policy is a :class:`PolicyLoadError`.
    """
    spec = read_json(folder / rundir.POLICY_SPEC)
    if isinstance(spec, dict) and spec.get("format") == SB3_FORMAT:
        return _sb3_policy(folder, spec, legacy)
    return _es_policy(folder)
