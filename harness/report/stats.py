"""Statistics that match the number of runs, computed with rliable.

The rule (stated in every report):

* a **95% interval** (stratified bootstrap over runs, ``rliable.library.
  get_interval_estimates``) only for a group of at least :data:`MIN_RUNS_INTERVAL`
  = 3 runs; with fewer, the cell says "n too small": two runs give at most four
  distinct resamples, so an "interval" of them is an artefact;
* the **IQM** (interquartile mean, ``rliable.metrics.aggregate_iqm``) only with at
  least :data:`MIN_RUNS_IQM` = 4 runs: with three or fewer it trims nothing or
  only rounds and reads as a mean with a stronger-sounding name;
* **P(X > Y)** (``rliable.metrics.probability_of_improvement``: Mann-Whitney U / nm)
  only for pairs of groups on one env that differ in exactly one factor (the
  algorithm, the episodes per fitness k, or the workers W) or, all three equal, in
  exactly one other setting (a hyperparameter of a grid such as sigma), its interval
  only when both sides have at least 3 runs;
* a **lead** (and bold) is called only where the 95% interval of the difference of the
  leader's and the runner-up's means (:func:`difference`: a bootstrap of each side's runs,
  resampled apart) excludes 0; otherwise the conclusion says "inconclusive at n=...";
* a **tie on score** is called when both are at or above the env's threshold (or
  share the same best score, a ceiling such as CartPole's 500): a difference there
  is not a better solution, so the conclusion names the group that reached the level
  first (fewer CPU-seconds, else fewer timesteps) instead of a leader.

Scores compared are each run's evaluation return at the env's *common budget*
(the largest timesteps, or wall-clock, that every run of the env reached; see
:func:`harness.report.data.common_budget`), and separately at the end of each run.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from harness.report.data import GROUP

MIN_RUNS_INTERVAL = 3
MIN_RUNS_IQM = 4
N_TOO_SMALL = "n too small"
BOOTSTRAP_REPS = 1000
CURVE_REPS = 500
CONFIDENCE = 0.95
#: The factors a one-factor pair may differ in: column -> name shown.
FACTORS = {"algo": "algorithm", "episodes_per_fitness": "k", "workers": "W"}

RULE_TEXT = (
    f"Statistics follow the number of runs: a 95% interval (stratified bootstrap over runs, "
    f"{BOOTSTRAP_REPS} resamples, rliable) only for groups of at least {MIN_RUNS_INTERVAL} runs, "
    f"the IQM (interquartile mean) only with at least {MIN_RUNS_IQM}; smaller groups show "
    f'"{N_TOO_SMALL}" in those cells. P(X > Y) is listed only for pairs on the same env that '
    "differ in one factor (algorithm, k or W) or only in one hyperparameter. A group leads "
    "(bold) only where the 95% interval of the difference of the two means excludes 0."
)

#: Score columns of a report's run table: the score at the common timesteps, wall-clock and
#: CPU-seconds, and the final evaluation.
SCORE_T = "score_common_timesteps"
SCORE_W = "score_common_wall"
SCORE_CPU = "score_common_cpu_seconds"
SCORE_END = "final_eval_return"


def quiet_rliable() -> tuple[Any, Any]:
    """rliable's ``library`` and ``metrics`` (their import warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from rliable import library, metrics
    return library, metrics


