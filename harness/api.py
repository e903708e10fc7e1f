"""The harness from Python: ``harness.run``, ``harness.sweep``, ``harness.load_runs``,
``harness.report``.

For a notebook, or a script that drives studies of its own. Each function is the
command of the same name, not a second implementation: ``run`` goes through the
flags-to-config path of ``harness run`` (:func:`harness.launch.resolve_run_args`, then
:func:`harness.launch.check_can_start`), ``sweep`` and ``report`` parse their arguments
with the commands' own parsers and call the commands' entry functions. So the same
input is refused with the same one-line message, raised as
:class:`~harness.commands.UsageError` instead of printed and exited with, and a run
started here writes the ``config.json`` and ``metrics.json`` that ``harness run``
writes for the same knobs. Example::

    import harness

    result = harness.run(algo="optimes", env="CartPole", seed=0, timesteps=20_000,
                         sigma=0.05, backend="inline", runs_dir="runs/nb")
    result.metrics.plot(x="timesteps", y="eval_return_mean")
    outcome = harness.sweep("experiments/demo.yaml", runs_dir="runs/demo", jobs=2)
    table = harness.load_runs("runs/demo", algo="optimes", where={"sigma": 0.05})
    harness.report("runs/demo", out="reports/mine")

This works from any script as it stands (``python script.py``, ``python - < script.py``)
and from a notebook: no ``if __name__ == "__main__":`` block is needed. Evaluation
workers start from the harness's own code and never import the calling script
(:mod:`evaluation.spawning`); sweep cells are processes of their own
(``python -m harness.sweep``). So an env the script registers itself cannot reach the
workers: :func:`run` refuses it in one line unless ``backend="inline"``.

Importing :mod:`harness` imports none of this: each function imports what it needs
when called (Sacred, the algorithms, pandas).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from harness.commands import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from harness.replay import LoadedPolicy
    from harness.sweep.scheduler import CellOutcome

__all__ = [
    "RunError",
    "RunResult",
    "SweepOutcome",
    "UsageError",
    "load_runs",
    "report",
    "run",
    "sweep",
]


class RunError(RuntimeError):
    """A run that started and did not complete; ``run_dir`` is its record (None: no record).

    The message is the line ``harness run`` prints for it; the error that stopped the run
    is chained (``__cause__``), so a notebook shows its traceback too.
    """

    def __init__(self, message: str, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


@dataclass
class RunResult:
    """A stored run as read back: its directory, status, completed config and summary.

    ``metrics`` (one row per logged step: ``step`` and one column per metric, NaN where a
    metric was not logged at that step) is read when first used, as pandas is.
    """

    run_dir: Path
    status: str
    config: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dir(cls, run_dir: str | Path) -> RunResult:
        """Read a run directory (:mod:`harness.rundir`'s format, bounded as every reader)."""
        from harness import rundir

        folder = Path(run_dir)
        header = rundir.read_header(folder)
        summary: dict[str, Any] = {}
        if (folder / rundir.SUMMARY).is_file():
            with contextlib.suppress(rundir.UnreadableRun, OSError, ValueError):
                stored = rundir.read_json(folder / rundir.SUMMARY)
                summary = stored if isinstance(stored, dict) else {}
        if not summary:
            summary = dict(header.run.get("result") or {})
        return cls(folder, header.status, header.config, summary)

    def __repr__(self) -> str:
        """One line: which run, and how it ended (``config`` and ``summary`` hold the rest)."""
        return (
            f"RunResult(run_dir={str(self.run_dir)!r}, algo={self.config.get('algo')!r}, "
            f"env={self.config.get('env')!r}, seed={self.config.get('seed')!r}, "
            f"status={self.status!r})"
        )

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """Every logged metric: a ``step`` column and one column per metric."""
        from harness import rundir
        from harness.records import metrics_frame

        return metrics_frame(rundir.read_metrics(self.run_dir)).reset_index()

    def policy(self, **kwargs: Any) -> LoadedPolicy:
        """The trained policy, :func:`harness.load_policy` of this run; ``kwargs`` go to it
        (``imports=[...]`` for a run of your own env, ``deterministic``, ``source``)."""
        from harness.replay import load_policy

        return load_policy(self.run_dir, **kwargs)


# -- harness.run ---------------------------------------------------------------------------


def _yaml_text(value: Any) -> str:
    """A Python value as the YAML text ``--set KEY=TEXT`` reads back as the same value."""
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value)


