"""The run knobs: one declared table from which everything that names a knob is generated.

Each :class:`Knob` says its config key, type, built-in default, one-line doc,
which algorithm families it applies to, and how a user sets it (``harness run``
flags, ``--set KEY=VALUE``, a sweep grid axis). From :data:`KNOBS` come the
flags of ``harness run`` (and the knob flags of ``check-repro`` and ``resume``),
Sacred's config scope (``harness.experiment``), the ``--set`` help and its
"did you mean" suggestions, the grid keys of a sweep file, and the completion
in :func:`harness.config.build_run_config`. ``tests/test_schema.py`` fails when
the argparse flags, the Sacred config or this table disagree.

An algorithm's own hyperparameters are not listed here: they are the fields of
its config dataclass (``--set population=30``), documented where they are used.

Add a run knob: one ``Knob(...)`` line below (section ``run``: its per-env value
may come from the ``run:`` sections of ``experiments/defaults.yaml``); the runner
reads it from the completed config.
"""

from __future__ import annotations

import argparse
import decimal
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from evaluation.registry import BACKENDS

Family = Literal["es", "rl"]
Section = Literal["identity", "budget", "run", "policy", "record"]

ES: frozenset[str] = frozenset({"es"})
RL: frozenset[str] = frozenset({"rl"})
ALL: frozenset[str] = frozenset({"es", "rl"})
#: The largest run seed: Sacred seeds numpy's legacy global generator with it (32 bits).
SEED_MAX = 2**32 - 1
#: Largest budgets accepted. Far beyond any run this harness can make (10^12 timesteps is
#: a year at 30,000 steps a second), they exist so that a typo such as ``--timesteps 1e30``
#: is refused with the limit named, instead of starting a run that cannot end, overflowing
#: int64 columns of its records or printing absurd estimates.
MAX_TIMESTEPS = 10**12
MAX_GENERATIONS = 10**9
#: Seconds, for ``time_limit`` and ``cpu_limit``: about 32 years.
MAX_BUDGET_SECONDS = 1e9


@dataclass(frozen=True)
class Knob:
    """One knob of a run's config."""

    #: config key; policy knobs are ``policy.NAME``
    name: str
    #: int, float, bool, str or list
    type: type
    #: built-in default (None: unset, or for per-env knobs "from experiments/defaults.yaml")
    default: Any
    #: one line, shown by --help, --set help and Sacred's print_config
    doc: str
    section: Section = "run"
    #: algorithm families whose runs use it; elsewhere a user-given value is refused
    families: frozenset[str] = ALL
    #: ``harness run`` flags, the first the main spelling (the others are aliases)
    flags: tuple[str, ...] = ()
    #: accepted by ``--set KEY=VALUE`` (and a sweep file's ``set`` list)
    settable: bool = False
    #: an axis of a sweep file's ``grid``
    grid: bool = False
    #: smallest value allowed (None: no bound); time_limit's 0 is exclusive, see ``positive``
    least: float | None = None
    #: the value must be > least instead of >= least
    positive: bool = False
    #: largest value allowed (None: no bound)
    most: float | None = None
    #: allowed values of a str knob (empty: any)
    choices: tuple[str, ...] = ()
    #: None is a valid value (not only "take the default")
    nullable: bool = False
    #: workers only: "auto" is this machine's CPU count
    allow_auto: bool = False
    #: the default depends on the env (experiments/defaults.yaml); help says so
    per_env: bool = False
    #: argparse metavar of the flag (default: the key in capitals)
    metavar: str | None = None
    #: runs recorded before the knob existed behaved as its default does, so their
    #: rebuilt commands need no warning (a knob that names what the code always did)
    default_is_the_old_behaviour: bool = False

    @property
    def key(self) -> str:
        """The last part of the name (``policy.kind`` -> ``kind``)."""
        return self.name.rpartition(".")[2]

    @property
    def flag(self) -> str | None:
        """The main flag spelling, or None."""
        return self.flags[0] if self.flags else None

    @property
    def dest(self) -> str:
        """The argparse destination of the knob's flags."""
        return self.name.replace(".", "_")

    def below_least(self, value: Any) -> bool:
        """Whether ``value`` is under the knob's lower bound."""
        if self.least is None:
            return False
        return bool(value <= self.least if self.positive else value < self.least)

    def applies_to(self, family: str) -> bool:
        """Whether runs of an algorithm of ``family`` use this knob."""
        return family in self.families

    def spelling(self) -> str:
        """How a user names the knob: its flag, else ``NAME`` (a --set key)."""
        return self.flag or self.name

    def not_applicable(self, algo: str, users: str) -> str:
        """The one-line refusal of a user-given value of this knob for ``algo``.

        ``users``: the algorithms that do use it, e.g. ``optimes, cma, nevergrad-es``.
        """
        shown = self.name
        if self.flag:
            same = self.flag.lstrip("-").replace("-", "_") == self.name
            shown = self.flag if same else f"{self.flag} ({self.name})"
        return f"{shown} does not apply to {algo}; only {users} use it"


