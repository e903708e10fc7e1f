"""Reading a run's trained policy never executes anything from the run directory.

A run directory may come from someone else. SB3's ``model.zip`` holds cloudpickled
entries (``policy_class``) and ``vecnormalize.pkl`` is a pickle: a planted pickle in
either would run code the moment it is unpickled. These tests plant such pickles (each
would create a marker file) in real runs and read them with every command that replays
a policy (``harness report``, ``harness enjoy``, ``harness.load_policy``): the marker
never appears, and the policy is rebuilt from data (JSON and ``.npy``) or refused in one
line. Damaged policy files (a truncated or huge-shaped ``final_params.npy``, a broken
``obs_norm.json``) end ``enjoy`` with one line and exit 2, and the report skips that
run with one warning line.

Two real runs are trained once per module (PPO with ``VecNormalize``, so both pickles
exist, and OptimES, whose policy uses ``obs_norm.json``); each test works on copies.
"""

from __future__ import annotations

import base64
import io
import json
import pathlib
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import harness
from harness import cli
from harness.policy_io import PolicyLoadError, read_npy
from tests.conftest import harness_cli, only_run_dir

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

ENV = "Pendulum"
COMMON = ["--env", ENV, "--seed", "5", "--no-progress", "--set", "eval_episodes=1"]
COMMON += ["--set", "max_episode_steps=40", "--set", "eval_every_timesteps=128"]
PPO_KNOBS = ["n_envs=1", "n_steps=128", "batch_size=64", "n_epochs=1", "normalize=true"]


class Bait:
    """Unpickled, creates ``path``: what a planted pickle could do with any code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[pathlib.Path]]:
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def bait(path: Path) -> bytes:
    return pickle.dumps(Bait(path))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real PPO run (VecNormalize) and one real OptimES run on Pendulum."""
    root = tmp_path_factory.mktemp("trust")
    ppo_sets = [arg for knob in PPO_KNOBS for arg in ("--set", knob)]
    harness_cli(
        "run", "--algo", "ppo", "--timesteps", "256", "--runs-dir", str(root / "ppo"),
        *COMMON, *ppo_sets,
    )  # fmt: skip
    harness_cli(
        "run", "--algo", "optimes", "--generations", "2", "--backend", "inline",
        "--runs-dir", str(root / "es"), *COMMON, "--set", "population=4",
    )  # fmt: skip
    return {"ppo": only_run_dir(root / "ppo"), "es": only_run_dir(root / "es")}


def _copy(run_dir: Path, runs: Path, name: str = "1") -> Path:
    runs.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(run_dir, runs / name))


def _plant(run_dir: Path, marker: Path) -> None:
    """A pickle that creates ``marker`` as model.zip's ``policy_class`` and as vecnormalize.pkl."""
    model = run_dir / "model.zip"
    with zipfile.ZipFile(model) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    data["policy_class"][":serialized:"] = base64.b64encode(bait(marker)).decode()
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    (run_dir / "vecnormalize.pkl").write_bytes(bait(marker))


def _as_earlier_version(run_dir: Path) -> None:
    """The run as an earlier version stored it: no policy_kwargs/spaces, no vec_normalize.json."""
    spec_path = run_dir / "policy_spec.json"
    spec = json.loads(spec_path.read_text())
    for key in ("policy_kwargs", "spaces", "vec_normalize_stats"):
        spec.pop(key, None)
    spec_path.write_text(json.dumps(spec))
    (run_dir / "vec_normalize.json").unlink()


