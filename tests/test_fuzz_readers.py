"""Fuzzing what the harness reads from files others made: sweep files, run directories,
run archives and stored policy specs.

Every input must end in a result or in one of the harness's own one-line errors
(:class:`~harness.sweep.spec.SweepError`, :class:`~harness.config.ConfigError`,
:class:`~harness.rundir.UnreadableRun`, :class:`~harness.policy_io.PolicyLoadError`),
never in another exception: a traceback on a damaged or hostile file is a bug.

Slow on purpose (``slow`` marker): each property runs a few hundred generated inputs, and
a sweep file is validated by building every cell's config as ``harness run`` does; the
settings below keep the whole file under a minute. Nothing generated names a real module
to import (a sweep's ``imports``), so fuzzing never runs outside code.
"""

from __future__ import annotations

import io
import json
import lzma
import shutil
import tarfile
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import rundir
from harness.config import ConfigError
from harness.sweep.spec import SweepError, load_sweep

# Slow: thousands of generated inputs per reader; the fast suite keeps one test per known
# hostile file (tests/test_trust_*.py).
pytestmark = pytest.mark.slow

#: Bounded: under a minute for the whole file on a loaded 2-core machine.
FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,  # the same inputs on every run: a failure reproduces
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- values a file may hold ----------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "auto", "CartPole", "optimes", "ppo", "~", "null", "1e30", "x" * 50]),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _json_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


# -- sweep files -----------------------------------------------------------------------------

GRID_VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.lists(st.sampled_from(["optimes", "cma", "ppo", "CartPole", "Pendulum"]), max_size=3),
)
SWEEP_DATA = st.fixed_dictionaries(
    {
        "name": st.one_of(st.sampled_from(["fuzz", "a.b-c_1"]), SCALARS),
        "grid": st.one_of(
            SCALARS,
            st.dictionaries(
                st.sampled_from(
                    [
                        *("algo", "env", "seed", "workers", "episodes", "sigma", "population"),
                        *("lr", "policy.kind", "timesteps", "bogus"),
                    ]
                ),
                GRID_VALUES,
                max_size=5,
            ),
        ),
    },
    optional={
        "budget": st.one_of(
            SCALARS, st.dictionaries(st.sampled_from(["timesteps", "generations", "x"]), SCALARS)
        ),
        "set": st.one_of(
            SCALARS,
            st.lists(
                st.one_of(
                    st.sampled_from(["sigma=", "sigma=null", "population=~", "lr=0.1", "=", "a"]),
                    st.text(max_size=15),
                ),
                max_size=3,
            ),
        ),
        "jobs": SCALARS,
        "backend": SCALARS,
        "imports": st.sampled_from([None, [], "no_such_module_fuzz", ["no_such_module_fuzz"], 3]),
        "overrides": st.one_of(SCALARS, st.dictionaries(st.text(max_size=8), GRID_VALUES)),
        "description": SCALARS,
    },
)


#: Sweep files that pass the first checks (a name, an algo and an env that exist), so the
#: generated values reach the cells' configs.
NEAR_VALID_SWEEP = st.fixed_dictionaries(
    {
        "name": st.just("fuzz"),
        "grid": st.fixed_dictionaries(
            {
                "algo": st.sampled_from([["optimes"], ["cma"], ["ppo"], ["optimes", "ppo"]]),
                "env": st.just(["CartPole"]),
            },
            optional={
                key: st.one_of(st.lists(st.integers(-1, 4), min_size=1, max_size=2), GRID_VALUES)
                for key in ("seed", "workers", "episodes", "sigma", "population", "lr")
            },
        ),
        "budget": st.dictionaries(
            st.sampled_from(["timesteps", "generations", "time_limit", "cpu_limit"]),
            SCALARS,
            min_size=1,
            max_size=2,
        ),
    },
    optional={
        "set": st.lists(
            st.builds(
                "{}={}".format,
                st.sampled_from(["sigma", "population", "lr", "workers", "policy.kind", "x"]),
                st.one_of(SCALARS.map(str), st.text(max_size=6)),
            ),
            max_size=3,
        ),
        "backend": SCALARS,
        "jobs": SCALARS,
    },
)


