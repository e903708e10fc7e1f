"""Training budgets: timesteps, generations, wall-clock, CPU-seconds, target return;
whichever comes first.

The CPU limit counts the CPU-seconds of the run's whole process tree (the head and its
workers, :mod:`harness.cputime`), summed over resumes: the budget that gives two
algorithms the same compute whatever their parallelism or the machine's other load.
Like the wall-clock limit it stops at a point that depends on the machine, so a run under
either is not bitwise repeatable.

A target return is *reached* when a regular evaluation crosses it and a
confirmation on fresh episodes also clears it (see :class:`harness.runner.Trainer`);
the runner passes the confirmed return to :meth:`Budget.exhausted`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The limits that end a run by themselves (a target return needs one of them beside it).
LIMITS = ("timesteps", "generations", "time_limit", "cpu_limit")


@dataclass(frozen=True)
class Budget:
    """Limits of one run. ``None`` means unlimited along that axis."""

    timesteps: int | None = None
    generations: int | None = None
    time_limit: float | None = None
    cpu_limit: float | None = None
    target_return: float | None = None
    #: the partner's algorithm of an equal-compute pair (:mod:`harness.pairing`): without a
    #: limit of its own, the run's CPU limit is the partner's CPU-seconds, known at its end
    paired_with: str | None = None

    def validate(self) -> None:
        """Raise ValueError naming the first limit that is zero or negative."""
        for name in LIMITS:
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"budget {name} must be positive, got {value}")
        if all(getattr(self, name) is None for name in LIMITS) and not self.paired_with:
            raise ValueError(
                "a budget needs timesteps, generations, time_limit, cpu_limit or paired_with"
            )

    def crosses(self, value: float | None) -> bool:
        """Whether an evaluation's mean return ``value`` is at or above the target."""
        target = self.target_return
        return target is not None and value is not None and value >= target

    def exhausted(
        self,
        timesteps: int,
        generations: int,
        elapsed_s: float,
        reached: float | None,
        cpu_s: float = 0.0,
    ) -> str | None:
        """The reason to stop now, or None to go on.

        ``reached``: the return by which the target counts as reached (the confirmed
        mean), or None while it is not. ``cpu_s``: the run's CPU-seconds so far.
        """
        if self.crosses(reached):
            return f"target return {self.target_return} reached ({reached:.1f})"
        if self.timesteps is not None and timesteps >= self.timesteps:
            return f"timestep budget {self.timesteps} used"
        if self.generations is not None and generations >= self.generations:
            return f"generation budget {self.generations} used"
        if self.time_limit is not None and elapsed_s >= self.time_limit:
            return f"time limit {self.time_limit}s reached"
        if self.cpu_limit is not None and cpu_s >= self.cpu_limit:
            return f"CPU limit {self.cpu_limit} CPU-s reached"
        return None

    def used(
        self, timesteps: int, generations: int, elapsed_s: float, cpu_s: float = 0.0
    ) -> tuple[float, str]:
        """The share (0 to 1) of the budget that binds, i.e. the one nearest its limit.

        Returns the share and the name of that budget (one of :data:`LIMITS`), for a
        progress bar that moves whichever limit is given.
        """
        shares = [
            (timesteps / self.timesteps if self.timesteps else 0.0, "timesteps"),
            (generations / self.generations if self.generations else 0.0, "generations"),
            (elapsed_s / self.time_limit if self.time_limit else 0.0, "time_limit"),
            (cpu_s / self.cpu_limit if self.cpu_limit else 0.0, "cpu_limit"),
        ]
        given = [(share, name) for share, name in shares if getattr(self, name) is not None]
        share, name = max(given, default=(0.0, "timesteps"))
        return min(max(share, 0.0), 1.0), name
