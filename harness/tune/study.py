"""One study: its record, its trials (ask, run, report, prune, tell), its resumption.

A study holds one algorithm on one env. Its user attributes record what makes its
trials comparable (:meth:`StudyPlan.record`: algorithm, env, seeds, the per-run budget,
the search space, the ``--set`` overrides, the objective, the sampler) and the
equal-effort budget (trials x seeds x timesteps or CPU-seconds); a command that would
continue it with other settings is refused. ``trials`` is a target for the whole
study: a process asks for a trial only while fewer than that many are finished or
running, so two processes sharing a study (``--storage`` on a database server) stop
together at the target, and a rerun after an interruption runs only what is missing.

Trials. Each trial is asked under the study's lock (:func:`harness.tune.storage.study_lock`)
with a TPE sampler (multivariate, as rl-baselines3-zoo's) seeded from ``--seed`` and the
number of trials the study then holds, so a study run by one process with ``--jobs 1``
samples the same points whenever it is run again from scratch. Its runs (one per seed,
:mod:`harness.tune.execute`) start side by side; as they log evaluations, the mean over
seeds of the running robust score (:mod:`harness.tune.scores`) is reported to optuna at
each evaluation index, and the median pruner (its first ``startup_trials`` trials
exempt, and each trial's first third of evaluations) may stop the trial: its runs get
SIGINT and record INTERRUPTED, the trial PRUNED. Runs that ended before a report was
read are reported afterwards in order, so whether a trial is pruned does not depend on
timing. A trial whose run failed is FAIL (its log named in ``failure``) and counts
toward the target, as it used its budget.

Interruption. Ctrl-C (or SIGTERM) stops every run of this process (each records
INTERRUPTED with a checkpoint), marks this process's RUNNING trials FAIL and queues
each again with the same parameters (optuna's RetryHeartbeatStaleTrialCallback, the
one that also requeues trials of processes that died without a word; see
:mod:`harness.tune.storage`). A rerun of the same command pops the queued trials
first; their runs are continued from their checkpoints (sweep resumption), so no run
is made twice, and the failed trials do not count toward the target.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands import UsageError
from harness.tune import scores
from harness.tune.best import Tuned, study_name
from harness.tune.execute import Cells, LocalCells, RayCells, SeedJob
from harness.tune.space import SearchSpace, split_values
from harness.tune.storage import HEARTBEAT_S, TUNE_DIR, shown, study_lock

if TYPE_CHECKING:
    import optuna

    from harness.sweep.spec import Cell

#: Seconds between two reads of a trial's runs.
POLL_S = 0.5


def check_tag(group: str) -> None:
    """Refuse a group name that cannot tag runs (a sweep name's characters)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", group):
        raise UsageError(f"--study must be letters, digits, '_', '.' or '-', got {group!r}")


def budget_text(budget: dict[str, Any]) -> str:
    """``20,000 timesteps`` or ``60 CPU-seconds``: the per-run budget in words."""
    if budget.get("timesteps") is not None:
        return f"{int(budget['timesteps']):,} timesteps"
    return f"{float(budget['cpu_limit']):g} CPU-seconds"


@dataclass
class StudyPlan:
    """What one ``harness tune`` asks of one algorithm's study."""

    group: str
    algorithms: list[str]
    algo: str
    env: str
    space: SearchSpace
    trials: int
    seeds: list[int]
    check_seeds: list[int]
    #: the per-run budget: {"timesteps": T} or {"cpu_limit": S}
    budget: dict[str, Any]
    #: ``--set`` overrides of every run (the study's evaluation interval among them)
    common: list[str]
    workers: int
    backend: str | None
    imports: list[str]
    sampler_seed: int
    startup_trials: int
    warmup_steps: int
    storage_url: str
    runs_dir: Path
    #: ``--defaults FILE``: a defaults file of the user's own (absolute path), or None
    defaults: str | None = None

    @property
    def name(self) -> str:
        return study_name(self.group, self.algo)

    @property
    def objective(self) -> scores.Objective:
        """What the trials maximise: with a ``target_return`` in the budget
        (``--target-return``), the time to it."""
        return scores.Objective.for_budget(self.budget)

    @property
    def check_tag(self) -> str:
        """The sweep tag of the best trial's re-evaluation runs."""
        return f"{self.name}-check"

    @property
    def out_dir(self) -> Path:
        return self.runs_dir / TUNE_DIR / self.name

    def effort(self) -> str:
        """The equal-effort budget in words: trials x seeds x per-run budget."""
        return f"{self.trials} trials x {len(self.seeds)} seeds x {budget_text(self.budget)}"

    def record(self) -> dict[str, Any]:
        """The study's user attributes: what its trials mean (compared on continuing)."""
        return {
            "algo": self.algo,
            "env": self.env,
            "seeds": list(self.seeds),
            "run_budget": dict(self.budget),
            "space": self.space.describe(),
            "space_source": self.space.source,
            "set": list(self.common),
            "imports": list(self.imports),
            **self.objective.record(),
            "group": self.group,
            "group_algorithms": list(self.algorithms),
            "budget": self.effort(),
            "trials": self.trials,
            "sampler": f"TPESampler(multivariate=True, n_startup_trials={self.startup_trials}, "
            f"seed derived from {self.sampler_seed} and the trial count)",
            "pruner": f"MedianPruner(n_startup_trials={self.startup_trials}, "
            f"n_warmup_steps={self.warmup_steps}) on evaluation indices",
            "tag": self.name,
        }

    def cell(self, values: dict[str, Any], seed: int, tag: str | None = None) -> Cell:
        """The sweep cell of one run at ``values`` (config key -> value) and ``seed``."""
        from algorithms.registry import AlgorithmRegistryError
        from harness.config import ConfigError
        from harness.sweep.spec import Cell, build_cell_config

        episodes, sets = split_values(values)
        try:
            config = build_cell_config(
                name=tag or self.name,
                algo=self.algo,
                env=self.env,
                seed=seed,
                episodes=episodes if episodes is not None else 1,
                workers=self.workers,
                backend=self.backend,
                budget=self.budget,
                common=self.common,
                per_algo=sets,
                imports=self.imports,
                defaults=self.defaults,
            )
        except AlgorithmRegistryError as error:
            raise ConfigError(str(error)) from None
        return Cell(seed, config, dict(values))


#: Keys of :meth:`StudyPlan.record` that must match to continue a study.
COMPARED = ("algo", "env", "seeds", "run_budget", "space", "set", "imports")


def check_compatible(name: str, url: str, stored: dict[str, Any], plan: StudyPlan) -> None:
    """Refuse to continue a study with settings other than its own (one line, the first)."""
    wanted = plan.record()
    for key in COMPARED:
        if key in stored and stored[key] != wanted[key]:
            raise UsageError(
                f"study {name} in {shown(url)} was made with {key} {stored[key]!r}, not "
                f"{wanted[key]!r}: give its own settings to continue it, or --study NEW"
            )


@dataclass
class TrialResult:
    """How one trial ended, for the command's lines."""

    number: int
    state: str
    value: float | None
    values: dict[str, Any]
    detail: str = ""
    seconds: float = 0.0


@dataclass
class StudyRunner:
    """Runs a plan's trials in ``jobs`` threads of this process (see the module docstring)."""

    plan: StudyPlan
    storage: Any
    jobs: int = 1
    ray: bool = False
    ship_every_s: float = 10.0
    ray_retries: int = 3
    trust_legacy: bool = False
    echo: Callable[[str], None] = print
    stopping: threading.Event = field(default_factory=threading.Event)
    results: list[TrialResult] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _active: set[Cells] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- optuna -------------------------------------------------------------------------------
    def _pruner(self) -> optuna.pruners.BasePruner:
        import optuna

        return optuna.pruners.MedianPruner(
            n_startup_trials=self.plan.startup_trials, n_warmup_steps=self.plan.warmup_steps
        )

    def _sampler(self, trials_so_far: int) -> optuna.samplers.BaseSampler:
        return make_sampler(self.plan.sampler_seed, self.plan.startup_trials, trials_so_far)

    def load(self) -> optuna.Study:
        import optuna

        return optuna.load_study(
            study_name=self.plan.name, storage=self.storage, pruner=self._pruner()
        )

    def ask(self) -> tuple[optuna.Study, optuna.Trial] | None:
        """A new trial (a queued one first), or None once the study has its target."""
        import optuna

        with study_lock(self.plan.storage_url, self.plan.name):
            study = self.load()
            optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            if counted(trials) >= self.plan.trials:
                return None
            study.sampler = self._sampler(len(trials))
            trial = study.ask()
            self.storage.record_heartbeat(trial._trial_id)
            trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")
            # where its runs are (processes on other machines have runs directories of their own)
            trial.set_user_attr("runs_dir", str(self.plan.runs_dir.resolve()))
        return study, trial

    # -- one trial ----------------------------------------------------------------------------
    def _cells(self) -> Cells:
        log_dir = self.plan.out_dir / "logs"
        if self.ray:
            return RayCells(self.plan.runs_dir, log_dir, self.ship_every_s, self.ray_retries)
        return LocalCells(self.plan.runs_dir, log_dir, self.trust_legacy)

    def run_trial(self, study: optuna.Study, trial: optuna.Trial) -> None:
        """Sample, run, report, prune and tell one trial."""
        from optuna.trial import TrialState

        from harness.config import ConfigError

        started = time.monotonic()
        values = self.plan.space.sample(trial)
        trial.set_user_attr("values", values)
        trial.set_user_attr("set", split_values(values)[1])
        if self.stopping.is_set():
            self._requeue(study, trial, values)
            return
        try:
            cells = [self.plan.cell(values, seed) for seed in self.plan.seeds]
        except ConfigError as error:
            trial.set_user_attr("failure", f"config refused: {error}")
            study.tell(trial, state=TrialState.FAIL)
            self._result(trial.number, "FAIL", None, values, f"config refused: {error}", started)
            return
        runner = self._cells()
        with self._lock:
            self._active.add(runner)
        try:
            jobs = runner.start(cells)
            pruned_at = self._watch(study, trial, runner, jobs)
        finally:
            with self._lock:
                self._active.discard(runner)
            if isinstance(runner, RayCells):
                runner.release()
        self._finish(study, trial, values, jobs, pruned_at, started)

    def _watch(
        self, study: optuna.Study, trial: optuna.Trial, runner: Cells, jobs: list[SeedJob]
    ) -> int | None:
        """Report each evaluation step as the runs reach it; the step pruned at, or None."""
        step = 0
        beat = time.monotonic()
        while True:
            ended = not runner.running()
            runner.locate()
            objective = self.plan.objective
            per_seed = [
                (objective.series(job.run_dir) if job.run_dir else [], job.ended.is_set())
                for job in jobs
            ]
            while (value := objective.intermediate(per_seed, step)) is not None:
                trial.report(value, step)
                prune = trial.should_prune()
                step += 1
                if prune:
                    if not ended:
                        runner.stop()
                    return step - 1
            if ended:
                return None
            if self.stopping.is_set():
                runner.stop()
                return None
            if time.monotonic() - beat >= HEARTBEAT_S:
                self.storage.record_heartbeat(trial._trial_id)
                beat = time.monotonic()
            self.stopping.wait(POLL_S)

    def _finish(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        values: dict[str, Any],
        jobs: list[SeedJob],
        pruned_at: int | None,
        started: float,
    ) -> None:
        from optuna.trial import TrialState

        statuses = {job.seed: job.outcome.status if job.outcome else "CRASHED" for job in jobs}
        runs = {str(job.seed): job.run_dir.name for job in jobs if job.run_dir is not None}
        trial.set_user_attr("runs", runs)
        objective = self.plan.objective
        returns = [objective.series(job.run_dir) if job.run_dir else [] for job in jobs]
        seed_scores = {
            str(job.seed): objective.run_value(r) for job, r in zip(jobs, returns, strict=True)
        }
        trial.set_user_attr("scores", seed_scores)
        usage = {str(job.seed): scores.run_usage(job.run_dir) for job in jobs if job.run_dir}
        trial.set_user_attr("usage", usage)
        notes = self._usage_notes(trial.number, {"usage": usage})
        completed = all(status == "COMPLETED" for status in statuses.values())
        if pruned_at is not None:
            trial.set_user_attr("pruned_at_evaluation", pruned_at)
            study.tell(trial, state=TrialState.PRUNED)
            last = trial_last_value(study, trial.number)
            self._result(
                trial.number, "PRUNED", last, values, f"at evaluation {pruned_at}{notes}", started
            )
            return
        if self.stopping.is_set() and not completed:
            self._requeue(study, trial, values)
            return
        value = objective.trial_value(returns) if completed else None
        if value is None or not math.isfinite(value):
            failed = [
                f"seed {job.seed}: {statuses[job.seed]}"
                + (f" (log {job.outcome.log})" if job.outcome and job.outcome.log else "")
                for job in jobs
                if statuses[job.seed] != "COMPLETED"
            ] or ["no finite evaluation"]
            trial.set_user_attr("failure", "; ".join(failed))
            study.tell(trial, state=TrialState.FAIL)
            self._result(trial.number, "FAIL", None, values, "; ".join(failed), started)
            return
        study.tell(trial, value)
        shown_scores = " ".join(
            f"{seed}:{score:{',.0f' if objective.to_target else '.1f'}}"
            for seed, score in seed_scores.items()
            if score is not None
        )
        self._result(
            trial.number, "COMPLETE", value, values, f"seeds {shown_scores}{notes}", started
        )
        evaluations = scores.trial_evaluations({"usage": usage}, 0)
        if not objective.enough(evaluations):
            self.warn(
                f"{self.plan.name} trial {trial.number}: a run made {evaluations} "
                f"evaluation(s), fewer than the {objective.evaluations_needed} the objective "
                "averages: flagged, and not taken as the best trial while another has enough"
            )

    def _usage_notes(self, number: int, attrs: dict[str, Any]) -> str:
        """``; CPU-s 21.3 22.0 of 20`` for the trial's line under a CPU limit, with a warning
        line per run more than :data:`scores.CPU_OVERRUN_WARN` over it."""
        limit = self.plan.budget.get("cpu_limit")
        if limit is None:
            return ""
        usage = attrs["usage"]
        used = [u.get("cpu_seconds") for u in usage.values()]
        shown_used = " ".join("?" if u is None else f"{u:.1f}" for u in used)
        for over in scores.cpu_overruns(attrs, float(limit)):
            self.warn(
                f"{self.plan.name} trial {number}: over its CPU limit: "
                f"{scores.overrun_text(over, float(limit))}"
            )
        return f"; CPU-s {shown_used} of {float(limit):g}"

    def warn(self, line: str) -> None:
        """A warning line on stderr."""
        print(f"harness: warning: {line}", file=sys.stderr, flush=True)

    def _requeue(self, study: optuna.Study, trial: optuna.Trial, values: dict[str, Any]) -> None:
        """Mark an interrupted trial FAIL and queue it again with the same parameters."""
        import optuna
        from optuna.trial import TrialState

        trial.set_user_attr("failure", "interrupted (Ctrl-C or SIGTERM); queued again")
        frozen = study.tell(trial, state=TrialState.FAIL)
        optuna.storages.RetryHeartbeatStaleTrialCallback()(study, frozen)
        with self._lock:
            self.requeued.append(trial.number)
        self._result(trial.number, "FAIL", None, values, "interrupted; queued again", 0.0)

    def _result(
        self,
        number: int,
        state: str,
        value: float | None,
        values: dict[str, Any],
        detail: str,
        started: float,
    ) -> None:
        seconds = time.monotonic() - started if started else 0.0
        result = TrialResult(number, state, value, values, detail, seconds)
        with self._lock:
            self.results.append(result)
        shown_value = "" if value is None else f" {value:.2f}"
        point = " ".join(f"{k}={_short(v)}" for k, v in values.items())
        self.echo(
            f"{self.plan.name} trial {number} {state}{shown_value} ({detail}; {seconds:.0f} s): "
            f"{point}"
        )

    # -- the loop -------------------------------------------------------------------------------
    def _worker(self, done: threading.Event) -> None:
        try:
            while not self.stopping.is_set():
                asked = self.ask()
                if asked is None:
                    return
                self.run_trial(*asked)
        except BaseException as error:  # reported by the main thread
            self.errors.append(error)
            self.stopping.set()
        finally:
            done.set()

    def run(self) -> None:
        """Run trials until the study has its target; Ctrl-C stops and requeues (see above).

        The main thread waits on an event per worker, not on ``Thread.join``: a
        KeyboardInterrupt inside ``join`` can leave the thread looking finished (CPython
        gh-90882), and the process would then exit before the trials are queued again.
        """
        events = [threading.Event() for _ in range(max(1, self.jobs))]
        for index, event in enumerate(events):
            threading.Thread(
                target=self._worker, args=(event,), name=f"tune-trial-{index}", daemon=True
            ).start()
        try:
            while not all(event.wait(0.5) for event in events):
                pass
        except KeyboardInterrupt:
            self.stopping.set()
            with self._lock:
                active = list(self._active)
            for runner in active:
                runner.stop()
            while not all(event.wait(0.5) for event in events):
                pass
            for error in self.errors:  # a failure while stopping is still a failure: say it
                traceback.print_exception(error, file=sys.stderr)
            raise
        if self.errors:
            raise self.errors[0]

    # -- after the study ---------------------------------------------------------------------
    def recheck(self, study: optuna.Study, best: Tuned) -> dict[str, Any] | None:
        """Re-evaluate the best trial (its checked values) on the check seeds (its runs tagged
        ``-check``), once.

        Recorded in the study's user attribute ``recheck`` (trial, seeds, per-seed scores and
        runs, score: the objective over the check seeds); kept while the best trial is the
        same. None without check seeds.
        """
        seeds = list(self.plan.check_seeds)
        if not seeds:
            return None
        stored = best.recheck
        if stored is not None and stored.get("seeds") == seeds and stored.get("score") is not None:
            return stored
        cells = [self.plan.cell(best.values, seed, tag=self.plan.check_tag) for seed in seeds]
        self.echo(
            f"{self.plan.name}: re-evaluating trial {best.trial} on fresh tuning seeds "
            f"{' '.join(map(str, seeds))}"
        )
        runner = self._cells()
        jobs = runner.start(cells)
        try:
            while not runner.wait(POLL_S):
                pass
        except KeyboardInterrupt:
            runner.stop()
            raise
        finally:
            if isinstance(runner, RayCells):
                runner.release()
        objective = self.plan.objective
        returns = [objective.series(job.run_dir) if job.run_dir else [] for job in jobs]
        completed = all(job.outcome and job.outcome.status == "COMPLETED" for job in jobs)
        record: dict[str, Any] = {
            "trial": best.trial,
            "seeds": seeds,
            "tag": self.plan.check_tag,
            "runs_dir": str(self.plan.runs_dir.resolve()),
            "runs": {str(j.seed): j.run_dir.name for j in jobs if j.run_dir is not None},
            "scores": {
                str(j.seed): objective.run_value(r) for j, r in zip(jobs, returns, strict=True)
            },
            "score": objective.trial_value(returns) if completed else None,
        }
        if not completed:
            record["failure"] = "; ".join(
                f"seed {j.seed}: {j.outcome.status if j.outcome else 'CRASHED'}"
                for j in jobs
                if not (j.outcome and j.outcome.status == "COMPLETED")
            )
        study.set_user_attr("recheck", record)
        return record


def make_sampler(seed: int, startup_trials: int, trials_so_far: int) -> Any:
    """The TPE sampler of the next trial: multivariate (as rl-baselines3-zoo's), its seed
    derived from the study's ``seed`` and the number of trials the study holds, so that the
    points a study asks depend on its seed and history only."""
    import numpy as np
    import optuna

    derived = int(np.random.SeedSequence([seed, trials_so_far]).generate_state(1)[0])
    return optuna.samplers.TPESampler(
        n_startup_trials=startup_trials, seed=derived, multivariate=True
    )


def counted(trials: list[Any]) -> int:
    """Trials that count toward the target: all but queued ones and failed ones queued again."""
    from optuna.trial import TrialState

    retried: set[int] = set()
    for t in trials:
        history = t.system_attrs.get("retry_history")  # data: maybe another program's
        if isinstance(history, list):
            retried.update(n for n in history if isinstance(n, int))
    return sum(1 for t in trials if t.state != TrialState.WAITING and t.number not in retried)


def trial_last_value(study: optuna.Study, number: int) -> float | None:
    """The last intermediate value of a trial (a pruned trial's value in the history)."""
    frozen = study.get_trials(deepcopy=False)[number]
    if not frozen.intermediate_values:
        return None
    return float(frozen.intermediate_values[max(frozen.intermediate_values)])


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "-".join(str(v) for v in value)
    return str(value)


def silence_optuna() -> None:
    """Once per process: optuna's own lines (each trial's result, which this command prints
    in its own words) and its warnings about features used deliberately here (experimental
    ones, heartbeats with ask-and-tell) are nothing a user can act on."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")


def say(line: str) -> None:
    """A line on stdout, flushed (the command's progress)."""
    print(line, flush=True)
    sys.stdout.flush()
