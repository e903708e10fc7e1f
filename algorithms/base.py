"""The interface every algorithm implements, and the run context it is given.

The runner drives an :class:`Algorithm` one :meth:`~Algorithm.step` at a time: a
generation for the ES family, a rollout-and-update chunk for RL. Every step
returns a :class:`StepRecord` with the same fields, so one report can put any two
algorithms side by side in environment timesteps (the common currency) and in
wall-clock.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from envs.policies import PolicySpec
from evaluation.backends import Evaluator
from evaluation.noise import NoiseSpec


@dataclass
class StepRecord:
    """What one step cost and achieved. Counts are for this step, not cumulative."""

    timesteps: int
    episodes: int
    fitness_mean: float
    fitness_max: float
    fitness_min: float
    bytes_to_workers: int = 0
    bytes_from_workers: int = 0
    worker_seconds: float = 0.0
    extras: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunContext:
    """Everything about a run that is not an algorithm hyperparameter."""

    env_name: str
    policy_spec: PolicySpec
    seed: int
    episodes_per_fitness: int
    workers: int
    backend: str = "inline"
    ray_address: str | None = None
    max_episode_steps: int | None = None
    fail_on_env_error: bool = True
    #: "broadcast" (the centre travels each generation) or "seeds" (replicas, Algorithm 2)
    sync: str = "broadcast"
    #: training-reward transform (envs.reward_shaping); evaluation always uses the env's reward
    reward_transform: str = "none"


class Algorithm(ABC):
    """An optimiser of policy parameters that the runner can step, evaluate and checkpoint.

    Construction: ``cls(context, config, evaluator)``. An ES (``family == "es"``) is given
    the run's :class:`~evaluation.backends.Evaluator`, which the runner builds first
    (:func:`harness.runner.create_algorithm`) with the noise table :meth:`noise_spec_for`
    asks for, and closes if construction fails; an RL algorithm (``family == "rl"``)
    steps its own envs and is built as ``cls(context, config)``.

    Everything the harness needs to know about an algorithm is declared here, so no
    code outside the algorithm's own module compares its name: its family (which knobs
    apply, whether it gets an evaluator), its section of ``experiments/defaults.yaml``,
    how the report describes its population and update, what it logs per generation.
    """

    name: str
    #: "es": candidates are scored by the run's evaluator (episodes per fitness, backends,
    #: the population log apply); "rl": trains on its own env steps
    family: ClassVar[Literal["es", "rl"]]
    summary: ClassVar[str] = ""
    Config: ClassVar[type]
    #: the section of ``experiments/defaults.yaml`` entries holding its per-env
    #: hyperparameters (None: its name); algorithms of one library may share one
    defaults_section: ClassVar[str | None] = None
    #: rl-baselines3-zoo's hyperparameter file for this algorithm (``ppo.yml``); a
    #: defaults.yaml section of it that carries one of the file's entries names it with
    #: ``zoo: ENTRY``, and ``--print-config`` names that entry as the values' source
    zoo_hyperparams: ClassVar[str | None] = None

    def __init__(self, context: RunContext, config: Any, evaluator: Evaluator | None = None):
        """``evaluator``: the run's evaluator for the ES family (an ES keeps it), else None."""
        self.context = context
        self.config = config
        #: the shared noise table the evaluator holds for this run (None: none), which the
        #: population log needs to rebuild perturbations
        self.noise_spec: NoiseSpec | None = None
        #: cumulative seconds per part of the wall-clock this algorithm books itself
        #: (e.g. ``head_update``); the runner books the rest of a step (harness.runner)
        self.time_counters: dict[str, float] = {}
        #: the last generation's record for the population log (see :meth:`population_record`)
        self._population: dict[str, Any] | None = None

    @classmethod
    def section_in_defaults(cls) -> str:
        """The section of a ``defaults.yaml`` entry holding this algorithm's settings."""
        return cls.defaults_section or cls.name

    @classmethod
    def describe_population(cls, params: dict[str, Any]) -> str | None:
        """The population in words where its number alone would mislead (pycma's own
        default for 0); None: the report shows ``params["population"]``, if any."""
        return None

    @classmethod
    def describe_update(cls, params: dict[str, Any]) -> str | None:
        """The update rule in words for the report's settings table (None: nothing to say)."""
        return None

    @abstractmethod
    def step(self) -> StepRecord:
        """Run one generation (ES) or one rollout/update chunk (RL)."""

    @abstractmethod
    def evaluate_policy(self, env_seeds: list[int]) -> np.ndarray:
        """Returns of the current policy (the ES centre), one episode per seed, no exploration."""

    @abstractmethod
    def current_parameters(self) -> np.ndarray:
        """The flat float32 parameters of the current policy."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit (see :meth:`load_state_dict`)."""
        raise NotImplementedError(f"{self.name} cannot be checkpointed")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` captured."""
        raise NotImplementedError(f"{self.name} cannot be checkpointed")

    #: Whether ``sync=seeds`` (replicated optimizer state on every worker) is supported.
    supports_replicated: ClassVar[bool] = False

    @classmethod
    def noise_spec_for(cls, context: RunContext, config: Any) -> NoiseSpec | None:
        """The shared noise table this algorithm's evaluator must hold (None: none).

        Asked before the algorithm exists, so the runner can start the workers with it.
        """
        return None

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """Refuse, with a ValueError naming the value, a completed run config this cannot run.

        Called before any run directory exists, so bad input leaves nothing behind.
        """
        if config.get("sync") == "seeds" and not cls.supports_replicated:
            raise ValueError(f"{cls.name} has no replicated mode: sync=seeds is for optimes")

    def population_record(self) -> dict[str, Any] | None:
        """The last generation's candidates and fitness for the population log, if any.

        Keys follow :meth:`harness.records.PopulationLogWriter.add_generation`:
        ``fitness``, ``centre`` (before the update), and ``sigma``/``noise_index``/``sign``
        (OpenAI-ES) or ``candidates`` (vector ES).
        """
        return self._population

    def artifacts(self) -> dict[str, Any]:
        """Extra JSON-serialisable facts for the run record (obs statistics, ...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, most algorithms need it
        """Release workers."""


def config_defaults(config_class: type) -> dict[str, Any]:
    """Every field of a config dataclass with its default (fields without one left out)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(config_class)
        if f.default is not dataclasses.MISSING
    }


def doc(text: str, default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A dataclass field with a one-line description shown in ``harness list`` and CLI help."""
    return dataclasses.field(default=default, metadata={"doc": text}, **kwargs)


class AlgorithmType(Protocol):
    """What the registry gives for a name: an :class:`Algorithm` subclass, or an ES registered
    as data (``algorithms.es_engine.ESDefinition``); calling it builds the algorithm."""

    @property
    def name(self) -> str: ...

    @property
    def family(self) -> Literal["es", "rl"]: ...

    @property
    def summary(self) -> str: ...

    @property
    def Config(self) -> type: ...

    @property
    def supports_replicated(self) -> bool: ...

    @property
    def zoo_hyperparams(self) -> str | None: ...

    def section_in_defaults(self) -> str: ...

    def describe_population(self, params: dict[str, Any]) -> str | None: ...

    def describe_update(self, params: dict[str, Any]) -> str | None: ...

    def noise_spec_for(self, context: RunContext, config: Any) -> NoiseSpec | None: ...

    def check_config(self, config: dict[str, Any]) -> None: ...

    def __call__(
        self, context: RunContext, config: Any, evaluator: Evaluator | None = None
    ) -> Algorithm: ...
