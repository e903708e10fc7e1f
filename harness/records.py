"""Run records: read Sacred FileStorage run directories into tidy pandas frames.

It builds on :mod:`harness.rundir` (the run-directory format, the leaf layer)
and :mod:`harness.record_check` (the fields a reader relies on). Reports see stored
runs through it.

A run directory ``RUNS_DIR/<id>/`` holds ``config.json``, ``run.json``
(status ``RUNNING``, ``COMPLETED``, ``FAILED`` or ``INTERRUPTED``, host info,
result), ``metrics.json`` (``{name: {"steps", "values", "timestamps"}}``) and
artifacts. :func:`load_runs` turns any number of runs directories (or single
run directories) into a :class:`RunTable`:

``RunTable.steps``
    Tidy data, one row per (run, step): the run's identity columns, its config
    flattened, then one column per metric. Metrics logged only at some steps
    (``eval_return_mean``, ``eval_return_std``, ...) are NaN elsewhere.
``RunTable.runs``
    One row per run: the same config columns, status, final and best
    evaluation, wall time, throughput, bytes per generation and host info.

Column names
    Metric columns keep the names every algorithm logs (``timesteps``,
    ``episodes``, ``wall_time_s``, ``fitness_mean``, ``eval_return_mean``,
    ``bytes_to_workers``, ...). Config keys that would clash with them are
    renamed: ``episodes`` (episodes per fitness) is ``episodes_per_fitness``
    and the budget keys are ``budget_timesteps``, ``budget_generations``,
    ``budget_time_limit``, ``budget_target_return``. Nested sections are
    flattened with a dot (``params.sigma``, ``policy.kind``); lists become
    their JSON text (``policy.hidden_sizes`` = ``"[64, 64]"``) so every column
    can be grouped on. ``env`` is the name the run was configured with
    (``PendulumPO`` and ``Pendulum`` share the gymnasium id ``Pendulum-v1``);
    ``gym_id`` is the resolved id when the run recorded it.

Damaged directories
    A directory without a readable ``run.json`` or ``config.json``, or with a
    truncated ``metrics.json``, or a ``COMPLETED`` run without metrics, is
    skipped with a :class:`RunDirWarning` naming it. A ``FAILED`` or
    ``RUNNING`` run without metrics is kept in ``runs`` with no step rows.

The population log (``population.npz``, the artifact behind the UMAP map)
    A NumPy ``.npz`` archive written by :class:`PopulationLogWriter`. With ``G``
    logged generations of ``P`` candidates over ``D`` parameters:

    ============================ ================ ===================================
    key                          shape, dtype     meaning
    ============================ ================ ===================================
    ``format``                   (), str          ``"es-harness/population/1"``
    ``generation``               (G,) int64       the metrics' step of the generation
                                                  (1 = the first generation)
    ``fitness``                  (G, P) float64   each candidate's fitness in ask
                                                  order (mean return over its
                                                  episodes; ``-inf``: it failed)
    ``noise_index``              (G, P) int64     OpenAI-ES: start of the candidate's
                                                  slice of the noise table; -1 for
                                                  vector candidates
    ``sign``                     (G, P) int8      OpenAI-ES: +1/-1 (mirrored pairs);
                                                  0 for vector candidates
    ``sigma``                    (G,) float64     noise std of the generation
    ``noise_size``/``noise_seed`` (), int64        the noise table (``NoiseSpec``), the
                                                  seed resolved (never -1); 0 and 0
                                                  when there is none
    ``centre_generation``        (C,) int64       generations whose centre is stored
    ``centre``                   (C, D) float32   the centre *before* that
                                                  generation's update, i.e. the mean
                                                  its candidates were drawn around;
                                                  generation ``G + 1`` is the final
                                                  centre
    ``candidate_generation``     (H,) int64       optional: generations whose vector
    ``candidates``               (H, P, D) float32  candidates are stored (CMA,
                                                  Nevergrad)
    ============================ ================ ===================================

    An OpenAI-ES candidate ``i`` of generation ``g`` is rebuilt exactly as the
    workers built it: ``centre[g] + float32(sign[g, i] * sigma[g]) *
    noise[noise_index[g, i] : noise_index[g, i] + D]``, so its models can be
    mapped for every generation whose centre is stored (store centres every
    generation for the full map, every N generations for a sampled one).
    Algorithms with vector candidates store ``candidates`` or only centres.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness import rundir
from harness.rundir import (
    STATUSES,
    RunHeader,
    RunRecord,
    UnreadableRun,
    find_run_dirs,
    metrics_look_complete,
    read_run,
    scan_runs,
    stored_location,
)

if TYPE_CHECKING:  # pandas costs a third of a second to import; a training run needs none
    import pandas as pd

__all__ = [
    "POPULATION_ARTIFACT",
    "POPULATION_FORMAT",
    "STATUSES",
    "PopulationLog",
    "PopulationLogWriter",
    "RunDirWarning",
    "RunHeader",
    "RunRecord",
    "RunTable",
    "UnreadableRun",
    "find_run_dirs",
    "load_runs",
    "metrics_look_complete",
    "read_population",
    "read_run",
    "scan_runs",
]

POPULATION_ARTIFACT = rundir.POPULATION
POPULATION_FORMAT = "es-harness/population/1"

#: Config keys renamed in frames because a metric has the same name.
RENAMED_CONFIG = {
    "episodes": "episodes_per_fitness",
    "timesteps": "budget_timesteps",
    "generations": "budget_generations",
    "time_limit": "budget_time_limit",
    "cpu_limit": "budget_cpu_limit",
    "target_return": "budget_target_return",
    "paired_with": "budget_paired_with",
    "endpoint_episodes": "endpoint_episodes_set",
}
#: Columns identifying a run, first in both frames.
ID_COLUMNS = ("run", "run_id", "run_dir", "status")


class RunDirWarning(UserWarning):
    """A run directory was skipped (or read only in part); the message names it."""


# -- flattening ----------------------------------------------------------------


def _cell(value: Any) -> Any:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def flatten_config(config: dict[str, Any]) -> dict[str, Any]:
    """A config as frame columns (see the module docstring for the renames)."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            for sub, sub_value in value.items():
                flat[f"{key}.{sub}"] = _cell(sub_value)
        else:
            flat[RENAMED_CONFIG.get(key, key)] = _cell(value)
    return flat


def host_columns(run: dict[str, Any]) -> dict[str, Any]:
    """Machine facts from ``run.json``: its host info (where it started; ``cpu_count`` when
    it was recorded), the most workers a resume gave it (``harness resume --workers``; NaN
    when none changed the count) and how many times it was carried to another machine."""
    host = run.get("host") or {}
    system = host.get("os") or []
    cpu_count = host.get("cpu_count")
    resumed_workers = [
        entry[key]
        for entry in run.get("resumed") or []
        if isinstance(entry, dict)
        for key in ("workers", "previous_workers")
        if isinstance(entry.get(key), int)
    ]
    return {
        "workers_resumed_max": float(max(resumed_workers)) if resumed_workers else math.nan,
        "carried": len(run.get("carried") or []),
        "host_name": host.get("hostname"),
        "host_cpu": host.get("cpu"),
        "host_platform": system[1] if len(system) > 1 else (system[0] if system else None),
        "host_python": host.get("python_version"),
        "host_cpu_count": float(cpu_count) if isinstance(cpu_count, (int, float)) else math.nan,
    }


def metrics_frame(metrics: dict[str, dict[str, list[Any]]]) -> pd.DataFrame:
    """One row per step, one column per metric; NaN where a metric was not logged."""
    import pandas as pd

    columns: dict[str, pd.Series] = {}
    for name, series in metrics.items():
        values = pd.to_numeric(
            pd.Series(series.get("values", []), dtype=object), errors="coerce"
        ).astype(float)
        steps = pd.Series(series.get("steps", []), dtype="int64")
        frame = pd.Series(values.to_numpy(), index=steps.to_numpy(), name=name)
        # A resumed run may log a step twice; the later value wins.
        columns[name] = frame[~frame.index.duplicated(keep="last")]
    if not columns:
        return pd.DataFrame(index=pd.Index([], name="step", dtype="int64"))
    frame = pd.concat(columns, axis=1).sort_index()
    frame.index.name = "step"
    return frame


def _last_valid(series: pd.Series) -> float:
    valid = series.dropna()
    return float(valid.iloc[-1]) if len(valid) else math.nan


def _npy_size(path: Path | None) -> float:
    if path is None:
        return math.nan
    try:
        return float(np.load(path, mmap_mode="r", allow_pickle=False).size)
    except (OSError, ValueError):
        return math.nan


