"""Starting one run: the flags to a checked config, the checks before anything is written,
the Sacred run. ``harness run`` (:mod:`harness.cli`) and :func:`harness.run`
(:mod:`harness.api`) both go through here, so they refuse the same input with the same
message and write the same run record.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from harness import schema
from harness.commands import UsageError, check_ray_address, check_run_resources, check_runs_dir
from harness.config import ConfigError, ResolvedConfig, build_run_config

__all__ = ["check_can_start", "resolve_run_args", "start_run"]


def resolve_run_args(args: argparse.Namespace) -> ResolvedConfig:
    """The completed, validated run config the flags describe, with each value's source."""
    given = schema.given_by_flags(args)
    sources = {name: "command line" for name, value in given.items() if value is not None}
    ray_env = os.environ.get("RAY_ADDRESS")
    if given.get("ray_address") is None and ray_env and _uses_ray_address(given.get("algo")):
        given["ray_address"] = ray_env
        sources["ray_address"] = "environment RAY_ADDRESS"
    try:
        return build_run_config(given, source=sources, overrides=list(args.overrides))
    except ConfigError as error:
        raise UsageError(str(error)) from None


def _uses_ray_address(algo: str | None) -> bool:
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    try:
        family = get_algorithm(algo or schema.BY_NAME["algo"].default).family
    except UnknownAlgorithmError:
        return False  # reported when the config is built
    return schema.BY_NAME["ray_address"].applies_to(family)


def check_can_start(config: dict[str, Any], runs_dir: Path, oversubscribe: bool = False) -> None:
    """Refuse (:class:`UsageError`), before anything is written, a run that cannot start:
    an unwritable runs directory, more workers than the machine holds, a noise table too
    small, an unreachable Ray address, no key to sign checkpoints with. ``harness run``
    and :func:`harness.run` check the same things in the same order."""
    check_runs_dir(runs_dir)
    check_run_resources(config, allow_oversubscribe=oversubscribe)
    from harness.pairing import PAIR_FILE_ENV, pair_file

    if config.get("paired_with") and pair_file() is None:
        raise UsageError(
            f"paired_with={config['paired_with']} runs only as one of a pair, side by side "
            f"with its partner (a sweep's pairs or `harness benchmark run`; {PAIR_FILE_ENV})"
        )
    from harness.runner import check_noise_table_fits

    try:
        check_noise_table_fits(config)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))
    from harness.checkpoint import ensure_checkpoint_key

    ensure_checkpoint_key()


def start_run(config: dict[str, Any], runs_dir: Path, verbose: bool = False) -> Any:
    """Run one Sacred-tracked training run into ``runs_dir``; return the Sacred run."""
    from harness.experiment import make_observer
    from harness.experiment import start_run as start

    return start(config, [make_observer(runs_dir)], verbose=verbose)
