"""Tables of a report as display strings: scores under the n rule, P(X > Y), bytes.

Numbers are rounded for reading; a missing value is an em dash, a statistic the
number of runs cannot support is "n too small" (the rule is in
:mod:`harness.report.stats`).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from harness.report.data import GROUP
from harness.report.escape import md_safe_inline, one_line
from harness.report.stats import MIN_RUNS_INTERVAL, MIN_RUNS_IQM, N_TOO_SMALL


def steps_text(value: float, decimals: int = 2) -> str:
    """A timestep count in millions to ``decimals`` places (``1.25M``), else whole thousands."""
    return f"{value / 1e6:.{decimals}f}M" if abs(value) >= 1e6 else f"{value / 1e3:.0f}k"


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


def _gated(n: int, least: int, text: str) -> str:
    return text if n >= least else N_TOO_SMALL


def score_table(scores: pd.DataFrame, x_label: str | None = None) -> pd.DataFrame:
    """The :func:`harness.report.stats.score_frame` rows as display strings (the n rule)."""
    table: dict[str, Any] = {
        "env": scores["env"],
        "group": scores[GROUP],
        "n": scores["n"],
        "seeds": scores["seeds"],
    }
    if x_label is not None and "x" in scores:
        table[x_label] = [fmt(v, 0) for v in scores["x"]]
    table.update(
        {
            "mean": [fmt(v) for v in scores["mean"]],
            "mean 95% CI": [
                _gated(int(n), MIN_RUNS_INTERVAL, interval(lo, hi))
                for n, lo, hi in zip(
                    scores["n"], scores["mean_low"], scores["mean_high"], strict=True
                )
            ],
            "median": [fmt(v) for v in scores["median"]],
            "std": [fmt(v) for v in scores["std"]],
            "IQM": [
                _gated(int(n), MIN_RUNS_IQM, fmt(v))
                for n, v in zip(scores["n"], scores["iqm"], strict=True)
            ],
            "IQM 95% CI": [
                _gated(int(n), MIN_RUNS_IQM, interval(lo, hi))
                for n, lo, hi in zip(
                    scores["n"], scores["iqm_low"], scores["iqm_high"], strict=True
                )
            ],
        }
    )
    return pd.DataFrame(table)


def improvement_table(poi: pd.DataFrame) -> pd.DataFrame:
    """P(X > Y) rows as display strings; the interval only when both sides have n >= 3."""
    return pd.DataFrame(
        {
            "env": poi["env"],
            "X": poi["X"],
            "Y": poi["Y"],
            "differ in": poi["factor"],
            "n X / Y": [f"{a} / {b}" for a, b in zip(poi["runs X"], poi["runs Y"], strict=True)],
            "P(X > Y)": [fmt(v, 2) for v in poi["P(X > Y)"]],
            "95% CI": [
                _gated(min(int(a), int(b)), MIN_RUNS_INTERVAL, interval(lo, hi, 2))
                for a, b, lo, hi in zip(
                    poi["runs X"], poi["runs Y"], poi["low"], poi["high"], strict=True
                )
            ],
            "other settings that differ": [v or "none" for v in poi["also differ"]],
        }
    )


def bytes_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (env, group), frame in runs.groupby(["env", GROUP], sort=True):
        rows.append(
            {
                "env": env,
                "group": group,
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
    """A GitHub-flavoured Markdown table of a frame of display strings.

    A cell is Markdown on one line (:func:`harness.report.escape.md_safe_inline`): a value of
    a run inside it cannot end its row or cell, nor become raw HTML or a link off the web.
    """
    if frame.empty:
        return "_(no rows)_"

    def cell(value: Any) -> str:
        return md_safe_inline(one_line(fmt(value))).replace("|", "\\|")

    header = [cell(str(c)) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def markdown_rows(markdown: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table in ``markdown`` whose header line starts with
    ``header_start``, as {column: cell text}: what :func:`markdown_table` wrote, read back
    (escaped pipes stay inside their cell)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows
