"""CPU cost of one off-policy training step: stable-baselines3 (torch) against SBX (JAX).

SBX (``pip install sbx-rl``, by SB3's authors) reimplements SAC and TQC in JAX. Both are
timed at the zoo's HalfCheetah settings (``sac.yml``/``tqc.yml``: SB3's defaults, batch
256, a 256-256 actor and critics, one gradient step per env step, a 1M buffer) on one
core: each measurement runs in its own process pinned with ``taskset``, torch at one
thread, XLA without its thread pool. A measurement trains past ``learning_starts`` and a
warm-up (JAX compiles its update then), and times the next ``--steps`` steps in
CPU-seconds of the process and in wall-clock::

    python scripts/offpolicy_speed.py --steps 3000 --core 1 > docs/offpolicy-speed.txt

A line per (library, algorithm, repeat); the last lines give the median steps per
CPU-second and SBX's ratio to SB3. A library that is not installed is reported as such.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

SETTINGS = {"learning_starts": 1000, "batch_size": 256, "buffer_size": 1_000_000}
ENV_ID = "HalfCheetah-v5"


def measure(library: str, algo: str, steps: int, warmup: int, seed: int) -> dict[str, float]:
    """Train ``algo`` of ``library`` past its warm-up, then time ``steps`` more steps."""
    import gymnasium as gym

    if library == "sb3":
        import torch

        torch.set_num_threads(1)
        module = importlib.import_module("sb3_contrib" if algo == "TQC" else "stable_baselines3")
    else:
        module = importlib.import_module("sbx")
    model = getattr(module, algo)("MlpPolicy", gym.make(ENV_ID), seed=seed, verbose=0, **SETTINGS)
    model.learn(total_timesteps=SETTINGS["learning_starts"] + warmup)
    cpu, wall = time.process_time(), time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"steps_per_cpu_s": steps / cpu, "steps_per_wall_s": steps / wall, "cpu_s": cpu}


def cpu_model() -> str:
    """The CPU's model name (Linux), else the machine type."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return platform.machine()
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if "model name" in line]
    return names[0] if names else platform.machine()


def child_env() -> dict[str, str]:
    """One thread for every numeric library the child may load."""
    one = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    xla = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return {**os.environ, **one, "XLA_FLAGS": xla, "JAX_PLATFORMS": "cpu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--steps", type=int, default=3000, help="timed training steps")
    add("--warmup", type=int, default=500, help="untimed steps after learning_starts")
    add("--repeats", type=int, default=2, help="processes per library and algorithm")
    add("--core", type=int, default=0, help="the core every measurement is pinned to")
    add("--one", nargs=3, metavar=("LIBRARY", "ALGO", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        library, algo, seed = args.one
        print(json.dumps(measure(library, algo, args.steps, args.warmup, int(seed))))
        return
    print(f"# {ENV_ID}, {SETTINGS}, {args.steps} timed steps after {args.warmup} of warm-up,")
    print(f"# one process each pinned to core {args.core}; CPU: {cpu_model()}")
    print(f"# load average at start: {os.getloadavg()}")
    rates: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats):
        for library in ("sb3", "sbx"):
            for algo in ("SAC", "TQC"):
                command = ["taskset", "-c", str(args.core), sys.executable, __file__, "--one"]
                command += [library, algo, str(repeat), "--steps", str(args.steps)]
                command += ["--warmup", str(args.warmup)]
                done = subprocess.run(command, capture_output=True, text=True, env=child_env())
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{library} {algo} repeat {repeat}: failed: {last}")
                    continue
                result = json.loads(done.stdout.strip().splitlines()[-1])
                rates.setdefault((library, algo), []).append(result["steps_per_cpu_s"])
                print(
                    f"{library} {algo} repeat {repeat}: {result['steps_per_cpu_s']:.1f} steps per "
                    f"CPU-second, {result['steps_per_wall_s']:.1f} per wall-second"
                )
    print(f"# load average at end: {os.getloadavg()}")
    for algo in ("SAC", "TQC"):
        sb3, sbx = rates.get(("sb3", algo)), rates.get(("sbx", algo))
        for library, values in (("sb3", sb3), ("sbx", sbx)):
            if values:
                rate = statistics.median(values)
                print(f"median {library} {algo}: {rate:.1f} steps per CPU-second")
        if sb3 and sbx:
            ratio = statistics.median(sbx) / statistics.median(sb3)
            print(f"{algo}: SBX makes {ratio:.2f}x SB3's steps per CPU-second")


if __name__ == "__main__":
    main()
