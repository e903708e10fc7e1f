"""Behavioural diversity between runs and between algorithms, measured from stored policies.

The GoodAI post remarks that policies found by ES are more diverse than those found
by deep RL. This measures it. Every run that stored its final policy plays the same
:data:`EPISODES` episodes (env seeds :func:`algorithms.es_common.eval_seeds` of
:data:`BEHAVIOUR_SEED`, common to all runs, so only the policies differ), and each
episode becomes a behaviour descriptor:

* LunarLander: where it came down (x, metres from the pad's centre) and the fuel it
  burnt (the env's own fuel cost: main engine 0.3 and side engines 0.03 per frame at
  full throttle), and the episode length;
* locomotion (pybullet or MuJoCo bodies): the torso's final x and y (metres from the
  start, where :func:`envs.behaviour.body_position` says, as novelty search's behaviour
  characterisation of these envs), mean absolute action (effort) and mean absolute change
  of action per step (how jerky the gait is);
* any other env: the mean of the first observation dimensions and of the actions.

Descriptors are standardised by their spread over all episodes of the env. A run's
behaviour is the mean of its episodes'; a group's *between-run diversity* is the mean
pairwise distance between its runs' behaviours, with a 95% bootstrap interval over
runs (n >= 3); the *within-run spread* (mean distance between one run's episodes)
says how much of that the env's randomness alone gives. The family comparison pools
the runs of ES and of RL groups and bootstraps the difference ES minus RL.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from algorithms.es_common import eval_seeds
from harness.report.data import GROUP
from harness.report.frames import StoredPolicies, stored_policies
from harness.report.render import Section, slug

__all__ = [
    "BEHAVIOUR_SEED",
    "EPISODES",
    "Behaviours",
    "behaviours",
    "diversity_figure",
    "diversity_section",
    "diversity_table",
    "family_difference",
]

#: Episodes every policy plays, and the seed their env seeds come from.
EPISODES = 4
BEHAVIOUR_SEED = 0
BOOTSTRAP_REPS = 2000
MIN_RUNS_INTERVAL = 3


@dataclass
class Behaviours:
    """Per-episode descriptors of one env's runs: ``frame`` has run, group, family, episode
    and one column per descriptor (``names``); ``plot`` names the two drawn against each
    other."""

    env: str
    frame: pd.DataFrame
    names: list[str]
    plot: tuple[str, str]


def _lander_fuel(actions: np.ndarray) -> float:
    """The env's fuel cost summed over the episode (gymnasium's LunarLander rules)."""
    if actions.ndim == 2 and actions.shape[1] == 2:  # continuous
        main = np.where(actions[:, 0] > 0, (np.clip(actions[:, 0], 0, 1) + 1) / 2, 0.0)
        side_abs = np.abs(actions[:, 1])
        side = np.where(side_abs > 0.5, np.clip(side_abs, 0.5, 1), 0.0)
    else:
        flat = actions.reshape(-1)
        main = (flat == 2).astype(float)
        side = np.isin(flat, (1, 3)).astype(float)
    return float(0.3 * main.sum() + 0.03 * side.sum())


def _descriptors(env_id: str, episode: Any, start: tuple[float, float] | None) -> dict[str, float]:
    actions = episode.actions
    if env_id.startswith("LunarLander") and episode.position is not None:
        from gymnasium.envs.box2d.lunar_lander import SCALE, VIEWPORT_W

        return {
            "landing x (m from pad)": episode.position[0] - VIEWPORT_W / SCALE / 2,
            "fuel burnt": _lander_fuel(actions),
            "episode length": float(episode.length),
        }
    if episode.position is not None and start is not None and actions.size:
        change = np.abs(np.diff(actions, axis=0)).mean() if len(actions) > 1 else 0.0
        return {
            "torso final x (m)": episode.position[0] - start[0],
            "torso final y (m)": episode.position[1] - start[1],
            "effort (mean |action|)": float(np.abs(actions).mean()),
            "action change per step": float(change),
        }
    obs = episode.observations
    out = {f"mean obs[{i}]": float(obs[:, i].mean()) for i in range(min(4, obs.shape[1]))}
    for j in range(min(2, actions.shape[1])):
        out[f"mean action[{j}]"] = float(actions[:, j].mean())
    return out


def behaviours(
    env: str,
    runs: pd.DataFrame,
    records: dict[str, Any],
    families: dict[str, str],
    policies: StoredPolicies | None = None,
) -> Behaviours | None:
    """Play :data:`EPISODES` common episodes with every stored final policy of ``env``.

    A run whose policy cannot be read or played is left out with one warning line
    (:class:`harness.report.frames.StoredPolicies`); the others are measured.
    """
    from envs.behaviour import body_position
    from envs.registry import resolve_env_id
    from harness.replay import play_episode

    policies = policies if policies is not None else StoredPolicies()
    seeds = eval_seeds(BEHAVIOUR_SEED, 0, EPISODES)
    rows: list[dict[str, Any]] = []
    for _, row in runs[runs["env"] == env].iterrows():
        run_dir = Path(records[row["run"]].path)
        policy = policies.get(run_dir)
        if policy is None:
            continue
        env_id = resolve_env_id(policy.env_name)
        game = policy.make_env()
        played: list[dict[str, Any]] = []
        try:
            for k, seed in enumerate(seeds):
                game.reset(seed=seed)
                start = body_position(game)
                episode = play_episode(policy, game, seed)
                played.append(
                    {
                        "run": row["run"],
                        GROUP: row[GROUP],
                        "algo": row["algo"],
                        "family": families.get(str(row["algo"]), "?"),
                        "episode": k,
                        "return": episode.episode_return,
                        **_descriptors(env_id, episode, start),
                    }
                )
        except (ValueError, TypeError, RuntimeError) as error:  # a policy that does not fit
            policies.fail(run_dir, error)
            continue
        finally:
            game.close()
        rows += played
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    names = [c for c in frame.columns if c not in ("run", GROUP, "algo", "family", "episode")]
    names.remove("return")
    if frame["run"].nunique() < 2 or not names:
        return None
    plot = (names[0], names[1] if len(names) > 1 else names[0])
    return Behaviours(env, frame, names, plot)


def _standardised(b: Behaviours) -> pd.DataFrame:
    values = b.frame[b.names].astype(float)
    spread = values.std(ddof=0).replace(0.0, 1.0).fillna(1.0)
    return (values - values.mean()) / spread


def _mean_pairwise(points: np.ndarray) -> float:
    if len(points) < 2:
        return math.nan
    return float(np.mean([np.linalg.norm(a - b) for a, b in itertools.combinations(points, 2)]))


def _run_means(b: Behaviours) -> pd.DataFrame:
    z = _standardised(b)
    z["run"] = b.frame["run"].values
    return z.groupby("run", sort=True)[b.names].mean()


def _resampled_pairs(distances: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Distances between the pairs of a resample of runs (None: the runs themselves).

    A run drawn twice is not paired with itself: its zero distance to itself says
    nothing of diversity and would drag every resample down.
    """
    n = len(distances)
    pick = np.arange(n) if rng is None else rng.integers(0, n, size=n)
    i, j = np.triu_indices(n, k=1)
    distinct = pick[i] != pick[j]
    return distances[pick[i][distinct], pick[j][distinct]]


