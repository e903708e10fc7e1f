"""The final RecurrentPPO policy of the run on 100 fresh episodes (the confirmation seeds).

Rebuilds the algorithm from the run's config.json, loads the run's last checkpoint
(weights, VecNormalize statistics) and plays 100 deterministic episodes on the seeds of
``es_common.confirm_seeds(seed, 0, 100)``. Usage: python confirm_100.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from algorithms.es_common import confirm_seeds
from harness.checkpoint import load_checkpoint
from harness.runner import build_algorithm

run_dir = Path(sys.argv[1])
config = json.loads((run_dir / "config.json").read_text())
algorithm = build_algorithm(config)
try:
    state = load_checkpoint(run_dir / "checkpoint.pkl")
    algorithm.load_state_dict(state["algorithm"])
    returns = algorithm.evaluate_policy(confirm_seeds(int(config["seed"]), 0, 100))
finally:
    algorithm.close()
print(
    json.dumps(
        {
            "run": str(run_dir),
            "timesteps": int(state["algorithm"]["num_timesteps"]),
            "episodes": int(returns.size),
            "return_mean": round(float(np.mean(returns)), 1),
            "return_std": round(float(np.std(returns)), 1),
        }
    )
)
