# Each target sets up .venv by itself. The install step reruns only when
# pyproject.toml is newer than the stamp it left, so a second run starts at once.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
DIR    ?= plugins

.PHONY: watch test lint bench clean

watch: $(VENV)/.stamp-run
	$(BIN)/agenthost watch $(DIR)

test: lint
	$(BIN)/pytest -n auto --maxprocesses 4  # a worker per core: most tests wait on processes

lint: $(VENV)/.stamp-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict agenthost

bench: $(VENV)/.stamp-bench
	$(BIN)/python -m benchmarks $(BENCH)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist *.egg-info

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.stamp-run: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[mcp]'  # `serve` is how most people use the tools: it works after `make watch`
	touch $@

$(VENV)/.stamp-dev: pyproject.toml constraints-dev.txt | $(BIN)/python
	$(PIP) -c constraints-dev.txt -e '.[dev,otel]'
	touch $@

$(VENV)/.stamp-bench: pyproject.toml constraints-dev.txt | $(BIN)/python
	$(PIP) -c constraints-dev.txt -e '.[dev,otel,bench]'
	touch $@
