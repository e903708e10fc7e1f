"""``harness resume RUN_DIR [--timesteps T | --generations G | --time-limit S | --cpu-limit S]``.

Continues a run from its last checkpoint, in the same Sacred run record
(``RUNS_DIR/<id>/``): the stored config is rebuilt, ``checkpoint.pkl`` is
loaded, the metrics logged after the checkpoint are dropped (those steps are
re-done), and the run goes on appending to ``metrics.json`` and ``cout.txt``.
``run.json`` turns RUNNING again, then COMPLETED, FAILED or INTERRUPTED as any
run, and gains a ``resumed`` list: when, from which step, the status and
heartbeat it had, which process continued it.

Which runs can be resumed: INTERRUPTED (Ctrl-C), FAILED, and RUNNING when
its head is gone (killed, crashed machine). A live run holds an ``flock`` on
``RUN_DIR/.run.lock`` that the kernel releases when the process dies, so a
RUNNING run whose lock is free is known to be dead; a run still holding it is
refused. A run recorded RUNNING by another host with a heartbeat younger than
two minutes is refused unless ``--force``.

Which checkpoints are read: those signed with this user's checkpoint key
(:mod:`harness.checkpoint`, docs/trust.md); anything else (damaged, planted,
another user's) is refused before it is decoded. Unsigned checkpoints of
earlier versions need ``--trust-legacy-checkpoint`` once.

Which settings are acted on: only signed ones, or those typed here. ``config.json`` is a
record anyone who can write the runs directory can edit, so the settings that may change
between a run and its resume (the budget, ``workers``, ``ray_address``) are taken from it
only when it is byte for byte the config this user's harness signed (``config.sig``);
otherwise a value that differs from the signed checkpoint's is refused in one line, and
the flag that chooses it is named. A worker count typed here has the limits of ``harness
run --workers`` (``--oversubscribe``). A run directory holding a symbolic link (a
``cout.txt`` or ``.run.lock`` pointing elsewhere) or another special file is refused
before anything is written, and no write of the run follows a link.

Which modules are imported: a run made with ``--import MODULE`` records it, and the
record alone is not enough (:mod:`harness.user_modules`). Its modules are imported when
its checkpoint is signed with this user's key and records them (the run is the user's
own), or when ``--import MODULE`` names them here; otherwise the run is refused, in one
line, before anything is imported. The current directory is not searched: set
``PYTHONPATH`` for modules there.

Budget flags set the budget in force from here on (totals, as for ``harness
run``; the others are dropped), so they also extend a COMPLETED run. When a
run ended with an evaluation made only because its budget ran out, that
evaluation is undone, so a run extended from 50,000 to 100,000 timesteps
logs exactly what a 100,000-timestep run logs (ES family).

``--workers W`` continues with W workers from here on (no result depends on
the count): a long run moves to a machine with more cores, and back. config.json
then holds the count in force and the ``resumed`` entry the one before. Refused
for a run whose population is ``population_per_worker`` x workers.

A run killed before its first checkpoint (SIGKILL in its first seconds, while it
started its workers) is RUNNING or INTERRUPTED with nothing to continue from: it is
restarted from scratch in the same record, with its stored config, and says so in one
line, when that config is signed with this user's key (every run of this version signs
its ``config.json`` before writing it); a config that is not (edited, planted, of an
earlier version) is refused: start such a run again with ``harness run``. Its metrics,
if any, are dropped; its ``resumed`` entry has ``from_scratch``.

What is reproduced: for the ES family (optimes, cma, nevergrad-es, ng:NAME),
every metric except timings is identical to an uninterrupted run, whatever the step
of the interrupt and the worker count. The byte counts (``bytes_to_workers``,
``bytes_from_workers``) are identical too when the run resumes with the same worker
count and backend; they measure the messages, so other worker counts send other
chunks, and in replicated mode (``sync=seeds``) the first generation after a resume
also carries the full optimizer state to the fresh workers. For PPO/A2C the
checkpoint holds stable-baselines3's ``model.save`` (weights, optimizer state,
counters) and the RNG states, but not the training episodes in flight (the
envs restart from seeds derived from the run seed and the timestep count) nor
SB3's episode statistics: a resumed PPO/A2C run is a valid continuation whose
numbers differ from an uninterrupted run's after the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from harness import rundir, schema
from harness.budget import LIMITS, Budget
from harness.checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    config_signed_by_user,
    ensure_checkpoint_key,
    key_path,
    load_checkpoint,
)
from harness.commands import (
    OVERSUBSCRIBE_FACTOR,
    UsageError,
    add_import_flag,
    check_ray_address,
    check_run_resources,
    print_outcome,
    terminal_text,
)
from harness.config import BUDGET_KEYS, ConfigError, build_run_config
from harness.signals import latch_stop_signals
from harness.user_modules import UntrustedImportError, load_run_modules

#: A RUNNING record from another host with a heartbeat younger than this is taken as alive.
STALE_HEARTBEAT_S = 120.0
#: Statuses of a run without a checkpoint that resume restarts from scratch (a run killed,
#: or stopped by a signal the latch could not act on, before its step-0 checkpoint).
FROM_SCRATCH = ("RUNNING", "INTERRUPTED")
#: Keys that may differ between the checkpoint's config and the one in force: typed here,
#: or recorded in a config.json signed with this user's key (a resume killed before its
#: next checkpoint), never from an unsigned one.
MUTABLE_KEYS = (*BUDGET_KEYS, "ray_address")
#: May differ too, unless the population is ``population_per_worker`` x workers.
WORKERS = "workers"
RAY_ADDRESS = "ray_address"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n\n", 1)[1] if __doc__ else None
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, RUNS_DIR/<id>")
    schema.add_flags(
        parser,
        LIMITS,
        helps={
            "timesteps": "training env steps in all",
            "generations": "generations in all",
            "time_limit": "training seconds in all",
            "cpu_limit": "training CPU-seconds in all",
        },
        titles={
            "budget": "budget from here on (totals, as for `harness run`; given: replaces "
            "the stored one)"
        },
        show_defaults=False,
    )
    schema.add_flags(
        parser,
        (WORKERS, RAY_ADDRESS),
        helps={
            WORKERS: "workers from here on (default: the signed count); results do not "
            "depend on it, so a long run can move to a machine with more cores",
            RAY_ADDRESS: "Ray cluster to connect to from here on, for a run with --backend "
            "ray (default: the signed address)",
        },
        titles={"identity": "execution"},
        show_defaults=False,
    )
    parser.add_argument(
        "--oversubscribe",
        action="store_true",
        help="allow --workers above this machine's CPUs times "
        f"{OVERSUBSCRIBE_FACTOR}, as for `harness run`",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_import_flag(
        parser,
        "needed for a run whose recorded imports its checkpoint does not vouch for "
        "(docs/extending.md)",
    )
    parser.add_argument(
        "--trust-legacy-checkpoint",
        action="store_true",
        help="read an unsigned checkpoint of an earlier harness version (a pickle: reading "
        "it runs whatever it holds, so only for runs you wrote; see docs/trust.md)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="resume a RUNNING record of another host with a recent heartbeat, or a run "
        "whose metrics.json stops before its checkpoint",
    )


def _read_json(path: Path) -> Any:
    """A JSON file of the run, read within the size limit of every run file
    (:func:`harness.rundir.read_json_bytes`); a one-line :class:`UsageError` otherwise."""
    try:
        data = rundir.read_json_bytes(path)
    except rundir.MissingRunFile:
        raise UsageError(f"{path.parent} is not a run directory: no {path.name}") from None
    except rundir.UnreadableRun as error:
        raise UsageError(f"run {path.parent}: {error}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path} is damaged: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{path} is damaged: byte {error.object[error.start]:#04x} at offset "
            f"{error.start} is not UTF-8"
        ) from None
    except RecursionError:
        raise UsageError(f"{path} is damaged: nested too deeply") from None


def _resumed_config(stored: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The stored config rebuilt as ``harness run`` builds one, with the new budget and
    workers if given."""
    config = dict(stored)
    given = schema.given_by_flags(args, LIMITS)
    sources = dict.fromkeys(config, rundir.CONFIG)
    if any(value is not None for value in given.values()):
        config.update(given)  # the whole budget: limits not given are dropped
        sources.update({key: "command line" for key, value in given.items() if value is not None})
    workers = schema.given_by_flags(args, (WORKERS,))[WORKERS]
    if workers is not None:
        if config.get("population_per_worker") is not None:
            raise UsageError(
                f"--workers {workers}: this run's population is population_per_worker "
                f"({config['population_per_worker']}) x workers, so it keeps its "
                f"{config.get(WORKERS)} workers"
            )
        config[WORKERS] = workers
        sources[WORKERS] = "command line"
    address = schema.given_by_flags(args, (RAY_ADDRESS,))[RAY_ADDRESS]
    if address is not None:
        config[RAY_ADDRESS] = address
        sources[RAY_ADDRESS] = "command line"
    try:
        return build_run_config(config, source=sources, refuse="never").config
    except ConfigError as error:
        raise UsageError(f"stored config of {config.get('algo')}: {error}") from None


