"""The training loop shared by every algorithm: step, log, evaluate, checkpoint, stop."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from algorithms.base import Algorithm, RunContext, StepRecord
from algorithms.es_common import eval_seeds
from algorithms.registry import get_algorithm
from envs.policies import PolicySpec, policy_spec_for
from envs.registry import make_env, resolve_env_id
from harness.budget import Budget
from harness.checkpoint import CHECKPOINT_NAME, save_checkpoint
from harness.config import validate_params

COMMON_METRICS = (
    "timesteps", "episodes", "wall_time_s", "fitness_mean", "fitness_max", "fitness_min",
    "bytes_to_workers", "bytes_from_workers",
)
EVAL_METRICS = ("eval_return_mean", "eval_return_std")


@dataclass
class Progress:
    """Counters of a run; part of every checkpoint."""

    step: int = 0
    timesteps: int = 0
    episodes: int = 0
    wall_time_s: float = 0.0
    eval_index: int = 0
    next_eval_at: int = 0
    last_eval: float | None = None
    last_eval_step: int = -1
    stop_reason: str | None = None


def build_policy_spec(config: dict[str, Any]) -> PolicySpec:
    """The policy the config describes, sized for its env's spaces."""
    env = make_env(config["env"])
    try:
        policy = config["policy"]
        return policy_spec_for(
            env,
            kind=policy["kind"],
            hidden_sizes=tuple(policy["hidden_sizes"]),
            activation=policy["activation"],
            discretize=policy.get("discretize", 0),
        )
    finally:
        env.close()


def build_algorithm(config: dict[str, Any]) -> Algorithm:
    """Instantiate the configured algorithm with its workers."""
    algo_cls = get_algorithm(config["algo"])
    context = RunContext(
        env_name=config["env"],
        policy_spec=build_policy_spec(config),
        seed=int(config["seed"]),
        episodes_per_fitness=int(config["episodes"]),
        workers=int(config["workers"]),
        backend=config["backend"],
        ray_address=config.get("ray_address"),
        max_episode_steps=config.get("max_episode_steps"),
        fail_on_env_error=bool(config.get("fail_on_env_error", True)),
    )
    params = validate_params(config["params"], algo_cls.Config, f"params of {config['algo']}")
    return algo_cls(context, params)