def _distances(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)


def _bootstrap_pairwise(points: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """95% interval of the mean pairwise distance between runs, resampling the runs."""
    distances = _distances(points)
    values = []
    for _ in range(BOOTSTRAP_REPS):
        pairs = _resampled_pairs(distances, rng)
        if pairs.size:
            values.append(pairs.mean())
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def diversity_table(b: Behaviours) -> pd.DataFrame:
    """Per group: n runs, between-run diversity [95% interval], within-run spread."""
    means = _run_means(b)
    z = _standardised(b)
    z["run"] = b.frame["run"].values
    rng = np.random.default_rng(BEHAVIOUR_SEED)
    rows = []
    for group, members in b.frame.groupby(GROUP, sort=True):
        run_ids = sorted(members["run"].unique())
        points = means.loc[run_ids].to_numpy()
        between = _mean_pairwise(points)
        low, high = (
            _bootstrap_pairwise(points, rng)
            if len(run_ids) >= MIN_RUNS_INTERVAL
            else (math.nan, math.nan)
        )
        within = np.nanmean(
            [_mean_pairwise(z.loc[z["run"] == r, b.names].to_numpy()) for r in run_ids]
        )
        rows.append(
            {
                "group": str(group),
                "family": str(members["family"].iloc[0]),
                "n runs": len(run_ids),
                "between-run diversity": between,
                "95% interval": "—" if math.isnan(low) else f"[{low:.2f}, {high:.2f}]",
                "low": low,
                "high": high,
                "within-run spread": float(within),
                "mean return (these episodes)": float(members["return"].mean()),
            }
        )
    return pd.DataFrame(rows)


def family_difference(b: Behaviours) -> dict[str, Any] | None:
    """Between-run diversity of ES runs minus RL runs, pooled, with a 95% bootstrap interval.

    Distances are taken only between runs of the same group (pooling groups would count
    their settings' differences as diversity); None without two runs of each family.
    """
    means = _run_means(b)
    by_family: dict[str, list[np.ndarray]] = {}
    for (family, _group), members in b.frame.groupby(["family", GROUP], sort=True):
        points = means.loc[sorted(members["run"].unique())].to_numpy()
        if len(points) >= 2:
            by_family.setdefault(str(family), []).append(points)
    if "es" not in by_family or "rl" not in by_family:
        return None
    rng = np.random.default_rng(BEHAVIOUR_SEED)
    matrices = {
        family: [_distances(points) for points in groups] for family, groups in by_family.items()
    }

    def pooled(family: str, resample: bool) -> float:
        pairs = [_resampled_pairs(d, rng if resample else None) for d in matrices[family]]
        joined = np.concatenate(pairs)
        return float(joined.mean()) if joined.size else math.nan

    point = pooled("es", False) - pooled("rl", False)
    draws = [pooled("es", True) - pooled("rl", True) for _ in range(BOOTSTRAP_REPS)]
    draws = [d for d in draws if not math.isnan(d)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return {
        "difference": point,
        "low": float(low),
        "high": float(high),
        "n_es": sum(len(p) for p in by_family["es"]),
        "n_rl": sum(len(p) for p in by_family["rl"]),
    }


def diversity_figure(b: Behaviours, table: pd.DataFrame, caption_text: str) -> Figure:
    """Left: every episode's two main descriptors, run means ringed; right: the diversity."""
    import matplotlib.pyplot as plt

    from harness.report.plots import LEGEND_WRAP, PALETTE, TICK_WRAP, finish

    groups = sorted(b.frame[GROUP].astype(str).unique())
    # more groups than the palette has colours take them again (a KeyError once)
    palette = itertools.cycle(plt.get_cmap(PALETTE).colors)  # type: ignore[attr-defined]
    colors = dict(zip(groups, palette, strict=False))
    columns = 1 if len(groups) > 4 else 2
    legend_lines = (
        sum(len(textwrap.wrap(g, LEGEND_WRAP, break_on_hyphens=False)) for g in groups) / columns
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 4.8 + 0.16 * legend_lines))
    x_name, y_name = b.plot
    for group in groups:
        members = b.frame[b.frame[GROUP].astype(str) == group]
        left.scatter(
            members[x_name], members[y_name], s=14, alpha=0.45, color=colors[group], label=group
        )
        centres = members.groupby("run")[[x_name, y_name]].mean()
        left.scatter(
            centres[x_name],
            centres[y_name],
            s=90,
            facecolors="none",
            edgecolors=[colors[group]],
            linewidths=1.6,
        )
    left.set_xlabel(x_name)
    left.set_ylabel(y_name)
    left.set_title("each episode (dots) and each run's mean (rings)", fontsize=9)
    # below the scatter, not over it: a group label can run to a hundred characters
    handles, names = left.get_legend_handles_labels()
    left.legend(
        handles,
        [textwrap.fill(name, LEGEND_WRAP, break_on_hyphens=False) for name in names],
        fontsize=7.5,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=columns,
    )
    # groups down the y axis, so each keeps its whole (wrapped) name
    for k, row in table.reset_index(drop=True).iterrows():
        color = colors[row["group"]]
        value = row["between-run diversity"]
        if not math.isnan(row["low"]):
            right.errorbar(
                value,
                k,
                xerr=[[max(0.0, value - row["low"])], [max(0.0, row["high"] - value)]],
                fmt="o",
                color=color,
                capsize=4,
            )
        else:
            right.plot(value, k, "o", color=color)
        right.plot(row["within-run spread"], k + 0.22, "D", mfc="none", color=color)
        right.annotate(
            f"n={row['n runs']}",
            (value, k),
            xytext=(0, -11),
            textcoords="offset points",
            ha="center",
            fontsize=7.5,
        )
    right.set_ylim(len(table) - 0.4, -0.6)
    right.set_yticks(range(len(table)))
    right.set_yticklabels(
        [textwrap.fill(str(g), TICK_WRAP) for g in table["group"]],
        fontsize=7.5,
    )
    right.set_xlabel("mean pairwise distance (standardised)")
    right.set_title(
        "between-run diversity (dots, 95% bootstrap over runs); within-run spread (◇)",
        fontsize=9,
    )
    return finish(
        fig,
        f"{b.env}: behavioural diversity of the stored final policies",
        f"{EPISODES} common episodes per run (env seeds from {BEHAVIOUR_SEED}); descriptors: "
        f"{', '.join(b.names)}. " + caption_text,
    )


def diversity_section(builder: Any) -> Section | None:
    """The report's diversity section (None: fewer than two runs of an env stored policies)."""
    from algorithms.registry import UnknownAlgorithmError, get_algorithm
    from harness.report.data import caption

    families: dict[str, str] = {}
    for algo in builder.runs["algo"].astype(str).unique():
        try:
            families[algo] = str(get_algorithm(algo).family)
        except UnknownAlgorithmError:
            families[algo] = "?"
    policies = stored_policies(builder)
    measured = []
    for env in sorted(builder.runs["env"].astype(str).unique()):
        found = behaviours(env, builder.runs, builder.table.records, families, policies)
        if found is not None:
            measured.append(found)
    if not measured:
        return None
    section = Section("Behavioural diversity of the final policies")
    section.paragraphs.append(
        "Are the policies ES finds more diverse than RL's, as the GoodAI post remarks? Every "
        f"run that stored its final policy plays the same {EPISODES} episodes; each episode "
        "is described by what the agent did (the lander: where it came down and the fuel it "
        "burnt; locomotion: the torso's final position and gait statistics), standardised "
        "over the env's episodes. Between-run diversity: the mean distance between the runs' "
        "mean behaviours within a group (95% bootstrap interval over runs, n >= 3); within-run "
        "spread: between one run's own episodes, the env's randomness alone."
    )
    for b in measured:
        table = diversity_table(b)
        env_runs = builder.runs[builder.runs["env"] == b.env]
        builder.figure(
            section,
            diversity_figure(b, table, caption(env_runs)),
            f"diversity_{slug(b.env)}.png",
            f"behavioural diversity on {b.env}",
        )
        shown = table.drop(columns=["low", "high"]).round(3)
        section.tables.append((f"{b.env}: diversity per group.", shown))
        diff = family_difference(b)
        if diff is None:
            section.paragraphs.append(
                f"{b.env}: no ES-against-RL comparison (it needs two runs of each family)."
            )
            continue
        verdict = (
            "ES runs are more diverse"
            if diff["low"] > 0
            else "RL runs are more diverse"
            if diff["high"] < 0
            else "no difference shown (the interval contains 0)"
        )
        section.paragraphs.append(
            f"{b.env}: between-run diversity of ES minus RL {diff['difference']:+.2f} "
            f"[{diff['low']:+.2f}, {diff['high']:+.2f}] (95% bootstrap, "
            f"{diff['n_es']} ES runs, {diff['n_rl']} RL runs): {verdict}."
        )
    return section
