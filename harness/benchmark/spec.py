"""The benchmark file: tasks, held-out seeds, per-cell cost estimates, and its cells.

``experiments/benchmark.yaml`` lists tasks; each names an env, one budget, the
algorithms to compare, a reference score for normalisation and the estimated
CPU-seconds of one cell per algorithm. Every (task, algorithm, seed) is one
sweep cell built by :func:`harness.sweep.spec.build_cell_config`, exactly as
``harness sweep`` builds its cells, so completed cells are skipped and
interrupted ones resumed in the same way. Cells run task by task in the file's
order, cheapest first within a task: a benchmark cut short holds whole tasks
(what the cross-task aggregate needs), and the file's order is its priority.

A task may also plan *equal-compute* cells (``equal_compute``): ES algorithms trained with
a CPU-seconds limit (``harness run --cpu-limit``) equal to what its RL entry spends on its
whole budget, so that the page can compare the families at the RL family's full compute
as well as at the cheapest run's. They are cells like the others (planned, costed at their
limit, run, archived), told apart by :meth:`Benchmark.is_equal_compute`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.config import BUDGET_KEYS, ConfigError, read_yaml
from harness.sweep.spec import Cell, Sweep, build_cell_config

BENCHMARK_KEYS = ("name", "description", "seeds", "workers", "tasks")
TASK_KEYS = (
    "env",
    "budget",
    "reference",
    "algos",
    "set",
    "overrides",
    "note",
    "cost_cpu_s",
    "equal_compute",
)
EQUAL_COMPUTE_KEYS = ("against", "algos", "cpu_limit", "paired", "set")
#: Reported results use seeds from here on; tuning uses seeds below it.
FIRST_HELD_OUT_SEED = 100

#: Bootstrap resamples of the benchmark's aggregate intervals (its profiles and P(X > Y) take
#: a tenth); ``benchmark report --resamples`` lowers them for a quick draft, within these bounds.
AGGREGATE_REPS = 20000
MIN_RESAMPLES, MAX_RESAMPLES = 100, 1_000_000


#: The random-policy reference scores: measured into a runs directory by ``benchmark run``,
#: committed beside the benchmark's report by ``benchmark report``.
RANDOM_SCORES = "random_scores.json"


def measured_random_scores(runs_dir: Path) -> Path:
    """Where ``benchmark run`` keeps the random-policy scores it measured for ``runs_dir``."""
    return runs_dir / "_benchmark" / RANDOM_SCORES


class BenchmarkError(ValueError):
    """A bad benchmark file; the message is one line naming the file and the value."""


@dataclass(frozen=True)
class EqualCompute:
    """A task's equal-compute cells: ``algos`` (ES) trained for ``cpu_limit`` CPU-seconds,
    the median CPU-seconds per run its RL entry ``against`` spent on its whole budget.

    ``cpu_limit`` is written in the file (a cell's identity must not move when an archive
    changes); the page sets it beside the archives' median and says where they differ.
    ``common`` adds settings to the task's ``set`` for these cells (a coarser evaluation
    interval, say, so that evaluation does not eat the limit).
    """

    against: str
    algos: list[str]
    #: the fixed limit, or None for pairs (``paired``)
    cpu_limit: float | None
    common: list[str] = field(default_factory=list)
    #: each ES cell runs beside a run of the RL cell of its seed, on one machine at one
    #: time, and stops at the CPU-seconds that run used (harness.pairing)
    paired: bool = False


@dataclass(frozen=True)
class Task:
    """One task of the benchmark: an env, its budget and the algorithms compared on it."""

    env: str
    budget: dict[str, Any]
    reference_score: float
    reference_source: str
    algos: list[str]
    common: list[str] = field(default_factory=list)
    overrides: dict[str, list[str]] = field(default_factory=dict)
    note: str = ""
    cost_cpu_s: dict[str, float] = field(default_factory=dict)
    equal_compute: EqualCompute | None = None


@dataclass
class Benchmark:
    """A parsed benchmark file and its cells (a :class:`Sweep` the scheduler can run)."""

    name: str
    path: Path
    seeds: list[int]
    workers: int
    tasks: list[Task]
    sweep: Sweep
    description: str = ""

    def task_of(self, cell: Cell) -> Task:
        """The task a cell belongs to."""
        return self.tasks[self._task_index[cell.index]]

    def cost_of(self, cell: Cell) -> float:
        """Estimated CPU-seconds of a cell (0 where the file gives none); an equal-compute
        cell's is its CPU limit."""
        task = self.task_of(cell)
        if self.is_equal_compute(cell) and cell.config.get("cpu_limit"):
            return float(cell.config["cpu_limit"])
        if self.is_equal_compute(cell) and task.equal_compute is not None:
            return float(task.cost_cpu_s.get(task.equal_compute.against, 0.0))  # a pair's side
        return float(task.cost_cpu_s.get(str(cell.config["algo"]), 0.0))

    def is_equal_compute(self, cell: Cell) -> bool:
        """Whether ``cell`` is one of its task's equal-compute cells (not one of its grid)."""
        return cell.index in self._equal_compute

    def timesteps_of(self, task: Task) -> dict[str, float]:
        """Each algorithm's timesteps budget on ``task``, its overrides applied."""
        budgets: dict[str, float] = {}
        for cell in self.sweep.cells:
            timesteps = cell.config.get("timesteps")
            if self.task_of(cell) is task and timesteps is not None:
                budgets[str(cell.config["algo"])] = float(timesteps)
        return budgets

    _task_index: dict[int, int] = field(default_factory=dict)
    #: indices of the equal-compute cells
    _equal_compute: set[int] = field(default_factory=set)

    def only(self, envs: list[str], algos: list[str], seeds: list[int] | None = None) -> Benchmark:
        """The same benchmark restricted to these tasks, algorithms and seeds (empty: all)."""
        seeds = seeds or []
        known_envs = [task.env for task in self.tasks]
        known_algos = sorted({algo for task in self.tasks for algo in task.algos})
        for value, known, what in (
            [(e, known_envs, "task") for e in envs]
            + [(a, known_algos, "algorithm") for a in algos]
            + [(str(s), [str(k) for k in self.seeds], "seed") for s in seeds]
        ):
            if value not in known:
                raise _fail(self.path, f"no {what} {value!r} here; known: {', '.join(known)}")
        cells = [
            cell
            for cell in self.sweep.cells
            if (not envs or self.task_of(cell).env in envs)
            and (not algos or str(cell.config["algo"]) in algos)
            and (not seeds or cell.config["seed"] in seeds)
        ]
        chosen_indices = {cell.index for cell in cells}
        partners = {
            other for pair in self.sweep.pairs if chosen_indices & set(pair) for other in pair
        }  # a pair runs whole: an --algo that picks one side picks both
        cells = [cell for cell in self.sweep.cells if cell.index in chosen_indices | partners]
        if not cells:
            chosen = [f"--task {e}" for e in envs] + [f"--algo {a}" for a in algos]
            chosen += [f"--seed {s}" for s in seeds]
            raise _fail(self.path, f"no cell matches {' '.join(chosen)}")
        sweep = replace(self.sweep, cells=cells)
        return replace(self, sweep=sweep)


