"""``harness bench project``: predicted wall-clock to a return as the cores grow, from stored runs.

Salimans et al. (2017, arXiv 1703.03864) argue that evolution strategies reach a score
sooner in wall-clock because they parallelise: a generation's episodes are independent.
This bench puts that claim to the runs at hand. It reads stored runs (run directories,
runs directories or run archives) of any algorithm and predicts, for each run and each
core count ``W``, the wall-clock from launch until the run's evaluation return first
reaches ``R`` (or, for a run that confirmed its own target ``R``, until the passed
confirmation), from the run's own recorded costs. Nothing is rerun.

The ES family (by the algorithm's declared family), per generation ``g`` up to the one
that reached ``R``, with ``n`` tasks (candidates), ``S`` their summed seconds on the
workers, ``L`` the longest task (the ``longest_task_s`` metric; runs recorded before it
existed get it from the stragglers they measured at ``W > 1``, else the bound ``K x step
cap x seconds per step``) and ``w`` workers used:

* episode work: ``S / w``, or the mean task ``S / n`` once ``w >= n``;
* stragglers: Graham's list-scheduling bound (1969) ``(1 - 1/w) L`` for ``w < n`` (an
  upper bound: pessimistic for ES), ``L - S/n`` once every task has its own worker;
* head update: the run's own head time (tell, ask, observation statistics), serial;
* messages: ``(w + chunks(n, w)) x t_message + bytes / bandwidth`` through one head, with
  ``t_message`` the run's own dispatch overhead per message (evaluate time less work,
  stragglers and worker start-up, over its messages) and the bytes the run recorded,
  the per-worker part (the generation's target) counted once per worker;
* evaluation: the run's evaluation and confirmation seconds, their episodes spread over
  ``min(w, episodes)`` workers.

The RL family (PPO, A2C, SAC, TD3, TQC, RecurrentPPO): the run's rollout seconds (the
``rollout_s`` metric) spread over ``min(W, n_envs)`` parallel envs, plus its update seconds
(``update_s``), serial; runs recorded before the split count all of ``learn_s`` as
rollout (optimistic for RL). PPO and A2C at their published ``n_envs`` cannot use more
cores than envs (an env with no published ``n_envs`` runs SB3's default, labelled so). The
variant "n_envs raised to W" spreads the same rollout work over ``W`` envs; it assumes the
same timesteps to ``R``, a sample-efficiency cost nobody measured.

Sample costs (``--sample-costs RUNS``, by default the committed runs of
``experiments/sample_costs_*.yaml``): runs of one algorithm on one env at several
populations (ES) or ``n_envs`` (RL), their timesteps to ``R`` measured on tuning seeds. At
``W`` cores a run may then use any measured population on ``min(W, population)`` workers,
or any measured ``n_envs`` on ``min(W, n_envs)`` envs: its generations (ES) and timesteps
to ``R`` scale by the measured median at that setting over the measured median at the
run's own (:class:`SampleCost`), its per-sample costs stay the run's own, and the fastest
setting is taken and named. Only the parallel speed is projected.

Both: bookkeeping (checkpoints, logging) as the run measured it, held fixed; start-up
(process start, setup, worker start) held fixed too, and in a configuration's projection
the least any of its runs measured (start-up is imports and setup, which a loaded machine
only slows), labelled so. A run with ``W`` cores uses the number of workers ``w <= W``
that the model finds fastest, so a time never grows with the cores; an ES run never uses
more workers than its population (the population cap). With ``--population-grows`` an ES
at ``W`` cores may also run ``population_per_worker x W'`` candidates (the run's knob,
else its population over its workers) for each listed ``W' <= W``, on
``min(W, population)`` workers: the fastest is taken (never slower than its own
population) and named. A population's head update grows in
proportion and its generations to ``R`` stay the run's own (the effect of a population
listed so is unmeasured).

Each median comes with its 95% band (:func:`median_band`: a percentile bootstrap over the
runs, which are the seeds). Runs are projected per configuration: a report's group but for
the worker count (one algorithm at populations 8 and 40 is two), after ``--sweep NAME`` and
``--where KEY=VALUE`` (as ``harness report`` reads them) choose the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness import rundir
from harness.bench import format_table, save_json
from harness.commands import UsageError, check_writable_dir

#: The model's version, recorded with every prediction (scripts/validate_projection.py):
#: raised whenever a term's formula changes, so that a prediction is checked only against
#: the model that made it. 2: RL env-process messages only where SB3 steps more than one
#: env in subprocesses (a single env steps in the head). 3: RL env-process messages cost
#: what the machine file measured with the head as busy between steps as the run's own
#: rollout was, and each env's own machine file where one was measured.
MODEL_VERSION = 3
#: The worker counts at which the model's predictions have been checked against measured
#: runs (docs/scaling.md, "Checking the model against measurements"); beyond: projected.
VALIDATED_WORKERS = (1, 2)
#: Resamples of a median's band (bootstrap over the runs' seeds), from a fixed seed.
BAND_RESAMPLES = 2000
BAND_SEED = 0
#: Core counts of the projection unless ``--cores`` names others.
DEFAULT_CORES = (1, 2, 4, 8, 16, 64, 256, 1440)
#: The head's network bandwidth unless ``--bandwidth-gbps`` says otherwise (Gbit/s).
DEFAULT_BANDWIDTH_GBPS = 10.0
#: Default target without a reference: this fraction of the way from the runs' first
#: evaluation (median) to the best final score the rule names (see :func:`choose_target`).
TARGET_FRACTION = 0.9
#: Task requests per worker of the process and Ray backends (guided self-scheduling).
CHUNKS_PER_WORKER = 4
#: ``harness bench scaling --json`` output whose measured cost of one posted message
#: (``<backend>.w<W>.target_send_s`` over W, at its widest W) is the head's serial cost.
MESSAGE_COSTS = Path(__file__).resolve().parents[2] / "reports" / "benchmarks" / "scaling_ant.json"
#: ``harness bench ceiling --vec-envs 16 --json`` output on the development machine: the
#: head's message cost per env step when RL steps its envs in subprocesses (W > 1)
MACHINE_COSTS = MESSAGE_COSTS.parent / "projection_lander" / "machine.json"
#: Every committed machine file: the lander's (the default for other envs), PendulumPO's
#: (``--vec-envs 8``, with the head's gaps).
MACHINES = (MACHINE_COSTS, MESSAGE_COSTS.parent / "projection_heldout" / "machine_pendulum.json")
#: Run archives of ``experiments/sample_costs_*.yaml``: timesteps to a score per population
#: (ES) and per ``n_envs`` (RL), on tuning seeds (docs/scaling.md, "Sample costs").
SAMPLE_COSTS = MESSAGE_COSTS.parent / "sample_costs"
#: A picked point's choice where the run keeps its own population or n_envs.
OWN_SETTING = "the run's own"
#: The model's terms, in the order tables list them.
TERMS = (
    "episode_work",
    "stragglers",
    "head_update",
    "messages",
    "evaluation",
    "bookkeeping",
    "startup",
)
TERM_HEADINGS = {
    "episode_work": "episode work s",
    "stragglers": "stragglers s",
    "head_update": "head update s",
    "messages": "messages s",
    "evaluation": "eval s",
    "bookkeeping": "bookkeeping s",
    "startup": "start-up s",
}
#: ``time_<part>_s`` parts the model holds fixed, by term.
STARTUP_PARTS = ("process_start", "setup", "worker_start")
BOOKKEEPING_PARTS = ("checkpoint", "logging", "other")


# -- what a run recorded -----------------------------------------------------------------------


@dataclass
class RunCosts:
    """What the model needs of one stored run, read from its records (never rerun).

    Per-step arrays are indexed by step - 1 (step 1 is the first generation or chunk).
    """

    label: str
    algo: str
    family: str
    env: str
    gym_id: str
    seed: int
    workers: int
    eval_episodes: int
    confirm_episodes: int
    target_return: float | None
    #: cumulative training timesteps after each step
    timesteps: np.ndarray
    #: (step, evaluation return) of every evaluation, in step order
    evals: list[tuple[int, float]]
    #: steps whose confirmation of the run's own target passed
    confirmed_steps: list[int]
    #: cumulative seconds per part (``time_<part>_s``) at each evaluation step
    parts: dict[int, dict[str, float]]
    #: ES: tasks, summed task seconds, longest task, dispatch gaps and bytes per generation
    tasks: np.ndarray = field(default_factory=lambda: np.zeros(0))
    work_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    longest_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    longest_source: str = ""
    message_s: float = 0.0
    target_bytes: float = 0.0
    task_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sync: str = "broadcast"
    backend: str = "process"
    population_per_worker: float | None = None
    #: RL: rollout and update seconds per chunk, and the envs that stepped in parallel
    rollout_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    update_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    split_recorded: bool = True
    n_envs: int = 1
    #: where ``n_envs`` comes from (:func:`n_envs_source`)
    n_envs_source: str = ""
    parallel_envs: int = 1
    #: resumed at another worker count part of the way: no one W's measured time
    mixed_workers: bool = False
    #: the run's configuration where one algorithm's runs differ (a report's group label,
    #: such as ``optimes [budget=3913 CPU-s]``); empty: the algorithm names it
    group: str = ""
    #: the machine: its CPU model (Sacred's host.cpu) and the run's speed record
    #: (:func:`harness.speed.run_speed`, kernel rounds per CPU-second; None: not recorded)
    cpu: str = ""
    speed: float | None = None

    @property
    def name(self) -> str:
        """What its runs are compared as: the report's group, else the algorithm."""
        return self.group or self.algo

    @property
    def population(self) -> int:
        """Tasks per generation (the median over the run; 0 for RL)."""
        return int(np.median(self.tasks)) if self.tasks.size else 0

    @property
    def first_return(self) -> float:
        return self.evals[0][1] if self.evals else math.nan

    @property
    def final_return(self) -> float:
        return self.evals[-1][1] if self.evals else math.nan


