"""Frames derived from a :class:`~harness.records.RunTable` for plots and tables.

Group labels (one group per configuration), the captions that name env,
budget, seeds and machine, eval curves on a common grid, the common budget
(timesteps or wall-clock every run of an env reached) and each run's score
there, bytes per generation, and what a run's artifacts add to its metrics
(``summary.json``: CPU-seconds, time to target, the wall-clock breakdown;
``policy_spec.json``: the parameter count). Pure pandas/numpy apart from
reading those two small JSON files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from harness import rundir

GROUP = "group"


def fmt_number(value: float) -> str:
    if value >= 1e6 and value % 1e5 == 0:
        return f"{value / 1e6:g}M"
    if value >= 1e3 and value % 100 == 0:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def budget_phrase(get: Callable[[str], Any]) -> str:
    """``20k timesteps or return 200`` from a lookup of the budget keys; "" when none is set."""
    parts = []
    if _present(get("timesteps")):
        parts.append(f"{fmt_number(float(get('timesteps')))} timesteps")
    if _present(get("generations")):
        parts.append(f"{fmt_number(float(get('generations')))} generations")
    if _present(get("time_limit")):
        parts.append(f"{fmt_number(float(get('time_limit')))} s")
    if _present(get("cpu_limit")):
        parts.append(f"{fmt_number(float(get('cpu_limit')))} CPU-s")
    if _present(get("target_return")):
        parts.append(f"return {float(get('target_return')):g}")
    partner = get("paired_with")
    if _present(partner) and partner:
        # a pair (harness.pairing): the lead to its limits, beside its follower; the
        # follower, without a limit of its own, to the lead's CPU-seconds
        return (
            f"{' or '.join(parts)} beside its paired {partner} run"
            if parts
            else f"the CPU-seconds of its paired {partner} run"
        )
    return " or ".join(parts)


def budget_text(runs: pd.DataFrame) -> str:
    """The budgets of these runs in words, e.g. ``20k timesteps`` or ``600 s or return 200``
    (a CPU limit: ``900 CPU-s``)."""
    texts: list[str] = []
    for _, row in runs.iterrows():
        values = {
            key[len("budget_") :]: value
            for key, value in row.items()
            if str(key).startswith("budget_")
        }
        text = budget_phrase(values.get) or "no budget recorded"
        if text not in texts:
            texts.append(text)
    return "; ".join(texts) if texts else "no runs"


def seeds_text(runs: pd.DataFrame) -> str:
    """``seeds 0, 1, 2`` (with runs per group when groups differ in size)."""
    if "seed" not in runs or runs.empty:
        return "no seeds"
    seeds = sorted({int(s) for s in runs["seed"].dropna()})
    listed = ", ".join(str(s) for s in seeds[:8]) + (", ..." if len(seeds) > 8 else "")
    word = "seed" if len(seeds) == 1 else "seeds"
    return f"{word} {listed}"


def _platform(row: pd.Series) -> str:
    platform = str(row.get("host_platform") or "")
    system = platform.split("-")[0] if platform else "unknown OS"
    arch = re.search(r"(x86_64|aarch64|arm64|amd64|i686)", platform)
    return f"{system} {arch.group(1)}" if arch else system


def machine_text(runs: pd.DataFrame) -> str:
    """The machines these runs ran on: OS, CPU model and CPU count from the host info."""
    if runs.empty:
        return "no machine"
    texts: list[str] = []
    for _, row in runs.iterrows():
        count = row.get("host_cpu_count")
        cpus = f"{int(count)} CPUs" if _present(count) else "CPU count not recorded"
        cpu = str(row.get("host_cpu") or "unknown CPU")
        text = f"{_platform(row)}, {cpu}, {cpus}"
        if text not in texts:
            texts.append(text)
    if len(texts) > 2:
        return f"{len(texts)} machines ({texts[0]}; ...)"
    return "; ".join(texts)


def env_text(runs: pd.DataFrame) -> str:
    names = []
    ids = runs["gym_id"] if "gym_id" in runs else runs["env"]
    pairs = pd.DataFrame({"env": runs["env"], "gym_id": ids}).drop_duplicates()
    for env, gym_id in pairs.itertuples(index=False):
        text = str(env) if not gym_id or gym_id == env else f"{env} ({gym_id})"
        if text not in names:
            names.append(text)
    return ", ".join(names)


def caption(runs: pd.DataFrame, extra: str = "") -> str:
    """One line naming env, budget, seeds and machine of ``runs``."""
    parts = [env_text(runs), f"budget {budget_text(runs)}", seeds_text(runs), machine_text(runs)]
    if extra:
        parts.append(extra)
    return " · ".join(p for p in parts if p)


@lru_cache(maxsize=64)
def episodes_knob_applies(algo: Any) -> bool:
    """Whether ``k`` (episodes per fitness) is a knob of this algorithm: of every family
    but RL, by the family the algorithm declares; an algorithm this process does not
    know keeps it."""
    from algorithms.registry import family_of

    return family_of(algo) != "rl"


def varying(runs: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` takes two or more values among the runs that recorded it.

    A key missing from some runs (recorded before it existed) is not a difference.
    """
    if column not in runs:
        return False
    values = runs[column].dropna()
    return values.astype(str).nunique() > 1