def summarise(record: RunRecord, steps: pd.DataFrame) -> dict[str, Any]:
    """The per-run facts a report needs, from a run's metrics frame."""
    import pandas as pd

    result = record.run.get("result") or {}

    def column(name: str) -> pd.Series:
        return steps[name] if name in steps else pd.Series(dtype=float)

    wall = column("wall_time_s")
    timesteps = column("timesteps")
    final_wall = _last_valid(wall)
    final_steps = _last_valid(timesteps)
    deltas = wall.dropna().diff().dropna()
    summary = {
        "final_eval_return": _last_valid(column("eval_return_mean")),
        "final_eval_std": _last_valid(column("eval_return_std")),
        "best_eval_return": float(column("eval_return_mean").max())
        if column("eval_return_mean").notna().any()
        else math.nan,
        "final_timesteps": final_steps,
        "final_episodes": _last_valid(column("episodes")),
        "final_wall_time_s": final_wall,
        "generations": float(steps.index.max()) if len(steps.index) else 0.0,
        "steps_per_s": final_steps / final_wall if final_wall and final_wall > 0 else math.nan,
        "time_per_generation_s": float(deltas.median()) if len(deltas) else math.nan,
        "bytes_to_workers_per_gen": float(column("bytes_to_workers").mean()),
        "bytes_from_workers_per_gen": float(column("bytes_from_workers").mean()),
        "stop_reason": result.get("stop_reason") if isinstance(result, dict) else None,
        "gym_id": result.get("env") if isinstance(result, dict) else None,
        "start_time": record.run.get("start_time"),
        "stop_time": record.run.get("stop_time"),
        "n_params": _npy_size(record.artifact_path(rundir.FINAL_PARAMS)),
        "has_population_log": record.artifact_path(POPULATION_ARTIFACT) is not None,
    }
    if not summary["gym_id"]:
        summary["gym_id"] = record.config.get("env")
    return summary


# -- many runs -------------------------------------------------------------------


@dataclass
class RunTable:
    """Runs read from disk: tidy per-step data, a per-run summary and the records."""

    steps: pd.DataFrame
    runs: pd.DataFrame
    records: dict[str, RunRecord]
    skipped: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.runs)

    def record(self, run: str) -> RunRecord:
        """The record of the run labelled ``run`` (the ``run`` column)."""
        return self.records[run]

    def select(self, statuses: Sequence[str]) -> RunTable:
        """The runs whose status is one of ``statuses``."""
        keep = self.runs["status"].isin(list(statuses)) if len(self.runs) else []
        runs = self.runs[keep].reset_index(drop=True)
        labels = set(runs["run"]) if len(runs) else set()
        steps = (
            self.steps[self.steps["run"].isin(labels)].reset_index(drop=True)
            if len(self.steps)
            else self.steps
        )
        records = {k: v for k, v in self.records.items() if k in labels}
        return RunTable(steps, runs, records, list(self.skipped))


def _labels(dirs: list[Path]) -> list[str]:
    """Short unique labels: ``<runs dir name>/<id>``, the full path where those clash."""
    short = [f"{d.parent.name}/{d.name}" for d in dirs]
    if len(set(short)) == len(short):
        return short
    return [str(d.resolve()) for d in dirs]


def load_runs(paths: Iterable[str | Path]) -> RunTable:
    """Read every run under ``paths`` (runs directories or run directories).

    Damaged directories, and runs with a field a reader cannot use
    (:func:`harness.record_check.check_record`), are skipped with a :class:`RunDirWarning`.
    Raises :class:`UnreadableRun` when a path is not a directory.
    """
    import pandas as pd

    from harness.record_check import check_record

    dirs = find_run_dirs(paths)
    labels = _labels(dirs)
    step_frames: list[pd.DataFrame] = []
    rows: list[dict[str, Any]] = []
    records: dict[str, RunRecord] = {}
    skipped: list[str] = []
    for label, path in zip(labels, dirs, strict=True):
        try:
            record = read_run(path)
            check_record(record)
        except UnreadableRun as error:
            warnings.warn(f"skipping run directory {path}: {error}", RunDirWarning, stacklevel=2)
            skipped.append(f"{path}: {error}")
            continue
        identity = {
            "run": label,
            "run_id": record.run_id,
            "run_dir": stored_location(path),
            "status": record.status,
        }
        config = flatten_config(record.config)
        steps = metrics_frame(record.metrics)
        rows.append({**identity, **config, **summarise(record, steps), **host_columns(record.run)})
        records[label] = record
        if len(steps):
            frame = steps.reset_index()
            for key, value in reversed(list({**identity, **config}.items())):
                frame.insert(0, key, value)
            step_frames.append(frame)
    runs = pd.DataFrame(rows)
    steps_all = (
        pd.concat(step_frames, ignore_index=True)
        if step_frames
        else pd.DataFrame(columns=[*ID_COLUMNS, "step"])
    )
    return RunTable(steps_all, runs, records, skipped)


# -- the population log -----------------------------------------------------------


