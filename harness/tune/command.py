"""``harness tune``: the command line, its checks, and the studies it runs one after another.

Everything the user gave is checked before anything is written (exit status 2, one line
naming the bad value): run seeds below 100 only (seeds from 100 on are held out for
reported results), exactly one budget, the algorithms, the env, each search space and
the configs at its extremes, the runs directory, the Ray address, the storage URL.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from harness import schema
from harness.commands import (
    UsageError,
    add_import_flag,
    check_ray_address,
    check_run_resources,
    check_runs_dir,
)
from harness.tune import scores
from harness.tune.study import StudyPlan, StudyRunner, check_tag, say, silence_optuna

#: Seeds from here on are held out for reported results (DESIGN.md): tuning never uses them.
HELD_OUT_FROM = 100
DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_CHECK_SEEDS = (50, 51, 52)
#: Evaluations per run the study's evaluation interval aims at (timestep or CPU budgets).
DEFAULT_EVALUATIONS = 10
#: TPE's random start and the pruner's exemption, as rl-baselines3-zoo's default.
DEFAULT_STARTUP_TRIALS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``harness tune``."""
    parser.description = (
        "Tune hyperparameters with Optuna (TPE, seeded; median pruning on each run's "
        "evaluations). Each trial x seed is an ordinary run (Sacred run directory, tagged "
        "with the study's name as its sweep). Objective: " + scores.OBJECTIVE + "; with "
        "--target-return R, the time to a confirmed R instead (the fewest timesteps)."
    )
    parser.add_argument(
        "--algo",
        nargs="+",
        required=True,
        metavar="A",
        help="algorithm(s); several: one study each, the same budget each (equal effort)",
    )
    parser.add_argument("--env", required=True, metavar="E", help="env short name or gym id")
    parser.add_argument(
        "--trials",
        required=True,
        type=_positive_int("--trials"),
        metavar="N",
        help="trials of each study (a target: a rerun or a second process adds only what is "
        "missing)",
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=_seed("--seeds"),
        default=list(DEFAULT_SEEDS),
        metavar="S",
        help="run seeds of every trial, each below 100 (default: 0 1 2)",
    )
    parser.add_argument(
        "--check-seeds",
        nargs="*",
        type=_seed("--check-seeds"),
        default=list(DEFAULT_CHECK_SEEDS),
        metavar="S",
        help="fresh tuning seeds the best trial is re-evaluated on after the study, each "
        "below 100 (default: 50 51 52; none: no re-evaluation)",
    )
    budget = parser.add_argument_group("budget of each run (one of)")
    budget.add_argument(
        "--timesteps",
        "-n",
        type=schema.flag_type(schema.BY_NAME["timesteps"]),
        metavar="T",
        help="training env steps per trial and seed",
    )
    budget.add_argument(
        "--cpu-limit",
        type=schema.flag_type(schema.BY_NAME["cpu_limit"]),
        metavar="SEC",
        help="training CPU-seconds per trial and seed",
    )
    parser.add_argument(
        "--target-return",
        type=schema.flag_type(schema.BY_NAME["target_return"]),
        metavar="R",
        help="tune for speed: each run stops at a confirmed eval return R, and the objective "
        "is minus the mean timesteps it took (the --timesteps budget, the cap, for a run that "
        "never confirmed)",
    )
    parser.add_argument("--runs-dir", default="runs", help="Sacred FileStorage directory")
    parser.add_argument(
        "--storage",
        type=_storage_url,
        default=None,
        metavar="URL",
        help="SQLAlchemy URL of the studies (default: sqlite:///RUNS_DIR/_tune/tune.db); "
        "several processes may share one on a database server",
    )
    parser.add_argument(
        "--study",
        default=None,
        metavar="NAME",
        help="name of the study group: algorithm A's study is NAME-A (default: tune-ENV)",
    )
    parser.add_argument(
        "--jobs",
        type=_positive_int("--jobs"),
        default=1,
        metavar="J",
        help="trials at once (each runs its seeds side by side)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="run every trial's runs as Ray work on the cluster at ADDR, as `harness sweep "
        "--ray-address` does (default: $RAY_ADDRESS if set; 'local': a private instance)",
    )
    parser.add_argument(
        "--space",
        type=Path,
        default=None,
        metavar="FILE",
        help="search spaces to use instead of experiments/search_spaces.yaml (same format)",
    )
    parser.add_argument(
        "--seed",
        type=_sampler_seed,
        default=0,
        metavar="S",
        help="seed of the TPE sampler (default 0)",
    )
    parser.add_argument(
        "--startup-trials",
        type=_positive_int("--startup-trials"),
        default=DEFAULT_STARTUP_TRIALS,
        metavar="K",
        help="random trials before TPE models the results, and trials before the pruner "
        f"acts (default {DEFAULT_STARTUP_TRIALS}, as rl-baselines3-zoo)",
    )
    parser.add_argument(
        "--evaluations",
        type=_positive_int("--evaluations"),
        default=DEFAULT_EVALUATIONS,
        metavar="N",
        help="evaluations per run: with --timesteps T, eval_every_timesteps is T/N, with "
        "--cpu-limit SEC, eval_every_cpu_seconds is SEC/N, unless --set gives either; the "
        f"pruner waits N/3 of them (default {DEFAULT_EVALUATIONS})",
    )
    schema.add_set_flag(parser, "a knob of every run, not tuned (as `harness run --set`)")
    parser.add_argument(
        "--workers",
        type=schema.flag_type(schema.BY_NAME["workers"]),
        default=1,
        metavar="W",
        help="workers of each run (default 1)",
    )
    parser.add_argument(
        "--backend",
        default=None,
        choices=("inline", "process", "ray"),
        help="where an ES run evaluates its candidates (default: process)",
    )
    add_import_flag(parser, "first, in every run (envs or algorithms of your own)")
    parser.add_argument(
        "--defaults",
        default=None,
        metavar="FILE",
        help=schema.flag_help(schema.BY_NAME["defaults"]),
    )
    parser.add_argument(
        "--ship-every",
        type=float,
        default=10.0,
        metavar="SEC",
        help="with --ray-address: seconds between shipments of a run's directory (10)",
    )
    parser.add_argument(
        "--ray-retries",
        type=int,
        default=3,
        metavar="N",
        help="with --ray-address: retries of a run whose node dies (3)",
    )
    parser.add_argument(
        "--trust-legacy-checkpoints",
        action="store_true",
        help="continue interrupted runs whose checkpoints are unsigned pickles of an earlier "
        "harness version (docs/trust.md)",
    )


