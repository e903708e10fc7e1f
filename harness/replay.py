"""``harness.load_policy``: any run's trained policy as a callable, and episodes played with it.

Example (documented in the README's "Replay and watch")::

    import harness

    policy = harness.load_policy("runs/3")  # final policy, or the last checkpoint's
    env = policy.make_env()  # the env as the run's evaluation saw it
    obs, _ = env.reset(seed=0)
    policy.reset()
    done = False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        done = terminated or truncated

A COMPLETED run's final policy is read from its stored files (formats in
:mod:`harness.policy_io`). A run that is RUNNING, INTERRUPTED or FAILED has no
final policy: the algorithm is rebuilt from its last checkpoint, as ``harness
resume`` does, with one inline worker, and its policy exported; ``source`` and
``step`` say which was used. :func:`play_episode` is the one loop that plays a
policy (``harness enjoy``, the report's frames and behaviour statistics).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.es_common import eval_seeds
from envs.behaviour import body_position
from harness import rundir
from harness.legacy_policy import legacy_sb3_fields
from harness.policy_io import Act, PolicyLoadError, Reset, has_policy, load_stored, save_policy

__all__ = [
    "Episode",
    "LastEvaluation",
    "LoadedPolicy",
    "PolicyLoadError",
    "body_position",
    "last_evaluation",
    "load_policy",
    "play_episode",
]

SOURCES = ("auto", "final", "checkpoint")


@dataclass
class LoadedPolicy:
    """A stored policy: call it with one observation to get one action.

    ``source`` is ``"final"`` (the run's final policy) or ``"checkpoint"`` (its last
    checkpoint, taken after training step ``step``); ``status`` is the run's recorded
    status. ``deterministic`` is the default of every call (the ES policies have no
    exploration noise: they act the same either way).
    """

    run_dir: Path
    config: dict[str, Any]
    source: str
    step: int | None
    status: str | None
    act: Act
    reset_state: Reset
    deterministic: bool = True

    def __call__(self, obs: np.ndarray, deterministic: bool | None = None) -> Any:
        """The action for ``obs`` (the deterministic one unless asked otherwise)."""
        return self.act(obs, self.deterministic if deterministic is None else deterministic)

    def reset(self) -> None:
        """Clear recurrent state before a new episode (a no-op for feed-forward policies)."""
        self.reset_state()

    def __repr__(self) -> str:
        """One line: the run and which of its policies (``config`` holds the rest)."""
        step = f", step={self.step}" if self.source == "checkpoint" else ""
        return (
            f"LoadedPolicy(run_dir={str(self.run_dir)!r}, algo={self.config.get('algo')!r}, "
            f"env={self.config.get('env')!r}, source={self.source!r}{step}, "
            f"status={self.status!r})"
        )

    @property
    def algo(self) -> str:
        return str(self.config["algo"])

    @property
    def env_name(self) -> str:
        return str(self.config["env"])

    @property
    def max_episode_steps(self) -> int | None:
        """The run's episode cap (its evaluation's), or None for the env's own limit."""
        cap = self.config.get("max_episode_steps")
        return None if cap is None else int(cap)

    def make_env(self, render_mode: str | None = None) -> Any:
        """The env as the run's evaluation saw it (the env's own reward), optionally rendering.

        Rendering is headless: MuJoCo gets ``MUJOCO_GL=egl`` unless the variable is set
        (GLFW, its default, needs a display), and pygame's SDL (Box2D and classic-control
        frames) gets its ``dummy`` video and audio drivers: ``pygame.init`` would otherwise
        probe Wayland and ALSA, printing ``XDG_RUNTIME_DIR is invalid`` and ``ALSA lib``
        errors for devices an ``rgb_array`` frame never uses.
        """
        from envs.registry import UnknownEnvError, make_env

        if render_mode is not None:
            os.environ.setdefault("MUJOCO_GL", "egl")
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        try:
            env = make_env(self.env_name, render_mode=render_mode)
        except UnknownEnvError as error:
            raise PolicyLoadError(env_refusal(self.env_name, error)) from None
        if bool((self.config.get("params") or {}).get("time_feature")):
            from sb3_contrib.common.wrappers import TimeFeatureWrapper

            env = TimeFeatureWrapper(env)
        return env

    def describe(self) -> str:
        """One line: which policy of which run this is."""
        where = "final policy" if self.source == "final" else f"last checkpoint (step {self.step})"
        return f"{self.algo} on {self.env_name}: {where} of run {self.run_dir} ({self.status})"


def _from_checkpoint(run_dir: Path) -> tuple[Act, Reset, int, dict[str, Any]]:
    """Rebuild the algorithm from the run's checkpoint (inline, one worker) and export it."""
    from harness.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
    from harness.runner import build_algorithm

    try:
        state = load_checkpoint(run_dir / CHECKPOINT_NAME)
    except CheckpointError as error:
        raise PolicyLoadError(f"run {run_dir} has no final policy and {error}") from None
    config = dict(state["config"])
    algorithm = build_algorithm({**config, "backend": "inline", "workers": 1, "sync": "broadcast"})
    try:
        algorithm.load_state_dict(state["algorithm"])
        with tempfile.TemporaryDirectory(prefix="harness-policy-") as tmp:
            save_policy(algorithm, Path(tmp))
            act, reset = load_stored(Path(tmp))
    finally:
        algorithm.close()
    return act, reset, int(state["progress"]["step"]), config


