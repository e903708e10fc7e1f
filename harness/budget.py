"""Training budgets: timesteps, generations, wall-clock, target return; whichever comes first."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Limits of one run. ``None`` means unlimited along that axis."""

    timesteps: int | None = None
    generations: int | None = None
    time_limit: float | None = None
    target_return: float | None = None

    def validate(self) -> None:
        """Raise ValueError naming the first limit that is zero or negative."""
        for name in ("timesteps", "generations", "time_limit"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"budget {name} must be positive, got {value}")
        if self.timesteps is None and self.generations is None and self.time_limit is None:
            raise ValueError("a budget needs timesteps, generations or time_limit")

    def exhausted(
        self, timesteps: int, generations: int, elapsed_s: float, last_eval: float | None
    ) -> str | None:
        """The reason to stop now, or None to go on."""
        target = self.target_return
        if target is not None and last_eval is not None and last_eval >= target:
            return f"target return {target} reached ({last_eval:.1f})"
        if self.timesteps is not None and timesteps >= self.timesteps:
            return f"timestep budget {self.timesteps} used"
        if self.generations is not None and generations >= self.generations:
            return f"generation budget {self.generations} used"
        if self.time_limit is not None and elapsed_s >= self.time_limit:
            return f"time limit {self.time_limit}s reached"
        return None
