# memsleuth: `make demo` and `make test` do their own set-up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ALLOCATOR_PACKAGES := libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 libtbbmalloc2
# The HTML report's tests open it in a real browser; the fleet's start a one-machine Slurm cluster;
# the PostgreSQL store's a throw-away cluster (pg_virtualenv).
TEST_PACKAGES := chromium slurm-wlm munge postgresql postgresql-common nodejs default-jdk-headless golang-go
# GNU time: bench/peer_agreement.py times programs the way mimalloc-bench does.
BUILD_PACKAGES := cmake gcc g++ make python3-venv linux-perf gzip time llvm
# The real applications of `compare --suite apps` (src/memsleuth/measure/apps: apps.PACKAGES).
APP_PACKAGES := redis-server redis-tools sqlite3 lua5.4 xz-utils zstd diffutils binutils
SOURCES := $(shell find src native -type f -not -name '*.pyc') CMakeLists.txt pyproject.toml
TEST_BUILD := build/test

.PHONY: all setup system-packages test-packages demo test test-native test-python test-unit lint format bench clean

all: setup

# Debian packages: installed when root, otherwise reported.
# $(call apt_install,PACKAGES,what happens without them)
define apt_install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "set-up: apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
	  echo "set-up: not root, so not installing: $$missing ($(2))"; \
	fi
endef

system-packages:
	$(call apt_install,$(ALLOCATOR_PACKAGES) $(BUILD_PACKAGES) $(APP_PACKAGES),memsleuth will use what is installed)

# What only the tests need (a browser for the HTML report); without it those tests skip.
test-packages:
	$(call apt_install,$(TEST_PACKAGES),the tests that need it skip with the reason)

$(VENV)/.deps: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "scikit-build-core>=0.8" "rich>=13" "numpy>=1.24" "regex>=2023.0" "scipy>=1.10" "pyperf>=2.6" "jinja2>=3.1" "matplotlib>=3.7" "protobuf>=4.21" "psycopg[binary]>=3.1" "pytest>=7" "pytest-xdist>=3.5" "hypothesis>=6" "ruff>=0.4" "clang-format==18.1.8"
	touch $@

# The package with its native binaries, built by CMake through scikit-build-core.
$(VENV)/.installed: $(VENV)/.deps $(SOURCES)
	$(PY) -m pip install -q --no-build-isolation .
	touch $@

setup: system-packages $(VENV)/.installed

demo: setup
	$(VENV)/bin/memsleuth compare

$(TEST_BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(TEST_BUILD) -DMEMSLEUTH_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null

test-native: setup $(TEST_BUILD)/Makefile
	cmake --build $(TEST_BUILD) -j2 >/dev/null
	cd $(TEST_BUILD) && ctest --output-on-failure

# The unit tests: rules, statistics, cost split and report builders on stored evidence; no
# process, no native build, no install (they read src/ directly). What to run while working.
test-unit: $(VENV)/.deps
	PYTHONPATH=src $(PY) -m pytest -q -p no:cacheprovider tests/unit

# The linter and format the code keeps: Python by ruff (pyproject.toml [tool.ruff]: pyflakes,
# pycodestyle, 125 columns), C and C++ by clang-format (.clang-format: Google, 120 columns).
NATIVE_SOURCES = $(shell git ls-files 'native/*.c' 'native/*.h' 'native/*.cc' 2>/dev/null || find native -name '*.[ch]' -o -name '*.cc')
lint: $(VENV)/.deps
	$(VENV)/bin/ruff check src tests bench
	@echo "clang-format --dry-run --Werror: $(words $(NATIVE_SOURCES)) files of native/"
	@$(VENV)/bin/clang-format --dry-run --Werror $(NATIVE_SOURCES)

# Rewrites native/ in the format `make lint` checks.
format: $(VENV)/.deps
	$(VENV)/bin/clang-format -i $(NATIVE_SOURCES)

# Two pytest workers, a test file each at a time (a file's module fixtures, its Slurm cluster and its
# runtimes' perf maps stay in one process): most tests run one program on one core at a time, so
# the suite took 20 min 41 s in one process and 11 min 14 s in two here (2 vCPUs, 2026-11-27).
# TEST_JOBS=1: one test at a time; TEST_JOBS=0: in pytest's own process.
TEST_JOBS ?= 2
# speedscope's release, for the test that opens a --speedscope file in it (npm registry, digest checked)
$(TEST_BUILD)/speedscope/index.html:
	@$(PYTHON) tests/e2e/fetch_speedscope.py $(TEST_BUILD)/speedscope

test-python: setup test-packages test-native lint $(TEST_BUILD)/speedscope/index.html
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile tests/unit tests/e2e

test: test-native test-python

bench: setup test-native
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/overhead.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/syscall_distortion.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/harness_cost.py
	$(PY) bench/reproducibility.py
	$(PY) bench/first_touch_vs_perf.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/where_overhead.py
	$(PY) bench/latency_cost.py
	$(PY) bench/peer_agreement.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/gate_power.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/check_cost.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/heap_cost.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/cost_vs_perf.py
	$(PY) bench/cli_start.py
	$(PY) bench/msrun_overhead.py
	$(PY) bench/msrun_tick_cost.py
	$(PY) bench/explain_per_process.py
	$(PY) bench/attach_overhead.py
	MEMSLEUTH_TEST_FIXTURES=$(TEST_BUILD) $(PY) bench/compare_under_load.py
	$(PY) bench/check_cost_languages.py --quick
	$(PY) bench/check_cost_apps.py --quick

clean:
	rm -rf build $(VENV) memsleuth.db memsleuth.db-wal memsleuth.db-shm
