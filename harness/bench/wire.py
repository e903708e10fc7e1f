"""Bytes per generation against the parameter count, measured on real runs.

For each parameter count ``d`` a policy of exactly ``d`` parameters is built on a
cheap env (LunarLanderContinuous: 8 observations, 2 actions; ``d = 18`` is the
linear policy, otherwise an MLP whose hidden sizes give exactly ``d``), and each
algorithm runs a few real generations through the chosen backend. The byte
counts are the evaluator's own counters: the lengths of the encoded messages
that crossed between head and workers. Episodes are capped short because the
bytes do not depend on episode length.

``optimes`` broadcast sends the centre to each worker (W x 4d bytes) plus a few
integers per candidate; ``optimes-seeds`` (replicated mode) sends no vector
after the first generation; ``nevergrad-es`` and ``cma`` send every candidate
vector (population x d floats).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from algorithms.registry import algorithm_names
from envs.policies import policy_spec_for
from envs.registry import make_env
from evaluation.registry import BACKENDS
from harness.bench import emit
from harness.config import complete_config
from harness.runner import build_algorithm


def env_dims(env_name: str) -> tuple[int, int]:
    """Policy input and output sizes for ``env_name``."""
    env = make_env(env_name)
    try:
        spec = policy_spec_for(env, "linear", (1,), "tanh")
    finally:
        env.close()
    return spec.obs_dim, spec.out_dim


def mlp_for(d: int, obs: int = 8, out: int = 2) -> dict[str, Any]:
    """A policy section with exactly ``d`` parameters for ``obs`` inputs and ``out`` outputs.

    The linear policy if it fits, else one hidden layer, else the most balanced two layers.
    """
    if d == (obs + 1) * out:
        return {"kind": "linear"}
    if d > out and (d - out) % (obs + 1 + out) == 0:  # (obs+1) h + (h+1) out
        return {"kind": "mlp", "hidden_sizes": [(d - out) // (obs + 1 + out)]}
    best: tuple[int, int] | None = None
    for h1 in range(1, d):  # (obs+1) h1 + (h1+1) h2 + (h2+1) out
        rest = d - out - (obs + 1) * h1
        if rest <= 0:
            break
        if rest % (h1 + 1 + out) == 0:
            h2 = rest // (h1 + 1 + out)
            if best is None or abs(h1 - h2) < abs(best[0] - best[1]):
                best = (h1, h2)
    if best is None:
        raise ValueError(f"no one- or two-layer MLP has exactly {d} parameters")
    return {"kind": "mlp", "hidden_sizes": list(best)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dims",
        type=int,
        nargs="+",
        default=[18, 1361, 6536, 100000],
        help="parameter counts to measure (default: 18 1361 6536 100000)",
    )
    parser.add_argument(
        "--population", type=int, nargs="+", default=[40], help="populations to measure (40)"
    )
    parser.add_argument(
        "--algos",
        nargs="+",
        default=["optimes", "optimes-seeds", "nevergrad-es", "cma"],
        help="algorithm names; NAME-seeds is NAME with sync=seeds (optimes-seeds)",
    )
    parser.add_argument("--workers", type=int, default=2, help="workers the messages go to (2)")
    parser.add_argument("--backend", default="process", help=", ".join(BACKENDS))
    parser.add_argument("--generations", type=int, default=3, help="at least 2")
    parser.add_argument("--max-steps", type=int, default=20, help="episode step cap")
    parser.add_argument(
        "--env", default="LunarLanderContinuous", help="env (default: LunarLanderContinuous)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (0)")
    parser.add_argument("--table", action="store_true", help="also print a Markdown table")


def measure(args: argparse.Namespace, algo: str, d: int, population: int) -> dict[str, float]:
    replicated = algo.endswith("-seeds")
    name, sync = (algo.removesuffix("-seeds"), "seeds") if replicated else (algo, "broadcast")
    config = complete_config(
        {
            "algo": name,
            "env": args.env,
            "seed": args.seed,
            "episodes": 1,
            "workers": args.workers,
            "backend": args.backend,
            "generations": args.generations,
            "max_episode_steps": args.max_steps,
            "sync": sync,
            "policy": {**mlp_for(d, *env_dims(args.env)), "activation": "tanh"},
            "params": {"population": population},
        }
    )
    algorithm: Any = build_algorithm(config)
    try:
        dim = algorithm.context.policy_spec.num_params
        if dim != d:
            raise SystemExit(f"harness bench wire: built {dim} parameters, wanted {d}")
        records = [algorithm.step() for _ in range(args.generations)]
    finally:
        algorithm.close()
    later = records[1:]
    to_w = float(np.mean([r.bytes_to_workers for r in later]))
    from_w = float(np.mean([r.bytes_from_workers for r in later]))
    return {
        "d": dim,
        "to_workers_first": float(records[0].bytes_to_workers),
        "to_workers": to_w,
        "from_workers": from_w,
        "per_candidate": (to_w + from_w) / population,
    }


def run(args: argparse.Namespace) -> int:
    if args.generations < 2:
        raise SystemExit("harness bench wire: --generations must be at least 2")
    known = set(algorithm_names()) | {"optimes-seeds"}
    algos = [a for a in args.algos if a in known]
    figures: dict[str, Any] = {"workers": args.workers, "backend": args.backend}
    rows = []
    for population in args.population:
        for d in args.dims:
            for algo in algos:
                cost = measure(args, algo, d, population)
                key = f"{algo}.d{d}" + (f".p{population}" if len(args.population) > 1 else "")
                for name, value in cost.items():
                    figures[f"{key}.{name}"] = (
                        int(value) if name != "per_candidate" else round(value, 1)
                    )
                rows.append((algo, population, cost))
    emit(figures, args.json)
    if args.table:
        print()
        print(
            "| algorithm | d | population | to workers (gen 0) | to workers / gen "
            "| from workers / gen | bytes / candidate |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for algo, population, cost in rows:
            print(
                f"| {algo} | {int(cost['d'])} | {population} | {int(cost['to_workers_first']):,} "
                f"| {int(cost['to_workers']):,} | {int(cost['from_workers']):,} "
                f"| {cost['per_candidate']:,.0f} |"
            )
    return 0
