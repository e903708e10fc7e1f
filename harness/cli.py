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

from harness.config import (
    POLICY_KEYS,
    RUN_KEYS,
    ConfigError,
    apply_overrides,
    complete_config,
)

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2, nothing written."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


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


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"target return must be a number, got {text!r}") from None


def _knob_help() -> str:
    from algorithms.registry import algorithm_names, get_algorithm

    lines = ["--set keys (key=value, YAML syntax; repeatable):", "  run:"]
    lines += [f"    {key}: {doc}" for key, (_, doc) in RUN_KEYS.items()]
    lines.append("  policy (also as policy.KEY):")
    lines += [f"    {key}: {doc}" for key, (_, doc) in POLICY_KEYS.items()]
    for name in algorithm_names():
        cls = get_algorithm(name)
        lines.append(f"  {name} hyperparameters:")
        for field in dataclasses.fields(cls.Config):
            lines.append(
                f"    {field.name} (default {field.default!r}): {field.metadata.get('doc', '')}"
            )
    return "\n".join(lines)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``run`` (and reused by sweeps and checks)."""
    parser.add_argument("--algo", default="optimes", help="algorithm name (see `harness list`)")
    parser.add_argument(
        "--env", default="LunarLanderContinuous", help="env short name or any gymnasium id"
    )
    parser.add_argument(
        "--episodes",
        type=positive(int, "episodes"),
        default=1,
        help="episodes per fitness evaluation",
    )
    parser.add_argument(
        "--workers",
        type=positive(int, "workers"),
        default=os.cpu_count() or 1,
        help="parallel evaluation workers (RL: parallel envs); default: CPUs",
    )
    parser.add_argument("--seed", type=int, default=0, help="run seed")
    budget = parser.add_argument_group("budget (whichever comes first; none: the env default)")
    budget.add_argument("--timesteps", type=positive(int, "timesteps"), help="training env steps")
    budget.add_argument(
        "--generations",
        type=positive(int, "generations"),
        help="generations (RL: rollout/update chunks)",
    )
    budget.add_argument(
        "--time-limit", type=positive(float, "time limit"), help="training wall-clock seconds"
    )
    budget.add_argument(
        "--target-return", type=_float, help="stop once an evaluation's mean return reaches this"
    )
    parser.add_argument("--backend", default="process", help="inline, process or ray")
    parser.add_argument(
        "--ray-address",
        default=os.environ.get("RAY_ADDRESS"),
        help="Ray cluster address (default: RAY_ADDRESS or a local instance)",
    )
    parser.add_argument("--runs-dir", default="runs", help="Sacred FileStorage directory")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a knob (see the list below)",
    )


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The completed, validated run config the flags describe."""
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    config: dict[str, Any] = {
        "algo": args.algo,
        "env": args.env,
        "seed": args.seed,
        "episodes": args.episodes,
        "workers": args.workers,
        "backend": args.backend,
        "ray_address": args.ray_address,
        "timesteps": args.timesteps,
        "generations": args.generations,
        "time_limit": args.time_limit,
        "target_return": args.target_return,
        "policy": {},
        "params": {},
    }
    try:
        algo_cls = get_algorithm(args.algo)
    except UnknownAlgorithmError as error:
        raise UsageError(str(error)) from None
    try:
        config = apply_overrides(config, list(args.overrides), algo_cls.Config)
        return complete_config(config)
    except ConfigError as error:
        raise UsageError(str(error)) from None


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


def start_run(config: dict[str, Any], runs_dir: Path) -> Any:
    """Run one Sacred-tracked training run into ``runs_dir``; return the Sacred run."""
    from harness.experiment import ex, make_observer

    ex.observers = [make_observer(runs_dir)]
    # The config is complete and validated; "--force" silences Sacred's notes about the keys
    # that the defaults hook filled in (params.*, policy.*).
    return ex.run(config_updates=config, options={"--force": True})


def cmd_run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.no_progress:
        os.environ["HARNESS_PROGRESS"] = "0"
    runs_dir = Path(args.runs_dir)
    check_runs_dir(runs_dir)
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))
    try:
        run = start_run(config, runs_dir)
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
        epilog=_knob_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(run)
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
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
