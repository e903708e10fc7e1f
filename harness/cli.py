"""The ``harness`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness import schema
from harness.config import ConfigError, ResolvedConfig, build_run_config

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2, nothing written."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), the one ``harness: error:`` prefix."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"harness: error: {message} (see `{self.prog} --help`)\n")


def positive(kind: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` that must be > 0; errors name the flag and the value."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {noun}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {value}")
        return value

    return parse


RUN_DESCRIPTION = """\
Train one algorithm on one env as a Sacred run (RUNS_DIR/<id>/).

A knob not given here takes, in order: the env's entry in experiments/defaults.yaml
(its short name, then its gymnasium id), that file's `default` entry, then the
built-in default that --help shows. So per-env values win over the defaults below
(CartPole's optimes population is 20, not 40): --print-config shows every value of
the completed run and where it came from, and creates nothing."""


def _knob_help() -> str:
    """The ``--set`` keys, generated from the schema and each algorithm's config dataclass."""
    from algorithms.registry import algorithm_names, get_algorithm

    def line(name: str, default: Any, doc: str, knob: schema.Knob | None = None) -> str:
        only = " [ES family only]" if knob is not None and knob.families != schema.ALL else ""
        return f"    {name} (default {default!r}){only}: {doc}"

    lines = [
        "--set KEY=VALUE (YAML values, repeatable). The defaults shown are built in;",
        "experiments/defaults.yaml refines them per env, and",
        "`harness run --algo A --env E --print-config` shows the values in force.",
        "  run:",
    ]
    lines += [line(k.name, k.default, k.doc, k) for k in schema.knobs("run")]
    lines.append("  budget (also flags above): " + ", ".join(schema.BUDGET_KEYS))
    lines.append("  policy (also as policy.KEY):")
    lines += [line(k.key, k.default, k.doc, k) for k in schema.knobs("policy")]
    for name in algorithm_names():
        cls = get_algorithm(name)
        lines.append(f"  {name} hyperparameters ({cls.Config.__name__}):")
        for field in dataclasses.fields(cls.Config):
            lines.append(line(field.name, field.default, field.metadata.get("doc", "")))
    lines.append(
        "Other names are suggested: "
        + "; ".join(
            f"{alias} -> {'/'.join(targets)}"
            for alias, targets in schema.ALIASES.items()
            if alias in ("popsize", "lr", "sigma0", "num_envs", "n_timesteps", "eval_freq")
        )
        + ", ..."
    )
    return "\n".join(lines)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``harness run``: every knob flag of the schema, and the run's own."""
    schema.add_flags(parser)
    parser.add_argument(
        "--runs-dir",
        "-f",
        default="runs",
        help="Sacred FileStorage directory (default: runs)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a knob (see the list below)",
    )


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


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The completed, validated run config the flags describe."""
    return resolve_run_args(args).config


def check_runs_dir(path: Path) -> None:
    """Refuse a runs directory this user cannot write, before anything is created."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    writable = probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
    if writable:  # os.access says yes to root everywhere: try it (a file, removed at once)
        try:
            with tempfile.TemporaryFile(dir=probe, prefix=".harness-probe-"):
                pass
        except OSError:
            writable = False
    if not writable:
        raise UsageError(f"runs directory {str(path)!r} is not writable")


def check_ray_address(address: str | None, timeout_s: float = 3.0) -> None:
    """Refuse a Ray address that nothing answers on, before anything is created.

    Forms: ``HOST:PORT`` (GCS, default port 6379), ``ray://HOST:PORT`` (Ray
    client, default 10001), ``auto`` (the cluster recorded by ``ray start`` on
    this machine) and ``local`` / none (a new local instance, always fine).
    """
    if not address or address == "local":
        return
    target = address
    if address == "auto":
        folder = Path(os.environ.get("RAY_TMPDIR") or "/tmp/ray")
        try:
            target = (folder / "ray_current_cluster").read_text().strip()
        except OSError:
            target = ""
        if not target:
            raise UsageError(
                "ray address 'auto': no running Ray cluster on this machine "
                "(start one with `ray start --head`)"
            )
    scheme, sep, rest = target.partition("://")
    if not sep:
        scheme, rest = "", target
    if scheme not in ("", "ray"):
        raise UsageError(f"ray address {address!r}: unknown scheme {scheme + '://'!r}")
    rest = rest.split("/", 1)[0]
    host, colon, port_text = rest.rpartition(":")
    if not colon or host.endswith(":"):  # no port (or a bare IPv6 address)
        host, port_text = rest, "10001" if scheme == "ray" else "6379"
    host = host.strip("[]")
    if not host:
        raise UsageError(f"ray address {address!r} names no host")
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"ray address {address!r}: port {port_text!r} is not a number") from None
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise UsageError(
            f"ray address {address!r} is unreachable ({host}:{port}: {reason})"
        ) from None