def _enjoy(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["enjoy", str(run_dir), "--episodes", "1"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _report(runs: Path, out: Path) -> tuple[str, list[str]]:
    """The report's markdown and its stderr's warning lines."""
    completed = harness_cli("report", str(runs), "--out", str(out))
    warnings = [line for line in completed.stderr.splitlines() if "warning" in line]
    return (out / "report.md").read_text(), warnings


def test_the_bait_is_live(tmp_path: Path) -> None:
    """Unpickling the planted bytes does create the marker: the tests below would see it."""
    marker = tmp_path / "MARKER"
    pickle.loads(bait(marker))  # the point: this is what reading must never do
    assert marker.exists()


def test_planted_pickles_never_run_and_the_policy_replays_from_data(
    trained: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "MARKER"
    runs = tmp_path / "runs"
    run_dir = _copy(trained["ppo"], runs)
    _plant(run_dir, marker)
    spec = json.loads((run_dir / "policy_spec.json").read_text())
    assert spec["policy"] == "ActorCriticPolicy" and spec["vec_normalize_stats"]

    policy = harness.load_policy(run_dir)
    assert np.asarray(policy(np.zeros(3, dtype=np.float32))).shape == (1,)
    code, out, err = _enjoy(run_dir, capsys)
    assert code == 0, err
    assert "difference +0)" in out  # the run's own evaluation, replayed exactly
    markdown, warnings = _report(runs, tmp_path / "report")
    assert warnings == []
    assert "frames_pendulum.png" in markdown
    assert not marker.exists()


def test_a_run_of_an_earlier_version_is_rebuilt_from_its_config(
    trained: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without policy_kwargs, spaces: rebuilt from config.json; the same actions."""
    run_dir = _copy(trained["ppo"], tmp_path / "runs")
    spec_path = run_dir / "policy_spec.json"
    spec = json.loads(spec_path.read_text())
    spec.pop("policy_kwargs")
    spec.pop("spaces")
    spec_path.write_text(json.dumps(spec))
    _plant(run_dir, tmp_path / "MARKER")
    code, out, err = _enjoy(run_dir, capsys)
    assert code == 0, err
    assert "difference +0)" in out
    assert not (tmp_path / "MARKER").exists()


def test_vecnormalize_kept_only_as_a_pickle_is_refused_in_one_line(
    trained: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "MARKER"
    runs = tmp_path / "runs"
    run_dir = _copy(trained["ppo"], runs)
    _as_earlier_version(run_dir)
    _plant(run_dir, marker)

    with pytest.raises(PolicyLoadError, match=r"vecnormalize\.pkl") as raised:
        harness.load_policy(run_dir)
    assert str(run_dir) in str(raised.value) and "\n" not in str(raised.value)
    code, _out, err = _enjoy(run_dir, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "vecnormalize.pkl" in lines[0], err
    _markdown, warnings = _report(runs, tmp_path / "report")
    assert len(warnings) == 1 and str(run_dir) in warnings[0], warnings
    assert not marker.exists()


def test_a_spec_naming_a_class_outside_the_closed_list_is_refused(
    trained: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = _copy(trained["ppo"], tmp_path / "runs")
    spec_path = run_dir / "policy_spec.json"
    spec = json.loads(spec_path.read_text())
    for field, value in (
        ("policy", "os.system"),
        ("policy_kwargs", {**spec["policy_kwargs"], "activation_fn": "builtins.exec"}),
        ("policy_kwargs", {**spec["policy_kwargs"], "features_extractor_class": "NatureCNN"}),
    ):
        spec_path.write_text(json.dumps({**spec, field: value}))
        with pytest.raises(PolicyLoadError) as raised:
            harness.load_policy(run_dir)
        assert "policy_spec.json" in str(raised.value) and "\n" not in str(raised.value)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-8])


def _huge_header(path: Path) -> None:
    """A header promising 10^12 float32 values over the file's few bytes."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**12,)}
    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(b"\0" * 64)


def _object_array(path: Path) -> None:
    """An object array: loading it with allow_pickle would unpickle a Bait."""
    marker = path.parents[2] / "MARKER"  # the test's tmp_path
    np.save(path, np.array([Bait(marker), 1.0], dtype=object), allow_pickle=True)


def _broken_json(path: Path) -> None:
    path.write_text('{"mean": [0.0, ')


def _wrong_stats(path: Path) -> None:
    path.write_text(json.dumps({"mean": "high", "std": [1.0]}))


def _not_a_mapping(path: Path) -> None:
    path.write_text(json.dumps([1, 2, 3]))


DAMAGE = {
    "truncated": ("final_params.npy", _truncate),
    "huge-header": ("final_params.npy", _huge_header),
    "object-array": ("final_params.npy", _object_array),
    "broken-json": ("obs_norm.json", _broken_json),
    "wrong-stats": ("obs_norm.json", _wrong_stats),
    "not-a-mapping": ("obs_norm.json", _not_a_mapping),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("algo", ["es", "ppo"])
def test_a_damaged_policy_is_one_line_from_enjoy_and_load_policy(
    algo: str,
    damage: str,
    trained: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, spoil = DAMAGE[damage]
    if algo == "ppo" and name == "obs_norm.json":
        name = "vec_normalize.json"
    run_dir = _copy(trained[algo], tmp_path / "runs")
    spoil(run_dir / name)
    with pytest.raises(PolicyLoadError) as raised:
        harness.load_policy(run_dir)
    message = str(raised.value)
    assert name in message and "\n" not in message, message
    code, _out, err = _enjoy(run_dir, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and name in lines[0], err
    assert not (tmp_path / "MARKER").exists()


def test_the_report_skips_a_damaged_run_with_one_warning(
    trained: dict[str, Path], tmp_path: Path
) -> None:
    """Two good runs and one damaged one: the figures are drawn, one warning names it."""
    runs = tmp_path / "runs"
    _copy(trained["es"], runs, "1")
    _copy(trained["ppo"], runs, "2")
    bad = _copy(trained["es"], runs, "3")
    _truncate(bad / "final_params.npy")
    markdown, warnings = _report(runs, tmp_path / "report")
    assert len(warnings) == 1, warnings
    assert str(bad) in warnings[0] and "final_params.npy" in warnings[0]
    assert "frames_pendulum.png" in markdown and "diversity_pendulum.png" in markdown


def test_read_npy_checks_the_header_before_allocating(tmp_path: Path) -> None:
    path = tmp_path / "params.npy"
    np.save(path, np.arange(6, dtype=np.float32))
    assert read_npy(path, 6).tolist() == list(range(6))
    with pytest.raises(PolicyLoadError, match="is not \\(5,\\)"):
        read_npy(path, 5)
    _huge_header(path)
    with pytest.raises(PolicyLoadError, match="truncated"):
        read_npy(path)
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((2, 3), dtype=np.float64))
    path.write_bytes(buffer.getvalue())
    with pytest.raises(PolicyLoadError, match="shape"):
        read_npy(path, 6)
    assert read_npy(path).shape == (6,)
