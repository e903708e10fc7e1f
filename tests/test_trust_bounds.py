"""Nothing runs, or fills the machine, from a file someone else made: bounded reads,
one-line refusals, quiet early Ctrl-C, resume without a checkpoint, exact byte counters.

Every command runs as a real subprocess (``harness_cli``), as a user would run it. The
decompression bomb is made here: a 160 MiB ``metrics.json`` of zeros packs into a few
hundred KB of xz, past the 128 MiB member limit; the child's peak memory is read with
``os.wait4`` (its own rusage, not the maximum over every child this pytest process ran).
"""

from __future__ import annotations

import io
import json
import lzma
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from harness import rundir
from tests.conftest import ROOT, deterministic_metrics, harness_cli, only_run_dir, read_run

#: Unpacked size of the bomb's metrics.json: just past the default per-member limit.
BOMB_BYTES = rundir.ARCHIVE_MAX_MEMBER_BYTES + 32 * 2**20
#: Peak memory the refused bomb may cost `harness report` (its imports alone take ~200 MB;
#: unbounded, the same archive took 2.1 GB at 1 GB of zeros).
BOMB_RSS_LIMIT = 400 * 2**20
CARTPOLE = ("--algo", "optimes", "--env", "CartPole", "--seed", "2")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HARNESS_PROGRESS": "0", "PYTHONUNBUFFERED": "1", **extra}