def _as_flag(knob: Any, value: Any) -> Any:
    """A number given for a numeric flag, checked by the flag's own parser, so a bad one is
    refused with ``harness run``'s message (``argument --generations: ...``)."""
    from harness import schema

    numeric = knob.type in (int, float)
    if not numeric or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    try:
        return schema.flag_type(knob)(repr(value) if isinstance(value, float) else str(value))
    except argparse.ArgumentTypeError as error:
        where = "/".join(knob.flags)
        raise UsageError(f"argument {where}: {error} (see `harness run --help`)") from None


def _assignments(knobs: Mapping[str, Any]) -> list[str]:
    """``--set`` strings for the knobs that are not flags; ``policy={...}`` and
    ``params={...}`` are spelled out key by key (``policy.kind=linear``)."""
    out: list[str] = []
    for key, value in knobs.items():
        if key in ("policy", "params") and isinstance(value, Mapping):
            out += [f"{key}.{name}={_yaml_text(inner)}" for name, inner in value.items()]
        else:
            out.append(f"{key}={_yaml_text(value)}")
    return out


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Put this process's SIGINT and SIGTERM handlers back afterwards.

    A run latches stop signals while it starts and a sweep turns SIGTERM into
    KeyboardInterrupt (:mod:`harness.signals`): right for a command, which then exits,
    but a notebook's kernel lives on and keeps its own handling.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _progress(show: bool) -> Iterator[None]:
    """``HARNESS_PROGRESS`` for the duration of one call (``--no-progress``)."""
    saved = os.environ.get("HARNESS_PROGRESS")
    if not show:
        os.environ["HARNESS_PROGRESS"] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HARNESS_PROGRESS", None)
        else:
            os.environ["HARNESS_PROGRESS"] = saved


def run(
    algo: str | None = None,
    env: str | None = None,
    seed: int | None = 0,
    runs_dir: str | Path = "runs",
    imports: Sequence[str] | None = None,
    *,
    progress: bool = True,
    verbose: bool = False,
    oversubscribe: bool = False,
    **knobs: Any,
) -> RunResult:
    """Train one algorithm on one env as ``harness run`` does; the stored run, read back.

    ``knobs`` are the other flags of ``harness run`` by their knob names (``timesteps``,
    ``generations``, ``time_limit``, ``cpu_limit``, ``target_return``, ``episodes``,
    ``workers``, ``backend``, ``ray_address``) and anything ``--set`` takes
    (``sigma=0.05``, ``eval_every_timesteps=5000``, ``policy={"kind": "linear"}``);
    ``imports`` is ``--import``; ``defaults="my.yaml"`` is ``--defaults`` (per-env
    defaults of your own). Knobs not given take the env's defaults as on the
    command line. Raises :class:`~harness.commands.UsageError` for what ``harness run``
    refuses (same message, nothing written), :class:`RunError` when the run started and
    failed, and lets ``KeyboardInterrupt`` through (the run is then INTERRUPTED and
    ``harness resume`` continues it).
    """
    from harness import schema
    from harness.launch import check_can_start, resolve_run_args
    from harness.signals import latch_stop_signals

    flags = {knob.name: knob for knob in schema.KNOBS if knob.flags}
    values: dict[str, Any] = {knob.dest: None for knob in flags.values()}
    values.update(algo=algo, env=env, seed=seed)
    values[flags["imports"].dest] = list(imports) if imports is not None else None
    rest: dict[str, Any] = {}
    for key, value in knobs.items():
        if key in flags:
            values[flags[key].dest] = _as_flag(flags[key], value)
        else:
            rest[key] = value
    args = argparse.Namespace(**values, overrides=_assignments(rest))
    with _signals_kept(), _progress(progress):
        latch_stop_signals()  # as harness run: a stop while it starts waits for a checkpoint
        config = resolve_run_args(args).config
        folder = Path(runs_dir)
        check_can_start(config, folder, oversubscribe=oversubscribe)
        _check_env_outside_main(config)
        return _start(config, folder, verbose)


def _check_env_outside_main(config: Mapping[str, Any]) -> None:
    """Refuse an ES run on worker processes whose env is defined in ``__main__``.

    Workers do not import the calling script (:mod:`evaluation.spawning`), so they could
    not build an env registered from there: every worker would die in turn.
    """
    if config.get("backend") == "inline":
        return
    import gymnasium as gym

    from algorithms.registry import family_of
    from envs.registry import resolve_env_id

    if family_of(config.get("algo")) != "es":
        return  # an RL run's env processes are forked: they have the script's envs
    env = str(config.get("env"))
    spec = gym.registry.get(resolve_env_id(env))
    entry = getattr(spec, "entry_point", None)
    where = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    if where == "__main__":
        raise UsageError(
            f"env {env!r} is defined in the script that calls harness.run, which "
            f"{config.get('backend')} workers do not import: define it in a module and pass "
            "imports=['MODULE'] (or backend='inline')"
        )


