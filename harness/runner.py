"""The training loop shared by every algorithm: step, log, evaluate, checkpoint, stop.

Checkpoints and interrupts. After every step the loop *commits*: it freezes
the whole state (progress counters, the algorithm's ``state_dict``: parameters,
optimizer moments, obs-normalisation statistics, episode cap, schedules) into
bytes. Every ``checkpoint_every`` steps, after any step that ends
``checkpoint_every_seconds`` after the last write (long generations, such as
k = 5 on Ant, would otherwise go a whole run between checkpoints), and at the
end, that snapshot is written atomically to ``checkpoint.pkl`` after the
metrics logged so far are flushed to ``metrics.json``, so the metrics on disk
always reach at least the checkpoint's step. A write of the record that fails
(a full disk: :class:`harness.rundir.RecordWriteError`) fails the run at once,
before any later checkpoint, so a resume once space is free leaves no gap.
Ctrl-C (SIGINT) and ``kill`` (SIGTERM, :mod:`harness.signals`) interrupt at
once; the last commit is written (the partial step is dropped) and Sacred
records INTERRUPTED. One that arrives during start-up is latched by the
command and acted on right after the step-0 checkpoint. A
killed head (SIGKILL) leaves the last periodic checkpoint. ``harness resume``
loads either, drops the metrics logged after it and re-does those steps, which
for the ES family gives the same numbers as an uninterrupted run.

Target return. With ``target_return`` R, a regular evaluation whose mean is at
least R is a *crossing*; the policy is then evaluated again on
``confirm_episodes`` fresh episodes (seeds from their own stream,
:func:`algorithms.es_common.confirm_seeds`, so the regular evaluations keep their
seeds), and the target is *reached* only if that mean also clears R. A failed
confirmation lets training go on; the next crossing is confirmed again on new
episodes. ``confirm_episodes: 0`` stops at the first crossing. The confirmation's
time counts in ``wall_time_s``. ``summary.json`` records both times under ``target``.

Where the time goes. The wall-clock is booked into parts (:data:`TIME_PARTS`):
``setup`` (building the algorithm: the head's env and policy, starting workers)
precedes training, and ``process_start`` (process creation to setup) precedes it
when the caller passes the process's start; the other parts sum to
``wall_time_s``. An algorithm's own ``time_counters`` (ES: worker start-up,
stragglers at the generation barrier, head update, observation-statistics sync)
are carved out of the step; the rest of a step is ``rollouts`` (the SB3 baselines
book their gradient updates as ``head_update``; runs recorded before they did have
the whole step under ``rollouts``). ``summary.json``
holds the totals as ``time_breakdown``; each evaluation step logs the running
totals as ``time_<part>_s`` metrics.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from algorithms.base import Algorithm, AlgorithmType, RunContext, StepRecord
from algorithms.es_common import ENDPOINT_METRICS, confirm_seeds, endpoint_seeds, eval_seeds
from algorithms.registry import get_algorithm
from envs.policies import PolicySpec, policy_spec_for
from envs.registry import make_env, resolve_env_id
from evaluation.backends import Evaluator, EvaluatorSettings, WorkerLostError, sigint_ignored
from evaluation.registry import make_evaluator
from harness import rundir
from harness.budget import Budget
from harness.checkpoint import (
    CHECKPOINT_NAME,
    INTERRUPT_ENV,
    EncodedState,
    encode_state,
    remove_stale_temporaries,
    write_checkpoint_payload,
)
from harness.config import ConfigError, validate_params
from harness.cputime import CPU_SAMPLE_PERIOD_S, CpuMeter, MachineLoad
from harness.pairing import Follower, Lead, LeadStopped, is_follower, pair_file
from harness.progress import ProgressBar, progress_bar
from harness.records import POPULATION_ARTIFACT, PopulationLogWriter
from harness.schema import BUDGET_KEYS
from harness.signals import interrupt_on_stop_signals, take_latched
from harness.speed import SpeedProbe

#: Packages a remote (Ray cluster) worker needs besides the evaluation layer's own
#: (``evaluation``, ``envs``): the algorithms, whose replicas travel pickled (sync=seeds).
WORKER_PY_MODULES = ("algorithms",)

#: Metric names every algorithm logs (DESIGN.md); reports and checks rely on them.
COMMON_METRICS = (
    "timesteps",
    "episodes",
    "wall_time_s",
    "fitness_mean",
    "fitness_max",
    "fitness_min",
    "eval_return_mean",
    "eval_return_std",
    "bytes_to_workers",
    "bytes_from_workers",
)
CHECKPOINT_FORMAT = 1
#: Parts of a run's wall-clock, in the order tables list them (see the module docstring).
TIME_PARTS = (
    "process_start",
    "setup",
    "worker_start",
    "rollouts",
    "stragglers",
    "head_update",
    "obs_sync",
    "evaluation",
    "confirmation",
    "pair_wait",
    "checkpoint",
    "logging",
    "other",
)
#: Parts that precede training: not inside ``wall_time_s``.
STARTUP_PARTS = ("process_start", "setup")
#: Metrics logged by each confirmation of a target return.
CONFIRM_METRICS = (
    "confirm_return_mean",
    "confirm_return_std",
    "confirm_timesteps",
    "confirm_passed",
    "confirm_failed_episodes",
)


@dataclass
class Progress:
    """Counters of a run; part of every checkpoint."""

    step: int = 0
    timesteps: int = 0
    episodes: int = 0
    wall_time_s: float = 0.0
    eval_index: int = 0
    next_eval_at: int = 0
    #: the CPU-seconds of the next evaluation, when eval_every_cpu_seconds schedules them
    next_eval_cpu_at: float = 0.0
    last_eval: float | None = None
    last_eval_step: int = -1
    stop_reason: str | None = None
    #: CPU-seconds of the head and all its worker processes (see harness.cputime)
    cpu_seconds: float = 0.0
    #: seconds per part of the wall-clock so far (TIME_PARTS, "other" left out)
    time_breakdown: dict[str, float] = field(default_factory=dict)
    #: confirmations run so far (the index of the next one's seed stream)
    confirm_index: int = 0
    #: {"timesteps", "wall_time_s"} of the first evaluation at or above the target
    first_crossing: dict[str, Any] | None = None
    #: {"timesteps", "wall_time_s", "return_mean", "episodes"} of the passed confirmation
    confirmed: dict[str, Any] | None = None
    #: the return by which the target counts as reached; None while it is not
    reached: float | None = None
    #: the target fields above before the final evaluation (undone with it on reopen)
    final_target: dict[str, Any] | None = None
    #: (eval_index, last_eval, last_eval_step) before the evaluation done only because the
    #: budget ran out; a resume with a larger budget undoes it, as if the run had gone on.
    final_eval: tuple[int, float | None, int] | None = None

    @classmethod
    def from_state(cls, state: Any) -> Progress:
        """From a checkpoint's ``progress`` (a dict; unknown keys are an error)."""
        if isinstance(state, Progress):
            return state
        known = {f.name for f in fields(cls)}
        unknown = set(state) - known
        if unknown:
            raise ValueError(f"checkpoint progress has unknown fields {sorted(unknown)}")
        progress = cls(**state)
        if progress.final_eval is not None:
            progress.final_eval = tuple(progress.final_eval)  # type: ignore[assignment]
        return progress

    def reopen(self) -> bool:
        """Undo the end of a finished run so that a larger budget continues it exactly.

        Returns whether the final off-schedule evaluation was undone (its metrics must go).
        """
        undone = self.final_eval is not None
        if self.final_eval is not None:
            self.eval_index, self.last_eval, self.last_eval_step = self.final_eval
            self.final_eval = None
        if self.final_target is not None:
            for name, value in self.final_target.items():
                setattr(self, name, value)
            self.final_target = None
        self.stop_reason = None
        return undone

    def target_state(self) -> dict[str, Any]:
        """The target fields, as :attr:`final_target` keeps them."""
        return {
            "confirm_index": self.confirm_index,
            "first_crossing": self.first_crossing,
            "confirmed": self.confirmed,
            "reached": self.reached,
        }


