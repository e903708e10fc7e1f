"""One schema of run knobs: argparse, Sacred's config, --set, sweeps and completion agree with it.

These fail when a knob is added to one place and not the others (a flag without
a schema entry, a Sacred config key the completion does not fill, a run section
of defaults.yaml that names an unknown knob).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from algorithms.registry import algorithm_names, get_algorithm
from harness import schema
from harness.cli import build_parser
from harness.config import (
    BUDGET_KEYS,
    DEFAULTS_FILE,
    POLICY_KEYS,
    RUN_KEYS,
    ConfigError,
    build_run_config,
    param_types,
    parse_assignment,
    read_yaml,
)
from harness.sweep import GRID_KEYS

#: ``harness run`` options that are not knobs of a run's config.
RUN_COMMAND_OPTIONS = {
    "-h",
    "--help",
    "--runs-dir",
    "-f",
    "--set",
    "--print-config",
    "--dry-run",
    "--no-progress",
    "--oversubscribe",
    "-v",
    "--verbose",
}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[name]
    return chosen


def _top_level(config: dict[str, Any]) -> set[str]:
    return {key for key in config if key not in ("policy", "params")}


TOP_KNOBS = {k.name for k in schema.KNOBS if "." not in k.name}
POLICY_KNOBS = {k.key for k in schema.knobs("policy")}


def test_every_run_flag_is_a_schema_knob_and_every_knob_flag_is_a_run_flag() -> None:
    run = _subparser("run")
    flags = {opt for action in run._actions for opt in action.option_strings}
    knob_flags = {flag for knob in schema.KNOBS for flag in knob.flags}
    assert flags - RUN_COMMAND_OPTIONS == knob_flags
    for action in run._actions:
        knob = next((k for k in schema.KNOBS if set(action.option_strings) == set(k.flags)), None)
        if knob is not None:
            assert action.dest == knob.dest and action.default is None  # "given" is detectable
            assert knob.doc.split(" (")[0] in (action.help or "").replace("%%", "%")


def test_sacred_config_has_exactly_the_schema_knobs() -> None:
    from harness.experiment import ex

    run = ex._create_run("print_config", config_updates={"env": "CartPole"})
    config = {k: v for k, v in run.config.items() if not k.startswith("__")}
    assert _top_level(config) == TOP_KNOBS
    assert set(config["policy"]) == POLICY_KNOBS
    assert config["workers"] == schema.BY_NAME["workers"].default == 1
    assert set(config["params"]) == set(param_types(get_algorithm("optimes").Config))


def test_one_sacred_run_leaves_no_knobs_in_the_next_runs_defaults() -> None:
    """Two Sacred runs in one process (a notebook, pytest): optimes' hyperparameters filled
    into the first must not reach the defaults of a later cma run."""
    from harness.experiment import ex

    ex._create_run("print_config", config_updates={"env": "CartPole"})
    run = ex._create_run("print_config", config_updates={"env": "CartPole", "algo": "cma"})
    assert set(run.config["params"]) == set(param_types(get_algorithm("cma").Config))


@pytest.mark.parametrize("algo", ["optimes", "cma", "nevergrad-es", "ppo", "a2c"])
def test_completion_fills_exactly_the_schema_knobs(algo: str) -> None:
    resolved = build_run_config({"algo": algo, "env": "CartPole"}, overrides=["timesteps=100"])
    assert _top_level(resolved.config) == TOP_KNOBS
    assert set(resolved.config["policy"]) == POLICY_KNOBS
    # every value has a source, and --print-config names every key
    shown = {key for key, *_ in resolved.rows()}
    assert shown == TOP_KNOBS | {f"policy.{k}" for k in POLICY_KNOBS} | {
        f"params.{k}" for k in resolved.config["params"]
    }


def test_set_keys_are_the_settable_knobs_and_the_hyperparameters() -> None:
    params = param_types(get_algorithm("optimes").Config)
    for knob in schema.KNOBS:
        example = {int: "3", float: "0.5", bool: "true", str: "broadcast", list: "[8]"}
        assignment = f"{knob.name}={example[knob.type]}"
        if knob.settable:
            assert parse_assignment(assignment, params)[0] == knob.name
        else:
            with pytest.raises(ConfigError, match=r"not a --set key|unknown --set key"):
                parse_assignment(assignment, params)
    for field in dataclasses.fields(get_algorithm("optimes").Config):
        assignment = f"{field.name}={json.dumps(field.default)}"
        assert parse_assignment(assignment, params) == (f"params.{field.name}", field.default)
    assert set(RUN_KEYS) == {k.name for k in schema.knobs("run")}
    assert set(POLICY_KEYS) == POLICY_KNOBS
    assert BUDGET_KEYS == (
        "timesteps",
        "generations",
        "time_limit",
        "cpu_limit",
        "paired_with",
        "target_return",
    )


def test_set_help_lists_every_settable_knob_and_hyperparameter() -> None:
    epilog = _subparser("run").epilog or ""
    listed = {line.split()[0] for line in epilog.splitlines() if line.startswith("    ")}
    settable = {k.key if k.section == "policy" else k.name for k in schema.KNOBS if k.settable}
    budget = set(BUDGET_KEYS)
    assert settable - budget <= listed
    for name in algorithm_names():
        assert set(param_types(get_algorithm(name).Config)) <= listed, name
    assert all(f" {key}" in epilog or f"{key}," in epilog for key in budget)


def test_sweep_grid_axes_are_run_flags() -> None:
    assert set(GRID_KEYS) == {"algo", "env", "seed", "episodes", "workers"}
    for key in GRID_KEYS:
        assert schema.BY_NAME[key].flags, key


def test_defaults_file_names_only_schema_knobs_with_the_schema_defaults() -> None:
    """The built-in defaults --help shows are those of defaults.yaml's `default` entry."""
    default = read_yaml(DEFAULTS_FILE)["default"]
    assert set(default["run"]) == set(RUN_KEYS)
    for key, value in default["run"].items():
        assert schema.BY_NAME[key].default == value, key
    for key, value in default["policy"].items():
        assert schema.BY_NAME[f"policy.{key}"].default == value, key
    data = read_yaml(DEFAULTS_FILE)
    for entry, sections in data.items():
        holders = [(entry, sections or {})] + [
            (f"{entry}.{name}", values)
            for name, values in (sections or {}).items()
            if name not in ("run", "policy", "budget") and isinstance(values, dict)
        ]
        for where, holder in holders:
            for section in ("run", "policy", "budget"):
                for key in holder.get(section) or {}:
                    name = f"policy.{key}" if section == "policy" else key
                    assert name in schema.BY_NAME, f"{where}.{section}.{key} is not a schema knob"