def _import_run_modules(folder: Path, config: Any, imports: Sequence[str]) -> None:
    """Import the run's modules on the user's word (``imports``, or a checkpoint signed
    with their key: :mod:`harness.user_modules`) and check its env resolves, so a run
    made with ``--import`` replays and one whose modules are not allowed is refused in
    one line before anything is imported."""
    from envs.registry import UnknownEnvError, resolve_env_id
    from harness.config import ConfigError
    from harness.user_modules import UntrustedImportError, load_run_modules

    if not isinstance(config, dict):
        raise PolicyLoadError(f"run {folder} is damaged: {rundir.CONFIG} is not a mapping")
    try:
        load_run_modules(folder, config, imports, what=f"run {folder}")
    except (UntrustedImportError, ConfigError) as error:
        raise PolicyLoadError(str(error)) from None
    env = str(config.get("env"))
    try:
        resolve_env_id(env)
    except UnknownEnvError as error:
        raise PolicyLoadError(env_refusal(env, error)) from None


#: The largest sizes a run's config may give what replays it: ``eval_episodes`` sizes the
#: list of episode seeds (``harness enjoy``, the report's frames) and ``max_episode_steps``
#: how long an episode's actions and observations grow. A config is only data: a planted
#: ``eval_episodes: 300000000`` must be a refusal, not a 2.4 GB array.
MAX_EVAL_EPISODES = 100_000
MAX_EPISODE_STEPS = 1_000_000


def _check_sizes(folder: Path, config: dict[str, Any]) -> None:
    """Refuse (one line) a config whose sizes are not integers within the maxima above."""
    from harness.schema import SEED_MAX

    for key, least, most, nullable in (
        ("eval_episodes", 1, MAX_EVAL_EPISODES, False),
        ("seed", 0, SEED_MAX, False),
        ("max_episode_steps", 1, MAX_EPISODE_STEPS, True),
    ):
        value = config.get(key)
        if key not in config or (value is None and nullable):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise PolicyLoadError(
                f"run {folder}: {rundir.CONFIG} has {key} {value!r}"[:200]
                + f", not an integer from {least:,} to {most:,}"
            )


def _check_record(folder: Path, config: Any) -> None:
    """Refuse (one line) a run whose config, ``run.json`` or metrics hold a field a replay
    cannot use (``max_episode_steps: "x"``, a seed that is text): see
    :mod:`harness.record_check`."""
    from harness.record_check import check_config, check_metrics, check_run_entry

    try:
        check_config(config)
        check_run_entry(rundir.read_json(folder / rundir.RUN))
        check_metrics(rundir.read_metrics(folder))
    except rundir.UnreadableRun as error:
        raise PolicyLoadError(f"run {folder} cannot be replayed: {error}") from None


def env_refusal(env: str, error: Exception) -> str:
    """One line for an env that cannot be made: which env, and the ``--import`` to pass."""
    reason = str(error).split("; an env of your own")[0]
    return (
        f"cannot make env {env!r} ({reason}); if a module of yours registers it, pass "
        "--import MODULE (harness.load_policy(..., imports=['MODULE'])), found on PYTHONPATH"
    )


def load_policy(
    run_dir: str | Path,
    deterministic: bool = True,
    source: str = "auto",
    imports: Sequence[str] = (),
) -> LoadedPolicy:
    """The policy a run trained, as a callable from one observation to one action.

    ``source``: ``"final"`` (the stored final policy), ``"checkpoint"`` (the last
    checkpoint's) or ``"auto"``: the final one of a COMPLETED run that stored one, else
    the checkpoint's. Observations are normalised as the run's evaluation did (OpenAI-ES
    running statistics, or SB3's ``VecNormalize``). ``imports``: modules of your own to
    import (as ``harness run --import``); a run's recorded ``imports`` are imported only
    when named here or when its checkpoint is signed with your key, since importing runs
    code and a run directory is only data (:mod:`harness.user_modules`). Raises
    :class:`PolicyLoadError` (one line naming the run) when the run or its policy cannot
    be read, its modules are not allowed, or its env cannot be made.
    """
    folder = Path(run_dir)
    if source not in SOURCES:
        raise PolicyLoadError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if isinstance(imports, str):
        imports = [imports]
    if not (folder / rundir.CONFIG).is_file():
        raise PolicyLoadError(f"{str(run_dir)!r} is not a run directory (no {rundir.CONFIG})")
    from harness.policy_io import read_json

    config = read_json(folder / rundir.CONFIG)
    _check_record(folder, config)
    _import_run_modules(folder, config, list(imports))
    _check_sizes(folder, config)
    status = rundir.read_status(folder)
    final = has_policy(folder)
    use_final = source == "final" or (source == "auto" and final and status == "COMPLETED")
    step: int | None = None
    if use_final:
        if not final:
            raise PolicyLoadError(f"run {run_dir} stored no final policy (status {status})")
        act, reset = load_stored(folder, legacy=lambda: legacy_sb3_fields(folder, config))
    else:
        act, reset, step, config = _from_checkpoint(folder)
    return LoadedPolicy(
        run_dir=folder,
        config=config,
        source="final" if use_final else "checkpoint",
        step=step,
        status=status,
        act=act,
        reset_state=reset,
        deterministic=deterministic,
    )


