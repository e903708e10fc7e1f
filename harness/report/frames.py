"""Frames of each group's best final policy per env: what the trained behaviour looks like.

For every group of an env, the run with the highest final evaluation among those
that stored their final policy (a COMPLETED run directory; compact archives keep
no policies, so their reports skip this quietly) is loaded with
:func:`harness.load_policy` and plays the first episode of its own last
evaluation (the same env seed), headless (``rgb_array``), once, and :data:`FRAMES`
moments about evenly spaced from the reset to the last step are shown: one row per
group, one column per moment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.commands import warn
from harness.policy_io import has_policy
from harness.report.data import GROUP
from harness.report.render import Section, slug

__all__ = [
    "FRAMES",
    "StoredPolicies",
    "best_stored_runs",
    "frame_strip_figure",
    "frames_section",
    "stored_policies",
]

#: Moments shown per episode.
FRAMES = 6


class StoredPolicies:
    """The final policies of one report's runs, each read once.

    A run whose stored policy cannot be read (a truncated ``final_params.npy``, a damaged
    ``obs_norm.json``, a policy of an earlier version kept only in a pickle, ...) is
    skipped by every replay figure with one warning line naming it, not one per figure,
    and the report goes on with the other runs.
    """

    def __init__(self) -> None:
        self._read: dict[Path, Any] = {}

    def get(self, run_dir: Path) -> Any:
        """The run's :class:`harness.replay.LoadedPolicy`, or None (none stored, or unreadable)."""
        if run_dir not in self._read:
            self._read[run_dir] = self._load(run_dir)
        return self._read[run_dir]

    def _load(self, run_dir: Path) -> Any:
        from harness.replay import PolicyLoadError, load_policy

        if not has_policy(run_dir):
            return None
        try:
            return load_policy(run_dir, source="final")
        except PolicyLoadError as error:
            self._warn(run_dir, error)
            return None

    def fail(self, run_dir: Path, error: Exception) -> None:
        """Drop a run whose policy could not play (warned once, like an unreadable one)."""
        if self._read.get(run_dir) is not None:
            self._warn(run_dir, error)
        self._read[run_dir] = None

    @staticmethod
    def _warn(run_dir: Path, error: Exception) -> None:
        line = f"run {run_dir}: stored policy skipped: {error}".splitlines()
        warn(line[0] if line else "")


def stored_policies(builder: Any) -> StoredPolicies:
    """The report's :class:`StoredPolicies` (kept on the builder, so figures share it)."""
    found = getattr(builder, "stored_policies", None)
    if not isinstance(found, StoredPolicies):
        found = StoredPolicies()
        builder.stored_policies = found
    return found


def best_stored_runs(
    runs: pd.DataFrame, records: dict[str, Any], policies: StoredPolicies | None = None
) -> pd.DataFrame:
    """Per env and group, the run with the best final evaluation that stored its policy.

    With ``policies``, a run whose policy cannot be read does not count as stored (the
    group's next best run is shown instead).
    """
    if policies is None:
        stored = runs[[has_policy(Path(records[r].path)) for r in runs["run"]]]
    else:
        stored = runs[[policies.get(Path(records[r].path)) is not None for r in runs["run"]]]
    if stored.empty:
        return stored
    ranked = stored.assign(_score=stored["final_eval_return"].astype(float).fillna(-np.inf))
    ranked = ranked.sort_values(["env", GROUP, "_score"], ascending=[True, True, False])
    return ranked.groupby(["env", GROUP], sort=True).head(1).drop(columns="_score")


class _Decimator:
    """Keeps about :data:`FRAMES` x 4 states of an episode of unknown length, evenly spaced.

    Every ``stride``-th state is rendered; when more are kept than room allows, every
    other one is dropped and the stride doubles. Memory stays bounded on long episodes
    and the episode is played once.
    """

    def __init__(self) -> None:
        self.stride = 1
        self.kept: list[tuple[int, np.ndarray]] = []
        self._step = 0

    def frame_at(self, t: int) -> bool:
        self._step = t
        return t % self.stride == 0

    def append(self, frame: np.ndarray) -> None:
        self.kept.append((self._step, frame))
        if len(self.kept) > 4 * FRAMES:
            self.stride *= 2
            self.kept = [(t, f) for t, f in self.kept if t % self.stride == 0]

    def pick(self) -> tuple[list[np.ndarray], list[int]]:
        """:data:`FRAMES` of the kept states, evenly spaced, the first and last included."""
        index = sorted({round(float(i)) for i in np.linspace(0, len(self.kept) - 1, FRAMES)})
        return [self.kept[i][1] for i in index], [self.kept[i][0] for i in index]


