"""A sweep cell's identity: the knobs that make a stored run the same cell.

See "Resumption" in :mod:`harness.sweep`: the completed config minus
``ray_address``, ``tuned`` and ``defaults``/``defaults_sha256`` (the provenance of tuned
settings and of a user's defaults file, whose values count as any others) and minus
the knobs the algorithm does not use; keys only one side has do not count, except an
algorithm parameter the stored run predates, which matches only at the algorithm's
built-in default (what the run did before it existed).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness import schema

#: Config keys left out of a cell's identity (see the package docstring): where a run
#: executed, and the provenance of tuned settings and of a user's defaults file (the
#: settings themselves count).
IGNORED_IN_IDENTITY = ("ray_address", "tuned", "defaults", "defaults_sha256")
#: Knobs a stored run that lacks them ran at their default (None), so a cell that sets one
#: is not that run.
ABSENT_IS_DEFAULT = ("paired_with",)


def cell_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The knobs that make two runs the same cell.

    The completed config minus ``ray_address`` (where a run executed, not what
    it computed) and minus the knobs the algorithm does not use (a sweep file's
    ``backend`` once reached PPO cells; it never changed what they computed).
    """
    identity = {k: v for k, v in config.items() if k not in IGNORED_IN_IDENTITY}
    if not identity.get("imports"):
        # no modules imported is what every run did before the knob existed: the key
        # (and so the digest) of such a cell stays what it was
        identity.pop("imports", None)
    from algorithms.registry import family_of

    family = family_of(config.get("algo"))
    if family is not None:
        for knob in schema.KNOBS:
            if knob.applies_to(family):
                continue
            section, _, name = knob.name.rpartition(".")
            holder = identity.get(section) if section else identity
            if isinstance(holder, dict):
                if section:
                    holder = identity[section] = dict(holder)
                holder.pop(name, None)
    # Through JSON, as config.json stores it: tuples become lists, key order is irrelevant.
    canonical: dict[str, Any] = json.loads(json.dumps(identity, sort_keys=True, default=str))
    return canonical


def cell_key(config: dict[str, Any]) -> str:
    """A short digest of :func:`cell_identity` (names lock and log files)."""
    text = json.dumps(cell_identity(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def same_cell(cell: Any, stored: Any) -> bool:
    """Whether a stored run's config is this cell's, comparing the keys both have.

    Both sides go through :func:`cell_identity`. A key only one side has is a
    knob added to (or removed from) the harness since that run was made; it
    does not count, so adding a knob with a neutral default does not re-run
    every stored cell. An algorithm parameter only the cell has counts at any other
    value: the stored run behaved as the parameter's built-in default (cma given
    observation normalisation on one env is a new cell there, not the old runs).
    """
    if isinstance(cell, dict) and isinstance(stored, dict):
        shared = all(same_cell(cell[k], stored[k]) for k in cell.keys() & stored.keys())
        # a pair's run is never a stored run made before pairs existed (the same knobs but
        # for paired_with: a grid cell's run)
        paired = all(k in stored or cell[k] is None for k in ABSENT_IS_DEFAULT if k in cell)
        return shared and paired and _new_params_at_their_defaults(cell, stored)
    return bool(cell == stored)


def _new_params_at_their_defaults(cell: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether every parameter of ``cell["params"]`` that ``stored`` lacks is at the
    algorithm's built-in default (True where there is nothing to compare)."""
    params, old = cell.get("params"), stored.get("params")
    if not (isinstance(params, dict) and isinstance(old, dict)):
        return True
    new = params.keys() - old.keys()
    if not new:
        return True
    from algorithms.base import config_defaults
    from algorithms.registry import AlgorithmRegistryError, get_algorithm

    try:
        defaults = config_defaults(get_algorithm(str(cell.get("algo"))).Config)
    except AlgorithmRegistryError:
        return True  # an algorithm not installed here: only the shared keys can say
    canonical = json.loads(json.dumps(defaults, default=str))
    return all(name in canonical and canonical[name] == params[name] for name in new)
