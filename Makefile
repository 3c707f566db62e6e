# `make test` and `make demo` create or reuse .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo lint format install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q

# the edit loop: everything but the tests that train or time (marked slow)
test-fast: lint
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q -m "not slow"

demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/toolkit demo

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
