"""Shared fixtures: run the real CLI and read real Sacred run directories."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import harness  # noqa: F401  (sets MKL_CBWR, as every harness process does, before any torch import)

ROOT = Path(__file__).resolve().parents[1]

# Checkpoints are signed with the user's key (harness.checkpoint); the tests, and the
# processes they start, sign with a key of their own instead of creating one in ~/.config.
os.environ.setdefault(
    "HARNESS_CHECKPOINT_KEY_FILE",
    str(Path(tempfile.mkdtemp(prefix="es-harness-test-key-")) / "checkpoint.key"),
)


def harness_cli(
    *args: str, timeout: float = 300, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m harness.cli ARGS`` as a real subprocess (``env``: variables to add)."""
    env = {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1", **(env or {})}
    completed = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    if check and completed.returncode != 0:
        raise AssertionError(
            f"harness {' '.join(args)} exited {completed.returncode}:\n"
            f"{completed.stdout}\n{completed.stderr}"
        )
    return completed


def printed_config(stdout: str) -> dict[str, tuple[str, str]]:
    """``--print-config`` output -> {key: (value, source)}."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, value, source = re.split(r"\s{2,}", line.strip(), maxsplit=2)
        rows[key] = (value, source)
    return rows


def read_run(run_dir: Path) -> dict[str, Any]:
    """config, run and metrics of one Sacred FileStorage run directory."""
    return {
        name: json.loads((run_dir / f"{name}.json").read_text())
        for name in ("config", "run", "metrics")
    }


def only_run_dir(runs_dir: Path) -> Path:
    dirs = [p for p in runs_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    assert len(dirs) == 1, dirs
    return dirs[0]


TIMING_METRICS = {
    "wall_time_s",
    "evaluate_s",
    "update_s",
    "worker_seconds",
    "bytes_to_workers",
    "bytes_from_workers",
    "sync_s",
}


def deterministic_metrics(metrics: dict[str, Any]) -> dict[str, list[float]]:
    """Metric values that must not depend on timing, backend or worker count.

    The rule of ``harness check-repro`` (timings ``*_s``/``*_seconds`` and bytes are left
    out), plus :data:`TIMING_METRICS`.
    """
    from harness.repro import compared

    return {
        name: series["values"]
        for name, series in metrics.items()
        if name not in TIMING_METRICS and compared(name)
    }


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


# -- running the suite on several cores (pytest-xdist, `make test` runs `-n 2 --dist loadgroup`)
#: Modules whose tests must not run beside each other on one machine, by group: each starts
#: Ray instances (about 700 MB and several processes each), and two at once on 2 cores
#: starve each other's heartbeats.
SHARED_GROUPS = {"test_ray": "ray", "test_ray_sweep": "ray"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each test module on one xdist worker (its module-scoped fixtures, such as a
    trained sweep, are then built once), and the modules of :data:`SHARED_GROUPS` on one
    worker together. A test's own ``xdist_group`` marker wins."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS.get(module, module)))


@pytest.fixture(autouse=True)
def _imported_modules_stay_in_their_test() -> Any:
    """A test that imports a user module in this process (``--import``, a plugin package on
    a temporary path) would pass it down through ``ES_HARNESS_IMPORTS`` to every later
    test's subprocesses on the same worker, which cannot find it: restore both after."""
    from envs import plugins

    passed_down = os.environ.get(plugins.IMPORTS_ENV)
    imported = list(plugins._imported)
    yield
    plugins._imported[:] = imported
    if passed_down is None:
        os.environ.pop(plugins.IMPORTS_ENV, None)
    else:
        os.environ[plugins.IMPORTS_ENV] = passed_down