KNOBS: tuple[Knob, ...] = (
    # -- what runs ----------------------------------------------------------------------
    Knob(
        "algo",
        str,
        "optimes",
        "algorithm name (see `harness list`)",
        section="identity",
        flags=("--algo",),
        metavar="A",
        grid=True,
    ),
    Knob(
        "env",
        str,
        "LunarLanderContinuous",
        "env short name or any gymnasium id",
        section="identity",
        flags=("--env",),
        metavar="E",
        grid=True,
    ),
    Knob(
        "seed",
        int,
        0,
        "run seed: every random choice derives from it",
        section="identity",
        flags=("--seed",),
        metavar="S",
        grid=True,
        least=0,
        most=SEED_MAX,
    ),
    Knob(
        "episodes",
        int,
        1,
        "episodes per fitness evaluation: a candidate's fitness is the mean return of K "
        "episodes (not a training length)",
        section="identity",
        families=ES,
        flags=("--episodes-per-fitness", "--episodes"),
        metavar="K",
        grid=True,
        least=1,
    ),
    Knob(
        "workers",
        int,
        1,
        "parallel workers: ES evaluation processes or Ray actors; PPO/A2C: their n_envs envs "
        "step in subprocesses when > 1. 'auto': this machine's CPUs (recorded as the number). "
        "1 by default everywhere, so a config is the same on every machine; no result "
        "depends on it",
        section="identity",
        flags=("--workers",),
        metavar="W",
        grid=True,
        least=1,
        allow_auto=True,
    ),
    Knob(
        "backend",
        str,
        "process",
        # Names and one-line docs from the backend table (evaluation.registry).
        "where ES candidates are evaluated: "
        + "; ".join(f"{b.name}: {b.doc}" for b in BACKENDS.values()),
        section="identity",
        families=ES,
        flags=("--backend",),
        metavar="{" + ",".join(BACKENDS) + "}",
    ),
    Knob(
        "imports",
        list,
        [],
        "modules of your own to import first, where envs or algorithms register (repeat the "
        "flag for more); found on the Python path, not in the current directory (set "
        "PYTHONPATH, or install your package); recorded in the run, whose sweep cells and "
        "workers import them too, while resume, report and enjoy of a run import a recorded "
        "module only when its signed checkpoint vouches for it or --import names it again",
        section="identity",
        flags=("--import",),
        metavar="MODULE",
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "defaults",
        str,
        None,
        "a YAML file of per-env defaults of your own, in the format of "
        "experiments/defaults.yaml: its entries take precedence over the repository's for "
        "the envs it names (recorded as an absolute path, with its sha256)",
        section="identity",
        flags=("--defaults",),
        metavar="FILE",
        nullable=True,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "defaults_sha256",
        str,
        None,
        "sha256 of the defaults file's content when the config was built (set with "
        "--defaults; a rebuild whose file changed since keeps the recorded values)",
        # provenance of the values, like `tuned`: no flag, no --set
        section="identity",
        nullable=True,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "ray_address",
        str,
        None,
        "Ray cluster address for --backend ray (HOST:PORT, ray://HOST:PORT or auto)",
        section="identity",
        families=ES,
        flags=("--ray-address",),
        metavar="ADDR",
        nullable=True,
    ),
    # -- budget: whichever comes first ----------------------------------------------------
    Knob(
        "timesteps",
        int,
        None,
        "budget: training env steps",
        section="budget",
        flags=("--timesteps", "-n"),
        metavar="T",
        settable=True,
        least=1,
        most=MAX_TIMESTEPS,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "generations",
        int,
        None,
        "budget: generations (PPO/A2C: rollout/update chunks)",
        section="budget",
        flags=("--generations",),
        metavar="G",
        settable=True,
        least=1,
        most=MAX_GENERATIONS,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "time_limit",
        float,
        None,
        "budget: training wall-clock seconds",
        section="budget",
        flags=("--time-limit",),
        metavar="SEC",
        settable=True,
        least=0,
        positive=True,
        most=MAX_BUDGET_SECONDS,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "cpu_limit",
        float,
        None,
        "budget: training CPU-seconds of the run's processes (head and workers), summed "
        "over resumes; the equal-compute budget",
        section="budget",
        flags=("--cpu-limit",),
        metavar="SEC",
        settable=True,
        least=0,
        positive=True,
        most=MAX_BUDGET_SECONDS,
        nullable=True,
        per_env=True,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "paired_with",
        str,
        None,
        "budget: the partner's algorithm in an equal-compute pair run side by side "
        "(harness.pairing); without a limit of its own, the run stops at the CPU-seconds its "
        "partner used. Set by a sweep's or the benchmark's pairs, not by hand",
        section="budget",
        settable=True,
        nullable=True,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "target_return",
        float,
        None,
        "stop once an evaluation's mean return reaches this (confirmed on fresh episodes)",
        section="budget",
        flags=("--target-return",),
        metavar="R",
        settable=True,
        nullable=True,
        per_env=True,
    ),
    # -- run: per-env values in the run sections of experiments/defaults.yaml -------------
    Knob(
        "eval_every_timesteps",
        int,
        50000,
        "evaluate the current policy every this many training steps",
        settable=True,
        least=1,
        per_env=True,
    ),
    Knob(
        "eval_every_cpu_seconds",
        float,
        None,
        "evaluate every this many CPU-seconds of the run's processes instead of by "
        "timesteps (none: eval_every_timesteps); harness tune sets cpu_limit/evaluations",
        settable=True,
        least=0,
        positive=True,
        most=MAX_BUDGET_SECONDS,
        nullable=True,
        per_env=True,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "eval_episodes",
        int,
        10,
        "fresh seeded episodes per evaluation",
        settable=True,
        least=1,
        per_env=True,
    ),
    Knob(
        "endpoint_episodes",
        int,
        0,
        "episodes of the final policy's endpoint evaluation after training, on episode "
        "seeds fixed for every run and algorithm (0: none); outside the budget and the "
        "run's CPU-seconds",
        settable=True,
        least=0,
        most=100_000,
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "checkpoint_every",
        int,
        10,
        "write a checkpoint every this many steps (generations/updates)",
        settable=True,
        least=0,
        per_env=True,
    ),
    Knob(
        "checkpoint_every_seconds",
        float,
        300.0,
        "also write one after a step when the last is this many seconds old (0: steps only)",
        settable=True,
        least=0,
        per_env=True,
        # When a checkpoint is written never changes a result, so older runs need no warning.
        default_is_the_old_behaviour=True,
    ),
    Knob(
        "max_episode_steps",
        int,
        None,
        "episode step cap for training (null: the env's own limit)",
        settable=True,
        least=1,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "fail_on_env_error",
        bool,
        True,
        "stop on an env exception or NaN; false scores that candidate as worst",
        families=ES,
        settable=True,
        per_env=True,
    ),
    Knob(
        "population_log_every",
        int,
        1,
        "log each generation's fitness and candidates, and the centre every N generations "
        "(0: no log; feeds the report's UMAP map)",
        families=ES,
        settable=True,
        least=0,
        per_env=True,
    ),
    Knob(
        "sync",
        str,
        "broadcast",
        "broadcast (the centre is sent each generation) or seeds (replicated optimizer, "
        "the paper's Algorithm 2; optimes only)",
        families=ES,
        settable=True,
        choices=("broadcast", "seeds"),
        per_env=True,
    ),
    Knob(
        "confirm_episodes",
        int,
        100,
        "fresh episodes that must also clear a target return once an evaluation crosses it "
        "(0: stop at the first crossing; null without a target)",
        settable=True,
        least=0,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "population_per_worker",
        int,
        None,
        "ES population = this x workers, for throughput (null: the fixed population, "
        "comparable across worker counts)",
        families=ES,
        settable=True,
        least=1,
        nullable=True,
        per_env=True,
    ),
    Knob(
        "reward_transform",
        str,
        "none",
        "training reward: none, shift:C or locomotion:alive=A,costs=C,fall=F[,limits=L]"
        "[,anneal=G0:G1 generations | ,anneal_timesteps=T0:T1] (envs/reward_shaping.py; ES "
        "fitness and RL rewards use it, evaluation always uses the env's reward)",
        families=ALL,
        settable=True,
        per_env=True,
    ),
    # -- policy ---------------------------------------------------------------------------
    Knob(
        "policy.kind",
        str,
        "mlp",
        "linear, mlp or lstm (the ES's policy; an RL algorithm's network is its own net_arch)",
        section="policy",
        families=ES,
        settable=True,
        per_env=True,
    ),
    Knob(
        "policy.hidden_sizes",
        list,
        [64, 64],
        "hidden layer sizes (LSTM: one entry, the number of cells)",
        section="policy",
        families=ES,
        settable=True,
        per_env=True,
    ),
    Knob(
        "policy.activation",
        str,
        "tanh",
        "tanh or relu",
        section="policy",
        families=ES,
        settable=True,
        per_env=True,
    ),
    Knob(
        "policy.discretize",
        int,
        0,
        "0 for continuous actions, N>1 rounds each action to N levels",
        section="policy",
        families=ES,
        settable=True,
        least=0,
        per_env=True,
    ),
    Knob(
        "policy.init",
        str,
        "normc",
        "initial parameters: normc (OpenAI-ES: small output layer, zero biases) or torch "
        "(PyTorch nn.Linear's uniform +-1/sqrt(fan_in), GoodAI's OptimES)",
        section="policy",
        families=ES,
        settable=True,
        choices=("normc", "torch"),
        per_env=True,
        default_is_the_old_behaviour=True,
    ),
    # -- bookkeeping --------------------------------------------------------------------
    Knob(
        "sweep",
        str,
        None,
        "name of the sweep that launched this run (set by `harness sweep`)",
        section="record",
        nullable=True,
    ),
    Knob(
        "tuned",
        str,
        None,
        "the tuning study whose best trial's settings this run uses, with its budget and "
        "seeds; set by a sweep file's `tuned:`, not by --set (docs/tuning.md)",
        # what runs: the settings' provenance (completed to null with the identity knobs;
        # no flag, no --set: only a sweep's `tuned:` sets it)
        section="identity",
        nullable=True,
        default_is_the_old_behaviour=True,
    ),
)

