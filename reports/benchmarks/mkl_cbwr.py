"""What MKL's conditional numerical reproducibility costs PPO, and what it changes.

The harness sets ``MKL_CBWR=AUTO,STRICT`` when it is imported (``harness/__init__.py``), so a
torch policy rebuilt in another process takes the trained policy's actions bit for bit. This
trains PPO on Hopper-v5 (rl-baselines3-zoo's settings, 16,384 timesteps, seed 1) with the
harness's setting, with MKL's own dispatch and with other modes, alternating, and prints each
run's CPU-seconds, its time in updates, and a digest of its final parameters.

    .venv/bin/python reports/benchmarks/mkl_cbwr.py > reports/benchmarks/mkl_cbwr.txt
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: None: the variable unset, so the harness sets AUTO,STRICT; "": set empty, which the harness
#: keeps and MKL ignores (its own dispatch, the harness's behaviour before it set the variable)
SETTINGS: list[str | None] = [None, "", "COMPATIBLE", None, "", "AUTO"]
LABELS = {None: "unset (harness: AUTO,STRICT)", "": "empty (MKL's own dispatch)"}
TIMESTEPS = 16_384


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def train(setting: str | None, runs_dir: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    if setting is not None:
        env["MKL_CBWR"] = setting
    command = [
        str(Path(sys.executable).parent / "harness"), "run", "--algo", "ppo", "--env", "Hopper-v5",
        "--timesteps", str(TIMESTEPS), "--seed", "1", "--runs-dir", str(runs_dir),
        "--no-progress",
    ]  # fmt: skip
    subprocess.run(command, env=env, cwd=ROOT, check=True, capture_output=True)
    run = runs_dir / "1"
    metrics = json.loads((run / "metrics.json").read_text())
    return {
        "MKL_CBWR": LABELS.get(setting, setting),
        "cpu_s": round(metrics["cpu_seconds"]["values"][-1], 1),
        "update_s": round(sum(metrics["time_head_update_s"]["values"]), 2),
        "params_md5": hashlib.md5((run / "final_params.npy").read_bytes()).hexdigest()[:12],
        "last_eval": round(metrics["eval_return_mean"]["values"][-1], 1),
    }


def main() -> None:
    import torch

    print(f"# {cpu_model()}; torch {torch.__version__}; PPO Hopper-v5, {TIMESTEPS} timesteps")
    print("# MKL_CBWR | CPU-s | update s | final params md5 | last eval")
    with tempfile.TemporaryDirectory() as tmp:
        for i, setting in enumerate(SETTINGS):
            row = train(setting, Path(tmp) / str(i))
            print(" | ".join(str(v) for v in row.values()), flush=True)


if __name__ == "__main__":
    main()