#: Config columns that never make two runs different configurations: identity and
#: bookkeeping (how often to checkpoint or log the population does not change a result).
NOT_SETTINGS = frozenset(
    {
        "seed",
        "sweep",
        "tuned",
        "defaults",
        "defaults_sha256",
        "ray_address",
        "checkpoint_every",
        "checkpoint_every_seconds",
        "population_log_every",
    }
)


@lru_cache(maxsize=1)
def defaults_older_runs_followed() -> dict[str, Any]:
    """Knobs whose default is what the code did before they existed, with that default.

    A run recorded before such a knob behaved as its default does, so it groups with
    runs that recorded the default and its rebuilt command needs no warning.
    """
    try:
        from harness import schema
    except ImportError:
        return {}
    return {k.name: k.default for k in schema.knobs() if k.default_is_the_old_behaviour}


def settings_columns(configs: Iterable[dict[str, Any]]) -> list[str]:
    """Columns (as :func:`harness.records.flatten_config` names them) that define a
    configuration: every config key but the seed and bookkeeping, in first-seen order."""
    from harness.records import flatten_config

    seen: dict[str, None] = {}
    for config in configs:
        for column in flatten_config(config):
            if column not in NOT_SETTINGS:
                seen.setdefault(column, None)
    return list(seen)


def _short_key(column: str) -> str:
    names = {"episodes_per_fitness": "k", "workers": "w", "n_params": "parameters"}
    return names.get(column, column.split(".")[-1].removeprefix("budget_"))