def _positive_int(flag: str) -> Any:
    def parse(text: str) -> int:
        value = schema.parse_number(text, integer=True)
        if value is None or int(value) < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer, got {text!r}")
        return int(value)

    return parse


def _seed(flag: str) -> Any:
    def parse(text: str) -> int:
        value = schema.parse_number(text, integer=True)
        if value is None or int(value) < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be integers >= 0, got {text!r}")
        if int(value) >= HELD_OUT_FROM:
            raise argparse.ArgumentTypeError(
                f"{flag} {int(value)}: tuning uses seeds below {HELD_OUT_FROM}; seeds from "
                f"{HELD_OUT_FROM} on are held out for reported results"
            )
        return int(value)

    return parse


def _sampler_seed(text: str) -> int:
    value = schema.parse_number(text, integer=True)
    if value is None or not 0 <= int(value) <= schema.SEED_MAX:
        raise argparse.ArgumentTypeError(f"--seed must be an integer >= 0, got {text!r}")
    return int(value)


def _storage_url(text: str) -> str:
    """``--storage``: a database URL SQLAlchemy can read (port, options), checked by
    building its engine, which connects to nothing; whether it answers is checked later."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from harness.tune.storage import shown

    example = "e.g. sqlite:///runs/_tune/tune.db or postgresql+psycopg2://user@host/db"
    try:
        url = make_url(text)
    except (ArgumentError, ValueError, TypeError) as error:
        # a port that is not a number arrives as int()'s ValueError
        reason = " ".join(str(error).split())
        hidden = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", text)  # no password in messages
        raise argparse.ArgumentTypeError(
            f"--storage {hidden!r} is not a database URL ({reason}; {example})"
        ) from None
    if url.port is not None and not 0 < url.port < 65536:
        raise argparse.ArgumentTypeError(
            f"--storage {shown(text)!r}: port {url.port} is not a port number (1 to 65535)"
        )
    try:
        create_engine(url).dispose()
    except (NoSuchModuleError, ImportError):
        pass  # a database whose driver is missing: refused, naming it, when it is opened
    except (ArgumentError, ValueError, TypeError) as error:
        reason = " ".join(str(error).split())
        raise argparse.ArgumentTypeError(f"--storage {shown(text)!r}: {reason}") from None
    return text


def _distinct(values: list[int], flag: str) -> None:
    seen: set[int] = set()
    for value in values:
        if value in seen:
            raise UsageError(f"{flag} lists seed {value} twice")
        seen.add(value)


def _set_key(assignment: str) -> str:
    return assignment.partition("=")[0].strip()


def build_plans(args: argparse.Namespace) -> list[StudyPlan]:
    """Check every flag and space and build each algorithm's plan; nothing is written."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm
    from envs.registry import UnknownEnvError, resolve_env_id
    from harness.config import ConfigError, import_user_modules
    from harness.tune.space import SpaceError, load_space
    from harness.tune.storage import check_url, default_url

    _distinct(args.seeds, "--seeds")
    _distinct(args.check_seeds, "--check-seeds")
    reused = sorted(set(args.seeds) & set(args.check_seeds))
    if reused:
        raise UsageError(
            f"--check-seeds {reused[0]} is also a tuning seed; the re-evaluation needs fresh seeds"
        )
    given = [name for name in ("timesteps", "cpu_limit") if getattr(args, name) is not None]
    if len(given) != 1:
        raise UsageError(
            "give one budget per run: --timesteps T or --cpu-limit SEC"
            + (" (not both)" if given else "")
        )
    budget = {given[0]: getattr(args, given[0])}
    if args.target_return is not None:
        if budget.get("timesteps") is None:
            raise UsageError(
                f"--target-return {args.target_return:g} needs --timesteps T: the cap, the "
                "timesteps a run that never confirms it is scored at"
            )
        budget["target_return"] = args.target_return
    if args.ship_every <= 0:
        raise UsageError(
            f"--ship-every must be a positive number of seconds, got {args.ship_every}"
        )
    if args.ray_retries < 0:
        raise UsageError(f"--ray-retries must be 0 or more, got {args.ray_retries}")
    try:
        imports = import_user_modules(list(args.imports or []))
    except ConfigError as error:
        raise UsageError(str(error)) from None
    defaults = None
    if getattr(args, "defaults", None) is not None:
        from harness.config import load_user_defaults

        try:
            defaults = load_user_defaults(args.defaults).path
        except ConfigError as error:
            raise UsageError(str(error)) from None
    algos = list(dict.fromkeys(args.algo))
    for algo in algos:
        try:
            get_algorithm(algo)
        except AlgorithmRegistryError as error:
            raise UsageError(str(error)) from None
    try:
        resolve_env_id(args.env)
    except UnknownEnvError as error:
        raise UsageError(str(error)) from None
    group = args.study or f"tune-{args.env.replace(':', '_').replace('/', '_')}"
    check_tag(group)
    if args.space is not None and not args.space.is_file():
        raise UsageError(f"--space {str(args.space)!r} is not a file")
    common = list(args.overrides)
    evaluations = int(args.evaluations)
    scheduled = {_set_key(a) for a in common} & {"eval_every_timesteps", "eval_every_cpu_seconds"}
    if budget.get("timesteps") is not None and not scheduled:
        common.append(f"eval_every_timesteps={max(1, int(budget['timesteps']) // evaluations)}")
    elif budget.get("cpu_limit") is not None and not scheduled:
        # the CPU-seconds budget spread the same way: an evaluation every limit/N CPU-seconds
        every = Decimal(repr(float(budget["cpu_limit"]) / evaluations))
        common.append(f"eval_every_cpu_seconds={every:f}")  # positional: YAML reads 1e-05 as text
    runs_dir = Path(args.runs_dir)
    url = args.storage or default_url(runs_dir)
    plans = []
    for algo in algos:
        try:
            space = load_space(algo, args.space)
        except SpaceError as error:
            raise UsageError(str(error)) from None
        plan = StudyPlan(
            group=group,
            algorithms=algos,
            algo=algo,
            env=args.env,
            space=space,
            trials=int(args.trials),
            seeds=list(args.seeds),
            check_seeds=list(args.check_seeds),
            budget=budget,
            common=common,
            workers=int(args.workers),
            backend=args.backend,
            imports=imports,
            sampler_seed=int(args.seed),
            startup_trials=int(args.startup_trials),
            warmup_steps=evaluations // 3,
            storage_url=url,
            runs_dir=runs_dir,
            defaults=defaults,
        )
        _check_fixed(plan, args.overrides)
        _check_configs(plan, local=args.ray_address is None)
        plans.append(plan)
    check_runs_dir(runs_dir)
    if args.ray_address not in (None, "local"):
        check_ray_address(args.ray_address)
    if args.storage is not None:
        check_url(args.storage, creating=True)
        _check_sqlite_folder(args.storage)
    return plans


