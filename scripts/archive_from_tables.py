"""Rebuild a report's run archive (``runs.tar.xz``) from its tables, when the runs are gone.

A report written by ``harness report`` holds ``runs.csv`` (tidy: one row per run and
step, the config flattened with dots, every metric) and ``summary.csv`` (one row per
run). This script turns them back into run directories and packs them with
:func:`harness.rundir.write_run_archive`, so that ``harness report runs.tar.xz`` redraws
the report with the current code::

    python scripts/archive_from_tables.py reports/NAME          # writes reports/NAME/runs.tar.xz
    python scripts/archive_from_tables.py reports/NAME --check  # and reads the tables back

Per run (numbered 1..N in ``summary.csv``'s order, so that runs from several runs
directories cannot clash):

``config.json``
    the config columns unflattened (``params.sigma`` -> ``{"params": {"sigma": ...}}``,
    ``budget_timesteps`` -> ``timesteps``), each value typed by the current schema or
    the algorithm's config dataclass; an empty cell is left out unless that key's
    default is None.
``metrics.json``
    Sacred's format, ``{name: {"steps", "values", "timestamps"}}``: a metric's steps are
    the rows where its column has a value. The tables kept no timestamps: each is the
    run's start time plus its ``wall_time_s`` at that step.
``run.json``
    status, start and stop time, host (name, CPU, platform, Python, CPU count), result
    (stop reason, gymnasium id) as the tables recorded them, and ``rebuilt_from_tables``:
    the run's label and directory in the original report.
``summary.json``
    CPU-seconds, the parameter count, SB3's policy text, time to target and the
    wall-clock breakdown, where the columns hold them.

What the tables never held is not invented: no population logs (so no map of visited
models), no final parameters, no captured output, and the runs the report left out
(statuses not selected) are absent.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import schema
from harness.config import param_types
from harness.records import ID_COLUMNS, RENAMED_CONFIG
from harness.rundir import CONFIG, METRICS, RUN, SUMMARY, write_run_archive

ARCHIVE = "runs.tar.xz"
SCRIPT = "scripts/archive_from_tables.py"

#: summary.csv columns a report derives (records.summarise, host_columns, run_extras, scores).
SUMMARISED = {
    "final_eval_return", "final_eval_std", "best_eval_return", "final_timesteps",
    "final_episodes", "final_wall_time_s", "generations", "steps_per_s",
    "time_per_generation_s", "bytes_to_workers_per_gen", "bytes_from_workers_per_gen",
    "stop_reason", "gym_id", "start_time", "stop_time", "n_params", "has_population_log",
}  # fmt: skip
HOST = {"host_name", "host_cpu", "host_platform", "host_python", "host_cpu_count"}
EXTRAS = {
    "cpu_seconds", "sb3_policy", "target_value", "first_crossing_s", "first_crossing_timesteps",
    "confirmed_s", "confirmed_timesteps", "confirmed_return", "time_to_target_s",
    "time_to_target_kind", "group", "score_common_timesteps", "score_common_wall",
}  # fmt: skip
BREAKDOWN = "time."
CONFIG_NAMES = {flat: key for key, flat in RENAMED_CONFIG.items()}


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames or []), list(reader)


def number(text: str) -> float | int:
    value = float(text)
    if value.is_integer() and "." not in text and "e" not in text.lower():
        return int(value)
    return value


def generic(text: str) -> Any:
    """A cell as the value it most likely was: JSON list/dict, bool, number or text."""
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return text
    if text in ("True", "False"):
        return text == "True"
    try:
        return number(text)
    except ValueError:
        return text


def typed(text: str, expected: Any) -> Any:
    """A cell as the declared type (int, float, bool, str, list), else :func:`generic`."""
    from harness.config import _base_type

    kind = _base_type(expected)
    try:
        if kind is bool:
            return text == "True"
        if kind is int:
            return int(float(text))
        if kind is float:
            return float(text)
        if kind is str:
            return text
        if kind is list:
            return json.loads(text)
    except ValueError:
        pass
    return generic(text)


def algorithm_fields(algo: str) -> dict[str, tuple[Any, Any]]:
    """The algorithm's config fields: name -> (annotation, default); {} if unknown now."""
    import dataclasses

    from algorithms.registry import get_algorithm

    try:
        config_type = get_algorithm(algo).Config
    except Exception:  # an algorithm the current code no longer has
        return {}
    defaults = {
        f.name: (f.default if f.default is not dataclasses.MISSING else ...)
        for f in dataclasses.fields(config_type)
    }
    return {name: (kind, defaults[name]) for name, kind in param_types(config_type).items()}