def _series(metrics: dict[str, Any], name: str, steps: int) -> np.ndarray:
    """A metric as one value per step 1..``steps`` (NaN where it was not logged)."""
    out = np.full(steps, np.nan)
    series = metrics.get(name)
    if not series:
        return out
    for step, value in zip(series["steps"], series["values"], strict=True):
        if 1 <= int(step) <= steps and isinstance(value, (int, float)):
            out[int(step) - 1] = float(value)
    return out


def _points(metrics: dict[str, Any], name: str) -> list[tuple[int, float]]:
    series = metrics.get(name) or {"steps": [], "values": []}
    return [
        (int(s), float(v))
        for s, v in zip(series["steps"], series["values"], strict=True)
        if isinstance(v, (int, float)) and math.isfinite(float(v))
    ]


def _step_cap(config: dict[str, Any], gym_id: str) -> int | None:
    """The episode step cap: the run's ``max_episode_steps``, else the env's registered one
    (``gym_id``: the id the run resolved its env to)."""
    if config.get("max_episode_steps"):
        return int(config["max_episode_steps"])
    try:
        import gymnasium as gym

        from envs.registry import register_pybullet_envs

        if gym_id not in gym.registry and "Bullet" in gym_id:
            register_pybullet_envs()
        cap = gym.spec(gym_id).max_episode_steps
    except Exception:  # an env this process cannot resolve: no cap known
        return None
    return int(cap) if cap else None


def _gym_id(env: str) -> str:
    """The gymnasium id of a run's env name (the name itself where it cannot be resolved)."""
    try:
        from envs.registry import resolve_env_id

        return resolve_env_id(env)
    except Exception:  # a plugin env this process did not import
        return env


def workers_per_step(config: dict[str, Any], run: dict[str, Any], steps: int) -> np.ndarray:
    """The workers each step ran with: the config's, changed where a resume changed them
    (``run.json``'s ``resumed`` entries: ``from_step``, ``previous_workers``, ``workers``)."""
    entries = [e for e in run.get("resumed") or [] if isinstance(e, dict)]
    first = next((e.get("previous_workers") for e in entries if "previous_workers" in e), None)
    out = np.full(steps, float(first or config.get("workers") or 1))
    for entry in entries:
        if isinstance(entry.get("workers"), int) and isinstance(entry.get("from_step"), int):
            out[int(entry["from_step"]) :] = float(entry["workers"])
    return out


def _target_bytes(params: float, obs_dim: int, vector_tasks: bool, sync: str, tasks: int) -> float:
    """Bytes every worker is sent once per generation: the replica's update in replicated
    mode, a broadcast without centre where candidates travel in their tasks, else the
    broadcast with the centre (and per-coordinate sigma and observation statistics, the
    largest it can be)."""
    from evaluation.protocol import Broadcast
    from evaluation.worker import encode

    if not math.isfinite(params) or params <= 0:
        return 0.0
    dim = int(params)
    if sync == "seeds":
        from harness.bench.scaling import message_bytes

        sizes = message_bytes(max(tasks, 2), dim, max(obs_dim, 1))
        return float(sizes["replica_ref"] + sizes["update"] + sizes["checksum"])
    if vector_tasks:
        return float(len(encode(("broadcast", Broadcast(0, None, 0.0, None, None)))))
    vector = np.zeros(dim, np.float32)
    obs = np.zeros(max(obs_dim, 1), np.float32)
    return float(len(encode(("broadcast", Broadcast(0, vector, vector, obs, obs)))))