def build_policy_spec(config: dict[str, Any]) -> PolicySpec:
    """The policy the config describes, sized for its env's spaces."""
    env = make_env(config["env"])
    try:
        policy = config["policy"]
        return policy_spec_for(
            env,
            kind=policy["kind"],
            hidden_sizes=tuple(policy["hidden_sizes"]),
            activation=policy["activation"],
            discretize=policy.get("discretize", 0),
            init=policy.get("init", "normc"),
        )
    except ValueError as error:
        # a policy the env's spaces rule out (discretize on a Discrete action space)
        raise ConfigError(f"policy for {config['env']}: {error}") from None
    finally:
        env.close()


def build_evaluator(algo_cls: AlgorithmType, context: RunContext, config: Any) -> Evaluator | None:
    """The evaluator of an ES run (None for RL): the context's backend and workers, the
    noise table the algorithm asks for, the run's reward transform."""
    if algo_cls.family != "es":
        return None
    settings = EvaluatorSettings(
        env_name=context.env_name,
        policy_spec=context.policy_spec,
        noise_spec=algo_cls.noise_spec_for(context, config),
        workers=context.workers,
        ray_address=context.ray_address,
        reward_transform=context.reward_transform,
        py_modules=WORKER_PY_MODULES,
    )
    return make_evaluator(context.backend, settings)


def create_algorithm(algo_cls: AlgorithmType, context: RunContext, config: Any) -> Algorithm:
    """Build the evaluator, then the algorithm around it (``config``: its Config instance).

    The evaluator comes first so its workers start (imports, envs) while the head builds
    the rest. If the algorithm's constructor raises, the evaluator is closed: a failing
    setup leaves no worker processes behind.
    """
    evaluator = build_evaluator(algo_cls, context, config)
    if evaluator is None:
        return algo_cls(context, config)
    try:
        return algo_cls(context, config, evaluator)
    except BaseException:
        evaluator.close()
        raise


def build_context(config: dict[str, Any]) -> RunContext:
    """The run context a config describes (its policy sized for the env: one env is made)."""
    return RunContext(
        env_name=config["env"],
        policy_spec=build_policy_spec(config),
        seed=int(config["seed"]),
        episodes_per_fitness=int(config["episodes"]),
        workers=int(config["workers"]),
        backend=config["backend"],
        ray_address=config.get("ray_address"),
        sync=config.get("sync", "broadcast"),
        max_episode_steps=config.get("max_episode_steps"),
        fail_on_env_error=bool(config.get("fail_on_env_error", True)),
        reward_transform=str(config.get("reward_transform") or "none"),
    )


def build_algorithm(config: dict[str, Any]) -> Algorithm:
    """Instantiate the configured algorithm with its workers."""
    algo_cls = get_algorithm(config["algo"])
    context = build_context(config)
    params = validate_params(config["params"], algo_cls.Config, f"params of {config['algo']}")
    return create_algorithm(algo_cls, context, params)


def check_noise_table_fits(config: dict[str, Any]) -> None:
    """Refuse (:class:`ConfigError`) a noise table too small for one perturbation of the policy.

    Checked before a run starts, so the value is named and nothing is written; the
    algorithm would otherwise fail at its first generation.
    """
    algo_cls = get_algorithm(config["algo"])
    if algo_cls.family != "es":
        return
    context = build_context(config)
    params = validate_params(config["params"], algo_cls.Config, f"params of {config['algo']}")
    spec = algo_cls.noise_spec_for(context, params)
    dim = context.policy_spec.num_params
    if spec is not None and spec.size < dim:
        raise ConfigError(
            f"noise_size {spec.size} is smaller than the policy's {dim} parameters "
            "(one perturbation is a slice of that many floats)"
        )


def process_started_at() -> float:
    """When this process was created (Unix time): ``process_start`` is measured from it."""
    return float(psutil.Process().create_time())


