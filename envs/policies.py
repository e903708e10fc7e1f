"""Policies over a flat float32 parameter vector, in pure numpy.

A :class:`PolicySpec` describes the network (linear, MLP or LSTM) and the action space; a
:class:`Policy` built from it maps a flat parameter vector to actions. The forward pass is the
rollout hot path, so it is written with preallocated buffers and in-place ufuncs: parameters
are unpacked once per :meth:`Policy.set_params`, never per step.

Parameter layout (the contract shared with optimizers, checkpoints and the noise table):

* linear / MLP: for each layer in order, ``W`` of shape ``(out, in)`` row-major, then ``b``
  of shape ``(out,)`` -- the order of ``torch.nn.Sequential(Linear, act, ..., Linear)``.
* LSTM: for each LSTM layer, ``weight_ih (4H, in)``, ``weight_hh (4H, H)``, ``bias_ih (4H)``,
  ``bias_hh (4H)`` with gate order i, f, g, o -- exactly ``torch.nn.LSTM`` -- then the output
  ``Linear(H, out)`` as ``W`` then ``b``.

Observations are normalised ``(obs - mean) / std`` and clipped to ``±obs_clip``. The network
output becomes an action: ``argmax`` for discrete spaces; for Box spaces ``tanh`` scaled into
``[low, high]``, optionally rounded to one of ``discretize`` evenly spaced levels.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np

__all__ = [
    "Action",
    "FeedForwardPolicy",
    "LSTMPolicy",
    "Policy",
    "PolicySpec",
    "build_policy",
    "check_hidden_sizes",
    "policy_spec_for",
]

PolicyKind = Literal["linear", "mlp", "lstm"]
Activation = Literal["tanh", "relu"]
ActionKind = Literal["discrete", "box"]
#: ``normc``: OpenAI-ES (normalised-column weights, a small output layer, zero biases);
#: ``torch``: PyTorch's ``nn.Linear`` default (weights and biases uniform(+-1/sqrt(fan_in))).
InitScheme = Literal["normc", "torch"]
#: What :meth:`Policy.act` returns: an ``int`` for discrete spaces, a float32 array for Box.
Action = int | np.ndarray
#: :meth:`Policy.actor`'s step function: ``act(obs, noise=None)`` with the policy's buffers bound.
Actor = Callable[..., Action]
#: Largest networks a spec may describe: far beyond any ES policy (the GoodAI Ant MLP is
#: 64-64), they make a typo or a planted record (30,000 hidden layers) a one-line refusal
#: instead of minutes spent building the network.
MAX_HIDDEN_LAYERS = 16
MAX_HIDDEN_UNITS = 4096
#: Most levels ``discretize`` may round a Box action to.
MAX_DISCRETIZE = 65536

_F32 = np.float32

# Ufuncs bound once: module globals are cheaper to look up than ``np.<name>`` in the hot path.
_add = np.add
_subtract = np.subtract
_multiply = np.multiply
_divide = np.divide
_minimum = np.minimum
_maximum = np.maximum
_matmul = np.matmul
# np.dot of a C-contiguous float32 matrix and vector makes the same OpenBLAS sgemv call as
# np.matmul (bitwise the same outputs) at about half of matmul's per-call cost
_dot = np.dot
# the ufunc behind np.clip, without np.clip's Python wrapper: one call in place of np.minimum
# then np.maximum, with the same bits for bounds lo <= hi (NaN passes through both)
_clip: Any = importlib.import_module("numpy._core.umath").clip
_tanh = np.tanh
_rint = np.rint
_copyto = np.copyto


def check_hidden_sizes(sizes: Sequence[Any]) -> None:
    """Refuse (ValueError, one line) hidden sizes that are not 1 to :data:`MAX_HIDDEN_LAYERS`
    integers from 1 to :data:`MAX_HIDDEN_UNITS` (an empty list: a linear policy)."""
    if len(sizes) > MAX_HIDDEN_LAYERS:
        raise ValueError(
            f"hidden sizes must be at most {MAX_HIDDEN_LAYERS} layers, got {len(sizes)}"
        )
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"hidden sizes must be positive integers, got {list(sizes)!r}")
        if size > MAX_HIDDEN_UNITS:
            raise ValueError(
                f"hidden sizes must be at most {MAX_HIDDEN_UNITS} units, got {int(size)}"
            )


def _as_int_tuple(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _as_float_tuple(values: Sequence[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class PolicySpec:
    """Everything needed to build a policy; JSON-serialisable via :meth:`to_dict`.

    ``action_dim`` is the number of discrete actions for ``action_kind="discrete"`` and the
    Box dimension otherwise. ``discretize=N`` (N > 1) rounds each Box output to one of N evenly
    spaced levels in ``[low, high]`` without changing the parameter count.
    """

    kind: PolicyKind
    hidden_sizes: tuple[int, ...]
    activation: Activation
    obs_dim: int
    action_kind: ActionKind
    action_dim: int
    action_low: tuple[float, ...] = field(default=())
    action_high: tuple[float, ...] = field(default=())
    discretize: int = 0
    obs_clip: float = 5.0
    init_output_scale: float = 0.01
    init: InitScheme = "normc"

    def __post_init__(self) -> None:
        """Normalise sequences to tuples and validate every field."""
        object.__setattr__(self, "hidden_sizes", _as_int_tuple(self.hidden_sizes))
        object.__setattr__(self, "action_low", _as_float_tuple(self.action_low))
        object.__setattr__(self, "action_high", _as_float_tuple(self.action_high))
        if self.kind not in get_args(PolicyKind):
            raise ValueError(
                f"policy kind must be one of {get_args(PolicyKind)}, got {self.kind!r}"
            )
        if self.activation not in get_args(Activation):
            raise ValueError(
                f"activation must be one of {get_args(Activation)}, got {self.activation!r}"
            )
        if self.action_kind not in get_args(ActionKind):
            raise ValueError(
                f"action_kind must be one of {get_args(ActionKind)}, got {self.action_kind!r}"
            )
        if self.kind == "linear" and self.hidden_sizes:
            raise ValueError(f"a linear policy has no hidden layers, got {self.hidden_sizes}")
        if self.kind in ("mlp", "lstm") and not self.hidden_sizes:
            raise ValueError(f"a {self.kind} policy needs at least one hidden size")
        check_hidden_sizes(self.hidden_sizes)
        if self.obs_dim <= 0 or self.action_dim <= 0:
            raise ValueError(
                f"obs_dim and action_dim must be positive: {self.obs_dim}, {self.action_dim}"
            )
        if self.action_kind == "box":
            if len(self.action_low) != self.action_dim or len(self.action_high) != self.action_dim:
                raise ValueError(
                    f"action_low/action_high need {self.action_dim} entries, got "
                    f"{len(self.action_low)} and {len(self.action_high)}"
                )
            bounds = self.action_low + self.action_high
            if not all(math.isfinite(v) for v in bounds):
                raise ValueError("Box action bounds must be finite")
            if any(lo >= hi for lo, hi in zip(self.action_low, self.action_high, strict=True)):
                raise ValueError("each action_low must be below its action_high")
            if self.discretize == 1 or self.discretize < 0:
                raise ValueError(f"discretize must be 0 (continuous) or > 1, got {self.discretize}")
            if self.discretize > MAX_DISCRETIZE:
                raise ValueError(
                    f"discretize must be at most {MAX_DISCRETIZE}, got {self.discretize}"
                )
        else:
            if self.action_low or self.action_high:
                raise ValueError("discrete action spaces take no action bounds")
            if self.discretize:
                raise ValueError("discretize applies to Box action spaces only")
        if not self.obs_clip > 0:
            raise ValueError(f"obs_clip must be positive, got {self.obs_clip}")
        if self.init not in get_args(InitScheme):
            raise ValueError(
                f"policy init must be one of {get_args(InitScheme)}, got {self.init!r}"
            )

    @property
    def out_dim(self) -> int:
        """Size of the network output (number of actions, or the Box dimension)."""
        return self.action_dim

    def param_layout(self) -> list[tuple[str, tuple[int, ...]]]:
        """Names and shapes of the parameter blocks, in flat-vector order."""
        layout: list[tuple[str, tuple[int, ...]]] = []
        if self.kind == "lstm":
            in_size = self.obs_dim
            for k, h in enumerate(self.hidden_sizes):
                layout += [
                    (f"lstm{k}.weight_ih", (4 * h, in_size)),
                    (f"lstm{k}.weight_hh", (4 * h, h)),
                    (f"lstm{k}.bias_ih", (4 * h,)),
                    (f"lstm{k}.bias_hh", (4 * h,)),
                ]
                in_size = h
            layout += [("out.weight", (self.out_dim, in_size)), ("out.bias", (self.out_dim,))]
            return layout
        sizes = [self.obs_dim, *self.hidden_sizes, self.out_dim]
        for k, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            name = "out" if k == len(sizes) - 2 else f"l{k}"
            layout += [(f"{name}.weight", (n_out, n_in)), (f"{name}.bias", (n_out,))]
        return layout

    @property
    def num_params(self) -> int:
        """Length of the flat parameter vector."""
        return sum(math.prod(shape) for _, shape in self.param_layout())

    def describe(self) -> str:
        """One line such as ``mlp 28-64-64-8 tanh, box(8), 6536 params``."""
        sizes = "-".join(str(s) for s in (self.obs_dim, *self.hidden_sizes, self.out_dim))
        act = "" if self.kind == "linear" else f" {self.activation}"
        if self.kind == "lstm":
            act = ""
        disc = f" discretize={self.discretize}" if self.discretize else ""
        disc += f" init={self.init}" if self.init != "normc" else ""
        return (
            f"{self.kind} {sizes}{act}, {self.action_kind}({self.action_dim}){disc}, "
            f"{self.num_params} params"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (lists for tuples); inverse of :meth:`from_dict`."""
        return {
            "kind": self.kind,
            "hidden_sizes": list(self.hidden_sizes),
            "activation": self.activation,
            "obs_dim": self.obs_dim,
            "action_kind": self.action_kind,
            "action_dim": self.action_dim,
            "action_low": list(self.action_low),
            "action_high": list(self.action_high),
            "discretize": self.discretize,
            "obs_clip": self.obs_clip,
            "init_output_scale": self.init_output_scale,
            "init": self.init,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicySpec:
        """Rebuild a spec from :meth:`to_dict` output (unknown keys are an error)."""
        allowed = set(cls.__dataclass_fields__)
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown PolicySpec fields: {sorted(unknown)}")
        kwargs = dict(data)
        for key in ("hidden_sizes", "action_low", "action_high"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


def policy_spec_for(
    env: gym.Env[Any, Any],
    kind: PolicyKind,
    hidden_sizes: Sequence[int] = (64, 64),
    activation: Activation = "tanh",
    discretize: int = 0,
    *,
    obs_clip: float = 5.0,
    init_output_scale: float = 0.01,
    init: InitScheme = "normc",
) -> PolicySpec:
    """Build a :class:`PolicySpec` matching ``env``'s observation and action spaces.

    ``hidden_sizes`` is ignored for ``kind="linear"``; for ``"lstm"`` each entry is one LSTM
    layer (e.g. ``(16,)``). Raises ValueError for spaces a flat policy cannot handle: the
    observation must be a 1-D Box, the action a Discrete (starting at 0) or a 1-D Box with
    finite bounds.
    """
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    obs_space = env.observation_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise ValueError(f"policies need a 1-D Box observation space; {env_id} has {obs_space}")
    act_space = env.action_space
    if isinstance(act_space, gym.spaces.Discrete):
        if int(act_space.start) != 0:
            raise ValueError(f"Discrete action spaces must start at 0; {env_id} has {act_space}")
        action_kind: ActionKind = "discrete"
        action_dim = int(act_space.n)
        low: tuple[float, ...] = ()
        high: tuple[float, ...] = ()
    elif isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        if not (np.isfinite(act_space.low).all() and np.isfinite(act_space.high).all()):
            raise ValueError(f"Box action bounds must be finite; {env_id} has {act_space}")
        action_kind = "box"
        action_dim = int(act_space.shape[0])
        low = _as_float_tuple(act_space.low.tolist())
        high = _as_float_tuple(act_space.high.tolist())
    else:
        raise ValueError(
            f"policies need a Discrete or 1-D Box action space; {env_id} has {act_space}"
        )
    return PolicySpec(
        kind=kind,
        hidden_sizes=() if kind == "linear" else tuple(hidden_sizes),
        activation=activation,
        obs_dim=int(obs_space.shape[0]),
        action_kind=action_kind,
        action_dim=action_dim,
        action_low=low,
        action_high=high,
        discretize=discretize,
        obs_clip=obs_clip,
        init_output_scale=init_output_scale,
        init=init,
    )


def _normc(rng: np.random.Generator, shape: tuple[int, int], std: float) -> np.ndarray:
    """OpenAI-ES ``normc_initializer`` for a weight of shape ``(out, in)``.

    Standard normal entries, each output unit's incoming weight vector scaled to norm ``std``
    (OpenAI's TF layout is ``(in, out)`` and normalises columns; here that is rows).
    """
    w = rng.standard_normal(shape)
    w *= std / np.sqrt(np.square(w).sum(axis=1, keepdims=True))
    return w


class Policy:
    """Base class: parameter handling, observation normalisation and the action head.

    Subclasses implement :meth:`forward` (raw network output) over preallocated buffers.
    Not thread-safe: one policy object per worker.
    """

    def __init__(self, spec: PolicySpec) -> None:
        """Allocate buffers for ``spec``; parameters are zero until :meth:`set_params`."""
        self.spec = spec
        self.num_params: int = spec.num_params
        self._layout = spec.param_layout()
        n = spec.obs_dim
        self._obs_mean = np.zeros(n, dtype=_F32)
        self._obs_std = np.ones(n, dtype=_F32)
        self._normalize = False
        #: the forward pass bound to this policy's buffers and normalisation (_forward_fn)
        self._bound_forward: Callable[[np.ndarray], np.ndarray] | None = None
        self._clip_hi = np.full(n, spec.obs_clip, dtype=_F32)
        self._clip_lo = np.full(n, -spec.obs_clip, dtype=_F32)
        self._discrete = spec.action_kind == "discrete"
        if not self._discrete:
            low = np.asarray(spec.action_low, dtype=_F32)
            high = np.asarray(spec.action_high, dtype=_F32)
            self._low = low
            self._high = high
            self._unit_bounds = bool(np.all(low == -1.0) and np.all(high == 1.0))
            self._mid = ((high + low) / 2).astype(_F32)
            self._half = ((high - low) / 2).astype(_F32)
            self._disc = spec.discretize
            if self._disc:
                step = (high - low) / (self._disc - 1)
                self._level_step = step.astype(_F32)
                self._inv_level_step = (1.0 / step).astype(_F32)

    # -- parameters -------------------------------------------------------------------------

    def split_params(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Views of ``flat`` by parameter name, shaped as in :meth:`PolicySpec.param_layout`."""
        flat = np.asarray(flat)
        if flat.shape != (self.num_params,):
            raise ValueError(f"expected {self.num_params} parameters, got shape {flat.shape}")
        out: dict[str, np.ndarray] = {}
        offset = 0
        for name, shape in self._layout:
            size = math.prod(shape)
            out[name] = flat[offset : offset + size].reshape(shape)
            offset += size
        return out

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """Initial flat float32 parameters drawn from ``rng`` (see subclasses for the scheme)."""
        raise NotImplementedError

    def set_params(
        self,
        flat: np.ndarray,
        obs_mean: np.ndarray | None = None,
        obs_std: np.ndarray | None = None,
    ) -> None:
        """Load a flat parameter vector and observation statistics (once per evaluation).

        The values are copied into the policy's own float32 buffers, so the caller may reuse
        ``flat``. ``obs_mean``/``obs_std`` of None mean no normalisation (only clipping).
        Also resets recurrent state.
        """
        arr = np.asarray(flat, dtype=_F32)
        if arr.shape != (self.num_params,):
            raise ValueError(f"expected {self.num_params} parameters, got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("parameter vector contains NaN or inf")
        self._load(self.split_params(arr))
        self._set_obs_stats(obs_mean, obs_std)
        self.reset()

    def _set_obs_stats(self, obs_mean: np.ndarray | None, obs_std: np.ndarray | None) -> None:
        self._bound_forward = None  # the normalisation it was bound to may change
        if (obs_mean is None) != (obs_std is None):
            raise ValueError("give both obs_mean and obs_std, or neither")
        if obs_mean is None or obs_std is None:
            self._normalize = False
            self._obs_mean.fill(0.0)
            self._obs_std.fill(1.0)
            return
        mean = np.asarray(obs_mean, dtype=_F32)
        std = np.asarray(obs_std, dtype=_F32)
        n = self.spec.obs_dim
        if mean.shape != (n,) or std.shape != (n,):
            raise ValueError(
                f"obs_mean/obs_std must have shape ({n},), got {mean.shape} and {std.shape}"
            )
        if not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
            raise ValueError("obs_mean must be finite and obs_std finite and positive")
        self._obs_mean[...] = mean
        self._obs_std[...] = std
        self._normalize = True

    def _load(self, blocks: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    # -- running ----------------------------------------------------------------------------

    def reset(self) -> None:
        """Clear recurrent state at the start of an episode (no-op for feed-forward)."""

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """Raw network output for one observation (an internal buffer, valid until next call)."""
        raise NotImplementedError

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> Action:
        """Action for one observation.

        Discrete: ``int(argmax)``. Box: ``tanh`` of the output scaled into ``[low, high]``;
        ``noise`` (Box only), if given, is added to that continuous action and the result
        clipped to the bounds; then, with ``discretize``, rounded to the nearest level. Box
        actions are fresh float32 arrays the caller may keep.
        """
        return self._head(self.forward(obs), noise)

    def actor(self) -> Actor:
        """:meth:`act` as one function, for a loop that calls it every step: the same
        arithmetic in the same order (the same bits), with the network's buffers and this
        policy's settings bound once. Valid until the next :meth:`set_params`."""
        forward, head = self._forward_fn(), self._head
        if self._discrete or not self._unit_bounds or self._disc:
            return lambda obs, noise=None: head(forward(obs), noise)

        def act(obs: np.ndarray, noise: np.ndarray | None = None) -> Action:
            y = forward(obs)
            return _tanh(y) if noise is None else head(y, noise)

        return act

    def _forward_fn(self) -> Callable[[np.ndarray], np.ndarray]:
        """:meth:`forward` as a function of the observation alone, bound once per setting of
        the observation statistics (:meth:`_bind_forward`)."""
        if self._bound_forward is None:
            self._bound_forward = self._bind_forward()
        return self._bound_forward

    def _bind_forward(self) -> Callable[[np.ndarray], np.ndarray]:
        """The forward pass to bind (subclasses bind closures over their buffers)."""
        return self.forward

    def _head(self, y: np.ndarray, noise: np.ndarray | None) -> Action:
        """The action for the network's raw output ``y`` (see :meth:`act`)."""
        if self._discrete:
            return int(y.argmax())
        a: np.ndarray = _tanh(y)
        if not self._unit_bounds:
            _multiply(a, self._half, out=a)
            _add(a, self._mid, out=a)
        if noise is not None:
            _add(a, noise, out=a)
            _minimum(a, self._high, out=a)
            _maximum(a, self._low, out=a)
        if self._disc:
            _subtract(a, self._low, out=a)
            _multiply(a, self._inv_level_step, out=a)
            _rint(a, out=a)
            _multiply(a, self._level_step, out=a)
            _add(a, self._low, out=a)
            _minimum(a, self._high, out=a)
        return a


class FeedForwardPolicy(Policy):
    """Linear (no hidden layer) or MLP policy.

    Each layer's ``W`` and ``b`` are stored as one augmented ``(out, in + 1)`` matrix and every
    activation buffer carries a trailing 1, so a layer is one ``matmul`` plus one activation.
    """

    def __init__(self, spec: PolicySpec) -> None:
        """Allocate the augmented weight matrices and activation buffers."""
        super().__init__(spec)
        sizes = [spec.obs_dim, *spec.hidden_sizes, spec.out_dim]
        self._sizes = sizes
        self._bufs = [np.ones(s + 1, dtype=_F32) for s in sizes]
        self._views = [b[:-1] for b in self._bufs]
        self._x = self._views[0]
        self._mats = [
            np.zeros((n_out, n_in + 1), dtype=_F32) for n_in, n_out in itertools.pairwise(sizes)
        ]
        self._hidden = [
            (self._mats[k], self._bufs[k], self._views[k + 1]) for k in range(len(sizes) - 2)
        ]
        self._out_w = self._mats[-1]
        self._out_in = self._bufs[-2]
        self._y = self._views[-1]
        self._relu = spec.activation == "relu"
        self._zero = np.zeros((), dtype=_F32)

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """OpenAI-ES init: normc weights (std 1 hidden, ``init_output_scale`` output), zero bias.

        With ``init="torch"``, PyTorch's ``nn.Linear`` default instead (GoodAI's OptimES):
        weights and biases uniform in +-1/sqrt(fan_in). Its larger outputs let more of the
        first perturbations of a discretised policy cross a level
        (reports/benchmarks/goodai_ant_init_plateau.txt).
        """
        parts: list[np.ndarray] = []
        fan_in = 0  # of the layer being drawn: its weight block comes before its bias
        for name, shape in self._layout:
            if self.spec.init == "torch":
                fan_in = shape[1] if name.endswith(".weight") else fan_in
                bound = 1.0 / math.sqrt(fan_in)
                parts.append(rng.uniform(-bound, bound, size=math.prod(shape)))
            elif name.endswith(".bias"):
                parts.append(np.zeros(shape))
            else:
                n_out, n_in = shape
                std = self.spec.init_output_scale if name.startswith("out.") else 1.0
                parts.append(_normc(rng, (n_out, n_in), std).ravel())
        return np.concatenate([p.ravel() for p in parts]).astype(_F32)

    def _load(self, blocks: dict[str, np.ndarray]) -> None:
        names = [f"l{k}" for k in range(len(self._mats) - 1)] + ["out"]
        for mat, name in zip(self._mats, names, strict=True):
            mat[:, :-1] = blocks[f"{name}.weight"]
            mat[:, -1] = blocks[f"{name}.bias"]

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """Raw network output (before tanh/argmax) for one observation."""
        return self._forward_fn()(obs)

    def _bind_forward(self) -> Callable[[np.ndarray], np.ndarray]:
        """The forward pass as a closure over this policy's buffers and its current
        normalisation: no attribute lookups a step."""
        x, out_w, out_in, y = self._x, self._out_w, self._out_in, self._y
        mean, std, hi, lo = self._obs_mean, self._obs_std, self._clip_hi, self._clip_lo
        normalize, hidden = self._normalize, self._hidden
        activate: Any = _maximum if self._relu else _tanh
        arg = self._zero if self._relu else None

        def forward(obs: np.ndarray) -> np.ndarray:
            if normalize:
                _subtract(obs, mean, x)
                _divide(x, std, x)
            else:
                _copyto(x, obs, casting="same_kind")
            _clip(x, lo, hi, out=x)
            for w, inp, h in hidden:
                _dot(w, inp, h)
                if arg is None:
                    activate(h, out=h)
                else:
                    activate(h, arg, out=h)
            _dot(out_w, out_in, y)
            return y

        return forward


class LSTMPolicy(Policy):
    """One or more LSTM layers (``torch.nn.LSTM`` semantics) followed by a linear output.

    Per layer, ``[W_ih | W_hh | b_ih + b_hh]`` is one matrix applied to the buffer
    ``[x | h | 1]``; the rows of the sigmoid gates (i, f, o) are pre-scaled by 1/2 so that
    one ``tanh`` over all gates gives ``sigmoid(z) = 0.5 + 0.5 * tanh(z / 2)`` for them and
    ``tanh(z)`` for g.
    """

    def __init__(self, spec: PolicySpec) -> None:
        """Allocate per-layer weight matrices, gate buffers and state."""
        super().__init__(spec)
        self._layers: list[dict[str, Any]] = []
        in_size = spec.obs_dim
        for h in spec.hidden_sizes:
            z = np.zeros(in_size + h + 1, dtype=_F32)
            z[-1] = 1.0
            gates = np.zeros(4 * h, dtype=_F32)
            scale = np.full(4 * h, 0.5, dtype=_F32)
            offset = np.full(4 * h, 0.5, dtype=_F32)
            scale[2 * h : 3 * h] = 1.0
            offset[2 * h : 3 * h] = 0.0
            self._layers.append(
                {
                    "in": in_size,
                    "h": h,
                    "w": np.zeros((4 * h, in_size + h + 1), dtype=_F32),
                    "z": z,
                    "x": z[:in_size],
                    "h_view": z[in_size : in_size + h],
                    "gates": gates,
                    "i": gates[0:h],
                    "f": gates[h : 2 * h],
                    "g": gates[2 * h : 3 * h],
                    "o": gates[3 * h : 4 * h],
                    "scale": scale,
                    "offset": offset,
                    "c": np.zeros(h, dtype=_F32),
                    "tmp": np.zeros(h, dtype=_F32),
                }
            )
            in_size = h
        last = self._layers[-1]
        self._out_w = np.zeros((spec.out_dim, in_size + 1), dtype=_F32)
        self._out_in = last["z"][last["in"] :]  # [h | 1]
        self._x = self._layers[0]["x"]
        self._y = np.zeros(spec.out_dim, dtype=_F32)
        # Tuples for the hot loop (dict lookups per step are slow).
        self._plan = [
            (
                L["w"],
                L["z"],
                L["gates"],
                L["scale"],
                L["offset"],
                L["i"],
                L["f"],
                L["g"],
                L["o"],
                L["c"],
                L["tmp"],
                L["h_view"],
                self._layers[k + 1]["x"] if k + 1 < len(self._layers) else None,
            )
            for k, L in enumerate(self._layers)
        ]

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """torch-style LSTM init (weights and biases uniform(±1/sqrt(H))), normc output layer
        (``init="torch"``: the output layer as ``nn.Linear`` too)."""
        parts: list[np.ndarray] = []
        for name, shape in self._layout:
            if name.startswith("lstm"):
                k = int(name[4 : name.index(".")])
                bound = 1.0 / math.sqrt(self.spec.hidden_sizes[k])
                parts.append(rng.uniform(-bound, bound, size=math.prod(shape)))
            elif self.spec.init == "torch":
                bound = 1.0 / math.sqrt(self.spec.hidden_sizes[-1])  # nn.Linear's, fan_in H
                parts.append(rng.uniform(-bound, bound, size=math.prod(shape)))
            elif name == "out.weight":
                n_out, n_in = shape
                parts.append(_normc(rng, (n_out, n_in), self.spec.init_output_scale).ravel())
            else:
                parts.append(np.zeros(math.prod(shape)))
        return np.concatenate(parts).astype(_F32)

    def _load(self, blocks: dict[str, np.ndarray]) -> None:
        for k, layer in enumerate(self._layers):
            n_in, h = layer["in"], layer["h"]
            w = layer["w"]
            w[:, :n_in] = blocks[f"lstm{k}.weight_ih"]
            w[:, n_in : n_in + h] = blocks[f"lstm{k}.weight_hh"]
            w[:, -1] = blocks[f"lstm{k}.bias_ih"] + blocks[f"lstm{k}.bias_hh"]
            w[: 2 * h] *= 0.5  # i, f: sigmoid(z) = 0.5 + 0.5 tanh(z / 2)
            w[3 * h :] *= 0.5  # o
        self._out_w[:, :-1] = blocks["out.weight"]
        self._out_w[:, -1] = blocks["out.bias"]

    def reset(self) -> None:
        """Zero the hidden and cell states."""
        for layer in self._layers:
            layer["h_view"].fill(0.0)
            layer["c"].fill(0.0)

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """Advance the recurrent state by one observation and return the raw output."""
        x = self._x
        if self._normalize:
            _subtract(obs, self._obs_mean, out=x)
            _divide(x, self._obs_std, out=x)
        else:
            _copyto(x, obs, casting="same_kind")
        _minimum(x, self._clip_hi, out=x)
        _maximum(x, self._clip_lo, out=x)
        mul, add, tanh = _multiply, _add, _tanh
        for w, z, gates, scale, offset, i, f, g, o, c, tmp, h, nxt in self._plan:
            _matmul(w, z, out=gates)
            tanh(gates, out=gates)
            mul(gates, scale, out=gates)
            add(gates, offset, out=gates)
            mul(f, c, out=c)
            mul(i, g, out=tmp)
            add(c, tmp, out=c)
            tanh(c, out=tmp)
            mul(o, tmp, out=h)
            if nxt is not None:
                _copyto(nxt, h)
        _matmul(self._out_w, self._out_in, out=self._y)
        return self._y


def build_policy(spec: PolicySpec) -> Policy:
    """Build the numpy policy described by ``spec``."""
    if spec.kind == "lstm":
        return LSTMPolicy(spec)
    return FeedForwardPolicy(spec)
