"""Sweeps: file validation, resumption, crash isolation, two sweeps into one runs directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.records import scan_runs
from harness.sweep import SweepError, cell_key, load_sweep, run_sweep
from tests.conftest import ROOT

EXPERIMENTS = ROOT / "experiments"
#: Every sweep file shipped: all of experiments/ but the defaults, the published anchors,
#: the benchmark (a file of its own kind, tests/test_benchmark.py) and its cells' provenance
#: (tests/test_benchmark_fairness.py), and the tuning files: search spaces and the
#: equal-effort study (tests/test_tune.py).
NOT_SWEEPS = ("defaults.yaml", "anchors.yaml", "benchmark.yaml", "provenance.yaml")
NOT_SWEEPS += ("search_spaces.yaml", "lander_speed_spaces.yaml", "tune_lander.yaml")
SHIPPED = sorted(path.stem for path in EXPERIMENTS.glob("*.yaml") if path.name not in NOT_SWEEPS)


def write_sweep(
    folder: Path,
    name: str,
    seeds: list[int],
    algos: tuple[str, ...] = ("optimes",),
    extra: str = "",
) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: {name}
        grid:
          algo: [{", ".join(algos)}]
          env: [CartPole]
          seed: {seeds}
        budget:
          timesteps: 1500
        backend: inline
        set: [eval_every_timesteps=1000, eval_episodes=1]
        overrides:
          optimes: [population=10]
        """)
        + extra
    )
    return path


