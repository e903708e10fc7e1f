"""Sweeps as data: ``harness sweep FILE.yaml [--runs-dir DIR] [--jobs N]``.

A sweep file (YAML, read with the safe loader) declares a grid; every
combination is one *cell*, one Sacred run::

    name: demo                      # required; every run is tagged sweep=<name>
    description: >                  # optional free text (reports quote it)
      What this sweep compares and at what budget.
    imports: [mypkg.envs]           # optional: modules of your own (as harness run --import)
    defaults: my_defaults.yaml      # optional: per-env defaults of your own (as harness run
                                    # --defaults; a relative path is from this file's folder)
    grid:                           # each entry a list (a single value is a list of one)
      algo: [optimes, cma]          # required
      env: [CartPole]               # required
      seed: [0, 1, 2]               # default [0]
      episodes: [1, 5]              # episodes per fitness (ES family); default [1]
      workers: [1]                  # default [1] (as harness run); "auto": this machine's CPUs
      policy.kind: [linear, mlp]    # any --set knob ...
      population: [20, 40]          # ... or algorithm hyperparameter
    budget:                         # any of timesteps, generations, time_limit, cpu_limit,
                                    # target_return
      timesteps: 20000              # (none: the env's default budget)
    backend: inline                 # inline, process or ray (ES family); default process
    jobs: 2                         # default for --jobs: cells run at once
    set:                            # --set overrides for every cell (run/policy/budget keys)
      - eval_every_timesteps=5000
    overrides:                      # per-algorithm --set overrides (hyperparameters)
      optimes: [population=20]
      ppo: [n_steps=256]
    pair_with: ppo                  # optional: equal-compute pairs (harness.pairing): each
                                    # other cell runs beside a run of ppo at its grid point
                                    # (ppo to the budget), each on a core of its own, and
                                    # stops at the CPU-seconds that run used
    tuned:                          # optional: run each algorithm A at the best trial of
      study: lander                 # the study lander-A (`harness tune --study lander`)
      storage: sqlite:///runs/_tune/tune.db   # its storage (any SQLAlchemy URL)

With ``tuned:``, each cell of algorithm A gets the best trial's settings of the study
``GROUP-A`` as ``--set`` overrides (and its episodes per fitness, if tuned), and records
where they came from (study, trial, budget, seeds) in its ``tuned`` knob, which the
report's settings table shows; a setting also given by the file, or a study of another
env or algorithm, is refused (docs/tuning.md).

Unknown keys are a usage error naming the key and the file. Each cell's
config is built by :func:`harness.config.build_run_config`, as ``harness
run`` builds one, so the whole file is validated before anything runs. The
grid's axes are the knobs :mod:`harness.schema` marks as such; any other grid
key is a ``--set`` knob or a hyperparameter, refused for an algorithm that lacks
it (:func:`~harness.sweep.spec.grid_key_applies`), one cell (not one per value)
for an algorithm whose family does not use the knob. File-wide
settings reach the cells whose algorithm uses them: ``backend``, ES-only
knobs in ``set`` and the ``episodes`` axis are not given to PPO/A2C cells
(which get one cell per other combination, not one per K); in ``overrides``
of an algorithm, a knob it does not use is an error.

Cells run one subprocess each (``python -m harness.sweep --cell FILE``), so
a crash of one cell does not stop the sweep; ``--jobs N`` runs N at once.
Their output goes to ``RUNS_DIR/_sweeps/<name>/logs/``.

``--set KEY=VALUE`` (every cell) and ``--grid KEY=V1,V2`` (replace or add a grid key)
shrink a shipped study to this machine without editing it, e.g.
``harness sweep experiments/goodai_lander.yaml --set timesteps=300000
--grid seed=0,1``; ``--dry-run`` lists the cells and which would be skipped.

Resumption. A cell is *done* when the runs directory holds a ``COMPLETED``
run whose config equals the cell's completed config on every key except
``ray_address`` (where a run executed is not what it computed), ``tuned`` and
``defaults`` (the provenance of tuned settings and of a defaults file; the settings
themselves count) and the knobs
its algorithm does not use; keys only one of the two has (a knob added to the
harness since) are not compared. The sweep name
is part of that comparison, so a run is reused only by the sweep that made
it; editing a hyperparameter, a budget, ``experiments/defaults.yaml`` or the
file's ``defaults:`` file makes the affected cells run again. ``FAILED``, ``INTERRUPTED`` and stale
``RUNNING`` runs do not count, nor a ``COMPLETED`` one whose ``metrics.json``
was cut short. A cell whose newest unfinished run is ``INTERRUPTED`` (or
``RUNNING`` with its process gone: its ``.run.lock`` flock is free) and has a
checkpoint is continued in place with ``harness resume`` (``--no-resume``:
afresh); otherwise, and for ``FAILED`` runs, the cell runs again as a new run
(the old directories stay as the record of what happened; ``harness report``
leaves runs that are not ``COMPLETED`` out).

Concurrency. Two sweeps may write into one runs directory at once. Sacred's
``FileStorageObserver`` picks a new id as max+1 and creates it with
``os.mkdir``, retrying the next id on ``FileExistsError``, so ids never
collide. Two sweeps that share a cell (the same file started twice) take an
``fcntl`` lock per cell (``RUNS_DIR/_sweeps/locks/<key>.lock``) around the
check-and-run, so the second waits and then skips it.

Modules: :mod:`~harness.sweep.spec` (the file, its cells),
:mod:`~harness.sweep.identity` (when a stored run is a cell's),
:mod:`~harness.sweep.store` (completed and resumable runs, through
:mod:`harness.rundir`), :mod:`~harness.sweep.scheduler` (running cells) and
:mod:`~harness.sweep.command` (the command line).
"""

from __future__ import annotations

from harness.sweep.command import add_arguments, cell_main, run
from harness.sweep.identity import IGNORED_IN_IDENTITY, cell_identity, cell_key, same_cell
from harness.sweep.scheduler import (
    BOOKKEEPING_DIR,
    RESULT_PREFIX,
    CellOutcome,
    SweepResult,
    cell_lock,
    resume_cell,
    run_cell,
    run_sweep,
)
from harness.sweep.spec import (
    GRID_DEFAULTS,
    GRID_KEYS,
    SWEEP_KEYS,
    Cell,
    Sweep,
    SweepError,
    build_cell_config,
    load_sweep,
    parse_grid_override,
)
from harness.sweep.store import RESUMABLE, completed_runs, find_completed, resumable_run

__all__ = [
    "BOOKKEEPING_DIR",
    "GRID_DEFAULTS",
    "GRID_KEYS",
    "IGNORED_IN_IDENTITY",
    "RESULT_PREFIX",
    "RESUMABLE",
    "SWEEP_KEYS",
    "Cell",
    "CellOutcome",
    "Sweep",
    "SweepError",
    "SweepResult",
    "add_arguments",
    "build_cell_config",
    "cell_identity",
    "cell_key",
    "cell_lock",
    "cell_main",
    "completed_runs",
    "find_completed",
    "load_sweep",
    "parse_grid_override",
    "resumable_run",
    "resume_cell",
    "run",
    "run_cell",
    "run_sweep",
    "same_cell",
]
