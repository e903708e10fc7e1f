"""Every flag of every ``harness bench`` sub-command says what it does; scaling prints tables."""

from __future__ import annotations

import argparse

import pytest

from harness.bench import BENCHMARKS, add_arguments, format_table


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(prog="harness bench")
    add_arguments(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_option_has_help(name: str) -> None:
    parser = _subparsers()[name]
    missing = [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not (action.help or "").strip()
    ]
    assert not missing, f"harness bench {name}: options without help: {missing}"


def test_tables_name_their_columns_and_align_numbers() -> None:
    text = format_table(
        [{"backend": "process", "W": 2, "s": 0.1234}, {"backend": "ray", "W": 16, "s": None}],
        [("backend", "backend", ""), ("W", "W", "d"), ("s", "s/gen", ".2f")],
    )
    lines = text.splitlines()
    assert lines[0].split() == ["backend", "W", "s/gen"]
    assert lines[2].split() == ["process", "2", "0.12"]
    assert lines[3].split() == ["ray", "16"]
    assert lines[2].index("2 ") == lines[3].index("16") + 1  # right-aligned numbers