class Trainer:
    """Drives one algorithm to its budget and reports through a Sacred run (or not)."""

    def __init__(self, config: dict[str, Any], run: Any = None, run_dir: Path | None = None,
                 show_progress: bool = True) -> None:
        self.config = config
        self.run = run
        self.run_dir = run_dir
        self.show_progress = show_progress
        self.budget = Budget(*(config[k] for k in ("timesteps", "generations", "time_limit",
                                                   "target_return")))
        self.progress = Progress(next_eval_at=0)
        self.algorithm = build_algorithm(config)

    # -- logging ------------------------------------------------------------
    def _log(self, name: str, value: float) -> None:
        if self.run is not None:
            self.run.log_scalar(name, value, self.progress.step)

    def _record(self, record: StepRecord) -> dict[str, float]:
        p = self.progress
        row = {
            "timesteps": float(p.timesteps),
            "episodes": float(p.episodes),
            "wall_time_s": p.wall_time_s,
            "fitness_mean": record.fitness_mean,
            "fitness_max": record.fitness_max,
            "fitness_min": record.fitness_min,
            "bytes_to_workers": float(record.bytes_to_workers),
            "bytes_from_workers": float(record.bytes_from_workers),
            "worker_seconds": record.worker_seconds,
            **record.extras,
        }
        for name, value in row.items():
            self._log(name, value)
        return row

    def evaluate(self) -> tuple[float, float]:
        """Evaluate the current policy on the next fresh seeded episodes; log the result."""
        p = self.progress
        episodes = int(self.config["eval_episodes"])
        seeds = eval_seeds(int(self.config["seed"]), p.eval_index, episodes)
        returns = np.asarray(self.algorithm.evaluate_policy(seeds), dtype=np.float64)
        mean, std = float(returns.mean()), float(returns.std())
        p.eval_index += 1
        p.last_eval = mean
        p.last_eval_step = p.step
        self._log("eval_return_mean", mean)
        self._log("eval_return_std", std)
        self._log("eval_timesteps", float(p.timesteps))
        return mean, std

    # -- checkpointing --------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue this run."""
        return {"config": self.config, "progress": self.progress,
                "algorithm": self.algorithm.state_dict()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`checkpoint_state`'s output."""
        self.progress = state["progress"]
        self.algorithm.load_state_dict(state["algorithm"])

    def save_checkpoint(self) -> None:
        if self.run_dir is None:
            return
        try:
            state = self.checkpoint_state()
        except NotImplementedError:
            return
        save_checkpoint(self.run_dir / CHECKPOINT_NAME, state)

    # -- the loop -------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Step until the budget is used; return a summary."""
        p = self.progress
        interval = int(self.config["eval_every_timesteps"])
        checkpoint_every = int(self.config["checkpoint_every"])
        bar = self._progress_bar()
        started = time.perf_counter() - p.wall_time_s
        try:
            while p.stop_reason is None:
                record = self.algorithm.step()
                p.step += 1
                p.timesteps += record.timesteps
                p.episodes += record.episodes
                p.wall_time_s = time.perf_counter() - started
                self._record(record)
                if p.timesteps >= p.next_eval_at:
                    self.evaluate()
                    p.next_eval_at = (p.timesteps // interval + 1) * interval
                    p.wall_time_s = time.perf_counter() - started
                p.stop_reason = self.budget.exhausted(p.timesteps, p.step, p.wall_time_s,
                                                      p.last_eval)
                if p.stop_reason is not None and p.last_eval_step != p.step:
                    self.evaluate()
                    p.stop_reason = self.budget.exhausted(p.timesteps, p.step, p.wall_time_s,
                                                          p.last_eval) or p.stop_reason
                if checkpoint_every and p.step % checkpoint_every == 0:
                    self.save_checkpoint()
                self._update_bar(bar, record)
        finally:
            bar.close()
        self.save_checkpoint()
        return self.finish()

    def _progress_bar(self) -> tqdm:
        total = self.budget.timesteps
        return tqdm(
            total=total, initial=min(self.progress.timesteps, total or 0) if total else 0,
            unit="step", unit_scale=True, dynamic_ncols=True, file=sys.__stderr__,
            disable=not self.show_progress, desc=f"{self.config['algo']} {self.config['env']}",
        )

    def _update_bar(self, bar: tqdm, record: StepRecord) -> None:
        if bar.total:
            bar.update(min(record.timesteps, max(bar.total - bar.n, 0)))
        last = self.progress.last_eval
        bar.set_postfix(gen=self.progress.step, steps=self.progress.timesteps,
                        eval="-" if last is None else f"{last:.1f}", refresh=False)

    def finish(self) -> dict[str, Any]:
        """Save final parameters and the policy spec as artifacts; return the summary."""
        p = self.progress
        summary = {
            "algo": self.config["algo"],
            "env": resolve_env_id(self.config["env"]),
            "steps": p.step,
            "timesteps": p.timesteps,
            "episodes": p.episodes,
            "wall_time_s": p.wall_time_s,
            "final_eval_return": p.last_eval,
            "stop_reason": p.stop_reason,
        }
        if self.run is not None:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                np.save(folder / "final_params.npy", self.algorithm.current_parameters())
                spec = self.algorithm.context.policy_spec.to_dict()
                (folder / "policy_spec.json").write_text(json.dumps(spec, indent=2))
                (folder / "summary.json").write_text(
                    json.dumps({**summary, **self.algorithm.artifacts()}, indent=2)
                )
                for name in ("final_params.npy", "policy_spec.json", "summary.json"):
                    self.run.add_artifact(str(folder / name), name)
        return summary

    def close(self) -> None:
        self.algorithm.close()
