"""``harness check-repro``: does a configuration give the same numbers every time?

Runs one configuration, each run a real ``harness run`` subprocess into a
temporary runs directory:

* ``W=1`` twice (repeatability),
* ``W=2`` (the worker count must not matter),
* ``W=1`` interrupted by a real SIGINT after step ``--interrupt-at``, then
  continued by ``harness resume`` (checkpoint and resume must not matter),

and compares, metric by metric, every value that must not depend on timing
(timings, byte counts and worker-protocol counters are left out). Runs are
compared bit for bit; a mismatch prints which metric, the first differing step
and both values, and the exit status is 1.

``--golden FILE`` also compares the first run with a committed file of metric
digests (SHA-256 of the values rounded to 6 significant digits, with the
values themselves, so a mismatch can be shown). Values that differ only
beyond that precision (another CPU's BLAS) still pass. After an intended
change, regenerate the file with ``--update-golden``::

    .venv/bin/harness check-repro --golden tests/golden/repro_cartpole.json --update-golden

The configuration comes from flags, from ``--config FILE.yaml`` or, when
neither names one, from the golden file itself. A config file (read with the
safe loader; unknown keys are an error)::

    imports: [mypackage.envs]  # modules of your own, as --import (optional)
    algo: optimes
    env: CartPole
    seed: 0
    episodes: 1
    backend: process          # inline, process or ray
    budget: {timesteps: 20000}  # timesteps and/or generations (time_limit is not repeatable)
    set: [checkpoint_every=4]   # --set overrides, as a list or a mapping
    interrupt_at: 5

This checks the ES family, whose runs are deterministic by design. PPO and
A2C repeat themselves at any worker count (their env count is ``n_envs``), but
a resume restarts the episodes in flight: give them ``--checks repeat,workers``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import rundir, schema
from harness.checkpoint import INTERRUPT_ENV
from harness.commands import UsageError, check_ray_address
from harness.config import ConfigError, build_run_config, read_yaml
from harness.user_modules import (
    UntrustedImportError,
    check_run_modules,
    import_flags,
    recorded_modules,
)

#: Left out of every comparison: they measure the machine, not the result.
VARYING_METRICS = frozenset(
    {"wall_time_s", "worker_seconds", "cpu_seconds", "retried_tasks", "resyncs", "replica_syncs"}
)
GOLDEN_DIGITS = 6
CONFIG_KEYS = (
    "imports",
    "algo",
    "env",
    "seed",
    "episodes",
    "backend",
    "ray_address",
    "budget",
    "set",
    "interrupt_at",
)
BUDGET_FLAGS = ("timesteps", "generations", "target_return")
REGENERATE = "harness check-repro --golden {path} --update-golden"


def compared(name: str) -> bool:
    """Whether a metric must be identical across repeats, worker counts and resumes."""
    return not (name in VARYING_METRICS or name.endswith(("_s", "_seconds")) or "bytes" in name)


# -- the configuration ------------------------------------------------------------------


def _spec_from_yaml(path: Path) -> dict[str, Any]:
    try:
        data = read_yaml(path)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must be a mapping of {', '.join(CONFIG_KEYS)}")
    for key in data:
        if key not in CONFIG_KEYS:
            raise UsageError(f"unknown key {key!r} in {path}; known: {', '.join(CONFIG_KEYS)}")
    spec = dict(data)
    budget = spec.get("budget") or {}
    if not isinstance(budget, dict):
        raise UsageError(f"budget in {path} must be a mapping, got {budget!r}")
    for key in budget:
        if key not in (*BUDGET_FLAGS, "time_limit", "cpu_limit"):
            raise UsageError(f"unknown budget key {key!r} in {path}")
    overrides = spec.get("set") or []
    if isinstance(overrides, dict):
        overrides = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise UsageError(f"set in {path} must be a list of KEY=VALUE strings or a mapping")
    spec["set"] = overrides
    spec["budget"] = budget
    return spec


def _spec_from_flags(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    spec = {**base, "budget": dict(base.get("budget") or {}), "set": list(base.get("set") or [])}
    for key in (*SPEC_KNOBS, "interrupt_at"):
        value = getattr(args, key)
        if value is not None:
            spec[key] = value
    budget_flags = {key: getattr(args, key) for key in BUDGET_FLAGS}
    if any(value is not None for value in budget_flags.values()):
        spec["budget"] = {k: v for k, v in budget_flags.items() if v is not None}
    spec["set"] += list(args.overrides)
    return spec


def _int(spec: dict[str, Any], key: str, default: int, least: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"{key} must be an integer >= {least}, got {value!r}")
    return value


#: Spec keys that are knobs of ``harness run`` (given only when the spec has them).
SPEC_KNOBS = ("imports", "algo", "env", "seed", "episodes", "backend", "ray_address")


def completed_config(spec: dict[str, Any], workers: int = 1) -> dict[str, Any]:
    """The run config a spec describes, built by ``build_run_config`` as ``harness run`` does."""
    budget = spec.get("budget") or {}
    for limit in ("time_limit", "cpu_limit"):
        if budget.get(limit) is not None:
            raise UsageError(
                f"check-repro cannot use a {limit} budget: where it stops depends "
                "on the machine; give timesteps or generations"
            )
    if budget.get("timesteps") is None and budget.get("generations") is None:
        raise UsageError("check-repro needs a budget: --timesteps or --generations")
    if not spec.get("algo") or not spec.get("env"):
        raise UsageError("check-repro needs --algo and --env, --config FILE or --golden FILE")
    given: dict[str, Any] = {key: spec.get(key) for key in SPEC_KNOBS}
    given["workers"] = workers
    given.update({key: budget.get(key) for key in BUDGET_FLAGS})
    try:
        resolved = build_run_config(
            given, source="check-repro spec", overrides=list(spec.get("set") or [])
        )
    except ConfigError as error:
        raise UsageError(str(error)) from None
    return resolved.config


def run_flags(spec: dict[str, Any], workers: int) -> list[str]:
    """``harness run`` flags for a spec: the knobs it gives, nothing the defaults would fill."""
    flags = ["--workers", str(workers)]
    for key in SPEC_KNOBS:
        value = spec.get(key)
        for one in value if isinstance(value, list) else [] if value is None else [value]:
            flags += [str(schema.BY_NAME[key].flag), str(one)]
    for key, value in (spec.get("budget") or {}).items():
        if value is not None:
            flags += [str(schema.BY_NAME[key].flag), str(value)]
    for override in spec.get("set") or []:
        flags += ["--set", override]
    return flags


# -- running ----------------------------------------------------------------------------


@dataclass
class RunOutcome:
    label: str
    run_dir: Path | None
    metrics: dict[str, Any] | None
    error: str | None = None


def _cli(
    *args: str, env_extra: dict[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_PROGRESS": "0", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-P", "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _tail(completed: subprocess.CompletedProcess[str], lines: int = 6) -> str:
    text = (completed.stderr or "") + (completed.stdout or "")
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n    ".join(kept)


def _only_run(runs_dir: Path) -> Path | None:
    runs = rundir.run_dirs(runs_dir)
    return runs[0] if len(runs) == 1 else None


def _load(run_dir: Path) -> tuple[str, dict[str, Any]]:
    record = rundir.read_run(run_dir)
    return record.status, record.metrics


def execute(
    label: str, spec: dict[str, Any], workers: int, runs_dir: Path, interrupt_at: int | None = None
) -> RunOutcome:
    """One run (and its resume), as subprocesses of the real CLI."""
    flags = [*run_flags(spec, workers), "--runs-dir", str(runs_dir), "--no-progress"]
    extra = {INTERRUPT_ENV: str(interrupt_at)} if interrupt_at is not None else None
    completed = _cli("run", *flags, env_extra=extra)
    run_dir = _only_run(runs_dir)
    if run_dir is None:
        return RunOutcome(label, None, None, f"no run was recorded:\n    {_tail(completed)}")
    if interrupt_at is not None:
        status = rundir.read_status(run_dir)
        if status != "INTERRUPTED":
            return RunOutcome(
                label,
                run_dir,
                None,
                f"expected INTERRUPTED after step "
                f"{interrupt_at}, the run ended {status}; use a smaller "
                f"--interrupt-at\n    {_tail(completed)}",
            )
        # the run's modules are the spec's, which the user gave: hand that word on
        config = {"imports": spec.get("imports"), "env": spec.get("env")}
        completed = _cli("resume", str(run_dir), "--no-progress", *import_flags(config))
    try:
        status, metrics = _load(run_dir)
    except rundir.UnreadableRun as error:
        reason = f"run {run_dir.name} is unreadable: {error}\n    {_tail(completed)}"
        return RunOutcome(label, run_dir, None, reason)
    if status != "COMPLETED" or completed.returncode != 0:
        return RunOutcome(
            label,
            run_dir,
            None,
            f"run ended {status} (exit {completed.returncode}):\n    {_tail(completed)}",
        )
    return RunOutcome(label, run_dir, metrics)


# -- comparing --------------------------------------------------------------------------


def _series(metrics: dict[str, Any]) -> dict[str, tuple[list[int], list[float]]]:
    return {
        name: (list(s["steps"]), [float(v) for v in s["values"]])
        for name, s in sorted(metrics.items())
        if compared(name)
    }


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def diff_metrics(
    reference: dict[str, Any],
    other: dict[str, Any],
    ref_label: str,
    other_label: str,
    rel_tol: float = 0.0,
) -> list[str]:
    """Readable differences: per metric, the first differing step and both values."""
    a, b = _series(reference), _series(other)
    lines = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            lines.append(f"{name}: logged by {ref_label} only")
            continue
        if name not in a:
            lines.append(f"{name}: logged by {other_label} only")
            continue
        (steps_a, values_a), (steps_b, values_b) = a[name], b[name]
        for i in range(min(len(steps_a), len(steps_b))):
            if steps_a[i] != steps_b[i]:
                lines.append(
                    f"{name}: step {steps_a[i]} ({ref_label}) vs step {steps_b[i]} "
                    f"({other_label}) at entry {i}"
                )
                break
            x, y = values_a[i], values_b[i]
            if not (
                _same(x, y) or (rel_tol and math.isclose(x, y, rel_tol=rel_tol, abs_tol=1e-12))
            ):
                lines.append(
                    f"{name}: first differs at step {steps_a[i]}: {x!r} ({ref_label}) "
                    f"vs {y!r} ({other_label})"
                )
                break
        else:
            if len(steps_a) != len(steps_b):
                lines.append(
                    f"{name}: {len(steps_a)} steps ({ref_label}) vs {len(steps_b)} ({other_label})"
                )
    return lines


def _round(value: float, digits: int = GOLDEN_DIGITS) -> float:
    return value if not math.isfinite(value) else float(f"{value:.{digits}g}")


def digest(steps: list[int], values: list[float], digits: int | None = None) -> str:
    """SHA-256 of a metric: bit-exact (``digits=None``) or of the rounded values."""
    if digits is None:
        items = [[s, float(v).hex()] for s, v in zip(steps, values, strict=True)]
    else:
        items = [[s, repr(_round(float(v), digits))] for s, v in zip(steps, values, strict=True)]
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def golden_record(
    spec: dict[str, Any], config: dict[str, Any], metrics: dict[str, Any], path: Path
) -> dict[str, Any]:
    """The golden file's content for a reference run."""
    import gymnasium
    import numpy

    series = _series(metrics)
    return {
        "about": "Golden metric digests checked by `make test` (tests/test_repro.py). After an "
        f"intended change of the numbers, regenerate: {REGENERATE.format(path=path)}",
        "spec": spec,
        "config": config,
        "digits": GOLDEN_DIGITS,
        "created": {
            "date": datetime.date.today().isoformat(),
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "gymnasium": gymnasium.__version__,
            "machine": platform.machine(),
        },
        "metrics": {
            name: {
                "sha256": digest(steps, values, GOLDEN_DIGITS),
                "steps": steps,
                "values": [_round(v) for v in values],
            }
            for name, (steps, values) in series.items()
        },
    }


