"""One guard for the global RNGs a library draws from: private to a run, and checkpointed.

pycma (and Nevergrad's CMA wrappers) draw from numpy's *global* RNG; stable-baselines3
draws from Python's, numpy's and torch's. :class:`PrivateGlobalRNG` swaps a private copy
of the named global states in around every call into the library and saves them after,
so other code cannot perturb the library's draws and a checkpoint can capture them.
"""

from __future__ import annotations

import io
import pickle
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def _torch_get() -> Any:
    import torch

    return torch.get_rng_state()


def _torch_set(state: Any) -> None:
    import torch

    if isinstance(state, np.ndarray):  # as checkpoints hold it (plain_states)
        state = torch.from_numpy(state.copy())
    torch.set_rng_state(state)


#: each global RNG by name: how its state is read and written
GLOBAL_RNGS: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
    "python": (random.getstate, random.setstate),
    "numpy": (np.random.get_state, np.random.set_state),
    "torch": (_torch_get, _torch_set),
}


class PrivateGlobalRNG:
    """Private copies of the ``sources`` global RNG states, active only inside :meth:`active`.

    ``seed``: numpy's private state starts as ``RandomState(seed)``'s; without one the
    states start as whatever the library seeds them to at its first activation.
    """

    def __init__(self, sources: tuple[str, ...] = ("numpy",), seed: int | None = None) -> None:
        unknown = set(sources) - set(GLOBAL_RNGS)
        if unknown:
            raise ValueError(f"unknown global RNGs {sorted(unknown)}; known: {list(GLOBAL_RNGS)}")
        self.sources = sources
        #: the private state of each source; None until first captured
        self.states: dict[str, Any] | None = (
            None if seed is None else {"numpy": np.random.RandomState(seed).get_state()}
        )

    def _capture(self) -> dict[str, Any]:
        return {name: GLOBAL_RNGS[name][0]() for name in self.sources}

    @staticmethod
    def _restore(states: dict[str, Any]) -> None:
        for name, state in states.items():
            GLOBAL_RNGS[name][1](state)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make the private states the global ones for the duration; save them afterwards."""
        saved = self._capture()
        if self.states is not None:
            self._restore(self.states)
        try:
            yield
        finally:
            self.states = self._capture()
            self._restore(saved)

    def plain_states(self) -> dict[str, Any] | None:
        """The states with torch's as a numpy array: a checkpoint of arrays, no pickle."""
        if self.states is None or "torch" not in self.states:
            return self.states
        torch_state = self.states["torch"]
        if not isinstance(torch_state, np.ndarray):
            torch_state = torch_state.numpy().copy()
        return {**self.states, "torch": torch_state}


_GLOBAL_RNG_ID = "numpy.random global RandomState"


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> str | None:
        return _GLOBAL_RNG_ID if obj is np.random.mtrand._rand else None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        if pid == _GLOBAL_RNG_ID:
            return np.random.mtrand._rand
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def dumps_optimizer(optimizer: Any) -> bytes:
    """Pickle a library optimizer, keeping references to numpy's global RNG as references.

    pycma holds ``np.random.randn``, a method of the global ``RandomState``; plain pickle
    would copy that generator into the checkpoint, and the restored optimizer would then
    draw from a detached copy instead of the state that :class:`PrivateGlobalRNG` restores.
    """
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(optimizer)
    return buffer.getvalue()


def loads_optimizer(payload: bytes) -> Any:
    """Inverse of :func:`dumps_optimizer`."""
    return _Unpickler(io.BytesIO(payload)).load()