class Trainer:
    """Drives one algorithm to its budget and reports through a Sacred run (or not).

    ``process_started_at`` (Unix time, :func:`process_started_at`): pass it where the
    process was started for this run (the CLI) to book ``process_start``.
    """

    def __init__(
        self,
        config: dict[str, Any],
        run: Any = None,
        run_dir: Path | None = None,
        show_progress: bool = True,
        process_started_at: float | None = None,
    ) -> None:
        #: parts of the wall-clock before training (added to the progress when it starts)
        self._startup: dict[str, float] = {}
        if process_started_at is not None:
            self._startup["process_start"] = max(0.0, time.time() - process_started_at)
        self.config = config
        self.run = run
        self.run_dir = run_dir
        self.show_progress = show_progress
        self.budget = Budget(**{k: config.get(k) for k in BUDGET_KEYS})
        self.progress = Progress(next_eval_at=0)
        self._cpu_meter = CpuMeter()
        self._cpu_offset_s = 0.0  # a resumed run's CPU-seconds before this process
        self._cpu_sampled_at = 0.0
        self._machine_load = MachineLoad()
        self._speed_probe: SpeedProbe | None = None  # built at the first evaluation
        # an equal-compute pair (harness.pairing): the lead publishes its CPU-seconds, the
        # follower paces itself by them
        self._pair_lead: Lead | None = None
        self._pair_follower: Follower | None = None
        pair_path = pair_file() if config.get("paired_with") else None
        if pair_path is not None and is_follower(config):
            self._pair_follower = Follower(pair_path)
        elif pair_path is not None:
            self._pair_lead = Lead(pair_path, run_dir.name if run_dir is not None else None)
        setup_started = time.perf_counter()
        # A stop signal now is latched by the command (harness.signals) and acted on once
        # the step-0 checkpoint exists; the evaluator keeps Ctrl-C from its workers itself.
        self.algorithm = build_algorithm(config)
        self._startup["setup"] = time.perf_counter() - setup_started
        self._train_started = time.perf_counter()
        self._training_started_at: float | None = None  # Unix time, for `harness bench solve`
        self._snapshot: tuple[int, EncodedState] | None = None
        self._saved_step = -1
        self._saved_at = time.perf_counter()
        self._checkpointable = True
        self._snapshot_s = 0.0  # seconds the last state freeze took
        self._step_s = 0.0  # seconds the last algorithm step took
        log_every = int(config.get("population_log_every") or 0)
        noise_spec = self.algorithm.noise_spec
        self.population_log = (
            PopulationLogWriter(
                log_every,
                noise_spec.size if noise_spec is not None else 0,
                noise_spec.seed if noise_spec is not None else 0,
            )
            if log_every
            else None
        )
        interrupt_at = os.environ.get(INTERRUPT_ENV)
        self._interrupt_at = int(interrupt_at) if interrupt_at else None

    # -- logging ------------------------------------------------------------
    def _log(self, name: str, value: float) -> None:
        if self.run is not None:
            self.run.log_scalar(name, value, self.progress.step)

    def _record(self, record: StepRecord) -> dict[str, float]:
        p = self.progress
        row = {
            "timesteps": float(p.timesteps),
            "episodes": float(p.episodes),
            "wall_time_s": p.wall_time_s,
            "fitness_mean": record.fitness_mean,
            "fitness_max": record.fitness_max,
            "fitness_min": record.fitness_min,
            "bytes_to_workers": float(record.bytes_to_workers),
            "bytes_from_workers": float(record.bytes_from_workers),
            "worker_seconds": record.worker_seconds,
            "cpu_seconds": p.cpu_seconds,
            **record.extras,
        }
        for name, value in row.items():
            self._log(name, value)
        return row

    def evaluate(self) -> tuple[float, float]:
        """Evaluate the current policy on the next fresh seeded episodes; log the result."""
        p = self.progress
        episodes = int(self.config["eval_episodes"])
        seeds = eval_seeds(int(self.config["seed"]), p.eval_index, episodes)
        speed = self._measure_speed()  # first: the evaluation's episodes stay the last stepped
        mean, std, failed = self._returns(seeds)
        p.eval_index += 1
        p.last_eval = mean
        p.last_eval_step = p.step
        self._log("eval_return_mean", mean)
        self._log("eval_return_std", std)
        self._log("eval_timesteps", float(p.timesteps))
        if failed:
            self._log("eval_failed_episodes", float(failed))
        for name, value in speed.items():
            self._log(name, value)
        return mean, std

    def _measure_speed(self) -> dict[str, float]:
        """Time the reference workload (harness.speed: ~15-30 ms of CPU): its rates."""
        if self._speed_probe is None:
            self._speed_probe = SpeedProbe(make_env(self.config["env"]))
        return self._speed_probe.measure()

    def _returns(self, seeds: list[int]) -> tuple[float, float, int]:
        """Mean and std of the current policy's returns on ``seeds``, and the failed count."""
        returns = np.asarray(self.algorithm.evaluate_policy(seeds), dtype=np.float64)
        # An episode an algorithm scored worst (fail_on_env_error=false) is counted, not averaged.
        finite = returns[np.isfinite(returns)]
        mean = float(finite.mean()) if finite.size else float("nan")
        std = float(finite.std()) if finite.size else float("nan")
        return mean, std, int(returns.size - finite.size)

    def confirm(self, episodes: int) -> bool:
        """Evaluate again on ``episodes`` fresh episodes; True if their mean clears the target.

        Every episode must finish: one that failed fails the confirmation.
        """
        p = self.progress
        seeds = confirm_seeds(int(self.config["seed"]), p.confirm_index, episodes)
        mean, std, failed = self._returns(seeds)
        p.confirm_index += 1
        passed = not failed and self.budget.crosses(mean)
        self._log("confirm_return_mean", mean)
        self._log("confirm_return_std", std)
        self._log("confirm_timesteps", float(p.timesteps))
        self._log("confirm_passed", float(passed))
        if failed:
            self._log("confirm_failed_episodes", float(failed))
        if passed:
            p.confirmed = {
                "timesteps": p.timesteps,
                "wall_time_s": self._elapsed(),
                "return_mean": mean,
                "episodes": episodes,
            }
            p.reached = mean
        return passed

    def _evaluate_and_confirm(self) -> None:
        """A regular evaluation; at a crossing of the target, its confirmation."""
        p = self.progress
        with self._timed("evaluation"):
            mean, _ = self.evaluate()
        if p.reached is not None or not self.budget.crosses(mean):
            return
        if p.first_crossing is None:
            p.first_crossing = {"timesteps": p.timesteps, "wall_time_s": self._elapsed()}
        episodes = int(self.config.get("confirm_episodes") or 0)
        if episodes == 0:
            p.reached = mean  # confirmation switched off: the crossing is the target
            return
        with self._timed("confirmation"):
            self.confirm(episodes)

    # -- where the time goes ------------------------------------------------------
    def _elapsed(self) -> float:
        """Training seconds so far (what ``wall_time_s`` will say)."""
        return time.perf_counter() - self._train_started

    def _book(self, part: str, seconds: float) -> None:
        breakdown = self.progress.time_breakdown
        breakdown[part] = breakdown.get(part, 0.0) + seconds

    @contextlib.contextmanager
    def _timed(self, part: str) -> Iterator[None]:
        """Book the block's wall-clock to ``part``, less what the algorithm booked itself.

        The algorithm's ``time_counters`` (cumulative seconds per part) grow inside the
        block; their growth goes to their own parts, the rest to ``part``.
        """
        counters = self.algorithm.time_counters
        before = dict(counters)
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            inner = 0.0
            for name, value in counters.items():
                grown = value - before.get(name, 0.0)
                self._book(name, grown)
                inner += grown
            self._book(part, elapsed - inner)

    def time_breakdown(self, wall_time_s: float | None = None) -> dict[str, float]:
        """Seconds per part (:data:`TIME_PARTS`); the training parts sum to ``wall_time_s``.

        ``other`` is what no part claims (loop bookkeeping); ``wall_time_s`` defaults to
        the progress's.
        """
        wall = self.progress.wall_time_s if wall_time_s is None else wall_time_s
        booked = dict(self.progress.time_breakdown)
        training = sum(v for k, v in booked.items() if k not in STARTUP_PARTS)
        booked["other"] = wall - training
        return {part: booked[part] for part in TIME_PARTS if part in booked}

    # -- checkpointing --------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue this run."""
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config,
            "progress": asdict(self.progress),
            "algorithm": self.algorithm.state_dict(),
            "population_log": (
                None if self.population_log is None else self.population_log.state_dict()
            ),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`checkpoint_state`'s output."""
        self.progress = Progress.from_state(state["progress"])
        self._cpu_offset_s = self.progress.cpu_seconds - self._cpu_meter.seconds()
        self.algorithm.load_state_dict(state["algorithm"])
        if self.population_log is not None and state.get("population_log") is not None:
            self.population_log.load_state_dict(state["population_log"])
        self._saved_step = self.progress.step

    def restore(self, state: dict[str, Any], reopen: bool = False) -> None:
        """Load a checkpoint; ``reopen`` continues a finished run under a larger budget."""
        self.load_state(state)
        if reopen:
            self.progress.reopen()
            self._saved_step = -1  # the reopened state is written at once: it matches the metrics

    def _flush_metrics(self) -> None:
        """Hand the metrics logged so far to the observers now (Sacred does it on heartbeats).

        Called directly rather than through Sacred's ``_safe_call``, which would
        swallow a failed write; then :meth:`_check_records` fails the run on it.
        """
        run = self.run
        pending = getattr(run, "_metrics", None)
        if pending is None:
            return
        from sacred.metrics_logger import linearize_metrics

        by_name = linearize_metrics(pending.get_last_metrics())
        if by_name:
            for observer in run.observers:
                observer.log_metrics(metrics_by_name=by_name, info=run.info)
        self._check_records()

    def _check_records(self) -> None:
        """Fail the run at once when a write of its record failed (a full disk, say).

        The observer keeps the first failed write (``write_failure``, set by the
        heartbeat thread too); training on would lose metrics for good.
        """
        for observer in getattr(self.run, "observers", ()):
            failure = getattr(observer, "write_failure", None)
            if failure is not None:
                raise failure

    def _commit(self, write: bool) -> None:
        """Freeze the state after a complete step; write it when ``write``.

        Freezing costs a pickle of the state. Where that is over a tenth of a step (a
        large optimizer archive), steps between checkpoints are not frozen and Ctrl-C
        keeps the last periodic checkpoint instead.
        """
        if self.run_dir is None or not self._checkpointable:
            return
        if not write and self._snapshot_s > max(0.05, 0.1 * self._step_s):
            self._snapshot = None
            return
        started = time.perf_counter()
        try:
            payload = encode_state(self.checkpoint_state())
        except NotImplementedError:
            self._checkpointable = False
            return
        self._snapshot_s = time.perf_counter() - started
        self._snapshot = (self.progress.step, payload)
        if write:
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        if self.run_dir is None or self._snapshot is None:
            return
        step, payload = self._snapshot
        if step <= self._saved_step:
            return
        self._flush_metrics()  # metrics on disk reach the checkpoint's step before it exists
        path = self.run_dir / CHECKPOINT_NAME
        try:
            write_checkpoint_payload(path, payload)
        except OSError as error:
            raise rundir.RecordWriteError(path, error) from None
        self._saved_step = step
        self._saved_at = time.perf_counter()

    def save_checkpoint(self) -> None:
        """Write the current state as the run's checkpoint."""
        self._commit(write=True)

    # -- the loop -------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Step until the budget is used; return a summary."""
        p = self.progress
        interval = int(self.config["eval_every_timesteps"])
        # evaluations every this many CPU-seconds instead (0: by timesteps)
        cpu_interval = float(self.config.get("eval_every_cpu_seconds") or 0.0)
        checkpoint_every = int(self.config["checkpoint_every"])
        checkpoint_seconds = float(self.config.get("checkpoint_every_seconds") or 0.0)
        bar = self._progress_bar()
        for part, seconds in self._startup.items():
            self._book(part, seconds)
        self._startup = {}
        self._training_started_at = time.time()
        self._train_started = started = time.perf_counter() - p.wall_time_s
        if self.run_dir is not None:
            remove_stale_temporaries(self.run_dir)
        with self._timed("checkpoint"):
            self._commit(write=self._saved_step < 0)  # a fresh run can be resumed from step 0
        interrupt_on_stop_signals()
        try:
            latched = take_latched()
            if latched is not None:  # stopped during start-up: now it can be resumed
                raise KeyboardInterrupt(f"signal {latched} during start-up")
            while p.stop_reason is None:
                step_started = time.perf_counter()
                with self._timed("rollouts"):
                    record = self.algorithm.step()
                self._step_s = time.perf_counter() - step_started
                p.step += 1
                with self._timed("logging"):
                    self._log_population()
                    p.timesteps += record.timesteps
                    p.episodes += record.episodes
                    p.wall_time_s = time.perf_counter() - started
                    # an evaluation follows: its row gets this step's CPU time, not a stale one
                    # so does a CPU limit: it is checked against this step's reading
                    self._sample_cpu(
                        force=p.timesteps >= p.next_eval_at
                        or self.budget.cpu_limit is not None
                        or self._pair_follower is not None
                        or cpu_interval > 0
                    )
                    self._record(record)
                    self._check_records()
                self._pace()
                if cpu_interval > 0 and p.cpu_seconds >= p.next_eval_cpu_at:
                    self._evaluate_and_confirm()
                    p.next_eval_cpu_at = (p.cpu_seconds // cpu_interval + 1) * cpu_interval
                    p.wall_time_s = time.perf_counter() - started
                elif cpu_interval <= 0 and p.timesteps >= p.next_eval_at:
                    self._evaluate_and_confirm()
                    p.next_eval_at = (p.timesteps // interval + 1) * interval
                    p.wall_time_s = time.perf_counter() - started
                p.stop_reason = self.budget.exhausted(
                    p.timesteps, p.step, p.wall_time_s, p.reached, p.cpu_seconds
                )
                if p.stop_reason is not None and p.last_eval_step != p.step:
                    p.final_eval = (p.eval_index, p.last_eval, p.last_eval_step)
                    p.final_target = p.target_state()
                    self._evaluate_and_confirm()
                    p.wall_time_s = time.perf_counter() - started
                    p.stop_reason = (
                        self.budget.exhausted(
                            p.timesteps, p.step, p.wall_time_s, p.reached, p.cpu_seconds
                        )
                        or p.stop_reason
                    )
                with self._timed("logging"):
                    if p.last_eval_step == p.step:
                        self._log_time_breakdown()
                    self._update_bar(bar)
                with self._timed("checkpoint"):
                    by_steps = bool(checkpoint_every) and p.step % checkpoint_every == 0
                    by_time = (
                        checkpoint_seconds > 0
                        and time.perf_counter() - self._saved_at >= checkpoint_seconds
                    )
                    self._commit(write=by_steps or by_time)
                if p.step == self._interrupt_at:
                    os.kill(os.getpid(), signal.SIGINT)
        except (KeyboardInterrupt, WorkerLostError):
            # Both leave a resumable run: the last complete step becomes the checkpoint.
            self._on_interrupt()
            raise
        finally:
            bar.close()
        with self._timed("checkpoint"):
            self._commit(write=True)
        p.wall_time_s = time.perf_counter() - started
        summary = self.finish()
        self._flush_metrics()  # the last metrics and the artifacts must be on disk, or FAILED
        self._check_records()
        return summary

    def _log_time_breakdown(self) -> None:
        """The running totals per part, as ``time_<part>_s`` metrics at this step."""
        for part, seconds in self.time_breakdown(self._elapsed()).items():
            self._log(f"time_{part}_s", seconds)

    def _sample_cpu(self, force: bool) -> None:
        """Read the process tree's CPU time (at most once a second: it scans /proc)."""
        now = time.perf_counter()
        if force or now - self._cpu_sampled_at >= CPU_SAMPLE_PERIOD_S:
            self._cpu_sampled_at = now
            self.progress.cpu_seconds = self._cpu_offset_s + self._cpu_meter.seconds()
            self._machine_load.sample()
            if self._pair_lead is not None:
                self._pair_lead.publish(self.progress.cpu_seconds)

    def _pace(self) -> None:
        """A pair's follower: wait while ahead of the lead; once the lead is done, its final
        CPU-seconds become this run's CPU limit. A stopped lead interrupts the run."""
        if self._pair_follower is None or self.budget.cpu_limit is not None:
            return
        with self._timed("pair_wait"):
            try:
                limit = self._pair_follower.limit(self.progress.cpu_seconds)
            except LeadStopped as error:
                raise KeyboardInterrupt(str(error)) from None
        if limit is not None:
            self.budget = replace(self.budget, cpu_limit=limit)

    def _log_population(self) -> None:
        population = self.algorithm.population_record()
        if self.population_log is not None and population is not None:
            self.population_log.add_generation(self.progress.step, **population)

    def _on_interrupt(self) -> None:
        """Ctrl-C: write the last complete step as the checkpoint and say how to go on."""
        if self.run_dir is None:
            return
        with sigint_ignored():  # a second Ctrl-C must not cut the checkpoint short
            self._write_snapshot()
        if self._saved_step >= 0:
            print(
                f"interrupted: checkpoint at step {self._saved_step}; continue with "
                f"`harness resume {self.run_dir}`",
                file=sys.stderr,
            )

    def _progress_bar(self) -> ProgressBar:
        """A bar over whichever budget binds (timesteps, generations or seconds), with an ETA;
        plain lines at a low rate where stderr is not a terminal (harness.progress)."""
        p = self.progress
        share, _ = self.budget.used(p.timesteps, p.step, p.wall_time_s, p.cpu_seconds)
        return progress_bar(
            total=100.0,
            initial=100.0 * share,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]",
            file=sys.__stderr__,
            disable=not self.show_progress,
            desc=f"{self.config['algo']} {self.config['env']}",
        )

    def _update_bar(self, bar: ProgressBar) -> None:
        p = self.progress
        share, binding = self.budget.used(p.timesteps, p.step, p.wall_time_s, p.cpu_seconds)
        last = p.last_eval
        bar.set_postfix(  # before the update, which draws it (or writes the line)
            gen=p.step,
            steps=p.timesteps,
            eval="-" if last is None else f"{last:.1f}",
            budget=binding,
            refresh=False,
        )
        bar.update(max(100.0 * share - bar.n, 0.0))

    def finish(self) -> dict[str, Any]:
        """Save final parameters and the policy spec as artifacts; return the summary."""
        p = self.progress
        self._sample_cpu(force=True)
        summary = {
            "algo": self.config["algo"],
            "env": resolve_env_id(self.config["env"]),
            "steps": p.step,
            "timesteps": p.timesteps,
            "episodes": p.episodes,
            "wall_time_s": p.wall_time_s,
            "cpu_seconds": p.cpu_seconds,
            "final_eval_return": p.last_eval,
            "stop_reason": p.stop_reason,
            "target": self.target_summary(),
            "time_breakdown": self.time_breakdown(),
            "training_started_at": self._training_started_at,
            "machine_load": self._machine_load.summary(),
            "pair": self._pair_summary(),
        }
        if self._pair_lead is not None:
            self._pair_lead.publish(p.cpu_seconds, done=True)
        summary["endpoint"] = self._endpoint()
        if self.run is not None:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                names = [*self.save_policy(folder), rundir.SUMMARY]
                (folder / rundir.SUMMARY).write_text(
                    json.dumps({**summary, **self.algorithm.artifacts()}, indent=2)
                )
                if self.population_log is not None and self.population_log.generation:
                    self.population_log.add_final_centre(self.algorithm.current_parameters())
                    self.population_log.save(folder / POPULATION_ARTIFACT)
                    names.append(POPULATION_ARTIFACT)
                for name in names:
                    self.run.add_artifact(str(folder / name), name)
        return summary

    # -- the trained policy (harness.policy_io) ---------------------------------------------
    def save_policy(self, folder: Path) -> list[str]:
        """Write the final policy in its field's format (ES params or SB3 model.zip) to folder."""
        from harness.policy_io import save_policy

        return save_policy(self.algorithm, folder)

    def _endpoint(self) -> dict[str, float] | None:
        """The final policy on ``endpoint_episodes`` episodes whose seeds are the same for
        every run (:func:`~algorithms.es_common.endpoint_seeds`), after the CPU-seconds and
        the wall-clock were read: its ``mean``, ``std`` and ``episodes``; None without."""
        episodes = int(self.config.get("endpoint_episodes") or 0)
        if episodes <= 0:
            return None
        mean, std, failed = self._returns(endpoint_seeds(episodes))
        for name, value in zip(ENDPOINT_METRICS, (mean, std, float(episodes)), strict=True):
            self._log(name, value)
        return {"mean": mean, "std": std, "episodes": episodes, "failed": failed}

    def _pair_summary(self) -> dict[str, Any] | None:
        """The ``pair`` block of ``summary.json``: None outside an equal-compute pair."""
        partner = self.config.get("paired_with")
        if not partner:
            return None
        if self._pair_follower is None:
            return {"role": "lead", "partner": partner}
        return {
            "role": "follower",
            "partner": partner,
            "partner_run": self._pair_follower.lead_run_id,
            "cpu_limit": self.budget.cpu_limit,
            "waited_s": self._pair_follower.waited_s,
        }

    def target_summary(self) -> dict[str, Any] | None:
        """The ``target`` block of ``summary.json``: None without a target return."""
        target = self.budget.target_return
        if target is None:
            return None
        p = self.progress
        return {"return": target, "first_crossing": p.first_crossing, "confirmed": p.confirmed}

    def close(self) -> None:
        if self._speed_probe is not None:
            self._speed_probe.close()
        self.algorithm.close()
