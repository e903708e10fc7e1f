"""Check ``harness bench project``'s model against measured runs: predict W=2 from W=1.

Given runs of one configuration at two worker counts (``harness bench solve ... --workers
1 2 --runs-dir DIR`` runs ``harness run --target-return R`` once per seed and W), this pairs
each run at the base W with the run of the same algorithm, env and seed at the other W,
predicts the other W's time to its confirmed target from the base run's records alone
(:func:`harness.bench.project.point`, evaluation as the harness runs it: RL in its head),
and compares it with what that run measured, term by term::

    harness bench solve --algo optimes --env LunarLanderContinuous --target 200 \\
        --seeds 100 101 102 --workers 1 2 --runs-dir runs/validate
    harness bench solve --algo ppo --env LunarLanderContinuous --target 200 \\
        --seeds 100 101 102 --workers 1 2 --runs-dir runs/validate
    python scripts/validate_projection.py runs/validate --out runs/validate/projection.md

To hold a prediction out of sight of the measurement it is checked against, write it
first, from the base runs alone, and commit it; then run the other W and compare::

    harness bench solve --algo cma --env Hopper-v5 --target 911 --seeds 100 101 102 \
        --workers 1 --runs-dir runs/heldout
    python scripts/validate_projection.py runs/heldout --predict predictions.json
    harness bench solve --algo cma --env Hopper-v5 --target 911 --seeds 100 101 102 \
        --workers 2 --runs-dir runs/heldout
    python scripts/validate_projection.py runs/heldout --predictions predictions.json

A predictions file records the model's version (:data:`harness.bench.project.MODEL_VERSION`)
and the commit it ran at; a comparison with predictions of another model version is refused.

The table (Markdown, printed and written to ``--out``; ``--json`` keeps every number) has,
per pair: the steps to the target at both W (the ES family's are equal by determinism,
PPO/A2C's too), the base run's measured time and the model at the base W (how well the
records add up), the other run's measured time, the prediction and its error, and the
predicted and measured seconds of each part (episodes: episode work and messages against
the measured rollouts; stragglers; head update; evaluation with confirmation; start-up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.bench import project
from harness.commands import UsageError

#: Predicted terms against the measured parts they stand for (``time_<part>_s``).
PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "episodes": (("episode_work", "messages"), ("rollouts",)),
    "stragglers": (("stragglers",), ("stragglers",)),
    "head": (("head_update",), ("head_update", "obs_sync")),
    "eval": (("evaluation",), ("evaluation", "confirmation")),
    "start-up": (("startup",), project.STARTUP_PARTS),
    "bookkeeping": (("bookkeeping",), project.BOOKKEEPING_PARTS),
}


def _commit() -> str:
    """The checkout's commit, "+changes" where files differ from it."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=root)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _key(env: str, algo: str, seed: int, target: float) -> tuple[str, str, int, float]:
    """What pairs a prediction with the run it predicts."""
    return (env, algo, int(seed), float(target))


def predict(
    base: project.RunCosts, workers: int, assumptions: project.Assumptions
) -> dict[str, Any] | None:
    """The time to its confirmed target a run like ``base`` would take on ``workers``
    workers, from ``base``'s records alone; None when ``base`` missed its target."""
    if base.target_return is None:
        return None
    step = project.reached_step(base, base.target_return)
    if step is None:
        return None
    predicted = project.point(base, step, workers, assumptions)
    return {
        "env": base.env,
        "algo": base.algo,
        "seed": base.seed,
        "target": base.target_return,
        "step": step,
        "base_workers": base.workers,
        "other_workers": workers,
        "base_measured_s": project.measured_seconds(base, step),
        "base_model_s": project.point(base, step, base.workers, assumptions).seconds,
        "predicted_s": predicted.seconds,
        "parts": {
            name: sum(predicted.terms[t] for t in terms) for name, (terms, _) in PARTS.items()
        },
    }


def compare(prediction: dict[str, Any], other: project.RunCosts) -> dict[str, Any] | None:
    """A prediction beside what the run it predicts measured, or None where that run
    missed its target; no error where it reached it at another step (it took another path:
    the prediction is of other work)."""
    step_other = project.reached_step(other, prediction["target"])
    if step_other is None:
        return None
    measured = project.measured_seconds(other, step_other)
    parts = other.parts.get(step_other, {})
    return {
        **{k: v for k, v in prediction.items() if k not in ("step", "parts")},
        "steps": [prediction["step"], step_other],
        "measured_s": measured,
        "error": (
            (prediction["predicted_s"] - measured) / measured
            if measured and step_other == prediction["step"]
            else None
        ),
        "parts": {
            name: {
                "predicted": prediction["parts"][name],
                "measured": sum(parts.get(p, 0.0) for p in measured_parts),
            }
            for name, (_, measured_parts) in PARTS.items()
        },
    }


def _no_error(row: dict[str, Any]) -> str:
    return "— (another path)" if row["steps"][0] != row["steps"][1] else "—"