def _with_current_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's config with knobs added since it was written at their defaults.

    config.json goes through the same filling, so a run recorded before a knob existed
    resumes (a new knob's default keeps the old behaviour) while an edited value is caught.
    """
    try:
        return build_run_config(
            dict(saved), source=dict.fromkeys(saved, rundir.CONFIG), refuse="never"
        ).config
    except ConfigError:
        return saved


def _typed(args: argparse.Namespace) -> set[str]:
    """The mutable keys the user typed here (a budget flag replaces the whole budget)."""
    given = schema.given_by_flags(args, (WORKERS, RAY_ADDRESS))
    typed = {key for key, value in given.items() if value is not None}
    if any(value is not None for value in schema.given_by_flags(args, LIMITS).values()):
        typed.update(BUDGET_KEYS)
    return typed


def _flag(key: str) -> str:
    return schema.BY_NAME[key].flags[0] if key in schema.BY_NAME else f"--{key}"


def _check_matches_checkpoint(
    config: dict[str, Any], saved: dict[str, Any], path: Path, chosen: set[str] | None = None
) -> None:
    """Refuse a config in force that differs from the checkpoint's (signed) config.

    Keys of :data:`MUTABLE_KEYS` (and workers) may differ when ``chosen``: typed here, or
    every key when config.json is signed with this user's key (None)."""
    saved = _with_current_defaults(saved)
    mutable = set(MUTABLE_KEYS)
    if config.get("population_per_worker") is None:
        mutable.add(WORKERS)
    for key in sorted(set(config) | set(saved)):
        if config.get(key) == saved.get(key):
            continue
        if key in mutable and (chosen is None or key in chosen):
            continue
        if key in mutable:
            flags = (
                "--timesteps, --generations, --time-limit or --cpu-limit"
                if key in BUDGET_KEYS
                else _flag(key)
            )
            raise UsageError(
                f"config.json differs from {path} at {key!r} "
                f"({config.get(key)!r} vs {saved.get(key)!r}) and is not signed with this "
                f"user's key: resume takes {key} from the signed checkpoint or the command "
                f"line; pass {flags} to choose"
            )
        raise UsageError(
            f"config.json differs from {path} at {key!r} "
            f"({config.get(key)!r} vs {saved.get(key)!r}); was the record edited?"
        )


def _refuse_links(run_dir: Path) -> None:
    """Refuse a run directory holding a symbolic link or a special file, before anything
    is written: a ``cout.txt`` or ``.run.lock`` planted as a link would make the resume
    append to, or truncate, the file it names."""
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError as error:
        raise UsageError(f"cannot list run directory {run_dir}: {error.strerror}") from None
    for entry in entries:
        if entry.is_symlink():
            what = "a symbolic link"
        elif entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False):
            continue
        else:
            what = "not a regular file"  # a FIFO, a socket, a device
        raise UsageError(
            f"run {run_dir.name}: {entry.name!r} is {what}; resume writes only regular files "
            "of the run directory, so it refuses this one (nothing was written)"
        )