def _start(config: dict[str, Any], runs_dir: Path, verbose: bool) -> RunResult:
    """Start the Sacred run of a checked config; its record, or :class:`RunError`."""
    from harness.experiment import run_failure_message, unrecorded_outcome
    from harness.launch import start_run

    try:
        sacred_run = start_run(config, runs_dir, verbose=verbose)
    except Exception as error:
        message = run_failure_message(error)
        if message is None:
            if not isinstance(error, OSError):
                raise
            message = f"cannot start a run in {runs_dir}: {error.strerror or error}"
            raise RunError(message) from error
        folder = _observer_dir()
        raise RunError(message, folder) from error
    run_dir = runs_dir / str(sacred_run._id)
    unrecorded = unrecorded_outcome()
    if unrecorded is not None:
        raise RunError(unrecorded, run_dir)
    return RunResult.from_dir(run_dir)


def _observer_dir() -> Path | None:
    from harness.experiment import ex

    for observer in ex.observers:
        if getattr(observer, "dir", None):
            return Path(observer.dir)
    return None


# -- harness.sweep ---------------------------------------------------------------------------


class _RaisingParser(argparse.ArgumentParser):
    """A sub-command's parser whose errors are raised as :class:`UsageError`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _parse(command: str, argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the flags of ``harness COMMAND`` (its module's ``add_arguments``)."""
    parser = _RaisingParser(prog=f"harness {command}")
    if command == "sweep":
        from harness.sweep import add_arguments
    else:
        from harness.report import add_arguments
    add_arguments(parser)
    return parser.parse_args(argv)