def markdown(rows: list[dict[str, Any]], assumptions: project.Assumptions) -> str:
    """The comparison as a Markdown table, a line of medians per algorithm, and the
    model's assumptions."""
    if not rows:
        return "No pair of runs reached its target at both worker counts."
    w0, w1 = rows[0]["base_workers"], rows[0]["other_workers"]
    head = [
        "env", "algo", "seed", f"steps W={w0}/W={w1}", f"measured W={w0} s",
        f"model W={w0} s", f"measured W={w1} s", f"predicted W={w1} s", "error",
        *(f"{name} s pred/meas" for name in PARTS),
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        base_measured = r["base_measured_s"]
        cells = [
            r["env"], r["algo"], str(r["seed"]), f"{r['steps'][0]}/{r['steps'][1]}",
            f"{base_measured:.1f}" if base_measured is not None else "—",
            f"{r['base_model_s']:.1f}", f"{r['measured_s']:.1f}", f"{r['predicted_s']:.1f}",
            f"{r['error']:+.1%}" if r["error"] is not None else _no_error(r),
            *(
                f"{r['parts'][n]['predicted']:.1f}/{r['parts'][n]['measured']:.1f}"
                for n in PARTS
            ),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for algo in sorted({r["algo"] for r in rows}):
        errors = [abs(r["error"]) for r in rows if r["algo"] == algo and r["error"] is not None]
        if errors:
            lines.append(
                f"{algo}: median absolute error {statistics.median(errors):.1%} over "
                f"{len(errors)} pair(s)."
            )
    differ = [r for r in rows if r["steps"][0] != r["steps"][1]]
    if differ:
        lines.append(
            f"{len(differ)} pair(s) reached the target at different steps (the W={w1} run "
            f"took another path): the prediction, of the W={w0} run's steps, is of other "
            "work, so no error is given."
        )
    lines += ["", *assumptions.lines()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="runs directories or archives of both W")
    parser.add_argument("--base", type=int, default=1, help="the W predicted from (1)")
    parser.add_argument("--at", type=int, default=2, help="the W predicted (2)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--json", type=Path, default=None, help="also write every number here")
    parser.add_argument(
        "--predict",
        type=Path,
        default=None,
        help="only predict the other W from the base runs, and write the predictions here",
    )
    parser.add_argument(
        "--predictions",
        type=Path,
        default=None,
        help="compare the other W's runs with the predictions written earlier by --predict",
    )
    parser.add_argument(
        "--machine",
        type=Path,
        nargs="+",
        default=list(project.MACHINES),
        help="`harness bench ceiling --vec-envs N --json` outputs (RL env processes' messages; "
        "default: the committed ones)",
    )
    args = parser.parse_args(argv)
    costs_file, source = project.message_costs()
    try:
        assumptions = project.Assumptions(
            rl_eval="as-run",
            head_message_s=costs_file,
            head_message_source=source,
            machines=project.machines_of(args.machine),
        )
        costs, skipped = project.load(args.runs)
    except UsageError as error:
        print(f"validate_projection: {error}", file=sys.stderr)
        return 2
    for run, reason in skipped:
        print(f"skipped {run}: {reason}", file=sys.stderr)
    in_order = sorted(costs, key=lambda c: (c.env, c.algo, c.seed))
    predictions = [
        prediction
        for c in in_order
        if c.workers == args.base and not c.mixed_workers
        if (prediction := predict(c, args.at, assumptions)) is not None
    ]
    if args.predict is not None:
        args.predict.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "model_version": project.MODEL_VERSION,
            "commit": _commit(),
            "assumptions": assumptions.lines(),
            "predictions": predictions,
        }
        args.predict.write_text(json.dumps(record, indent=2) + "\n")
        for item in predictions:
            base_s = item["base_measured_s"]
            print(
                f"{item['env']} {item['algo']} seed {item['seed']}: W={args.at} predicted "
                f"{item['predicted_s']:.1f} s (W={args.base} measured "
                + (f"{base_s:.1f} s)" if base_s is not None else "—)")
            )
        return 0 if predictions else 1
    if args.predictions is not None:
        written = json.loads(args.predictions.read_text())
        if written.get("model_version") != project.MODEL_VERSION:
            print(
                f"validate_projection: {args.predictions} holds predictions of model version "
                f"{written.get('model_version')!r}, this is {project.MODEL_VERSION!r}",
                file=sys.stderr,
            )
            return 2
        predictions = [p for p in written["predictions"] if p["other_workers"] == args.at]
    made = {_key(p["env"], p["algo"], p["seed"], p["target"]): p for p in predictions}
    rows = [
        row
        for c in in_order
        if c.workers == args.at and not c.mixed_workers and c.target_return is not None
        if (p := made.get(_key(c.env, c.algo, c.seed, c.target_return))) is not None
        if (row := compare(p, c)) is not None
    ]
    text = markdown(rows, assumptions)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
