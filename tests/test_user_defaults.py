"""A user's own per-env defaults: a file (``--defaults``, a sweep's ``defaults:``,
``harness.run(defaults=...)``) and an installed package's entry point (the worked plugin
in ``examples/plugin`` ships one for its env); ``--print-config`` names each as the source.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.config import (
    ConfigError,
    build_run_config,
    check_defaults_data,
    load_user_defaults,
    package_defaults,
)
from harness.sweep.identity import cell_key
from tests.conftest import harness_cli, printed_config

ENV = "cem_example.envs:PointReach-v0"
#: how --print-config names the worked plugin's defaults file
PACKAGE = "defaults file defaults.yaml of package es-harness-cem-example (PointReach-v0)"
MINE = """
PointReach-v0:
  run: {eval_every_timesteps: 1500}
  policy: {kind: mlp, hidden_sizes: [8, 8]}
  optimes:
    sigma: 0.3
"""


def run_configs(runs: Path) -> list[dict[str, Any]]:
    dirs = sorted((p for p in runs.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads((d / "config.json").read_text()) for d in dirs]


def one_line_usage_error(result: subprocess.CompletedProcess[str], *named: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in named:
        assert text in lines[0], (text, lines[0])


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    path = tmp_path / "my.yaml"
    path.write_text(MINE)
    return path


def test_the_plugins_entry_point_supplies_its_envs_defaults() -> None:
    """The installed example package ships defaults for PointReach-v0 through the entry
    point group es_harness.defaults; other envs keep the repository's."""
    sources = [d.source for d in package_defaults()]
    assert any("es-harness-cem-example" in s for s in sources), sources
    resolved = build_run_config({"algo": "optimes", "env": ENV})
    config, where = resolved.config, resolved.sources
    assert config["eval_every_timesteps"] == 2000 and where["eval_every_timesteps"] == PACKAGE
    assert config["policy"]["kind"] == "linear" and where["policy.kind"] == PACKAGE
    assert config["timesteps"] == 50000 and where["timesteps"] == PACKAGE
    assert config["defaults"] is None and config["defaults_sha256"] is None
    cem = build_run_config({"algo": "cem", "env": ENV}).config
    assert cem["params"]["population"] == 16
    other = build_run_config({"algo": "optimes", "env": "CartPole"}).sources
    assert other["eval_every_timesteps"].startswith("defaults.yaml ")


def test_a_defaults_file_sets_a_users_env_and_print_config_names_it(
    mine: Path, tmp_path: Path
) -> None:
    """The user's file takes precedence over the package's and the repository's, for the
    envs it names; --print-config names it; the run records its path and digest."""
    listed = harness_cli(
        "run", "--algo", "optimes", "--env", ENV, "--defaults", str(mine), "--print-config"
    )
    rows = printed_config(listed.stdout)
    assert rows["eval_every_timesteps"] == ("1500", "defaults file my.yaml (PointReach-v0)")
    assert rows["policy.hidden_sizes"] == ("[8, 8]", "defaults file my.yaml (PointReach-v0)")
    assert rows["policy.kind"] == ("mlp", "defaults file my.yaml (PointReach-v0)")
    assert rows["params.sigma"] == ("0.3", "defaults file my.yaml (PointReach-v0)")
    assert rows["eval_episodes"] == ("5", PACKAGE)  # what the file leaves, the package gives
    assert rows["defaults"] == (str(mine), "command line")
    digest = hashlib.sha256(mine.read_bytes()).hexdigest()
    assert rows["defaults_sha256"] == (digest, "sha256 of defaults file my.yaml")
    # a CartPole run with the same file: the file names no CartPole entry
    cartpole = build_run_config({"algo": "optimes", "env": "CartPole", "defaults": str(mine)})
    plain = build_run_config({"algo": "optimes", "env": "CartPole"}).config
    assert {**cartpole.config, "defaults": None, "defaults_sha256": None} == plain

    runs = tmp_path / "runs"
    harness_cli(
        "run",
        "--algo",
        "optimes",
        "--env",
        ENV,
        "--defaults",
        str(mine),
        "--generations",
        "1",
        "--backend",
        "inline",
        "--set",
        "population=4",
        "--runs-dir",
        str(runs),
    )
    (config,) = run_configs(runs)
    assert config["defaults"] == str(mine) and config["defaults_sha256"] == digest
    assert config["eval_every_timesteps"] == 1500 and config["policy"]["hidden_sizes"] == [8, 8]