@dataclass(frozen=True)
class LastEvaluation:
    """The run's last evaluation of the policy loaded: its index, episode seeds and mean.

    ``step`` is the training step it followed; ``of_this_policy`` whether the policy
    loaded is the one it evaluated (a checkpoint taken later is not).
    """

    index: int
    seeds: list[int]
    return_mean: float
    step: int
    of_this_policy: bool


def last_evaluation(policy: LoadedPolicy) -> LastEvaluation | None:
    """The run's last evaluation at or before the loaded policy (None: none logged).

    Evaluation ``i`` of a run played the seeds :func:`algorithms.es_common.eval_seeds`
    gives for ``(seed, i, eval_episodes)``; ``metrics.json`` lists one
    ``eval_return_mean`` per evaluation, in order.
    """
    try:
        series = rundir.read_metrics(policy.run_dir).get("eval_return_mean") or {}
    except (OSError, ValueError):
        return None
    steps = list(series.get("steps") or [])
    values = list(series.get("values") or [])
    if policy.step is not None:
        kept = [i for i, s in enumerate(steps) if s <= policy.step]
        steps, values = [steps[i] for i in kept], [values[i] for i in kept]
    if not steps:
        return None
    index = len(steps) - 1
    episodes = int(policy.config["eval_episodes"])
    seeds = eval_seeds(int(policy.config["seed"]), index, episodes)
    last_step = int(steps[-1])
    of_this = policy.step is None or last_step == policy.step
    mean = float("nan") if values[-1] is None else float(values[-1])  # null: not recorded
    return LastEvaluation(index, seeds, mean, last_step, of_this)


@dataclass
class Episode:
    """One played episode: its return (the env's own reward), length, actions and frames.

    ``observations`` are the ones the policy acted on; ``position`` is
    :func:`body_position` at the end.
    """

    seed: int
    episode_return: float
    length: int
    actions: np.ndarray
    observations: np.ndarray
    position: tuple[float, float] | None
    frames: list[np.ndarray] = field(default_factory=list)
    frame_steps: list[int] = field(default_factory=list)


def play_episode(
    policy: LoadedPolicy,
    env: Any,
    seed: int,
    frame_at: Callable[[int], bool] | None = None,
    sink: Any = None,
) -> Episode:
    """Play one episode from ``env.reset(seed=seed)`` under the run's episode cap.

    ``frame_at(t)``: whether to take ``env.render()`` after ``t`` steps (t = 0 is the
    reset state; the env must render ``rgb_array``); frames go to ``sink.append``
    (a video writer) or, without a sink, into the episode's ``frames``, their steps
    into ``frame_steps``.
    """
    cap = policy.max_episode_steps
    policy.reset()
    obs, _ = env.reset(seed=int(seed))
    frames: list[np.ndarray] = []
    if sink is None:
        sink = frames
    actions: list[np.ndarray] = []
    seen: list[np.ndarray] = []
    total, steps, done = 0.0, 0, False
    frame_steps: list[int] = []
    if frame_at is not None and frame_at(0):
        sink.append(np.asarray(env.render()))
        frame_steps.append(0)
    while not done and (cap is None or steps < cap):
        action = policy(obs)
        seen.append(np.asarray(obs, dtype=np.float64).ravel())
        actions.append(np.asarray(action, dtype=np.float64).ravel())
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        steps += 1
        done = bool(terminated or truncated)
        if frame_at is not None and frame_at(steps):
            sink.append(np.asarray(env.render()))
            frame_steps.append(steps)
    return Episode(
        seed=int(seed),
        episode_return=total,
        length=steps,
        actions=np.stack(actions) if actions else np.zeros((0, 0)),
        observations=np.stack(seen) if seen else np.zeros((0, 0)),
        position=body_position(env),
        frames=frames,
        frame_steps=frame_steps,
    )


def play(
    policy: LoadedPolicy,
    seeds: Sequence[int],
    render: bool = False,
    frame_at: Callable[[int], bool] | None = None,
) -> list[Episode]:
    """One episode per seed on a fresh env (rendering ``rgb_array`` frames when ``render``)."""
    env = policy.make_env(render_mode="rgb_array" if render else None)
    try:
        chosen = frame_at if frame_at is not None else (lambda _t: True) if render else None
        return [play_episode(policy, env, seed, chosen) for seed in seeds]
    finally:
        env.close()
