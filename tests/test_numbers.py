"""Numbers as people write them: scientific notation in flags, ``--set`` and YAML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import build_run_config, load_yaml, read_yaml
from harness.schema import parse_number
from tests.conftest import harness_cli


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e5", 100000.0), ("3e-4", 0.0003), ("3.4e6", 3.4e6), ("-2E+3", -2000.0), ("0.1", 0.1)],
)
def test_yaml_reads_scientific_notation_as_numbers(text: str, expected: float) -> None:
    assert load_yaml(text) == expected
    assert load_yaml(f"[{text}, 2]") == [expected, 2]


def test_yaml_keeps_what_is_not_a_number() -> None:
    assert load_yaml("1e") == "1e"
    assert load_yaml("abc") == "abc"
    assert load_yaml("7") == 7 and isinstance(load_yaml("7"), int)


def test_parse_number_takes_integral_values_only_where_an_integer_is_asked() -> None:
    assert parse_number("1e5", integer=True) == 100000
    assert parse_number("12345678901234567890", integer=True) == 12345678901234567890
    assert parse_number("1.5e0", integer=True) is None
    assert parse_number("inf", integer=True) is None
    assert parse_number("3e-4") == pytest.approx(0.0003)
    assert parse_number("many") is None


def test_set_and_given_values_in_scientific_notation_complete() -> None:
    resolved = build_run_config(
        {"algo": "optimes", "env": "CartPole", "timesteps": 2e4},
        overrides=["learning_rate=3e-4", "population=2e1"],
    )
    assert resolved.config["timesteps"] == 20000 and isinstance(resolved.config["timesteps"], int)
    assert resolved.config["params"]["learning_rate"] == pytest.approx(3e-4)
    assert resolved.config["params"]["population"] == 20


def test_sweep_file_budget_in_scientific_notation(tmp_path: Path) -> None:
    sweep = tmp_path / "sci.yaml"
    sweep.write_text(
        "name: sci\ngrid: {algo: [optimes], env: [CartPole]}\nbudget: {timesteps: 1e4}\n"
        "set: [learning_rate=3e-4]\n"
    )
    assert read_yaml(sweep)["budget"]["timesteps"] == 1e4
    listed = harness_cli("sweep", str(sweep), "--dry-run", "--runs-dir", str(tmp_path / "runs"))
    assert "optimes CartPole seed=0" in listed.stdout


def test_run_with_scientific_timesteps_prints_the_integer() -> None:
    shown = harness_cli(
        "run",
        "--env",
        "CartPole",
        "--timesteps",
        "1e5",
        "--set",
        "learning_rate=3e-4",
        "--print-config",
    ).stdout
    assert any(line.split()[:2] == ["timesteps", "100000"] for line in shown.splitlines())
    assert any(
        line.split()[:2] == ["params.learning_rate", "0.0003"] for line in shown.splitlines()
    )
