"""Sweeps as data: ``harness sweep FILE.yaml [--runs-dir DIR] [--jobs N]``.

A sweep file (YAML, read with the safe loader) declares a grid; every
combination is one *cell*, one Sacred run::

    name: demo                      # required; every run is tagged sweep=<name>
    description: >                  # optional free text (reports quote it)
      What this sweep compares and at what budget.
    grid:                           # each entry a list (a single value is a list of one)
      algo: [optimes, cma]          # required
      env: [CartPole]               # required
      seed: [0, 1, 2]               # default [0]
      episodes: [1, 5]              # episodes per fitness (ES family); default [1]
      workers: [1]                  # default [1] (as harness run); "auto": this machine's CPUs
    budget:                         # any of timesteps, generations, time_limit, target_return
      timesteps: 20000              # (none: the env's default budget)
    backend: inline                 # inline, process or ray (ES family); default process
    jobs: 2                         # default for --jobs: cells run at once
    set:                            # --set overrides for every cell (run/policy/budget keys)
      - eval_every_timesteps=5000
    overrides:                      # per-algorithm --set overrides (hyperparameters)
      optimes: [population=20]
      ppo: [n_steps=256]

Unknown keys are a usage error naming the key and the file. Each cell's
config is built by :func:`harness.config.build_run_config`, as ``harness
run`` builds one, so the whole file is validated before anything runs. The
grid axes are the knobs :mod:`harness.schema` marks as such. File-wide
settings reach the cells whose algorithm uses them: ``backend``, ES-only
knobs in ``set`` and the ``episodes`` axis are not given to PPO/A2C cells
(which get one cell per other combination, not one per K); in ``overrides``
of an algorithm, a knob it does not use is an error.

Cells run one subprocess each (``python -m harness.sweep --cell FILE``), so
a crash of one cell does not stop the sweep; ``--jobs N`` runs N at once.
Their output goes to ``RUNS_DIR/_sweeps/<name>/logs/``.

``--set KEY=VALUE`` (every cell) and ``--grid KEY=V1,V2`` (replace an axis)
shrink a shipped study to this machine without editing it, e.g.
``harness sweep experiments/goodai_lander.yaml --set timesteps=300000
--grid seed=0,1``; ``--dry-run`` lists the cells and which would be skipped.

Resumption. A cell is *done* when the runs directory holds a ``COMPLETED``
run whose config equals the cell's completed config on every key except
``ray_address`` (where a run executed is not what it computed) and the knobs
its algorithm does not use; keys only one of the two has (a knob added to the
harness since) are not compared. The sweep name
is part of that comparison, so a run is reused only by the sweep that made
it; editing a hyperparameter, a budget or ``experiments/defaults.yaml`` makes
the affected cells run again. ``FAILED``, ``INTERRUPTED`` and stale
``RUNNING`` runs do not count, nor a ``COMPLETED`` one whose ``metrics.json``
was cut short. A cell whose newest unfinished run is ``INTERRUPTED`` (or
``RUNNING`` with its process gone: its ``.run.lock`` flock is free) and has a
checkpoint is continued in place with ``harness resume`` (``--no-resume``:
afresh); otherwise, and for ``FAILED`` runs, the cell runs again as a new run
(the old directories stay as the record of what happened; ``harness report``
leaves runs that are not ``COMPLETED`` out).

Concurrency. Two sweeps may write into one runs directory at once. Sacred's
``FileStorageObserver`` picks a new id as max+1 and creates it with
``os.mkdir``, retrying the next id on ``FileExistsError``, so ids never
collide. Two sweeps that share a cell (the same file started twice) take an
``fcntl`` lock per cell (``RUNS_DIR/_sweeps/locks/<key>.lock``) around the
check-and-run, so the second waits and then skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import schema
from harness.config import BUDGET_KEYS, ConfigError, read_yaml
from harness.records import RunHeader, metrics_look_complete, scan_runs

SWEEP_KEYS = ("name", "description", "grid", "budget", "backend", "jobs", "set", "overrides")
#: Grid axes, from the knob schema; an axis left out takes the knob's built-in default.
GRID_KEYS = schema.GRID_KEYS
GRID_DEFAULTS: dict[str, list[Any]] = {
    key: [schema.BY_NAME[key].default] for key in GRID_KEYS if key not in ("algo", "env")
}
#: Config keys left out of a cell's identity (see the module docstring).
IGNORED_IN_IDENTITY = ("ray_address",)
BOOKKEEPING_DIR = "_sweeps"
RESULT_PREFIX = "harness-sweep-cell:"


class SweepError(ValueError):
    """A bad sweep file; the message is one line naming the file and the value."""


def _usage_error(message: str) -> Exception:
    from harness.cli import UsageError

    return UsageError(message)


# -- the sweep file -------------------------------------------------------------------


@dataclass
class Cell:
    """One combination of the grid and its completed, validated run config."""

    index: int
    config: dict[str, Any]

    @property
    def key(self) -> str:
        return cell_key(self.config)

    @property
    def label(self) -> str:
        c = self.config
        family = _family(c["algo"])
        uses_k = family is None or schema.BY_NAME["episodes"].applies_to(family)
        episodes = f" episodes={c['episodes']}" if uses_k else ""
        return f"{c['algo']} {c['env']} seed={c['seed']}{episodes} workers={c['workers']}"


@dataclass
class Sweep:
    """A parsed sweep file."""

    name: str
    path: Path
    cells: list[Cell]
    description: str = ""
    jobs: int = 1


def _as_list(value: Any, key: str, path: Path) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SweepError(f"{path}: grid.{key} is empty")
    for item in values:
        if isinstance(item, (dict, list)) or item is None:
            raise SweepError(f"{path}: grid.{key} entries must be scalars, got {item!r}")
    return values


def _string_list(value: Any, where: str, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SweepError(f"{path}: {where} must be a list of key=value strings")
    return list(value)


def _check_keys(data: dict[str, Any], known: tuple[str, ...], where: str, path: Path) -> None:
    for key in data:
        if key not in known:
            raise SweepError(f"{path}: unknown key {where}{key!r}; known: {', '.join(known)}")


def cell_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The knobs that make two runs the same cell.

    The completed config minus ``ray_address`` (where a run executed, not what
    it computed) and minus the knobs the algorithm does not use (a sweep file's
    ``backend`` once reached PPO cells; it never changed what they computed).
    """
    identity = {k: v for k, v in config.items() if k not in IGNORED_IN_IDENTITY}
    family = _family(config.get("algo"))
    if family is not None:
        for knob in schema.KNOBS:
            if knob.applies_to(family):
                continue
            section, _, name = knob.name.rpartition(".")
            holder = identity.get(section) if section else identity
            if isinstance(holder, dict):
                if section:
                    holder = identity[section] = dict(holder)
                holder.pop(name, None)
    # Through JSON, as config.json stores it: tuples become lists, key order is irrelevant.
    canonical: dict[str, Any] = json.loads(json.dumps(identity, sort_keys=True, default=str))
    return canonical