def _fail(path: Path, message: str) -> BenchmarkError:
    return BenchmarkError(f"{path}: {message}")


def _strings(value: Any, where: str, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, f"{where} must be a list of strings")
    return list(value)


def _parse_task(data: Any, index: int, path: Path) -> Task:
    where = f"tasks[{index}]"
    if not isinstance(data, dict):
        raise _fail(path, f"{where} must be a mapping with env, budget, reference and algos")
    unknown = [key for key in data if key not in TASK_KEYS]
    if unknown:
        raise _fail(path, f"unknown key {where}.{unknown[0]}; known: {', '.join(TASK_KEYS)}")
    env = data.get("env")
    if not isinstance(env, str) or not env:
        raise _fail(path, f"{where}.env must be an env name, got {env!r}")
    budget = data.get("budget") or {}
    if not isinstance(budget, dict) or any(key not in BUDGET_KEYS for key in budget):
        raise _fail(path, f"{where}.budget must be a mapping of {', '.join(BUDGET_KEYS)}")
    reference = data.get("reference")
    if not isinstance(reference, dict) or not isinstance(reference.get("score"), (int, float)):
        raise _fail(path, f"{where}.reference must give a numeric score and its source")
    algos = _strings(data.get("algos"), f"{where}.algos", path)
    if not algos:
        raise _fail(path, f"{where}.algos is empty")
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise _fail(path, f"{where}.overrides must map algorithm names to key=value lists")
    costs = data.get("cost_cpu_s") or {}
    if not isinstance(costs, dict) or not all(
        isinstance(v, (int, float)) and v >= 0 for v in costs.values()
    ):
        raise _fail(path, f"{where}.cost_cpu_s must map algorithm names to CPU-seconds")
    equal = _parse_equal_compute(data.get("equal_compute"), algos, f"{where}.equal_compute", path)
    return Task(
        env=env,
        budget=dict(budget),
        reference_score=float(reference["score"]),
        reference_source=str(reference.get("source", "")),
        algos=algos,
        common=_strings(data.get("set"), f"{where}.set", path),
        overrides={
            str(a): _strings(v, f"{where}.overrides.{a}", path) for a, v in overrides.items()
        },
        note=str(data.get("note") or ""),
        cost_cpu_s={str(a): float(v) for a, v in costs.items()},
        equal_compute=equal,
    )


