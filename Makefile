# es-harness: `make demo` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv demo reports test test-slow test-all lint type check-repro bench clean

venv: $(STAMP)

# torch is pinned to the CPU build that pip takes from local disk; never a CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel "setuptools<81"
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
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

test: venv
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# The longer end-to-end checks `make test` leaves out (4-worker determinism on process and
# Ray, a lost Ray cluster head, check-repro with confirmations, the UMAP map); CI runs them
# after `make test`: about 4 minutes on 2 busy cores.
test-slow: venv
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

test-all: venv
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: venv
	$(BIN)/mypy
	$(BIN)/mypy scripts

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