BY_NAME: dict[str, Knob] = {knob.name: knob for knob in KNOBS}
#: Config keys of the budget, in ``Budget``'s field order.
BUDGET_KEYS: tuple[str, ...] = tuple(k.name for k in KNOBS if k.section == "budget")
#: Axes of a sweep file's grid.
GRID_KEYS: tuple[str, ...] = tuple(k.name for k in KNOBS if k.grid)

#: Other names users know for a knob (rl-baselines3-zoo, pycma, SB3, papers) -> what to
#: suggest. Each target is an algorithm hyperparameter or a knob; only those that exist for
#: the algorithm at hand are suggested.
ALIASES: dict[str, tuple[str, ...]] = {
    "popsize": ("population",),
    "pop_size": ("population",),
    "population_size": ("population",),
    "npop": ("population",),
    "lambda": ("population",),
    "lr": ("learning_rate",),
    "step_size": ("learning_rate",),
    "stepsize": ("learning_rate",),
    "alpha": ("learning_rate",),
    "sigma0": ("sigma",),
    "sigma": ("sigma0",),
    "noise_std": ("sigma", "sigma0"),
    "std": ("sigma", "sigma0"),
    "n_envs": ("workers",),
    "num_envs": ("n_envs", "workers"),
    "envs": ("n_envs", "workers"),
    "num_workers": ("workers",),
    "n_workers": ("workers",),
    "n_timesteps": ("timesteps",),
    "total_timesteps": ("timesteps",),
    "steps": ("timesteps",),
    "iterations": ("generations",),
    "n_generations": ("generations",),
    "max_generations": ("generations",),
    "episodes_per_fitness": ("episodes",),
    "k": ("episodes",),
    "eval_freq": ("eval_every_timesteps",),
    "n_eval_episodes": ("eval_episodes",),
    "save_freq": ("checkpoint_every",),
    "net_arch": ("policy.hidden_sizes",),
    "hidden": ("policy.hidden_sizes", "net_arch"),
    "hidden_size": ("policy.hidden_sizes", "net_arch"),
    "layers": ("policy.hidden_sizes", "net_arch"),
    "activation_fn": ("policy.activation", "activation"),
    "max_steps": ("max_episode_steps",),
    "episode_length": ("max_episode_steps",),
    "horizon": ("max_episode_steps",),
    "weight_decay": ("l2_coeff",),
    "l2": ("l2_coeff",),
    "optimiser": ("optimizer",),
    "time": ("time_limit",),
    "cpu_time": ("cpu_limit",),
    "cpu_seconds": ("cpu_limit",),
    "target": ("target_return",),
}