def _check_sqlite_folder(url: str) -> None:
    from harness.tune.storage import shown, sqlite_path

    path = sqlite_path(url)
    if path is not None and not path.parent.is_dir():
        raise UsageError(f"storage {shown(url)!r}: no such directory {str(path.parent)!r}")


def _check_fixed(plan: StudyPlan, overrides: list[str]) -> None:
    """Refuse a ``--set`` of a key the space samples: which would the runs get?"""
    from algorithms.registry import get_algorithm
    from harness.config import ConfigError, param_types, parse_assignment

    params = param_types(get_algorithm(plan.algo).Config)

    def path(assignment: str) -> str | None:
        try:
            return parse_assignment(assignment, params)[0]
        except ConfigError:
            return None  # refused with its own message when the configs are built

    def where(key: str) -> str:
        section, _, name = key.rpartition(".")
        if section in ("", "params") and name in params:
            return f"params.{name}"
        knob = schema.find(key)
        return knob.name if knob is not None else key

    sampled = {where(p.key): p.key for p in plan.space.params}
    for assignment in overrides:
        key = path(assignment)
        if key is not None and key in sampled:
            raise UsageError(
                f"--set {assignment.strip()}: {sampled[key]} is in {plan.algo}'s search space "
                f"({plan.space.source}); fix it there (--space FILE) or drop the --set"
            )


