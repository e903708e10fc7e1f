"""Running observation statistics for observation normalisation (OpenAI-ES semantics).

Follows ``RunningStat`` in openai/evolution-strategies-starter (``es_distributed/es.py``):
the sum starts at zero, the sum of squares and the count both start at ``eps`` (so the initial
mean is 0 and the initial std is 1), and the std is ``sqrt(max(sumsq/count - mean², 1e-2))``,
i.e. the variance is floored at 1e-2 (std at 0.1). Unlike the original (float32), all
accumulators here are float64, so long runs do not lose precision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["VAR_FLOOR", "RunningStat"]

#: Floor on the variance used by :attr:`RunningStat.std`.
VAR_FLOOR = 1e-2


class RunningStat:
    """Float64 running sum, sum of squares and count of observations."""

    def __init__(self, shape: int | tuple[int, ...], eps: float = 1e-2) -> None:
        """Start with ``sum = 0``, ``sumsq = eps`` and ``count = eps`` (mean 0, std 1)."""
        self.shape: tuple[int, ...] = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = float(eps)
        self.sum = np.zeros(self.shape, dtype=np.float64)
        self.sumsq = np.full(self.shape, self.eps, dtype=np.float64)
        self.count = self.eps

    def increment(self, s: np.ndarray, ssq: np.ndarray, c: float) -> None:
        """Add a batch's observation sum ``s``, sum of squares ``ssq`` and count ``c``."""
        s_arr = np.asarray(s, dtype=np.float64)
        ssq_arr = np.asarray(ssq, dtype=np.float64)
        if s_arr.shape != self.shape or ssq_arr.shape != self.shape:
            raise ValueError(
                f"RunningStat of shape {self.shape} got sum {s_arr.shape}, sumsq {ssq_arr.shape}"
            )
        self.sum += s_arr
        self.sumsq += ssq_arr
        self.count += float(c)

    @property
    def mean(self) -> np.ndarray:
        """Mean of the observations seen (float64)."""
        return self.sum / self.count

    @property
    def std(self) -> np.ndarray:
        """Standard deviation, with the variance floored at :data:`VAR_FLOOR` (float64)."""
        var = self.sumsq / self.count - np.square(self.mean)
        std: np.ndarray = np.sqrt(np.maximum(var, VAR_FLOOR))
        return std

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to restore these statistics (arrays are copies)."""
        return {
            "shape": list(self.shape),
            "eps": self.eps,
            "sum": self.sum.copy(),
            "sumsq": self.sumsq.copy(),
            "count": self.count,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore statistics from :meth:`state_dict` output (arrays or nested lists)."""
        s = np.asarray(state["sum"], dtype=np.float64)
        ssq = np.asarray(state["sumsq"], dtype=np.float64)
        if s.shape != self.shape or ssq.shape != self.shape:
            raise ValueError(f"state of shape {s.shape} does not fit RunningStat {self.shape}")
        self.sum = s.copy()
        self.sumsq = ssq.copy()
        self.count = float(state["count"])
        self.eps = float(state.get("eps", self.eps))

    def __repr__(self) -> str:
        """Short description with the shape and count."""
        return f"RunningStat(shape={self.shape}, count={self.count:g})"
