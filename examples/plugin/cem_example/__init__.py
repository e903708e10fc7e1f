"""An es-harness plugin: the cross-entropy method (:mod:`cem_example.cem`) and a
point-reaching env (:mod:`cem_example.envs`, ``--env cem_example.envs:PointReach-v0``)."""

from pathlib import Path

#: Per-env defaults of this package's env, found by es-harness through the entry point
#: ``es_harness.defaults`` (pyproject.toml): a path to a YAML file in the format of
#: es-harness's ``experiments/defaults.yaml``.
DEFAULTS = Path(__file__).with_name("defaults.yaml")