def _parse_equal_compute(
    data: Any, algos: list[str], where: str, path: Path
) -> EqualCompute | None:
    """A task's ``equal_compute`` mapping: ``against`` (an RL algorithm of the task),
    ``algos`` (ES algorithms of the task), ``cpu_limit`` (CPU-seconds) and ``set``."""
    from algorithms.registry import family_of

    if data is None:
        return None
    if not isinstance(data, dict):
        raise _fail(path, f"{where} must be a mapping of {', '.join(EQUAL_COMPUTE_KEYS)}")
    unknown = [key for key in data if key not in EQUAL_COMPUTE_KEYS]
    if unknown:
        raise _fail(
            path, f"unknown key {where}.{unknown[0]}; known: {', '.join(EQUAL_COMPUTE_KEYS)}"
        )
    against = data.get("against")
    if against not in algos or family_of(against) == "es":
        raise _fail(path, f"{where}.against must be an RL algorithm of the task, got {against!r}")
    chosen = _strings(data.get("algos"), f"{where}.algos", path)
    strays = [a for a in chosen if a not in algos or family_of(a) != "es"]
    if not chosen or strays:
        raise _fail(
            path,
            f"{where}.algos must be ES algorithms of the task, got "
            f"{strays[0] if strays else chosen}",
        )
    paired = data.get("paired", False)
    if not isinstance(paired, bool):
        raise _fail(path, f"{where}.paired must be true or false, got {paired!r}")
    limit = data.get("cpu_limit")
    if paired and limit is not None:
        raise _fail(path, f"{where}: paired cells take their partner's CPU-seconds, not cpu_limit")
    if not paired and (
        isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0
    ):
        raise _fail(path, f"{where}.cpu_limit must be positive CPU-seconds, got {limit!r}")
    return EqualCompute(
        str(against),
        chosen,
        None if paired else float(limit),  # type: ignore[arg-type]
        _strings(data.get("set"), f"{where}.set", path),
        paired,
    )