def _episode_frames(
    run_dir: Path, policies: StoredPolicies | None = None
) -> tuple[list[np.ndarray], list[int], float, int]:
    """Frames at evenly spaced steps of the run's first last-evaluation episode."""
    from harness.replay import last_evaluation, load_policy, play_episode

    policy = policies.get(run_dir) if policies is not None else load_policy(run_dir, source="final")
    if policy is None:
        return [], [], float("nan"), 0
    last = last_evaluation(policy)
    seed = last.seeds[0] if last is not None else int(policy.config["seed"])
    env = policy.make_env(render_mode="rgb_array")
    keeper = _Decimator()
    try:
        episode = play_episode(policy, env, seed, frame_at=keeper.frame_at, sink=keeper)
        if not keeper.kept or keeper.kept[-1][0] != episode.length:
            keeper.frame_at(episode.length)
            keeper.append(np.asarray(env.render()))  # the final state, still on screen
    finally:
        env.close()
    frames, steps = keeper.pick()
    return frames, steps, episode.episode_return, seed


def _strip(frames: list[np.ndarray], gap: int = 6) -> np.ndarray:
    """The frames side by side, :data:`FRAMES` slots (empty ones white), white gaps between."""
    height, width = frames[0].shape[:2]
    strip = np.full((height, FRAMES * width + (FRAMES - 1) * gap, 3), 255, dtype=np.uint8)
    for k, frame in enumerate(frames):
        x = k * (width + gap)
        strip[:, x : x + width] = np.asarray(frame, dtype=np.uint8)[..., :3]
    return strip


def frame_strip_figure(
    env: str, best: pd.DataFrame, records: dict[str, Any], policies: StoredPolicies | None = None
) -> Figure | None:
    """One row of frames per group (its best stored run); None when nothing could render."""
    import matplotlib.pyplot as plt

    from harness.report.plots import finish

    rows = []
    for _, row in best.iterrows():
        try:
            played = _episode_frames(Path(records[row["run"]].path), policies)
        except (TypeError, ValueError, NotImplementedError, gym.error.Error) as error:
            # An env of the user's own may render nothing (no render_mode at all): the
            # report goes on without its frames and says why.
            warn(f"no frames of {env}: {error}".splitlines()[0])
            continue
        if played[0]:
            rows.append((row, *played))
    if not rows:
        return None
    strips = [_strip(frames) for _, frames, *_ in rows]
    height, width = strips[0].shape[:2]
    fig, axes = plt.subplots(
        len(rows), 1, figsize=(12.0, len(rows) * (12.0 * height / width + 0.35) + 0.9)
    )
    for ax, strip, (row, _frames, steps, episode_return, seed) in zip(
        np.atleast_1d(axes), strips, rows, strict=True
    ):
        ax.imshow(strip, interpolation="antialiased")
        ax.set_axis_off()
        ax.set_title(
            f"{row[GROUP]} · run {row['run']} · episode seed {seed}: return "
            f"{episode_return:.1f} · steps {', '.join(map(str, steps))}",
            fontsize=9,
            loc="left",
        )
    return finish(
        fig,
        f"{env}: the best stored final policy of each group, one episode",
        "Each row: the group's run with the best final evaluation, playing the first episode "
        "of that evaluation (same env seed) deterministically; frames about evenly spaced from "
        "the reset to the last step (their steps in the row's title), rendered headless.",
    )


def frames_section(builder: Any) -> Section | None:
    """The report's frames: one figure per env (None: no run here stored its policy)."""
    policies = stored_policies(builder)
    best = best_stored_runs(builder.runs, builder.table.records, policies)
    if best.empty:
        return None
    section = Section("What the best final policies do")
    for env, rows in best.groupby("env", sort=True):
        builder.figure(
            section,
            frame_strip_figure(str(env), rows, builder.table.records, policies),
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