def _tar_member(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _archive(path: Path, files: dict[str, bytes]) -> Path:
    """A run archive of ``files`` (member name -> content), as write_run_archive packs one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(lzma.compress(buffer.getvalue(), preset=0))
    return path


def _run_files(status: str = "COMPLETED") -> dict[str, bytes]:
    return {
        "runs/1/config.json": json.dumps({"algo": "optimes", "env": "CartPole"}).encode(),
        "runs/1/run.json": json.dumps({"status": status}).encode(),
    }


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run archive whose metrics.json is BOMB_BYTES of zeros, streamed through lzma."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.tar.xz"
    packer = lzma.LZMACompressor(preset=0)
    parts = []
    for name, data in _run_files().items():
        parts.append(packer.compress(_tar_member(name, len(data))))
        parts.append(packer.compress(data + b"\0" * (-len(data) % 512)))
    parts.append(packer.compress(_tar_member("runs/1/metrics.json", BOMB_BYTES)))
    zeros = bytes(2**24)
    for _ in range(BOMB_BYTES // len(zeros)):
        parts.append(packer.compress(zeros))
    parts.append(packer.compress(b"\0" * 1024))  # tar's end-of-archive blocks
    parts.append(packer.flush())
    path.write_bytes(b"".join(parts))
    return path


#: Starts ``harness ARGV[2:]`` and writes its exit status and peak RSS (KiB) to ARGV[1]. Linux
#: carries a process's peak RSS across fork and exec, so the harness is started from this
#: small interpreter rather than from the test process, which may have grown large first.
_MEASURE = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-m", "harness.cli", *sys.argv[2:]])
_, status, usage = os.wait4(child.pid, 0)
open(sys.argv[1], "w").write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def _run_measured(args: list[str], tmp: Path, env: dict[str, str]) -> tuple[int, str, int]:
    """Run ``harness ARGS``; return its exit status, stderr and peak RSS in bytes."""
    out, err, measured = tmp / "stdout", tmp / "stderr", tmp / "measured"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        subprocess.run(
            [sys.executable, "-c", _MEASURE, str(measured), *args],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=stderr,
            check=True,
        )
    code, rss_kib = (int(word) for word in measured.read_text().split())
    return code, err.read_text(), rss_kib * 1024


def _one_error_line(stderr: str) -> str:
    """The one ``harness: error:`` line (a warning line may precede it); no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- 1. bounded reading -------------------------------------------------------------------


def test_bomb_archive_is_refused_in_bounded_memory(bomb: Path, tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    code, stderr, rss = _run_measured(
        ["report", str(bomb), "--out", str(tmp_path / "out")], tmp_path, _env(TMPDIR=str(temp))
    )
    assert code == 2
    line = _one_error_line(stderr)
    assert str(bomb) in line and "runs/1/metrics.json" in line, line
    assert rundir.ARCHIVE_MAX_MEMBER_BYTES_ENV in line, line
    assert rss < BOMB_RSS_LIMIT, f"peak RSS {rss / 2**20:.0f} MiB"
    assert not (tmp_path / "out").exists()  # nothing half-written
    assert list(temp.iterdir()) == []  # the unpacked part is gone at once


def test_archive_limits_from_the_environment(tmp_path: Path, monkeypatch: Any) -> None:
    """Total size, member count and the variables' syntax; each refusal one line."""
    files = _run_files()
    files.update({f"runs/1/extra{i}.json": b"0" * 300_000 for i in range(4)})
    archive = _archive(tmp_path / "runs.tar.xz", files)
    monkeypatch.setattr(rundir, "_UNPACKED", [0])  # as a new command: none read before it
    monkeypatch.setenv(rundir.ARCHIVE_MAX_TOTAL_BYTES_ENV, "1M")
    with pytest.raises(rundir.ArchiveRefused, match=r"more than 1 MiB .*extra3\.json"):
        rundir.extract_run_archive(archive)
    monkeypatch.setenv(rundir.ARCHIVE_MAX_TOTAL_BYTES_ENV, "2MiB")
    monkeypatch.setenv(rundir.ARCHIVE_MAX_MEMBERS_ENV, "4")
    with pytest.raises(rundir.ArchiveRefused, match="more than 4 members") as refused:
        rundir.extract_run_archive(archive)
    assert "\n" not in str(refused.value)
    monkeypatch.setenv(rundir.ARCHIVE_MAX_MEMBERS_ENV, "many")
    with pytest.raises(rundir.UnreadableRun, match="HARNESS_ARCHIVE_MAX_MEMBERS='many'"):
        rundir.extract_run_archive(archive)
    monkeypatch.delenv(rundir.ARCHIVE_MAX_MEMBERS_ENV)
    runs = rundir.extract_run_archive(archive)  # within every limit: read as before
    assert sorted(p.name for p in (runs / "1").iterdir())[:2] == ["config.json", "extra0.json"]


def test_stale_unpacked_archives_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    pid = int(dead.stdout)
    stale = tmp_path / f"{rundir.EXTRACT_PREFIX}p{pid}-abc"
    fresh = tmp_path / f"{rundir.EXTRACT_PREFIX}p{pid}-def"
    alive = tmp_path / f"{rundir.EXTRACT_PREFIX}p{os.getppid()}-ghi"
    old = time.time() - 2 * rundir.STALE_EXTRACTION_S
    for folder in (stale, fresh, alive):
        (folder / "runs").mkdir(parents=True)
    for folder in (stale, alive):
        os.utime(folder, (old, old))
    assert rundir.remove_stale_extractions(tmp_path) == [stale]
    assert fresh.is_dir() and alive.is_dir()


def test_run_files_over_the_json_limit_are_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"algo": "optimes"}))
    (run_dir / "run.json").write_text(json.dumps({"status": "COMPLETED"}))
    (run_dir / "metrics.json").write_text(json.dumps({"x": {"steps": [0] * 1000}}))
    size = rundir.format_size((run_dir / "metrics.json").stat().st_size)
    env = {rundir.JSON_MAX_BYTES_ENV: "2K"}
    report = harness_cli(
        "report", str(run_dir.parent), "--out", str(tmp_path / "out"), check=False, env=env
    )
    assert report.returncode == 2
    assert f"metrics.json is {size}, over the 2 KiB limit" in report.stderr, report.stderr
    _one_error_line(report.stderr)
    resume = harness_cli("resume", str(run_dir), check=False, env=env)
    assert resume.returncode == 2
    line = _one_error_line(resume.stderr)
    assert f"metrics.json is {size}" in line and rundir.JSON_MAX_BYTES_ENV in line, line
    os.mkfifo(run_dir / "summary.json")  # a FIFO must not hang a reader
    with pytest.raises(rundir.UnreadableRun, match=r"summary\.json is not a regular file"):
        rundir.read_json(run_dir / "summary.json")


