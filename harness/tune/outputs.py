"""What a study leaves in ``RUNS_DIR/_tune/<study>/``: ``best.yaml``, ``trials.csv``, a report.

``best.yaml`` holds the best trial's settings in the forms that take them:

* ``set``: ``--set`` keys and values (what a sweep file's ``overrides`` or ``set`` take);
* ``flags``: the ``harness run`` flags among them (``episodes``: episodes per fitness);
* ``args``: both as ``harness run`` arguments, one list item each, so that (bash)::

      mapfile -t BEST < <(python -c 'import sys, yaml
      print("\\n".join(yaml.safe_load(open(sys.argv[1]))["args"]))' best.yaml)
      harness run --algo A --env E --seed 100 --timesteps 1e6 "${BEST[@]}"

  runs at them (a sweep file says ``tuned: {study: GROUP, storage: URL}`` instead);

beside where they come from (study, storage, trial, objective, tuning and recheck scores
and seeds, the budget). ``trials.csv``: one row per trial. ``report.md``/``report.html``:
:mod:`harness.report.tune`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness import rundir
from harness.tune import scores
from harness.tune.best import Tuned
from harness.tune.space import EPISODES, assignment
from harness.tune.storage import shown

if TYPE_CHECKING:
    import optuna
    import pandas as pd

    from harness.report.tune import TuneReport
    from harness.tune.study import StudyPlan

BEST_FILE = "best.yaml"
TRIALS_FILE = "trials.csv"
#: Trials whose records check, each with its values (:func:`harness.tune.best.checked_trials`).
Checked = list[tuple[Any, dict[str, Any]]]
#: The flag of each tunable key that ``harness run`` takes as a flag rather than ``--set``.
FLAGS = {EPISODES: "--episodes-per-fitness"}


def best_document(tuned: Tuned) -> dict[str, Any]:
    """``best.yaml`` as data (see the module docstring)."""
    settings = {k: v for k, v in tuned.values.items() if k not in FLAGS}
    flags = {k: v for k, v in tuned.values.items() if k in FLAGS}
    args: list[str] = []
    for key, value in flags.items():
        args += [FLAGS[key], str(value)]
    for key, value in settings.items():
        args += ["--set", assignment(key, value)]
    record = tuned.record
    document: dict[str, Any] = {
        "study": tuned.study,
        "storage": tuned.storage,
        "algo": tuned.algo,
        "env": record.get("env"),
        "trial": tuned.trial,
        "objective": record.get("objective", scores.OBJECTIVE),
        "tuning_score": round(tuned.score, 6),
        "tuning_seeds": record.get("seeds"),
        "budget": record.get("budget"),
    }
    recheck = tuned.recheck
    if recheck is not None:
        document["recheck_score"] = recheck.get("score")
        document["recheck_seeds"] = recheck.get("seeds")
    document.update({"set": settings, "flags": flags, "args": args})
    return document


def write_best(tuned: Tuned, out: Path) -> Path:
    """Write ``best.yaml`` (atomically) into ``out``."""
    header = (
        f"# The best trial of study {tuned.study} (harness tune): its settings, ready to run.\n"
        '# harness run ... "${BEST[@]}" with BEST read from `args` (docs/tuning.md), or a\n'
        f"# sweep file's `tuned: {{study: GROUP, storage: URL}}`.\n"
    )
    text = header + yaml.safe_dump(best_document(tuned), sort_keys=False, width=100)
    path = out / BEST_FILE
    rundir.atomic_write(path, [text.encode()])
    return path


def _text(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return value


def trials_frame(
    trials: Checked,
    cpu_limit: float | None = None,
    objective: scores.Objective | None = None,
) -> pd.DataFrame:
    """One row per trial (those whose records check): state, objective, how it ended, its
    runs and scores, the fewest evaluations a run made and whether that is fewer than the
    objective averages (``too_few_evaluations``), under a CPU limit each run's CPU-seconds
    and the largest overrun, and its values."""
    import pandas as pd

    objective = objective or scores.Objective()
    rows = []
    for trial, values in trials:
        attrs = trial.user_attrs
        runs = attrs.get("runs") or {}
        seed_scores = attrs.get("scores") or {}
        evaluations = scores.trial_evaluations(attrs, len(trial.intermediate_values))
        row: dict[str, Any] = {
            "trial": trial.number,
            "state": trial.state.name,
            "objective": trial.value,
            "evaluations_reported": len(trial.intermediate_values),
            "evaluations": evaluations,
            "too_few_evaluations": trial.state.name == "COMPLETE"
            and not objective.enough(evaluations),
            "pruned_at_evaluation": attrs.get("pruned_at_evaluation"),
            "retry_of": trial.system_attrs.get("failed_trial"),
            "failure": attrs.get("failure"),
            "process": attrs.get("process"),
            "started": trial.datetime_start.isoformat() if trial.datetime_start else None,
            "seconds": trial.duration.total_seconds() if trial.duration else None,
            "runs": " ".join(f"{seed}:{run}" for seed, run in runs.items()),
        }
        for seed, score in seed_scores.items():
            row[f"score_seed_{seed}"] = score
        usage = attrs.get("usage") if scores.usage_valid(attrs.get("usage")) else {}
        if cpu_limit is not None:
            row["cpu_limit"] = cpu_limit
            for seed, record in usage.items():
                row[f"cpu_seconds_seed_{seed}"] = record.get("cpu_seconds")
            used = [r["cpu_seconds"] for r in usage.values() if r.get("cpu_seconds") is not None]
            row["cpu_overrun"] = max(used) / cpu_limit - 1.0 if used else None
        for key, value in values.items():
            row[key] = _text(value)
        rows.append(row)
    return pd.DataFrame(rows)


def importances(study: optuna.Study, seed: int) -> tuple[dict[str, float], str]:
    """fANOVA importances of the completed trials, and a note saying how (or why none)."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(done) < 2:
        return {}, f"{len(done)} completed trial(s); importances need at least 2"
    try:
        found = optuna.importance.get_param_importances(
            study, evaluator=FanovaImportanceEvaluator(seed=seed)
        )
    except (ValueError, RuntimeError) as error:
        return {}, f"optuna could not compute them ({error})"
    note = (
        f"optuna's fANOVA (seed {seed}) over the {len(done)} completed trials; pruned and failed "
        "trials are left out; transformed parameters by the name optuna draws (population_pow: "
        "population = 2^x)"
    )
    return {str(k): float(v) for k, v in found.items()}, note


def report_data(
    plan: StudyPlan, study: optuna.Study, tuned: Tuned | None, notes: list[str], checked: Checked
) -> TuneReport:
    """The report's data from the study (its trials whose records check) and the best
    trial's run directories."""
    from harness.report.tune import TrialRow, TuneReport

    trials = [
        TrialRow(
            number=t.number,
            state=t.state.name,
            value=t.value,
            intermediate={int(k): float(v) for k, v in t.intermediate_values.items()},
            values=values,
        )
        for t, values in checked
    ]
    found, note = importances(study, plan.sampler_seed)
    notes = [*notes, *usage_notes(plan, checked, tuned)]
    report = TuneReport(
        study=plan.name,
        algo=plan.algo,
        env=plan.env,
        storage=shown(plan.storage_url),
        objective=plan.objective.text,
        objective_axis=plan.objective.axis,
        effort=plan.effort(),
        trials=trials,
        importances=found,
        importance_note=note,
        notes=notes,
    )
    if tuned is not None:
        best = next(t for t, _ in checked if t.number == tuned.trial)
        report.best, report.best_value, report.best_values = tuned.trial, tuned.score, tuned.values
        report.best_runs = _run_paths(best.user_attrs, plan.runs_dir)
        recheck = tuned.recheck
        if recheck is not None:
            report.recheck_runs = _run_paths(recheck, plan.runs_dir)
            score = recheck.get("score")
            report.recheck_value = None if score is None else float(score)
    return report


def usage_notes(plan: StudyPlan, checked: Checked, tuned: Tuned | None) -> list[str]:
    """The report's lines on trials whose runs made fewer evaluations than the objective
    averages, and (a CPU budget) on runs more than 10% over their CPU limit."""
    lines = []
    few = [
        (t.number, n)
        for t, _ in checked
        if t.state.name == "COMPLETE"
        and not plan.objective.enough(
            n := scores.trial_evaluations(t.user_attrs, len(t.intermediate_values))
        )
    ]
    if few:
        shown = ", ".join(f"{number} ({n})" for number, n in few)
        text = (
            f"**Too few evaluations**: completed trial(s) {shown} had a run with fewer than the "
            f"{plan.objective.evaluations_needed} evaluations the objective averages (flagged "
            "`too_few_evaluations` in `trials.csv`); "
        )
        if tuned is not None and tuned.warning:
            text += "no trial had enough, so the best was taken among them."
        else:
            text += "they are not eligible as the best trial."
        lines.append(text)
    limit = plan.budget.get("cpu_limit")
    if limit is None:
        return lines
    over = [
        (t.number, o) for t, _ in checked for o in scores.cpu_overruns(t.user_attrs, float(limit))
    ]
    if over:
        worst = max(o["over"] for _, o in over)
        shown = "; ".join(
            f"trial {n}: {scores.overrun_text(o, float(limit))}" for n, o in over[:10]
        )
        more = f" (and {len(over) - 10} more)" if len(over) > 10 else ""
        lines.append(
            f"**CPU limit overruns**: {len(over)} run(s) used more than "
            f"{100 * scores.CPU_OVERRUN_WARN:.0f}% over the {float(limit):g} CPU-s limit (up "
            f"to +{100 * worst:.0f}%; `cpu_seconds_seed_*` in `trials.csv`): {shown}{more}."
        )
    return lines


def _run_paths(record: dict[str, Any], default: Path) -> dict[int, Path]:
    """seed -> run directory of a trial's (or a recheck's) ``runs``, in the runs directory
    that made them (another machine's, for a study shared through a database server)."""
    runs = record.get("runs")
    if not isinstance(runs, dict):
        return {}
    runs_dir = Path(record.get("runs_dir") or default)
    return {int(seed): runs_dir / str(run) for seed, run in runs.items()}


def write_outputs(
    plan: StudyPlan, study: optuna.Study, tuned: Tuned | None, notes: list[str], checked: Checked
) -> list[Path]:
    """``trials.csv``, ``best.yaml`` (with a best trial) and the report, of the trials whose
    records check (:func:`harness.tune.best.checked_trials`); their paths."""
    from harness.report.tune import write_tune_report

    out = plan.out_dir
    out.mkdir(parents=True, exist_ok=True)
    frame = trials_frame(checked, plan.budget.get("cpu_limit"), plan.objective)
    csv = out / TRIALS_FILE
    from harness.report.escape import csv_frame

    rundir.atomic_write(csv, [csv_frame(frame).to_csv(index=False).encode()])
    written = [csv]
    if tuned is not None:
        written.append(write_best(tuned, out))
    written.append(write_tune_report(report_data(plan, study, tuned, notes, checked), out))
    return written


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite number."""
    return isinstance(value, (int, float)) and math.isfinite(float(value))
