# es-harness: `make demo` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Both cores: one pytest-xdist worker each; a test module stays on one worker (tests/conftest.py).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: venv demo reports test test-slow test-all lint type check-repro bench benchmark benchmark-report clean

venv: $(STAMP)

# torch is pinned to the CPU build that pip takes from local disk; never a CUDA build.
# The worked plugin (examples/plugin) is installed beside the harness: its tests drive it as
# a user's own package, found through its entry point. PYTHONWARNINGS=ignore: setuptools'
# notes on how editable installs work are not something a user of the harness can act on.
$(STAMP): pyproject.toml examples/plugin/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel "setuptools<81"
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[dev]"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e examples/plugin
	touch $(STAMP)

# The demo's runs and report go under runs/ (not tracked): a fresh clone stays clean.
# reports/demo is the same sweep's committed report, redrawn by `make reports`.
demo: venv
	$(BIN)/harness sweep experiments/demo.yaml --runs-dir runs/demo
	$(BIN)/harness report runs/demo --out runs/demo-report

# Redraw every committed report from its run archive (reports/*/runs.tar.xz) with the
# current code, then write reports/README.md; reports/index.yaml lists them.
reports: venv
	$(BIN)/python scripts/reports.py

# The benchmark (experiments/benchmark.yaml, docs/benchmark.md): run the missing cells (resumable;
# about 195 CPU-hours in all, see `harness benchmark plan`), then redraw BENCHMARK.md and
# reports/benchmark/. Cells completed in the committed archives are not run again, and the
# unfinished runs committed with them continue from their checkpoints (--adopt-unfinished:
# this clone's own files, as trusted as the code make runs). benchmark-report redraws the
# page from the committed archives alone.
BENCHMARK_RUNS ?= runs/benchmark
benchmark: venv
	$(BIN)/harness benchmark run --runs-dir $(BENCHMARK_RUNS) --adopt-unfinished
	$(BIN)/harness benchmark report --runs-dir $(BENCHMARK_RUNS)

benchmark-report: venv
	$(BIN)/harness benchmark report

test: venv
	$(BIN)/python -m pytest -m "not slow" $(XDIST) $(PYTEST_ARGS)

# The checks `make test` leaves out, each about 10 s or more on a slow 2-core machine (end-to-end
# user paths, Ray clusters, SBX and the heavier RL runs, trust attacks on trained runs, the
# reader fuzzer); CI runs them after `make test`: 26 minutes on the slowest machine met
# (docs/testing.md).
test-slow: venv
	$(BIN)/python -m pytest -m slow $(XDIST) $(PYTEST_ARGS)

test-all: venv
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: venv
	$(BIN)/mypy
	$(BIN)/mypy scripts

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