def harness(*args: str) -> tuple[int, str, str]:
    """Run ``harness ARGS`` as a subprocess (sweeps spawn their own cells)."""
    env = {**os.environ, "HARNESS_PROGRESS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def completed_by_key(runs_dir: Path) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for header in scan_runs(runs_dir):
        if header.status == "COMPLETED":
            keys.setdefault(cell_key(header.config), []).append(header.run_id)
    return keys


# -- the file ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sweep_files_are_valid(name: str) -> None:
    sweep = load_sweep(EXPERIMENTS / f"{name}.yaml")
    assert sweep.name == name and sweep.cells
    assert {c.config["sweep"] for c in sweep.cells} == {name}
    assert (EXPERIMENTS / f"{name}.yaml").read_text().startswith("# Sweep:")


def test_goodai_policies_have_the_published_sizes() -> None:
    by_name = {
        n: load_sweep(EXPERIMENTS / f"goodai_{n}.yaml").cells[0].config
        for n in ("lander", "ant", "pendulum")
    }
    assert by_name["lander"]["policy"]["kind"] == "linear"
    assert by_name["ant"]["policy"] == {
        "kind": "mlp",
        "hidden_sizes": [64, 64],
        "activation": "relu",
        "discretize": 5,
        "init": "normc",
    }
    assert by_name["pendulum"]["env"] == "PendulumPO"
    assert by_name["pendulum"]["policy"]["kind"] == "lstm"
    es = {"optimes", "nevergrad-es", "cma"}
    for name in by_name:
        sweep = load_sweep(EXPERIMENTS / f"goodai_{name}.yaml")
        es_cells = [c for c in sweep.cells if c.config["algo"] in es]
        assert {c.config["episodes"] for c in es_cells} == {1, 5}
        assert {c.config["algo"] for c in es_cells} == es
        # the Ant study adds the RL baselines at their zoo settings, one cell per seed
        rl = {c.config["algo"] for c in sweep.cells} - es
        assert rl == ({"ppo", "a2c"} if name == "ant" else set())
        assert all(c.config["policy"]["discretize"] == 5 for c in es_cells if name == "ant")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole]}\nbudgets: {timesteps: 10}\n",
            "unknown key 'budgets'",
        ),
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole], seeds: [1]}\n",
            "grid.seeds: optimes has no hyperparameter or knob 'seeds'; did you mean: seed?",
        ),
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole]}\nbudget: {steps: 10}\n",
            "unknown key budget.'steps'",
        ),
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole]}\nset: [populaton=4]\n",
            "unknown --set key 'populaton'",
        ),
        ("name: x\ngrid: {algo: [optimez], env: [CartPole]}\n", "unknown algorithm 'optimez'"),
        ("name: x\ngrid: {algo: [optimes], env: [CartPole], seed: [a]}\n", "must be integers"),
        ("grid: {algo: [optimes], env: [CartPole]}\n", "name must be"),
        ("name: x\ngrid: {algo: [optimes], env: [CartPole]\n", "malformed YAML"),
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole]}\noverrides: {optimez: [sigma=1]}\n",
            "overrides.optimez: unknown algorithm",
        ),
        (
            "name: x\ngrid: {algo: [optimes], env: [CartPole]}\nbackend: carrier-pigeon\n",
            "unknown backend",
        ),
    ],
)
def test_bad_sweep_file_is_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    runs = tmp_path / "runs"
    assert main(["sweep", str(path), "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(path) in err, err
    assert not runs.exists()


def test_python_tags_in_yaml_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system [echo hi]\ngrid: {}\n")
    assert main(["sweep", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "malformed YAML" in capsys.readouterr().err


def test_command_line_set_and_grid_make_new_cells(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, "cli", [0, 1, 2])
    base = load_sweep(path)
    small = load_sweep(path, extra_set=["timesteps=1000"], grid_override={"seed": [0, 1]})
    assert len(small.cells) == 2 and {c.config["timesteps"] for c in small.cells} == {1000}
    assert not {c.key for c in small.cells} & {c.key for c in base.cells}


# -- running -------------------------------------------------------------------------------


@pytest.mark.slow
def test_sweep_tags_runs_skips_completed_cells_and_reruns_failed_ones(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, "resume", [0, 1], algos=("optimes", "cma"))
    runs = tmp_path / "runs"
    code, out, err = harness("sweep", str(path), "--runs-dir", str(runs), "--jobs", "2")
    assert code == 0, out + err
    assert "4 cells, 0 already completed, 4 ran" in out
    headers = scan_runs(runs)
    assert len(headers) == 4 and {h.status for h in headers} == {"COMPLETED"}
    assert {h.config["sweep"] for h in headers} == {"resume"}
    assert {(h.config["algo"], h.config["seed"]) for h in headers} == {
        ("optimes", 0),
        ("optimes", 1),
        ("cma", 0),
        ("cma", 1),
    }
    logs = list((runs / "_sweeps" / "resume" / "logs").glob("cell-*.log"))
    assert len(logs) == 4

    # again: every cell is completed, nothing runs
    code, out, _ = harness("sweep", str(path), "--runs-dir", str(runs))
    assert code == 0 and "4 already completed, 0 ran" in out
    assert len(scan_runs(runs)) == 4

    # a FAILED run does not count: its cell runs again as a new run; an INTERRUPTED
    # one with a checkpoint is continued in place by `harness resume`
    failed, interrupted = headers[0], headers[1]
    for header, status in ((failed, "FAILED"), (interrupted, "INTERRUPTED")):
        record = json.loads((header.path / "run.json").read_text())
        record["status"] = status
        (header.path / "run.json").write_text(json.dumps(record))
    code, out, _ = harness("sweep", str(path), "--runs-dir", str(runs), "--dry-run")
    assert code == 0 and out.count("skip (run") == 2, out
    assert f"resume (run {interrupted.run_id})" in out and out.count(" run ") == 1
    code, out, err = harness("sweep", str(path), "--runs-dir", str(runs))
    assert code == 0 and "2 already completed, 1 ran, 1 resumed" in out, out + err
    after = {h.run_id: h for h in scan_runs(runs)}
    assert len(after) == 5
    assert after[failed.run_id].status == "FAILED"
    assert after[interrupted.run_id].status == "COMPLETED"
    assert after[interrupted.run_id].run.get("resumed")
    assert all(len(ids) == 1 for ids in completed_by_key(runs).values())
    assert len(completed_by_key(runs)) == 4


def test_a_crashing_cell_does_not_stop_the_sweep(tmp_path: Path) -> None:
    """A cell whose process dies is reported; the others complete; a rerun finishes it."""
    wrapper = tmp_path / "crashy_python.py"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""\
        import json, os, sys
        config = json.load(open(sys.argv[sys.argv.index("--cell") + 1]))
        if config["seed"] == 1:
            print("simulated crash", flush=True)
            os._exit(3)
        os.execv({sys.executable!r}, [{sys.executable!r}] + sys.argv[1:])
        """)
    )
    wrapper.chmod(0o755)
    sweep = load_sweep(write_sweep(tmp_path, "crashy", [0, 1, 2]))
    runs = tmp_path / "runs"
    lines: list[str] = []
    result = run_sweep(sweep, runs, jobs=2, progress=False, echo=lines.append, python=str(wrapper))
    statuses = {o.cell.config["seed"]: o.status for o in result.outcomes}
    assert statuses == {0: "COMPLETED", 1: "CRASHED", 2: "COMPLETED"}
    assert len(lines) == 1 and "simulated crash" in lines[0] and "seed=1" in lines[0]
    again = run_sweep(sweep, runs, jobs=2, progress=False, echo=lines.append)
    assert [o.action for o in again.outcomes] == ["skipped", "ran", "skipped"]
    assert not again.failed


def test_kill_stops_the_sweep_and_its_running_cell(tmp_path: Path) -> None:
    """SIGTERM to the sweep: its cell (in its own session) is stopped and resumable."""
    path = write_sweep(tmp_path, "killed", [0])
    path.write_text(path.read_text().replace("timesteps: 1500", "timesteps: 100000000"))
    runs = tmp_path / "runs"
    env = {**os.environ, "HARNESS_PROGRESS": "0"}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "sweep", str(path), "--runs-dir", str(runs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(runs.glob("*/checkpoint.pkl")):
        assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
        time.sleep(0.05)
    (run_dir,) = [p.parent for p in runs.glob("*/checkpoint.pkl")]
    head = json.loads((run_dir / "run.json").read_text())["head"]["pid"]
    sweep.terminate()
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "INTERRUPTED"
    assert (
        not Path(f"/proc/{head}").exists()
        or "zombie" in Path(f"/proc/{head}/status").read_text().lower()
    ), "the cell outlived its sweep"


@pytest.mark.slow
def test_two_sweeps_at_once_into_one_runs_dir_lose_nothing(tmp_path: Path) -> None:
    """Sweeps a, a (again) and b at once: every cell once, distinct ids, nothing lost."""
    runs = tmp_path / "runs"
    a = write_sweep(tmp_path, "a", [0, 1, 2])
    b = write_sweep(tmp_path, "b", [0, 1, 2])
    env = {**os.environ, "HARNESS_PROGRESS": "0"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "sweep",
                str(path),
                "--runs-dir",
                str(runs),
                "--jobs",
                "2",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in (a, b, a)
    ]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    dirs = sorted(int(p.name) for p in runs.iterdir() if p.name.isdigit())
    assert dirs == list(range(1, 7))
    headers = scan_runs(runs)
    assert len(headers) == 6 and {h.status for h in headers} == {"COMPLETED"}
    assert sorted((h.config["sweep"], h.config["seed"]) for h in headers) == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
        ("b", 2),
    ]
    ran = sum(int(out.split(" ran,")[0].rsplit(" ", 1)[1]) for out, _ in outputs)
    assert ran == 6


def test_cell_identity_ignores_ray_address_and_knobs_one_side_lacks(tmp_path: Path) -> None:
    from harness.sweep import cell_identity, same_cell

    cell = load_sweep(write_sweep(tmp_path, "ident", [0])).cells[0].config
    stored = json.loads(json.dumps(cell))
    stored["ray_address"] = "10.0.0.1:6379"
    del stored["params"]["sigma_min"]  # a knob this run predates
    assert same_cell(cell_identity(cell), cell_identity(stored))
    stored["params"]["sigma"] = 0.5
    assert not same_cell(cell_identity(cell), cell_identity(stored))
    stored = json.loads(json.dumps(cell))
    stored["sweep"] = "other"
    assert not same_cell(cell_identity(cell), cell_identity(stored))


def test_a_parameter_a_stored_run_predates_matches_only_at_its_default(
    tmp_path: Path,
) -> None:
    """A run made before a knob existed behaved as the knob's built-in default: it is the
    cell only where the cell asks for that default (the benchmark's cma runs without
    observation normalisation are not its cells once the env turns it on)."""
    from algorithms.base import config_defaults
    from algorithms.registry import get_algorithm
    from harness.sweep import cell_identity, same_cell

    cell = load_sweep(write_sweep(tmp_path, "ident", [0])).cells[0].config
    default = config_defaults(get_algorithm(cell["algo"]).Config)["sigma_min"]
    stored = json.loads(json.dumps(cell))
    del stored["params"]["sigma_min"]
    assert cell["params"]["sigma_min"] == default
    assert same_cell(cell_identity(cell), cell_identity(stored))
    cell["params"]["sigma_min"] = default + 0.01
    assert not same_cell(cell_identity(cell), cell_identity(stored))
    # an algorithm this machine lacks: only the keys both sides have can say
    cell["algo"] = stored["algo"] = "nobody-installed-this"
    assert same_cell(cell_identity(cell), cell_identity(stored))


def test_no_imports_leaves_the_identity_and_key_of_stored_cells_as_they_were(
    tmp_path: Path,
) -> None:
    """Runs stored before ``imports`` existed are the same cells, under the same lock key."""
    from harness.sweep import cell_identity, cell_key, same_cell

    cell = load_sweep(write_sweep(tmp_path, "ident", [0])).cells[0].config
    assert cell["imports"] == []
    stored = {key: value for key, value in cell.items() if key != "imports"}
    assert same_cell(cell_identity(cell), cell_identity(stored))
    assert cell_key(cell) == cell_key(stored)
    assert cell_key({**cell, "imports": ["mypackage.envs"]}) != cell_key(cell)


def test_file_wide_settings_reach_only_the_cells_that_use_them(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path, "mixed", [0], algos=("optimes", "ppo"), extra="  ppo: [n_steps=32]\n"
    )
    text = path.read_text().replace("  seed: [0]\n", "  seed: [0]\n  episodes: [1, 3]\n")
    path.write_text(text.replace("eval_episodes=1]", "eval_episodes=1, sync=broadcast]"))
    cells = load_sweep(path).cells
    by_algo = {(c.config["algo"], c.config["episodes"]): c.config for c in cells}
    # episodes per fitness is an ES knob: one PPO cell, not one per K
    assert sorted(by_algo) == [("optimes", 1), ("optimes", 3), ("ppo", 1)]
    assert by_algo["optimes", 3]["backend"] == "inline"
    assert by_algo["ppo", 1]["backend"] == "process"  # the file's backend is for ES cells
    assert "episodes=" not in next(c for c in cells if c.config["algo"] == "ppo").label
    # an override of one algorithm is the user's word for it: a knob it does not use is an error
    path.write_text(path.read_text().replace("ppo: [n_steps=32]", "ppo: [sync=seeds]"))
    with pytest.raises(SweepError, match="sync does not apply to ppo"):
        load_sweep(path)


def test_cell_identity_ignores_knobs_the_algorithm_does_not_use(tmp_path: Path) -> None:
    from harness.sweep import cell_identity, same_cell

    path = write_sweep(tmp_path, "ppoid", [0], algos=("ppo",))
    cell = load_sweep(path).cells[0].config
    stored = json.loads(json.dumps(cell))
    stored["backend"] = "inline"  # what a sweep file's backend once gave PPO cells
    stored["policy"]["discretize"] = 5
    assert same_cell(cell_identity(cell), cell_identity(stored))
    stored["params"]["n_steps"] = 64
    assert not same_cell(cell_identity(cell), cell_identity(stored))


def test_grid_keys_beyond_the_axes_vary_knobs_and_hyperparameters_per_algorithm(
    tmp_path: Path,
) -> None:
    """A knob a family does not use gives its algorithms one cell, not one per value; list
    values vary as wholes; a grid key the file also sets is refused."""
    path = tmp_path / "further.yaml"
    path.write_text(
        "name: further\n"
        "grid:\n"
        "  algo: [optimes, ppo]\n"
        "  env: [CartPole]\n"
        "  sync: [broadcast, seeds]\n"
        "  policy.hidden_sizes: [[8], [16, 16]]\n"
        "budget: {timesteps: 1e4}\n"
    )
    cells = load_sweep(path).cells
    by_algo: dict[str, list[tuple[Any, ...]]] = {}
    for cell in cells:
        config = cell.config
        by_algo.setdefault(config["algo"], []).append(
            (config.get("sync"), tuple(config["policy"]["hidden_sizes"]))
        )
    assert sorted(by_algo["optimes"]) == [
        ("broadcast", (8,)),
        ("broadcast", (16, 16)),
        ("seeds", (8,)),
        ("seeds", (16, 16)),
    ]
    # neither sync nor the ES's policy applies to PPO (its network is its net_arch): one cell
    assert len(by_algo["ppo"]) == 1
    assert all(cell.config["timesteps"] == 10000 for cell in cells)
    path.write_text(path.read_text() + "set: [sync=seeds]\n")
    with pytest.raises(SweepError, match=r"grid\.sync is also set"):
        load_sweep(path)


def test_a_shipment_cut_short_never_leaves_the_driver_a_checkpoint_ahead_of_its_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray cell ships its checkpoint and metrics together; the driver may die between writes."""
    from harness import rundir
    from harness.sweep.ray_cells import SHIPPED, RunStore

    store = RunStore(str(tmp_path / "runs"), {}, str(tmp_path / "logs"))
    write = rundir.atomic_write
    written: list[str] = []

    def write_once_then_die(path: Path, chunks: Any, prefix: str) -> None:
        if written:
            raise SystemExit("the driver died")
        write(path, chunks, prefix=prefix)
        written.append(path.name)

    monkeypatch.setattr(rundir, "atomic_write", write_once_then_die)
    shipment = {name: b"{}" for name in SHIPPED}
    with pytest.raises(SystemExit):
        store.ship("cell", shipment)
    assert written and written != [rundir.CHECKPOINT]
    assert not (tmp_path / "runs" / "1" / rundir.CHECKPOINT).exists()
    monkeypatch.setattr(rundir, "atomic_write", write)
    store.ship("cell", shipment)
    assert all((tmp_path / "runs" / "1" / name).read_bytes() == b"{}" for name in SHIPPED)
