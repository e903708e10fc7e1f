"""Equal-compute pairs: two runs side by side on one machine, one stopping at the other's CPU.

A CPU-seconds budget set from a run made earlier compares two machines, or one machine at two
moments, whose speed per CPU-second can differ 2-3x (docs/benchmark.md). A *pair* removes
that: its *lead* (an RL run, say, to its own budget) and its *follower* (an ES run, say) are
started together, each on its own core where the machine has two, so both see the same machine
and the same neighbours however its speed moves; the follower stops at the CPU-seconds the lead
used when the lead ends.

Both runs name their partner's algorithm in the ``paired_with`` knob (so a pair's runs differ
in identity from the grid's), and the one without a limit of its own is the follower. The
scheduler (:mod:`harness.sweep.scheduler`) gives both the path of one small JSON file in the
environment (:data:`PAIR_FILE_ENV`):

- the lead writes ``{"cpu_seconds": C, "done": false, "run_id": ...}`` at every CPU reading
  (about once a second) and ``"done": true`` with its final ``cpu_seconds`` when it completes;
  the scheduler writes ``"stopped": STATUS`` where the lead ended otherwise;
- the follower reads it after each step: it waits while it is ahead of the lead (so it never
  spends CPU-seconds the lead may not reach), takes the lead's final CPU-seconds as its limit
  once the lead is done, and stops as interrupted (resumable) where the lead stopped.

The meters on both sides are :class:`harness.cputime.CpuMeter` readings summed over resumes,
so a pair resumed together (each from its checkpoint) goes on pacing where it stopped.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The environment variable that carries the pair file's path to both runs.
PAIR_FILE_ENV = "HARNESS_PAIR_FILE"
#: Seconds between readings of the file while the follower waits for its lead.
WAIT_POLL_S = 0.1
#: The follower's wait for a lead that has not written yet is given up after this long: a
#: lead that cannot start leaves its follower interrupted, not hanging.
FIRST_WRITE_TIMEOUT_S = 600.0
#: The most of the pair file a follower reads (a state is under 200 bytes).
MAX_STATE_BYTES = 4096


class LeadStopped(RuntimeError):
    """The lead ended without completing; the follower stops, resumable, with the pair."""


@dataclass(frozen=True)
class LeadState:
    """What the follower reads: the lead's CPU-seconds so far, and whether it is done."""

    cpu_seconds: float
    done: bool = False
    stopped: str | None = None
    run_id: str | None = None


def is_follower(config: dict[str, Any]) -> bool:
    """Whether a run config is a pair's follower: paired, with no limit of its own."""
    from harness.budget import LIMITS

    return bool(config.get("paired_with")) and all(config.get(k) is None for k in LIMITS)


def pair_file() -> Path | None:
    """The pair file this process was given (:data:`PAIR_FILE_ENV`), or None."""
    value = os.environ.get(PAIR_FILE_ENV)
    return Path(value) if value else None


def write_state(path: Path, state: LeadState) -> None:
    """Replace the pair file atomically (a reader sees the old state or the new one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state.__dict__))
    os.replace(tmp, path)


def read_state(path: Path) -> LeadState | None:
    """The lead's last state, or None before its first write."""
    try:
        with open(path, "rb") as handle:  # bounded: the file sits in a runs directory
            data = json.loads(handle.read(MAX_STATE_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise LeadStopped(f"pair file {path} unreadable: {error}") from None
    if not isinstance(data, dict):
        raise LeadStopped(f"pair file {path} is not a JSON object")
    return LeadState(
        cpu_seconds=float(data.get("cpu_seconds") or 0.0),
        done=bool(data.get("done")),
        stopped=data.get("stopped"),
        run_id=data.get("run_id"),
    )


class Lead:
    """The lead's side: publish each CPU reading, and the final one."""

    def __init__(self, path: Path, run_id: str | None) -> None:
        self.path = path
        self.run_id = run_id

    def publish(self, cpu_seconds: float, done: bool = False) -> None:
        write_state(self.path, LeadState(cpu_seconds, done, None, self.run_id))


class Follower:
    """The follower's side: wait while ahead of the lead; the lead's final CPU-seconds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.waited_s = 0.0
        self.lead_run_id: str | None = None

    def limit(self, cpu_seconds: float) -> float | None:
        """The CPU limit once the lead is done (None before), after waiting while this run's
        ``cpu_seconds`` are ahead of the lead's. Raises :class:`LeadStopped` if the lead
        stopped, or never wrote within :data:`FIRST_WRITE_TIMEOUT_S`."""
        started = time.monotonic()
        while True:
            state = read_state(self.path)
            if state is not None:
                self.lead_run_id = state.run_id or self.lead_run_id
                if state.stopped:
                    raise LeadStopped(f"the pair's lead stopped: {state.stopped}")
                if state.done:
                    self.waited_s += time.monotonic() - started
                    return state.cpu_seconds
                if cpu_seconds < state.cpu_seconds:
                    self.waited_s += time.monotonic() - started
                    return None
            elif time.monotonic() - started > FIRST_WRITE_TIMEOUT_S:
                raise LeadStopped(f"the pair's lead wrote nothing to {self.path} in time")
            time.sleep(WAIT_POLL_S)