def test_an_algorithm_section_sets_env_knobs_for_that_algorithm_only(tmp_path: Path) -> None:
    """optimes may train on a shaped reward with its own policy while PPO keeps the env's."""
    from harness.config import defaults_layers

    def merged(algo: str) -> dict[str, dict[str, object]]:
        sections: dict[str, dict[str, object]] = {"run": {}, "policy": {}, "params": {}}
        for _, layer in defaults_layers("CartPole-v1", algo, path=path):
            for section, values in layer.items():
                sections.setdefault(section, {}).update(values)
        return sections

    path = tmp_path / "defaults.yaml"
    path.write_text(
        "CartPole-v1:\n"
        "  run: {reward_transform: none, eval_episodes: 7}\n"
        "  policy: {kind: mlp}\n"
        "  optimes:\n"
        "    run: {reward_transform: 'shift:1'}\n"
        "    policy: {kind: linear}\n"
        "    population: 8\n"
        "  ppo: {n_steps: 16}\n"
    )
    optimes = merged("optimes")
    assert optimes["run"] == {"reward_transform": "shift:1", "eval_episodes": 7}
    assert optimes["policy"] == {"kind": "linear"}
    assert optimes["params"] == {"population": 8}
    ppo = merged("ppo")
    assert ppo["run"]["reward_transform"] == "none" and ppo["policy"] == {"kind": "mlp"}
    assert ppo["params"] == {"n_steps": 16}
    labels = [label for label, _ in defaults_layers("CartPole-v1", "optimes", path=path)]
    assert labels[-1] == "defaults.yaml CartPole-v1 entry, optimes section"


def test_every_knob_is_documented_and_applies_somewhere() -> None:
    for knob in schema.KNOBS:
        assert knob.doc and knob.families and knob.families <= {"es", "rl"}, knob.name
        assert all(flag.startswith("-") for flag in knob.flags)
    flags = [flag for knob in schema.KNOBS for flag in knob.flags]
    assert len(set(flags)) == len(flags)  # no clash


#: A valid value of every ES-only knob (valid for the ES family, meaningless to PPO/A2C).
ES_ONLY_EXAMPLES = {
    "episodes": 5,
    "backend": "inline",
    "ray_address": "127.0.0.1:6379",
    "fail_on_env_error": False,
    "population_log_every": 5,
    "sync": "broadcast",
    "population_per_worker": 4,
    "policy.discretize": 5,
    "policy.init": "torch",
    # the ES's policy: an RL network is its algorithm's own (net_arch, activation)
    "policy.kind": "linear",
    "policy.hidden_sizes": [7],
    "policy.activation": "relu",
}


def test_a_knob_an_algorithm_does_not_use_is_refused_when_given() -> None:
    es_only = {k.name for k in schema.KNOBS if not k.applies_to("rl")}
    assert es_only == set(ES_ONLY_EXAMPLES)
    for name, value in ES_ONLY_EXAMPLES.items():
        section, _, key = name.rpartition(".")
        given: dict[str, Any] = {"algo": "ppo", "env": "CartPole", "timesteps": 100}
        if section:
            given[section] = {key: value}
        else:
            given[key] = value
        with pytest.raises(ConfigError, match="does not apply to ppo"):
            build_run_config(given)
        # a stored config holding the value is rebuilt as it was (resume, reports)
        kept = build_run_config(given, refuse="never").config
        assert (kept[section] if section else kept)[key] == value