def _value_text(value: Any) -> str:
    if not _present(value):
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _float_or_none(text: Any) -> float | None:
    if not isinstance(text, str) or not any(c in text for c in ".eE"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _shortest_distinct(texts: pd.Series) -> pd.Series:
    """``texts`` with each float written to the fewest significant digits (at least 3) that
    keep the column's distinct values distinct: a tuned learning rate labels its group as
    0.0242, not 0.024225022473841774, and two settings never share a label."""
    floats = {t: f for t in texts.dropna().unique() if (f := _float_or_none(t)) is not None}
    if not floats:
        return texts
    distinct = set(floats.values())
    for digits in range(3, 18):
        short = {t: f"{f:.{digits}g}" for t, f in floats.items()}
        if len(set(short.values())) == len(distinct):
            break
    return texts.map(lambda t: short.get(t, t) if isinstance(t, str) else t)


_UNRECORDED = object()


def add_groups(
    runs: pd.DataFrame,
    settings: Sequence[str] = (),
    recorded: Mapping[str, Iterable[str]] | None = None,
) -> pd.DataFrame:
    """Add a ``group`` column: one group per configuration (all settings but the seed).

    The label is the algorithm, plus ``k=`` / ``w=`` where those vary among the
    runs of an env (``k=`` only on algorithms of a family that has the knob, never
    RL: :func:`episodes_knob_applies`), plus ``key=value`` for any other setting that
    tells apart two configurations of one algorithm (policy, population, budget,
    parameter count, reward transform, ...), even one that changes only together with
    k or W, so runs of different configurations are never averaged together and a label
    names what sets its group apart.
    ``settings`` are the columns that define a configuration
    (:func:`settings_columns`); without them groups are algorithm, k and w.
    ``recorded`` maps a run to the columns its config has: a key some runs lack
    (recorded before it existed) does not split a group, while a key recorded as
    null (``generations: null``) is a value like any other. Without ``recorded``
    every NaN counts as unrecorded. Where each configuration comes from its own sweep,
    the sweep's name is the tag (the settings table says what differs).
    """
    runs = runs.copy()
    labels = pd.Series("", index=runs.index, dtype=object)
    settings = [c for c in settings if c in runs]
    known = {run: set(columns) for run, columns in (recorded or {}).items()}
    followed = defaults_older_runs_followed()

    def values(frame: pd.DataFrame, column: str) -> pd.Series:
        """Display values; None where the run did not record the key (its default where
        older runs followed it)."""
        out = []
        for run, value in zip(frame["run"], frame[column], strict=True):
            if recorded is None:
                out.append(_value_text(value) if _present(value) else None)
            elif column not in known.get(run, set()):
                # a followed knob's default, read as the runs that recorded it read it
                knob = column.removeprefix("budget_")  # flatten_config's budget columns
                default = followed.get(knob, _UNRECORDED)
                out.append(
                    None
                    if default is _UNRECORDED
                    else (_value_text(default) if _present(default) else "none")
                )
            else:
                out.append(_value_text(value) if _present(value) else "none")
        return _shortest_distinct(pd.Series(out, index=frame.index, dtype=object))

    for _, env_runs in runs.groupby("env", sort=False):
        # k is an ES knob: shown where it varies among the runs it applies to, and only on
        # their labels (an RL group is never "ppo k=1"); the family decides, not the name
        has_k = env_runs["algo"].map(episodes_knob_applies).astype(bool)
        extra = [c for c in ("workers",) if varying(env_runs, c)]
        base = env_runs["algo"].astype(str)
        if varying(env_runs[has_k], "episodes_per_fitness"):
            k_part = env_runs["episodes_per_fitness"].map(lambda k: f" k={int(k)}")
            base = base + k_part.where(has_k, "")
        if "workers" in extra:
            base = base + env_runs["workers"].map(lambda w: f" w={int(w)}")
        for label, same in env_runs.groupby(base, sort=False):
            # settings that vary among this algorithm's runs on the env, also those that
            # vary only alongside k or W: a group is named by what sets it apart
            kin = env_runs[env_runs["algo"] == same["algo"].iloc[0]]
            shown = {
                c: values(kin, c)
                for c in settings
                if c not in ("algo", "env", "episodes_per_fitness", "workers")
            }
            others = [c for c, v in shown.items() if v.dropna().nunique() > 1]
            parts = {
                index: [f"{_short_key(c)}={shown[c][index] or 'n/a'}" for c in others]
                for index in kin.index
            }
            parts = _one_budget_part(kin, others, parts)
            # over all the algorithm's runs on the env: a sweep per configuration names its
            # group also where k or W alone split the groups
            by_sweep = _sweep_names(kin, {i: tuple(p) for i, p in parts.items()})
            for index in same.index:
                tag = by_sweep.get(index) or ", ".join(parts[index])
                labels[index] = str(label) + (f" [{tag}]" if tag else "")
    runs[GROUP] = labels
    return runs


def _one_budget_part(
    runs: pd.DataFrame, others: list[str], parts: dict[Any, list[str]]
) -> dict[Any, list[str]]:
    """Where budget keys tell configurations apart, one ``budget=`` part in words in their
    place (``budget=1M timesteps`` against ``budget=3913 CPU-s`` for a run to a CPU limit,
    not ``timesteps=none, cpu_limit=3913``); the parts as they are if the words would merge
    two configurations."""
    budget = [c for c in others if c.startswith("budget_")]
    if not budget:
        return parts
    first = others.index(budget[0])

    def phrase(index: Any) -> str:
        row = runs.loc[index]
        return budget_phrase(lambda key: row.get(f"budget_{key}")) or "none"

    merged = {}
    for index, kept in parts.items():
        merged[index] = [part for c, part in zip(others, kept, strict=True) if c not in budget]
        merged[index].insert(first, f"budget={phrase(index)}")
    distinct = len({tuple(p) for p in parts.values()})
    return merged if len({tuple(p) for p in merged.values()}) == distinct else parts


def _sweep_names(same: pd.DataFrame, parts: dict[Any, tuple[str, ...]]) -> dict[Any, str]:
    """The sweep name as a short tag when it tells the configurations apart one to one
    (each configuration from one sweep, each sweep one configuration); else nothing."""
    if "sweep" not in same or len(set(parts.values())) < 2:
        return {}
    sweeps = {index: same.at[index, "sweep"] for index in same.index}
    if any(not _present(v) for v in sweeps.values()):
        return {}
    pairs = {(parts[i], str(sweeps[i])) for i in same.index}
    configs = {c for c, _ in pairs}
    names = {n for _, n in pairs}
    if len(pairs) != len(configs) or len(pairs) != len(names):
        return {}
    return {index: str(sweeps[index]) for index in same.index}


def n_text(runs: pd.DataFrame) -> str:
    """Runs per group in words: ``n=3 runs per group`` or ``n=2-5 runs per group``."""
    if runs.empty or GROUP not in runs:
        return "n=0"
    sizes = runs.groupby(["env", GROUP])["run"].nunique()
    low, high = int(sizes.min()), int(sizes.max())
    count = f"{low}" if low == high else f"{low}-{high}"
    return f"n={count} run{'s' if high > 1 else ''} per group"


def carry_cpu_seconds(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with each run's last CPU-seconds sample carried forward to the rows after it.

    The runner samples CPU-seconds at most once a second, so an evaluation's row may have
    none; the sample before it is the compute spent by then (evaluations are short).
    """
    if "cpu_seconds" not in steps:
        return steps
    ordered = steps.sort_values(["run", "step"], kind="stable") if "step" in steps else steps
    carried = ordered.groupby("run")["cpu_seconds"].ffill()
    return steps.assign(cpu_seconds=carried.reindex(steps.index))


def every_run_has(steps: pd.DataFrame, runs: pd.DataFrame, x: str) -> bool:
    """Whether every run in ``runs`` logged an evaluation at a known ``x``."""
    evaluated = set(eval_points(steps, x)["run"])
    return bool(len(runs)) and set(runs["run"]) <= evaluated


def cpu_seconds_compared(steps: pd.DataFrame, runs: pd.DataFrame, least: float) -> dict[str, float]:
    """Per env, the common CPU-seconds at which its runs are compared: only envs where
    every run measured CPU-seconds and the common point is at least ``least`` (the meter is
    sampled, so a point of a few samples says little)."""
    return {
        env: at
        for env, at in common_budget(steps, runs, "cpu_seconds").items()
        if at >= least and every_run_has(steps, runs[runs["env"] == env], "cpu_seconds")
    }


def eval_points(steps: pd.DataFrame, x: str) -> pd.DataFrame:
    """Rows where an evaluation was logged: run, x, eval_return_mean."""
    if "eval_return_mean" not in steps or x not in steps:
        return pd.DataFrame(columns=["run", x, "eval_return_mean"])
    rows = steps[steps["eval_return_mean"].notna() & steps[x].notna()]
    return rows[["run", x, "eval_return_mean"]]


def eval_curves(
    steps: pd.DataFrame,
    runs: pd.DataFrame,
    x: str,
    points: int = 60,
    until: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Each run's eval return interpolated onto a common grid of ``x`` per (env, group).

    Runs log evaluations at different ``x`` (generations differ in length), so
    averaging across seeds needs a common grid. The grid of a group spans the
    range every one of its runs covers (latest first evaluation to earliest
    last one), so the mean never mixes different sets of runs and nothing is
    extrapolated. Where the runs of a group do not overlap, each keeps its own
    evaluation points. ``until`` (per env) truncates every curve there (the common
    budget), with a point interpolated at the cut. Returns columns run, env, group,
    seed, x, eval_return_mean.
    """
    evals = eval_points(steps, x)
    columns = ["run", "env", GROUP, "seed", x, "eval_return_mean"]
    frames = []
    for (env, group), group_runs in runs.groupby(["env", GROUP], sort=False):
        own = {run: evals[evals["run"] == run].sort_values(x) for run in group_runs["run"]}
        own = {run: frame for run, frame in own.items() if len(frame)}
        cut = (until or {}).get(str(env))
        if cut is not None:
            own = {run: _truncate(frame, x, cut) for run, frame in own.items()}
            own = {run: frame for run, frame in own.items() if len(frame)}
        if not own:
            continue
        low = max(float(f[x].iloc[0]) for f in own.values())
        high = min(float(f[x].iloc[-1]) for f in own.values())
        grid = np.linspace(low, high, points) if high > low else None
        seeds = dict(zip(group_runs["run"], group_runs["seed"], strict=True))
        for run, frame in own.items():
            xs = frame[x].to_numpy(float)
            ys = frame["eval_return_mean"].to_numpy(float)
            if grid is not None and len(own) > 1:
                xs, ys = grid, np.interp(grid, xs, ys)
            frames.append(
                pd.DataFrame(
                    {
                        "run": run,
                        "env": env,
                        GROUP: group,
                        "seed": seeds[run],
                        x: xs,
                        "eval_return_mean": ys,
                    }
                )
            )
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _truncate(frame: pd.DataFrame, x: str, cut: float) -> pd.DataFrame:
    """A run's evaluations up to ``cut``, ending with a point interpolated at ``cut``."""
    inside = frame[frame[x] <= cut]
    if len(inside) == len(frame) or inside.empty:
        return inside
    end = value_at(frame[x].to_numpy(float), frame["eval_return_mean"].to_numpy(float), cut)
    extra = pd.DataFrame({"run": [frame["run"].iloc[0]], x: [cut], "eval_return_mean": [end]})
    return pd.concat([inside, extra], ignore_index=True)


def value_at(xs: np.ndarray, ys: np.ndarray, at: float) -> float:
    """``ys`` linearly interpolated at ``at``; NaN outside ``xs``'s range (no extrapolation)."""
    if len(xs) == 0 or at < xs[0] or at > xs[-1]:
        return math.nan
    return float(np.interp(at, xs, ys))


def common_budget(steps: pd.DataFrame, runs: pd.DataFrame, x: str) -> dict[str, float]:
    """Per env, the largest ``x`` every run of the env has evaluated up to.

    The smallest last-evaluation ``x`` over the env's runs: at that point every
    run has a score, so groups are compared at equal ``x`` (timesteps or
    wall-clock) instead of at the end of unequal budgets.
    """
    evals = eval_points(steps, x)
    result: dict[str, float] = {}
    for env, env_runs in runs.groupby("env", sort=True):
        ends = evals[evals["run"].isin(env_runs["run"])].groupby("run")[x].max()
        if len(ends):
            result[str(env)] = float(ends.min())
    return result


#: A run's score at a common budget B is read between its two evaluations either side of B
#: only where they are at most this multiple of B apart (a run evaluated at B itself has its
#: score there): a value on the line between far-apart evaluations (a run to a CPU limit
#: evaluating every 5M timesteps, read at an RL budget of 1M; an RL run's first evaluation
#: after minutes, read at 23 s) is not a measurement, and it borrows learning from far past
#: the budget. At even spacing from 0: an evaluation after the start, by the cut.
MAX_GAP_AT_CUT = 1.0


def scores_at(steps: pd.DataFrame, runs: pd.DataFrame, x: str, at: dict[str, float]) -> pd.Series:
    """Each run's eval return interpolated at its env's ``at``; NaN where it cannot be (out
    of the run's range) or should not be (:data:`MAX_GAP_AT_CUT`)."""
    evals = eval_points(steps, x).sort_values(["run", x])
    by_run = {run: frame for run, frame in evals.groupby("run", sort=False)}
    values = []
    for run, env in zip(runs["run"], runs["env"], strict=True):
        frame = by_run.get(run)
        point = at.get(str(env))
        if frame is None or point is None:
            values.append(math.nan)
            continue
        xs = frame[x].to_numpy(float)
        after = int(np.searchsorted(xs, point))
        if (
            0 < after < len(xs)
            and not np.isclose(xs[after], point, rtol=1e-3, atol=0.0)
            and xs[after] - xs[after - 1] > MAX_GAP_AT_CUT * point
        ):
            values.append(math.nan)
            continue
        values.append(value_at(xs, frame["eval_return_mean"].to_numpy(float), point))
    return pd.Series(values, index=runs.index, dtype=float)


def bytes_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean bytes per generation per run, long form: run, env, group, direction, bytes."""
    columns = {
        "bytes_to_workers_per_gen": "to workers",
        "bytes_from_workers_per_gen": "from workers",
    }
    present = [c for c in columns if c in runs]
    if not present:
        return pd.DataFrame()
    long = runs.melt(
        id_vars=["run", "env", GROUP, "algo", "workers", "n_params"],
        value_vars=present,
        var_name="direction",
        value_name="bytes",
    )
    long["direction"] = long["direction"].map(columns)
    return long[long["bytes"].notna()]


# -- what the run recorded beyond its metrics --------------------------------------------


def _read_artifact_json(record: Any, name: str) -> dict[str, Any]:
    path = record.artifact_path(name)
    if path is None:
        return {}
    try:
        data = rundir.read_json(path)  # bounded: the run may come from someone else
    except rundir.UnreadableRun:
        return {}
    return data if isinstance(data, dict) else {}


def _float(value: Any) -> float:
    """A number as float (numpy scalars included); NaN for anything else."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        return math.nan
    return float(value)


def _target_columns(target: Any, confirming: bool) -> dict[str, Any]:
    """Time-to-target from the summary's ``target`` block: the confirmed time, else (for a
    run that did not confirm crossings, ``confirming`` False) the first crossing."""
    out: dict[str, Any] = {
        "target_value": math.nan,
        "first_crossing_s": math.nan,
        "first_crossing_timesteps": math.nan,
        "confirmed_s": math.nan,
        "confirmed_timesteps": math.nan,
        "confirmed_return": math.nan,
        "time_to_target_s": math.nan,
        "time_to_target_kind": None,
    }
    if not isinstance(target, dict):
        return out
    out["target_value"] = _float(target.get("return"))
    first = target.get("first_crossing")
    if isinstance(first, dict):
        out["first_crossing_s"] = _float(first.get("wall_time_s"))
        out["first_crossing_timesteps"] = _float(first.get("timesteps"))
    confirmed = target.get("confirmed")
    if isinstance(confirmed, dict):
        out["confirmed_s"] = _float(confirmed.get("wall_time_s"))
        out["confirmed_timesteps"] = _float(confirmed.get("timesteps"))
        out["confirmed_return"] = _float(confirmed.get("return_mean"))
    if _present(out["confirmed_s"]):
        out["time_to_target_s"], out["time_to_target_kind"] = out["confirmed_s"], "confirmed"
    elif _present(out["first_crossing_s"]) and not confirming:
        out["time_to_target_s"] = out["first_crossing_s"]
        out["time_to_target_kind"] = "first crossing"
    return out


BREAKDOWN_PREFIX = "time."


def run_extras(runs: pd.DataFrame, records: dict[str, Any], steps: pd.DataFrame) -> pd.DataFrame:
    """Per run, what its artifacts add to the metrics: CPU-seconds, parameter count, policy
    text, time-to-target and the wall-clock breakdown.

    ``cpu_seconds`` comes from ``summary.json`` (or the last logged ``cpu_seconds``
    metric); runs recorded before the runner measured it have NaN. ``n_params`` is the
    size of ``final_params.npy``, else the summary's ``n_params`` (a run archive rebuilt
    from a report's tables keeps the count, not the parameters), SB3's count or the
    policy spec's. The
    ``target`` block and ``time_breakdown`` of ``summary.json`` become
    ``time_to_target_s`` (the confirmed time when present; else, for a run that did not
    confirm crossings, ``confirm_episodes`` 0 or unrecorded, the first crossing; named in
    ``time_to_target_kind``) and ``time.<part>`` columns; absent, they are NaN.
    ``covariance`` is the covariance a CMA run used (``summary.json``'s ``covariance``
    and its reason; for runs recorded before the summary held it, the last value of the
    run's ``diagonal`` metric), None for other algorithms.
    """
    last_cpu = (
        steps.dropna(subset=["cpu_seconds"]).groupby("run")["cpu_seconds"].last()
        if "cpu_seconds" in steps
        else pd.Series(dtype=float)
    )
    diagonal = (
        steps.dropna(subset=["diagonal"]).groupby("run")["diagonal"].last()
        if "diagonal" in steps
        else pd.Series(dtype=float)
    )
    rows = []
    for _, row in runs.iterrows():
        record = records.get(row["run"])
        summary = _read_artifact_json(record, rundir.SUMMARY) if record is not None else {}
        spec = _read_artifact_json(record, rundir.POLICY_SPEC) if record is not None else {}
        cpu = _float(summary.get("cpu_seconds"))
        if not _present(cpu):
            cpu = float(last_cpu.get(row["run"], math.nan))
        n_params = _float(row.get("n_params"))
        for key in ("n_params", "sb3_num_params"):
            if not _present(n_params):
                n_params = _float(summary.get(key))
        if not _present(n_params) and spec:
            n_params = _spec_params(spec)
        extra: dict[str, Any] = {
            "run": row["run"],
            "cpu_seconds": cpu,
            "n_params": n_params,
            "sb3_policy": summary.get("sb3_policy"),
            "covariance": _covariance(summary, diagonal.get(row["run"])),
            **_target_columns(summary.get("target"), _float(row.get("confirm_episodes")) > 0),
        }
        breakdown = summary.get("time_breakdown")
        if isinstance(breakdown, dict):
            for part, seconds in breakdown.items():
                extra[BREAKDOWN_PREFIX + str(part)] = _float(seconds)
        rows.append(extra)
    extras = pd.DataFrame(rows)
    merged = runs.drop(columns=[c for c in extras.columns if c != "run" and c in runs])
    return merged.merge(extras, on="run", how="left")


def _covariance(summary: dict[str, Any], diagonal_metric: Any) -> str | None:
    """``full``, or ``diagonal (sep-CMA): <reason>``; None when the run did not record one."""
    kind = summary.get("covariance")
    if kind is None and _present(diagonal_metric):
        kind = "diagonal" if float(diagonal_metric) else "full"
    if kind is None:
        return None
    if str(kind) == "diagonal":
        reason = summary.get("covariance_reason")
        return "diagonal (sep-CMA)" + (f": {reason}" if reason else "")
    return str(kind)


def _spec_params(spec: dict[str, Any]) -> float:
    try:
        from envs.policies import PolicySpec

        return float(PolicySpec.from_dict(spec).num_params)
    except (ImportError, TypeError, ValueError):
        return math.nan