def _load_sweep_text(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sweep.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_sweep(path, max_cells=20)
        except (SweepError, ConfigError) as error:
            assert "\n" not in str(error), repr(str(error))


@FUZZ
@given(SWEEP_DATA)
def test_sweep_files_built_from_keys(data: dict[str, Any]) -> None:
    _load_sweep_text(json.dumps(data, allow_nan=True))  # JSON is YAML


@FUZZ
@given(NEAR_VALID_SWEEP)
def test_sweep_files_near_valid(data: dict[str, Any]) -> None:
    _load_sweep_text(json.dumps(data, allow_nan=True))


@FUZZ
@given(st.text(max_size=200))
def test_sweep_files_of_any_text(text: str) -> None:
    _load_sweep_text(text)


# -- run directories -------------------------------------------------------------------------

#: JSON nested past the parser's stack (json.loads raises RecursionError).
DEEP = b'{"a": ' * 2000
FLAT_CONTENT = st.one_of(
    JSON_VALUES.map(_json_text).map(str.encode),
    st.binary(max_size=64),
    st.none(),  # the file is missing
)
FILE_CONTENT = st.one_of(FLAT_CONTENT, st.just(DEEP))
METRICS = st.one_of(
    FILE_CONTENT,
    st.dictionaries(
        st.sampled_from(["timesteps", "eval_return_mean", "bytes_to_workers", "x"]),
        st.one_of(
            JSON_VALUES,
            st.fixed_dictionaries(
                {
                    "steps": st.lists(st.one_of(st.integers(-3, 5), SCALARS), max_size=4),
                    "values": st.lists(SCALARS, max_size=4),
                    "timestamps": st.lists(SCALARS, max_size=4),
                }
            ),
        ),
        max_size=3,
    )
    .map(_json_text)
    .map(str.encode),
)
RUN_ENTRY = st.one_of(
    FILE_CONTENT,
    st.fixed_dictionaries(
        {"status": st.one_of(st.sampled_from(rundir.STATUSES), SCALARS)},
        optional={"heartbeat": SCALARS, "start_time": SCALARS, "resumed": JSON_VALUES},
    )
    .map(_json_text)
    .map(str.encode),
)


def _write_run(folder: Path, files: dict[str, bytes | None]) -> Path:
    run_dir = folder / "runs" / "1"
    run_dir.mkdir(parents=True)
    for name, content in files.items():
        if content is not None:
            (run_dir / name).write_bytes(content)
    return run_dir


@FUZZ
@given(config=FILE_CONTENT, run=RUN_ENTRY, metrics=METRICS, summary=FILE_CONTENT)
def test_run_directory_readers(
    config: bytes | None, run: bytes | None, metrics: bytes | None, summary: bytes | None
) -> None:
    from harness.records import RunDirWarning, load_runs

    with tempfile.TemporaryDirectory() as folder:
        files = {"config.json": config, "run.json": run, "metrics.json": metrics}
        run_dir = _write_run(Path(folder), {**files, "summary.json": summary})
        for read in (rundir.read_run, rundir.read_header, rundir.read_metrics):
            try:
                read(run_dir)
            except rundir.UnreadableRun as error:
                assert "\n" not in str(error), repr(str(error))
        for name in ("summary.json", "config.json"):
            try:
                rundir.read_json(run_dir / name)
            except rundir.UnreadableRun as error:
                assert "\n" not in str(error)
        rundir.read_status(run_dir)
        rundir.scan_runs(run_dir.parent)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RunDirWarning)
            load_runs([run_dir.parent])


# -- run archives ----------------------------------------------------------------------------


def _small_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (
            ("runs/1/config.json", b'{"algo": "optimes", "env": "CartPole"}'),
            ("runs/1/run.json", b'{"status": "COMPLETED"}'),
            ("runs/1/metrics.json", b"{}"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(buffer.getvalue(), preset=0)


ARCHIVE = _small_archive()


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.tuples(st.integers(0, len(ARCHIVE) - 1), st.integers(0, 255)), min_size=1, max_size=4
        ).map(lambda edits: _edited(ARCHIVE, edits)),
        st.integers(0, len(ARCHIVE)).map(lambda n: ARCHIVE[:n]),
    )
)
def test_run_archives_of_any_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.tar.xz"
        path.write_bytes(data)
        try:
            rundir.run_dirs(rundir.extract_run_archive(path))
        except rundir.UnreadableRun as error:
            assert "\n" not in str(error), repr(str(error))