@contextlib.contextmanager
def seeded_bootstrap(seed: int) -> Iterator[None]:
    """For rliable's bootstrap calls: numpy's global RNG seeded (:func:`global_numpy_seed`)
    and the deprecation warnings its ``arch`` dependency prints on every call silenced."""
    with global_numpy_seed(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


@contextlib.contextmanager
def global_numpy_seed(seed: int) -> Iterator[None]:
    """Seed numpy's global RNG for the block and give the caller's state back after.

    For libraries that draw from it whatever they are passed (rliable's bootstrap,
    seaborn's strip-plot jitter), so a report is the same on every call.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def _bootstrap(
    data: np.ndarray | tuple[np.ndarray, np.ndarray],
    func: Callable[..., Any],
    reps: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Point estimate and (2, ...) interval of ``func`` by rliable's stratified bootstrap."""
    library, _ = quiet_rliable()
    # rliable's StratifiedBootstrap.update_indices draws from numpy's global RNG
    # (np.random.choice) whatever random_state says, so the same report would get
    # different intervals on every call: seed the global RNG here and restore it after.
    with global_numpy_seed(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        points, intervals = library.get_interval_estimates(
            {"x": data},
            func,
            reps=reps,
            confidence_interval_size=CONFIDENCE,
            random_state=np.random.RandomState(seed),
        )
    return np.asarray(points["x"], dtype=float), np.asarray(intervals["x"], dtype=float)


def iqm(scores: np.ndarray) -> float:
    """``rliable.metrics.aggregate_iqm`` (scipy's 25% trimmed mean over all entries) in plain
    numpy: the same number without scipy's per-call overhead, which dominated a bootstrap."""
    flat = np.sort(np.asarray(scores, dtype=np.float64), axis=None)
    cut = int(0.25 * flat.size)
    return float(flat[cut : flat.size - cut].mean())


def _mean_and_iqm(scores: np.ndarray) -> np.ndarray:
    return np.array([float(np.mean(scores)), iqm(scores)])


def _mean(scores: np.ndarray) -> np.ndarray:
    """``rliable.metrics.aggregate_mean`` (the mean over runs and tasks) as a 1-element array."""
    return np.array([float(np.mean(scores))])


@dataclass
class GroupStats:
    """Summary of one group's scores under the n rule (NaN where n is too small)."""

    n: int
    mean: float
    median: float
    std: float
    mean_low: float
    mean_high: float
    iqm: float
    iqm_low: float
    iqm_high: float

    @property
    def has_interval(self) -> bool:
        return self.n >= MIN_RUNS_INTERVAL


def group_stats(scores: Sequence[float] | np.ndarray, seed: int = 0) -> GroupStats:
    """Mean, median, std; the mean's interval (n >= 3); the IQM and its interval (n >= 4).

    Memoised on the scores: a report asks for the same group's statistics in a table,
    a figure and a conclusion, and each bootstrap costs a noticeable fraction of a second.
    """
    values = np.asarray(scores, dtype=np.float64)
    values = values[np.isfinite(values)]
    return _group_stats(tuple(float(v) for v in values), seed)


@lru_cache(maxsize=1024)
def _group_stats(values_key: tuple[float, ...], seed: int) -> GroupStats:
    values = np.asarray(values_key, dtype=np.float64)
    n = int(values.size)
    nan = math.nan
    if n == 0:
        return GroupStats(0, nan, nan, nan, nan, nan, nan, nan, nan)
    stats = GroupStats(
        n=n,
        mean=float(values.mean()),
        median=float(np.median(values)),
        std=float(values.std(ddof=1)) if n > 1 else nan,
        mean_low=nan,
        mean_high=nan,
        iqm=nan,
        iqm_low=nan,
        iqm_high=nan,
    )
    if n >= MIN_RUNS_IQM:
        points, intervals = _bootstrap(values.reshape(-1, 1), _mean_and_iqm, BOOTSTRAP_REPS, seed)
        stats.iqm = float(points[1])
        stats.iqm_low, stats.iqm_high = float(intervals[0, 1]), float(intervals[1, 1])
    elif n >= MIN_RUNS_INTERVAL:
        points, intervals = _bootstrap(values.reshape(-1, 1), _mean, BOOTSTRAP_REPS, seed)
    else:
        return stats
    stats.mean_low, stats.mean_high = float(intervals[0, 0]), float(intervals[1, 0])
    return stats


def score_frame(runs: pd.DataFrame, column: str, x_column: str | None = None) -> pd.DataFrame:
    """One row per (env, group): the :class:`GroupStats` of ``runs[column]``.

    ``x_column`` (optional) is averaged into ``x`` (e.g. the timesteps the scores
    were taken at).
    """
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        scores = frame[column].to_numpy(float)
        stats = group_stats(scores)
        if stats.n == 0:
            continue
        row: dict[str, Any] = {"env": env, GROUP: group, **vars(stats)}
        row["seeds"] = ", ".join(
            str(int(s)) for s in sorted(frame.loc[np.isfinite(scores), "seed"].unique())
        )
        row["runs_total"] = len(frame)
        if x_column is not None:
            row["x"] = float(frame[x_column].mean())
        rows.append(row)
    return pd.DataFrame(rows)


# -- curves ---------------------------------------------------------------------------


def curve_statistic(kind: str) -> Callable[[np.ndarray], np.ndarray]:
    """Per-frame aggregate of a (runs x 1 x frames) array: ``mean`` or ``iqm``.

    Equal, frame by frame, to ``rliable.metrics.aggregate_mean`` and
    ``aggregate_iqm`` (scipy's 25% trimmed mean over all runs), vectorised over
    frames so a bootstrap of a 60-point curve stays fast.
    """

    def statistic(scores: np.ndarray) -> np.ndarray:
        flat = np.asarray(scores, dtype=np.float64).reshape(scores.shape[0], -1)
        if kind == "iqm":
            ordered = np.sort(flat, axis=0)
            cut = int(0.25 * len(ordered))
            return ordered[cut : len(ordered) - cut].mean(axis=0)
        return flat.mean(axis=0)

    return statistic


def curve_band(values: np.ndarray, seed: int = 0) -> tuple[str, np.ndarray, np.ndarray] | None:
    """Aggregate curve over runs with its 95% bootstrap band, following the n rule.

    ``values`` is (runs x frames) on a shared grid. Returns (``"IQM"`` or
    ``"mean"``, point estimates, (2 x frames) interval), or None with fewer than
    3 runs (then each run is drawn on its own).
    """
    n = values.shape[0]
    if n < MIN_RUNS_INTERVAL or np.isnan(values).any():
        return None
    kind = "iqm" if n >= MIN_RUNS_IQM else "mean"
    points, intervals = _bootstrap(values[:, None, :], curve_statistic(kind), CURVE_REPS, seed)
    return ("IQM" if kind == "iqm" else "mean"), points, intervals


# -- probability of improvement ---------------------------------------------------------


def poi_statistic(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """rliable's probability of improvement, vectorised: mean over tasks of P(X > Y) + P(X = Y)/2.

    Equal to ``rliable.metrics.probability_of_improvement`` (Mann-Whitney U / nm
    per task), without SciPy's per-call overhead, so thousands of bootstrap
    resamples stay cheap.
    """
    x = np.asarray(scores_x, dtype=np.float64)[:, None, :]
    y = np.asarray(scores_y, dtype=np.float64)[None, :, :]
    wins = (x > y).mean(axis=(0, 1)) + 0.5 * (x == y).mean(axis=(0, 1))
    return float(wins.mean())


def _factor_values(frame: pd.DataFrame) -> dict[str, Any]:
    return {column: frame[column].iloc[0] if column in frame else None for column in FACTORS}


def _setting_text(value: Any) -> str:
    """A setting as comparable text; a missing one (NaN, None) as ``n/a``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def setting_name(column: str) -> str:
    """A config column as a reader names it: ``params.sigma`` -> ``sigma``."""
    return column.split(".")[-1]


def one_factor_pairs(
    runs: pd.DataFrame, settings: Sequence[str] = ()
) -> list[tuple[str, str, str, str]]:
    """(env, X, Y, factor) for every pair of groups on one env differing in exactly one of
    algorithm, k and W, or, those three equal, in exactly one of ``settings`` (config
    columns such as ``params.sigma``; the factor is then the setting's short name). Groups
    whose runs mix values of a factor are left out."""
    others = [c for c in settings if c in runs and c not in FACTORS and c not in ("env", GROUP)]
    pairs = []
    for env, env_runs in runs.groupby("env", sort=True):
        factors: dict[str, dict[str, Any]] = {}
        values: dict[str, dict[str, str]] = {}
        for group, frame in env_runs.groupby(GROUP, sort=True):
            if any(c in frame and frame[c].nunique() > 1 for c in FACTORS):
                continue
            factors[str(group)] = _factor_values(frame)
            values[str(group)] = {c: _setting_text(frame[c].iloc[0]) for c in others}
        names = sorted(factors)
        for i, x in enumerate(names):
            for y in names[i + 1 :]:
                differ = [c for c in FACTORS if factors[x][c] != factors[y][c]]
                if len(differ) == 1:
                    pairs.append((str(env), x, y, FACTORS[differ[0]]))
                elif not differ:
                    changed = [c for c in others if values[x][c] != values[y][c]]
                    if len(changed) == 1:
                        pairs.append((str(env), x, y, setting_name(changed[0])))
    return pairs


def probability_of_improvement(
    runs: pd.DataFrame,
    column: str,
    other_differences: Callable[[str, str, str], str] | None = None,
    seed: int = 0,
    settings: Sequence[str] = (),
) -> pd.DataFrame:
    """P(X > Y) of ``runs[column]`` for the one-factor pairs (``settings``: the config
    columns a pair may differ in alone, see :func:`one_factor_pairs`), with an interval
    when both groups have at least 3 runs. ``other_differences(env, x, y)`` names settings
    beyond the factor that also differ (shown, so a pair is not read as a clean
    comparison)."""
    _, metrics = quiet_rliable()
    rows = []
    for env, x, y, factor in one_factor_pairs(runs, settings):
        env_runs = runs[runs["env"] == env]
        sx = env_runs.loc[env_runs[GROUP] == x, column].dropna().to_numpy(float).reshape(-1, 1)
        sy = env_runs.loc[env_runs[GROUP] == y, column].dropna().to_numpy(float).reshape(-1, 1)
        if not (sx.size and sy.size):
            continue
        point = float(metrics.probability_of_improvement(sx, sy))
        also = other_differences(env, x, y) if other_differences else ""
        # the setting a hyperparameter pair differs in is its factor, not another difference
        also = ", ".join(
            part for part in also.split(", ") if part and part.replace(" ", "_") != factor
        )
        low = high = math.nan
        if min(len(sx), len(sy)) >= MIN_RUNS_INTERVAL:
            _, intervals = _bootstrap((sx, sy), poi_statistic, BOOTSTRAP_REPS, seed)
            low, high = (float(v) for v in np.ravel(intervals)[:2])
        rows.append(
            {
                "env": env,
                "X": x,
                "Y": y,
                "factor": factor,
                "runs X": len(sx),
                "runs Y": len(sy),
                "P(X > Y)": point,
                "low": low,
                "high": high,
                "also differ": also,
            }
        )
    return pd.DataFrame(rows)


# -- conclusions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """X's mean score minus Y's with its 95% interval (stratified bootstrap, each side's runs
    resampled apart), and P(X > Y) with its interval; intervals NaN below
    :data:`MIN_RUNS_INTERVAL` runs a side."""

    n_x: int
    n_y: int
    mean_x: float
    mean_y: float
    low: float
    high: float
    poi: float
    poi_low: float
    poi_high: float

    @property
    def value(self) -> float:
        return self.mean_x - self.mean_y

    @property
    def has_interval(self) -> bool:
        return not math.isnan(self.low)

    @property
    def sign(self) -> int:
        """1 where X is ahead (the interval above 0), -1 where Y is, 0 otherwise (the
        interval spans 0, or there is none)."""
        return 1 if self.low > 0 else -1 if self.high < 0 else 0

    def text(self, digits: int = 1) -> str:
        """``difference +3.2 [1.1, 5.0]``, or ``difference +3.2 (no interval at n=2)``."""
        shown = f"difference {self.value:+.{digits}f}"
        if math.isnan(self.low):
            return f"{shown} (no interval at n={min(self.n_x, self.n_y)})"
        return f"{shown} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"

    def poi_text(self) -> str:
        """``P(X > Y) 0.89 [0.67, 1.00]`` (the interval where both sides have one)."""
        shown = f"{self.poi:.2f}"
        if not math.isnan(self.poi_low):
            shown += f" [{self.poi_low:.2f}, {self.poi_high:.2f}]"
        return shown


def _difference_and_poi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([float(np.mean(x) - np.mean(y)), poi_statistic(x, y)])


def difference(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, seed: int = 0
) -> Difference:
    """:class:`Difference` of two groups' finite scores (memoised on them)."""

    def finite(values: Sequence[float] | np.ndarray) -> tuple[float, ...]:
        array = np.asarray(values, dtype=np.float64)
        return tuple(float(v) for v in array[np.isfinite(array)])

    return _difference(finite(x), finite(y), seed)


@lru_cache(maxsize=1024)
def _difference(x: tuple[float, ...], y: tuple[float, ...], seed: int) -> Difference:
    nan = math.nan
    sx, sy = np.array(x).reshape(-1, 1), np.array(y).reshape(-1, 1)
    if not (sx.size and sy.size):
        mean_x = float(sx.mean()) if sx.size else nan
        mean_y = float(sy.mean()) if sy.size else nan
        return Difference(sx.size, sy.size, mean_x, mean_y, nan, nan, nan, nan, nan)
    points = _difference_and_poi(sx, sy)
    low = high = poi_low = poi_high = nan
    if min(sx.size, sy.size) >= MIN_RUNS_INTERVAL:
        _, intervals = _bootstrap((sx, sy), _difference_and_poi, BOOTSTRAP_REPS, seed)
        (low, poi_low), (high, poi_high) = intervals.tolist()
    mean_x, mean_y = float(sx.mean()), float(sy.mean())
    return Difference(sx.size, sy.size, mean_x, mean_y, low, high, points[1], poi_low, poi_high)


@dataclass
class TimeTo:
    """How a group reached a return level: medians over the runs that reached it (NaN
    where none did or the run did not measure it) and how many of its runs did."""

    timesteps: float
    cpu_seconds: float
    wall_s: float
    reached: int
    runs: int


def _first_text(
    tied: list[str], level_name: str, time_to: dict[str, TimeTo], said: set[str] | None = None
) -> str:
    """Which of the ``tied`` groups reached the level first: the larger share of its runs
    reached it (a median over the one run of two that got there is no lead), then fewer
    CPU-seconds where every one measured them (compute, which does not grow when runs
    share cores), else fewer timesteps; the other measure is named where it disagrees."""
    known = [g for g in tied if g in time_to and time_to[g].reached > 0]
    if len(known) < 2:
        return ""
    by_cpu = all(not math.isnan(time_to[g].cpu_seconds) for g in known)
    key = "cpu_seconds" if by_cpu else "timesteps"
    order = sorted(
        known,
        key=lambda g: (-time_to[g].reached / time_to[g].runs, getattr(time_to[g], key)),
    )
    first = order[0]

    def measured(group: str) -> str:
        t = time_to[group]
        parts = [f"{_compact(t.timesteps)} timesteps"]
        if not math.isnan(t.cpu_seconds):
            parts.append(f"{t.cpu_seconds:.1f} CPU-s")
        return f"{group} {' / '.join(parts)} ({t.reached} of {t.runs} runs)"

    text = (
        f" **{first}** got there first (median to {level_name}: "
        + "; ".join(measured(g) for g in order)
        + ")"
    )
    if said is not None:
        if text in said:
            return f" **{first}** got there first (as above)."
        said.add(text)
    if by_cpu:
        share = time_to[first].reached / time_to[first].runs
        peers = [g for g in known if time_to[g].reached / time_to[g].runs == share]
        fewest_steps = min(peers, key=lambda g: time_to[g].timesteps)
        if fewest_steps != first:
            text += f", though {fewest_steps} needed fewer timesteps"
    return text + "."


def _compact(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.3g}"


def lead_text(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    where: str,
    digits: int = 1,
    level: float | None = None,
    level_name: str = "",
    time_to: Callable[[float], dict[str, TimeTo]] | None = None,
    said: set[str] | None = None,
) -> str:
    """One caveated sentence: who leads ``where`` (e.g. "at 40k timesteps") among the groups
    of ``scores`` (group -> its runs' scores there), and whether the interval of the
    difference of the two best means lets one say so (:func:`difference`: a lead, in bold,
    only where it excludes 0); every other group follows with its mean, so no algorithm
    drops out of the conclusion. Groups without a score there are named.

    The tie rule: where the leader and the runner-up are both at or above ``level`` (the
    env's threshold, ``level_name`` naming it) or share the best mean (a ceiling), the
    sentence calls a tie on score and names the group that got there first, from
    ``time_to(level)`` (per group, see :class:`TimeTo`): a solved task is not solved
    better by scoring 10.65 instead of 10.5. ``said``: the "got there first" clauses
    already written (shared by one env's lines, so the clause is not repeated)."""
    stats = {group: group_stats(values) for group, values in scores.items()}
    ranked = sorted(((g, s) for g, s in stats.items() if s.n > 0), key=lambda item: -item[1].mean)
    absent = sorted(g for g, s in stats.items() if s.n == 0)
    tail = f" No score by then for {', '.join(absent)}." if absent else ""
    if not ranked:
        return f"{where}: no scores.{tail}"
    if len(ranked) == 1:
        group, s = ranked[0]
        return (
            f"{where}: only {group} has a score (mean {s.mean:.{digits}f}, n={s.n}); "
            f"nothing to compare.{tail}"
        )

    def mean_of(item: tuple[str, GroupStats]) -> str:
        return f"{item[0]} (mean {item[1].mean:.{digits}f}, n={item[1].n})"

    top = [(g, s) for g, s in ranked if math.isclose(s.mean, ranked[0][1].mean, abs_tol=1e-9)]
    solved = (
        [(g, s) for g, s in ranked if s.mean >= level]
        if level is not None and not math.isnan(level)
        else []
    )
    if len(solved) > 1 or len(top) > 1:
        tied = solved if len(solved) > 1 else top
        rest = [item for item in ranked if item not in tied]
        if len(solved) > 1:
            text = (
                f"{where}: {', '.join(mean_of(t) for t in tied)} tie on score: "
                f"{'both' if len(tied) == 2 else 'all'} at or above {level_name}"
            )
            at = float(level) if level is not None else math.nan
        else:
            text = f"{where}: {', '.join(mean_of(t) for t in tied)} tie at mean " + (
                f"{top[0][1].mean:.{digits}f}"
            )
            at, level_name = top[0][1].mean, f"{top[0][1].mean:.{digits}f}"
        text += "."
        if time_to is not None:
            text += _first_text([g for g, _ in tied], level_name, time_to(at), said)
        if rest:
            text += " Then " + ", ".join(mean_of(item) for item in rest) + "."
        return text + tail
    (first, a), (second, b) = ranked[0], ranked[1]
    rest_text = ""
    if len(ranked) > 2:
        rest_text = " Then " + ", ".join(mean_of(item) for item in ranked[2:]) + "."
    diff = difference(scores[first], scores[second])
    smallest = min(a.n, b.n)
    if diff.sign > 0:
        return (
            f"{where}: **{first}** leads (mean {a.mean:.{digits}f}, n={a.n}) ahead of {second} "
            f"(mean {b.mean:.{digits}f}, n={b.n}); {diff.text(digits)} excludes 0: {first} "
            f"ahead at n={smallest}.{rest_text}{tail}"
        )
    spans = " spans 0" if diff.has_interval else ""
    return (
        f"{where}: {mean_of(ranked[0])} and {mean_of(ranked[1])} are not told apart "
        f"({diff.text(digits)}{spans}): inconclusive at n={smallest}.{rest_text}{tail}"
    )


# -- performance profiles ---------------------------------------------------------------


def _profile_groups(runs: pd.DataFrame, envs: list[str]) -> dict[str, pd.DataFrame]:
    """Runs of one configuration per env, matched across envs by (algorithm, k, W).

    Group labels are per env (an env whose runs all share k does not show it), so the
    match is on the factors; a factor combination with several groups on one env is
    ambiguous there and left out, as is one missing from some env.
    """
    keys = [c for c in FACTORS if c in runs]
    if "algo" not in keys:
        return {}
    matched: dict[tuple[Any, ...], list[pd.DataFrame]] = {}
    for env in envs:
        env_runs = runs[runs["env"].astype(str) == env]
        for key, frame in env_runs.groupby(keys, sort=True):
            if frame[GROUP].nunique() == 1:
                matched.setdefault(tuple(np.atleast_1d(key)), []).append(frame)
    complete = {key: frames for key, frames in matched.items() if len(frames) == len(envs)}
    varying = [i for i, _ in enumerate(keys) if len({key[i] for key in complete}) > 1 or i == 0]
    out = {}
    for key, frames in complete.items():
        label = " ".join(
            str(key[i]) if keys[i] == "algo" else f"{FACTORS[keys[i]]}={int(key[i])}"
            for i in varying
        )
        out[label] = pd.concat(frames)
    return out


def profile_scores(
    runs: pd.DataFrame, column: str, solved: dict[str, float]
) -> tuple[dict[str, np.ndarray], np.ndarray, bool, str] | None:
    """Normalised (runs x envs) score matrices of the groups run on every env, for
    ``rliable.library.create_performance_profile``; None with fewer than 2 envs or no
    group on all of them.

    Per env, 0 is the worst run's score in the report and 1 the env's solved threshold
    (``solved``, from the anchors) or, without one, the best run's score. Rows pair the
    seeds every env has for that group. Returns (scores, taus, whether every group has
    at least 3 runs, a note naming the normalisation).
    """
    envs = sorted(runs["env"].dropna().astype(str).unique())
    if len(envs) < 2:
        return None
    bounds: dict[str, tuple[float, float, str]] = {}
    for env in envs:
        values = runs.loc[runs["env"] == env, column].dropna().to_numpy(float)
        if values.size == 0:
            return None
        low = float(values.min())
        high, how = solved.get(env, math.nan), "solved threshold"
        if math.isnan(high) or high <= low:
            high, how = float(values.max()), "best run"
        if high <= low:
            return None
        bounds[env] = (low, high, how)
    scores: dict[str, np.ndarray] = {}
    for group, frame in _profile_groups(runs, envs).items():
        seed_sets = [
            set(frame.loc[(frame["env"] == env) & frame[column].notna(), "seed"]) for env in envs
        ]
        seeds = sorted(set.intersection(*seed_sets))
        if not seeds:
            continue
        matrix = np.empty((len(seeds), len(envs)))
        for j, env in enumerate(envs):
            low, high, _ = bounds[env]
            mine = frame[frame["env"] == env].drop_duplicates("seed").set_index("seed")[column]
            matrix[:, j] = (mine.loc[seeds].to_numpy(float) - low) / (high - low)
        scores[str(group)] = matrix
    if not scores:
        return None
    every = np.concatenate([m.ravel() for m in scores.values()])
    taus = np.linspace(min(0.0, float(every.min())), max(1.0, float(every.max())), 101)
    with_intervals = min(m.shape[0] for m in scores.values()) >= MIN_RUNS_INTERVAL
    note = "normalised per env: " + "; ".join(
        f"{env} 0 = {low:.1f} (worst run), 1 = {high:.1f} ({how})"
        for env, (low, high, how) in bounds.items()
    )
    return scores, taus, with_intervals, note


# -- evaluation noise and a level above it ----------------------------------------------------

#: A return level means something where it sits at least this many noise units (see
#: :func:`evaluation_noise`) above the runs' first evaluations: a run at its start then
#: clears it by chance in about one evaluation in forty.
NOISE_UNITS = 2.0


def evaluation_noise(steps: pd.DataFrame, runs: pd.DataFrame, last: int = 3) -> float:
    """How far one evaluation's mean return moves by chance, from the runs' own evaluations:
    the larger of the standard error of one evaluation (the median over evaluations of
    ``eval_return_std`` over the root of the run's ``eval_episodes``) and the spread between
    a run's last ``last`` evaluations (the median over runs of their standard deviation,
    which also holds the policy's drift on its plateau). NaN where neither is known."""
    if "eval_return_mean" not in steps:
        return math.nan
    evals = steps[steps["eval_return_mean"].notna() & steps["run"].isin(set(runs["run"]))]
    errors = []
    if "eval_return_std" in evals and "eval_episodes" in runs:
        episodes = pd.to_numeric(runs.set_index("run")["eval_episodes"], errors="coerce")
        per = evals["eval_return_std"] / np.sqrt(evals["run"].map(episodes).clip(lower=1))
        errors = per.dropna().to_numpy(float).tolist()
    order = "timesteps" if "timesteps" in evals else "step"
    tails = evals.sort_values(["run", order], kind="stable").groupby("run").tail(last)
    spreads = tails.groupby("run")["eval_return_mean"].std(ddof=1).dropna()
    parts = [float(np.median(v)) for v in (errors, spreads.to_numpy(float)) if len(v)]
    return max(parts) if parts else math.nan


def noisy_level_warning(level: float, first: float, noise: float, what: str) -> str | None:
    """A warning where ``level`` sits less than :data:`NOISE_UNITS` noise units above
    ``first`` (the runs' first evaluations, median): a first crossing of it may be noise."""
    if not all(math.isfinite(v) for v in (level, first, noise)):
        return None
    margin = level - first
    if margin >= NOISE_UNITS * noise:
        return None
    return (
        f"{what} {level:.4g} is {margin:+.3g} from the runs' first evaluations (median "
        f"{first:.4g}), inside the evaluation noise ({NOISE_UNITS:g} x {noise:.3g}: the larger "
        "of one evaluation's standard error and the spread of a run's last evaluations): a "
        "first crossing of it may be noise; confirmations (`--target-return` with "
        "`confirm_episodes`) or more evaluation episodes tell"
    )


def default_level(first: float, best: float, noise: float, fraction: float) -> float:
    """``fraction`` of the way from ``first`` (the runs' first evaluations, median) to
    ``best`` (a final score every family reaches), raised to at least :data:`NOISE_UNITS`
    noise units above ``first`` (so a run's first evaluation does not clear it by chance)
    but never past ``best`` (a level the families' median runs do not reach answers nothing:
    there :func:`noisy_level_warning` says the margin is inside the noise); NaN where
    ``best`` is not above ``first``."""
    if not (math.isfinite(first) and math.isfinite(best)) or best <= first:
        return math.nan
    level = first + fraction * (best - first)
    if math.isfinite(noise):
        level = min(max(level, first + NOISE_UNITS * noise), best)
    return level
