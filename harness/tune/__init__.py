"""``harness tune``: hyperparameter studies whose trials are ordinary runs (docs/tuning.md).

An Optuna study per algorithm and env: a TPE sampler seeded from ``--seed``, a median
pruner on each run's evaluations, the objective the mean over seeds of each run's mean of
its last 3 evaluations. Each trial x seed is a sweep cell, so a Sacred run directory
tagged with the study's name (``harness report --sweep STUDY``), resumable and reportable
as any run.

Modules: :mod:`~harness.tune.space` (search spaces as data),
:mod:`~harness.tune.storage` (optuna's RDB storage, its checks and lock),
:mod:`~harness.tune.scores` (objective and pruning values),
:mod:`~harness.tune.execute` (a trial's runs, local or on Ray),
:mod:`~harness.tune.study` (ask, run, report, prune, tell; interruption),
:mod:`~harness.tune.best` (a study's best trial, for ``best.yaml`` and a sweep's
``tuned:``), :mod:`~harness.tune.outputs` (``best.yaml``, ``trials.csv``, the report)
and :mod:`~harness.tune.command` (the command line). This package's ``__init__`` imports
nothing, so :mod:`harness.sweep.spec` may read a best trial without a cycle.
"""
