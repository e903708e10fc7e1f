"""A grid over a hyperparameter keeps the sweep's name, so its cells keep their identity.

``build_cell_config`` once reused ``name`` for the grid key's leaf: every cell of a
``--grid sigma0=...`` sweep was tagged ``sweep=sigma0``, the report was titled after the
hyperparameter, and cells whose runs were complete counted as new.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sweep.spec import load_sweep
from tests.conftest import harness_cli

SWEEP = """\
name: gridname
grid:
  algo: [cma]
  env: [CartPole]
  seed: [0]
budget: {generations: 1}
set: [policy.kind=linear]
"""


def write_sweep(tmp_path: Path, text: str = SWEEP) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def test_a_hyperparameter_grid_keeps_the_name_and_the_cell_identity(tmp_path: Path) -> None:
    path = write_sweep(tmp_path)
    by_grid = load_sweep(path, grid_override={"sigma0": [0.1, 0.2]})
    assert [cell.config["sweep"] for cell in by_grid.cells] == ["gridname", "gridname"]
    assert [cell.varied for cell in by_grid.cells] == [{"sigma0": 0.1}, {"sigma0": 0.2}]
    # the same cells, named by --set instead of a grid: the same identities
    for cell, value in zip(by_grid.cells, (0.1, 0.2), strict=True):
        (same,) = load_sweep(path, extra_set=[f"sigma0={value}"]).cells
        assert same.config == cell.config and same.key == cell.key
    # a grid key in the file itself behaves the same
    in_file = load_sweep(
        write_sweep(tmp_path, SWEEP.replace("  seed:", "  sigma0: [0.1, 0.2]\n  seed:"))
    )
    assert [cell.key for cell in in_file.cells] == [cell.key for cell in by_grid.cells]


@pytest.mark.slow
def test_a_second_sweep_skips_the_completed_cells(tmp_path: Path) -> None:
    path, runs = write_sweep(tmp_path), tmp_path / "runs"
    flags = (str(path), "--runs-dir", str(runs), "--grid", "sigma0=0.1,0.2", "--no-progress")
    first = harness_cli("sweep", *flags, "--jobs", "2")
    assert "2 ran" in first.stdout, first.stdout
    dry = harness_cli("sweep", *flags, "--dry-run")
    assert dry.stdout.startswith("sweep gridname: 2 cells"), dry.stdout
    states = [line.split()[1] for line in dry.stdout.splitlines()[1:] if line.strip()]
    assert states == ["skip", "skip"], dry.stdout
    second = harness_cli("sweep", *flags)
    assert "sweep gridname: 2 cells, 2 already completed, 0 ran" in second.stdout, second.stdout