def rebuild_config(row: dict[str, str], columns: list[str]) -> dict[str, Any]:
    """The run's ``config.json`` from its ``summary.csv`` row."""
    fields = algorithm_fields(row["algo"])
    config: dict[str, Any] = {}
    for column in columns:
        text = row[column]
        section, dot, key = column.partition(".")
        if dot and section == "params":
            kind, default = fields.get(key, (None, ...))
            if text == "" and default is not None:
                continue
            value = None if text == "" else (typed(text, kind) if kind else generic(text))
            config.setdefault("params", {})[key] = value
            continue
        name = column if dot else CONFIG_NAMES.get(column, column)
        knob = schema.find(name) if dot else schema.BY_NAME.get(name)
        if text == "" and (knob is None or knob.default is not None):
            continue
        value = None if text == "" else (typed(text, knob.type) if knob else generic(text))
        if dot:
            config.setdefault(section, {})[key] = value
        else:
            config[name] = value
    return config


def _stamp(start: str, seconds: float) -> str:
    try:
        began = datetime.datetime.fromisoformat(start)
    except ValueError:
        return start
    return (began + datetime.timedelta(seconds=seconds)).isoformat()


def rebuild_metrics(rows: list[dict[str, str]], names: list[str], start: str) -> dict[str, Any]:
    """``metrics.json`` from the run's rows of ``runs.csv``."""
    rows = sorted(rows, key=lambda r: int(float(r["step"])))
    stamps, wall = [], 0.0
    for r in rows:
        if r.get("wall_time_s"):
            wall = float(r["wall_time_s"])
        stamps.append(_stamp(start, wall))
    metrics: dict[str, Any] = {}
    for name in names:
        steps, values, times = [], [], []
        for r, stamp in zip(rows, stamps, strict=True):
            if r.get(name, "") != "":
                steps.append(int(float(r["step"])))
                values.append(number(r[name]))
                times.append(stamp)
        if steps:
            metrics[name] = {"steps": steps, "values": values, "timestamps": times}
    return metrics


def present(row: dict[str, str], key: str) -> bool:
    return row.get(key, "") not in ("", "nan")


def rebuild_summary(row: dict[str, str], columns: list[str]) -> dict[str, Any]:
    """``summary.json``: what the runner's summary held, as far as the columns tell."""
    summary: dict[str, Any] = {}
    for key in ("cpu_seconds", "n_params"):
        if present(row, key):
            summary[key] = number(row[key])
    if present(row, "sb3_policy"):
        summary["sb3_policy"] = row["sb3_policy"]
    if present(row, "target_value"):
        target: dict[str, Any] = {"return": number(row["target_value"])}
        if present(row, "first_crossing_s"):
            target["first_crossing"] = {
                "wall_time_s": float(row["first_crossing_s"]),
                "timesteps": number(row["first_crossing_timesteps"]),
            }
        if present(row, "confirmed_s"):
            target["confirmed"] = {
                "wall_time_s": float(row["confirmed_s"]),
                "timesteps": number(row["confirmed_timesteps"]),
                "return_mean": float(row["confirmed_return"]),
            }
        summary["target"] = target
    breakdown = {
        column.removeprefix(BREAKDOWN): float(row[column])
        for column in columns
        if column.startswith(BREAKDOWN) and present(row, column)
    }
    if breakdown:
        summary["time_breakdown"] = breakdown
    return summary


def rebuild_run(row: dict[str, str]) -> dict[str, Any]:
    """``run.json`` as the tables recorded it."""
    host: dict[str, Any] = {"hostname": row.get("host_name") or None}
    if present(row, "host_cpu"):
        host["cpu"] = row["host_cpu"]
    if present(row, "host_platform"):
        host["os"] = [
            "Linux" if row["host_platform"].startswith("Linux") else "",
            row["host_platform"],
        ]
    if present(row, "host_python"):
        host["python_version"] = row["host_python"]
    if present(row, "host_cpu_count"):
        host["cpu_count"] = int(float(row["host_cpu_count"]))
    result: dict[str, Any] = {}
    if present(row, "stop_reason"):
        result["stop_reason"] = row["stop_reason"]
    if present(row, "gym_id"):
        result["env"] = row["gym_id"]
    return {
        "status": row["status"],
        "start_time": row.get("start_time") or None,
        "stop_time": row.get("stop_time") or None,
        "host": host,
        "result": result or None,
        "artifacts": [SUMMARY],
        "rebuilt_from_tables": {"label": row["run"], "run_dir": row["run_dir"], "by": SCRIPT},
    }


