"""Where GoodAI's discretised Ant policy starts: how many first candidates leave the fall.

GoodAI's AntBulletEnv policy (MLP 28-64-64-8, ReLU, 5 action levels) under OpenAI-ES's
normc init outputs about 0 on every action: zero torque, the ant folds and the episode ends
after 20 steps with return 10. This measures, per init scheme and run seed, the share of
sigma=0.02 perturbations of the initial policy (obs statistics as at generation 0) whose
episode does anything else: the only candidates that give the ranks a signal.

    .venv/bin/python reports/benchmarks/goodai_ant_init_plateau.py \
        > reports/benchmarks/goodai_ant_init_plateau.txt
"""

from __future__ import annotations

import numpy as np

from algorithms.es_common import STREAM_INIT, stream_rng
from envs.policies import build_policy, policy_spec_for
from envs.registry import make_env
from envs.rollout import RolloutWorker

SIGMA, CANDIDATES, SEEDS = 0.02, 40, (0, 1)


def main() -> None:
    env = make_env("AntBulletEnv")
    env.reset(seed=5)
    steps, total = 0, 0.0
    while True:
        _, reward, terminated, truncated, _ = env.step(np.zeros(8))
        steps, total = steps + 1, total + float(reward)
        if terminated or truncated:
            break
    print(f"# zero torque: the episode ends after {steps} steps with return {total:.2f}")
    print(f"# {CANDIDATES} perturbations (sigma {SIGMA}) of each initial policy, 1 episode each")
    print("init\tseed\tcentre_return\tcentre_steps\tcandidates_not_at_the_fall\tbest")
    for init in ("normc", "torch"):
        spec = policy_spec_for(env, "mlp", (64, 64), "relu", 5, init=init)
        policy = build_policy(spec)
        mean, std = np.zeros(spec.obs_dim, np.float32), np.ones(spec.obs_dim, np.float32)
        with RolloutWorker("AntBulletEnv", spec) as worker:
            for seed in SEEDS:
                centre = policy.init_params(stream_rng(seed, STREAM_INIT))
                played = worker.run(centre, mean, std, [seed])
                rng = np.random.default_rng(seed)
                returns = np.array(
                    [
                        worker.run(
                            centre + SIGMA * rng.standard_normal(centre.size).astype(np.float32),
                            mean,
                            std,
                            [int(rng.integers(0, 2**31))],
                        ).returns[0]
                        for _ in range(CANDIDATES)
                    ]
                )
                away = int((np.abs(returns - total) > 0.5).sum())
                print(
                    f"{init}\t{seed}\t{played.returns[0]:.2f}\t{int(played.lengths[0])}\t"
                    f"{away}/{CANDIDATES}\t{returns.max():.1f}"
                )
    env.close()


if __name__ == "__main__":
    main()