def golden_text(record: dict[str, Any]) -> str:
    """The golden file as text: indented, with each list of numbers on one line."""
    text = json.dumps(record, indent=1, sort_keys=True)

    def join(match: re.Match[str]) -> str:
        return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"

    return re.sub(r"\[\s+([-+\w.,\s]+?)\s+\]", join, text) + "\n"


def _neutral(key: str, value: Any) -> bool:
    """Whether a knob the golden file predates holds a value that leaves old runs as they were.

    A knob added to the harness since the file was written is compared only when
    this run moves it off its built-in default (or off null, "not in use").
    """
    knob = schema.BY_NAME.get(key)
    return knob is not None and (value is None or value == knob.default)


def compare_golden(
    golden: dict[str, Any], config: dict[str, Any], metrics: dict[str, Any]
) -> list[str]:
    """Differences between a run and a golden file (values within the rounding pass)."""
    lines = []
    stored = golden.get("config", {})
    for key in sorted(set(config) | set(stored)):
        if key == "ray_address" or (key not in stored and _neutral(key, config[key])):
            continue
        here = config.get(key)
        if isinstance(here, dict) and isinstance(stored.get(key), dict):
            # a section (policy): its knobs added since the file was written count the same way
            here = {
                name: value
                for name, value in here.items()
                if name in stored[key] or not _neutral(f"{key}.{name}", value)
            }
        if here != stored.get(key):
            lines.append(
                f"config {key}: {config.get(key)!r} here vs {stored.get(key)!r} in the golden file"
            )
    digits = int(golden.get("digits", GOLDEN_DIGITS))
    stored_metrics = {
        name: {"steps": m["steps"], "values": m["values"]} for name, m in golden["metrics"].items()
    }
    series = _series(metrics)
    exact = all(
        name in golden["metrics"]
        and digest(steps, values, digits) == golden["metrics"][name]["sha256"]
        for name, (steps, values) in series.items()
    ) and set(series) == set(stored_metrics)
    if not exact:
        rounded = {
            name: {"steps": steps, "values": [_round(v, digits) for v in values]}
            for name, (steps, values) in series.items()
        }
        tolerance = 10.0 ** (1 - digits)
        lines += diff_metrics(stored_metrics, rounded, "golden", "this run", rel_tol=tolerance)
    return lines


