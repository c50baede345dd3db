# Two entry points, both safe on a fresh machine: `make release` and `make test`.
# The virtualenv is built once; torch is installed first so pip takes the local CPU wheel
# instead of pulling CUDA packages.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.privfair-installed

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

.PHONY: install release test test-slow lint bench docs
install: $(STAMP)

release: $(STAMP)
	$(BIN)/privfair release --contract data_contracts/adult.yaml --epsilon 1 --delta 1e-9 \
		--method prefair-greedy --out releases

# The fast suite on one worker per core (at most 4: each worker starts its own Prefect
# harness); the tests share no files, ports or registries (tests/conftest.py).
test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	PREFECT_HOME=$$(mktemp -d) $(BIN)/python -m pytest -n auto --maxprocesses 4

# The tests marked slow (deselected by `make test`): a real Prefect server and deployment,
# the browser test of the reports, the whole --quick reproduction, full-power audits.
test-slow: $(STAMP)
	PREFECT_HOME=$$(mktemp -d) $(BIN)/python -m pytest -m slow

lint: $(STAMP)
	$(BIN)/ruff check privfair tasks flows tests benchmarks
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

# The docs site (docs/, mkdocs.yml) into site/; any warning (a broken link, a page missing
# from the nav, a docstring griffe cannot read) fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_adult.py --out benchmarks/results/engine_adult.json
