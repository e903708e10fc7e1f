"""How fair the benchmark's comparison is, measured from what its runs recorded.

The families differ in more than their update rule: networks, reward transforms,
observation normalisation, tuning, compute. This module reads those differences from
each archived run (its ``config.json``, ``policy_spec.json``, ``summary.json`` and
metrics), never from what a settings file says a run should have used, so a defect that
a later fix removes from the settings stays visible on the runs that had it:

* **endpoints** (:func:`mean_of_last`): a run's score at a point is the mean of its last
  :data:`LAST_EVALUATIONS` evaluations up to that point (the last one interpolated at the
  point where the run went past it), not one noisy evaluation;
* **family-best** (:func:`family_best`): each family is represented on a task by the
  algorithm with the best mean score at equal timesteps (on PendulumPO the RL family's
  is RecurrentPPO, the only RL algorithm there with memory);
* **sanity gates** (:class:`Gate`): every RL cell beside its published anchor
  (``experiments/anchors.yaml``, entries with ``algo``), flagged when it scores below half
  the way from the random policy to the anchor, and any cell with fewer runs than seeds;
* **known defects** (:class:`Defect`): RL runs whose network is the ES policy's, ES runs
  without observation normalisation or with statistics from a fraction of rollouts on
  MuJoCo, ES runs of under :data:`FEW_GENERATIONS` generations, settings that differ from
  the published ones a cell is compared with (``experiments/provenance.yaml``), and
  reward transforms used in training;
* **time to a share of the best RL's score** (:func:`time_to_share`): Salimans et al.
  2017's Table 1 in form;
* **equal compute at the RL family's full budget** (:func:`equal_compute_point`);
* **asymmetries** (:func:`asymmetry_rows`): per cell its parameter count, reward
  transform, observation normalisation and tuning provenance.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from algorithms.registry import family_of
from harness import rundir
from harness.config import EXPERIMENTS_DIR, ConfigError, read_yaml

if TYPE_CHECKING:
    from harness.benchmark.spec import Benchmark, Task
    from harness.records import RunTable
    from harness.report.anchors import Anchor

# -- scores --------------------------------------------------------------------------------------


@dataclass
class TaskScores:
    """Per-run scores of one task and the points they were taken at."""

    task: Task
    runs: pd.DataFrame  # one row per run: algo, seed, family, score_<axis>, to_threshold_<axis>
    at: dict[str, float]  # axis -> the common value every run reached
    random_score: float
    #: the archive's completed runs as read (equal-compute runs included, which ``runs``
    #: leaves out): what :mod:`harness.benchmark.fairness` reads the runs' records from
    table: Any = None
    #: whether ``score_final`` is every run's endpoint evaluation (:func:`endpoint_scores`)
    endpoints: bool = False

    def normalise(self, scores: np.ndarray) -> np.ndarray:
        span = self.task.reference_score - self.random_score
        return (scores - self.random_score) / span


#: Evaluations averaged into a run's score at a point.
LAST_EVALUATIONS = 3
#: The sanity gate: a cell below this share of the way from the random policy's score to
#: its published anchor is flagged.
ANCHOR_SHARE = 0.5
#: An ES cell with fewer generations than this at its budget is flagged.
FEW_GENERATIONS = 100
#: Shares of the best RL's learning progress in the Salimans et al. table.
SHARES = (0.25, 0.5, 0.75)
PROVENANCE_FILE = EXPERIMENTS_DIR / "provenance.yaml"
PROVENANCE_FIELDS = ("by", "task", "seeds", "source")
#: What ``scripts/zoo_parity.py report`` measured: rl-baselines3-zoo's own trainer at a
#: cell's settings and seeds, beside the cell.
PARITY_FILE = EXPERIMENTS_DIR.parent / "reports" / "zoo_parity" / "parity.json"


# -- endpoints -----------------------------------------------------------------------------------


def evaluations(steps: pd.DataFrame) -> pd.DataFrame:
    """Every evaluation of every run: ``run``, ``timesteps``, ``cpu_seconds`` (the
    process tree's, carried forward from the last sample) and ``eval_return_mean``."""
    from harness.report import data as d

    steps = d.carry_cpu_seconds(steps)
    columns = ["run", "timesteps", "cpu_seconds", "eval_return_mean"]
    if "eval_return_mean" not in steps:
        return pd.DataFrame(columns=columns)
    rows = steps[steps["eval_return_mean"].notna() & steps["timesteps"].notna()]
    frame = rows.reindex(columns=columns)
    return frame.sort_values(["run", "timesteps"], kind="stable").reset_index(drop=True)


def mean_of_last(
    frame: pd.DataFrame, x: str, at: float = math.inf, last: int = LAST_EVALUATIONS
) -> float:
    """The mean of one run's last ``last`` evaluations up to ``at`` on axis ``x``.

    Where the run went past ``at``, its return interpolated at ``at`` is the last of them
    (as a run stopped there would have been evaluated); NaN where the run did not reach
    ``at`` or has no evaluation before it. ``at`` infinite: the run's last evaluations.
    """
    known = frame[np.isfinite(frame[x].to_numpy(float))]
    xs = known[x].to_numpy(float)
    ys = known["eval_return_mean"].to_numpy(float)
    if not len(xs):
        return math.nan
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    inside = xs <= at
    if not inside.any():
        return math.nan
    values = list(ys[inside])
    if math.isfinite(at):
        if xs[-1] < at:
            return math.nan
        if xs[inside][-1] < at:
            values.append(float(np.interp(at, xs, ys)))
    return float(np.mean(values[-last:]))


def robust_scores(scores: TaskScores) -> None:
    """Set ``scores.runs``' endpoint scores to :func:`mean_of_last`: ``score_timesteps``
    (up to the task's common timesteps) and ``score_final`` (each run's own budget).

    ``score_cpu_seconds`` keeps the single return interpolated at the common CPU-seconds:
    there RL is early in its training, where a mean over earlier evaluations would reach
    back to its start. The single-evaluation values stay as ``*_point`` columns.
    """
    if scores.table is None:
        return
    evals = evaluations(scores.table.steps)
    by_run = {run: frame for run, frame in evals.groupby("run", sort=False)}
    empty = evals.iloc[:0]
    runs = scores.runs
    runs["score_timesteps_point"] = runs["score_timesteps"]
    runs["score_final_point"] = runs["score_final"]
    at = scores.at.get("timesteps", math.nan)
    runs["score_timesteps"] = [
        mean_of_last(by_run.get(run, empty), "timesteps", at) if math.isfinite(at) else math.nan
        for run in runs["run"]
    ]
    runs["score_final"] = [mean_of_last(by_run.get(run, empty), "timesteps") for run in runs["run"]]
    ends = endpoint_scores(scores.table.steps)
    if len(runs) and all(str(run) in ends for run in runs["run"]):
        runs["score_final"] = [ends[str(run)] for run in runs["run"]]
        scores.endpoints = True


def endpoint_scores(steps: pd.DataFrame) -> dict[str, float]:
    """Each run's endpoint: its final policy's mean return on the episodes every run shares
    (``endpoint_episodes``, :func:`algorithms.es_common.endpoint_seeds`), where it has one.
    A task's final scores are these only where every run of the task has one: mixed with
    means of last evaluations they would not be one measure."""
    if "endpoint_return_mean" not in steps:
        return {}
    found = steps.dropna(subset=["endpoint_return_mean"])
    return {
        str(r): float(v) for r, v in zip(found["run"], found["endpoint_return_mean"], strict=True)
    }


def equal_compute_mask(runs: pd.DataFrame) -> pd.Series:
    """Which runs of a run table's ``runs`` frame are the benchmark's equal-compute cells
    (:class:`harness.benchmark.spec.EqualCompute`): trained to a CPU limit (the frame names
    the config's ``cpu_limit`` ``budget_cpu_limit``), or one side of a pair (``paired_with``,
    ``budget_paired_with``)."""
    limited = pd.Series(False, index=runs.index)
    if "budget_cpu_limit" in runs:
        limited |= pd.to_numeric(runs["budget_cpu_limit"], errors="coerce").notna()
    if "budget_paired_with" in runs:
        limited |= runs["budget_paired_with"].notna()
    return limited


# -- what each run recorded ----------------------------------------------------------------------


def _json(record: Any, name: str) -> dict[str, Any]:
    path = record.artifact_path(name) if record is not None else None
    if path is None:
        return {}
    try:
        data = rundir.read_json(path)  # bounded: an archive may be anyone's
    except rundir.UnreadableRun:
        return {}
    return data if isinstance(data, dict) else {}


def es_hidden_sizes(policy: Mapping[str, Any]) -> list[int]:
    """The hidden sizes of a run's ES policy section (``[]`` for a linear policy)."""
    if str(policy.get("kind", "mlp")) == "linear":
        return []
    return [int(size) for size in policy.get("hidden_sizes") or []]


def declared_net(algo: str) -> list[int] | None:
    """The hidden sizes an RL algorithm's config class declares as its default (SB3's own
    for the algorithm), None where it declares none."""
    from algorithms.registry import UnknownAlgorithmError, get_algorithm

    try:
        config = get_algorithm(algo).Config
    except UnknownAlgorithmError:
        return None
    for item in dataclasses.fields(config):
        if item.name != "net_arch":
            continue
        if item.default_factory is not dataclasses.MISSING:
            value = item.default_factory()
        else:
            value = item.default
        if isinstance(value, (list, tuple)):
            return [int(size) for size in value]
    return None


def _rl_net(spec: Mapping[str, Any], summary: Mapping[str, Any]) -> list[int] | None:
    net = spec.get("net_arch")
    if isinstance(net, dict) and isinstance(net.get("pi"), list):
        return [int(size) for size in net["pi"]]
    if isinstance(net, list) and all(isinstance(size, int) for size in net):
        return [int(size) for size in net]
    text = summary.get("sb3_policy")
    if isinstance(text, str) and text.startswith("{'pi': ["):
        inner = text[len("{'pi': [") : text.find("]")]
        return [int(size) for size in inner.split(",") if size.strip()]
    return None


def _params_of(algo_family: str, spec: Mapping[str, Any], summary: Mapping[str, Any]) -> float:
    if algo_family != "es":
        for value in (spec.get("num_params"), summary.get("sb3_num_params")):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        return math.nan
    try:
        from envs.policies import PolicySpec

        return float(PolicySpec.from_dict(spec).num_params)
    except (ImportError, TypeError, ValueError, KeyError):
        return math.nan


def run_facts(table: RunTable) -> pd.DataFrame:
    """One row per run (index ``run``): what it recorded about how it was trained.

    Columns: ``algo``, ``seed``, ``family``, ``params`` (its algorithm's settings),
    ``n_params`` (RL: actor and critic, SB3's count), ``es_net`` (hidden sizes of the ES
    policy section), ``rl_net`` (the actor's hidden sizes SB3 built; None for ES),
    ``rl_net_set`` (``net_arch`` the run's config gave, None for the default),
    ``reward_transform``, ``obs_norm`` (ES: bool, or None where the algorithm has no such
    setting), ``obs_fraction``, ``normalize`` (RL's VecNormalize), ``generations``,
    ``episodes``, ``episode_length``, ``timesteps`` (the budget), ``cpu_seconds``,
    ``cpu_limit`` and ``gym_id``.
    """
    steps = table.steps
    length = (
        steps.groupby("run")["episode_length_mean"].mean()
        if "episode_length_mean" in steps
        else pd.Series(dtype=float)
    )
    cpu = (
        steps.groupby("run")["cpu_seconds"].max()
        if "cpu_seconds" in steps
        else pd.Series(dtype=float)
    )
    generations = steps.groupby("run").size() if "run" in steps else pd.Series(dtype=float)
    rows = []
    for _, run in table.runs.iterrows():
        label = str(run["run"])
        record = table.records.get(label)
        config = dict(record.config) if record is not None else {}
        params = dict(config.get("params") or {})
        spec = _json(record, rundir.POLICY_SPEC)
        summary = _json(record, rundir.SUMMARY)
        algo = str(config.get("algo", run.get("algo")))
        family = family_of(algo) or "es"
        obs_norm = params.get("obs_norm") if family == "es" else None
        rows.append(
            {
                "run": label,
                "algo": algo,
                "seed": int(config.get("seed", run.get("seed", -1))),
                "family": family,
                "params": params,
                "n_params": _params_of(family, spec, summary),
                "es_net": es_hidden_sizes(config.get("policy") or {}),
                "es_kind": str((config.get("policy") or {}).get("kind", "")),
                "rl_net": _rl_net(spec, summary) if family != "es" else None,
                "rl_net_set": params.get("net_arch") if family != "es" else None,
                "reward_transform": str(config.get("reward_transform") or "none"),
                "obs_norm": bool(obs_norm) if obs_norm is not None else None,
                "obs_fraction": params.get("obs_fraction"),
                "normalize": bool(params.get("normalize")) if family != "es" else None,
                "population": params.get("population"),
                "generations": float(generations.get(label, math.nan)),
                "episodes": int(config.get("episodes") or 1),
                "episode_length": float(length.get(label, math.nan)),
                "timesteps": float(config.get("timesteps") or math.nan),
                "cpu_seconds": float(cpu.get(label, math.nan)),
                "cpu_limit": config.get("cpu_limit"),
                "paired_with": config.get("paired_with"),
                "machine": run.get("host_cpu"),
                "gym_id": run.get("gym_id") or config.get("env"),
            }
        )
    return pd.DataFrame(rows).set_index("run") if rows else pd.DataFrame()


def is_mujoco(gym_id: str) -> bool:
    """Whether gymnasium registers ``gym_id`` as a MuJoCo env (its entry point's module)."""
    import gymnasium

    try:
        entry = gymnasium.spec(gym_id).entry_point
    except gymnasium.error.Error:
        return False
    return ".mujoco." in str(entry)


# -- family-best and the gates -------------------------------------------------------------------


def family_best(scores: TaskScores, axis: str = "timesteps") -> dict[str, str]:
    """Per family (``es``, ``rl``): the algorithm whose runs have the best mean score on
    ``axis`` (:func:`robust_scores`' endpoint at equal timesteps by default)."""
    best: dict[str, tuple[float, str]] = {}
    for algo, frame in scores.runs.groupby("algo", sort=True):
        values = frame[f"score_{axis}"].to_numpy(float)
        values = values[np.isfinite(values)]
        if not len(values):
            continue
        family = "es" if (family_of(algo) or "es") == "es" else "rl"
        mean = float(values.mean())
        if family not in best or mean > best[family][0]:
            best[family] = (mean, str(algo))
    return {family: name for family, (_, name) in best.items()}


def number(value: float) -> str:
    """A score in a sentence: thousands separated and whole from 100 on, else one decimal."""
    if not math.isfinite(value):
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def steps_text(value: float) -> str:
    """Timesteps in a sentence: 1M, 2.01M, 850k."""
    if not math.isfinite(value):
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    return f"{value / 1e3:.0f}k"


@dataclass(frozen=True)
class Gate:
    """A cell's sanity gate: its run count and final score against its published anchor."""

    env: str
    algo: str
    n: int
    planned: int
    score: float  # mean final score (:func:`mean_of_last` at the run's own budget)
    random: float
    anchor: Anchor | None = None
    parity: Parity | None = None

    @property
    def floor(self) -> float:
        """The score below which the cell is flagged: :data:`ANCHOR_SHARE` of the way from
        the random policy's score to the anchor (NaN without an anchor)."""
        if self.anchor is None or not math.isfinite(self.random):
            return math.nan
        return self.random + ANCHOR_SHARE * (self.anchor.value - self.random)

    @property
    def below_anchor(self) -> bool:
        return math.isfinite(self.floor) and self.score < self.floor

    @property
    def few_runs(self) -> bool:
        return self.n < self.planned

    @property
    def flagged(self) -> bool:
        return self.n > 0 and (self.below_anchor or self.few_runs)

    def anchor_text(self) -> str:
        """``264.5 against the zoo's 270.9 at 1M``, or ``-1,048 (no published anchor)``."""
        if self.anchor is None:
            return f"{number(self.score)} (no published anchor)"
        where = f" at {steps_text(self.anchor.timesteps)}" if self.anchor.timesteps else ""
        return f"{number(self.score)} against the zoo's {number(self.anchor.value)}{where}"

    def parity_text(self) -> str:
        """``; rl_zoo3's own train.py ...`` where the zoo's trainer ran this cell, else ''."""
        return f"; {self.parity.text()}" if self.parity else ""

    def text(self) -> str:
        """``ppo on Hopper-v5: n = 2, 505 against the zoo's 2,410 at 1M — below its
        anchor`` (what the page prints instead of ranking a flagged cell)."""
        parts = [f"n = {self.n}"] if self.few_runs else []
        parts.append(self.anchor_text())
        verdict = " — below its anchor" if self.below_anchor else ""
        return f"{self.algo} on {self.env}: {', '.join(parts)}{verdict}{self.parity_text()}"


@dataclass(frozen=True)
class Parity:
    """rl-baselines3-zoo's own ``train.py`` at a cell's settings and seeds, beside the cell's
    runs at those seeds (``scripts/zoo_parity.py``: the benchmark's final endpoint, each
    side's mean with its 95% bootstrap interval)."""

    algo: str
    env: str
    seeds: tuple[int, ...]  # the zoo's runs
    zoo: tuple[float, float, float]  # mean, low, high
    harness_seeds: tuple[int, ...]  # the cell's runs at the zoo's seeds
    harness: tuple[float, float, float] | None
    agree: bool | None

    def text(self) -> str:
        """``rl_zoo3's own train.py at these settings, seeds 100, 101, 102: 1,001 [998,
        1,004]; the harness there: 893 [666, 1,020], intervals overlap``."""

        def side(values: tuple[float, float, float]) -> str:
            mean, low, high = values
            bounds = f" [{number(low)}, {number(high)}]" if math.isfinite(low) else ""
            return number(mean) + bounds

        seeds = ("seeds " if len(self.seeds) > 1 else "seed ") + ", ".join(map(str, self.seeds))
        text = f"rl_zoo3's own train.py at these settings, {seeds}: {side(self.zoo)}"
        if self.harness is None:
            return text + "; the harness has no run at those seeds yet"
        verdict = {True: "intervals overlap", False: "**intervals apart**", None: "n < 3"}
        there = (
            "there"
            if self.harness_seeds == self.seeds
            else "on " + ", ".join(map(str, self.harness_seeds))
        )
        return f"{text}; the harness {there}: {side(self.harness)}, {verdict[self.agree]}"


def load_parity(path: Path = PARITY_FILE) -> dict[tuple[str, str], Parity]:
    """``(env, algo) -> Parity`` from ``scripts/zoo_parity.py``'s ``parity.json`` (none where
    the file is absent). Read with the bounded JSON reader: the file may be anyone's."""
    if not path.is_file():
        return {}
    try:
        entries = rundir.read_json(path)["entries"]
        found = {}
        for entry in entries:
            zoo, ours = entry["zoo"], entry["harness"]
            parity = Parity(
                str(entry["algo"]),
                str(entry["env"]),
                tuple(int(s) for s in zoo["seeds"]),
                (float(zoo["mean"]), float(zoo["low"]), float(zoo["high"])),
                tuple(int(s) for s in ours["seeds"]) if ours else (),
                (float(ours["mean"]), float(ours["low"]), float(ours["high"])) if ours else None,
                None if entry["agree"] is None else bool(entry["agree"]),
            )
            found[(parity.env, parity.algo)] = parity
    except (rundir.UnreadableRun, KeyError, TypeError, ValueError) as error:
        raise ProvenanceError(
            f"{path}: not a parity file of scripts/zoo_parity.py ({error})"
        ) from None
    return found


def task_gates(
    scores: TaskScores,
    anchors: Sequence[Anchor],
    planned: int,
    parity: Mapping[tuple[str, str], Parity] | None = None,
) -> dict[str, Gate]:
    """Every algorithm of the task with completed runs: its gate (RL cells against the
    published anchor of their algorithm and env, and against the zoo's own trainer where
    ``parity`` has it; every cell against ``planned`` runs)."""
    gym_ids = {str(g) for g in scores.runs.get("gym_id", pd.Series(dtype=object)).dropna()}
    gates = {}
    for algo, frame in scores.runs.groupby("algo", sort=True):
        finals = frame["score_final"].to_numpy(float)
        finals = finals[np.isfinite(finals)]
        family = family_of(algo) or "es"
        anchor = next(
            (
                a
                for a in anchors
                if family != "es"
                and a.algo == algo
                and a.kind == "published"
                and any(a.applies_to(scores.task.env, gym_id) for gym_id in gym_ids)
            ),
            None,
        )
        gates[str(algo)] = Gate(
            scores.task.env,
            str(algo),
            len(frame),
            planned,
            float(finals.mean()) if len(finals) else math.nan,
            scores.random_score,
            anchor,
            (parity or {}).get((scores.task.env, str(algo))),
        )
    return gates


# -- known defects -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Defect:
    """A known defect of a cell, found in what its runs recorded."""

    env: str
    algo: str
    kind: str  # es-network, obs-norm, obs-fraction, generations, settings, reward-transform
    short: str  # for a table cell
    text: str  # the whole finding, numbers included
    seeds: tuple[int, ...] = ()


def _net_words(sizes: Sequence[int]) -> str:
    """``linear``, ``16-unit``, ``64-64``: hidden sizes in words."""
    if not sizes:
        return "linear"
    return "-".join(str(s) for s in sizes) + ("-unit" if len(sizes) == 1 else "")


def _seeds_words(seeds: Sequence[int], of: int) -> str:
    return "" if len(seeds) == of else f" (seeds {', '.join(map(str, seeds))})"


def es_network_defects(env: str, facts: pd.DataFrame) -> list[Defect]:
    """RL runs whose network is the ES policy's: the actor's hidden sizes SB3 built equal
    the ES ``policy`` section's, and differ from what the run should have used (the
    ``net_arch`` its config set, else its algorithm's declared default, SB3's own)."""
    found = []
    for algo, frame in facts[facts["family"] != "es"].groupby("algo", sort=True):
        hits = []
        for row in frame.itertuples():
            if row.rl_net is None:
                continue
            expected = row.rl_net_set if row.rl_net_set is not None else declared_net(algo)
            if list(row.rl_net) == list(row.es_net) and (
                expected is None or list(row.rl_net) != list(expected)
            ):
                hits.append(row)
        if not hits:
            continue
        first = hits[0]
        expected = first.rl_net_set if first.rl_net_set is not None else declared_net(algo)
        should = (
            f"SB3's default {_net_words(expected)}"
            if expected is not None and first.rl_net_set is None
            else "its own network"
        )
        words = _net_words(first.rl_net)
        seeds = sorted(int(row.seed) for row in hits)
        found.append(
            Defect(
                env,
                str(algo),
                "es-network",
                f"ran the ES policy network ({words}); rerun pending",
                f"{algo} on {env} ran the ES policy network ({words} actor and critic, "
                f"{number(float(first.n_params))} parameters) instead of {should}: its "
                f"recorded SB3 net_arch equals the ES policy section "
                f"({first.es_kind} {list(first.es_net)}){_seeds_words(seeds, len(frame))}; "
                "rerun pending",
                tuple(seeds),
            )
        )
    return found


def obs_defects(env: str, facts: pd.DataFrame, mujoco: bool) -> list[Defect]:
    """On a MuJoCo task, ES runs without observation normalisation, and ES runs whose
    normalisation statistics come from a fraction of the rollouts (``obs_fraction`` < 1;
    ARS V2 uses every state visited, Mania et al. 2018)."""
    if not mujoco:
        return []
    found = []
    for algo, frame in facts[facts["family"] == "es"].groupby("algo", sort=True):
        norm = list(frame["obs_norm"])
        if not any(value is True for value in norm):
            setting = "no such setting" if all(v is None for v in norm) else "obs_norm false"
            found.append(
                Defect(
                    env,
                    str(algo),
                    "obs-norm",
                    "no observation normalisation",
                    f"{algo} on {env} trained on raw observations ({setting} in its recorded "
                    "config) where the ES that normalise them see unit-scale inputs",
                )
            )
            continue
        fractions = pd.to_numeric(frame["obs_fraction"], errors="coerce").dropna()
        if len(fractions) and float(fractions.max()) < 1.0:
            share = float(fractions.max())
            found.append(
                Defect(
                    env,
                    str(algo),
                    "obs-fraction",
                    f"observation statistics from {share:.0%} of rollouts",
                    f"{algo} on {env} updates its observation statistics from {share:.0%} of "
                    f"its rollouts (obs_fraction {share:g}; ARS V2 uses every state visited)",
                )
            )
    return found


def generation_defects(env: str, facts: pd.DataFrame) -> list[Defect]:
    """ES cells with fewer than :data:`FEW_GENERATIONS` generations at their budget: the
    count each run logged, with budget / (population x episodes x mean episode length)."""
    found = []
    for algo, frame in facts[facts["family"] == "es"].groupby("algo", sort=True):
        frame = frame[frame["cpu_limit"].isna()] if "cpu_limit" in frame else frame
        gens = float(frame["generations"].median()) if len(frame) else math.nan
        if not math.isfinite(gens) or gens >= FEW_GENERATIONS:
            continue
        budget = float(frame["timesteps"].median())
        length = float(frame["episode_length"].mean())
        episodes = int(frame["episodes"].iloc[0])
        known = pd.to_numeric(frame["population"], errors="coerce").dropna()
        population = float(known.median()) if len(known) else math.nan
        if math.isfinite(population) and population > 0:
            size = f"population {population:.0f}"
        else:  # the algorithm's default population: what the budget and count imply
            implied = budget / (gens * episodes * length) if gens and length else math.nan
            size = f"its default population, about {implied:.0f}"
        found.append(
            Defect(
                env,
                str(algo),
                "generations",
                f"{gens:.0f} generations",
                f"{algo} on {env}: {gens:.0f} generations at {steps_text(budget)} timesteps "
                f"({steps_text(budget)} / ({size} x {episodes} episode"
                f"{'s' if episodes > 1 else ''} x {length:,.0f} steps a mean episode))",
            )
        )
    return found


def _value_words(key: str, value: Any) -> str:
    if key == "top_directions" and value == 0:
        return "0 (every direction)"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def settings_defects(
    env: str, facts: pd.DataFrame, reference: Mapping[str, Any]
) -> tuple[list[Defect], list[str]]:
    """Cells whose recorded settings differ from the published ones they are compared with
    (``reference_settings`` of ``experiments/provenance.yaml`` for ``env``), and a line for
    each cell that matches them."""
    found, matching = [], []
    for algo, published in reference.items():
        frame = facts[facts["algo"] == algo]
        if frame.empty:
            continue
        params = frame["params"].iloc[0]
        differences = [
            f"{key} {_value_words(key, params.get(key))} against {_value_words(key, value)}"
            for key, value in (published.get("params") or {}).items()
            if params.get(key) != value
            and not (
                isinstance(value, (int, float))
                and isinstance(params.get(key), (int, float))
                and math.isclose(float(params[key]), float(value), rel_tol=1e-6)
            )
        ]
        wanted = published.get("reward_transform")
        recorded = str(frame["reward_transform"].iloc[0])
        if wanted is not None and recorded != str(wanted):
            differences.append(f"reward_transform {recorded} against {wanted}")
        name = str(published.get("name", "its published settings"))
        source = " ".join(str(published.get("source", "")).split())
        if differences:
            found.append(
                Defect(
                    env,
                    str(algo),
                    "settings",
                    f"not {name.split(' at ')[0]}'s published settings",
                    f"{algo} on {env} is not {name}: recorded {'; '.join(differences)} ({source})",
                )
            )
        else:
            matching.append(f"{algo} on {env} matches {name} ({source}).")
    return found, matching


def stale_defects(env: str, facts: pd.DataFrame, missing: set[tuple[str, int]]) -> list[Defect]:
    """Archived runs whose cell the benchmark still lacks: their recorded config no longer
    matches the cell experiments/benchmark.yaml builds from the shipped settings, so they
    are shown until their cell runs again. ``missing``: the task's (algorithm, seed) cells
    not completed in the archive."""
    found = []
    for algo, frame in facts.groupby("algo", sort=True):
        seeds = sorted(int(s) for s in frame["seed"] if (str(algo), int(s)) in missing)
        if seeds:
            found.append(
                Defect(
                    env,
                    str(algo),
                    "stale",
                    "ran before its settings changed; rerun pending",
                    f"{algo} on {env}: the archived runs{_seeds_words(seeds, len(frame))} no "
                    "longer match their cells (the shipped settings changed since they ran); "
                    "shown until they run again",
                    tuple(seeds),
                )
            )
    return found


def missing_cells(bench: Benchmark, task: Task, labels: Sequence[str]) -> set[tuple[str, int]]:
    """(algorithm, seed) of ``task``'s grid cells whose labels are among ``labels`` (the
    cells the archive lacks)."""
    wanted = set(labels)
    return {
        (str(cell.config["algo"]), int(cell.config["seed"]))
        for cell in bench.sweep.cells
        if bench.task_of(cell) is task and cell.label in wanted
    }


def reward_defects(env: str, facts: pd.DataFrame) -> list[Defect]:
    """Cells trained on a transformed reward (evaluated on the env's own)."""
    found = []
    for algo, frame in facts.groupby("algo", sort=True):
        transforms = sorted(set(frame["reward_transform"]) - {"none"})
        if transforms:
            found.append(
                Defect(
                    env,
                    str(algo),
                    "reward-transform",
                    f"trained on reward {', '.join(transforms)}",
                    f"{algo} on {env} trained on a transformed reward "
                    f"({', '.join(transforms)}; evaluated on the env's own)",
                )
            )
    return found


# -- provenance ----------------------------------------------------------------------------------


class ProvenanceError(ValueError):
    """A malformed provenance file; the message is one line naming the entry."""


@dataclass(frozen=True)
class Provenance:
    """``experiments/provenance.yaml``: who chose each cell's settings, and the published
    settings some cells are compared with."""

    cells: dict[str, dict[str, dict[str, str]]]
    reference_settings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def of(self, env: str, algo: str) -> dict[str, str]:
        """The entry of a cell, empty where the file has none."""
        return self.cells.get(env, {}).get(algo, {})

    def seen_seeds(self, first: int) -> list[str]:
        """The cells (``env algo``) whose settings were chosen or checked on a seed from
        ``first`` on, as their ``seeds`` entry names it."""
        return [
            f"{env} {algo}"
            for env, algos in self.cells.items()
            for algo, entry in algos.items()
            if any(int(n) >= first for n in re.findall(r"\b\d+\b", entry.get("seeds", "")))
        ]


def load_provenance(path: Path = PROVENANCE_FILE) -> Provenance:
    """Read and check the provenance file (every entry gives each of
    :data:`PROVENANCE_FIELDS` as text); an absent file is an empty provenance."""
    if not path.is_file():
        return Provenance({})
    try:
        data = read_yaml(path) or {}
    except ConfigError as error:
        raise ProvenanceError(str(error)) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells", {}), dict):
        raise ProvenanceError(f"{path}: cells must map task envs to algorithms")
    cells: dict[str, dict[str, dict[str, str]]] = {}
    for env, algos in (data.get("cells") or {}).items():
        if not isinstance(algos, dict):
            raise ProvenanceError(f"{path}: cells.{env} must map algorithms to entries")
        for algo, entry in algos.items():
            missing = [
                k
                for k in PROVENANCE_FIELDS
                if not isinstance(entry, dict) or not str(entry.get(k) or "").strip()
            ]
            if missing:
                raise ProvenanceError(f"{path}: cells.{env}.{algo} lacks {', '.join(missing)}")
            cells.setdefault(str(env), {})[str(algo)] = {
                k: " ".join(str(entry[k]).split()) for k in PROVENANCE_FIELDS
            }
    reference = data.get("reference_settings") or {}
    if not isinstance(reference, dict) or not all(
        isinstance(v, dict) and all(isinstance(e, dict) for e in v.values())
        for v in reference.values()
    ):
        raise ProvenanceError(f"{path}: reference_settings must map envs to algorithm entries")
    return Provenance(cells, {str(k): dict(v) for k, v in reference.items()})


def provenance_gaps(bench: Benchmark, provenance: Provenance) -> tuple[list[str], list[str]]:
    """The benchmark's cells (``env algo``) without a provenance entry, and the entries
    that name no cell of the benchmark."""
    planned = {(task.env, algo) for task in bench.tasks for algo in task.algos}
    given = {(env, algo) for env, algos in provenance.cells.items() for algo in algos}
    return (
        [f"{env} {algo}" for env, algo in sorted(planned - given)],
        [f"{env} {algo}" for env, algo in sorted(given - planned)],
    )


# -- everything about one task -------------------------------------------------------------------


@dataclass
class TaskFacts:
    """A task's scores and what its runs recorded, with what this module found in them."""

    scores: TaskScores
    planned_runs: int
    facts: pd.DataFrame  # run_facts of the grid's runs
    evals: pd.DataFrame  # evaluations(): every run, equal-compute ones included
    equal_runs: pd.DataFrame  # run_facts of the equal-compute runs
    best: dict[str, str]  # family -> algorithm (family_best)
    gates: dict[str, Gate]
    defects: list[Defect]
    matching: list[str]  # cells that match their published settings
    mujoco: bool

    @property
    def task(self) -> Task:
        return self.scores.task

    def flagged_gates(self) -> dict[str, str]:
        """algorithm -> the text of its flagged gate (what the leader row says instead of
        ranking it)."""
        return {algo: gate.text() for algo, gate in self.gates.items() if gate.flagged}

    def evals_of(self, runs: Sequence[str]) -> dict[str, pd.DataFrame]:
        wanted = set(runs)
        return {
            str(run): frame
            for run, frame in self.evals.groupby("run", sort=False)
            if str(run) in wanted
        }


def task_facts(
    scores: TaskScores,
    anchors: Sequence[Anchor],
    provenance: Provenance,
    planned_runs: int,
    missing: set[tuple[str, int]] | None = None,
    parity: Mapping[tuple[str, str], Parity] | None = None,
) -> TaskFacts:
    """Read everything this module reports about one task from its scores' run table.
    ``missing``: the task's (algorithm, seed) cells the archive lacks (:func:`missing_cells`),
    whose archived runs are then stale; ``parity``: :func:`load_parity`."""
    table = scores.table
    facts = run_facts(table) if table is not None else pd.DataFrame()
    evals = evaluations(table.steps) if table is not None else pd.DataFrame()
    if len(facts):
        limited = pd.to_numeric(facts["cpu_limit"], errors="coerce").notna()
        limited |= facts["paired_with"].notna()
        equal_runs, facts = facts[limited], facts[~limited]
    else:
        equal_runs = facts
    gym_ids = [str(g) for g in facts.get("gym_id", pd.Series(dtype=object)).dropna().unique()]
    mujoco = any(is_mujoco(g) for g in gym_ids)
    env = scores.task.env
    defects: list[Defect] = []
    matching: list[str] = []
    if len(facts):
        defects += es_network_defects(env, facts)
        defects += obs_defects(env, facts, mujoco)
        defects += generation_defects(env, facts)
        found, matching = settings_defects(env, facts, provenance.reference_settings.get(env, {}))
        defects += found
        defects += reward_defects(env, facts)
        defects += stale_defects(env, facts, missing or set())
        order = {algo: i for i, algo in enumerate(scores.task.algos)}
        defects.sort(key=lambda d: order.get(d.algo, len(order)))  # stable: kinds keep order
    return TaskFacts(
        scores=scores,
        planned_runs=planned_runs,
        facts=facts,
        evals=evals,
        equal_runs=equal_runs,
        best=family_best(scores),
        gates=task_gates(scores, anchors, planned_runs, parity),
        defects=defects,
        matching=matching,
        mujoco=mujoco,
    )


# -- time to a share of the best RL's score (Salimans et al. 2017, Table 1) ----------------------


@dataclass(frozen=True)
class Crossing:
    """Medians over one algorithm's runs of the first evaluation at or above a level."""

    algo: str
    timesteps: float  # inf: the median run never got there
    cpu_seconds: float
    reached: int
    n: int
    #: runs that got there only in their seed's equal-compute run (trained on further)
    extended: int = 0


def first_crossing(frame: pd.DataFrame, level: float) -> tuple[float, float]:
    """Timesteps and CPU-seconds of a run's first evaluation at or above ``level`` (its
    unconfirmed first crossing); infinite where it never got there."""
    ordered = frame.sort_values("timesteps", kind="stable")
    above = ordered[ordered["eval_return_mean"].to_numpy(float) >= level]
    if above.empty:
        return math.inf, math.inf
    return float(above["timesteps"].iloc[0]), float(above["cpu_seconds"].iloc[0])


def crossing(facts: TaskFacts, algo: str, level: float) -> Crossing:
    """:class:`Crossing` of ``algo``'s grid runs. A grid run that stopped at its budget below
    the level is continued by its seed's equal-compute run where there is one (the same
    algorithm and seed trained on to the RL family's CPU-seconds, evaluated more sparsely);
    a run that got there in neither counts as infinitely late, so the median is too once
    half the runs did not get there within their budgets."""
    runs = facts.scores.runs
    grid = runs[runs["algo"] == algo]
    equal = facts.equal_runs
    later: dict[int, str] = {}
    if len(equal):
        # the ES's own: a pair's lead is its RL's grid run again
        mine = equal[(equal["algo"] == algo) & (equal["family"] == "es")]
        later = {int(seed): str(run) for run, seed in mine["seed"].items()}
    evals = facts.evals_of([str(r) for r in grid["run"]] + list(later.values()))
    per_run, extended = [], 0
    for run, seed in zip(grid["run"], grid["seed"], strict=True):
        if str(run) not in evals:
            continue
        point = first_crossing(evals[str(run)], level)
        if not math.isfinite(point[0]) and later.get(int(seed)) in evals:
            continued = first_crossing(evals[later[int(seed)]], level)
            if math.isfinite(continued[0]):
                point, extended = continued, extended + 1
        per_run.append(point)
    if not per_run:
        return Crossing(algo, math.nan, math.nan, 0, 0)
    steps = np.array([p[0] for p in per_run])
    cpu = np.array([p[1] for p in per_run])
    return Crossing(
        algo,
        float(np.median(steps)),
        float(np.median(cpu)),
        int(np.isfinite(steps).sum()),
        len(per_run),
        extended,
    )


@dataclass(frozen=True)
class ShareRow:
    """One task and share: the level, and each side's :class:`Crossing`."""

    env: str
    share: float
    level: float
    rl_final: float
    es: Crossing
    rl: Crossing

    def ratio(self, axis: str) -> float:
        """ES over RL on ``axis`` (``timesteps`` or ``cpu_seconds``); inf where the ES never
        got there, NaN where RL did not."""
        es, rl = getattr(self.es, axis), getattr(self.rl, axis)
        if not math.isfinite(rl) or rl <= 0:
            return math.nan
        return es / rl


def time_to_share(facts: TaskFacts, shares: Sequence[float] = SHARES) -> list[ShareRow]:
    """Per share: the level ``random + share x (RL final - random)`` of the best RL's mean
    final score, and the medians of the best ES's and the best RL's first evaluation at or
    above it (Salimans et al. 2017, Table 1, measure their ES against TRPO this way, as a
    share of TRPO's learning progress). Empty without both families."""
    es, rl = facts.best.get("es"), facts.best.get("rl")
    if es is None or rl is None:
        return []
    runs = facts.scores.runs
    finals = runs.loc[runs["algo"] == rl, "score_final"].to_numpy(float)
    final = float(np.nanmean(finals)) if np.isfinite(finals).any() else math.nan
    random = facts.scores.random_score
    if not (math.isfinite(final) and math.isfinite(random)):
        return []
    rows = []
    for share in shares:
        level = random + share * (final - random)
        rows.append(
            ShareRow(
                facts.task.env,
                share,
                level,
                final,
                crossing(facts, es, level),
                crossing(facts, rl, level),
            )
        )
    return rows


# -- equal compute at the RL family's full budget ------------------------------------------------


@dataclass
class EqualComputePoint:
    """The ES given the CPU-seconds the RL family-best spends on its whole budget."""

    rl: str
    cpu_seconds: float  # the RL entry's median CPU-seconds per run
    es: list[str]  # optimes and the best other ES (by mean score at equal timesteps)
    scores: dict[str, np.ndarray]  # ES algorithm -> its runs' scores there, where known
    source: dict[str, str]  # ES algorithm -> "archive" (its runs passed the point) or "cells"
    missing: dict[str, int]  # ES algorithm -> runs still to make
    rl_scores: np.ndarray = field(default_factory=lambda: np.array([]))
    planned_limit: float | None = None  # the cpu_limit experiments/benchmark.yaml plans
    #: the point comes from pairs (harness.pairing): each ES run stopped at the CPU-seconds
    #: of a run of ``rl`` beside it; ``machines``: the CPU models the pairs ran on, and
    #: ``split``: pairs whose two runs name different ones (none, by construction)
    paired: bool = False
    machines: list[str] = field(default_factory=list)
    split: int = 0
    #: the scores are the runs' endpoint evaluations (fairness.endpoint_scores)
    endpoints: bool = False

    @property
    def cells_missing(self) -> int:
        return sum(self.missing.values())

    @property
    def cpu_hours_missing(self) -> float:
        return self.cells_missing * self.cpu_seconds / 3600


def equal_compute_point(facts: TaskFacts) -> EqualComputePoint | None:
    """Where each ES of the pair (the spec's ``equal_compute.algos``, else the two best ES)
    stands at the RL family-best's median CPU-seconds per run: from its equal-compute runs
    where they exist, else from its grid runs where every one of them spent at least that
    much (the mean of the last evaluations up to it), else missing. None without both
    families."""
    equal = facts.task.equal_compute
    if equal is not None and equal.paired and facts.best.get("es") is not None:
        paired = _paired_point(facts, equal.against, list(equal.algos))
        if paired is not None:
            return paired
    rl = facts.best.get("rl")
    if rl is None or facts.best.get("es") is None:
        return None
    runs = facts.scores.runs
    rl_runs = runs[runs["algo"] == rl]
    rl_cpu = float(rl_runs["cpu_seconds_total"].median())
    means = runs.groupby("algo")["score_timesteps"].mean()
    es_algos = [
        a
        for a in means.sort_values(ascending=False).index
        if (family_of(a) or "es") == "es" and math.isfinite(float(means[a]))
    ]
    equal = facts.task.equal_compute
    # the spec names the pair (optimes and the best other ES); without it, the two best ES
    pair = list(equal.algos) if equal is not None else es_algos[:2]
    point = EqualComputePoint(
        rl=str(rl),
        cpu_seconds=rl_cpu,
        es=pair,
        scores={},
        source={},
        missing={},
        rl_scores=rl_runs["score_final"].to_numpy(float),
        planned_limit=equal.cpu_limit if equal is not None and equal.against == rl else None,
    )
    for algo in pair:
        limited = facts.equal_runs[facts.equal_runs["algo"] == algo]
        if len(limited):
            frames = facts.evals_of(list(limited.index))
            point.scores[algo] = np.array(
                [mean_of_last(frame, "timesteps") for frame in frames.values()]
            )
            point.source[algo] = "cells"
            point.missing[algo] = max(facts.planned_runs - len(limited), 0)
            continue
        grid = runs[runs["algo"] == algo]
        if len(grid) and bool((grid["cpu_seconds_total"] >= rl_cpu).all()):
            frames = facts.evals_of([str(r) for r in grid["run"]])
            point.scores[algo] = np.array(
                [mean_of_last(frame, "cpu_seconds", rl_cpu) for frame in frames.values()]
            )
            point.source[algo] = "archive"
            point.missing[algo] = 0
        else:
            point.missing[algo] = facts.planned_runs
    return point


def _paired_point(facts: TaskFacts, rl: str, es_algos: list[str]) -> EqualComputePoint | None:
    """The equal-compute point from the task's pairs: each ES's followers' scores against
    its leads' (one score per seed: a seed's leads are one training, run once per ES), at
    the leads' median CPU-seconds. None before any lead completed."""
    equal = facts.equal_runs
    if not len(equal):
        return None
    paired = equal[equal["paired_with"].notna()]
    leads = paired[paired["algo"] == rl]
    if not len(leads):
        return None
    frames = facts.evals_of([str(r) for r in paired.index])
    ends = endpoint_scores(facts.scores.table.steps)
    use_ends = all(str(run) in ends for run in paired.index)

    def final(run: str) -> float:
        if use_ends:
            return ends[run]
        return mean_of_last(frames[run], "timesteps") if run in frames else math.nan

    by_seed: dict[int, list[float]] = {}
    for run, seed in leads["seed"].items():
        by_seed.setdefault(int(seed), []).append(final(str(run)))
    point = EqualComputePoint(
        rl=rl,
        cpu_seconds=float(leads["cpu_seconds"].median()),
        es=es_algos,
        scores={},
        source={},
        missing={},
        rl_scores=np.array([float(np.mean(v)) for _, v in sorted(by_seed.items())]),
        paired=True,
    )
    machines = {str(run): str(m) for run, m in paired["machine"].items()}
    split = 0
    point.endpoints = use_ends
    for algo in es_algos:
        followers = paired[paired["algo"] == algo]
        point.scores[algo] = np.array([final(str(r)) for r in followers.index])
        point.source[algo] = "pairs"
        point.missing[algo] = max(facts.planned_runs - len(followers), 0)
        for run, seed in followers["seed"].items():
            partners = leads[(leads["seed"] == seed) & (leads["paired_with"] == algo)]
            split += sum(machines.get(str(p)) != machines.get(str(run)) for p in partners.index)
    point.machines = sorted(set(machines.values()))
    point.split = split
    return point


# -- asymmetries ---------------------------------------------------------------------------------


def _distinct(values: Sequence[str]) -> str:
    return "; ".join(dict.fromkeys(values))


def obs_words(row: Any) -> str:
    """How a run normalised its observations, in words."""
    if row.family != "es":
        return "VecNormalize (observations and rewards)" if row.normalize else "none"
    if not row.obs_norm:
        return "none"
    fraction = row.obs_fraction
    if isinstance(fraction, (int, float)) and fraction < 1:
        return f"running mean/std from {fraction:.0%} of rollouts"
    return "running mean/std from every rollout"


def network_words(row: Any) -> str:
    """A run's network in words: ``linear``, ``LSTM 16``, ``64-64 MLP`` for the ES policy;
    ``256-256 actor and critic`` for RL (``linear`` where SB3's had no hidden layer,
    ``16-unit`` where it had one)."""
    if row.family != "es":
        if row.rl_net is None:
            return "—"
        return f"{_net_words(row.rl_net)} actor and critic"
    if row.es_kind == "linear":
        return "linear"
    sizes = "-".join(map(str, row.es_net))
    return f"LSTM {sizes}" if row.es_kind == "lstm" else f"{sizes} MLP"


def asymmetry_rows(facts: TaskFacts, provenance: Provenance) -> list[dict[str, str]]:
    """Per algorithm of the task (grid runs): parameters, network, reward transform in
    training, observation normalisation, and who chose its settings, on what, on which seeds."""
    rows = []
    for algo in facts.task.algos:
        frame = facts.facts[facts.facts["algo"] == algo] if len(facts.facts) else pd.DataFrame()
        entry = provenance.of(facts.task.env, algo)
        if frame.empty:
            network = params = transform = obs = "no completed run"
        else:
            counts = frame["n_params"].dropna()
            params = f"{counts.median():,.0f}" if len(counts) else "—"
            network = _distinct([network_words(r) for r in frame.itertuples()])
            transform = _distinct(list(frame["reward_transform"]))
            obs = _distinct([obs_words(r) for r in frame.itertuples()])
        rows.append(
            {
                "task": facts.task.env,
                "algorithm": algo,
                "parameters": params,
                "network": network,
                "reward in training": transform,
                "observation normalisation": obs,
                "settings chosen by": entry.get("by", "—"),
                "on": entry.get("task", "—"),
                "seeds": entry.get("seeds", "—"),
            }
        )
    return rows


# -- the page's bookkeeping ----------------------------------------------------------------------


def split_missing(
    bench: Benchmark, missing: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The missing cells' labels per task, split into the grid's and the equal-compute
    cells' (which the page counts apart: they are not cells of the task's grid)."""
    equal = {cell.label for cell in bench.sweep.cells if bench.is_equal_compute(cell)}
    grid: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    for env, labels in missing.items():
        for label in labels:
            (extra if label in equal else grid).setdefault(env, []).append(label)
    return grid, extra


def confirmations_recorded(all_scores: Sequence[TaskScores]) -> bool:
    """Whether any archived run recorded a confirmation of a crossing (``confirm_*``
    metrics: :meth:`harness.runner.Runner.confirm`)."""
    for scores in all_scores:
        steps = scores.table.steps if scores.table is not None else None
        if (
            steps is not None
            and "confirm_return_mean" in steps
            and steps["confirm_return_mean"].notna().any()
        ):
            return True
    return False
