"""``harness bench ceiling``: real processes stepping a real env, figures per process count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "harness.cli", "bench", "ceiling", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_ceiling_measures_each_process_count_against_one(tmp_path: Path) -> None:
    out = tmp_path / "ceiling.json"
    done = _bench("--workers", "2", "--seconds", "0.3", "--repeats", "2", "--json", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["env"] == "LunarLanderContinuous-v3"
    assert figures["w1.ceiling_best"] == 1.0  # one process is the yardstick, always measured
    assert len(figures["w1.steps_per_s"]) == len(figures["w2.steps_per_s"]) == 2
    assert all(rate > 1000 for rate in figures["w2.steps_per_s"])  # both processes stepped
    assert 0 < figures["w2.ceiling_worst"] <= figures["w2.ceiling_best"]
    assert "over one (best)" in done.stdout.splitlines()[0]


def test_vec_envs_measures_the_cost_of_env_processes(tmp_path: Path) -> None:
    """SB3's DummyVecEnv and SubprocVecEnv on real envs: the message cost the projection uses."""
    out = tmp_path / "machine.json"
    done = _bench(
        *("--workers", "1", "--seconds", "0.5", "--repeats", "1", "--vec-envs", "2"),
        *("--head-gaps-ms", "2", "--json", str(out)),
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["vec_envs"] == 2 and figures["cores"] >= 1
    assert figures["dummy_steps_per_s"] > 1000 and figures["subproc_steps_per_s"] > 100
    assert figures["subproc_message_s"] >= 0.0

    from harness.bench.project import machine_costs

    machine = machine_costs(out)
    assert machine is not None and machine.env == figures["env"]
    assert machine.env_step_s == 1 / figures["dummy_steps_per_s"]
    assert machine.subproc_message_s == figures["subproc_message_s"]
    assert "machine.json" in machine.phrase()
    # the message cost with the head busy between steps: measured at each gap, 0 included
    assert figures["head_gap_ms"] == [0.0, 2.0]
    by_gap = figures["subproc_message_s_by_gap"]
    assert by_gap[0] == figures["subproc_message_s"] and all(m >= 0 for m in by_gap)
    assert machine.message_s(0.0) == by_gap[0] and machine.message_s(1.0) == by_gap[-1]
    assert abs(machine.message_s(0.001) - (by_gap[0] + by_gap[1]) / 2) < 1e-12


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "ceiling.json"
    cases = (
        (["--workers", "0"], "--workers"),
        (["--env", "Nope"], "'Nope'"),
        (["--vec-envs", "-1"], "--vec-envs"),
        (["--vec-envs", "2", "--head-gaps-ms", "-1"], "--head-gaps-ms"),
    )
    for args, named in cases:
        done = _bench(*args, "--json", str(out))
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and named in done.stderr
    assert not out.exists()