def load_benchmark(path: str | Path) -> Benchmark:
    """Parse and validate a benchmark file, building every cell's config up front."""
    path = Path(path)
    try:
        data = read_yaml(path)
    except ConfigError as error:
        raise BenchmarkError(str(error)) from None
    if not isinstance(data, dict):
        raise _fail(path, "a benchmark file must be a mapping with name, seeds and tasks")
    unknown = [key for key in data if key not in BENCHMARK_KEYS]
    if unknown:
        raise _fail(path, f"unknown key {unknown[0]!r}; known: {', '.join(BENCHMARK_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise _fail(path, f"name must be letters, digits, '_', '.' or '-', got {name!r}")
    seeds = data.get("seeds")
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise _fail(path, f"seeds must be a list of integers, got {seeds!r}")
    tuning = [s for s in seeds if s < FIRST_HELD_OUT_SEED]
    if tuning:
        raise _fail(
            path,
            f"seed {tuning[0]} is a tuning seed; reported results use seeds from "
            f"{FIRST_HELD_OUT_SEED} on",
        )
    workers = data.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise _fail(path, f"workers must be a positive integer, got {workers!r}")
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise _fail(path, "tasks must be a non-empty list")
    tasks = [_parse_task(item, i, path) for i, item in enumerate(raw_tasks)]

    # (task, cost, seed, algo's place, kind, pair's ES, config); kind: 0 the grid, 1 a fixed
    # CPU limit, 2 a pair's lead (the RL), 3 a pair's follower (the ES)
    planned: list[tuple[int, float, int, int, int, str, dict[str, Any]]] = []
    for t_index, task in enumerate(tasks):
        equal = task.equal_compute
        kinds = [(0, a, "", task.budget, task.common) for a in task.algos]
        extra = [*task.common, *equal.common] if equal is not None else []
        if equal is not None and equal.paired:
            for es in equal.algos:
                kinds.append((2, equal.against, es, task.budget, task.common))
                kinds.append((3, es, es, {"paired_with": equal.against}, extra))
        elif equal is not None:
            limit = {"cpu_limit": equal.cpu_limit}
            kinds += [(1, a, "", limit, extra) for a in equal.algos]
        for kind, algo, es, budget, common in kinds:
            lead_of = ["paired_with=" + es] if kind == 2 else []
            for seed in seeds:
                try:
                    config = build_cell_config(
                        name=name,
                        algo=algo,
                        env=task.env,
                        seed=seed,
                        episodes=1,
                        workers=workers,
                        backend=None,
                        budget=budget,
                        common=[*common, *lead_of],
                        per_algo=task.overrides.get(algo, []),
                    )
                except ConfigError as error:
                    what = " (equal compute)" if kind else ""
                    raise _fail(path, f"task {task.env} algo {algo}{what}: {error}") from None
                if kind == 1:
                    cost = float(config["cpu_limit"])
                else:  # a pair costs its lead's compute on each side
                    against = equal.against if kind and equal is not None else algo
                    cost = task.cost_cpu_s.get(against, 0.0)
                place = task.algos.index(es or algo)
                planned.append((t_index, cost, seed, place, kind, es, config))
    # Task by task; within a task cheapest first, then seed by seed (a pair's two together).
    planned.sort(key=lambda item: (*item[:4], min(item[4], 2)))
    cells = [Cell(i, item[6], _varied(item[4], item[6])) for i, item in enumerate(planned)]
    sweep = Sweep(name, path, cells, str(data.get("description") or "").strip(), 1)
    leads = {(item[0], item[2], item[5]): i for i, item in enumerate(planned) if item[4] == 2}
    sweep.pairs = [
        (leads[(item[0], item[2], item[5])], i) for i, item in enumerate(planned) if item[4] == 3
    ]
    description = str(data.get("description") or "").strip()
    bench = Benchmark(name, path, list(seeds), workers, tasks, sweep, description)
    bench._task_index = {i: item[0] for i, item in enumerate(planned)}
    bench._equal_compute = {i for i, item in enumerate(planned) if item[4]}
    return bench


def _varied(kind: int, config: dict[str, Any]) -> dict[str, Any]:
    """What a cell's label adds to its algorithm, env and seed: its CPU limit or its partner."""
    if kind == 1:
        return {"cpu_limit": _seconds(config["cpu_limit"])}
    return {"paired_with": config["paired_with"]} if kind else {}


def _seconds(value: Any) -> int | float:
    """A CPU limit as a cell's label shows it: whole seconds without a decimal point."""
    number = float(value)
    return int(number) if number.is_integer() else number