# -- the command ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n\n", 1)[1] if __doc__ else None
    parser.add_argument("--config", type=Path, help="YAML file describing the run (see below)")
    parser.add_argument("--golden", type=Path, help="golden digest file to compare with")
    parser.add_argument(
        "--update-golden",
        action="store_true",
        help="write the golden file from this check instead of comparing",
    )
    # No defaults shown: a flag not given comes from --config or the golden file's spec.
    schema.add_flags(parser, (*SPEC_KNOBS, *BUDGET_FLAGS), show_defaults=False)
    schema.add_set_flag(parser, "override a knob, as for `harness run`")
    parser.add_argument(
        "--interrupt-at",
        type=schema.integer_type("interrupt-at"),
        help="step after which the interrupted run gets SIGINT (default 3)",
    )
    parser.add_argument(
        "--workers-b",
        type=schema.integer_type("workers-b"),
        default=2,
        help="worker count compared with W=1 (default 2)",
    )
    parser.add_argument(
        "--jobs", type=schema.integer_type("jobs"), default=2, help="runs at once (default 2)"
    )
    parser.add_argument(
        "--checks",
        type=_checks,
        default=CHECKS,
        help="comma-separated subset of repeat,workers,resume (default: all; PPO/A2C: "
        "repeat,workers)",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the runs in this directory (default: a temporary one)"
    )


