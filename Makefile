# Two entry points for a newcomer: `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
XDIST_WORKERS ?= 2
SYSDEPS_STAMP := .cache/.system-deps
BUILDDEPS_STAMP := .cache/.build-deps-clang

.PHONY: demo test test-zoo test-tiers setup venv jars servers system-deps clean

venv: $(STAMP)

# Shell for a recipe that has set `missing` to the Debian packages it lacks: installs them, if any.
APT_INSTALL_MISSING = if [ -n "$$missing" ]; then \
	  echo "installing$$missing with apt-get" >&2; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# A C compiler and Python's headers for the optional C accelerators (accel/, a distribution of its
# own that the dev environment installs so that tests and benchmarks run with them), and clang for
# the suite's fuzz target (tests/fuzz: the accelerators built with libFuzzer's instrumentation).
$(BUILDDEPS_STAMP):
	@missing=""; command -v cc >/dev/null || missing="gcc libc6-dev"; \
	 command -v clang >/dev/null || missing="$$missing clang"; \
	 $(PYTHON) -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
	   || missing="$$missing python3-dev"; \
	 $(APT_INSTALL_MISSING)
	mkdir -p $(dir $@) && touch $@

# The lock pins every transitive dependency, so a fresh machine resolves nothing new.
# pyspark ships only as a source distribution. A registry that answers every revalidation "modified"
# (a proxy mirror does) makes uv download, unpack and build it again into a new cache revision on
# every fresh venv and leave the old ones behind (1–2 GB a time, 73 GB here before a CI run ran out of
# disk); pruning drops only such unreachable entries.
$(STAMP): pyproject.toml setup.py accel/pyproject.toml accel/setup.py $(wildcard accel/airflow_delta_maintenance_accel/*.c accel/airflow_delta_maintenance_accel/*.py) requirements/dev.lock | $(BUILDDEPS_STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q "uv==0.13.9"
	$(UV) pip install -q --compile-bytecode --python $(PY) -r requirements/dev.lock
	$(UV) pip install -q --python $(PY) --no-deps -e . -e accel
	$(UV) cache prune -q
	touch $@

# Maven Central jars for delta-spark, hadoop-aws and DynamoDB Local (.ci/maven/*.xml) into
# .cache/jars/. Always run: .ci/fetch-jars returns at once (no JVM, no network) for groups fetched
# for their current pom, and fetches a group again when its pom changed or its directory is gone.
# .ci/fetch-uc-server does the same for the runtime jars of the real Unity Catalog OSS servers
# (../shared/unity-catalog-server) into .cache/uc-server/.
jars:
	.ci/fetch-jars
	.ci/fetch-uc-server

# The object-store servers the storage tests start (MinIO and fake-gcs-server built by `go install`
# from the Go module proxy, Azurite from npm with its lock) into .cache/servers/. Always run:
# .ci/fetch-servers returns at once (no go, no npm, no network) for servers installed for their
# current line, and installs one again when its version, its lock or the script changed.
servers:
	.ci/fetch-servers

# Debian packages the UI and compose tests need: headless Chromium (driven by Playwright through
# executable_path, never `playwright install`) and a docker compose CLI for `compose config`.
system-deps: $(SYSDEPS_STAMP)

$(SYSDEPS_STAMP): | $(BUILDDEPS_STAMP)  # after it: two apt-get runs at once would fight over dpkg's lock
	@missing=""; command -v chromium >/dev/null || missing="$$missing chromium"; \
	 (docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null) || missing="$$missing docker-compose"; \
	 $(APT_INSTALL_MISSING)
	mkdir -p $(dir $@) && touch $@

demo: $(STAMP)
	$(VENV)/bin/python -m airflow_delta_maintenance.demo

# The whole suite (`pytest` without arguments runs only the fast tier: tests/_infra/tiers.py), with the
# accelerators required: the dev environment builds them, and a failed build must not quietly test
# only the pure path (tests/integration/test_test_tiers.py runs the log library's tests without them).
# --durations: the slowest setups and tests in CI's log, where the budget goes (tests/_infra/cpucost.py
# measures CPU per test, independent of the machine's load).
# -n: one worker per core by default (XDIST_WORKERS=0 runs in one process); --dist loadgroup hands
# out whole groups of tests that share an expensive fixture (tests/_infra/xdist_groups.py).
test: setup
	DELTA_MAINTENANCE_ACCEL=require $(PY) -m pytest tests -n $(XDIST_WORKERS) --dist loadgroup --durations=40 $(PYTEST_ARGS)

# Every zoo table in the differential tests (make test runs a few each; hours on two cores).
test-zoo: setup
	DELTA_TEST_ZOO=all DELTA_MAINTENANCE_ACCEL=require $(PY) -m pytest tests/spark $(PYTEST_ARGS)

# The test tiers themselves: the log library's tests without Airflow, the fast tier on the lowest
# Airflow claimed (a venv each).
test-tiers: setup
	DELTA_TEST_TIERS=1 $(PY) -m pytest tests/integration/test_test_tiers.py $(PYTEST_ARGS)

# Everything the suite needs, installed side by side (make -j): on a fresh machine the store
# servers' builds (MinIO's go build is most of it) overlap the venv install and the jar fetches
# instead of following them. Each step returns at once when it is already done.
setup:
	+@$(MAKE) --no-print-directory -j4 servers $(STAMP) jars $(SYSDEPS_STAMP)

clean:
	rm -rf $(VENV) .cache demo .pytest_cache .hypothesis
