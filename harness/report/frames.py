"""Frames of each group's best final policy per env: what the trained behaviour looks like.

For every group of an env, the run with the highest final evaluation among those
that stored their final policy (a COMPLETED run directory; compact archives keep
no policies, so their reports skip this quietly) is loaded with
:func:`harness.load_policy` and plays the first episode of its own last
evaluation (the same env seed), headless (``rgb_array``). The episode is played
once to learn its length, then again to render :data:`FRAMES` moments evenly
spaced from the reset to the last step: one row per group, one column per moment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.policy_io import has_policy
from harness.report.data import GROUP
from harness.report.render import Section, slug

__all__ = ["FRAMES", "best_stored_runs", "frame_strip_figure", "frames_section"]

#: Moments shown per episode.
FRAMES = 6


def best_stored_runs(runs: pd.DataFrame, records: dict[str, Any]) -> pd.DataFrame:
    """Per env and group, the run with the best final evaluation that stored its policy."""
    stored = runs[[has_policy(Path(records[r].path)) for r in runs["run"]]]
    if stored.empty:
        return stored
    ranked = stored.assign(_score=stored["final_eval_return"].astype(float).fillna(-np.inf))
    ranked = ranked.sort_values(["env", GROUP, "_score"], ascending=[True, True, False])
    return ranked.groupby(["env", GROUP], sort=True).head(1).drop(columns="_score")


def _episode_frames(run_dir: Path) -> tuple[list[np.ndarray], list[int], float, int]:
    """Frames at evenly spaced steps of the run's first last-evaluation episode."""
    from harness.replay import last_evaluation, load_policy, play_episode

    policy = load_policy(run_dir, source="final")
    last = last_evaluation(policy)
    seed = last.seeds[0] if last is not None else int(policy.config["seed"])
    env = policy.make_env(render_mode="rgb_array")
    try:
        length = play_episode(policy, env, seed).length
        steps = sorted({round(float(t)) for t in np.linspace(0, length, FRAMES)})
        episode = play_episode(policy, env, seed, frame_at=lambda t: t in steps)
    finally:
        env.close()
    return episode.frames, steps, episode.episode_return, seed


def frame_strip_figure(env: str, best: pd.DataFrame, records: dict[str, Any]) -> Figure | None:
    """One row of frames per group (its best stored run); None when nothing could render."""
    import matplotlib.pyplot as plt

    from harness.report.plots import finish

    rows = []
    for _, row in best.iterrows():
        played = _episode_frames(Path(records[row["run"]].path))
        if played[0]:
            rows.append((row, *played))
    if not rows:
        return None
    height, width = rows[0][1][0].shape[:2]
    cell_w = 12.0 / FRAMES
    fig, axes = plt.subplots(
        len(rows),
        FRAMES,
        figsize=(12.0, len(rows) * (cell_w * height / width + 0.3) + 0.9),
        squeeze=False,
    )
    for r, (row, frames, steps, episode_return, seed) in enumerate(rows):
        for c in range(FRAMES):
            ax = axes[r][c]
            ax.set_axis_off()
            if c < len(frames):
                ax.imshow(frames[c])
                ax.text(
                    0.03,
                    0.05,
                    f"step {steps[c]}",
                    color="white",
                    fontsize=7,
                    transform=ax.transAxes,
                    bbox={"facecolor": "black", "alpha": 0.5, "pad": 1.5, "linewidth": 0},
                )
        axes[r][0].text(
            0.0,
            1.06,
            f"{row[GROUP]} · run {row['run']} · episode seed {seed}: return {episode_return:.1f}",
            transform=axes[r][0].transAxes,
            fontsize=9,
            fontweight="bold",
            ha="left",
        )
    return finish(
        fig,
        f"{env}: the best stored final policy of each group, one episode",
        "Each row: the group's run with the best final evaluation, playing the first episode "
        "of that evaluation (same env seed) deterministically; frames evenly spaced from the "
        "reset to the last step, rendered headless.",
    )


def frames_section(builder: Any) -> Section | None:
    """The report's frames: one figure per env (None: no run here stored its policy)."""
    best = best_stored_runs(builder.runs, builder.table.records)
    if best.empty:
        return None
    section = Section("What the best final policies do")
    for env, rows in best.groupby("env", sort=True):
        builder.figure(
            section,
            frame_strip_figure(str(env), rows, builder.table.records),
            f"frames_{slug(str(env))}.png",
            f"frames of the best final policy of each group on {env}",
        )
    section.paragraphs.append(
        "Frames of one episode per group, played by `harness.load_policy` from the stored "
        "final policy of the group's best run (the run with the highest final evaluation); "
        "`harness enjoy RUN_DIR --video FILE.mp4` plays any run whole. Skipped with "
        "`harness report --no-replay`."
    )
    return section
