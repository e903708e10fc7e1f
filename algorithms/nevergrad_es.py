"""Nevergrad's optimizers over the flat policy parameters: ``nevergrad-es`` and ``ng:NAME``.

``nevergrad-es`` is Nevergrad's ``ES`` (a (40, 60) evolution strategy with only
offspring selected); ``ng:NAME`` is any optimizer of
``nevergrad.optimizers.registry`` (``ng:CMA``, ``ng:DiagonalCMA``,
``ng:TwoPointsDE``, ...). Both share the ``nevergrad`` section of
``experiments/defaults.yaml``.

A generation asks ``population`` candidates (the optimizer is built with
``num_workers=population``, so Nevergrad expects that many outstanding asks),
evaluates them in parallel and tells all of their losses. Each candidate
crosses the wire as its full vector.

Initialisation. The parameter vector is an ``ng.p.Array`` whose ``init`` is
the harness's policy init (normc, as optimes) and whose mutation scale is
``sigma``; Nevergrad's own default, which GoodAI's runs used, is an Array at
zero with sigma 1.0 (``init: zeros, sigma: 1.0`` reproduces it). Note that
``ES`` samples its first 40 parents as ``init + sigma * N(0, I)``, so ``sigma``
is also the spread of the initial population.

What ``evaluate_policy`` plays. Nevergrad's own answer,
``optimizer.provide_recommendation()``. For optimizers with a search mean
(``CMA``, ``DiagonalCMA``, ...) that is the mean. ``ES`` has no centre: it
recommends the archived candidate with the best estimate, pessimistic when
``noisy`` is set (the default; Nevergrad is then told the function is
stochastic). With one noisy evaluation per point that candidate is partly
chosen for luck, so its training fitness is optimistic; the runner's
evaluation replays it on fresh seeds, which is an unbiased measure of it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.base import doc
from algorithms.es_common import finite_losses, optimizer_seed, to_loss
from algorithms.es_core import Strategy
from algorithms.es_engine import ESDefinition, VectorRunKnobs
from algorithms.private_rng import PrivateGlobalRNG, dumps_optimizer, loads_optimizer
from algorithms.registry import UnknownAlgorithmError, register_definition, register_prefix


@dataclass(frozen=True)
class NevergradConfig(VectorRunKnobs):
    """Hyperparameters of ``nevergrad-es`` and every ``ng:NAME`` (YAML section ``nevergrad``)."""

    population: int = doc(
        "candidates asked and told per generation (Nevergrad num_workers); 60 is ES's offspring"
        " count, so one generation is one ES selection",
        60,
    )
    sigma: float = doc(
        "mutation scale of the parameter Array (Nevergrad's own default is 1.0)", 0.1
    )
    init: str = doc(
        "'policy' (the harness init, as optimes) or 'zeros' (Nevergrad's Array default, as in"
        " the GoodAI runs)",
        "policy",
    )
    noisy: bool = doc(
        "tell Nevergrad the fitness is stochastic (recommendations by pessimistic estimate)", True
    )
    budget: int = doc(
        "evaluation budget declared to Nevergrad (0: none); optimizers such as NGOpt choose"
        " their strategy from it",
        0,
    )

    #: a Nevergrad optimizer exposes neither a sigma nor a learning rate to schedule
    SCHEDULES = ()

    def validate(self) -> None:
        """Raise ValueError naming the first bad value."""
        if self.population < 1:
            raise ValueError(f"population must be >= 1, got {self.population}")
        if not self.sigma > 0:
            raise ValueError(f"sigma must be positive, got {self.sigma}")
        if self.init not in ("policy", "zeros"):
            raise ValueError(f"init must be policy or zeros, got {self.init!r}")
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")
        self.validate_run()


class NevergradStrategy(Strategy):
    """A Nevergrad optimizer asked and told one whole population at a time."""

    def __init__(
        self, config: NevergradConfig, x0: np.ndarray, seed: int, optimizer_name: str
    ) -> None:
        import nevergrad as ng

        self.config = config
        self.optimizer_name = optimizer_name
        #: numpy's global RNG as Nevergrad's CMA wrappers see it, private and checkpointed
        self.rng = PrivateGlobalRNG(("numpy",), seed=optimizer_seed(seed, 0))
        init = x0 if config.init == "policy" else np.zeros_like(x0)
        parametrization = ng.p.Array(init=init).set_mutation(sigma=config.sigma)
        parametrization.random_state = np.random.RandomState(optimizer_seed(seed, 0))
        if config.noisy:
            parametrization.function.deterministic = False
        factory = ng.optimizers.registry[optimizer_name]
        with self.rng.active():
            self.optimizer: Any = factory(
                parametrization=parametrization,
                budget=config.budget or None,
                num_workers=config.population,
            )
        #: the parameters asked and not yet told
        self.asked: list[Any] = []

    def ask(self, rng: np.random.Generator) -> list[np.ndarray]:
        try:
            with self.rng.active():
                self.asked = [self.optimizer.ask() for _ in range(self.config.population)]
        except AssertionError as error:
            hint = "" if self.config.budget else " (some need a budget: --set budget=N)"
            raise RuntimeError(
                f"Nevergrad's {self.optimizer_name} failed to ask{hint}: {error!r}"
            ) from error
        return [np.asarray(h.value, dtype=np.float64) for h in self.asked]

    def tell(self, candidates: list[np.ndarray], fitness: np.ndarray) -> None:
        asked, self.asked = self.asked, []
        with self.rng.active():
            for handle, loss in zip(asked, finite_losses(to_loss(fitness)), strict=True):
                self.optimizer.tell(handle, float(loss))

    def centre(self) -> np.ndarray:
        with self.rng.active():
            return np.asarray(self.optimizer.provide_recommendation().value, dtype=np.float64)

    def metrics(self) -> dict[str, float]:
        return {
            "num_ask": float(self.optimizer.num_ask),
            "num_tell": float(self.optimizer.num_tell),
        }

    def state_dict(self) -> dict[str, Any]:
        assert self.rng.states is not None  # seeded in the constructor
        return {
            "numpy_global_rng": self.rng.states["numpy"],
            "optimizer": dumps_optimizer(self.optimizer),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.states = {"numpy": state["numpy_global_rng"]}
        self.optimizer = loads_optimizer(state["optimizer"])


def nevergrad_es(optimizer_name: str, summary: str) -> ESDefinition:
    """The ES of one Nevergrad optimizer (unregistered: :func:`register_es` or the prefix)."""

    def describe_update(params: dict[str, Any]) -> str:
        """Nevergrad's own optimizer, named, with what the harness tells it."""
        text = f"Nevergrad {optimizer_name}, ask/tell of {params.get('population')}"
        text += ", noisy fitness" if params.get("noisy") else ""
        budget = int(params.get("budget") or 0)
        return text + (f", budget {budget:,}" if budget else "")

    return ESDefinition(
        name="nevergrad-es" if optimizer_name == "ES" else f"ng:{optimizer_name}",
        Config=NevergradConfig,
        strategy=lambda config, start: NevergradStrategy(
            config, start.params.astype(np.float64), start.seed, optimizer_name
        ),
        codec="vector",
        summary=summary,
        describe_update=describe_update,
        # nevergrad-es and every ng:NAME share one section of defaults.yaml
        defaults_section="nevergrad",
    )


register_definition(
    nevergrad_es("ES", "Nevergrad's ES (GoodAI's 'ES'); a vector per candidate on the wire")
)

_NG_ALGORITHMS: dict[str, ESDefinition] = {}


def nevergrad_algorithm(optimizer_name: str) -> ESDefinition:
    """The ES of ``ng:optimizer_name``; created once per name and cached.

    Raises :class:`UnknownAlgorithmError` with close matches for a name that is
    not in ``nevergrad.optimizers.registry``.
    """
    cached = _NG_ALGORITHMS.get(optimizer_name)
    if cached is not None:
        return cached
    import nevergrad as ng

    registry = ng.optimizers.registry
    if optimizer_name not in registry:
        by_lower = {name.lower(): name for name in registry}
        close = difflib.get_close_matches(optimizer_name.lower(), list(by_lower), n=4, cutoff=0.6)
        hint = f"; did you mean: {', '.join('ng:' + by_lower[c] for c in close)}?" if close else ""
        raise UnknownAlgorithmError(
            f"unknown Nevergrad optimizer {optimizer_name!r} (ng:{optimizer_name}){hint} "
            f"({len(registry)} names in nevergrad.optimizers.registry)"
        )
    summary = f"Nevergrad's {optimizer_name}; a vector per candidate on the wire"
    _NG_ALGORITHMS[optimizer_name] = nevergrad_es(optimizer_name, summary)
    return _NG_ALGORITHMS[optimizer_name]


register_prefix("ng", nevergrad_algorithm, family="es")