# -- 2. one-line errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--set", "sigma="), "--set sigma= has no value"),
        (("--set", "sigma=null"), "sigma needs a value (a float), not null"),
        (("--set", "population=~"), "population needs a value (an int), not null"),
        (("--timesteps", "1e30"), "timesteps must be at most 1,000,000,000,000, got 1e30"),
        (("--generations", "1e12"), "generations must be at most 1,000,000,000, got 1e12"),
        (("--time-limit", "1e30"), "time limit must be at most 1,000,000,000, got 1e30"),
        (("--timesteps", "1e999999999"), "timesteps must be an integer"),
    ],
)
def test_bad_values_are_one_line_refusals(
    flags: tuple[str, ...], expected: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    result = harness_cli("run", *CARTPOLE, *flags, "--runs-dir", str(runs), check=False)
    assert result.returncode == 2
    assert expected in _one_error_line(result.stderr)
    assert not runs.exists()


def _truncated_copy(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data[: len(data) // 2])
    return target


@pytest.mark.slow
def test_benchmark_commands_refuse_a_truncated_archive(tmp_path: Path) -> None:
    """plan, run and report read the committed archives first: one line, exit 2, and
    nothing written (no runs directory, no summary, the folder as it was)."""
    folder = tmp_path / "committed"
    _truncated_copy(
        ROOT / "reports/benchmark/pendulumpo/runs.tar.xz", folder / "pendulumpo/runs.tar.xz"
    )
    runs = tmp_path / "runs"
    for command in ("plan", "run"):
        result = harness_cli(
            "benchmark",
            command,
            "--archive-dir",
            str(folder),
            "--runs-dir",
            str(runs),
            "--task",
            "PendulumPO",
            check=False,
        )
        assert result.returncode == 2, result.stderr
        line = _one_error_line(result.stderr)
        assert "pendulumpo/runs.tar.xz is not a readable run archive" in line, line
    assert not runs.exists()
    summary = tmp_path / "BENCHMARK.md"
    result = harness_cli(
        "benchmark", "report", "--out", str(folder), "--summary", str(summary), check=False
    )
    assert result.returncode == 2
    assert "is not a readable run archive" in _one_error_line(result.stderr)
    assert not summary.exists()
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "pendulumpo",
        "pendulumpo/runs.tar.xz",
    ]


def test_benchmark_report_refuses_an_over_limit_archive_and_a_read_only_out(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "committed" / "pendulumpo"
    folder.mkdir(parents=True)
    (folder / "runs.tar.xz").write_bytes(
        (ROOT / "reports/benchmark/pendulumpo/runs.tar.xz").read_bytes()
    )
    summary = tmp_path / "BENCHMARK.md"
    result = harness_cli(
        "benchmark",
        "report",
        "--out",
        str(folder.parent),
        "--summary",
        str(summary),
        check=False,
        env={rundir.ARCHIVE_MAX_MEMBER_BYTES_ENV: "100K"},
    )
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "refused, member 'runs/" in line and "over the 100 KiB limit" in line, line
    assert not summary.exists()
    result = harness_cli(
        "benchmark",
        "report",
        "--out",
        "/proc/es-harness-report",
        "--summary",
        str(summary),
        check=False,
    )
    assert result.returncode == 2
    assert "--out '/proc/es-harness-report' is not writable" in _one_error_line(result.stderr)


# -- 3. early signals -----------------------------------------------------------------------


@pytest.mark.parametrize("delay_s", [0.4, 0.9])
def test_ctrl_c_while_the_command_starts_is_quiet(delay_s: float, tmp_path: Path) -> None:
    """Before `harness run` latches stop signals (imports, the parser), Ctrl-C printed a
    KeyboardInterrupt traceback; now it is one line and exit 130, or, once latched, the
    normal interrupted path (the run stops after its step-0 checkpoint)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            *CARTPOLE,
            # Far more generations than a quiet machine runs before the signal: a short run
            # could finish first and exit 0 without ever meeting the signal.
            "--generations",
            "500",
            "--backend",
            "inline",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay_s)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == "harness: interrupted", stderr


def test_resume_restarts_a_run_killed_before_its_first_checkpoint(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = [*CARTPOLE, "--generations", "3", "--workers", "2"]
    child = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", *args, "--runs-dir", str(runs)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not (runs / "1" / "config.json").exists():
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.005)
    os.killpg(child.pid, signal.SIGKILL)  # the head and its workers, as the OOM killer might
    child.wait()
    run_dir = runs / "1"
    assert not (run_dir / "checkpoint.pkl").exists()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "RUNNING"

    resumed = harness_cli("resume", str(run_dir))
    assert "stopped before its first checkpoint: restarting it from scratch" in resumed.stdout
    record = read_run(run_dir)
    assert record["run"]["status"] == "COMPLETED"
    assert record["run"]["resumed"][-1]["from_scratch"] is True
    assert record["metrics"]["timesteps"]["steps"] == [1, 2, 3]
    fresh = tmp_path / "fresh"
    harness_cli("run", *args, "--runs-dir", str(fresh))
    expected = deterministic_metrics(read_run(only_run_dir(fresh))["metrics"])
    assert deterministic_metrics(record["metrics"]) == expected


# -- 4. byte counters after a resume ----------------------------------------------------------


@pytest.mark.slow
def test_byte_counters_after_resume_equal_an_uninterrupted_run(tmp_path: Path) -> None:
    """The head's request counter travelled as a pickled int: 1 byte below 256, 2 above.
    It restarts at 0 in a resumed process, so the resumed generations' messages were a
    byte shorter each until it caught up (seen from generation 17 on with 2 workers).
    Stopped at 16 and resumed to 20, every byte count must equal the uninterrupted run's.
    """
    common = [*CARTPOLE, "--workers", "2", "--set", "max_episode_steps=100"]
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "run",
                *common,
                "--generations",
                str(g),
                "--runs-dir",
                str(runs),
            ],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for runs, g in ((reference, 20), (interrupted, 16))
    ]
    for child in children:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr
    run_dir = only_run_dir(interrupted)
    harness_cli("resume", str(run_dir), "--generations", "20")
    expected = read_run(only_run_dir(reference))["metrics"]
    got = read_run(run_dir)["metrics"]
    for name in ("bytes_to_workers", "bytes_from_workers"):
        assert got[name]["steps"] == expected[name]["steps"] == list(range(1, 21))
        assert got[name]["values"] == expected[name]["values"], name
    assert deterministic_metrics(got) == deterministic_metrics(expected)


def test_the_limits_and_their_variables_are_in_the_help() -> None:
    text = harness_cli("report", "--help").stdout
    for variable in (
        rundir.JSON_MAX_BYTES_ENV,
        rundir.ARCHIVE_MAX_TOTAL_BYTES_ENV,
        rundir.ARCHIVE_MAX_MEMBER_BYTES_ENV,
        rundir.ARCHIVE_MAX_MEMBERS_ENV,
    ):
        assert variable in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "random_scores.json is corrupt (nested too deeply)"),
        (b'{"Pendulum": ', "random_scores.json is truncated or corrupt"),
        (b'{"PendulumPO": {"mean": "high"}}', "random_scores.json: not random-policy scores"),
    ],
)
def test_benchmark_report_refuses_a_hostile_random_scores_file(
    content: bytes, expected: str, tmp_path: Path
) -> None:
    """The folder's random_scores.json is read bounded and checked before anything is
    written: one line, exit 2, no traceback."""
    folder = tmp_path / "committed"
    (folder / "pendulumpo").mkdir(parents=True)
    (folder / "random_scores.json").write_bytes(content)
    summary = tmp_path / "BENCHMARK.md"
    result = harness_cli(
        "benchmark", "report", "--out", str(folder), "--summary", str(summary), check=False
    )
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)
    assert not summary.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["pendulumpo", "random_scores.json"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"\xff\xfe{}", "cannot read golden file"),
        (b'{"metrics": {}, "digits": "six"}', "digits must be an integer"),
    ],
)
def test_check_repro_refuses_a_hostile_golden_file(
    content: bytes, expected: str, tmp_path: Path
) -> None:
    golden = tmp_path / "golden.json"
    golden.write_bytes(content)
    result = harness_cli("check-repro", "--golden", str(golden), check=False)
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)


# -- 5. reads that are not bounded (issue 60) -------------------------------------------------

#: Peak memory `harness report` may reach on a hostile archive (the issue's acceptance).
HOSTILE_RSS_LIMIT = 512 * 2**20
#: Size of the hostile extended headers: unbounded, tarfile reads one whole and parses it
#: (a 600 MB PAX header cost 2.04 GB); xz packs these zeros into a few hundred KB.
HOSTILE_HEADER_BYTES = 300 * 2**20


def _xz_stream(path: Path, pieces: list[tuple[bytes, int]]) -> Path:
    """Write ``path``: xz of the concatenated pieces, each ``(bytes, repeat)``, streamed."""
    packer = lzma.LZMACompressor(preset=0)
    with open(path, "wb") as out:
        for data, repeat in pieces:
            for _ in range(repeat):
                out.write(packer.compress(data))
        out.write(packer.flush())
    return path


def _header_block(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _hostile_header_archive(path: Path, kind: bytes) -> Path:
    """A run archive whose first member carries an extended header (``kind``: PAX ``x`` or
    GNU long name ``L``) of HOSTILE_HEADER_BYTES, then a run's two files."""
    chunk = 2**20
    pieces: list[tuple[bytes, int]] = [
        (_header_block("././@hostile", kind, HOSTILE_HEADER_BYTES), 1),
        (b"\0" * chunk, HOSTILE_HEADER_BYTES // chunk),
    ]
    for name, data in _run_files().items():
        pieces.append((_tar_member(name, len(data)) + data + b"\0" * (-len(data) % 512), 1))
    pieces.append((b"\0" * 1024, 1))
    return _xz_stream(path, pieces)


def _report_hostile(archive: Path, tmp_path: Path) -> tuple[int, str, int, Path]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    code, stderr, rss = _run_measured(
        ["report", str(archive), "--out", str(tmp_path / "out")], tmp_path, _env(TMPDIR=str(temp))
    )
    print(f"{archive.name}: peak RSS {rss / 2**20:.0f} MiB")  # the figure the report quotes
    return code, stderr, rss, temp


@pytest.mark.parametrize(("kind", "label"), [(b"x", "pax"), (b"L", "gnu-long-name")])
def test_an_archive_with_a_huge_extended_header_is_refused_unread(
    kind: bytes, label: str, tmp_path: Path
) -> None:
    archive = _hostile_header_archive(tmp_path / f"{label}.tar.xz", kind)
    assert archive.stat().st_size < 2 * 2**20  # small on disk
    code, stderr, rss, temp = _report_hostile(archive, tmp_path)
    assert code == 2, stderr
    line = _one_error_line(stderr)
    assert f"{archive}: refused, an extended header (type {kind.decode()!r})" in line, line
    assert "over the 1 MiB limit for a header" in line, line
    assert rss < HOSTILE_RSS_LIMIT, f"peak RSS {rss / 2**20:.0f} MiB"
    assert not (tmp_path / "out").exists()
    assert list(temp.iterdir()) == []


def test_a_run_json_of_empty_objects_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    """120 MiB of ``[{},{},...]`` (a 22 KB archive) parsed to 3.39 GB and a MemoryError."""
    size = 120 * 2**20
    pieces: list[tuple[bytes, int]] = [
        (_tar_member("runs/1/config.json", 2) + b"{}" + b"\0" * 510, 1),
        (_tar_member("runs/1/run.json", size + 2) + b"[", 1),
        (b"{}," * 2**20, size // (3 * 2**20)),
        (b"{}" * ((size - size // (3 * 2**20) * 3 * 2**20) // 2), 1),
        (b"]" + b"\0" * (-(size + 2) % 512) + b"\0" * 1024, 1),
    ]
    archive = _xz_stream(tmp_path / "objects.tar.xz", pieces)
    code, stderr, rss, _ = _report_hostile(archive, tmp_path)
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr
    assert code == 2, stderr
    assert "run.json is 120 MiB, over the 16 MiB limit" in stderr, stderr
    assert rss < HOSTILE_RSS_LIMIT, f"peak RSS {rss / 2**20:.0f} MiB"


def test_json_values_are_counted_before_parsing(tmp_path: Path, monkeypatch: Any) -> None:
    """Under the byte limit, a file of many small values is refused by their count."""
    path = tmp_path / "run.json"
    path.write_bytes(b"[" + b"{}," * 1_500_000 + b"{}]")  # 4.5 MB: 72 MB of dicts
    with pytest.raises(rundir.UnreadableRun, match=r"run\.json holds about 4,500,00\d values"):
        rundir.read_json(path)
    monkeypatch.setenv(rundir.JSON_MAX_VALUES_ENV, "5000000")
    assert len(rundir.read_json(path)) == 1_500_001
    real = b'{"x": {"steps": [1, 2], "values": [0.5, 1.5], "timestamps": ["a:b", "c"]}}'
    assert rundir.json_values(real) >= 8  # never fewer than the parser makes


def test_the_total_limit_holds_for_all_archives_of_one_command(tmp_path: Path) -> None:
    """Three archives, each within the limit, together past it: the third is refused."""
    archives = []
    for name in ("a", "b", "c"):
        files = _run_files()
        files["runs/1/extra.json"] = os.urandom(300_000).hex().encode()[:300_000]
        archives.append(str(_archive(tmp_path / f"{name}.tar.xz", files)))
    env = {rundir.ARCHIVE_MAX_TOTAL_BYTES_ENV: "800K"}
    result = harness_cli("report", *archives, "--out", str(tmp_path / "out"), check=False, env=env)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert f"{archives[2]}: refused, with the archives read before it" in line, line
    assert "more than 800 KiB" in line and rundir.ARCHIVE_MAX_TOTAL_BYTES_ENV in line, line


@pytest.fixture(scope="module")
def real_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """config.json, run.json and metrics.json of a real one-generation CartPole run."""
    runs = tmp_path_factory.mktemp("real")
    harness_cli("run", *CARTPOLE, "--generations", "1", "--runs-dir", str(runs))
    return read_run(only_run_dir(runs))


def _planted_run(
    tmp_path: Path, real: dict[str, Any], status: str = "RUNNING", **config: Any
) -> Path:
    """A run directory of the real run's records, its status and config entries replaced."""
    run_dir = tmp_path / "runs" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({**real["config"], **config}))
    (run_dir / "run.json").write_text(json.dumps({**real["run"], "status": status}))
    (run_dir / "metrics.json").write_text(json.dumps(real["metrics"]))
    return run_dir


def test_a_checkpoint_linked_to_dev_zero_is_refused(
    tmp_path: Path, real_config: dict[str, Any]
) -> None:
    run_dir = _planted_run(tmp_path, real_config)
    (run_dir / "checkpoint.pkl").symlink_to("/dev/zero")
    result = harness_cli("enjoy", str(run_dir), check=False, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "checkpoint.pkl is not a regular file" in _one_error_line(result.stderr)


def test_a_fifo_checkpoint_hangs_neither_report_nor_enjoy(
    tmp_path: Path, real_config: dict[str, Any]
) -> None:
    """A report checks a recorded import against the checkpoint's signature: it opened
    a FIFO and waited for a writer forever."""
    run_dir = _planted_run(tmp_path, real_config, imports=["json"])
    os.mkfifo(run_dir / "checkpoint.pkl")
    report = harness_cli(
        "report", str(run_dir.parent), "--out", str(tmp_path / "out"), check=False, timeout=120
    )
    assert "Traceback" not in report.stderr, report.stderr
    enjoy = harness_cli("enjoy", str(run_dir), "--import", "json", check=False, timeout=60)
    assert enjoy.returncode == 2, enjoy.stderr
    assert "checkpoint.pkl is not a regular file" in _one_error_line(enjoy.stderr)


#: Loads the stored policy of the run directory ARGV[1] and prints its refusal.
_LOAD_POLICY = """
import sys
from pathlib import Path
from harness.policy_io import PolicyLoadError, load_stored
try:
    load_stored(Path(sys.argv[1]))
except PolicyLoadError as error:
    print(error)
"""


def test_a_policy_spec_cannot_size_a_huge_network(tmp_path: Path) -> None:
    """A 0.7 MB policy_spec.json (a 65,536-wide observation, a 4,096-unit layer) built a
    2.4 GB network before its size was compared with final_params.npy."""
    import numpy as np

    folder = tmp_path / "policy"
    folder.mkdir()
    width = 65_536
    spec = {
        "format": "stable-baselines3",
        "policy": "ActorCriticPolicy",
        "num_params": 10,
        "policy_kwargs": {"net_arch": [4096], "activation_fn": "Tanh"},
        "spaces": {
            "observation": {
                "type": "Box",
                "shape": [width],
                "dtype": "float32",
                "low": [-1] * width,
                "high": [1] * width,
            },
            "action": {"type": "Discrete", "n": 2, "start": 0},
        },
    }
    (folder / "policy_spec.json").write_text(json.dumps(spec))
    np.save(folder / "final_params.npy", np.zeros(10, dtype=np.float32))
    out = tmp_path / "measured"
    program = _MEASURE.replace('"-m", "harness.cli"', '"-c", sys.argv[2]').replace(
        "*sys.argv[2:]", "*sys.argv[3:]"
    )
    printed = subprocess.run(
        [sys.executable, "-c", program, str(out), _LOAD_POLICY, str(folder)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rss = int(out.read_text().split()[1]) * 1024
    assert "may hold up to" in printed and "parameters, over the" in printed, printed
    assert rss < HOSTILE_RSS_LIMIT, f"peak RSS {rss / 2**20:.0f} MiB"


def _es_run(tmp_path: Path, real: dict[str, Any], **config: Any) -> Path:
    """A COMPLETED run with a stored linear CartPole policy (4 -> 2, 10 parameters)."""
    import numpy as np

    from envs.policies import PolicySpec

    run_dir = _planted_run(tmp_path, real, status="COMPLETED", **config)
    spec = PolicySpec("linear", (), "tanh", 4, "discrete", 2)
    (run_dir / "policy_spec.json").write_text(json.dumps(spec.to_dict()))
    np.save(run_dir / "final_params.npy", np.zeros(spec.num_params, dtype=np.float32))
    (run_dir / "obs_norm.json").write_text("null")
    return run_dir


@pytest.mark.parametrize(
    ("key", "value"),
    [("eval_episodes", 300_000_000), ("max_episode_steps", 10**12), ("seed", -1)],
)
def test_sizes_from_a_config_are_checked_before_replaying(
    key: str, value: Any, tmp_path: Path, real_config: dict[str, Any]
) -> None:
    """``eval_episodes: 300000000`` sized the list of episode seeds (2.4 GB of int64 and
    300 million Python ints) in ``enjoy`` and the report's frames."""
    run_dir = _es_run(tmp_path, real_config, **{key: value})
    result = harness_cli("enjoy", str(run_dir), check=False, timeout=120)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert f"config.json has {key} {value!r}, not an integer from" in line or (
        f"config.json: {key} must be" in line and repr(value) in line  # the record's own check
    ), line


def test_a_population_log_cannot_promise_a_huge_array(tmp_path: Path) -> None:
    """An .npz member whose header promises 10^12 values: numpy allocated them first."""
    import warnings
    import zipfile

    from harness import records

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    header = io.BytesIO()
    np_format = __import__("numpy").lib.format
    np_format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)}
    )
    with zipfile.ZipFile(run_dir / "population.npz", "w") as npz:
        npz.writestr("fitness.npy", b"\x93NUMPY\x01\x00" + header.getvalue()[8:] + bytes(64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert records.read_population(run_dir) is None
    assert "promises 8,000,000,000,000 bytes" in str(caught[0].message)


def test_sigterm_while_unpacking_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """Killed (SIGTERM) while it unpacked, `report` left up to 208 MB in the temp folder."""
    files = _run_files()
    archive = tmp_path / "big.tar.xz"
    pieces: list[tuple[bytes, int]] = []
    for name, data in files.items():
        pieces.append((_tar_member(name, len(data)) + data + b"\0" * (-len(data) % 512), 1))
    for k in range(3):
        pieces.append((_tar_member(f"runs/1/big{k}.json", 100 * 2**20), 1))
        pieces.append((b"\0" * 2**20, 100))
    pieces.append((b"\0" * 1024, 1))
    _xz_stream(archive, pieces)
    temp = tmp_path / "tmp"
    temp.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "report", str(archive), "--out", str(tmp_path / "o")],
        cwd=ROOT,
        env=_env(TMPDIR=str(temp)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(temp.glob("harness-archive-*/.staging/runs/1/big*.json")):
        assert child.poll() is None and time.monotonic() < deadline, "never unpacked"
        time.sleep(0.002)
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr
    assert child.returncode in (-signal.SIGTERM, 130), (child.returncode, stderr)
    assert list(temp.iterdir()) == []