def _edited(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    changed = bytearray(data)
    for offset, value in edits:
        changed[offset] = value
    return bytes(changed)


# -- stored policy specs ---------------------------------------------------------------------

SPEC = st.one_of(
    FLAT_CONTENT,  # DEEP: see test_a_stored_policy_spec_nested_too_deeply
    st.fixed_dictionaries(
        {},
        optional={
            "kind": st.one_of(st.sampled_from(["linear", "mlp", "lstm"]), SCALARS),
            "obs_dim": st.one_of(st.integers(-2, 6), SCALARS),
            "act_dim": st.one_of(st.integers(-2, 6), SCALARS),
            "hidden_sizes": st.one_of(st.lists(st.integers(-1, 4), max_size=2), SCALARS),
            "discrete": SCALARS,
            "format": st.one_of(st.just("sb3"), SCALARS),
            "bogus": SCALARS,
        },
    )
    .map(_json_text)
    .map(str.encode),
)


@FUZZ
@given(spec=SPEC, params=st.integers(0, 8))
def test_stored_policy_specs(spec: bytes | None, params: int) -> None:
    from harness.policy_io import PolicyLoadError, load_stored

    with tempfile.TemporaryDirectory() as folder:
        run_dir = _write_run(Path(folder), {"policy_spec.json": spec})
        np.save(run_dir / "final_params.npy", np.zeros(params, dtype=np.float32))
        try:
            act, _ = load_stored(run_dir)
        except PolicyLoadError as error:
            assert "\n" not in str(error), repr(str(error))
        else:
            assert callable(act)


@pytest.mark.parametrize("deep", [DEEP, b"[" * 100_000 + b"]" * 100_000])
def test_a_stored_policy_spec_nested_too_deeply(deep: bytes) -> None:
    from harness.policy_io import PolicyLoadError, has_policy, load_stored

    with tempfile.TemporaryDirectory() as folder:
        run_dir = _write_run(Path(folder), {"policy_spec.json": deep})
        np.save(run_dir / "final_params.npy", np.zeros(2, dtype=np.float32))
        with pytest.raises(PolicyLoadError, match=r"policy_spec\.json") as raised:
            load_stored(run_dir)
        assert "\n" not in str(raised.value)
        assert not has_policy(run_dir)


def test_a_stored_policy_spec_over_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """policy_spec.json is read within HARNESS_JSON_MAX_BYTES, as the run's other JSON."""
    from harness.policy_io import PolicyLoadError, has_policy, load_stored

    monkeypatch.setenv("HARNESS_JSON_MAX_BYTES", "1000")
    with tempfile.TemporaryDirectory() as folder:
        run_dir = _write_run(Path(folder), {"policy_spec.json": b" " * 2000 + b"{}"})
        np.save(run_dir / "final_params.npy", np.zeros(2, dtype=np.float32))
        with pytest.raises(PolicyLoadError, match="HARNESS_JSON_MAX_BYTES"):
            load_stored(run_dir)
        assert not has_policy(run_dir)


# -- every field of a real run, replaced in turn ----------------------------------------------

#: Files of a run directory whose every field is replaced in turn.
RUN_FILES = (
    rundir.CONFIG,
    rundir.RUN,
    rundir.METRICS,
    rundir.SUMMARY,
    rundir.POLICY_SPEC,
)
#: Where a value nested past the JSON parser's stack goes (written into the text).
DEEP_MARK = "__deep_nesting__"
DEEP_TEXT = "[" * 3000 + "]" * 3000
HOSTILE: tuple[Any, ...] = (None, "x", -1, 0, 1e300, "nan", [], {}, DEEP_MARK, 2**70)


def _key_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON value: each mapping key, recursively, and the first element
    of each list (the list itself is a path of its parent)."""
    paths: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            paths.append((*prefix, key))
            paths += _key_paths(inner, (*prefix, key))
    elif isinstance(value, list) and value:
        paths.append((*prefix, 0))
        paths += _key_paths(value[0], (*prefix, 0))
    return paths


def _replaced(data: Any, path: tuple[Any, ...], value: Any) -> str:
    """``data`` as JSON text with the field at ``path`` replaced by ``value``."""
    import copy

    changed = copy.deepcopy(data)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(changed, allow_nan=True).replace(json.dumps(DEEP_MARK), DEEP_TEXT)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real finished run: optimes on CartPole, one generation, every file it writes."""
    from tests.conftest import harness_cli

    runs = tmp_path_factory.mktemp("real") / "runs"
    harness_cli(
        *("run", "--algo", "optimes", "--env", "CartPole", "--generations", "1"),
        *("--backend", "inline", "--workers", "1", "--runs-dir", str(runs), "--no-progress"),
    )
    run_dir = runs / "1"
    for name in RUN_FILES:
        assert (run_dir / name).is_file(), name
    return run_dir


#: Metrics whose inner fields (steps, values, timestamps and their first elements) are
#: replaced too: every metric is one shape, so each other metric is replaced whole.
INNER_METRICS = ("timesteps", "eval_return_mean", "wall_time_s", "episodes", "fitness_mean")
#: Runs per ``harness report`` of the fuzzer (those its record check accepts; one per field).
REPORT_RUNS = 24


def _mutations(run_dir: Path) -> list[tuple[str, tuple[Any, ...], Any, str]]:
    """(file, key path, hostile value, the file's text) for every field and value."""
    found = []
    for name in RUN_FILES:
        data = json.loads((run_dir / name).read_text())
        for path in _key_paths(data):
            if name == rundir.METRICS and len(path) > 1 and path[0] not in INNER_METRICS:
                continue
            for value in HOSTILE:
                found.append((name, path, value, _replaced(data, path, value)))
    return found


def _accepted(run_dir: Path) -> bool:
    """Whether the report's record check reads this run (else it skips it, one warning)."""
    from harness.record_check import check_record

    try:
        check_record(rundir.read_run(run_dir))
    except rundir.UnreadableRun as error:
        assert "\n" not in str(error), repr(str(error))
        return False
    return True


def _mutated_run(real_run: Path, at: Path, name: str, text: str) -> Path:
    shutil.copytree(real_run, at, ignore=shutil.ignore_patterns("checkpoint.pkl", "cout.txt"))
    (at / name).write_text(text)
    return at


def _main(argv: list[str]) -> tuple[int, str]:
    """``harness ARGV`` in this process (the function the console script calls): exit
    status and stderr; an exception other than SystemExit fails the test."""
    import contextlib

    from harness.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_:  # argparse
            status = int(exit_.code or 0)
    return status, err.getvalue()


def heard(reasons: list[str]) -> Any:
    """An ``on_damaged`` callback that keeps each reason in ``reasons``."""
    return lambda _path, reason: reasons.append(reason)


def _assert_result_or_one_line(status: int, stderr: str, what: str) -> None:
    assert "Traceback" not in stderr, (what, stderr)
    assert status in (0, 2), (what, status, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == (1 if status == 2 else 0), (what, stderr)


def test_every_field_of_a_real_run_replaced_in_turn(real_run: Path, tmp_path: Path) -> None:
    """Every field (every key path) of config, run, metrics, summary and policy spec, given
    each hostile value in turn: the sweep's reader of done cells, ``harness enjoy
    --episodes 1`` and ``harness report`` end in a result or one ``harness: error:`` line.

    Bounded (about a minute): the sweep's reader and ``enjoy`` read every mutation (most
    end at the record check, the rest play one CartPole episode). The report's record check
    reads every mutation too (a run it refuses is skipped with one warning, as
    ``tests/test_trust_errors.py`` shows end to end); of those it accepts, the first value
    of each field goes into one runs folder per file, at most :data:`REPORT_RUNS` spread
    over the fields, and ``harness report`` draws each folder whole.
    """
    from harness.sweep.spec import Cell
    from harness.sweep.store import completed_runs, find_completed

    config = json.loads((real_run / rundir.CONFIG).read_text())
    cell = Cell(index=0, config=config, varied={})
    mutations = _mutations(real_run)
    assert len(mutations) > 1000  # every field of five files, ten values each
    accepted: dict[str, dict[tuple[Any, ...], Path]] = {}
    scratch, kept = tmp_path / "scratch", tmp_path / "kept"
    kept.mkdir()
    for index, (name, path, value, text) in enumerate(mutations, start=1):
        what = f"{name} {list(path)} = {value!r}"[:200]
        run_dir = _mutated_run(real_run, scratch / "1", name, text)
        reasons: list[str] = []
        try:
            find_completed(cell, completed_runs(scratch, heard(reasons)), heard(reasons))
        except Exception as error:  # the reader must not raise
            raise AssertionError(f"sweep reader on {what}: {error!r}") from error
        assert all("\n" not in reason for reason in reasons), (what, reasons)
        status, stderr = _main(["enjoy", str(run_dir), "--episodes", "1"])
        _assert_result_or_one_line(status, stderr, f"enjoy on {what}")
        fields = accepted.setdefault(name, {})
        if path not in fields and _accepted(run_dir):
            fields[path] = run_dir.rename(kept / str(index))
        else:
            shutil.rmtree(run_dir)
    for name, fields in accepted.items():
        chosen = list(fields.values())
        step = max(1, -(-len(chosen) // REPORT_RUNS))
        runs = tmp_path / name.removesuffix(".json")
        runs.mkdir()
        for run_dir in chosen[::step]:
            run_dir.rename(runs / run_dir.name)
        status, stderr = _main(["report", str(runs), "--out", str(tmp_path / f"report-{name}")])
        _assert_result_or_one_line(status, stderr, f"report of {name} mutations")
