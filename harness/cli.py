"""The ``harness`` command line."""

from __future__ import annotations

# First of all: a Ctrl-C during the imports below ends the command quietly (see the module).
import harness.quiet_start  # noqa: F401

# isort: split

import argparse
import contextlib
import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from harness import schema
from harness.commands import (
    ERROR_PREFIX,
    EXIT_USAGE,
    OVERSUBSCRIBE_FACTOR,
    OneLineErrorParser,
    UsageError,
    print_outcome,
    terminal_text,
)
from harness.config import ConfigError
from harness.launch import check_can_start, resolve_run_args, start_run
from harness.signals import latch_stop_signals

#: Exit status when the reader of our output went away (a shell's 128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141

RUN_DESCRIPTION = """\
Train one algorithm on one env as a Sacred run (RUNS_DIR/<id>/).

A knob not given here takes, in order: the env's entry in your --defaults FILE, then in
an installed package's defaults (docs/extending.md), then in experiments/defaults.yaml
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
    schema.add_set_flag(parser, "override a knob (see the list below)")


def cmd_run(args: argparse.Namespace) -> int:
    latch_stop_signals()  # a stop signal from here on interrupts the run once it can resume
    resolved = resolve_run_args(args)
    if args.print_config:
        print(resolved.describe())
        print("# --print-config: nothing was run or written")
        return 0
    config = resolved.config
    if args.no_progress:
        os.environ["HARNESS_PROGRESS"] = "0"
    runs_dir = Path(args.runs_dir)
    check_can_start(config, runs_dir, oversubscribe=args.oversubscribe)
    try:
        run = start_run(config, runs_dir, verbose=args.verbose)
    except Exception as error:
        return report_run_failure(error, runs_dir)
    return report_outcome(run, runs_dir / str(run._id))


def report_run_failure(error: Exception, runs_dir: Path) -> int:
    """One line for a run that could not start or failed; exit status 1."""
    from harness.experiment import run_failure_message

    message = run_failure_message(error)
    if message is None:
        if not isinstance(error, OSError):
            raise error
        # The run record itself could not be created (a full or read-only disk).
        message = f"cannot start a run in {runs_dir}: {error.strerror or error}"
    print(f"harness: {message}", file=sys.stderr)
    return 1


def report_outcome(run: Any, run_dir: Path) -> int:
    """The finished run's lines; exit status 1 when its record could not say how it ended."""
    from harness.experiment import unrecorded_outcome

    print_outcome(run, run_dir)
    unrecorded = unrecorded_outcome()
    if unrecorded is not None:
        print(f"harness: {unrecorded}", file=sys.stderr)
        return 1
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from algorithms.registry import algorithm_names, algorithm_source, get_algorithm
    from envs.registry import list_envs
    from harness.config import import_user_modules

    try:
        import_user_modules(args.imports or [])
    except ConfigError as error:
        raise UsageError(str(error)) from None
    print("algorithms:")
    for name in algorithm_names():
        cls = get_algorithm(name)
        source = algorithm_source(name)
        origin = "" if source.startswith("module algorithms.") else f" (from {source})"
        print(f"  {name:<14} [{cls.family}] {cls.summary}{origin}")
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


def _invoked(argv: Sequence[str] | None) -> tuple[str | None, bool]:
    """The sub-command ``argv`` names (None: all may be needed) and whether help is asked.

    With ``argv`` None (a caller that wants the whole parser) every sub-command counts.
    """
    if argv is None:
        return None, True
    command = next((token for token in argv if not token.startswith("-")), None)
    known = command in COMMANDS or command in COMMAND_MODULES
    return (command if known else None), any(t in ("-h", "--help") for t in argv)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``harness`` parser; given ``argv``, only the sub-command it names is built whole.

    Each sub-command's module (and ``harness run``'s generated ``--set`` list) costs
    imports, half a second together; a command needs only its own. The others are
    still listed in ``harness --help``, with no flags of their own.
    """
    command, wants_help = _invoked(argv)
    parser = OneLineErrorParser(
        prog="harness", description="Compare evolution strategies with RL, with evidence."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="train one algorithm on one env (a Sacred run)",
        description=RUN_DESCRIPTION,
        epilog=_knob_help() if command in (None, "run") and wants_help else None,
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
        "--oversubscribe",
        action="store_true",
        help="allow more workers than this machine's (or the Ray cluster's) CPUs "
        f"times {OVERSUBSCRIBE_FACTOR}",
    )
    run.add_argument(
        "-v", "--verbose", action="store_true", help="show Sacred's log (run id, result)"
    )
    listing = sub.add_parser("list", help="algorithms, environments, policies")
    listing.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import a module of your own first (its envs and algorithms are listed too)",
    )
    for name, (module_name, help_text) in COMMAND_MODULES.items():
        if command is not None and name != command:
            sub.add_parser(name, help=help_text, description=help_text)  # not parsed here
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        command_parser = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command_parser)
        command_parser.set_defaults(handler=module.run)
    return parser


#: Further sub-commands: each module defines ``add_arguments(parser)`` and ``run(args) -> int``
#: and raises :class:`harness.commands.UsageError` for bad input.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "sweep": ("harness.sweep", "run every cell of a sweep file, skipping completed ones"),
    "report": ("harness.report", "write a comparison report from stored runs"),
    "resume": ("harness.resume", "continue an interrupted run from its last checkpoint"),
    "check-repro": ("harness.repro", "run a config repeatedly and compare metric digests"),
    "bench": ("harness.bench", "measure this machine: overhead, scaling, wire"),
    "benchmark": ("harness.benchmark", "the ES-against-RL benchmark: plan, run, report"),
    "enjoy": ("harness.enjoy", "play a run's stored policy: returns per episode, a video"),
    "tune": (
        "harness.tune.command",
        "tune hyperparameters with Optuna: each trial x seed is a run (docs/tuning.md)",
    ),
}


@contextlib.contextmanager
def children_without_working_folder() -> Iterator[None]:
    """Every Python process a command starts (sweep cells, evaluation workers, multiprocessing's
    helpers, Ray's processes) leaves the working folder off ``sys.path``: ``python -m`` and
    ``python -c`` would put it first, and a ``yaml.py`` planted there would run
    (``PYTHONSAFEPATH``, as ``-P``; docs/trust.md)."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``harness`` console script."""
    from harness import quiet_start

    try:
        quiet_start.restore()  # from here, Ctrl-C is KeyboardInterrupt, handled below
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None) or COMMANDS[args.command]
        with children_without_working_folder():
            return handler(args)
    except UsageError as error:
        print(f"{ERROR_PREFIX} {terminal_text(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(quiet_start.MESSAGE, file=sys.stderr)
        return quiet_start.EXIT_INTERRUPTED
    except BrokenPipeError:
        # `harness list | head`: the reader left; say nothing more (Python's own advice:
        # point stdout at devnull so the interpreter's final flush cannot fail again).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
