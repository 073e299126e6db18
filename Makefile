# Two entry points for a newcomer: `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed
JARS_STAMP := .cache/jars/.fetched
PYTEST_ARGS ?=

.PHONY: demo test venv jars clean

venv: $(STAMP)

# The lock pins every transitive dependency, so a fresh machine resolves nothing new.
$(STAMP): pyproject.toml requirements/dev.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q "uv==0.13.9"
	$(UV) pip install -q --compile-bytecode --python $(PY) -r requirements/dev.lock
	$(UV) pip install -q --python $(PY) --no-deps -e .
	touch $@

# Maven Central jars for delta-spark, hadoop-aws, DynamoDB Local and the Unity Catalog server.
jars: $(JARS_STAMP)

$(JARS_STAMP): .ci/fetch-jars $(wildcard .ci/maven/*.xml)
	.ci/fetch-jars
	touch $@

demo: $(STAMP)
	$(VENV)/bin/python -m airflow_delta_maintenance.demo

test: $(STAMP) $(JARS_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .cache demo .pytest_cache .hypothesis