CHECKS = ("repeat", "workers", "resume")


def _checks(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown check {', '.join(unknown) or text!r}; choose from {', '.join(CHECKS)}"
        )
    return chosen


def resolve_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The check's spec from --config, the golden file or flags (flags win).

    A config file is the user's word, as a sweep file is. A golden file is a record (often
    committed by someone else): modules its spec names are imported only when ``--import``
    names them too (:mod:`harness.user_modules`); otherwise the check is refused, one line,
    before anything is imported.
    """
    base: dict[str, Any] = {}
    if args.config is not None:
        base = _spec_from_yaml(args.config)
    elif args.golden is not None and args.golden.exists() and args.algo is None:
        golden = _read_golden(args.golden)
        base = dict(golden.get("spec") or {})
        spec = _spec_from_flags(args, base)
        # what the user typed: --import, and the module of a MODULE:ID --env
        named = [*(args.imports or []), *recorded_modules({"env": args.env})]
        try:
            check_run_modules(
                None,
                {"imports": spec.get("imports"), "env": spec.get("env")},
                named,
                what=f"golden file {args.golden}",
            )
        except UntrustedImportError as error:
            raise UsageError(str(error)) from None
        return spec
    return _spec_from_flags(args, base)


def _read_golden(path: Path) -> dict[str, Any]:
    try:
        golden = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # not JSON, not UTF-8
        raise UsageError(f"cannot read golden file {path}: {error}".splitlines()[0]) from None
    except RecursionError:  # [[[[...]]]] nested deeper than the parser's stack
        raise UsageError(f"cannot read golden file {path}: nested too deeply") from None
    if not isinstance(golden, dict) or not isinstance(golden.get("metrics"), dict):
        raise UsageError(f"{path} is not a check-repro golden file")
    digits = golden.get("digits", GOLDEN_DIGITS)
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 17:
        raise UsageError(f"golden file {path}: digits must be an integer in [1, 17]")
    for name, entry in golden["metrics"].items():
        try:
            consistent = digest(entry["steps"], entry["values"], digits) == entry["sha256"]
        except (KeyError, TypeError, ValueError):
            consistent = False
        if not consistent:
            raise UsageError(
                f"golden file {path} is damaged: metric {name!r} does not match "
                "its sha256 (edited by hand?); regenerate it"
            )
    return golden


def run(args: argparse.Namespace) -> int:
    spec = resolve_spec(args)
    interrupt_at = _int(spec, "interrupt_at", 3, 1)
    spec["interrupt_at"] = interrupt_at
    config = completed_config(spec, workers=1)
    completed_config(spec, workers=args.workers_b)
    if args.workers_b < 2:
        raise UsageError(f"--workers-b must be at least 2, got {args.workers_b}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be positive, got {args.jobs}")
    from algorithms.registry import get_algorithm

    if get_algorithm(config["algo"]).family == "rl" and "resume" in args.checks:
        print(
            "note: for PPO/A2C a resume restarts the in-flight episodes; "
            "`--checks repeat,workers` is expected to pass"
        )
    golden = None
    if args.golden is not None and not args.update_golden:
        golden = _read_golden(args.golden)
    if args.update_golden and args.golden is None:
        raise UsageError("--update-golden needs --golden FILE")
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))

    folder = args.keep or Path(tempfile.mkdtemp(prefix="check-repro-"))
    try:
        return _check(spec, config, folder, args, golden, interrupt_at)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def _check(
    spec: dict[str, Any],
    config: dict[str, Any],
    folder: Path,
    args: argparse.Namespace,
    golden: dict[str, Any] | None,
    interrupt_at: int,
) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    w2 = args.workers_b
    plans = [
        ("W=1", 1, None, "first", "repeat"),
        ("W=1 again", 1, None, "second", "repeat"),
        (f"W={w2}", w2, None, f"w{w2}", "workers"),
        (
            f"interrupted after step {interrupt_at} and resumed",
            1,
            interrupt_at,
            "resumed",
            "resume",
        ),
    ]
    plans = [plan for plan in plans if plan[3] == "first" or plan[4] in args.checks]
    print(
        f"check-repro: {config['algo']} on {config['env']}, seed {config['seed']}, "
        f"backend {config['backend']}; runs in {folder}"
    )
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [
            pool.submit(execute, label, spec, workers, folder / name, stop)
            for label, workers, stop, name, _ in plans
        ]
        outcomes = [future.result() for future in futures]

    failed = False
    reference = outcomes[0]
    for outcome in outcomes:
        if outcome.error is not None:
            print(f"  {outcome.label}: FAILED: {outcome.error}")
            failed = True
    if reference.metrics is not None:
        for outcome in outcomes[1:]:
            if outcome.metrics is None:
                continue
            lines = diff_metrics(reference.metrics, outcome.metrics, reference.label, outcome.label)
            verdict = "same metrics" if not lines else f"MISMATCH in {len(lines)} metrics"
            print(f"  {outcome.label} vs {reference.label}: {verdict}")
            for line in lines:
                print(f"    {line}")
            failed |= bool(lines)
        count = len(_series(reference.metrics))
        print(f"  compared {count} metrics ({', '.join(sorted(_series(reference.metrics)))})")
        if args.update_golden and args.golden is not None and not failed:
            record = golden_record(spec, config, reference.metrics, args.golden)
            args.golden.parent.mkdir(parents=True, exist_ok=True)
            args.golden.write_text(golden_text(record))
            print(f"  wrote golden file {args.golden}")
        elif golden is not None:
            lines = compare_golden(golden, config, reference.metrics)
            print(
                f"  W=1 vs golden {args.golden}: "
                f"{'same metrics' if not lines else f'MISMATCH in {len(lines)} items'}"
            )
            for line in lines:
                print(f"    {line}")
            if lines:
                print(f"    if the change is intended: {REGENERATE.format(path=args.golden)}")
            failed |= bool(lines)
    print("check-repro: " + ("FAILED" if failed else "OK"))
    return 1 if failed else 0
