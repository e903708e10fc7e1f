"""The command line says what it will do: --print-config, names users know, quiet runs.

Every case runs the real CLI (or Sacred's command line) as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.config import build_run_config
from tests.conftest import ROOT, only_run_dir, printed_config, read_run


def _run(
    *args: str, cwd: Path = ROOT, module: str = "harness.cli"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_PROGRESS": "0"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    flat = {}
    for key, value in config.items():
        if key in ("policy", "params"):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


CARTPOLE = ("--algo", "optimes", "--env", "CartPole", "--backend", "inline")


def test_print_config_shows_values_and_sources_and_creates_nothing(tmp_path: Path) -> None:
    flags = ("-n", "5000", "--set", "sigma=0.2")
    result = _run("run", *CARTPOLE, *flags, "--print-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = printed_config(result.stdout)
    assert rows["params.population"] == ("20", "defaults.yaml CartPole-v1 entry")
    assert rows["params.sigma"] == ("0.2", "--set")
    assert rows["params.beta1"] == ("0.9", "OptimESConfig default")
    assert rows["timesteps"] == ("5000", "command line")
    assert rows["eval_episodes"] == ("10", "defaults.yaml default entry")
    assert rows["workers"] == ("1", "built-in default")
    assert list(tmp_path.iterdir()) == []  # no runs directory, nothing at all
    dry = _run("run", *CARTPOLE, *flags, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and dry.stdout == result.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_cards_command_is_accepted_as_written(tmp_path: Path) -> None:
    result = _run(
        "run", "--algo", "optimes", "--env", "AntBulletEnv", "--episodes", "5", "--print-config",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert printed_config(result.stdout)["episodes"] == ("5", "command line")


def test_short_flags_and_aliases_give_the_recorded_config_print_config_showed(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    short = ("-n", "600", "-f", str(runs), "--episodes-per-fitness", "2", "--seed", "3")
    done = _run("run", *CARTPOLE, *short, "--set", "population=4", "--set", "eval_episodes=1")
    assert done.returncode == 0, done.stderr
    # quiet by default: no Sacred INFO lines, no raw result dict
    assert "INFO" not in done.stderr and "Result:" not in done.stderr, done.stderr
    assert re.match(r"run 1 COMPLETED: ", done.stdout), done.stdout
    record = read_run(only_run_dir(runs))
    config = record["config"]
    assert (config["timesteps"], config["episodes"], config["seed"]) == (600, 2, 3)
    assert config["workers"] == 1  # one default everywhere, recorded
    long = ("--timesteps", "600", "--episodes", "2", "--seed", "3")
    printed = _run(
        "run", *CARTPOLE, *long, "--set", "population=4", "--set", "eval_episodes=1",
        "--print-config",
    )  # fmt: skip
    rows = printed_config(printed.stdout)
    assert {key: value for key, (value, _) in rows.items()} == {
        key: _shown(value) for key, value in _flat(config).items()
    }


def test_verbose_shows_sacreds_log(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = _run(
        "run", *CARTPOLE, "--generations", "1", "-f", str(runs), "-v",
        "--set", "population=4", "--set", "eval_episodes=1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'INFO - es-harness - Started run with ID "1"' in done.stderr
    assert "Result:" in done.stderr


def test_help_states_defaults_and_how_to_see_per_env_values() -> None:
    result = _run("run", "--help")
    text = " ".join(result.stdout.split())
    assert "--print-config" in text and "experiments/defaults.yaml" in text
    assert "--workers W parallel workers" in text and "(default: 1)" in text
    assert "--episodes-per-fitness K, --episodes K" in text
    assert "--timesteps T, -n T" in text and "--runs-dir RUNS_DIR, -f RUNS_DIR" in text
    assert "population (default 40)" in text and "CartPole's optimes population is 20" in text


def test_sacred_with_path_gives_one_line_errors(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cases = [
        (["with", "algo=optimess"], "'optimess'"),
        (["with", "algoo=optimes"], "did you mean: algo"),
        (["with", "landerr"], "landerr"),
        (["with", "algo=ppo", "env=CartPole", "episodes=5"], "does not apply to ppo"),
        (["with", "params.popsize=4"], "population"),
    ]
    for args, named in cases:
        result = _run("-F", str(runs), *args, module="harness.experiment")
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith("harness: error: "), result.stderr
        assert named in lines[0], (named, lines[0])
        assert not runs.exists()


def test_sacred_with_path_shares_the_defaults_of_harness_run() -> None:
    result = _run("print_config", "with", "env=CartPole", module="harness.experiment")
    assert result.returncode == 0, result.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    expected = build_run_config({"env": "CartPole"}).config
    assert f"workers = {expected['workers']}" in text
    assert f"population = {expected['params']['population']}" in text
    assert "INFO" not in result.stderr
