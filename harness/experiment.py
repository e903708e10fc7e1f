"""The Sacred experiment behind every run.

Use it through ``harness run`` or Sacred's own command line::

    python -m harness.experiment with algo=optimes env=AntBulletEnv episodes=5
    python -m harness.experiment with lander algo=cma

Missing knobs are filled from ``experiments/defaults.yaml`` by a config hook, so
the stored ``config.json`` of a run holds every value that shaped it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sacred import SETTINGS, Experiment
from sacred.observers import FileStorageObserver
from sacred.utils import apply_backspaces_and_linefeeds

from harness.config import RUN_KEYS, complete_config

# Worker processes and tqdm write to the real stderr; "sys" capture keeps them out of cout.txt.
SETTINGS.CAPTURE_MODE = "sys"
SETTINGS.CONFIG.READ_ONLY_CONFIG = False
SETTINGS.DISCOVER_SOURCES = "none"

ex = Experiment("es-harness", save_git_info=False)
ex.captured_out_filter = apply_backspaces_and_linefeeds


@ex.config
def base_config() -> None:
    algo = "optimes"  # algorithm name (see `harness list`)
    env = "LunarLanderContinuous"  # env short name or any gymnasium id
    seed = 0  # run seed: every random choice derives from it
    episodes = 1  # episodes per fitness evaluation (ES family)
    workers = 1  # parallel evaluation workers (RL: parallel envs)
    backend = "process"  # inline, process or ray
    ray_address = None  # Ray cluster address (null: local instance or RAY_ADDRESS)
    timesteps = None  # budget: training env steps
    generations = None  # budget: generations (RL: rollout/update chunks)
    time_limit = None  # budget: training wall-clock seconds
    target_return = None  # stop once an evaluation's mean return reaches this
    sweep = None  # name of the sweep that launched this run
    policy = {}  # policy: kind, hidden_sizes, activation, discretize
    params = {}  # algorithm hyperparameters; missing ones from defaults.yaml


for _key in RUN_KEYS:
    ex.add_config({_key: None})


@ex.config_hook
def fill_defaults(config: dict[str, Any], command_name: str, logger: Any) -> dict[str, Any]:
    """Complete and validate the config before any observer starts."""
    return complete_config(dict(config))


@ex.named_config
def lander() -> None:
    """GoodAI study: LunarLanderContinuous with the 18-parameter linear policy."""
    env = "LunarLanderContinuous"
    policy = {"kind": "linear"}


@ex.named_config
def ant() -> None:
    """GoodAI study: AntBulletEnv with the 6536-parameter 64-64 ReLU MLP, discretised actions."""
    env = "AntBulletEnv"
    policy = {"kind": "mlp", "hidden_sizes": [64, 64], "activation": "relu",
              "discretize": 5}


@ex.named_config
def pendulum_partial() -> None:
    """GoodAI study: Pendulum without velocity, LSTM of 16 cells (1361 parameters)."""
    env = "PendulumPO"
    policy = {"kind": "lstm", "hidden_sizes": [16]}


@ex.main
def main(_config: dict[str, Any], _run: Any) -> dict[str, Any]:
    """Train the configured algorithm to its budget."""
    from harness.runner import Trainer

    run_dir = _run_dir(_run)
    show_progress = os.environ.get("HARNESS_PROGRESS", "1") != "0"
    trainer = Trainer(dict(_config), _run, run_dir, show_progress=show_progress)
    try:
        return trainer.train()
    finally:
        trainer.close()


def _run_dir(run: Any) -> Path | None:
    for observer in run.observers:
        if isinstance(observer, FileStorageObserver) and observer.dir:
            return Path(observer.dir)
    return None


if __name__ == "__main__":
    if not any(flag in sys.argv for flag in ("-F", "--file_storage", "-m", "--mongo_db")):
        ex.observers.append(FileStorageObserver("runs"))
    ex.run_commandline()
