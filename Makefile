# `make test` and `make demo` create or reuse .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
APT_GET := $(if $(filter 0,$(shell id -u)),apt-get,sudo apt-get)

.PHONY: test test-fast demo lint format install browser clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# what the browser tests (tests/test_ship_browser.py, tests/test_web_runtimes.py) need beyond
# .venv: Debian's chromium, and npm, which fetches the pinned web libraries once into the cache
# `toolkit ship` copies from and the web runtimes serve
browser: $(STAMP)
	@missing=""; test -x $(CHROMIUM) || missing="chromium"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		command -v apt-get >/dev/null || { echo "install$$missing (no apt-get here)"; exit 1; }; \
		$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq $$missing; \
	fi
	$(BIN)/python -c "from toolkit.runtimes.web.npm import PINNED, package_dir; \
		[package_dir(p) for p in PINNED]"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

PYTEST := CHROMIUM=$(CHROMIUM) TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q --durations=25
# two pytest-xdist workers, each test file on one (its module fixtures made once; the shared
# tiny runs once for both: tests/tiny_runs.py), the longest files first (tests/suite_order.py:
# xdist would order them by their count of tests). A third worker gained nothing measurable:
# the tests' own threads and processes already keep both cores busy
WORKERS ?= 2
parallel = $(PYTEST) -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "($(1)) and not serial"
# the quick tests: in the workers, then those marked serial (quick ones whose processes time
# out or are timed: conftest.py refuses a slow one) alone; both runs whatever the first gives
quick = { $(call parallel,not slow); first=$$?; $(PYTEST) -m serial && [ $$first = 0 ]; }

# the CPU seconds (user + system) of the processes the recipe's shell waited for, and of those
# they waited for (its /proc/PID/stat): beside the wall time it tells a slower machine from a
# bigger suite (processes nobody waits for and the kernel's work are left out: the machine was
# busy 9% longer than this counts over a measured slow part)
cpu_seconds = awk -v hz=$$(getconf CLK_TCK) '{printf "%d", ($$16 + $$17) / hz}' /proc/$$$$/stat \
	2>/dev/null || printf '?'

# the quick tests, then those that train or time (marked slow); prints each part's time
test: lint browser
	@start=$$(date +%s); failed=0; \
	$(quick) || failed=1; fast=$$(date +%s); \
	$(call parallel,slow) || failed=1; end=$$(date +%s); \
	echo "make test: fast part $$((fast - start)) s, slow part $$((end - fast)) s," \
		"whole run $$((end - start)) s, $$($(cpu_seconds)) CPU-s"; \
	exit $$failed

# the edit loop: everything but the tests that train or time (marked slow)
test-fast: lint
	@start=$$(date +%s); failed=0; \
	$(quick) || failed=1; \
	echo "make test-fast: $$(($$(date +%s) - start)) s, $$($(cpu_seconds)) CPU-s"; \
	exit $$failed

demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/toolkit demo

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