def _family(algo: Any) -> str | None:
    """The family of an algorithm name, or None for one this harness does not know."""
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    try:
        return str(get_algorithm(str(algo)).family)
    except UnknownAlgorithmError:
        return None


def cell_key(config: dict[str, Any]) -> str:
    """A short digest of :func:`cell_identity` (names lock and log files)."""
    text = json.dumps(cell_identity(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_cell_config(
    *,
    name: str,
    algo: str,
    env: str,
    seed: int,
    episodes: int,
    workers: Any,
    backend: str | None,
    budget: dict[str, Any],
    common: list[str],
    per_algo: list[str],
) -> dict[str, Any]:
    """A cell's completed run config, built by ``build_run_config`` as ``harness run`` does.

    File-wide settings (``backend``, the ``set`` list, the ``episodes`` axis)
    reach only the cells whose algorithm uses them; ``per_algo`` overrides are
    the user's word for this algorithm, so a knob it does not use is an error.
    """
    from harness.config import build_run_config, param_types, parse_assignment

    family = _family(algo) or "es"
    given: dict[str, Any] = {"algo": algo, "env": env, "seed": seed, "workers": workers}
    sources = dict.fromkeys(given, "sweep grid")
    if schema.BY_NAME["episodes"].applies_to(family):
        given["episodes"] = episodes
        sources["episodes"] = "sweep grid"
    if backend is not None and schema.BY_NAME["backend"].applies_to(family):
        given["backend"] = backend
        sources["backend"] = "sweep file backend"
    for key in BUDGET_KEYS:
        if budget.get(key) is not None:
            given[key] = budget[key]
            sources[key] = "sweep file budget"
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    try:
        params = param_types(get_algorithm(algo).Config)
    except UnknownAlgorithmError as error:
        raise ConfigError(str(error)) from None
    shared = []
    for assignment in common:
        path, _ = parse_assignment(assignment, params)
        knob = schema.BY_NAME.get(path)
        if knob is None or knob.applies_to(family):
            shared.append(assignment)
    resolved = build_run_config(
        given, source=sources, overrides=[*shared, *per_algo], override_source="sweep set"
    )
    config = resolved.config
    config["sweep"] = name
    return config


def parse_grid_override(text: str) -> tuple[str, list[Any]]:
    """``--grid seed=0,1,2`` -> ``("seed", [0, 1, 2])`` (values parsed as YAML scalars)."""
    from harness.config import parse_value

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or key not in GRID_KEYS:
        raise SweepError(
            f"--grid expects KEY=V1,V2,... with KEY one of {', '.join(GRID_KEYS)}, got {text!r}"
        )
    try:
        values = [parse_value(part.strip()) for part in raw.split(",") if part.strip()]
    except ConfigError as error:
        raise SweepError(f"--grid {text!r}: {error}") from None
    if not values:
        raise SweepError(f"--grid {key} needs at least one value")
    return key, values


def load_sweep(
    path: str | Path,
    extra_set: list[str] | None = None,
    grid_override: dict[str, list[Any]] | None = None,
) -> Sweep:
    """Parse and validate a sweep file; raise :class:`SweepError` (one line) on bad input.

    ``extra_set`` (``--set``) is appended to the file's ``set`` list and
    ``grid_override`` (``--grid``) replaces grid axes: a smaller budget or fewer
    seeds without editing the file. Changed configs are new cells (new runs).
    """
    path = Path(path)
    try:
        data = read_yaml(path)
    except ConfigError as error:
        raise SweepError(str(error)) from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep file must be a mapping with name and grid")
    _check_keys(data, SWEEP_KEYS, "", path)
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise SweepError(f"{path}: name must be letters, digits, '_', '.' or '-', got {name!r}")
    grid = data.get("grid")
    if not isinstance(grid, dict):
        raise SweepError(f"{path}: grid must be a mapping of {', '.join(GRID_KEYS)}")
    _check_keys(grid, GRID_KEYS, "grid.", path)
    grid = {**grid, **(grid_override or {})}
    for required in ("algo", "env"):
        if required not in grid:
            raise SweepError(f"{path}: grid.{required} is required")
    axes = {key: _as_list(grid.get(key, GRID_DEFAULTS.get(key)), key, path) for key in GRID_KEYS}
    for key in ("seed", "episodes", "workers"):
        for value in axes[key]:
            if key == "workers" and value == "auto":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise SweepError(f"{path}: grid.{key} entries must be integers, got {value!r}")
    budget = data.get("budget") or {}
    if not isinstance(budget, dict):
        raise SweepError(f"{path}: budget must be a mapping of {', '.join(BUDGET_KEYS)}")
    _check_keys(budget, BUDGET_KEYS, "budget.", path)
    backend = data.get("backend")
    jobs = data.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise SweepError(f"{path}: jobs must be a positive integer, got {jobs!r}")
    common = _string_list(data.get("set"), "set", path) + list(extra_set or [])
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise SweepError(f"{path}: overrides must map algorithm names to key=value lists")
    per_algo = {str(a): _string_list(v, f"overrides.{a}", path) for a, v in overrides.items()}
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    for algo in per_algo:
        # Overrides of algorithms left out of the grid (--grid algo=...) are unused, not wrong.
        try:
            get_algorithm(algo)
        except UnknownAlgorithmError as error:
            raise SweepError(f"{path}: overrides.{algo}: {error}") from None
    description = data.get("description") or ""

    cells: list[Cell] = []
    # Seeds outermost: a partly finished sweep already holds whole comparisons.
    for seed, env, episodes, workers, algo in itertools.product(
        axes["seed"], axes["env"], axes["episodes"], axes["workers"], axes["algo"]
    ):
        family = _family(algo)
        uses_k = family is None or schema.BY_NAME["episodes"].applies_to(family)
        if not uses_k and episodes != axes["episodes"][0]:
            continue  # episodes per fitness means nothing to PPO/A2C: one cell, not one per K
        try:
            config = build_cell_config(
                name=name,
                algo=str(algo),
                env=str(env),
                seed=seed,
                episodes=episodes,
                workers=workers,
                backend=None if backend is None else str(backend),
                budget=budget,
                common=common,
                per_algo=per_algo.get(str(algo), []),
            )
        except ConfigError as error:
            raise SweepError(f"{path}: cell algo={algo} env={env}: {error}") from None
        cells.append(Cell(len(cells), config))
    keys = [cell.key for cell in cells]
    if len(set(keys)) != len(keys):
        raise SweepError(f"{path}: the grid has duplicate cells (a value listed twice?)")
    return Sweep(name, path, cells, str(description).strip(), jobs)


# -- finding completed cells ---------------------------------------------------------


def same_cell(cell: Any, stored: Any) -> bool:
    """Whether a stored run's config is this cell's, comparing the keys both have.

    Both sides go through :func:`cell_identity`. A key only one side has is a
    knob added to (or removed from) the harness since that run was made; it
    does not count, so adding a knob with a neutral default does not re-run
    every stored cell.
    """
    if isinstance(cell, dict) and isinstance(stored, dict):
        return all(same_cell(cell[k], stored[k]) for k in cell.keys() & stored.keys())
    return bool(cell == stored)


def completed_runs(runs_dir: Path) -> list[RunHeader]:
    """The COMPLETED runs of ``runs_dir`` whose ``metrics.json`` was written to the end."""
    return [
        header
        for header in scan_runs(runs_dir)
        if header.status == "COMPLETED" and metrics_look_complete(header.path)
    ]


def find_completed(cell: Cell, done: list[RunHeader]) -> str | None:
    """Id of a completed run of this cell among ``done``, or None."""
    identity = cell_identity(cell.config)
    for header in done:
        if same_cell(identity, cell_identity(header.config)):
            return header.run_id
    return None


RUN_LOCK_NAME = ".run.lock"  # the run's liveness flock (harness.experiment.RUN_LOCK_NAME)
RESUMABLE = ("INTERRUPTED", "RUNNING")


def run_is_dead(run_dir: Path) -> bool:
    """True when the run's liveness lock is free: no process of this machine runs it.

    A run without the lock file (older records) is not known to be dead.
    """
    try:
        fd = os.open(run_dir / RUN_LOCK_NAME, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock if we took it
    return True


def resumable_run(runs_dir: Path, cell: Cell) -> Path | None:
    """The newest INTERRUPTED (or dead RUNNING) run of this cell that has a checkpoint."""
    from harness.checkpoint import CHECKPOINT_NAME

    identity = cell_identity(cell.config)
    found: list[tuple[int, Path]] = []
    for header in scan_runs(runs_dir):
        if header.status not in RESUMABLE:
            continue
        if not same_cell(identity, cell_identity(header.config)):
            continue
        if not (header.path / CHECKPOINT_NAME).is_file():
            continue
        if header.status == "RUNNING" and not run_is_dead(header.path):
            continue
        found.append((int(header.run_id), header.path))
    return max(found)[1] if found else None


@contextlib.contextmanager
def cell_lock(runs_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on this cell of this runs directory."""
    folder = runs_dir / BOOKKEEPING_DIR / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key}.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# -- running cells ----------------------------------------------------------------------


@dataclass
class CellOutcome:
    """What happened to one cell."""

    cell: Cell
    action: str  # "skipped" (already completed), "ran" (a new run) or "resumed"
    status: str  # COMPLETED, FAILED, INTERRUPTED, CRASHED (no run record)
    run_id: str | None = None
    log: Path | None = None
    detail: str = ""


@dataclass
class SweepResult:
    """Outcomes of every cell, in cell order."""

    sweep: Sweep
    outcomes: list[CellOutcome] = field(default_factory=list)

    def count(self, action: str, status: str | None = None) -> int:
        return sum(
            1
            for o in self.outcomes
            if o.action == action and (status is None or o.status == status)
        )

    @property
    def failed(self) -> list[CellOutcome]:
        return [o for o in self.outcomes if o.status != "COMPLETED"]


class _Children:
    """Live cell subprocesses, so an interrupt can stop them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def stop(self, timeout: float = 20.0) -> None:
        self.stopping = True
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(2)  # SIGINT: Sacred records the run as INTERRUPTED
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _run_logged(
    command: list[str], log_path: Path, header: str, children: _Children | None
) -> tuple[int, str]:
    """Run ``command`` with output appended to ``log_path``; its exit code and new output."""
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1"}
    with open(log_path, "ab") as log:
        start = log.tell()  # earlier attempts of this cell are above
        log.write(f"$ {' '.join(command)}\n# {header}\n".encode())
        log.flush()
        try:
            # Its own session: a terminal's Ctrl-C reaches the sweep, which stops cells once.
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            log.write(f"cannot start: {error}\n".encode())
            return -1, f"cannot start: {error}"
        if children is not None:
            with children.lock:
                children.procs.add(proc)
        try:
            returncode = proc.wait()
        finally:
            if children is not None:
                with children.lock:
                    children.procs.discard(proc)
    with open(log_path, "rb") as stream:
        stream.seek(start)
        return returncode, stream.read().decode("utf-8", errors="replace")


def _log_path(log_dir: Path, cell: Cell) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir / f"cell-{cell.index:03d}-{cell.key}.log"


def run_cell(
    cell: Cell,
    runs_dir: Path,
    log_dir: Path,
    children: _Children | None = None,
    python: str = sys.executable,
) -> CellOutcome:
    """Run one cell as a new run, in a subprocess, its output appended to a log file."""
    log_path = _log_path(log_dir, cell)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cell.config, handle)
        config_path = Path(handle.name)
    command = [python, "-m", "harness.sweep", "--cell", str(config_path)]
    command += ["--runs-dir", str(runs_dir)]
    try:
        returncode, output = _run_logged(command, log_path, cell.label, children)
    finally:
        config_path.unlink(missing_ok=True)
    run_id, status = None, "CRASHED"
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            parts = line[len(RESULT_PREFIX) :].split()
            if len(parts) >= 2:
                run_id, status = parts[0], parts[1]
    if status == "CRASHED" and returncode == 1:
        status = "FAILED"
    detail = "" if status == "COMPLETED" else _tail(output)
    return CellOutcome(cell, "ran", status, run_id, log_path, detail)


def resume_cell(
    cell: Cell,
    run_dir: Path,
    log_dir: Path,
    children: _Children | None = None,
    python: str = sys.executable,
) -> CellOutcome | None:
    """Continue an interrupted run of this cell with ``harness resume``.

    None when ``harness resume`` refuses it (a usage error: a damaged
    checkpoint, say); the caller then runs the cell afresh.
    """
    log_path = _log_path(log_dir, cell)
    command = [python, "-m", "harness.cli", "resume", str(run_dir), "--no-progress"]
    returncode, output = _run_logged(command, log_path, f"resume {cell.label}", children)
    if returncode == 2:
        return None
    try:
        status = str(json.loads((run_dir / "run.json").read_text()).get("status"))
    except (OSError, ValueError):
        status = "CRASHED"
    if returncode != 0 and status in ("COMPLETED", "RUNNING"):
        status = "CRASHED"
    detail = "" if status == "COMPLETED" else _tail(output)
    return CellOutcome(cell, "resumed", status, run_dir.name, log_path, detail)


def run_sweep(
    sweep: Sweep,
    runs_dir: Path,
    jobs: int = 1,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    python: str = sys.executable,
    resume: bool = True,
) -> SweepResult:
    """Run every cell not yet completed in ``runs_dir``; ``jobs`` cells at once.

    With ``resume``, a cell whose last run was INTERRUPTED (or is RUNNING with
    its process gone) and left a checkpoint continues that run with
    ``harness resume``; FAILED runs and runs without a checkpoint run afresh.
    """
    from tqdm import tqdm

    runs_dir.mkdir(parents=True, exist_ok=True)
    log_dir = runs_dir / BOOKKEEPING_DIR / sweep.name / "logs"
    done = completed_runs(runs_dir)
    outcomes: dict[int, CellOutcome] = {}
    todo: list[Cell] = []
    for cell in sweep.cells:
        existing = find_completed(cell, done)
        if existing is not None:
            outcomes[cell.index] = CellOutcome(cell, "skipped", "COMPLETED", existing)
        else:
            todo.append(cell)
    bar = tqdm(
        total=len(sweep.cells),
        initial=len(outcomes),
        unit="run",
        dynamic_ncols=True,
        desc=f"sweep {sweep.name}",
        disable=not progress,
        file=sys.stderr,
    )
    say = echo or bar.write
    children = _Children()

    def attempt(cell: Cell) -> CellOutcome:
        with cell_lock(runs_dir, cell.key):
            if children.stopping:
                return CellOutcome(cell, "ran", "INTERRUPTED", detail="sweep interrupted")
            # Another sweep may have completed this cell while we waited for the lock.
            again = find_completed(cell, completed_runs(runs_dir))
            if again is not None:
                return CellOutcome(cell, "skipped", "COMPLETED", again)
            interrupted = resumable_run(runs_dir, cell) if resume else None
            if interrupted is not None:
                outcome = resume_cell(cell, interrupted, log_dir, children, python)
                if outcome is not None:
                    return outcome
            return run_cell(cell, runs_dir, log_dir, children, python)

    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="sweep-cell")
    pending: set[Future[CellOutcome]] = set()
    try:
        pending = {pool.submit(attempt, cell) for cell in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                outcomes[outcome.cell.index] = outcome
                if outcome.status != "COMPLETED":
                    where = f" (run {outcome.run_id})" if outcome.run_id else ""
                    say(
                        f"cell {outcome.cell.index} {outcome.cell.label}: {outcome.status}"
                        f"{where}; log {outcome.log}: {outcome.detail}"
                    )
                bar.set_postfix_str(
                    f"last: {outcome.cell.config['algo']} "
                    f"seed {outcome.cell.config['seed']} {outcome.status}"
                )
                bar.update(1)
    except KeyboardInterrupt:
        children.stop()
        for future in pending:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return SweepResult(sweep, [outcomes[i] for i in sorted(outcomes)])


# -- the command ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness sweep``."""
    parser.add_argument("file", help="sweep file (YAML), e.g. experiments/demo.yaml")
    parser.add_argument("--runs-dir", default="runs", help="Sacred FileStorage directory")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="cells run at once (default: the file's jobs, else 1); more jobs "
        "than cores distorts wall-clock comparisons",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a knob in every cell (as `harness run --set`), e.g. "
        "timesteps=200000 for a smaller budget",
    )
    parser.add_argument(
        "--grid",
        dest="grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help=f"replace a grid axis ({', '.join(GRID_KEYS)}), e.g. seed=0,1",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells and whether each would run or be skipped",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="run interrupted cells afresh instead of continuing them from their checkpoint",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """``harness sweep``: 0 when every cell is completed, 1 when some failed."""
    from harness.cli import check_runs_dir

    try:
        grid = dict(parse_grid_override(text) for text in args.grid)
        sweep = load_sweep(args.file, extra_set=args.overrides, grid_override=grid)
    except SweepError as error:
        raise _usage_error(str(error)) from None
    if args.jobs is not None and args.jobs < 1:
        raise _usage_error(f"--jobs must be a positive integer, got {args.jobs}")
    jobs = args.jobs if args.jobs is not None else sweep.jobs
    runs_dir = Path(args.runs_dir)
    check_runs_dir(runs_dir)
    if args.dry_run:
        done = completed_runs(runs_dir)
        for cell in sweep.cells:
            existing = find_completed(cell, done)
            if existing is not None:
                state = f"skip (run {existing})"
            else:
                interrupted = None if args.no_resume else resumable_run(runs_dir, cell)
                state = "run" if interrupted is None else f"resume (run {interrupted.name})"
            print(f"{cell.index:3d} {state:<16} {cell.label}")
        return 0
    most_workers = max(int(c.config["workers"]) for c in sweep.cells)
    cores = os.cpu_count() or 1
    if jobs * most_workers > cores:
        print(
            f"harness: note: {jobs} jobs x {most_workers} workers on {cores} cores; "
            f"wall-clock figures of these runs share cores",
            file=sys.stderr,
        )
    result = run_sweep(
        sweep, runs_dir, jobs, progress=not args.no_progress, resume=not args.no_resume
    )
    skipped = result.count("skipped")
    ran_ok = result.count("ran", "COMPLETED")
    resumed = result.count("resumed", "COMPLETED")
    failed = result.failed
    print(
        f"sweep {sweep.name}: {len(sweep.cells)} cells, {skipped} already completed, "
        f"{ran_ok} ran, {resumed} resumed, {len(failed)} not completed; runs in {runs_dir}"
    )
    for outcome in failed:
        print(
            f"  cell {outcome.cell.index} {outcome.cell.label}: {outcome.status}, log {outcome.log}"
        )
    return 1 if failed else 0


def _cell_main(argv: list[str]) -> int:
    """``python -m harness.sweep --cell CONFIG.json --runs-dir DIR``: run one cell."""
    parser = argparse.ArgumentParser(prog="python -m harness.sweep")
    parser.add_argument("--cell", required=True, help="JSON file with a completed run config")
    parser.add_argument("--runs-dir", required=True)
    args = parser.parse_args(argv)
    from harness.experiment import make_observer, start_run

    config = json.loads(Path(args.cell).read_text(encoding="utf-8"))
    try:
        # Sacred's INFO lines (run id, result) belong in the cell's log file.
        run = start_run(copy.deepcopy(config), [make_observer(args.runs_dir)], verbose=True)
    except BaseException as error:
        # Sacred has recorded the run as FAILED or INTERRUPTED; name it for the sweep.
        from harness.experiment import ex

        current = ex.current_run
        if current is not None and current._id is not None:
            status = "INTERRUPTED" if isinstance(error, KeyboardInterrupt) else "FAILED"
            print(f"{RESULT_PREFIX} {current._id} {status}", flush=True)
        raise
    print(f"{RESULT_PREFIX} {run._id} {run.status}", flush=True)
    return 0 if run.status == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(_cell_main(sys.argv[1:]))
