"""``harness enjoy RUN_DIR``: play a run's stored policy, print its returns, record a video.

The policy is :func:`harness.load_policy`'s: the final one of a COMPLETED run, else
the last checkpoint's (a RUNNING or INTERRUPTED run); the first line says which.
Episodes are played on the env's own reward under the run's episode cap, with the
deterministic policy. Without ``--seed`` they are the episodes of the run's last
evaluation of that policy (the same env seeds), and the run's recorded mean is
printed beside the replayed one; ``--seed S`` plays episodes seeded S, S+1, ...
``--video FILE.mp4|FILE.gif`` records every step of every episode, rendered
headless (``rgb_array``: pybullet's software renderer, Box2D through pygame,
MuJoCo through EGL or OSMesa).

A run made with ``--import MODULE`` (an env or algorithm of your own) replays with
``--import MODULE`` here; its recorded imports alone are imported only when the run's
checkpoint is signed with your key (:mod:`harness.user_modules`), since importing runs
code and a run directory is only data. Modules are found on the Python path, not in the
current directory: set ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from harness import rundir
from harness.commands import UsageError, add_import_flag, bounded, terminal_text
from harness.schema import SEED_MAX

__all__ = ["add_arguments", "run"]

#: Most episodes one ``enjoy`` plays, and the fastest video it writes (frames per second).
MAX_EPISODES = 100_000
MAX_FPS = 1000.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (RUNS_DIR/<id>)")
    parser.add_argument(
        "--episodes",
        type=bounded(int, "--episodes", 1, MAX_EPISODES),
        default=None,
        help=f"episodes to play, at most {MAX_EPISODES:,} (default: the run's eval_episodes)",
    )
    parser.add_argument(
        "--seed",
        type=bounded(int, "--seed", 0, SEED_MAX),
        default=None,
        help="seed episode k with SEED + k (default: the seeds of the run's last evaluation)",
    )
    parser.add_argument(
        "--video", default=None, metavar="FILE", help="record the episodes to FILE.mp4 or FILE.gif"
    )
    parser.add_argument(
        "--fps",
        type=bounded(float, "--fps", 0.0, MAX_FPS, least_open=True),
        default=None,
        help=f"video frames per second, at most {MAX_FPS:g} (default: the env's render_fps, "
        "else 30)",
    )
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="play the last checkpoint's policy even where a final one is stored",
    )
    add_import_flag(parser, "first, where the run's env or algorithm registers")


def _check_args(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """Refuse bad input before anything is loaded or written."""
    run_dir = Path(args.run_dir)
    if not (run_dir / rundir.CONFIG).is_file():
        raise UsageError(f"run directory {args.run_dir!r} is not a run (no {rundir.CONFIG})")
    if args.video is None:
        return run_dir, None
    video = Path(args.video)
    if video.suffix.lower() not in (".mp4", ".gif"):
        raise UsageError(f"--video must end in .mp4 or .gif, got {args.video!r}")
    folder = video.parent if str(video.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"--video {args.video!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--video {args.video!r}: folder {str(folder)!r} is not writable")
    return run_dir, video


def run(args: argparse.Namespace) -> int:
    from harness.policy_io import PolicyLoadError
    from harness.replay import last_evaluation, load_policy, play_episode
    from harness.video import VideoWriter

    run_dir, video = _check_args(args)
    try:
        policy = load_policy(
            run_dir,
            source="checkpoint" if args.checkpoint else "auto",
            imports=args.imports,
        )
    except PolicyLoadError as error:
        raise UsageError(str(error)) from None
    print(f"policy: {terminal_text(policy.describe())}")
    last = last_evaluation(policy)
    episodes = args.episodes or int(policy.config["eval_episodes"])
    if args.seed is not None:
        if args.seed + episodes - 1 > SEED_MAX:
            raise UsageError(
                f"--seed {args.seed} with {episodes} episodes passes the largest seed, "
                f"{SEED_MAX:,}; give a smaller --seed"
            )
        seeds = [args.seed + k for k in range(episodes)]
        print(f"episodes: {episodes}, seeds {args.seed}..{args.seed + episodes - 1}")
    elif last is not None:
        from algorithms.es_common import eval_seeds

        seeds = eval_seeds(int(policy.config["seed"]), last.index, episodes)
        print(
            f"episodes: {episodes}, the seeds of the run's last evaluation (after step {last.step})"
        )
    else:
        seeds = [int(policy.config["seed"]) + k for k in range(episodes)]
        print(f"episodes: {episodes}, seeds {seeds[0]}..{seeds[-1]} (the run logged no evaluation)")
    try:
        env = policy.make_env(render_mode="rgb_array" if video else None)
    except PolicyLoadError as error:
        raise UsageError(str(error)) from None
    if video is not None:
        env.reset(seed=seeds[0])
        probe = env.render()
        if not (isinstance(probe, np.ndarray) and probe.ndim == 3):
            env.close()
            raise UsageError(f"--video: {policy.env_name} renders no rgb_array frames")
    fps = args.fps or float(env.metadata.get("render_fps") or 30)
    writer = VideoWriter(video, fps) if video is not None else None
    returns, lengths = [], []
    try:
        for k, seed in enumerate(seeds):
            episode = play_episode(
                policy, env, seed, frame_at=(lambda _t: True) if writer else None, sink=writer
            )
            returns.append(episode.episode_return)
            lengths.append(episode.length)
            print(
                f"episode {k + 1}: seed {seed}, return {episode.episode_return:.2f}, "
                f"length {episode.length}"
            )
    finally:
        env.close()
        if writer is not None:
            writer.close()
    mean = float(np.mean(returns))
    print(f"mean return {mean:.2f}, mean length {np.mean(lengths):.1f} over {episodes} episodes")
    if args.seed is None and last is not None and episodes == len(last.seeds):
        which = "this policy" if last.of_this_policy else "an earlier policy"
        print(
            f"the run's last evaluation (after step {last.step}, of {which}) recorded "
            f"{last.return_mean:.2f} on these seeds; replayed {mean:.2f} "
            f"(difference {mean - last.return_mean:+.3g})"
        )
    if writer is not None and video is not None:
        height, width = writer.size or (0, 0)
        print(f"video: {video} ({writer.frames} frames, {width}x{height}, {fps:g} fps)")
    sys.stdout.flush()
    return 0