def _chunks(tasks: int, workers: int, per_worker: int = CHUNKS_PER_WORKER) -> int:
    """:func:`evaluation.backends.chunk_count` in closed steps: the chunks of one size are
    counted at once (``ceil(remaining / (per_worker x workers))`` tasks each)."""
    count, remaining, slots = 0, int(tasks), per_worker * int(workers)
    while remaining > 0:
        size = -(-remaining // slots)
        if size == 1:
            return count + remaining
        same = -(-(remaining - (size - 1) * slots) // size)
        count += same
        remaining -= same * size
    return count


def read_costs(run_dir: Path) -> RunCosts | str:
    """The model's inputs from one run directory, or one line saying why it has none."""
    from algorithms.registry import family_of

    try:
        record = rundir.read_run(run_dir)
    except rundir.UnreadableRun as error:
        return f"unreadable: {error}"
    if record.status != "COMPLETED":
        return f"status {record.status}"
    config = record.config
    algo = str(config.get("algo"))
    family = family_of(algo)
    if family is None:
        return f"algorithm {algo!r} unknown here (its module not imported: --import MODULE)"
    metrics = record.metrics
    if "timesteps" not in metrics or "eval_return_mean" not in metrics:
        return "no timesteps or evaluation metrics"
    if not any(name.startswith("time_") for name in metrics):
        return "no time_<part>_s metrics (recorded by the harness since its time breakdown)"
    steps = max(int(s) for s in metrics["timesteps"]["steps"])
    summary_path = run_dir / rundir.SUMMARY
    summary = rundir.read_json(summary_path) if summary_path.is_file() else {}
    summary = summary if isinstance(summary, dict) else {}
    parts: dict[int, dict[str, float]] = {}
    for name in metrics:
        if name.startswith("time_") and name.endswith("_s"):
            part = name.removeprefix("time_").removesuffix("_s")
            for step, value in _points(metrics, name):
                parts.setdefault(step, {})[part] = value
    params = config.get("params") or {}
    workers = int(config.get("workers") or 1)
    timesteps = _series(metrics, "timesteps", steps)
    per_step = workers_per_step(config, record.run, steps)
    costs = RunCosts(
        label=rundir.stored_location(run_dir),
        algo=algo,
        family=family,
        env=str(config.get("env")),
        gym_id=str(summary.get("env") or _gym_id(str(config.get("env")))),
        seed=int(config.get("seed") or 0),
        workers=workers,
        eval_episodes=int(config.get("eval_episodes") or 1),
        confirm_episodes=int(config.get("confirm_episodes") or 0),
        target_return=(
            float(config["target_return"]) if config.get("target_return") is not None else None
        ),
        timesteps=timesteps,
        evals=_points(metrics, "eval_return_mean"),
        confirmed_steps=[s for s, v in _points(metrics, "confirm_passed") if v >= 1.0],
        parts=parts,
        mixed_workers=bool((per_step != workers).any()),
        cpu=str((record.run.get("host") or {}).get("cpu") or ""),
        speed=_recorded_speed(metrics),
    )
    if family == "es":
        return _es_costs(costs, config, metrics, steps, run_dir, per_step)
    learn = _series(metrics, "learn_s", steps)
    rollout = _series(metrics, "rollout_s", steps)
    costs.split_recorded = bool(np.isfinite(rollout).any())
    costs.rollout_s = np.nan_to_num(rollout if costs.split_recorded else learn)
    costs.update_s = (
        np.nan_to_num(_series(metrics, "update_s", steps))
        if costs.split_recorded
        else np.zeros(steps)
    )
    costs.n_envs = int(params.get("n_envs") or 1)
    costs.n_envs_source = n_envs_source(algo, costs.env, costs.gym_id, costs.n_envs)
    kind = str(params.get("vec_env") or "auto")
    if kind == "auto":
        kind = "subproc" if workers > 1 else "dummy"
    costs.parallel_envs = min(workers, costs.n_envs) if kind == "subproc" else 1
    return costs


def _recorded_speed(metrics: dict[str, Any]) -> float | None:
    from harness.speed import KERNEL_METRIC, run_speed

    speed, _ = run_speed([v for _, v in _points(metrics, KERNEL_METRIC)])
    return speed if math.isfinite(speed) else None


def n_envs_source(algo: str, env: str, gym_id: str, n_envs: int) -> str:
    """Where an RL run's ``n_envs`` comes from, in words: the env's published value (an
    rl-baselines3-zoo entry in the defaults), SB3's default where the env has none, or the
    run's own choice."""
    from algorithms.registry import AlgorithmRegistryError, get_algorithm
    from harness.config import ConfigError, defaults_layers

    published: Any = None
    try:
        for label, sections in defaults_layers(gym_id, algo, env):
            if "n_envs" in sections["params"] and " default entry" not in label:
                published = sections["params"]["n_envs"]
    except (ConfigError, OSError, KeyError, TypeError):
        published = None
    if published is not None:
        if int(published) == n_envs:
            return "its published n_envs"
        return f"the run's own n_envs; {published} published"
    try:
        fields = dataclasses.fields(get_algorithm(algo).Config)
        default = next((f.default for f in fields if f.name == "n_envs"), None)
    except (AlgorithmRegistryError, TypeError):
        default = None
    if default == n_envs:
        return "SB3 default: the env has no published n_envs"
    return "the run's own n_envs: the env has no published n_envs"


def _es_costs(
    costs: RunCosts,
    config: dict[str, Any],
    metrics: dict[str, Any],
    steps: int,
    run_dir: Path,
    per_step: np.ndarray,
) -> RunCosts | str:
    if "worker_seconds" not in metrics:
        return "no worker_seconds metric"
    per_fitness = max(int(config.get("episodes") or 1), 1)
    episodes = _series(metrics, "episodes", steps)
    tasks = np.diff(np.concatenate([[0.0], np.nan_to_num(episodes)])) / per_fitness
    costs.tasks = np.maximum(np.round(tasks), 1.0)
    costs.work_s = np.nan_to_num(_series(metrics, "worker_seconds", steps))
    gen_steps = np.diff(np.concatenate([[0.0], np.nan_to_num(costs.timesteps)]))
    longest = _series(metrics, "longest_task_s", steps)
    stragglers = _series(metrics, "straggler_s", steps)
    if np.isfinite(longest).all():
        costs.longest_s = longest
        costs.longest_source = "recorded"
    elif (per_step > 1).all() and np.isfinite(stragglers).all():
        # the model's own straggler term, (1 - 1/W) L, inverted at the run's W
        costs.longest_s = np.minimum(stragglers / (1 - 1 / per_step), costs.work_s)
        costs.longest_source = "from the stragglers measured at the run's W (not recorded)"
    else:
        cap = _step_cap(config, costs.gym_id)
        step_s = costs.work_s / np.maximum(gen_steps, 1.0)
        if cap is not None:
            costs.longest_s = np.minimum(per_fitness * cap * step_s, costs.work_s)
            costs.longest_source = f"bound: {per_fitness} x {cap}-step cap (not recorded)"
        else:
            costs.longest_s = costs.work_s / costs.tasks
            costs.longest_source = "mean task (not recorded, no step cap known)"
    costs.longest_s = np.maximum(np.nan_to_num(costs.longest_s), costs.work_s / costs.tasks)
    costs.sync = str(config.get("sync") or "broadcast")
    costs.backend = str(config.get("backend") or "process")
    w = costs.workers
    evaluate = np.nan_to_num(_series(metrics, "evaluate_s", steps))
    idle = np.nan_to_num(_series(metrics, "straggler_s", steps)) + np.nan_to_num(
        _series(metrics, "worker_start_s", steps)
    )
    # each worker's time in the evaluate call less its work and its idle: the round trips
    gaps = np.maximum(evaluate - costs.work_s / per_step - idle, 0.0) * per_step
    # one conversion for the keys and their lookups (astype(int) and int() differ past int64)
    keys = [
        (int(n) if math.isfinite(n) else 0, int(k) if math.isfinite(k) else 0)
        for n, k in zip(costs.tasks, per_step, strict=True)
    ]
    count = {(n, k): _messages(n, min(k, n), costs.sync) for n, k in set(keys)}
    messages = sum(count[key] for key in keys)
    costs.message_s = float(gaps.sum() / messages) if messages else 0.0
    spec_path = run_dir / rundir.POLICY_SPEC
    params, obs_dim = math.nan, 0
    if spec_path.is_file():
        try:
            from envs.policies import PolicySpec

            spec = PolicySpec.from_dict(rundir.read_json(spec_path))
            params, obs_dim = float(spec.num_params), int(spec.obs_dim)
        except (rundir.UnreadableRun, TypeError, ValueError, KeyError):
            pass
    to_workers = np.nan_to_num(_series(metrics, "bytes_to_workers", steps))
    from_workers = np.nan_to_num(_series(metrics, "bytes_from_workers", steps))
    per_task = float(np.median(to_workers / costs.tasks)) if steps else 0.0
    vector_tasks = math.isfinite(params) and per_task >= 4 * params
    target = _target_bytes(params, obs_dim, vector_tasks, costs.sync, costs.population)
    # the records win: a worker cannot have been sent more than the generation sent
    costs.target_bytes = min(target, float(np.median(to_workers)) / w) if steps else 0.0
    costs.task_bytes = np.maximum(to_workers + from_workers - w * costs.target_bytes, 0.0)
    per_worker = config.get("population_per_worker")
    costs.population_per_worker = (
        float(per_worker) if per_worker else max(costs.population / w, 1.0)
    )
    return costs


def _messages(tasks: int, workers: int, sync: str) -> int:
    """Messages the head sends per generation: one target per worker and the task requests
    (replicated mode as implemented: also an update out and a checksum back per worker)."""
    extra = 2 * workers if sync == "seeds" else 0
    return workers + _chunks(tasks, workers) + extra


# -- reaching the target -----------------------------------------------------------------------


def reached_step(costs: RunCosts, target: float) -> int | None:
    """The step at which the run reached ``target``: its passed confirmation where the run's
    own target was ``target`` and it confirmed it, else its first evaluation at or above."""
    if (
        costs.target_return is not None
        and math.isclose(costs.target_return, target)
        and costs.confirmed_steps
    ):
        return costs.confirmed_steps[0]
    for step, value in costs.evals:
        if value >= target:
            return step
    return None


def measured_seconds(costs: RunCosts, step: int) -> float | None:
    """The run's own wall-clock from launch to the end of the evaluation (and confirmation)
    at ``step``: every ``time_<part>_s`` total logged there (None for a run resumed at
    another worker count on the way: its time is no one worker count's)."""
    parts = costs.parts.get(step)
    if costs.mixed_workers:
        return None
    return float(sum(parts.values())) if parts else None


def message_costs(path: Path = MESSAGE_COSTS) -> tuple[dict[str, float], str]:
    """The head's measured seconds per posted message, per backend, from a ``harness bench
    scaling --json`` file (``target_send_s`` at its widest W, over W), and a phrase naming
    them; empty where the file is absent or holds none."""
    if not path.is_file():
        return {}, ""
    try:
        data = rundir.read_json(path)
    except rundir.UnreadableRun:
        return {}, ""
    widest: dict[str, tuple[int, float]] = {}
    for key, value in (data if isinstance(data, dict) else {}).items():
        parts = str(key).split(".")
        if (
            len(parts) == 3
            and parts[2] == "target_send_s"
            and parts[1][:1] == "w"
            and parts[1][1:].isdigit()
            and isinstance(value, (int, float))
        ):
            w = int(parts[1][1:])
            if w > widest.get(parts[0], (0, 0.0))[0]:
                widest[parts[0]] = (w, float(value) / w)
    costs = {backend: seconds for backend, (_, seconds) in widest.items()}
    if not costs:
        return {}, ""
    where = path.name if path == MESSAGE_COSTS else str(path)
    text = ", ".join(f"{b} {s * 1e6:.0f} us" for b, s in sorted(costs.items()))
    return costs, f"the head's measured cost per message ({text}; {where})"


@dataclass(frozen=True)
class MachineCosts:
    """What RL pays at W > 1 on the measured machine (``harness bench ceiling --vec-envs N
    --json``): one step of ``env`` in-process, and the head's serial message seconds per env
    step when SB3's ``SubprocVecEnv`` steps each env in its own process."""

    env: str
    env_step_s: float
    subproc_message_s: float
    source: str
    #: the head's busy seconds between steps, and the message cost per env step at each
    gaps_s: tuple[float, ...] = ()
    gap_messages_s: tuple[float, ...] = ()

    def message_s(self, gap_s: float) -> float:
        """The message cost per env step with the head busy ``gap_s`` between steps:
        interpolated between the measured gaps, held at the ends."""
        if not self.gaps_s:
            return self.subproc_message_s
        return float(np.interp(gap_s, self.gaps_s, self.gap_messages_s))

    def phrase(self) -> str:
        by_gap = (
            f", rising to {self.gap_messages_s[-1] * 1e6:.0f} us with the head busy "
            f"{self.gaps_s[-1] * 1e3:g} ms between steps"
            if self.gaps_s
            else ""
        )
        return (
            f"{self.env}: {self.subproc_message_s * 1e6:.0f} us of the head's time per env step"
            f"{by_gap}, the env step itself {self.env_step_s * 1e6:.0f} us ({self.source})"
        )


def machines_of(paths: Sequence[Path] = MACHINES) -> tuple[MachineCosts, ...]:
    """The message costs of ``--machine`` files; a committed default that is missing is
    left out. Raises :class:`UsageError` for another file missing or holding none."""
    out = []
    for path in paths:
        machine = machine_costs(path)
        if machine is not None:
            out.append(machine)
        elif path.is_file():
            raise UsageError(
                f"--machine {str(path)!r} holds no dummy_steps_per_s and subproc_message_s"
                " (write it with harness bench ceiling --vec-envs N --json FILE)"
            )
        elif path not in MACHINES:
            raise UsageError(f"--machine {str(path)!r} is not a file")
    return tuple(out)


def machine_costs(path: Path | None = MACHINE_COSTS) -> MachineCosts | None:
    """The RL message costs of a ``harness bench ceiling --vec-envs N --json`` file, or None
    where no file is given or it holds none."""
    if path is None or not path.is_file():
        return None
    try:
        data = rundir.read_json(path)
    except rundir.UnreadableRun:
        return None
    data = data if isinstance(data, dict) else {}
    rate, message = data.get("dummy_steps_per_s"), data.get("subproc_message_s")
    if not isinstance(rate, (int, float)) or not isinstance(message, (int, float)) or rate <= 0:
        return None
    gaps, by_gap = data.get("head_gap_ms") or [], data.get("subproc_message_s_by_gap") or []
    if len(gaps) != len(by_gap) or not all(isinstance(v, (int, float)) for v in gaps + by_gap):
        gaps, by_gap = [], []
    return MachineCosts(
        str(data.get("env", "")),
        1.0 / float(rate),
        float(message),
        path.name,
        tuple(float(g) / 1000 for g in gaps),
        tuple(float(m) for m in by_gap),
    )


@dataclass(frozen=True)
class SampleCost:
    """What one population (ES) or ``n_envs`` (RL) of an algorithm on an env costs in samples
    to a score: the lower medians over its sample-cost runs (None: half or more never
    reached it within their budget)."""

    #: the population (ES: candidates per generation) or ``n_envs`` (RL)
    setting: int
    generations: float | None
    timesteps: float | None
    runs: int
    reached: int


def setting_name(family: str) -> str:
    """The knob a user scales with the cores, by family: "population" (ES), "n_envs" (RL)."""
    return "population" if family == "es" else "n_envs"


def setting_of(costs: RunCosts) -> int:
    """The knob a user scales with the cores: an ES's population, an RL run's ``n_envs``."""
    return costs.population if costs.family == "es" else costs.n_envs


def sample_costs(
    samples: Sequence[RunCosts], costs: RunCosts, target: float
) -> dict[int, SampleCost]:
    """Per population or ``n_envs``, the sample cost to ``target`` that the sample-cost runs
    of ``costs``'s algorithm on its env measured (empty: none of them)."""
    by_setting: dict[int, list[RunCosts]] = {}
    for sample in samples:
        if sample.algo == costs.algo and sample.gym_id == costs.gym_id:
            by_setting.setdefault(setting_of(sample), []).append(sample)
    out = {}
    for setting, runs in sorted(by_setting.items()):
        steps = [reached_step(run, target) for run in runs]
        out[setting] = SampleCost(
            setting,
            lower_median([None if s is None else float(s) for s in steps]),
            lower_median(
                [
                    None if s is None else float(run.timesteps[s - 1])
                    for s, run in zip(steps, runs, strict=True)
                ]
            ),
            len(runs),
            sum(s is not None for s in steps),
        )
    return out


def read_samples(paths: Sequence[Path]) -> tuple[tuple[RunCosts, ...], str]:
    """The completed runs under ``paths`` (run directories, runs directories, archives) as
    sample costs, and where they come from in words ("" where there are none)."""
    found = [p for p in paths if p.exists()]
    # a folder of run archives (as the committed sample costs are) stands for its archives
    found = [a for p in found for a in (sorted(p.glob("*.tar.xz")) if p.is_dir() else [])] + [
        p for p in found if not p.is_dir() or not any(p.glob("*.tar.xz"))
    ]
    try:
        dirs = rundir.find_run_dirs(found)
    except rundir.UnreadableRun as error:
        raise UsageError(f"--sample-costs: {str(error).splitlines()[0]}") from None
    runs = tuple(c for c in map(read_costs, dirs) if not isinstance(c, str))
    if not runs:
        return (), ""
    settings: dict[tuple[str, str, str], set[int]] = {}
    for c in runs:
        settings.setdefault((c.algo, c.env, c.family), set()).add(setting_of(c))
    where = ", ".join(
        f"{algo} on {env} ({'populations' if family == 'es' else 'n_envs'} "
        f"{', '.join(map(str, sorted(values)))})"
        for (algo, env, family), values in sorted(settings.items())
    )
    return runs, f"{len(runs)} sample-cost runs in {', '.join(p.name for p in paths)}: {where}"


# -- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assumptions:
    """What the model assumes beyond the run's records."""

    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS
    population_grows: bool = False
    #: runs at several populations or n_envs (``--sample-costs``), and where they come from
    samples: tuple[RunCosts, ...] = ()
    samples_source: str = ""
    #: "parallel": evaluation episodes spread over the cores for both families; "as-run":
    #: as the harness runs them (RL evaluates in its head, one episode after another)
    rl_eval: str = "parallel"
    #: the head's own seconds per posted message, per backend (:func:`message_costs`);
    #: a backend missing here counts each run's whole round trip as serial
    head_message_s: dict[str, float] = field(default_factory=dict)
    head_message_source: str = ""
    #: RL in env subprocesses (W > 1): the measured message costs (:func:`machine_costs`),
    #: the first for envs none of them was measured on
    machines: tuple[MachineCosts, ...] = ()

    def machine_for(self, gym_id: str) -> MachineCosts | None:
        """The message costs measured on ``gym_id``, else the first file's."""
        return next((m for m in self.machines if m.env == gym_id), None) or next(
            iter(self.machines), None
        )

    def head_cost(self, backend: str) -> float | None:
        """The head's serial seconds per message for runs of ``backend`` (None: unknown)."""
        return self.head_message_s.get("ray" if backend == "ray" else "process")

    def lines(self) -> list[str]:
        """The assumptions in two lines for tables and reports."""
        population = (
            "at each W an ES runs the fastest of its own population and "
            "population_per_worker x W' for each listed W' <= W (never slower than its own; "
            "the effect of those populations on generations to the target unmeasured)"
            if self.population_grows
            else "each run's population is fixed unless measured otherwise, so an ES uses at "
            "most that many workers"
        )
        samples = (
            f" Measured sample costs ({self.samples_source}): at each W an algorithm with "
            "runs there may also use any population or n_envs measured, its generations and "
            "timesteps to the target scaled by the measured medians against its own "
            "setting's; the fastest is taken and named."
            if self.samples
            else " No sample costs measured: each RL run keeps its n_envs."
        )
        return [
            f"One head sends every message in turn over a {self.bandwidth_gbps:g} Gbit/s link "
            + (
                f"at {self.head_message_source}"
                if self.head_message_s
                else "at each run's whole round trip per message (no measured head cost)"
            )
            + ", each worker waits its own round trips as the run measured them; "
            "bookkeeping as measured and start-up as the least-loaded run of a configuration "
            "measured it, held fixed.",
            f"{population[0].upper()}{population[1:]}; RL steps min(W, n_envs) envs in "
            "parallel and updates serially; evaluation episodes spread over the cores "
            + ("for both families." if self.rl_eval == "parallel" else "for ES (RL: in series).")
            + (
                " At W > 1 RL env processes cost, in messages: "
                + "; ".join(m.phrase() for m in self.machines)
                + " (an env measured in none of these: the first's messages, and its whole "
                "rollout spreads over the env processes)."
                if self.machines
                else " RL env processes' messages are not modelled (no --machine file):"
                " optimistic for RL on cheap envs."
            )
            + samples,
        ]


@dataclass
class Point:
    """The model at one core count."""

    cores: int
    workers: int
    seconds: float
    terms: dict[str, float]
    population: int | None = None
    generations: int = 0
    #: where the model may pick a population or n_envs: which it picked, and why
    choice: str = ""
    #: RL: the n_envs of this point (None: the run's own)
    n_envs: int | None = None

    @property
    def setting(self) -> str:
        """The population or n_envs picked, where it is not the run's own ("" there)."""
        if not self.choice or self.choice == OWN_SETTING:
            return ""
        return self.choice.split(" (")[0]


def _fixed(costs: RunCosts, step: int, names: Iterable[str]) -> float:
    parts = costs.parts.get(step, {})
    return float(sum(parts.get(name, 0.0) for name in names))


def _eval_factor(costs: RunCosts, workers: int, episodes: int, assumptions: Assumptions) -> float:
    """Evaluation seconds at ``workers`` over those the run spent (episodes in rounds)."""
    episodes = max(episodes, 1)
    if costs.family == "rl":
        if assumptions.rl_eval != "parallel":
            return 1.0
        return math.ceil(episodes / workers) / episodes
    return math.ceil(episodes / workers) / math.ceil(episodes / min(costs.workers, episodes))


def _evaluation(
    costs: RunCosts, step: int, workers: int, assumptions: Assumptions, samples: float = 1.0
) -> float:
    """Evaluation and confirmation seconds at ``workers``; evaluations (one per so many
    timesteps) as many as ``samples`` times the run's."""
    parts = costs.parts.get(step, {})
    return samples * parts.get("evaluation", 0.0) * _eval_factor(
        costs, workers, costs.eval_episodes, assumptions
    ) + parts.get("confirmation", 0.0) * _eval_factor(
        costs, workers, costs.confirm_episodes, assumptions
    )


def es_point(
    costs: RunCosts,
    step: int,
    workers: int,
    assumptions: Assumptions,
    population: int | None = None,
    sample_cost: tuple[float, float] = (1.0, 1.0),
) -> Point:
    """The ES model at exactly ``workers`` workers, for the generations up to ``step``;
    ``population``: each generation's candidates (default: the run's own); ``sample_cost``:
    its generations and timesteps to the target over the run's own (measured ratios)."""
    n = costs.tasks[:step]
    work, longest, task_bytes = costs.work_s[:step], costs.longest_s[:step], costs.task_bytes[:step]
    head = _fixed(costs, step, ("head_update", "obs_sync"))
    weight, samples = sample_cost
    if population is not None:
        grow = population / n
        work, task_bytes, n = work * grow, task_bytes * grow, np.full(n.shape, float(population))
        head *= population / max(costs.population, 1)
    head *= weight  # each generation at the run's mean, as many as measured
    w = float(workers)
    spread = w < n
    episode_work = np.where(spread, work / w, work / n)
    stragglers = np.where(spread, (1 - 1 / w) * longest, np.maximum(longest - work / n, 0.0))
    sizes, index = np.unique(n, return_inverse=True)
    counts = np.array([_messages(int(k), min(workers, int(k)), costs.sync) for k in sizes])[index]
    data = task_bytes + np.minimum(w, n) * costs.target_bytes
    bandwidth = assumptions.bandwidth_gbps * 1e9 / 8
    # the head posts and reads every message in turn; each worker also waits the rest of a
    # round trip per message of its own, in parallel with the others
    head_s = min(assumptions.head_cost(costs.backend) or costs.message_s, costs.message_s)
    trips = counts / np.minimum(w, n) * (costs.message_s - head_s)
    terms = {
        "episode_work": float(episode_work.sum()) * weight,
        "stragglers": float(stragglers.sum()) * weight,
        "head_update": head,
        "messages": float((counts * head_s + trips + data / bandwidth).sum()) * weight,
        "evaluation": _evaluation(costs, step, workers, assumptions, samples),
        "bookkeeping": _fixed(costs, step, BOOKKEEPING_PARTS),
        "startup": _fixed(costs, step, STARTUP_PARTS),
    }
    generations = round(step * weight)
    return Point(workers, workers, sum(terms.values()), terms, population, generations)


def rl_point(
    costs: RunCosts,
    step: int,
    workers: int,
    assumptions: Assumptions,
    n_envs: int | None = None,
    samples: float = 1.0,
) -> Point:
    """The RL model at ``workers`` cores, for the chunks up to ``step``: rollouts over
    ``min(workers, n_envs)`` envs (default: the run's own ``n_envs``), updates serial;
    ``samples``: timesteps to the target over the run's own (a measured ratio), each at
    the run's own rollout and update cost per timestep."""
    envs = min(workers, n_envs or costs.n_envs)
    serial_rollout = float(costs.rollout_s[:step].sum()) * costs.parallel_envs * samples
    machine = assumptions.machine_for(costs.gym_id)
    episode_work, messages = serial_rollout / envs, 0.0
    if envs > 1 and machine is not None:
        # env processes only from two envs on (algorithms/sb3.py steps one env in the head,
        # DummyVecEnv): the head sends and awaits every env's step in turn; where the env
        # step was measured (its env), only the env steps spread over the env processes,
        # the policy and the buffer staying in the head. The messages cost more the longer
        # the head works between steps (the env processes sleep meanwhile): the head's
        # seconds per vectorised step are the run's own rollout less its env steps.
        steps_taken = float(np.nan_to_num(costs.timesteps[step - 1])) * samples
        env_part = 0.0
        if machine.env == costs.gym_id:
            env_part = min(serial_rollout, steps_taken * machine.env_step_s)
            episode_work = serial_rollout - env_part + env_part / envs
        vector_steps = max(steps_taken / costs.n_envs, 1.0)
        messages = steps_taken * machine.message_s((serial_rollout - env_part) / vector_steps)
    terms = {
        "episode_work": episode_work,
        "stragglers": 0.0,
        "head_update": float(costs.update_s[:step].sum()) * samples,
        "messages": messages,
        "evaluation": _evaluation(costs, step, workers, assumptions, samples),
        "bookkeeping": _fixed(costs, step, BOOKKEEPING_PARTS),
        "startup": _fixed(costs, step, STARTUP_PARTS),
    }
    return Point(workers, envs, sum(terms.values()), terms, None, step, n_envs=n_envs)


def point(costs: RunCosts, step: int, workers: int, assumptions: Assumptions) -> Point:
    """The model of ``costs``'s family at exactly ``workers`` workers (no choice of fewer)."""
    if costs.family == "es":
        return es_point(costs, step, workers, assumptions)
    return rl_point(costs, step, workers, assumptions)


@dataclass
class Projection:
    """One run's predicted time to the target at each core count."""

    costs: RunCosts
    target: float
    step: int | None
    timesteps: float | None
    measured_s: float | None
    points: list[Point]
    #: RL only: the same with ``n_envs`` raised to the cores (same timesteps assumed)
    envs_raised: list[Point]
    notes: list[str]

    @property
    def reached(self) -> bool:
        return self.step is not None


def _best_up_to(candidates: dict[int, Point], cores: Sequence[int]) -> list[Point]:
    """At each core count, the fastest point with at most that many workers."""
    out = []
    best: Point | None = None
    ordered = sorted(candidates)
    index = 0
    for c in sorted(cores):
        while index < len(ordered) and ordered[index] <= c:
            candidate = candidates[ordered[index]]
            if best is None or candidate.seconds < best.seconds:
                best = candidate
            index += 1
        assert best is not None
        out.append(replace(best, cores=c))
    order = {c: i for i, c in enumerate(sorted(cores))}
    return [out[order[c]] for c in cores]


def _measured_ratio(
    measured: dict[int, SampleCost], own: int, setting: int
) -> tuple[float, float] | None:
    """``setting``'s generations and timesteps to the target over the run's own setting's
    (None: either never reached it, or one was not measured)."""
    mine, theirs = measured.get(own), measured.get(setting)
    if mine is None or theirs is None:
        return None
    if None in (mine.generations, mine.timesteps, theirs.generations, theirs.timesteps):
        return None
    assert mine.generations and mine.timesteps and theirs.generations and theirs.timesteps
    return theirs.generations / mine.generations, theirs.timesteps / mine.timesteps


def _measured_why(measured: dict[int, SampleCost], own: int, setting: int, family: str) -> str:
    mine, theirs = measured[own], measured[setting]
    assert mine.timesteps is not None and theirs.timesteps is not None
    name = setting_name(family)
    return (
        f"{name} {setting:,} (measured {_steps(theirs.timesteps)} timesteps to R, "
        f"{_steps(mine.timesteps)} at {own:,})"
    )


def sample_text(measured: dict[int, SampleCost], family: str) -> str:
    """The measured sample costs in one line, per setting."""
    name = setting_name(family)
    return "; ".join(
        f"{name} {k:,}: "
        + (
            f"{_steps(c.timesteps)} timesteps, {c.generations:,.0f} "
            + ("generations" if family == "es" else "steps")
            if c.timesteps is not None and c.generations is not None
            else "never"
        )
        + f" ({c.reached} of {c.runs} runs reached R)"
        for k, c in measured.items()
    )


def _steps(timesteps: float) -> str:
    return f"{timesteps / 1e6:.2f}M" if timesteps >= 1e6 else f"{timesteps / 1e3:.0f}k"


def _picked(
    costs: RunCosts,
    step: int,
    fixed: Sequence[Point],
    cores: Sequence[int],
    assumptions: Assumptions,
    measured: dict[int, SampleCost],
) -> list[Point]:
    """At each core count ``W`` the fastest setting the user could pick: the run's own
    (``fixed``, its best at up to ``W`` workers); for an ES with ``--population-grows``
    ``population_per_worker x W'`` for each listed ``W' <= W``; and every population (ES,
    on ``min(W, population)`` workers) or ``n_envs`` (RL) whose sample cost was measured.
    Never slower than the run's own setting."""
    own = setting_of(costs)
    per_worker = costs.population_per_worker or 1.0
    ratios = {k: r for k in measured if k != own and (r := _measured_ratio(measured, own, k))}
    cache: dict[tuple[int, int], Point] = {}

    def option(setting: int, c: int, why: str) -> Point:
        ratio = ratios.get(setting, (1.0, 1.0))
        key = (setting, min(c, setting) if costs.family == "es" else c)
        if key not in cache:
            cache[key] = (
                es_point(costs, step, key[1], assumptions, setting, ratio)
                if costs.family == "es"
                else rl_point(costs, step, c, assumptions, setting, ratio[1])
            )
        return replace(cache[key], choice=why)

    out: list[Point] = []
    for c, mine in zip(cores, fixed, strict=True):
        options = [
            replace(
                mine,
                population=costs.population if costs.family == "es" else None,
                n_envs=costs.n_envs if costs.family == "rl" else None,
                choice=OWN_SETTING,
            )
        ]
        if costs.family == "es" and assumptions.population_grows:
            for listed in sorted({w for w in cores if w <= c}):
                population = max(round(per_worker * listed), 1)
                if population not in measured:
                    why = f"{per_worker:g} per worker x {listed:,} (unmeasured)"
                    options.append(option(population, c, why))
        for setting in sorted(ratios):
            options.append(option(setting, c, _measured_why(measured, own, setting, costs.family)))
        if out and out[-1].cores <= c:  # more cores can always run as fewer did
            options.append(out[-1])
        best = min(options, key=lambda p: p.seconds)  # the first of equals: the run's own
        out.append(replace(best, cores=c))
    return out


def project(
    costs: RunCosts, target: float, cores: Sequence[int], assumptions: Assumptions
) -> Projection:
    """Predict ``costs``'s time to ``target`` at each of ``cores`` (see the module docstring)."""
    step = reached_step(costs, target)
    notes: list[str] = []
    if costs.mixed_workers:
        notes.append("resumed at other worker counts on the way: no measured time at one W")
    if costs.family == "es":
        notes.append(f"longest task: {costs.longest_source}")
    elif not costs.split_recorded:
        notes.append(
            "rollout/update split not recorded: all of learn_s counted as rollout "
            "(optimistic for RL)"
        )
    if step is None:
        best = max((v for _, v in costs.evals), default=math.nan)
        notes.append(f"never reached {target:g} (best evaluation {best:.4g})")
        return Projection(costs, target, None, None, None, [], [], notes)
    top = max(cores)
    if costs.family == "es":
        cap = min(top, int(costs.tasks[:step].max()))
        if top > cap:
            notes.append(f"population cap: at most {cap} workers (one per candidate)")
    else:
        cap = min(top, costs.n_envs)
        if top > cap:
            notes.append(
                f"at most n_envs = {costs.n_envs} core{'s' * (costs.n_envs > 1)} "
                f"({costs.n_envs_source or 'the run'}); the variant with n_envs raised to W "
                "is shown apart"
            )
    candidates = {w: point(costs, step, w, assumptions) for w in range(1, cap + 1)}
    points = _best_up_to(candidates, cores)
    measured = sample_costs(assumptions.samples, costs, target)
    if measured and _measured_ratio(measured, setting_of(costs), setting_of(costs)) is None:
        notes.append(
            f"sample costs measured at {', '.join(f'{k:,}' for k in measured)}, but not at "
            f"the run's own {setting_of(costs):,} (or never reaching R there): not used"
        )
    if (costs.family == "es" and assumptions.population_grows) or measured:
        points = _picked(costs, step, points, cores, assumptions, measured)
    raised: list[Point] = []
    if costs.family == "rl":
        raised = [rl_point(costs, step, c, assumptions, n_envs=c) for c in cores]
    return Projection(
        costs,
        target,
        step,
        float(costs.timesteps[step - 1]),
        measured_seconds(costs, step),
        points,
        raised,
        notes,
    )


# -- the target --------------------------------------------------------------------------------


def final_median(projections: Iterable[RunCosts]) -> float:
    """The median over runs of their last evaluation return."""
    finals = [c.final_return for c in projections if math.isfinite(c.final_return)]
    return float(statistics.median(finals)) if finals else math.nan


def choose_target(
    runs: Sequence[RunCosts], reference: tuple[float, str] | None
) -> tuple[float, str] | None:
    """The return level of one env's comparison, and where it comes from.

    The reference (the env's solved threshold, the benchmark task's reference score) where
    every family present has an algorithm whose median run reaches it; else
    :data:`TARGET_FRACTION` of the way from the runs' first evaluation (median) to the
    lower of the families' best median final score (with both families: a score both
    reach; with RL alone: the best RL's final score); else the reference; else None.
    """
    families: dict[str, dict[str, list[RunCosts]]] = {}
    for costs in runs:
        families.setdefault(costs.family, {}).setdefault(costs.name, []).append(costs)
    if not families:
        return reference

    def majority_reach(level: float) -> bool:
        return all(
            any(
                sum(reached_step(c, level) is not None for c in members) * 2 > len(members)
                for members in algos.values()
            )
            for algos in families.values()
        )

    if reference is not None and majority_reach(reference[0]):
        return reference
    if "rl" in families:
        best = {
            family: max(final_median(members) for members in algos.values())
            for family, algos in families.items()
        }
        from harness.report.stats import NOISE_UNITS, default_level

        first = float(statistics.median(c.first_return for c in runs if c.evals))
        lower = min(best.values())
        noise = evaluation_spread(runs)
        level = default_level(first, lower, noise, TARGET_FRACTION)
        if math.isfinite(level):
            whose = (
                "the lower of the best ES's and the best RL's median final score"
                if len(best) > 1
                else "the best RL's median final score"
            )
            if level >= lower:  # the whole margin lies inside the noise
                how = (
                    f"{whose} itself ({lower:.4g}): it is less than {NOISE_UNITS:g} x the "
                    f"evaluation noise ({noise:.3g}) above the first evaluation ({first:.4g}), "
                    "so a crossing of it may be noise"
                )
            else:
                floor = (
                    f", at least {NOISE_UNITS:g} x the evaluation noise ({noise:.3g}) above "
                    "the first"
                    if math.isfinite(noise)
                    else ""
                )
                how = (
                    f"{TARGET_FRACTION:g} of the way from the first evaluation ({first:.4g}) to "
                    f"{whose} ({lower:.4g}){floor}"
                )
            return level, how + (
                f"; the reference {reference[0]:g} is not reached" if reference else ""
            )
    return reference


def evaluation_spread(runs: Sequence[RunCosts], last: int = 3) -> float:
    """The evaluation noise of ``runs``: the median over runs of the standard deviation of
    their last ``last`` evaluation returns (as :func:`harness.report.stats.evaluation_noise`
    reads it from a report's tables); NaN where no run has two evaluations."""
    spreads = [
        float(np.std([value for _, value in c.evals[-last:]], ddof=1))
        for c in runs
        if len(c.evals[-last:]) > 1
    ]
    return float(statistics.median(spreads)) if spreads else math.nan


def anchor_reference(gym_id: str, env: str) -> tuple[float, str] | None:
    """The env's solved threshold from ``experiments/anchors.yaml``, if it lists one."""
    from harness.report.anchors import AnchorError, load_anchors

    try:
        anchors = load_anchors()
    except AnchorError:
        return None
    for anchor in anchors:
        if anchor.kind == "threshold" and anchor.applies_to(env, gym_id):
            return anchor.value, f"the solved threshold {anchor.value:g} ({anchor.source})"
    return None


# -- per algorithm -----------------------------------------------------------------------------


@dataclass
class AlgorithmProjection:
    """One algorithm's runs on one env: the median run's projection at each core count."""

    env: str
    algo: str
    family: str
    target: float
    #: the runs projected (those at the fewest workers this algorithm was run with)
    runs: list[Projection]
    #: (cores, median seconds or None, reached count, the median run's point)
    median: list[tuple[int, float | None, Point | None]]
    #: per core count, the 95% band of the median (:func:`median_band`)
    band: list[tuple[float | None, float | None]]
    #: measured medians per recorded worker count: (workers, seconds, runs that reached)
    measured: list[tuple[int, float, int, int]]
    notes: list[str]
    #: the start-up every projected time holds (:func:`least_startup`) and its label
    startup: float | None = None
    startup_label: str = ""

    @property
    def reached(self) -> int:
        return sum(p.reached for p in self.runs)


def lower_median(values: Sequence[float | None]) -> float | None:
    """The lower median with a missing value (a run that never reached) counted as the
    longest; None when half or more are missing, so a median always is one run's time."""
    ordered = sorted(math.inf if v is None else v for v in values)
    if not ordered or not math.isfinite(ordered[(len(ordered) - 1) // 2]):
        return None
    return ordered[(len(ordered) - 1) // 2]


def band_text(band: tuple[float | None, float | None]) -> str:
    """``[12.1, 30.4]``, an open end as "never"."""
    low, high = band
    if low is None:
        return "[never]"
    return f"[{short_seconds(low)}, {short_seconds(high) if high is not None else 'never'}]"


def short_seconds(seconds: float) -> str:
    """Seconds as tables print them: whole from 100 on, else to a tenth (no unit)."""
    return f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.1f}"


def median_band(
    values: Sequence[float | None], resamples: int = BAND_RESAMPLES
) -> tuple[float | None, float | None]:
    """The 95% percentile-bootstrap band of :func:`lower_median` over ``values``, one per
    run (None: never reached, counted as the longest): the runs are resampled with
    replacement, ``resamples`` times from :data:`BAND_SEED`. An end is None where the
    resampled medians there are "never" (over half the resampled runs never reached)."""
    if not values:
        return None, None
    times = np.array([math.inf if v is None else float(v) for v in values])
    rng = np.random.default_rng(BAND_SEED)
    picks = np.sort(times[rng.integers(0, len(times), (resamples, len(times)))], axis=1)
    medians = picks[:, (len(times) - 1) // 2]
    low, high = np.quantile(medians, [0.025, 0.975], method="inverted_cdf")
    return (
        float(low) if math.isfinite(low) else None,
        float(high) if math.isfinite(high) else None,
    )


def _median_point(points: list[Point | None]) -> Point | None:
    """The lower-median run's point (a point, so its terms sum to its time), None when
    fewer than half the runs reached the target."""
    times = sorted((p.seconds if p is not None else math.inf, i) for i, p in enumerate(points))
    if not times:
        return None
    seconds, index = times[(len(times) - 1) // 2]
    return points[index] if math.isfinite(seconds) else None


def by_algorithm(
    projections: Sequence[Projection], cores: Sequence[int]
) -> list[AlgorithmProjection]:
    """Group the runs' projections per (env, algorithm, or the report's group where the
    runs carry one: :attr:`RunCosts.name`): medians over the runs at the fewest workers,
    and the measured times at every worker count recorded."""
    groups: dict[tuple[str, str], list[Projection]] = {}
    for item in projections:
        groups.setdefault((item.costs.env, item.costs.name), []).append(item)
    out = []
    for (env, algo), members in sorted(groups.items()):
        fewest = min(m.costs.workers for m in members)
        base = [m for m in members if m.costs.workers == fewest]
        startup, startup_label = least_startup([m.costs for m in members])
        median: list[tuple[int, float | None, Point | None]] = []
        band = []
        for i, c in enumerate(cores):
            points = [_with_startup(m.points[i], startup) if m.reached else None for m in base]
            chosen = _median_point(points)
            median.append((c, chosen.seconds if chosen else None, chosen))
            band.append(median_band([p.seconds if p is not None else None for p in points]))
        measured = []
        one_w = [m for m in members if not m.costs.mixed_workers]
        for w in sorted({m.costs.workers for m in one_w}):
            at_w = [m for m in one_w if m.costs.workers == w]
            times = [m.measured_s for m in at_w if m.measured_s is not None]
            seconds = lower_median([m.measured_s for m in at_w])
            if seconds is not None:
                measured.append((w, seconds, len(times), len(at_w)))
        notes = sorted({note for m in base for note in m.notes if not note.startswith("never")})
        out.append(
            AlgorithmProjection(
                env,
                algo,
                members[0].costs.family,
                members[0].target,
                base,
                median,
                band,
                measured,
                notes,
                startup,
                startup_label,
            )
        )
    return out


def run_startup(costs: RunCosts) -> float | None:
    """A run's measured start-up (process start, setup, worker start) as of its first
    recorded breakdown; None where it recorded none."""
    return _fixed(costs, min(costs.parts), STARTUP_PARTS) if costs.parts else None


def least_startup(runs: Sequence[RunCosts]) -> tuple[float | None, str]:
    """The least start-up any of ``runs`` measured (the least-loaded run's: start-up is
    imports and setup, which a busy machine only slows), and a label saying so."""
    measured = sorted(s for s in map(run_startup, runs) if s is not None)
    if not measured:
        return None, "start-up: none recorded (each run's own, 0 s)"
    if len(measured) == 1:
        return measured[0], f"start-up {measured[0]:.2f} s: its one run's measured"
    spread = (
        f"{measured[0]:.2f} to {measured[-1]:.2f} s"
        if f"{measured[0]:.2f}" != f"{measured[-1]:.2f}"
        else f"all {measured[0]:.2f} s"
    )
    return measured[0], (
        f"start-up {measured[0]:.2f} s: the least of its {len(measured)} runs' measured "
        f"({spread}; the least-loaded run's), at every W"
    )


def _with_startup(point: Point, startup: float | None) -> Point:
    """``point`` with its start-up term ``startup`` (None: as it is)."""
    if startup is None:
        return point
    terms = {**point.terms, "startup": startup}
    return replace(point, seconds=sum(terms.values()), terms=terms)


def es_first_from(
    es: Sequence[tuple[int, float | None]], rl: Sequence[tuple[int, float | None]]
) -> int | None:
    """The fewest cores from which ES is faster at every larger core count listed, or None."""
    first: int | None = None
    for (c, e), (_, r) in zip(es, rl, strict=True):
        wins = e is not None and (r is None or e < r)
        if wins and first is None:
            first = c
        elif not wins:
            first = None
    return first


def best_of(
    algorithms: Sequence[AlgorithmProjection], family: str, cores: Sequence[int]
) -> list[tuple[int, float | None, str]]:
    """Per core count, the fastest median time among ``family``'s algorithms, and whose."""
    out = []
    for i, c in enumerate(cores):
        best: tuple[float, str] | None = None
        for item in algorithms:
            seconds = item.median[i][1]
            if (
                item.family == family
                and seconds is not None
                and (best is None or seconds < best[0])
            ):
                best = (seconds, item.algo)
        out.append((c, best[0] if best else None, best[1] if best else "—"))
    return out


# -- the command -------------------------------------------------------------------------------


def _finite(name: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{name} must be finite, got {text!r}")
        return value

    return parse


def _positive_int(name: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {value}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUNS",
        help="runs directories, run directories or run archives (RUNS.tar.xz) to project",
    )
    parser.add_argument(
        "--cores",
        type=_positive_int("--cores"),
        nargs="+",
        default=list(DEFAULT_CORES),
        help="core counts to project to (default: 1 2 4 8 16 64 256 1440)",
    )
    parser.add_argument(
        "--target",
        type=_finite("--target"),
        default=None,
        metavar="R",
        help="the evaluation return to reach (default per env: its solved threshold from "
        "experiments/anchors.yaml where the runs reach it, else 0.9 of the way from the first "
        "evaluation to the best RL's, or both families' lower best, median final score)",
    )
    parser.add_argument(
        "--sweep",
        default=None,
        metavar="NAME",
        help="only the runs of this sweep (their config's `sweep`)",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs whose config has KEY = VALUE (as `harness report --where`; "
        "repeatable: all must hold), e.g. population=40 or params.sigma=0.05",
    )
    parser.add_argument(
        "--population-grows",
        action="store_true",
        help="at each W an ES may also run population_per_worker x W' candidates (W' <= W); "
        "the fastest population is taken, never slower than the run's own; the effect on "
        "generations to R is unmeasured",
    )
    parser.add_argument(
        "--sample-costs",
        type=Path,
        nargs="*",
        default=[SAMPLE_COSTS],
        metavar="RUNS",
        help="runs of an algorithm at several populations (ES) or n_envs (RL) whose measured "
        "timesteps to R the projection may pick from at each W (default: the committed "
        "reports/benchmarks/sample_costs; none: --sample-costs with no RUNS)",
    )
    parser.add_argument(
        "--bandwidth-gbps",
        type=_finite("--bandwidth-gbps"),
        default=DEFAULT_BANDWIDTH_GBPS,
        help="the head's network bandwidth, Gbit/s (default: 10)",
    )
    parser.add_argument(
        "--message-costs",
        type=Path,
        default=MESSAGE_COSTS,
        metavar="FILE",
        help="a `harness bench scaling --json` output: the head's measured cost of one "
        "message per backend (default: reports/benchmarks/scaling_ant.json)",
    )
    parser.add_argument(
        "--machine",
        type=Path,
        nargs="+",
        default=list(MACHINES),
        metavar="FILE",
        help="`harness bench ceiling --vec-envs N --json` outputs: RL env processes' message "
        "cost per env step, each used for its env, the first for the others (default: "
        "reports/benchmarks/projection_lander/machine.json, projection_heldout/"
        "machine_pendulum.json)",
    )
    parser.add_argument("--per-run", action="store_true", help="also print every run's own table")


def configurations(
    dirs: Sequence[Path], sweep: str | None = None, where: Sequence[str] = ()
) -> dict[Path, str]:
    """The runs of ``dirs`` that pass ``--sweep``/``--where`` (as ``harness report`` and
    :func:`harness.load_runs` filter them), each with its configuration's label: a report's
    group but for the worker count, so one configuration's runs at every W are projected
    together and two configurations of one algorithm (populations 8 and 40) apart.

    Raises :class:`UsageError` for a filter that leaves no run."""
    import warnings

    from harness.records import flatten_config, load_runs
    from harness.report import data as d
    from harness.report import filters

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged run: read_costs names it
        table = load_runs(dirs)
    try:
        table = filters.apply(table, filters.make_filters(sweep=sweep, where=list(where)))
    except filters.FilterError as error:
        raise UsageError(str(error)) from None
    table = table.select(["COMPLETED"])
    if not len(table):
        return {}
    runs = d.run_extras(table.runs, table.records, table.steps)
    counted = set(runs.loc[runs["n_params"].notna(), "run"]) if "n_params" in runs else set()
    recorded = {
        label: [*flatten_config(record.config), *(["n_params"] if label in counted else [])]
        for label, record in table.records.items()
    }
    settings = [
        c
        for c in (*d.settings_columns(r.config for r in table.records.values()), "n_params")
        if c != "workers"
    ]
    grouped = d.add_groups(runs.drop(columns=["workers"], errors="ignore"), settings, recorded)
    return {
        Path(table.record(str(run)).path): str(group)
        for run, group in zip(grouped["run"], grouped[d.GROUP], strict=True)
    }


def load(
    paths: Sequence[str | Path], sweep: str | None = None, where: Sequence[str] = ()
) -> tuple[list[RunCosts], list[tuple[str, str]]]:
    """Every run under ``paths`` that passes ``sweep``/``where`` as model inputs, each
    labelled with its configuration (:func:`configurations`), and (run, reason) for those
    left out.

    Raises :class:`UsageError` for a path that is neither a run, a runs directory nor a run
    archive, when no run is found at all, or when a filter leaves none."""
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"RUNS {str(path)!r} does not exist")
    try:
        dirs = rundir.find_run_dirs(paths)
    except rundir.UnreadableRun as error:
        raise UsageError(str(error).splitlines()[0]) from None
    if not dirs:
        raise UsageError(f"no runs under {', '.join(map(str, paths))}")
    groups = configurations(dirs, sweep, where)
    if sweep or where:
        dirs = [run_dir for run_dir in dirs if run_dir in groups]
    costs, skipped = [], []
    for run_dir in dirs:
        read = read_costs(run_dir)
        if isinstance(read, str):
            skipped.append((rundir.stored_location(run_dir), read))
        else:
            read.group = groups.get(run_dir, "")
            costs.append(read)
    return costs, skipped


def project_all(
    costs: Sequence[RunCosts],
    cores: Sequence[int],
    assumptions: Assumptions,
    target: float | None = None,
    references: dict[str, tuple[float, str] | None] | None = None,
) -> tuple[dict[str, tuple[float, str]], list[Projection], list[str]]:
    """Targets per env, every run's projection, and the envs that have no target.

    ``target`` overrides every env's; ``references`` gives an env's reference (default: its
    solved threshold from the anchors)."""
    per_env: dict[str, list[RunCosts]] = {}
    for item in costs:
        per_env.setdefault(item.env, []).append(item)
    targets: dict[str, tuple[float, str]] = {}
    missing: list[str] = []
    projections: list[Projection] = []
    for env, runs in per_env.items():
        if target is not None:
            chosen: tuple[float, str] | None = (target, "--target")
        else:
            reference = (
                references[env]
                if references is not None and env in references
                else anchor_reference(runs[0].gym_id, env)
            )
            chosen = choose_target(runs, reference)
        if chosen is None:
            missing.append(env)
            continue
        targets[env] = chosen
        projections += [project(run, chosen[0], cores, assumptions) for run in runs]
    return targets, projections, missing


def _point_row(point: Point) -> dict[str, Any]:
    return {
        "cores": point.cores,
        "workers": point.workers,
        "population": point.population,
        **({"n_envs": point.n_envs} if point.n_envs else {}),
        **({"picked": point.choice} if point.choice else {}),
        "seconds": point.seconds,
        **point.terms,
    }


def _columns(setting: str | None, band: bool = False) -> list[tuple[str, str, str]]:
    """The table's columns; ``setting``: the knob picked per core count ("population",
    "n_envs"), None where nothing was picked."""
    columns = [("cores", "cores", "d"), ("workers", "workers used", "d")]
    if setting:
        columns += [(setting, setting, "d"), ("picked", "picked", "")]
    columns.append(("seconds", "time to R s", ".1f"))
    if band:
        columns.append(("band", "95% band s", ""))
    columns += [(term, TERM_HEADINGS[term], ".2f") for term in TERMS]
    return columns


def _setting(family: str, picked: bool) -> str | None:
    return setting_name(family) if picked else None


def render(
    algorithms: Sequence[AlgorithmProjection],
    projections: Sequence[Projection],
    targets: dict[str, tuple[float, str]],
    assumptions: Assumptions,
    per_run: bool,
) -> str:
    """The tables: per algorithm (its median run), then, with ``per_run``, every run."""
    lines = [*assumptions.lines()]
    for env, (value, source) in targets.items():
        lines += ["", f"{env}: R = {value:.4g} ({source})"]
        for item in [a for a in algorithms if a.env == env]:
            measured = "; ".join(
                f"W={w}: {s:.1f} s ({k} of {n} runs reached R)" for w, s, k, n in item.measured
            )
            lines += [
                "",
                f"{item.algo} ({item.family}): {item.reached} of {len(item.runs)} runs at "
                f"W={item.runs[0].costs.workers} reached R"
                + (f"; measured medians {measured}" if measured else ""),
            ]
            lines += [f"  {note}" for note in [item.startup_label, *item.notes]]
            settings = sample_costs(assumptions.samples, item.runs[0].costs, value)
            if settings:
                lines.append(f"  sample costs to R: {sample_text(settings, item.family)}")
            rows = [
                {
                    **(_point_row(p) if p is not None else {"cores": c, "seconds": None}),
                    "band": band_text(band),
                }
                for (c, _, p), band in zip(item.median, item.band, strict=True)
            ]
            if all(p is None for _, _, p in item.median):
                lines.append("  never reached by the median run")
                continue
            picked = any(p is not None and p.choice for _, _, p in item.median)
            lines.append(format_table(rows, _columns(_setting(item.family, picked), band=True)))
            if item.family == "rl":
                chosen = _median_point([m.envs_raised[0] if m.reached else None for m in item.runs])
                if chosen is not None:
                    run = next(m for m in item.runs if chosen in m.envs_raised)
                    raised = [
                        {"cores": p.cores, "envs": p.workers, "seconds": p.seconds}
                        for p in (_with_startup(q, item.startup) for q in run.envs_raised)
                    ]
                    lines += [
                        "  variant: n_envs raised to W (same timesteps to R assumed; its "
                        "sample-efficiency cost is unmeasured)",
                        format_table(
                            raised,
                            [
                                ("cores", "cores", "d"),
                                ("envs", "n_envs", "d"),
                                ("seconds", "time to R s", ".1f"),
                            ],
                        ),
                    ]
    if per_run:
        for one in projections:
            costs = one.costs
            lines += ["", f"run {costs.label}: {costs.algo} seed {costs.seed} W={costs.workers}"]
            lines += [f"  {note}" for note in one.notes]
            if one.reached:
                lines.append(
                    f"  reached R at step {one.step}, {one.timesteps:.0f} timesteps; measured "
                    + (f"{one.measured_s:.1f} s" if one.measured_s is not None else "—")
                )
                setting = _setting(costs.family, any(p.choice for p in one.points))
                lines.append(format_table([_point_row(p) for p in one.points], _columns(setting)))
    return "\n".join(lines)


def to_json(
    algorithms: Sequence[AlgorithmProjection],
    projections: Sequence[Projection],
    targets: dict[str, tuple[float, str]],
    assumptions: Assumptions,
    cores: Sequence[int],
    skipped: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """Everything the tables show, and every run's projection, as JSON."""
    return {
        "model_version": MODEL_VERSION,
        "cores": list(cores),
        "targets": {env: {"value": v, "source": s} for env, (v, s) in targets.items()},
        "assumptions": {
            "bandwidth_gbps": assumptions.bandwidth_gbps,
            "population_grows": assumptions.population_grows,
            "sample_costs": assumptions.samples_source or None,
            "rl_eval": assumptions.rl_eval,
            "text": assumptions.lines(),
        },
        "algorithms": [
            {
                "env": a.env,
                "algo": a.algo,
                "algorithm": a.runs[0].costs.algo,
                "family": a.family,
                "target": a.target,
                "runs": len(a.runs),
                "reached": a.reached,
                "notes": a.notes,
                "startup": {"seconds": a.startup, "label": a.startup_label},
                "sample_costs": {
                    str(k): dataclasses.asdict(c)
                    for k, c in sample_costs(assumptions.samples, a.runs[0].costs, a.target).items()
                },
                "projection": [
                    {
                        **(_point_row(p) if p is not None else {"cores": c, "seconds": None}),
                        "band_95": list(band),
                    }
                    for (c, _, p), band in zip(a.median, a.band, strict=True)
                ],
                "measured": [
                    {"workers": w, "seconds": s, "reached": k, "runs": n}
                    for w, s, k, n in a.measured
                ],
            }
            for a in algorithms
        ],
        "runs": [
            {
                "run": p.costs.label,
                "algo": p.costs.algo,
                "family": p.costs.family,
                "env": p.costs.env,
                "seed": p.costs.seed,
                "workers": p.costs.workers,
                "target": p.target,
                "reached": p.reached,
                "reached_step": p.step,
                "reached_timesteps": p.timesteps,
                "measured_s": p.measured_s,
                "inputs": _inputs(p.costs),
                "notes": p.notes,
                "projection": [_point_row(q) for q in p.points],
                "n_envs_raised": (
                    [
                        {"cores": q.cores, "n_envs": q.workers, "seconds": q.seconds}
                        for q in p.envs_raised
                    ]
                    if p.costs.family == "rl"
                    else None
                ),
                "n_envs_raised_samples": "unmeasured" if p.costs.family == "rl" else None,
            }
            for p in projections
        ],
        "skipped": [{"run": run, "reason": reason} for run, reason in skipped],
    }


def _inputs(costs: RunCosts) -> dict[str, Any]:
    if costs.family == "es":
        return {
            "population": costs.population,
            "population_per_worker": costs.population_per_worker,
            "message_s": costs.message_s,
            "target_bytes": costs.target_bytes,
            "longest_task": costs.longest_source,
            "sync": costs.sync,
        }
    return {
        "n_envs": costs.n_envs,
        "n_envs_source": costs.n_envs_source,
        "parallel_envs_in_run": costs.parallel_envs,
        "split_recorded": costs.split_recorded,
    }


def run(args: argparse.Namespace) -> int:
    for path in args.sample_costs:
        if not path.exists() and path != SAMPLE_COSTS:
            raise UsageError(f"--sample-costs {str(path)!r} does not exist")
    if not args.bandwidth_gbps > 0:
        raise UsageError(f"--bandwidth-gbps must be positive, got {args.bandwidth_gbps:g}")
    if args.json is not None:
        check_writable_dir(args.json.absolute().parent, "--json folder")
        if args.json.is_dir():
            raise UsageError(f"--json {str(args.json)!r} is a directory")
    if not args.message_costs.is_file() and args.message_costs != MESSAGE_COSTS:
        raise UsageError(f"--message-costs {str(args.message_costs)!r} is not a file")
    head_costs, head_source = message_costs(args.message_costs)
    machines = machines_of(args.machine)
    samples, samples_source = read_samples(args.sample_costs)
    assumptions = Assumptions(
        machines=machines,
        bandwidth_gbps=args.bandwidth_gbps,
        population_grows=args.population_grows,
        samples=samples,
        samples_source=samples_source,
        head_message_s=head_costs,
        head_message_source=head_source,
    )
    costs, skipped = load(args.runs, args.sweep, args.where)
    if not costs:
        reasons = "; ".join(f"{run}: {why}" for run, why in skipped[:3])
        raise UsageError(f"no run under {', '.join(args.runs)} can be projected ({reasons})")
    cores = list(dict.fromkeys(args.cores))
    targets, projections, missing = project_all(costs, cores, assumptions, args.target)
    if missing:
        raise UsageError(
            f"no default target for {', '.join(missing)} (no solved threshold, no RL run): "
            "give --target R"
        )
    algorithms = by_algorithm(projections, cores)
    print(render(algorithms, projections, targets, assumptions, args.per_run))
    for run_label, reason in skipped:
        print(f"skipped {run_label}: {reason}")
    save_json(to_json(algorithms, projections, targets, assumptions, cores, skipped), args.json)
    return 0