def test_a_stored_config_rebuilds_the_same_when_its_file_changed_or_went(mine: Path) -> None:
    """Resume and sweep cells rebuild a stored config: its values stand, the recorded
    digest stays its provenance, and the file's path is not part of a cell's identity."""
    stored = build_run_config({"algo": "optimes", "env": ENV, "defaults": str(mine)}).config
    mine.write_text(MINE.replace("1500", "900"))
    again = build_run_config(stored, source="config.json", refuse="never").config
    assert again == stored
    mine.unlink()
    assert build_run_config(stored, source="config.json", refuse="never").config == stored
    moved = {**stored, "defaults": "/elsewhere/my.yaml", "defaults_sha256": "0" * 64}
    assert cell_key(moved) == cell_key(stored)


def test_the_python_api_takes_a_defaults_file(mine: Path, tmp_path: Path) -> None:
    from harness.api import run

    result = run(
        "optimes",
        ENV,
        runs_dir=tmp_path / "runs",
        defaults=mine,
        generations=1,
        backend="inline",
        population=4,
        progress=False,
    )
    assert result.config["defaults"] == str(mine)
    assert result.config["policy"]["hidden_sizes"] == [8, 8]


@pytest.mark.slow
def test_a_sweep_applies_its_defaults_file_to_its_cells(mine: Path, tmp_path: Path) -> None:
    """``defaults:`` (relative to the sweep file) reaches every cell's subprocess; a rerun
    finds them done."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: mine\ndefaults: my.yaml\n"
        f"grid: {{algo: [optimes], env: ['{ENV}'], seed: [0, 1]}}\n"
        "budget: {generations: 1}\nbackend: inline\nset: [population=4, eval_episodes=2]\n"
    )
    runs = tmp_path / "runs"
    harness_cli("sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    configs = run_configs(runs)
    assert len(configs) == 2
    for config in configs:
        assert config["defaults"] == str(mine)
        assert config["eval_every_timesteps"] == 1500
        assert config["policy"]["hidden_sizes"] == [8, 8]
        assert config["params"]["sigma"] == 0.3 and config["eval_episodes"] == 2
    again = harness_cli("sweep", str(sweep), "--runs-dir", str(runs), "--no-progress")
    assert "2 already completed" in again.stdout


BAD = {
    "unknown knob": ("PointReach-v0:\n  run: {eval_evry: 3}\n", "'eval_evry' is not a run knob"),
    "bad value": ("PointReach-v0:\n  run: {eval_every_timesteps: -3}\n", "positive integer"),
    "malformed": ("PointReach-v0: [\n", "malformed YAML"),
    "unknown hyperparameter": ("PointReach-v0:\n  optimes: {sigmaa: 1}\n", "'sigmaa'"),
    "unknown section": ("PointReach-v0:\n  polcy: {kind: mlp}\n", "did you mean: policy"),
    "not a mapping": ("- PointReach-v0\n", "must map env ids"),
    "unsafe tag": (
        "PointReach-v0: !!python/object:os.system {}\n",
        "could not determine a constructor",
    ),
}


def test_a_bad_defaults_file_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, (text, expected) in BAD.items():
        path = tmp_path / f"{name.replace(' ', '_')}.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(expected)):
            load_user_defaults(path)
    bad = tmp_path / "unknown_knob.yaml"
    run = ("run", "--algo", "optimes", "--env", ENV, "--generations", "1", "--runs-dir", str(runs))
    one_line_usage_error(
        harness_cli(*run, "--defaults", str(bad), check=False), str(bad), BAD["unknown knob"][1]
    )
    missing = tmp_path / "absent.yaml"
    one_line_usage_error(harness_cli(*run, "--defaults", str(missing), check=False), "absent")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: bad\ndefaults: malformed.yaml\ngrid: {{algo: [optimes], env: ['{ENV}']}}\n"
    )
    one_line_usage_error(
        harness_cli("sweep", str(sweep), "--runs-dir", str(runs), check=False),
        "defaults",
        "malformed YAML",
    )
    assert not runs.exists()
    with pytest.raises(ConfigError, match="a package's defaults name its envs"):
        check_defaults_data({"default": {"run": {"eval_episodes": 3}}}, "pkg", allow_default=False)
