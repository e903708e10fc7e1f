"""``harness bench``: measurements of this machine, one figure per line.

Each sub-benchmark is a module of this package with ``add_arguments(parser)``
and ``run(args) -> int``; results print as ``name: value unit`` lines and, with
``--json FILE``, are written for reports and closing notes.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

from harness.commands import add_import_flag

#: sub-benchmark -> (module, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "overhead": ("harness.bench.overhead", "share of worker time spent outside env.step"),
    "solve": ("harness.bench.solve", "wall-clock and timesteps to a target return, over seeds"),
    "scaling": ("harness.bench.scaling", "speed-up of W workers over one, per backend"),
    "wire": ("harness.bench.wire", "bytes per generation against parameter count"),
    "ceiling": ("harness.bench.ceiling", "this machine's own limit on W processes' speed-up"),
    "project": (
        "harness.bench.project",
        "predicted wall-clock to a return at 1 to 1,440 cores, from stored runs",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        bench_parser = sub.add_parser(name, help=help_text, description=help_text)
        bench_parser.add_argument("--json", type=Path, help="also write the figures here")
        add_import_flag(bench_parser, "first, where an env or algorithm registers")
        module.add_arguments(bench_parser)
        bench_parser.set_defaults(bench_run=module.run)


def run(args: argparse.Namespace) -> int:
    from harness.commands import UsageError
    from harness.config import ConfigError
    from harness.user_modules import import_named

    try:
        import_named(args.imports)  # workers this bench starts inherit them (IMPORTS_ENV)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    result: int = args.bench_run(args)
    return result


def emit(figures: dict[str, Any], json_path: Path | None) -> None:
    """Print one figure per line and optionally save them all as JSON."""
    for name, value in figures.items():
        print(f"{name}: {value}")
    save_json(figures, json_path)


def save_json(figures: dict[str, Any], json_path: Path | None) -> None:
    """Write the figures as JSON (``--json FILE``), the machine-readable form of a bench."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(figures, indent=2))


def format_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """Rows as a plain-text table: ``columns`` are (key, heading with its unit, format);
    a missing value is blank. Numbers right-aligned, text left-aligned."""
    cells = [[_cell(row.get(key), spec) for key, _, spec in columns] for row in rows]
    headings = [heading for _, heading, _ in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headings)]
    numeric = [
        all(isinstance(row.get(key), (int, float)) or row.get(key) is None for row in rows)
        for key, _, _ in columns
    ]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out = [line(headings), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec:
        return format(value, spec)
    return str(value)