def _check_resources(config: dict[str, Any], args: argparse.Namespace) -> None:
    """The checks ``harness run`` makes of its workers, for a count typed here; a signed
    count was the user's own choice when the run started."""
    typed = schema.given_by_flags(args, (WORKERS,))[WORKERS] is not None
    check_run_resources(
        config, allow_oversubscribe=bool(getattr(args, "oversubscribe", False)) or not typed
    )
    from harness.pairing import is_follower, pair_file

    if is_follower(config) and pair_file() is None:
        raise UsageError(
            f"this run is one of an equal-compute pair (paired_with={config['paired_with']}): "
            "it resumes with its partner, through the sweep or `harness benchmark run` that "
            "ran them, or alone with a budget of its own (say --cpu-limit SEC)"
        )


def plan_resume(run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Check everything before anything is written; return what to run."""
    if not run_dir.is_dir():
        raise UsageError(f"run directory {str(run_dir)!r} does not exist")
    _refuse_links(run_dir)
    entry = _read_json(run_dir / rundir.RUN)
    missing_config = not (run_dir / rundir.CONFIG).exists()
    if missing_config and isinstance(entry, dict) and entry.get("status") in FROM_SCRATCH:
        raise UsageError(
            f"run {run_dir.name} ({entry.get('status')}) stopped before it recorded its "
            f"config (no {rundir.CONFIG}): nothing to resume; start it again with `harness run`"
        )
    stored = _read_json(run_dir / rundir.CONFIG)
    metrics_path = run_dir / rundir.METRICS
    metrics = _read_json(metrics_path) if metrics_path.exists() else {}
    if not isinstance(entry, dict) or not isinstance(stored, dict):
        raise UsageError(f"{run_dir} is not a run directory of this harness")
    name = run_dir.name
    from_scratch = not (run_dir / CHECKPOINT_NAME).exists() and entry.get("status") in FROM_SCRATCH
    signed_config = config_signed_by_user(run_dir)
    if from_scratch and not signed_config:
        raise UsageError(
            f"run {name} ({entry.get('status')}) stopped before its first checkpoint and its "
            f"{rundir.CONFIG} is not signed with this user's checkpoint key ({key_path()}): "
            "resume acts only on signed state, so nothing was run; start it again with "
            "`harness run` and the settings you want"
        )
    try:
        # before the checkpoint is decoded or the config rebuilt: nothing is imported unless
        # the user named it or the run is the user's own (harness.user_modules)
        load_run_modules(run_dir, stored, getattr(args, "imports", None) or [])
    except (UntrustedImportError, ConfigError) as error:
        raise UsageError(str(error)) from None
    if from_scratch:
        return _plan_from_scratch(run_dir, entry, stored, args)
    try:
        state = load_checkpoint(
            run_dir / CHECKPOINT_NAME, trust_legacy=bool(args.trust_legacy_checkpoint)
        )
    except CheckpointError as error:
        raise UsageError(str(error)) from None

    from harness.runner import Progress

    try:
        progress = Progress.from_state(state["progress"])
        saved_config = dict(state["config"])
        if "algorithm" not in state:
            raise KeyError("algorithm")
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"checkpoint {run_dir / CHECKPOINT_NAME} is damaged: {error}") from None

    config = _resumed_config(stored, args)
    _check_matches_checkpoint(
        config, saved_config, run_dir / CHECKPOINT_NAME, None if signed_config else _typed(args)
    )
    _check_resources(config, args)
    status = entry.get("status")
    extended = any(getattr(args, key) is not None for key in LIMITS)
    finished = progress.stop_reason is not None
    if finished and not extended and status == "COMPLETED":
        raise UsageError(
            f"run {name} is already COMPLETED ({progress.stop_reason}); pass --timesteps, "
            "--generations, --time-limit or --cpu-limit to extend it"
        )
    if extended:
        budget = Budget(**{key: config[key] for key in BUDGET_KEYS})
        used = budget.exhausted(
            progress.timesteps, progress.step, progress.wall_time_s, None, progress.cpu_seconds
        )
        if used is not None:
            raise UsageError(
                f"the new budget is already used at the checkpoint ({used}: step "
                f"{progress.step}, {progress.timesteps} timesteps, "
                f"{progress.wall_time_s:.1f}s, {progress.cpu_seconds:.1f} CPU-s); give a "
                "larger one"
            )
    reopened = finished and extended
    drop_eval_step = progress.step if reopened and progress.final_eval is not None else None

    steps_on_disk = set(metrics.get("timesteps", {}).get("steps", []))
    missing = [s for s in range(1, progress.step + 1) if s not in steps_on_disk]
    if missing and not args.force:
        raise UsageError(
            f"metrics.json of run {name} lacks steps {missing[0]}..{missing[-1]} before its "
            f"checkpoint (step {progress.step}); --force continues with the gap"
        )
    _refuse_live_elsewhere(entry, name, args)
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))
    return {
        "config": config,
        "state": state,
        "progress": progress,
        "status": status,
        "keep_through_step": progress.step,
        "drop_eval_step": drop_eval_step,
        "note": _resume_note(config, stored, reopened=reopened),
    }


def _resume_note(config: dict[str, Any], stored: dict[str, Any], **flags: bool) -> dict[str, Any]:
    """The resumed entry's record: ``flags``, the budget before and now, and the worker
    count where the resume changed it."""
    workers_changed = config.get(WORKERS) != stored.get(WORKERS)
    return {
        **flags,
        "budget": {key: config[key] for key in BUDGET_KEYS},
        "previous_budget": {key: stored.get(key) for key in BUDGET_KEYS},
        **(
            {WORKERS: config[WORKERS], "previous_workers": stored.get(WORKERS)}
            if workers_changed
            else {}
        ),
    }


def _refuse_live_elsewhere(entry: dict[str, Any], name: str, args: argparse.Namespace) -> None:
    """Refuse a RUNNING record of another host with a recent heartbeat (unless --force)."""
    if entry.get("status") != "RUNNING" or args.force:
        return
    head = entry.get("head") or {}
    age = rundir.heartbeat_age_s(entry)
    other_host = head.get("hostname", (entry.get("host") or {}).get("hostname"))
    alive = age is not None and age < STALE_HEARTBEAT_S
    if other_host not in (None, socket.gethostname()) and alive:
        raise UsageError(
            f"run {name} is RUNNING on {other_host} (heartbeat {age:.0f}s ago); "
            "--force resumes it anyway"
        )


def _plan_from_scratch(
    run_dir: Path, entry: dict[str, Any], stored: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """The plan for a run stopped before its first checkpoint: run it again from step 0.

    A SIGKILL in a run's first seconds (imports, workers starting) leaves its record
    RUNNING with a config but no checkpoint; refusing it would leave the user a dead
    record and a command that cannot finish it. Nothing was trained yet, so running
    the stored config from scratch in the same record loses nothing.
    """
    config = _resumed_config(stored, args)  # stored: signed with this user's key
    _check_resources(config, args)
    _refuse_live_elsewhere(entry, run_dir.name, args)
    if config["backend"] == "ray":
        check_ray_address(config.get("ray_address"))
    return {
        "config": config,
        "state": None,
        "progress": None,
        "status": entry.get("status"),
        "keep_through_step": 0,
        "drop_eval_step": None,
        "from_scratch": True,
        "note": _resume_note(config, stored, from_scratch=True, reopened=False),
    }


def run(args: argparse.Namespace) -> int:
    latch_stop_signals()  # a stop signal from here on interrupts the run once it can resume
    run_dir = Path(args.run_dir)
    plan = plan_resume(run_dir, args)
    ensure_checkpoint_key()

    from harness.experiment import ResumeObserver, run_failure_message, start_run

    try:
        lock = rundir.lock_run_dir(run_dir)
    except OSError as error:  # a link planted since plan_resume looked (O_NOFOLLOW: ELOOP)
        raise UsageError(
            f"cannot take the lock of run {run_dir.name}: {rundir.LOCK}: {error.strerror}"
        ) from None
    if lock is None:
        raise UsageError(f"run {run_dir.name} is still running ({rundir.lock_holder(run_dir)})")
    if args.no_progress:
        os.environ["HARNESS_PROGRESS"] = "0"
    observer = ResumeObserver(
        run_dir,
        plan["state"],
        plan["keep_through_step"],
        plan["drop_eval_step"],
        lock,
        plan["note"],
    )
    if plan.get("from_scratch"):
        print(
            f"run {run_dir.name} ({plan['status']}) stopped before its first checkpoint: "
            f"restarting it from scratch with its stored config: {run_dir}"
        )
    else:
        print(
            f"resuming run {run_dir.name} ({plan['status']}) from step "
            f"{plan['keep_through_step']}: {run_dir}"
        )
    try:
        sacred_run = start_run(plan["config"], [observer], command="resume_run")
    except Exception as error:
        message = run_failure_message(error)
        if message is None:
            raise
        print(f"harness: {terminal_text(message)}", file=sys.stderr)
        return 1
    finally:
        observer._release()
    print_outcome(sacred_run, run_dir)
    if observer.final_write_failure is not None:
        print(
            f"harness: run {run_dir.name}: {terminal_text(observer.final_write_failure)}",
            file=sys.stderr,
        )
        return 1
    return 0
