"""The shared noise table of Salimans et al. (2017), section 2.1 and Algorithm 2.

A block of i.i.d. standard-normal float32 numbers drawn once from a seed. A
perturbation of a ``d``-dimensional parameter vector is the slice
``table[i : i + d]``, so a candidate travels as one integer ``i`` (plus a
sign for mirrored sampling) instead of ``d`` floats. The head creates the
table once; workers on the same machine map the same shared-memory block, and
a worker on another node rebuilds it bit for bit from ``(size, seed)``.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

DEFAULT_NOISE_SIZE = 1 << 25  # 32 Mi floats = 128 MiB; OpenAI's 250M is sized for 1,440 workers


@dataclass(frozen=True)
class NoiseSpec:
    """How to rebuild the table anywhere: its length and its seed."""

    size: int
    seed: int


def fill_noise(spec: NoiseSpec, out: np.ndarray) -> None:
    """Write the table for ``spec`` into ``out`` (float32, length ``spec.size``)."""
    rng = np.random.Generator(np.random.PCG64(spec.seed))
    rng.standard_normal(out=out, dtype=np.float32)


def _attach_untracked(name: str) -> shared_memory.SharedMemory:
    """Map a block without registering it: only its creator may unlink it."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, create=False, track=False)
    # Before 3.13 every attach registers with the resource tracker, which then
    # unlinks the block when this process exits, under the creator's feet.
    original = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None
    try:
        return shared_memory.SharedMemory(name=name, create=False)
    finally:
        resource_tracker.register = original


class NoiseTable:
    """The noise table, either private to this process or in named shared memory."""

    def __init__(
        self,
        spec: NoiseSpec,
        array: np.ndarray,
        shm: shared_memory.SharedMemory | None,
        owner: bool,
    ) -> None:
        self.spec = spec
        self.array = array
        self._shm = shm
        self._owner = owner

    @classmethod
    def create(cls, spec: NoiseSpec, shared: bool = False) -> NoiseTable:
        """Draw the table; with ``shared`` place it in shared memory for local workers."""
        if spec.size <= 0:
            raise ValueError(f"noise table size must be positive, got {spec.size}")
        if not shared:
            array = np.empty(spec.size, dtype=np.float32)
            fill_noise(spec, array)
            return cls(spec, array, None, owner=True)
        table = cls.allocate(spec)
        table.fill()
        return table

    @classmethod
    def allocate(cls, spec: NoiseSpec) -> NoiseTable:
        """A shared-memory block for the table, not yet drawn: call :meth:`fill` before use.

        Lets the head start its workers (which only map the block by name) first and
        draw the numbers while they start up.
        """
        if spec.size <= 0:
            raise ValueError(f"noise table size must be positive, got {spec.size}")
        shm = shared_memory.SharedMemory(create=True, size=spec.size * 4)
        array = np.ndarray((spec.size,), dtype=np.float32, buffer=shm.buf)
        return cls(spec, array, shm, owner=True)

    def fill(self) -> None:
        """Draw the numbers into this table (the creator does it once)."""
        fill_noise(self.spec, self.array)

    @classmethod
    def attach(cls, spec: NoiseSpec, shm_name: str) -> NoiseTable:
        """Map a table that another process of this machine created."""
        shm = _attach_untracked(shm_name)
        array = np.ndarray((spec.size,), dtype=np.float32, buffer=shm.buf)
        return cls(spec, array, shm, owner=False)

    @property
    def shm_name(self) -> str | None:
        """Name of the shared-memory block, or None for a private table."""
        return self._shm.name if self._shm is not None else None

    def sample_index(self, rng: np.random.Generator, dim: int) -> int:
        """A uniformly random start of a length-``dim`` slice."""
        if dim > self.spec.size:
            raise ValueError(f"noise table of {self.spec.size} floats is smaller than dim {dim}")
        return int(rng.integers(0, self.spec.size - dim + 1))

    def get(self, index: int, dim: int) -> np.ndarray:
        """The perturbation ``eps`` starting at ``index`` (a view, do not write)."""
        return self.array[index : index + dim]

    def close(self) -> None:
        """Unmap, and unlink if this process created the block."""
        if self._shm is None:
            return
        self.array = np.empty(0, dtype=np.float32)
        with contextlib.suppress(BufferError):
            self._shm.close()
        if self._owner:
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()
        self._shm = None
