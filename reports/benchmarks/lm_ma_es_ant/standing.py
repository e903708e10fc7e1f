"""What the AntBulletEnv study's final policies do: one episode each, its return, length
and how far the torso moved.

    python reports/benchmarks/lm_ma_es_ant/standing.py runs/lm_ma_es_ant \
        > reports/benchmarks/lm_ma_es_ant/standing.txt

Reads each run directory's final policy (``harness.load_policy``; the report's archive
keeps records only) and replays it on evaluation seed 1000, the same for every run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import harness
from envs.behaviour import body_position

SEED = 1000


def main(runs_dir: Path) -> None:
    print(f"one episode per run on seed {SEED}; torso displacement in metres (x, y)")
    for run in sorted(runs_dir.glob("[0-9]*"), key=lambda p: int(p.name)):
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        policy = harness.load_policy(run)
        env = policy.make_env()
        obs, _ = env.reset(seed=SEED)
        start = body_position(env)
        total, steps, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += float(reward)
            steps += 1
            done = terminated or truncated
        end = body_position(env)
        assert start is not None and end is not None
        dx, dy = end[0] - start[0], end[1] - start[1]
        print(
            f"{config['algo']:9s} seed {config['seed']}: return {total:7.1f}, {steps} steps, "
            f"torso moved x {dx:+.2f}, y {dy:+.2f}"
        )
        env.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
