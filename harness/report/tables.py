"""Tables of a report: final scores with rliable's IQM and intervals, probability of improvement.

Final score of a run: its last ``eval_return_mean`` (the evaluation at the end
of its budget). Per env and group, the interquartile mean (IQM) of the runs'
final scores with a 95% stratified-bootstrap interval (``rliable``; one task
per env, so the bootstrap resamples runs), and for every pair of groups the
probability that a run of one beats a run of the other (Mann-Whitney U / n m)
with its bootstrap interval (``rliable.library.get_interval_estimates``
resampling each group's runs independently). A group of one run has no
interval.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from harness.report.data import GROUP

BOOTSTRAP_REPS = 2000
CONFIDENCE = 0.95


def _quiet_rliable() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from rliable import library, metrics
    return library, metrics


def _iqm(scores: np.ndarray) -> np.ndarray:
    _, metrics = _quiet_rliable()
    return np.array([metrics.aggregate_iqm(scores)])


def iqm_with_interval(scores: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """IQM of 1-D ``scores`` and its 95% stratified-bootstrap interval (NaN for one score)."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1, 1)
    library, _ = _quiet_rliable()
    point = float(_iqm(scores)[0])
    if len(scores) < 2:
        return point, math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, intervals = library.get_interval_estimates(
            {"x": scores},
            _iqm,
            reps=BOOTSTRAP_REPS,
            confidence_interval_size=CONFIDENCE,
            random_state=np.random.RandomState(seed),
        )
    low, high = intervals["x"][:, 0]
    return point, float(low), float(high)


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


def final_scores(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (env, group): runs, seeds, mean, std, median, IQM and its interval."""
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        scores = frame["final_eval_return"].dropna().to_numpy(float)
        if scores.size == 0:
            continue
        iqm, low, high = iqm_with_interval(scores)
        rows.append(
            {
                "env": env,
                GROUP: group,
                "runs": int(scores.size),
                "seeds": ", ".join(str(int(s)) for s in sorted(frame["seed"].unique())),
                "mean": float(scores.mean()),
                "std": float(scores.std(ddof=1)) if scores.size > 1 else math.nan,
                "median": float(np.median(scores)),
                "iqm": iqm,
                "iqm_low": low,
                "iqm_high": high,
                "timesteps": float(frame["final_timesteps"].mean()),
                "wall_time_s": float(frame["final_wall_time_s"].mean()),
            }
        )
    return pd.DataFrame(rows)


def probability_of_improvement(runs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """P(X > Y) for each pair of groups of one env, with a bootstrap interval when n, m >= 2."""
    library, metrics = _quiet_rliable()
    rows = []
    for env, env_runs in runs.groupby("env", sort=True):
        scores = {
            g: f["final_eval_return"].dropna().to_numpy(float).reshape(-1, 1)
            for g, f in env_runs.groupby(GROUP, sort=True)
        }
        scores = {g: s for g, s in scores.items() if s.size}
        for x, y in itertools.combinations(sorted(scores), 2):
            sx, sy = scores[x], scores[y]
            point = float(metrics.probability_of_improvement(sx, sy))
            low = high = math.nan
            if len(sx) >= 2 and len(sy) >= 2:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _, intervals = library.get_interval_estimates(
                        {"pair": (sx, sy)},
                        poi_statistic,
                        reps=BOOTSTRAP_REPS,
                        confidence_interval_size=CONFIDENCE,
                        random_state=np.random.RandomState(seed),
                    )
                low, high = (float(v) for v in np.ravel(intervals["pair"])[:2])
            rows.append(
                {
                    "env": env,
                    "X": x,
                    "Y": y,
                    "runs X": len(sx),
                    "runs Y": len(sy),
                    "P(X > Y)": point,
                    "low": low,
                    "high": high,
                }
            )
    return pd.DataFrame(rows)


# -- formatting -----------------------------------------------------------------------


def fmt(value: Any, digits: int = 1) -> str:
    """A table cell: numbers rounded, NaN as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return "—"
        if abs(number) >= 1e5:
            return f"{number:,.0f}"
        return f"{number:.{digits}f}"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}" if abs(int(value)) >= 10000 else str(value)
    return str(value)


def interval(low: float, high: float, digits: int = 1) -> str:
    if math.isnan(low) or math.isnan(high):
        return "—"
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def score_table(scores: pd.DataFrame) -> pd.DataFrame:
    """The final-score frame as display strings."""
    return pd.DataFrame(
        {
            "env": scores["env"],
            "algorithm": scores[GROUP],
            "runs": scores["runs"],
            "seeds": scores["seeds"],
            "final return mean": [fmt(v) for v in scores["mean"]],
            "std": [fmt(v) for v in scores["std"]],
            "median": [fmt(v) for v in scores["median"]],
            "IQM": [fmt(v) for v in scores["iqm"]],
            "IQM 95% CI": [
                interval(lo, hi)
                for lo, hi in zip(scores["iqm_low"], scores["iqm_high"], strict=True)
            ],
            "timesteps": [fmt(v, 0) for v in scores["timesteps"]],
            "wall-clock s": [fmt(v, 1) for v in scores["wall_time_s"]],
        }
    )


def improvement_table(poi: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "env": poi["env"],
            "X": poi["X"],
            "Y": poi["Y"],
            "runs X / Y": [f"{a} / {b}" for a, b in zip(poi["runs X"], poi["runs Y"], strict=True)],
            "P(X > Y)": [fmt(v, 2) for v in poi["P(X > Y)"]],
            "95% CI": [interval(lo, hi, 2) for lo, hi in zip(poi["low"], poi["high"], strict=True)],
        }
    )


def scaling_table(scaling: pd.DataFrame) -> pd.DataFrame:
    """Mean throughput, time per generation, speed-up and efficiency per worker count."""
    rows = []
    keys = ["env", "algo", "episodes_per_fitness", "backend", "workers"]
    for key, frame in scaling.groupby(keys, sort=True):
        env, algo, k, backend, workers = key
        cpus = frame["host_cpu_count"].dropna()
        over = bool(len(cpus)) and workers > float(cpus.min())
        rows.append(
            {
                "env": env,
                "algorithm": algo,
                "k": int(k),
                "backend": backend,
                "workers": f"{int(workers)}{' (> cores)' if over else ''}",
                "runs": len(frame),
                "env steps/s": fmt(float(frame["steps_per_s"].mean()), 0),
                "s/generation (median)": fmt(float(frame["time_per_generation_s"].mean()), 3),
                "speed-up": fmt(float(frame["speedup"].mean()), 2),
                "efficiency": fmt(float(frame["efficiency"].mean()), 2),
            }
        )
    return pd.DataFrame(rows)


def bytes_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        rows.append(
            {
                "env": env,
                "algorithm": group,
                "workers": ", ".join(str(int(w)) for w in sorted(frame["workers"].unique())),
                "parameters": fmt(float(frame["n_params"].mean()), 0),
                "bytes to workers / gen": fmt(float(frame["bytes_to_workers_per_gen"].mean()), 0),
                "bytes from workers / gen": fmt(
                    float(frame["bytes_from_workers_per_gen"].mean()), 0
                ),
            }
        )
    return pd.DataFrame(rows)


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of a frame of display strings."""
    if frame.empty:
        return "_(no rows)_"
    header = [str(c) for c in frame.columns]

    def cell(value: Any) -> str:
        return fmt(value).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)