@dataclass
class PopulationLog:
    """A run's ``population.npz`` (see the module docstring for the format)."""

    generation: np.ndarray
    fitness: np.ndarray
    noise_index: np.ndarray
    sign: np.ndarray
    sigma: np.ndarray
    noise_size: int
    noise_seed: int
    centre_generation: np.ndarray
    centre: np.ndarray
    candidate_generation: np.ndarray | None = None
    candidates: np.ndarray | None = None

    @property
    def uses_noise_table(self) -> bool:
        """True when candidates are (noise index, sign) pairs (OpenAI-ES)."""
        return self.noise_size > 0 and bool(np.all(self.noise_index >= 0))

    def fitness_of(self, generation: int) -> np.ndarray | None:
        rows = np.flatnonzero(self.generation == generation)
        return self.fitness[rows[0]] if len(rows) else None


#: Most bytes a run's ``population.npz`` may unpack to (a centre of the 6,536-parameter Ant
#: MLP per generation for 10,000 generations is 261 MB).
POPULATION_MAX_BYTES = 512 * 2**20


def _check_population_sizes(path: Path) -> None:
    """Refuse (ValueError) a population log that is not a regular file, or whose members
    would unpack past :data:`POPULATION_MAX_BYTES` or hold fewer bytes than their array
    headers promise: numpy allocates an array from its header before reading its data, and
    a few KB of deflated zeros unpack to gigabytes."""
    import zipfile

    fmt = np.lib.format
    try:
        stream = rundir.open_regular(path)
    except rundir.UnreadableRun as error:
        raise ValueError(str(error)) from None
    try:
        archive = zipfile.ZipFile(stream)
    except zipfile.BadZipFile as error:
        stream.close()
        raise ValueError(f"not a numpy .npz file ({error})") from None
    with stream, archive:
        members = archive.infolist()
        total = sum(member.file_size for member in members)
        if total > POPULATION_MAX_BYTES:
            raise ValueError(
                f"it unpacks to {rundir.format_size(total)}, over the "
                f"{rundir.format_size(POPULATION_MAX_BYTES)} limit"
            )
        for member in members:
            with archive.open(member) as data:
                version = fmt.read_magic(data)
                if version == (1, 0):
                    shape, _, dtype = fmt.read_array_header_1_0(data)
                else:
                    shape, _, dtype = fmt.read_array_header_2_0(data)
                needed = math.prod(shape) * dtype.itemsize
                if needed > member.file_size:
                    raise ValueError(
                        f"member {member.filename!r} promises {needed:,} bytes, holds "
                        f"{member.file_size:,}"
                    )


def read_population(run_dir: str | Path) -> PopulationLog | None:
    """The run's population log, or None when it has none; a damaged one warns."""
    path = Path(run_dir) / POPULATION_ARTIFACT
    if not path.is_file():
        return None
    try:
        _check_population_sizes(path)
        with np.load(path, allow_pickle=False) as data:
            fmt = str(data["format"]) if "format" in data else ""
            if fmt != POPULATION_FORMAT:
                raise ValueError(f"unknown format {fmt!r}")
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, KeyError, EOFError) as error:
        warnings.warn(f"ignoring population log {path}: {error}", RunDirWarning, stacklevel=2)
        return None
    try:
        generation = np.asarray(arrays["generation"], dtype=np.int64)
        fitness = np.asarray(arrays["fitness"], dtype=np.float64)
        rows = len(generation)
        width = fitness.shape[1] if fitness.ndim == 2 else 0
        log = PopulationLog(
            generation=generation,
            fitness=fitness.reshape(rows, width),
            noise_index=np.asarray(
                arrays.get("noise_index", np.full((rows, width), -1)), dtype=np.int64
            ),
            sign=np.asarray(arrays.get("sign", np.zeros((rows, width))), dtype=np.int8),
            sigma=np.asarray(arrays.get("sigma", np.zeros(rows)), dtype=np.float64),
            noise_size=int(arrays.get("noise_size", 0)),
            noise_seed=int(arrays.get("noise_seed", 0)),
            centre_generation=np.asarray(arrays["centre_generation"], dtype=np.int64),
            centre=np.asarray(arrays["centre"], dtype=np.float32),
            candidate_generation=np.asarray(arrays["candidate_generation"], dtype=np.int64)
            if "candidate_generation" in arrays
            else None,
            candidates=np.asarray(arrays["candidates"], dtype=np.float32)
            if "candidates" in arrays
            else None,
        )
    except (KeyError, ValueError) as error:
        warnings.warn(f"ignoring population log {path}: {error}", RunDirWarning, stacklevel=2)
        return None
    if log.centre.ndim != 2 or len(log.centre) != len(log.centre_generation):
        warnings.warn(
            f"ignoring population log {path}: centre and centre_generation disagree",
            RunDirWarning,
            stacklevel=2,
        )
        return None
    return log


