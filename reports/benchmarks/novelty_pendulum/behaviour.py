"""What the PendulumPO policies of this study do: behaviour characterisations and angle traces.

Two steps (docs/novelty-study.md):

    python reports/novelty_pendulum/behaviour.py extract runs/novelty_pendulum
        reads the run directories (not the report's archive: the novelty archive of BCs is
        only in each run's checkpoint, which runs.tar.xz does not carry) and writes, beside
        this file:
          archive_bcs.csv  every BC the nsr-es / nsra-es runs put into their novelty archive
                           (the M initial centres, then the updated centre of each
                           generation): cos, sin, |omega| in rad/s, from the final checkpoint
          final_bcs.csv    every run's final policy played on 10 fresh episodes (env seeds
                           1000-1009): return, the run's BC (mean cos, mean sin, mean
                           |omega|), and the share of the last 100 steps within 18 degrees of
                           upright (cos > 0.95); plus a reference: a hand-written swing-up and
                           balance controller that sees the full state (Pendulum-v1)
          traces.csv       the angle of the best final policy of nsr-es, nsra-es and optimes
                           (and the reference), step by step, on env seeds 1000-1002
    python reports/novelty_pendulum/behaviour.py draw
        draws archive_bcs.png and angle_traces.png from those CSVs alone.

The BC is envs.behaviour.pendulum_swing's (mean cos and sin of the angle, mean |angular
velocity| from consecutive angles); here |omega| is in rad/s (the BC divides it by the
env's max speed, 8), computed over the 200 observations the policy acted on.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEEDS = list(range(1000, 1010))
TRACE_SEEDS = [1000, 1001, 1002]
DT, MAX_SPEED = 0.05, 8.0
UP_COS = 0.95  # within 18 degrees of upright
#: a BC in this box is a balancing behaviour (the reference controller's BCs lie in it)
BALANCE_COS, BALANCE_OMEGA = 0.5, 1.5


def episode_bc(cos: np.ndarray, sin: np.ndarray) -> tuple[float, float, float, float]:
    """Mean cos, mean sin, mean |omega| (rad/s), share of the last 100 steps upright."""
    angles = np.arctan2(sin, cos)
    change = (np.diff(angles) + np.pi) % (2 * np.pi) - np.pi
    omega = float(np.abs(change).mean() / DT) if change.size else 0.0
    upright = float((cos[-100:] > UP_COS).mean())
    return float(cos.mean()), float(sin.mean()), omega, upright


def reference_episode(seed: int) -> tuple[float, np.ndarray, np.ndarray]:
    """A swing-up (energy pumping) and balance (PD) controller with the full state."""
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=seed)
    total, cos, sin = 0.0, [obs[0]], [obs[1]]
    for _ in range(200):
        c, s, w = (float(v) for v in obs)
        theta = np.arctan2(s, c)
        if c > 0.85:
            u = -(10.0 * theta + 2.0 * w)  # balance near the top
        else:
            energy = 0.5 * w**2 / 3.0 + 5.0 * (c - 1.0)  # 0 at rest upright (ml^2/3, mgl/2)
            u = 2.0 * np.sign(w if w != 0 else 1.0) if energy < 0 else -0.5 * w
        obs, reward, terminated, truncated, _ = env.step([float(np.clip(u, -2.0, 2.0))])
        total += float(reward)
        cos.append(obs[0])
        sin.append(obs[1])
        if terminated or truncated:
            break
    env.close()
    return total, np.array(cos[:-1]), np.array(sin[:-1])


def extract(runs_dir: Path) -> None:
    from harness.checkpoint import load_checkpoint
    from harness.replay import load_policy, play

    archive_rows, final_rows, traces = [], [], {}
    best: dict[str, tuple[float, str]] = {}
    for run in sorted(
        (p for p in runs_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    ):
        status = json.loads((run / "run.json").read_text())["status"]
        if status != "COMPLETED":
            continue
        config = json.loads((run / "config.json").read_text())
        algo, seed = config["algo"], config["seed"]
        tmax = (config.get("params") or {}).get("stagnation_generations")
        label = f"{algo} [t_max={tmax}]" if algo == "nsra-es" and tmax not in (None, 50) else algo
        if algo in ("nsr-es", "nsra-es"):
            state = load_checkpoint(run / "checkpoint.pkl")
            points = np.asarray(state["algorithm"]["novelty"]["archive"])
            size = len(state["algorithm"]["novelty"]["centres"])
            for i, (c, s, v) in enumerate(points):
                archive_rows.append(
                    dict(
                        run=run.name,
                        group=label,
                        seed=seed,
                        entry=i,
                        generation=max(0, i - size + 1),
                        cos=c,
                        sin=s,
                        omega=v * MAX_SPEED,
                    )
                )
        policy = load_policy(run, source="final")
        episodes = play(policy, SEEDS)
        for ep in episodes:
            c, s, w, up = episode_bc(ep.observations[:, 0], ep.observations[:, 1])
            final_rows.append(
                dict(
                    run=run.name,
                    group=label,
                    seed=seed,
                    env_seed=ep.seed,
                    episode_return=ep.episode_return,
                    cos=c,
                    sin=s,
                    omega=w,
                    upright_last100=up,
                )
            )
        mean_return = float(np.mean([ep.episode_return for ep in episodes]))
        if (
            label in ("nsr-es", "nsra-es", "optimes")
            and mean_return > best.get(label, (-np.inf, ""))[0]
        ):
            best[label] = (mean_return, run.name)
            traces[label] = (
                run.name,
                seed,
                [
                    np.degrees(np.arctan2(ep.observations[:, 1], ep.observations[:, 0]))
                    for ep in episodes[: len(TRACE_SEEDS)]
                ],
            )
        print(f"run {run.name} {label} seed {seed}: mean return {mean_return:.1f}", flush=True)
    ref_traces = []
    for seed in SEEDS:
        total, cos, sin = reference_episode(seed)
        c, s, w, up = episode_bc(cos, sin)
        final_rows.append(
            dict(
                run="-",
                group="reference controller (full state)",
                seed="-",
                env_seed=seed,
                episode_return=total,
                cos=c,
                sin=s,
                omega=w,
                upright_last100=up,
            )
        )
        if seed in TRACE_SEEDS:
            ref_traces.append(np.degrees(np.arctan2(sin, cos)))
    traces["reference controller (full state)"] = ("-", "-", ref_traces)
    write_csv(HERE / "archive_bcs.csv", archive_rows)
    write_csv(HERE / "final_bcs.csv", final_rows)
    trace_rows = [
        dict(group=label, run=run, seed=seed, env_seed=TRACE_SEEDS[k], step=t, angle_deg=a)
        for label, (run, seed, eps) in traces.items()
        for k, angles in enumerate(eps)
        for t, a in enumerate(angles)
    ]
    write_csv(HERE / "traces.csv", trace_rows)


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})
    print(f"wrote {path} ({len(rows)} rows)")


def draw() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    archive = pd.read_csv(HERE / "archive_bcs.csv")
    final = pd.read_csv(HERE / "final_bcs.csv")
    groups = [g for g in ["nsr-es", "nsra-es"] if g in set(archive["group"])]
    groups += sorted(set(archive["group"]) - set(groups))
    fig, axes = plt.subplots(
        1, len(groups) + 1, figsize=(5.2 * (len(groups) + 1), 4.6), sharex=True, sharey=True
    )
    for ax, group in zip(axes, groups, strict=False):  # the last axis: final policies
        rows = archive[archive["group"] == group]
        points = ax.scatter(
            rows["omega"], rows["cos"], c=rows["generation"], cmap="viridis", s=10, alpha=0.7
        )
        inside = ((rows["cos"] > BALANCE_COS) & (rows["omega"] < BALANCE_OMEGA)).sum()
        ax.set_title(
            f"{group}: novelty archive, {rows['run'].nunique()} runs\n"
            f"{len(rows)} BCs, {inside} in the balancing box"
        )
        fig.colorbar(points, ax=ax, label="generation (0: initial centres)")
    ax = axes[-1]
    markers = {"nsr-es": "o", "nsra-es": "s", "optimes": "^", "snes": "v", "cma": "D"}
    for group, rows in final.groupby("group", sort=False):
        per_run = rows.groupby("run")[["omega", "cos"]].mean() if group[0] != "r" else rows
        ax.scatter(
            per_run["omega"],
            per_run["cos"],
            label=group,
            s=28,
            alpha=0.85,
            marker=markers.get(group.split(" ")[0], "*"),
        )
    ax.set_title("final policies (10 episodes each;\nper run, reference per episode)")
    ax.legend(fontsize=7, loc="lower right")
    for ax in axes:
        ax.axhspan(
            BALANCE_COS, 1.0, xmin=0, xmax=BALANCE_OMEGA / 8.0, color="tab:green", alpha=0.12
        )
        ax.set_xlim(0, 8)
        ax.set_ylim(-1, 1)
        ax.set_xlabel("mean |angular velocity| (rad/s)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean cos(angle)  (1: upright)")
    fig.suptitle(
        "PendulumPO behaviour characterisations (green: balancing box, "
        f"cos > {BALANCE_COS}, |omega| < {BALANCE_OMEGA} rad/s)"
    )
    fig.tight_layout()
    fig.savefig(HERE / "archive_bcs.png", dpi=110)
    print(f"wrote {HERE / 'archive_bcs.png'}")

    traces = pd.read_csv(HERE / "traces.csv")
    labels = list(dict.fromkeys(traces["group"]))
    fig, axes = plt.subplots(len(labels), 1, figsize=(9, 2.3 * len(labels)), sharex=True)
    for ax, label in zip(np.atleast_1d(axes), labels, strict=True):
        rows = traces[traces["group"] == label]
        for env_seed, ep in rows.groupby("env_seed"):
            angle = ep["angle_deg"].to_numpy(dtype=float)
            wraps = np.flatnonzero(np.abs(np.diff(angle)) > 180) + 1  # through the bottom
            ax.plot(
                np.insert(ep["step"].to_numpy(dtype=float), wraps, np.nan),
                np.insert(angle, wraps, np.nan),
                lw=1,
                label=f"env seed {env_seed}",
            )
        run = rows["run"].iloc[0]
        ax.set_title(
            f"{label}"
            + (
                f" (run {run}, seed {rows['seed'].iloc[0]}: the group's best final policy)"
                if run != "-"
                else ""
            ),
            fontsize=9,
        )
        ax.axhspan(-18, 18, color="tab:green", alpha=0.12)
        ax.set_ylim(-185, 185)
        ax.set_yticks([-180, -90, 0, 90, 180])
        ax.set_ylabel("angle (deg)\n0 up, +-180 down")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="upper right")
    np.atleast_1d(axes)[-1].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(HERE / "angle_traces.png", dpi=110)
    print(f"wrote {HERE / 'angle_traces.png'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["extract"]:
        extract(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["draw"]:
        draw()
    else:
        sys.exit(__doc__)