def _check_configs(plan: StudyPlan, local: bool) -> None:
    """Refuse a space whose extreme values, or whose runs' common settings, a run refuses."""
    from harness.config import ConfigError

    seed = plan.seeds[0]
    points: list[tuple[str, dict[str, Any]]] = [("", {})]
    for param in plan.space.params:
        for value in param.extremes():
            points.append((f"{param.key} = {value!r}", {param.key: value}))
    for what, values in points:
        try:
            cell = plan.cell(values, seed)
            if local:
                check_run_resources(cell.config)
        except (ConfigError, UsageError) as error:
            where = f"{plan.space.source}: {plan.algo}.{what}: " if what else f"{plan.algo}: "
            raise UsageError(f"{where}{error}") from None


def run(args: argparse.Namespace) -> int:
    """``harness tune``: 0 when every study has a best trial, 1 otherwise."""
    from harness.signals import interrupt_on_stop_signals

    plans = build_plans(args)  # every check; nothing written yet
    from harness.checkpoint import ensure_checkpoint_key
    from harness.tune.storage import open_storage

    silence_optuna()
    interrupt_on_stop_signals()
    ensure_checkpoint_key()
    url = plans[0].storage_url
    storage = open_storage(url)
    address = args.ray_address or os.environ.get("RAY_ADDRESS") or None
    started_ray = _connect_ray(address) if address is not None else False
    cores = os.cpu_count() or 1
    if address is None and args.jobs * len(args.seeds) * args.workers > cores:
        print(
            f"harness: note: {args.jobs} jobs x {len(args.seeds)} seeds x {args.workers} "
            f"workers on {cores} cores; CPU-second budgets are unaffected, wall-clock is shared",
            file=sys.stderr,
        )
    status = 0
    try:
        for plan in plans:
            status = max(status, _tune(plan, storage, args, ray=address is not None))
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    return status


