"""An es-harness plugin: the cross-entropy method (:mod:`cem_example.cem`) and a
point-reaching env (:mod:`cem_example.envs`, ``--env cem_example.envs:PointReach-v0``)."""
