"""Speed-up of W workers over one, per backend, on real generations of optimes.

Every configuration runs the same seeded generations (identical env steps for
every W, by the determinism contract), so the ratio of wall-clock times per
generation is the speed-up. The first ``--warmup`` generations (worker start,
env construction, imports) are not timed. Besides the speed-up it prints the
per-generation costs the scaling model of ``docs/scaling.md`` is built from:
head update time, broadcast serialisation, per-task dispatch overhead and
episode time. Timings depend on the machine's load; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.backends import chunk_count
from evaluation.protocol import Broadcast, EvalTask, ReplicaRef
from evaluation.registry import BACKENDS
from evaluation.worker import encode
from harness.bench import format_table, save_json
from harness.config import complete_config
from harness.runner import build_algorithm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", default="AntBulletEnv", help="env of the timed generations (AntBulletEnv)"
    )
    parser.add_argument("--backend", nargs="+", default=["process"], help=", ".join(BACKENDS))
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="worker counts to time; the smallest is the speed-up's base (default: 1 2)",
    )
    parser.add_argument("--generations", type=int, default=3, help="timed generations")
    parser.add_argument("--warmup", type=int, default=1, help="untimed generations first")
    parser.add_argument("--population", type=int, default=40, help="candidates per generation (40)")
    parser.add_argument("--episodes", type=int, default=1, help="episodes per candidate")
    parser.add_argument("--max-steps", type=int, default=1000, help="episode step cap")
    parser.add_argument("--sync", default="broadcast", help="broadcast or seeds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (0)")
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster for --backend ray (default: a local instance)",
    )
    parser.add_argument(
        "--probe-tasks", type=int, default=200, help="1-step tasks timed for dispatch overhead"
    )
    parser.add_argument(
        "--update-sizes",
        nargs="*",
        default=[],
        metavar="PxD",
        help="also time one OpenAI-ES update (tell) for population P and d parameters, "
        "e.g. 40x6536 2880x166673 (inputs of the scaling model)",
    )
    parser.add_argument(
        "--predict",
        type=int,
        nargs="*",
        default=[],
        metavar="W",
        help="predict the speed-up at these worker counts from the measured costs "
        "(see docs/scaling.md), for the measured setup and for --paper-size",
    )
    parser.add_argument(
        "--paper-size",
        default="2880x166673",
        metavar="PxD",
        help="second workload of the prediction: population x parameters "
        "(default: 1,440 mirrored pairs, a Humanoid-sized 376-256-256-17 MLP)",
    )
    parser.add_argument(
        "--model-backend",
        default=None,
        help="whose measured message cost the model uses (default: the first backend)",
    )
    parser.add_argument(
        "--inputs",
        type=Path,
        default=None,
        help="with --predict: take the measured costs from this --json output instead of "
        "measuring again",
    )
    parser.add_argument(
        "--bandwidth-gbps",
        type=float,
        nargs="+",
        default=[1.0, 10.0],
        help="head's network bandwidths to model, Gbit/s",
    )


def _config(args: argparse.Namespace, backend: str, workers: int) -> dict[str, Any]:
    return complete_config(
        {
            "algo": "optimes",
            "env": args.env,
            "seed": args.seed,
            "episodes": args.episodes,
            "workers": workers,
            "backend": backend,
            "ray_address": args.ray_address,
            "generations": args.generations + args.warmup,
            "max_episode_steps": args.max_steps,
            "sync": args.sync,
            # a fixed cap: every generation does comparable work
            "params": {"population": args.population, "episode_cap": "env"},
        }
    )


def _measure(args: argparse.Namespace, backend: str, workers: int) -> dict[str, float]:
    algorithm: Any = build_algorithm(_config(args, backend, workers))
    try:
        for _ in range(args.warmup):
            algorithm.step()
        times, records = [], []
        for _ in range(args.generations):
            started = time.perf_counter()
            records.append(algorithm.step())
            times.append(time.perf_counter() - started)
        evaluator = algorithm.evaluator
        # Dispatch overhead: tasks whose episodes last one step, through the same path.
        probe = [
            EvalTask(i, (i,), 1, noise_index=i, sign=1 - 2 * (i % 2))
            for i in range(args.probe_tasks)
        ]
        target = algorithm.codec.target()
        started = time.perf_counter()
        evaluator.evaluate(target, probe)
        probe_s = time.perf_counter() - started
        chunks = getattr(evaluator, "chunks_per_worker", 1)
        requests = chunk_count(len(probe), getattr(evaluator, "num_workers", 1), chunks)
        centre = algorithm.current_parameters()
        obs = np.zeros(algorithm.context.policy_spec.obs_dim, np.float32)
        broadcast = Broadcast(0, centre, 0.02, obs, obs + 1)
        started = time.perf_counter()
        for _ in range(20):
            encode(("broadcast", broadcast))
        encode_s = (time.perf_counter() - started) / 20
        # The head's side of handing one generation's target to every worker (no tasks).
        started = time.perf_counter()
        for _ in range(20):
            evaluator.evaluate(target, [])
        target_send_s = (time.perf_counter() - started) / 20
    finally:
        algorithm.close()
    steps = [r.timesteps for r in records]
    worker_s = float(np.mean([r.worker_seconds for r in records]))
    return {
        "s_per_generation": float(np.mean(times)),
        "s_per_generation_min": float(np.min(times)),
        "timesteps_per_generation": float(np.mean(steps)),
        "steps_per_s": float(np.sum(steps) / np.sum(times)),
        "worker_s_per_generation": worker_s,
        "episode_s": worker_s / (args.population * args.episodes),
        "head_update_s": float(np.mean([r.extras["update_s"] for r in records])),
        "replica_sync_s": float(np.mean([r.extras.get("sync_s", 0.0) for r in records])),
        "broadcast_encode_s": encode_s,
        "target_send_s": target_send_s,
        "dispatch_s_per_task": probe_s / args.probe_tasks,
        "dispatch_s_per_request": probe_s / requests,
        "bytes_to_workers": float(np.mean([r.bytes_to_workers for r in records])),
        "bytes_from_workers": float(np.mean([r.bytes_from_workers for r in records])),
        "params": float(centre.size),
    }


def update_cost(population: int, dim: int, repeats: int = 5) -> dict[str, float]:
    """Seconds of one head update (OpenAI-ES's :meth:`MirroredES.tell`)."""
    from algorithms.es_core import Adam, FitnessShaping, MirroredES, MirroredSampler
    from evaluation.noise import NoiseSpec, NoiseTable

    noise = NoiseTable.create(NoiseSpec(max(dim * 4, 1 << 20), 0))
    es = MirroredES(
        np.zeros(dim, np.float32),
        noise,
        0.02,
        sampler=MirroredSampler(population),
        shaping=FitnessShaping(),
        update=Adam(dim, 0.01),
    )
    rng = np.random.default_rng(0)
    times = []
    for _ in range(repeats):
        candidates = es.ask(rng)
        fitness = rng.standard_normal(population)
        started = time.perf_counter()
        es.tell(candidates, fitness)
        times.append(time.perf_counter() - started)
    return {"tell_s": float(np.median(times))}


def message_bytes(population: int, dim: int, obs_dim: int = 28) -> dict[str, float]:
    """Exact encoded sizes of one generation's messages (per message, per task, per result)."""
    from algorithms.es_engine import ReplicaUpdate
    from evaluation.protocol import EvalResult

    centre = np.zeros(dim, np.float32)
    obs = np.zeros(obs_dim, np.float32)
    tasks = [
        EvalTask(i, (2**30 + i,), 1000, noise_index=2**24 + i, sign=1, action_noise_seed=2**30)
        for i in range(population)
    ]
    results = [
        EvalResult(i, 7, np.array([1234.5]), np.array([1000]), 1000, duration_s=0.5)
        for i in range(population)
    ]
    update = ReplicaUpdate(
        8,
        np.arange(population // 2, dtype=np.int64),
        np.linspace(0, 1, population),
        [],
    )
    return {
        "broadcast": len(encode(("broadcast", Broadcast(7, centre, 0.02, obs, obs + 1)))),
        "replica_ref": len(encode(("replica", ReplicaRef(7)))),
        "task": len(encode(("tasks", ((7, 1), tasks)))) / population,
        "result": len(encode(("results", (7, 1), results))) / population,
        "update": len(encode(("update", update))),
        "checksum": len(encode(("checksum", 8, 2**31))),
    }


#: Episodes a generation waits beyond ceil(P/W) for its slowest worker (model).
TAIL_EPISODES = 0.5


def predict_seconds(
    workers: int,
    population: int,
    episode_s: float,
    tell_s: float,
    message_s: float,
    sizes: dict[str, float],
    bandwidth_bytes_s: float,
    mode: str,
    chunks_per_worker: int = 4,
) -> float:
    """Modelled wall-clock of one generation (docs/scaling.md, section "The model").

    Head: the update (tell), and every message and byte it sends or receives, in
    series. Workers: ``ceil(P/W)`` episodes each. ``seeds`` (replicated mode as
    implemented) sends the small update instead of the centre, in a round of its own,
    and puts the replicas' own update on the critical path; ``seeds-piggyback`` (not
    implemented) would ride the update and checksum on the next generation's messages
    and let head and replicas update at the same time.
    """
    requests = chunk_count(population, workers, chunks_per_worker)
    messages = workers + requests
    data = population * (sizes["task"] + sizes["result"])
    serial = tell_s
    if mode == "broadcast":
        data += workers * sizes["broadcast"]
    else:
        data += workers * (sizes["replica_ref"] + sizes["update"] + sizes["checksum"])
        if mode == "seeds":
            messages += 2 * workers  # update out, checksum back
            serial += tell_s  # every replica applies the update before the next generation
    # Every worker runs ceil(P/W) episodes; with more than one worker the generation
    # also waits for its slowest worker: TAIL_EPISODES on average (measured: W=2 on Ant).
    episodes = (math.ceil(population / workers) + TAIL_EPISODES * (workers > 1)) * episode_s
    return serial + episodes + messages * message_s + data / bandwidth_bytes_s


def predictions(
    args: argparse.Namespace, figures: dict[str, Any], measured: dict[str, dict[int, Any]]
) -> None:
    """Add predicted speed-ups at ``args.predict`` workers to ``figures``."""
    backend = args.model_backend or args.backend[0]
    runs = measured[backend]
    base = runs[min(runs)]
    widest = runs[max(runs)]
    episode_s = base["episode_s"]
    message_s = widest["target_send_s"] / max(runs)  # head cost of one posted message
    figures["model.inputs"] = (
        f"episode_s={episode_s:.4f} message_s={message_s:.6f} "
        f"(from {backend}, W={min(runs)} and W={max(runs)})"
    )
    paper_p, paper_d = (int(x) for x in args.paper_size.lower().split("x"))
    for label, population, dim in (
        ("setup", args.population, int(base["params"])),
        ("paper", paper_p, paper_d),
    ):
        tell_s = update_cost(population, dim)["tell_s"]
        sizes = message_bytes(population, dim)
        figures[f"model.{label}.population"] = population
        figures[f"model.{label}.params"] = dim
        figures[f"model.{label}.tell_s"] = round(tell_s, 6)
        for gbps in args.bandwidth_gbps:
            for mode in ("broadcast", "seeds", "seeds-piggyback"):
                cost = [
                    predict_seconds(
                        w, population, episode_s, tell_s, message_s, sizes, gbps * 1e9 / 8, mode
                    )
                    for w in [1, *args.predict]
                ]
                for w, seconds in zip(args.predict, cost[1:], strict=True):
                    key = f"model.{label}.{gbps:g}gbps.{mode}.w{w}"
                    figures[f"{key}.speedup"] = round(cost[0] / seconds, 1)
                    figures[f"{key}.s_per_generation"] = round(seconds, 4)


def _load_inputs(path: Path) -> dict[str, dict[int, Any]]:
    """Per-backend, per-W measured figures from an earlier ``--json`` file."""
    measured: dict[str, dict[int, Any]] = {}
    for key, value in json.loads(path.read_text()).items():
        parts = key.split(".")
        if len(parts) == 3 and parts[1].startswith("w") and parts[1][1:].isdigit():
            backend, workers, name = parts[0], int(parts[1][1:]), parts[2]
            measured.setdefault(backend, {}).setdefault(workers, {})[name] = value
    if not measured:
        raise SystemExit(f"harness bench scaling: no measured figures in {path}")
    return measured


def run(args: argparse.Namespace) -> int:
    figures: dict[str, Any] = {
        "env": args.env,
        "population": args.population,
        "cpu_count": os.cpu_count(),
        "load_average_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    measured: dict[str, dict[int, Any]] = {}
    if args.inputs is not None:
        measured = _load_inputs(args.inputs)
        args.backend = list(measured)
        figures["inputs"] = str(args.inputs)
    for backend in args.backend if args.generations > 0 and args.inputs is None else []:
        per_w: dict[int, dict[str, float]] = {}
        measured[backend] = per_w
        for workers in args.workers:
            per_w[workers] = _measure(args, backend, workers)
            for name, value in per_w[workers].items():
                figures[f"{backend}.w{workers}.{name}"] = round(value, 6)
        base = min(per_w)
        for workers in per_w:
            if workers != base:
                speedup = per_w[base]["s_per_generation"] / per_w[workers]["s_per_generation"]
                figures[f"{backend}.speedup_w{workers}_over_w{base}"] = round(speedup, 3)
    for size in args.update_sizes:
        population, dim = (int(x) for x in size.lower().split("x"))
        for name, value in update_cost(population, dim).items():
            figures[f"update.p{population}.d{dim}.{name}"] = round(value, 6)
    if args.predict and measured:
        predictions(args, figures, measured)
    figures["load_average_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    save_json(figures, args.json)
    print(render(figures, measured, args))
    return 0


#: The measured table: (figure, heading with unit, format, scale from the figure's unit).
MEASURED_COLUMNS = (
    ("s_per_generation", "s/gen", ".3f", 1.0),
    ("s_per_generation_min", "min s/gen", ".3f", 1.0),
    ("speedup", "speed-up", ".2f", 1.0),
    ("steps_per_s", "steps/s", ".0f", 1.0),
    ("episode_s", "episode ms", ".2f", 1e3),
    ("head_update_s", "update ms", ".2f", 1e3),
    ("replica_sync_s", "sync ms", ".2f", 1e3),
    ("broadcast_encode_s", "encode ms", ".3f", 1e3),
    ("target_send_s", "send ms", ".3f", 1e3),
    ("dispatch_s_per_task", "dispatch us/task", ".1f", 1e6),
    ("bytes_to_workers", "KiB to workers", ".1f", 1 / 1024),
    ("bytes_from_workers", "KiB from workers", ".1f", 1 / 1024),
)


def render(
    figures: dict[str, Any], measured: dict[str, dict[int, Any]], args: argparse.Namespace
) -> str:
    """The figures as a few header lines and tables: per backend and worker count, the
    one-update costs, and the model's predictions (``--json`` keeps every figure)."""
    lines = [
        f"env {figures['env']}, population {figures['population']}, "
        f"{figures['cpu_count']} CPUs, load average {figures['load_average_before']} before, "
        f"{figures['load_average_after']} after"
    ]
    rows = []
    for backend, per_w in measured.items():
        base = min(per_w) if per_w else None
        for workers, values in sorted(per_w.items()):
            row: dict[str, Any] = {"backend": backend, "W": workers}
            for key, _, _, scale in MEASURED_COLUMNS:
                if key in values:
                    row[key] = float(values[key]) * scale
            if base is not None and values.get("s_per_generation"):
                row["speedup"] = per_w[base]["s_per_generation"] / values["s_per_generation"]
            rows.append(row)
    if rows:
        columns = [("backend", "backend", ""), ("W", "W", "d")]
        columns += [(key, heading, spec) for key, heading, spec, _ in MEASURED_COLUMNS]
        lines += ["", f"measured (speed-up over the fewest workers){_source(figures)}"]
        lines.append(format_table(rows, columns))
    updates = [
        {"P": int(k.split(".")[1][1:]), "d": int(k.split(".")[2][1:]), "tell_ms": v * 1e3}
        for k, v in figures.items()
        if k.startswith("update.") and k.endswith(".tell_s")
    ]
    if updates:
        lines += ["", "one OpenAI-ES update (tell)"]
        lines.append(
            format_table(updates, [("P", "P", "d"), ("d", "d", "d"), ("tell_ms", "ms", ".2f")])
        )
    predicted: list[dict[str, Any]] = []
    for key, value in figures.items():
        parts = key.split(".")
        if parts[0] == "model" and len(parts) == 6 and parts[5] == "speedup":
            label, gbps, mode, w_text = parts[1], parts[2], parts[3], parts[4]
            predicted.append(
                {
                    "workload": label,
                    "P": figures.get(f"model.{label}.population"),
                    "d": figures.get(f"model.{label}.params"),
                    "link": gbps.replace("gbps", " Gb/s"),
                    "sync": mode,
                    "W": int(w_text[1:]),
                    "speedup": value,
                    "s_gen": figures.get(".".join([*parts[:5], "s_per_generation"])),
                }
            )
    if predicted:
        lines += ["", f"predicted (docs/scaling.md; {figures.get('model.inputs', '')})"]
        columns = [
            ("workload", "workload", ""),
            ("P", "P", "d"),
            ("d", "d", "d"),
            ("link", "link", ""),
            ("sync", "sync", ""),
            ("W", "W", "d"),
            ("speedup", "speed-up", ".1f"),
            ("s_gen", "s/gen", ".4f"),
        ]
        lines.append(format_table(predicted, columns))
    return "\n".join(lines)


def _source(figures: dict[str, Any]) -> str:
    return f", from {figures['inputs']}" if "inputs" in figures else ""
