"""Shared fixtures. Server, jar and Spark fixtures live in ``tests/_infra`` and are loaded as plugins."""

from __future__ import annotations

from collections.abc import Iterator

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

# Airflow's configuration module, when first imported, puts a "default" warnings filter for the
# module regex "airflow" in front of all others. That regex also matches airflow_delta_maintenance:
# in the test that happened to import Airflow first, a deprecation from our code would only be
# shown, not fail (pyproject's filterwarnings). Imported here, before any test, it stays behind them.
# The log library's tests run without Airflow installed (tests/integration/test_test_tiers.py).
try:
    import airflow.configuration  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "airflow":
        raise

pytest_plugins = [
    "tests._infra.tiers",
    "tests._infra.servers",
    "tests._infra.store_servers",
    "tests._infra.spark",
    "tests._infra.table_zoo",
    "tests._infra.unity_catalog",
    "tests._infra.uc_oss",
    "tests._infra.fault_proxy",
    "tests._infra.airflow_deployment",
    "tests._infra.xdist_groups",
]


@pytest.fixture
def memfs() -> Iterator[MemoryFileSystem]:
    """A clean process-global in-memory filesystem (cleared before and after, like fsspec's own ``m``)."""
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    yield fs
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