def _flags(options: Mapping[str, Any]) -> list[str]:
    """Keyword arguments as command-line flags: ``no_replay=True`` -> ``--no-replay``,
    a list repeats its flag, None and False leave it out."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


@dataclass
class SweepOutcome:
    """What ``harness.sweep`` did: every cell's outcome and, for completed cells, its run.

    ``runs`` holds the completed cells' runs (skipped ones included) in cell order;
    ``failed`` the outcomes of cells that did not complete (status FAILED, INTERRUPTED
    or CRASHED, with their log); ``exit_status`` is what ``harness sweep`` exits with.
    """

    name: str
    runs_dir: Path
    outcomes: list[CellOutcome]
    runs: list[RunResult]
    exit_status: int

    @property
    def completed(self) -> list[CellOutcome]:
        """The cells with a COMPLETED run."""
        return [o for o in self.outcomes if o.status == "COMPLETED"]

    @property
    def failed(self) -> list[CellOutcome]:
        """The cells without one."""
        return [o for o in self.outcomes if o.status != "COMPLETED"]


def _sweep_file(spec: Mapping[str, Any], runs_dir: Path) -> Path:
    """A sweep given as a dict, written where the runs go (``_sweeps/<name>.yaml``), so
    its messages name a file and the record of what ran stays beside the runs."""
    import re

    import yaml

    from harness.sweep.scheduler import BOOKKEEPING_DIR

    name = str(spec.get("name") or "sweep")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "sweep"
    folder = runs_dir / BOOKKEEPING_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe}.yaml"
    spec = dict(spec)
    if isinstance(spec.get("defaults"), (str, os.PathLike)):
        # a relative defaults file is the script's, not beside the file written here
        spec["defaults"] = str(Path(spec["defaults"]).expanduser().absolute())
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def sweep(
    file_or_dict: str | Path | Mapping[str, Any],
    runs_dir: str | Path = "runs",
    jobs: int | None = 1,
    *,
    set: Sequence[str] = (),  # the command's own flag name
    grid: Mapping[str, Sequence[Any]] | None = None,
    imports: Sequence[str] = (),
    progress: bool = True,
    **options: Any,
) -> SweepOutcome:
    """Run every cell of a sweep not yet completed in ``runs_dir``, as ``harness sweep``.

    ``file_or_dict``: a sweep file, or the same content as a dict (written to
    ``RUNS_DIR/_sweeps/NAME.yaml`` first). ``set`` (``["timesteps=5000"]``), ``grid``
    (``{"seed": [0, 1]}``) and ``imports`` are ``--set``, ``--grid`` and ``--import``;
    ``jobs=None`` takes the file's ``jobs``; further ``options`` are the command's other
    flags (``no_resume=True``, ``ray_address="auto"``, ``force=True``). Each cell runs
    in its own process, so a failing cell is an outcome, not an exception. Raises
    :class:`~harness.commands.UsageError` for what ``harness sweep`` refuses.
    """
    folder = Path(runs_dir)
    if isinstance(file_or_dict, Mapping):
        from harness.commands import check_runs_dir

        check_runs_dir(folder)
        path = _sweep_file(file_or_dict, folder)
    else:
        path = Path(file_or_dict)
    argv = [str(path), "--runs-dir", str(folder)]
    argv += _flags({"jobs": jobs, "set": list(set), "import": list(imports)})
    argv += _flags({"grid": [f"{k}={','.join(map(str, v))}" for k, v in (grid or {}).items()]})
    argv += _flags({"no_progress": not progress, **options})
    args = _parse("sweep", argv)
    if getattr(args, "dry_run", False):
        raise UsageError("dry_run: list the cells with `harness sweep FILE --dry-run`")
    from harness.sweep.command import run_command

    with _signals_kept():
        status, result = run_command(args)
    assert result is not None  # not a dry run
    runs: list[RunResult] = []
    for outcome in result.outcomes:
        if outcome.status == "COMPLETED" and outcome.run_id is not None:
            runs.append(RunResult.from_dir(folder / outcome.run_id))
    return SweepOutcome(result.sweep.name, folder, list(result.outcomes), runs, status)


# -- harness.load_runs, harness.report -------------------------------------------------------


def _paths(paths: str | Path | Iterable[str | Path]) -> list[str]:
    if isinstance(paths, (str, Path)):
        return [str(paths)]
    return [str(p) for p in paths]


def load_runs(
    paths: str | Path | Iterable[str | Path],
    algo: str | Sequence[str] | None = None,
    env: str | None = None,
    sweep: str | None = None,
    where: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    steps: bool = False,
    statuses: Sequence[str] = ("COMPLETED",),
) -> pd.DataFrame:
    """Stored runs as a pandas DataFrame, filtered as ``harness report`` filters them.

    ``paths``: runs directories, run directories or run archives (``runs.tar.xz``).
    One row per run (config flattened as ``params.sigma``, final and best evaluation
    return, wall time, host), or with ``steps=True`` one row per (run, logged step).
    ``algo`` (one or several), ``env`` (short name or gymnasium id), ``sweep`` and
    ``where`` (``{"sigma": 0.05}`` or ``["sigma=0.05"]``: config values, compared with
    types) keep the matching runs; ``statuses``: which runs count (COMPLETED only by
    default, as in a report). Raises :class:`~harness.commands.UsageError` when a path
    is missing or a filter leaves no run (the message names it).
    """
    from harness.records import UnreadableRun
    from harness.records import load_runs as read_runs

    listed = _paths(paths)
    for raw in listed:
        if not Path(raw).exists():
            raise UsageError(f"runs directory {raw!r} does not exist")
    try:
        table = read_runs(listed)  # archives unpacked within the readers' bounds
    except UnreadableRun as error:
        raise UsageError(str(error)) from None
    if len(table):
        table = table.select(tuple(statuses))
    table = _filtered(table, algo, env, sweep, where)
    return (table.steps if steps else table.runs).reset_index(drop=True)


def _filtered(
    table: Any,
    algo: str | Sequence[str] | None,
    env: str | None,
    sweep: str | None,
    where: Mapping[str, Any] | Sequence[str] | None,
) -> Any:
    """The report's filters (:mod:`harness.report.filters`) applied to a run table."""
    if not (algo or env or sweep or where):
        return table
    try:
        from harness.report import filters
    except ImportError:  # a harness without the report's filters
        raise UsageError("filtering runs needs harness.report.filters") from None
    algos = (algo,) if isinstance(algo, str) else tuple(algo or ())
    try:
        chosen = filters.make_filters(algos, env, sweep, where or ())
        return filters.apply(table, chosen)
    except filters.FilterError as error:
        raise UsageError(str(error)) from None


def report(
    paths: str | Path | Iterable[str | Path],
    out: str | Path,
    **options: Any,
) -> Path:
    """Write a report from stored runs, as ``harness report PATHS --out OUT``; its
    ``report.md`` (``report.html``, ``runs.csv`` and ``summary.csv`` lie beside it).

    ``options`` are the command's flags by name: ``title``, ``note``, ``no_replay=True``,
    ``imports=[...]`` (``--import``), ``all_statuses=True``, and the run filters and
    thresholds the installed ``harness report --help`` lists (``algo``, ``env``,
    ``sweep``, ``where``, ``threshold``). Raises :class:`~harness.commands.UsageError` for
    what the command refuses, an unknown option included.
    """
    renamed = {"import" if key == "imports" else key: value for key, value in options.items()}
    if isinstance(renamed.get("where"), Mapping):
        renamed["where"] = [f"{k}={_yaml_text(v)}" for k, v in renamed["where"].items()]
    argv = [*_paths(paths), "--out", str(out), *_flags(renamed)]
    args = _parse("report", argv)
    from harness.report import run as report_command

    report_command(args)
    return Path(out) / "report.md"
