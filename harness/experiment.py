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

from harness.config import complete_config

# Worker processes and tqdm write to the real stderr; "sys" capture keeps them out of cout.txt.
SETTINGS.CAPTURE_MODE = "sys"
SETTINGS.CONFIG.READ_ONLY_CONFIG = False
SETTINGS.DISCOVER_SOURCES = "none"

ex = Experiment("es-harness", save_git_info=False)
ex.captured_out_filter = apply_backspaces_and_linefeeds  # type: ignore[assignment]


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
    policy = {"kind": None, "hidden_sizes": None, "activation": None, "discretize": None}
    params = {}  # algorithm hyperparameters; missing ones from defaults.yaml
    eval_every_timesteps = None  # evaluate the current policy every this many training steps
    eval_episodes = None  # fresh seeded episodes per evaluation
    checkpoint_every = None  # write a checkpoint every this many steps (generations/updates)
    max_episode_steps = None  # training episode step cap (null: the env's own limit)
    fail_on_env_error = None  # stop on an env exception or NaN; false scores it as worst
    sync = None  # broadcast (centre each generation) or seeds (replicated, Algorithm 2)


@ex.config_hook
def fill_defaults(config: dict[str, Any], command_name: str, logger: Any) -> dict[str, Any]:
    """Complete and validate the config before any observer starts; return what it filled in."""
    given = {key: value for key, value in config.items() if not key.startswith("__")}
    completed = complete_config(given)
    return {key: value for key, value in completed.items() if given.get(key) != value}


# GoodAI study: LunarLanderContinuous with the 18-parameter linear policy.
@ex.named_config
def lander() -> None:
    env = "LunarLanderContinuous"
    policy = {"kind": "linear"}


# GoodAI study: AntBulletEnv with the 6536-parameter 64-64 ReLU MLP, discretised actions.
@ex.named_config
def ant() -> None:
    env = "AntBulletEnv"
    policy = {"kind": "mlp", "hidden_sizes": [64, 64], "activation": "relu",
              "discretize": 5}


# GoodAI study: Pendulum without velocity, LSTM of 16 cells (1361 parameters).
@ex.named_config
def pendulum_partial() -> None:
    env = "PendulumPO"
    policy = {"kind": "lstm", "hidden_sizes": [16]}


@ex.main
def main(_config: dict[str, Any], _run: Any, policy: dict[str, Any],
         params: dict[str, Any]) -> dict[str, Any]:
    """Train the configured algorithm to its budget.

    ``policy`` and ``params`` are named so that Sacred accepts keys that a
    named config or ``with params.KEY=...`` adds inside them.
    """
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