def _connect_ray(address: str) -> bool:
    import signal

    from evaluation.ray_backend import connect

    started = connect(
        None if address == "local" else address,
        num_cpus=os.cpu_count() or 1,
        object_store_bytes=0,
        py_modules=("harness", "algorithms", "evaluation", "envs"),
    )

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # ray.init installs a SIGTERM handler that exits at once: stop the runs first instead
    signal.signal(signal.SIGTERM, interrupt)
    return started


def _study(plan: StudyPlan, storage: Any) -> Any:
    """Create or continue the plan's study, refusing one made with other settings."""
    import optuna

    from harness.tune.study import check_compatible

    study = optuna.create_study(
        study_name=plan.name, storage=storage, direction="maximize", load_if_exists=True
    )
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise UsageError(f"study {plan.name} exists and minimises; harness studies maximise")
    check_compatible(plan.name, plan.storage_url, dict(study.user_attrs), plan)
    for key, value in plan.record().items():
        if study.user_attrs.get(key) != value:
            study.set_user_attr(key, value)
    return study


def _tune(plan: StudyPlan, storage: Any, args: argparse.Namespace, ray: bool) -> int:
    from optuna.trial import TrialState

    from harness.tune.best import Tuned, TunedError, best_of, checked_trials
    from harness.tune.outputs import write_outputs
    from harness.tune.storage import shown

    study = _study(plan, storage)
    say(
        f"study {plan.name} ({shown(plan.storage_url)}): {plan.effort()}; objective: "
        f"{plan.objective.text}"
    )
    runner = StudyRunner(
        plan,
        storage,
        jobs=args.jobs,
        ray=ray,
        ship_every_s=args.ship_every,
        ray_retries=args.ray_retries,
        trust_legacy=args.trust_legacy_checkpoints,
        echo=say,
    )
    try:
        runner.run()
    except KeyboardInterrupt:
        if runner.requeued:
            print(
                f"harness: {plan.name}: interrupted; trial(s) "
                f"{', '.join(map(str, sorted(runner.requeued)))} marked FAIL and queued again "
                "with the same parameters; rerun the same command to continue",
                file=sys.stderr,
            )
        raise
    study = runner.load()
    trials = study.get_trials(deepcopy=False)
    elsewhere = [t.number for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    notes = []
    if elsewhere:
        notes.append(
            f"Trials {', '.join(map(str, elsewhere))} were still running or queued (another "
            "process) when this report was written: it shows the study as it stood; rerun the "
            "command when they have ended for the final outputs and the re-evaluation."
        )
    checked, skipped = checked_trials(study, plan.space)  # a study is data: see best.py
    if skipped:
        print(skipped, file=sys.stderr)
    try:
        tuned: Tuned | None = best_of(study, plan.storage_url, plan.algo, checked)
    except TunedError:
        tuned = None  # no completed trial
    if tuned is not None and not elsewhere and runner.recheck(study, tuned) is not None:
        tuned = best_of(study, plan.storage_url, plan.algo, checked)  # with its recheck
    if tuned is not None and tuned.warning:
        print(tuned.warning, file=sys.stderr)
    written = write_outputs(plan, study, tuned, notes, checked)
    done = {s: sum(t.state == s for t in trials) for s in TrialState}
    summary = (
        f"study {plan.name}: {done[TrialState.COMPLETE]} completed, {done[TrialState.PRUNED]} "
        f"pruned, {done[TrialState.FAIL]} failed"
    )
    if tuned is None:
        say(f"{summary}; no completed trial. Outputs: {', '.join(map(str, written))}")
        return 1
    line = f"{summary}; best trial {tuned.trial}: tuning score {tuned.score:.2f}"
    recheck = tuned.recheck
    if recheck is not None and recheck.get("score") is not None:
        seeds = " ".join(map(str, recheck["seeds"]))
        line += f", recheck on seeds {seeds}: {float(recheck['score']):.2f}"
    elif plan.check_seeds and not elsewhere:
        line += f" (recheck not completed: {recheck.get('failure') if recheck else 'none'})"
    say(line)
    say(f"  outputs: {plan.out_dir} ({', '.join(p.name for p in written)})")
    return 0