class PopulationLogWriter:
    """Collects a run's population log in memory and writes ``population.npz``.

    ``centre_every`` = N stores the centre of generations 1, 1+N, 1+2N, ...
    (and the final centre); fitness, noise indices and signs of every
    generation are always kept. Use from the runner::

        writer = PopulationLogWriter(centre_every=1, noise_size=..., noise_seed=...)
        writer.add_generation(g, fitness, centre_before_update, sigma, noise_index, sign)
        writer.add_final_centre(centre)
        writer.save(folder / POPULATION_ARTIFACT)
    """

    def __init__(self, centre_every: int = 1, noise_size: int = 0, noise_seed: int = 0) -> None:
        if centre_every < 1:
            raise ValueError(f"centre_every must be >= 1, got {centre_every}")
        self.centre_every = centre_every
        self.noise_size = int(noise_size)
        self.noise_seed = int(noise_seed)
        self.generation: list[int] = []
        self.fitness: list[np.ndarray] = []
        self.noise_index: list[np.ndarray] = []
        self.sign: list[np.ndarray] = []
        self.sigma: list[float] = []
        self.centre_generation: list[int] = []
        self.centre: list[np.ndarray] = []
        self.candidate_generation: list[int] = []
        self.candidates: list[np.ndarray] = []

    def add_generation(
        self,
        generation: int,
        fitness: np.ndarray,
        centre: np.ndarray | None,
        sigma: float = 0.0,
        noise_index: np.ndarray | None = None,
        sign: np.ndarray | None = None,
        candidates: np.ndarray | None = None,
    ) -> None:
        """Log generation ``generation`` (1-based); ``centre`` is the pre-update mean."""
        fitness = np.asarray(fitness, dtype=np.float64).ravel()
        width = fitness.size
        self.generation.append(int(generation))
        self.fitness.append(fitness)
        self.noise_index.append(
            np.full(width, -1, np.int64)
            if noise_index is None
            else np.asarray(noise_index, np.int64).ravel()
        )
        self.sign.append(
            np.zeros(width, np.int8) if sign is None else np.asarray(sign, np.int8).ravel()
        )
        self.sigma.append(float(sigma))
        if centre is not None and (generation - 1) % self.centre_every == 0:
            self.centre_generation.append(int(generation))
            self.centre.append(np.asarray(centre, np.float32).ravel().copy())
            if candidates is not None:
                self.candidate_generation.append(int(generation))
                self.candidates.append(np.asarray(candidates, np.float32).copy())

    def add_final_centre(self, centre: np.ndarray) -> None:
        """Store the centre after the last update as generation ``last + 1``."""
        final = (self.generation[-1] if self.generation else 0) + 1
        if final not in self.centre_generation:
            self.centre_generation.append(final)
            self.centre.append(np.asarray(centre, np.float32).ravel().copy())

    def state_dict(self) -> dict[str, Any]:
        """For checkpoints: everything collected so far."""
        return {
            key: list(value) if isinstance(value, list) else value
            for key, value in vars(self).items()
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        vars(self).update(state)

    def save(self, path: str | Path) -> None:
        """Write the archive (compressed) to ``path``."""
        width = max((f.size for f in self.fitness), default=0)

        def pad(rows: list[np.ndarray], fill: Any, dtype: Any) -> np.ndarray:
            out = np.full((len(rows), width), fill, dtype=dtype)
            for i, row in enumerate(rows):
                out[i, : row.size] = row
            return out

        dim = self.centre[0].size if self.centre else 0
        arrays: dict[str, np.ndarray] = {
            "format": np.array(POPULATION_FORMAT),
            "generation": np.asarray(self.generation, np.int64),
            "fitness": pad(self.fitness, np.nan, np.float64),
            "noise_index": pad(self.noise_index, -1, np.int64),
            "sign": pad(self.sign, 0, np.int8),
            "sigma": np.asarray(self.sigma, np.float64),
            "noise_size": np.array(self.noise_size, np.int64),
            "noise_seed": np.array(self.noise_seed, np.int64),
            "centre_generation": np.asarray(self.centre_generation, np.int64),
            "centre": np.stack(self.centre) if self.centre else np.zeros((0, dim), np.float32),
        }
        if self.candidates:
            arrays["candidate_generation"] = np.asarray(self.candidate_generation, np.int64)
            arrays["candidates"] = np.stack(self.candidates)
        with open(path, "wb") as stream:
            np.savez_compressed(stream, **arrays)  # type: ignore[arg-type]