def config_columns(summary_columns: list[str]) -> list[str]:
    derived = SUMMARISED | HOST | EXTRAS | set(ID_COLUMNS)
    return [c for c in summary_columns if c not in derived and not c.startswith(BREAKDOWN)]


def rebuild(report: Path, runs_root: Path) -> list[Path]:
    """Write one run directory per ``summary.csv`` row under ``runs_root``; return them."""
    summary_columns, summary_rows = read_table(report / "summary.csv")
    step_columns, step_rows = read_table(report / "runs.csv")
    config_cols = config_columns(summary_columns)
    unknown = [c for c in step_columns if c in summary_columns and c not in config_cols]
    unknown = [c for c in unknown if c not in ID_COLUMNS and c != "cpu_seconds"]
    if unknown:
        raise SystemExit(f"{report}: columns neither config nor metric: {unknown}")
    metric_names = [
        c for c in step_columns if c not in config_cols and c not in ID_COLUMNS and c != "step"
    ]
    by_run: dict[str, list[dict[str, str]]] = {}
    for r in step_rows:
        by_run.setdefault(r["run"], []).append(r)
    dirs = []
    for number_, row in enumerate(summary_rows, start=1):
        run_dir = runs_root / str(number_)
        run_dir.mkdir(parents=True)
        config = rebuild_config(row, config_cols)
        metrics = rebuild_metrics(by_run.get(row["run"], []), metric_names, row["start_time"])
        for name, data in (
            (CONFIG, config),
            (METRICS, metrics),
            (RUN, rebuild_run(row)),
            (SUMMARY, rebuild_summary(row, summary_columns)),
        ):
            (run_dir / name).write_text(json.dumps(data, sort_keys=True, indent=2))
        dirs.append(run_dir)
    return dirs


def check(report: Path, archive: Path) -> list[str]:
    """Differences between the committed tables and the tables read back from ``archive``."""
    import pandas as pd

    from harness.records import load_runs

    table = load_runs([archive])
    old = pd.read_csv(report / "summary.csv", float_precision="round_trip")
    problems = []
    if len(old) != len(table.runs):
        return [f"{len(old)} runs in summary.csv, {len(table.runs)} in the archive"]
    new = table.runs.reset_index(drop=True)
    for column in [*config_columns(list(old.columns)), "final_eval_return", "final_timesteps"]:
        if column not in new:
            if old[column].notna().any():
                problems.append(f"{column}: missing from the archive's runs")
            continue
        for i, (a, b) in enumerate(zip(old[column], new[column], strict=True)):
            if _same(a, b):
                continue
            problems.append(f"run {i + 1} {column}: {a!r} in summary.csv, {b!r} read back")
    steps_old = pd.read_csv(report / "runs.csv", low_memory=False)
    if len(steps_old) != len(table.steps):
        problems.append(f"{len(steps_old)} step rows in runs.csv, {len(table.steps)} read back")
    return problems


def _same(a: Any, b: Any) -> bool:
    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    if missing(a) and missing(b):
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=0)
    except (TypeError, ValueError):
        return str(a) == str(b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "reports", nargs="+", type=Path, help="report folders (runs.csv, summary.csv)"
    )
    parser.add_argument("--check", action="store_true", help="read the archive back and compare")
    args = parser.parse_args(argv)
    status = 0
    for report in args.reports:
        with tempfile.TemporaryDirectory() as scratch:
            dirs = rebuild(report, Path(scratch) / "runs")
            write_run_archive(dirs, report / ARCHIVE)
        size = (report / ARCHIVE).stat().st_size
        print(f"{report / ARCHIVE}: {len(dirs)} runs, {size / 1e3:.0f} kB")
        if args.check:
            problems = check(report, report / ARCHIVE)
            for line in problems[:20]:
                print(f"  {line}")
            status |= bool(problems)
    return status


if __name__ == "__main__":
    sys.exit(main())