def start_run(config: dict[str, Any], runs_dir: Path, verbose: bool = False) -> Any:
    """Run one Sacred-tracked training run into ``runs_dir``; return the Sacred run."""
    from harness.experiment import make_observer
    from harness.experiment import start_run as start

    return start(config, [make_observer(runs_dir)], verbose=verbose)


def cmd_run(args: argparse.Namespace) -> int:
    resolved = resolve_run_args(args)
    if args.print_config:
        print(resolved.describe())
        print("# --print-config: nothing was run or written")
        return 0
    config = resolved.config
    if args.no_progress:
        os.environ["HARNESS_PROGRESS"] = "0"
    runs_dir = Path(args.runs_dir)
    check_runs_dir(runs_dir)
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))
    try:
        run = start_run(config, runs_dir, verbose=args.verbose)
    except Exception as error:
        from harness.experiment import run_failure_message

        message = run_failure_message(error)  # None: no run started, show the traceback
        if message is None:
            raise
        print(f"harness: {message}", file=sys.stderr)
        return 1
    print_outcome(run, runs_dir / str(run._id))
    return 0


def print_outcome(run: Any, run_dir: Path) -> None:
    """One line for the finished Sacred run, one for its result."""
    result = run.result or {}
    print(f"run {run_dir.name} {run.status}: {run_dir}")
    if result:
        final = result.get("final_eval_return")
        print(
            f"  {result['timesteps']} timesteps, {result['wall_time_s']:.1f}s, "
            f"final eval return {final if final is None else round(final, 2)} "
            f"({result['stop_reason']})"
        )


def cmd_list(args: argparse.Namespace) -> int:
    from algorithms.registry import algorithm_names, get_algorithm
    from envs.registry import list_envs

    print("algorithms:")
    for name in algorithm_names():
        cls = get_algorithm(name)
        print(f"  {name:<14} [{cls.family}] {cls.summary}")
    print("  ng:NAME        [es] any optimizer in Nevergrad's registry (ng:CMA, ng:TwoPointsDE)")
    print("environments (any other gymnasium id passes through):")
    for short, gym_id, description in list_envs():
        print(f"  {short:<22} {gym_id:<28} {description}")
    print("policies:")
    print("  linear  obs -> action, no hidden layer")
    print("  mlp     hidden_sizes layers, tanh or relu; optional discretised outputs")
    print("  lstm    one LSTM layer (hidden_sizes[0] cells) + linear output")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": cmd_run, "list": cmd_list}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness", description="Compare evolution strategies with RL, with evidence."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="train one algorithm on one env (a Sacred run)",
        description=RUN_DESCRIPTION,
        epilog=_knob_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(run)
    run.add_argument(
        "--print-config",
        "--dry-run",
        action="store_true",
        help="print the completed config and where each value came from; run nothing",
    )
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument(
        "-v", "--verbose", action="store_true", help="show Sacred's log (run id, result)"
    )
    sub.add_parser("list", help="algorithms, environments, policies")
    for command, (module_name, help_text) in COMMAND_MODULES.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        command_parser = sub.add_parser(
            command,
            help=help_text,
            description=help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command_parser)
        command_parser.set_defaults(handler=module.run)
    return parser


#: Further sub-commands: each module defines ``add_arguments(parser)`` and ``run(args) -> int``
#: and raises :class:`UsageError` for bad input.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "sweep": ("harness.sweep", "run every cell of a sweep file, skipping completed ones"),
    "report": ("harness.report", "write a comparison report from stored runs"),
    "resume": ("harness.resume", "continue an interrupted run from its last checkpoint"),
    "check-repro": ("harness.repro", "run a config repeatedly and compare metric digests"),
    "bench": ("harness.bench", "measure this machine: overhead, scaling, wire"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``harness`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or COMMANDS[args.command]
    try:
        return handler(args)
    except UsageError as error:
        print(f"harness: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run the imported module's main: sub-command modules raise harness.cli.UsageError, which
    # is another class than this __main__ module's own copy.
    from harness.cli import main as _main

    sys.exit(_main())
