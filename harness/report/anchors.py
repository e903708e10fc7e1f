"""Published figures ("anchors") drawn beside a report's curves.

``experiments/anchors.yaml`` maps gymnasium env ids to published returns with
their source (format in the file's header). A report draws the anchors of a
run's env on its eval-return-against-timesteps plot: a threshold as a horizontal
dashed line; a published result as a point at its timesteps when that lies
inside the plot, else as a dotted line; anchors far outside the curves' range
are listed at the edge of the plot instead of squashing the curves. Sources go
into the caption and a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.config import EXPERIMENTS_DIR, ConfigError, read_yaml

ANCHORS_FILE = EXPERIMENTS_DIR / "anchors.yaml"
KINDS = ("threshold", "published")


class AnchorError(ValueError):
    """A malformed anchors file; the message is one line naming the entry."""


@dataclass(frozen=True)
class Anchor:
    """One published figure for one gymnasium env."""

    gym_id: str
    label: str
    value: float
    kind: str
    source: str
    measure: str = ""
    timesteps: float | None = None
    generations: float | None = None
    approximate: bool = False
    envs: tuple[str, ...] = ()
    #: the published figure is of training fitness (GoodAI's are), so the report's
    #: training-fitness figure draws it too
    training_fitness: bool = False
    #: the harness algorithm the figure is of (``ppo``, ``recurrent-ppo``); empty for a
    #: threshold or a figure of something the harness does not run. The benchmark sets
    #: each RL cell beside its algorithm's published figure.
    algo: str = ""

    def applies_to(self, env: str, gym_id: str) -> bool:
        """Whether the anchor is about runs configured with ``env`` (resolved to ``gym_id``)."""
        if gym_id != self.gym_id:
            return False
        return not self.envs or env in self.envs or env == gym_id

    @property
    def text(self) -> str:
        """``rl-zoo PPO 2866 at 2M`` / ``solved 200`` / ``GoodAI CMA 5 ep ~920``."""
        value = f"{'~' if self.approximate else ''}{self.value:,.0f}"
        where = ""
        if self.timesteps:
            where = f" at {_short(self.timesteps)} steps"
        elif self.generations:
            where = f" after ~{_short(self.generations)} gen."
        return f"{self.label} {value}{where}"


def _short(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def load_anchors(path: Path = ANCHORS_FILE) -> list[Anchor]:
    """Every anchor in ``path`` (none when the file is absent)."""
    if not path.is_file():
        return []
    try:
        data = read_yaml(path) or {}
    except ConfigError as error:
        raise AnchorError(str(error)) from None
    if not isinstance(data, dict):
        raise AnchorError(f"{path} must map gymnasium env ids to lists of anchors")
    anchors = []
    for gym_id, entries in data.items():
        if not isinstance(entries, list):
            raise AnchorError(f"{path}: {gym_id} must be a list of anchors")
        for entry in entries:
            anchors.append(_anchor(str(gym_id), entry, path))
    return anchors


def _anchor(gym_id: str, entry: Any, path: Path) -> Anchor:
    if not isinstance(entry, dict):
        raise AnchorError(f"{path}: an anchor of {gym_id} is not a mapping: {entry!r}")
    missing = [k for k in ("label", "return", "kind", "source") if k not in entry]
    if missing:
        raise AnchorError(f"{path}: anchor {entry.get('label')!r} of {gym_id} lacks {missing}")
    if entry["kind"] not in KINDS:
        raise AnchorError(
            f"{path}: anchor {entry['label']!r} of {gym_id} has kind {entry['kind']!r}; "
            f"use {' or '.join(KINDS)}"
        )
    try:
        value = float(entry["return"])
    except (TypeError, ValueError):
        raise AnchorError(
            f"{path}: anchor {entry['label']!r} of {gym_id} has return {entry['return']!r}"
        ) from None
    envs = entry.get("envs") or []
    return Anchor(
        gym_id=gym_id,
        label=str(entry["label"]),
        value=value,
        kind=str(entry["kind"]),
        source=" ".join(str(entry["source"]).split()),
        measure=" ".join(str(entry.get("measure", "")).split()),
        timesteps=float(entry["timesteps"]) if entry.get("timesteps") else None,
        generations=float(entry["generations"]) if entry.get("generations") else None,
        approximate=bool(entry.get("approximate", False)),
        envs=tuple(str(e) for e in envs),
        training_fitness=bool(entry.get("training_fitness", False)),
        algo=str(entry.get("algo") or ""),
    )


def anchors_for(anchors: list[Anchor], runs: pd.DataFrame, env: str) -> list[Anchor]:
    """The anchors that apply to the runs of ``env`` (by their resolved gymnasium id)."""
    ids = runs.loc[runs["env"] == env, "gym_id"].dropna().astype(str).unique()
    return [a for a in anchors if any(a.applies_to(env, gym_id) for gym_id in ids)]


def training_fitness_anchors(anchors: list[Anchor], runs: pd.DataFrame, env: str) -> list[Anchor]:
    """The anchors of ``env`` that are training-fitness figures (drawn on that figure)."""
    return [a for a in anchors_for(anchors, runs, env) if a.training_fitness]


#: Line styles: the threshold dashed; published lines each their own dash pattern and grey,
#: so two figures of about the same value stay apart in the legend.
THRESHOLD_STYLE: tuple[Any, str] = ("--", "0.2")
PUBLISHED_STYLES: list[tuple[Any, str]] = [
    (":", "0.3"),
    ((0, (6, 2, 1, 2)), "0.45"),
    ((0, (2, 3)), "0.55"),
    ((0, (8, 3)), "0.4"),
    ((0, (1, 1)), "0.6"),
]
MARKERS = ["*", "P", "X", "D", "v", "^"]


def draw_anchors(ax: Any, anchors: list[Anchor], x_max: float) -> list[Any]:
    """Draw ``anchors`` on a return-against-timesteps axis; return legend handles.

    The y range grows to include an anchor only while the curves keep at least a
    third of the height; anchors beyond that get a legend entry with an arrow
    ("above the plot") instead of a line.
    """
    if not anchors:
        return []
    low, high = ax.get_ylim()
    span = high - low
    values = [a.value for a in anchors]
    grown = (min(low, *values), max(high, *values))
    fits = span > 0 and span / (grown[1] - grown[0]) >= 1 / 3
    if fits:
        pad = 0.04 * (grown[1] - grown[0])
        ax.set_ylim(
            grown[0] - (pad if grown[0] < low else 0), grown[1] + (pad if grown[1] > high else 0)
        )
    low, high = ax.get_ylim()
    handles = []
    above: list[str] = []
    below: list[str] = []
    marker = 0
    published = 0
    for anchor in anchors:
        if not low <= anchor.value <= high:
            (above if anchor.value > high else below).append(anchor.text)
            continue
        style: Any
        if anchor.kind == "threshold":
            style, color = THRESHOLD_STYLE
        else:
            style, color = PUBLISHED_STYLES[published % len(PUBLISHED_STYLES)]
        if anchor.kind == "published" and anchor.timesteps and anchor.timesteps <= 1.05 * x_max:
            (handle,) = ax.plot(
                [anchor.timesteps],
                [anchor.value],
                marker=MARKERS[marker % len(MARKERS)],
                color="black",
                markersize=10,
                linestyle="none",
                label=anchor.text,
            )
            marker += 1
        else:
            handle = ax.axhline(
                anchor.value, color=color, linestyle=style, linewidth=1.3, label=anchor.text
            )
            published += anchor.kind == "published"
        handles.append(handle)
    from matplotlib.lines import Line2D

    for names, arrow in ((above, "\u2191"), (below, "\u2193")):
        for name in names:
            # a legend entry without a line: the value is off the plot's scale
            handles.append(
                Line2D(
                    [],
                    [],
                    linestyle="none",
                    marker=f"${arrow}$",
                    color="0.25",
                    markersize=8,
                    label=f"{name} ({'above' if arrow == chr(0x2191) else 'below'} the plot)",
                )
            )
    return handles


def short_source(anchor: Anchor) -> str:
    """The source up to its first comma or parenthesis: ``rl-baselines3-zoo benchmark.md``."""
    cut = min((i for i in (anchor.source.find(","), anchor.source.find(" (")) if i > 0), default=-1)
    return anchor.source[:cut] if cut > 0 else anchor.source


def caption_text(anchors: list[Anchor]) -> str:
    """Short sources of the drawn anchors for a figure caption (full ones in the table)."""
    if not anchors:
        return ""
    parts = [
        f"{a.text} ({short_source(a)}{', read off a figure' if a.approximate else ''})"
        for a in anchors
    ]
    return "reference lines and points: " + "; ".join(dict.fromkeys(parts))


def anchor_table(anchors: list[Anchor]) -> pd.DataFrame:
    """Anchors with what they measure and their source, as display strings."""
    return pd.DataFrame(
        {
            "env": [a.gym_id for a in anchors],
            "anchor": [a.text for a in anchors],
            "kind": [a.kind for a in anchors],
            "what it measures": [a.measure or "—" for a in anchors],
            "source": [a.source for a in anchors],
        }
    )