def knobs(section: Section | None = None) -> Iterable[Knob]:
    """The knobs, optionally of one section, in declaration order."""
    return (k for k in KNOBS if section is None or k.section == section)


def find(key: str) -> Knob | None:
    """The knob a config key or a ``--set`` key names (``kind`` finds ``policy.kind``)."""
    if key in BY_NAME:
        return BY_NAME[key]
    policy = BY_NAME.get(f"policy.{key}")
    return policy


def sacred_defaults() -> dict[str, Any]:
    """The config Sacred starts from: built-in defaults of the knobs every env shares.

    Per-env knobs start at None: the config hook fills them from
    ``experiments/defaults.yaml`` for the chosen env (see ``harness.config``).
    """
    config: dict[str, Any] = {"policy": {}, "params": {}}
    for knob in KNOBS:
        value = None if knob.per_env else knob.default
        if knob.section == "policy":
            config["policy"][knob.key] = value
        else:
            config[knob.name] = value
    return config


def sacred_docs() -> dict[str, str]:
    """Dotted config key -> one-line doc, for Sacred's ``print_config``."""
    docs = {knob.name: knob.doc for knob in KNOBS}
    docs["params"] = "algorithm hyperparameters (`harness run --help`); per env in defaults.yaml"
    docs["policy"] = "policy network; per env in experiments/defaults.yaml"
    return docs


# -- command-line flags -----------------------------------------------------------------------


def flag_default_text(knob: Knob) -> str:
    """The default as ``--help`` states it."""
    if knob.section == "budget":
        return "per env, from experiments/defaults.yaml" if knob.name == "timesteps" else "none"
    if knob.per_env:
        return "per env, from experiments/defaults.yaml; see --print-config"
    if knob.name == "ray_address":
        return "$RAY_ADDRESS, else a local instance"
    if knob.default is None or knob.default == []:
        return "none"
    return str(knob.default)


def flag_help(knob: Knob, text: str | None = None, default: bool = True) -> str:
    """``--help`` text of a knob's flag: doc, the families it applies to, its default."""
    only = "" if knob.families == ALL else " [ES family only]"
    shown = f"{text or knob.doc}{only}"
    if default:
        shown += f" (default: {flag_default_text(knob)})"
    return shown.replace("%", "%%")  # argparse formats help with %


def integral(value: Any) -> int | None:
    """``value`` as an int when it is one or a float with no fraction (``1e5``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_number(text: str, integer: bool = False) -> int | float | None:
    """A number as people write it (``300000``, ``3e5``, ``3e-4``), or None if it is not one.

    ``integer``: only integral values (``1e5`` is 100000, ``1.5e0`` is None); read exactly,
    through :class:`decimal.Decimal`, so large integers keep every digit.
    """
    try:
        number = decimal.Decimal(text.strip().replace("_", ""))
    except decimal.InvalidOperation:
        return None
    if not integer:
        return float(number)
    if not number.is_finite() or number != number.to_integral_value():
        return None
    if number.adjusted() >= (sys.get_int_max_str_digits() or 4300):
        # ``1e999999999`` is integral, but building its billion digits takes minutes; int()
        # refuses a decimal string that long too (Python's own guard, 4300 digits).
        return None
    return int(number)


def show_limit(limit: float) -> str:
    """A bound for messages: ``1,000,000,000,000`` rather than ``1e+12``."""
    return f"{int(limit):,}" if float(limit).is_integer() else f"{limit:g}"


def integer_type(noun: str) -> Any:
    """An argparse ``type`` for a flag that takes an integer as people write it (``1e3``)."""

    def parse(text: str) -> int:
        value = parse_number(text, integer=True)
        if value is None:
            raise argparse.ArgumentTypeError(f"{noun} must be an integer, got {text!r}")
        return int(value)

    parse.__name__ = noun  # argparse names the type in some messages
    return parse


def flag_type(knob: Knob) -> Any:
    """An argparse ``type`` for a knob: parses, and checks the bound, naming the knob."""
    noun = knob.name.replace("_", " ")
    kind = knob.type

    def parse(text: str) -> Any:
        if knob.allow_auto and text == "auto":
            return text
        value = parse_number(text, integer=kind is int)
        if value is None:
            what = "an integer" if kind is int else "a number"
            extra = " or 'auto'" if knob.allow_auto else ""
            message = f"{noun} must be {what}{extra}, got {text!r}"
            raise argparse.ArgumentTypeError(message)
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{noun} must be a finite number, got {text!r}")
        if knob.below_least(value):
            least = "positive" if knob.positive or knob.least == 1 else f">= {knob.least:g}"
            raise argparse.ArgumentTypeError(f"{noun} must be {least}, got {value}")
        if knob.most is not None and value > knob.most:
            raise argparse.ArgumentTypeError(
                f"{noun} must be at most {show_limit(knob.most)}, got {text.strip()}"
            )
        return value

    parse.__name__ = noun  # argparse names the type in some messages
    return parse if kind in (int, float) else kind


GROUP_TITLES = {
    "identity": "what runs",
    "budget": "budget (whichever comes first; with none given, the env's budget from "
    "experiments/defaults.yaml applies)",
}


def add_set_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``overrides``: the one declaration every command
    that takes knob overrides uses."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def add_flags(
    parser: argparse.ArgumentParser,
    names: Iterable[str] | None = None,
    helps: dict[str, str] | None = None,
    titles: dict[str, str] | None = None,
    show_defaults: bool = True,
) -> None:
    """Add the flags of the named knobs (default: every knob that has flags), grouped.

    Every flag's default is None, so the caller can tell what the user gave; the
    default that applies is stated in the help (unless ``show_defaults`` is off:
    a command whose defaults come from elsewhere, such as a stored run).
    """
    chosen = [BY_NAME[n] for n in names] if names is not None else [k for k in KNOBS if k.flags]
    groups: dict[str, Any] = {}
    for knob in chosen:
        title = {**GROUP_TITLES, **(titles or {})}.get(knob.section, "knobs")
        if title not in groups:
            groups[title] = parser.add_argument_group(title)
        # a list knob's flag is repeated, one value each (--import a --import b)
        how: dict[str, Any] = (
            {"action": "append", "type": str} if knob.type is list else {"type": flag_type(knob)}
        )
        groups[title].add_argument(
            *knob.flags,
            dest=knob.dest,
            default=None,
            metavar=knob.metavar or knob.key.upper(),
            help=flag_help(knob, (helps or {}).get(knob.name), show_defaults),
            **how,
        )


def given_by_flags(args: argparse.Namespace, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The knobs the user gave as flags: name -> value (None: not given)."""
    chosen = [BY_NAME[n] for n in names] if names is not None else [k for k in KNOBS if k.flags]
    return {k.name: getattr(args, k.dest, None) for k in chosen}
