"""Evaluation: what a worker is asked and what it answers, the noise table, the backends.

The layer between the envs and the algorithms: it imports ``envs`` (and third-party
packages) only, never ``algorithms`` or ``harness``. An algorithm is handed an
:class:`~evaluation.backends.Evaluator` built by the runner
(:func:`evaluation.registry.make_evaluator`); the backends by name are the table
:data:`evaluation.registry.BACKENDS`.

Modules: :mod:`~evaluation.protocol` (tasks, results, broadcasts, replicas),
:mod:`~evaluation.noise` (the shared noise table), :mod:`~evaluation.worker` (the wire
codec and the task runner every worker holds), :mod:`~evaluation.backends` (inline and
process), :mod:`~evaluation.ray_backend` (Ray, imported only when chosen),
:mod:`~evaluation.registry` (names -> backends). Importing this package imports none of
them, so the command line can read the backend table without numpy or Ray.
"""
