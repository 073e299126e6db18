"""The suite's tiers. ``pytest`` with no arguments runs the fast tier, for the inner loop: the unit
tests (``tests/unit``) that start no server, JVM or Airflow run and are not marked ``slow`` — under
two minutes. Any path or node id on the command line runs what it names, whole: ``make test`` (and
so CI) runs ``pytest tests``, everything.

The log library's tests (``tests/unit/deltalog``, ``tests/golden``) run without Airflow installed,
and the Airflow-facing fast tier runs on the lowest Airflow the package claims as well
(tests/integration/test_test_tiers.py, ``make test``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[1] / "unit"
# Markers of tests that need more than the process: servers, a JVM, an Airflow run, or minutes.
HEAVY = ("slow", "integration", "spark", "interop")


def is_default_run(config: pytest.Config) -> bool:
    return config.args_source is pytest.Config.ArgsSource.TESTPATHS


def in_fast_tier(item: pytest.Item) -> bool:
    return item.path.is_relative_to(UNIT) and not any(item.get_closest_marker(name) for name in HEAVY)


def pytest_report_header(config: pytest.Config) -> str | None:
    if is_default_run(config):
        return "tier: fast (unit tests, no servers; `pytest tests` or `make test` runs the whole suite)"
    return None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A default run does not even import the other tiers' modules (their collection alone takes
    half a minute)."""
    if is_default_run(config) and collection_path.parent == UNIT.parent and collection_path != UNIT and collection_path.is_dir():
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not is_default_run(config):
        return
    slow = [item for item in items if not in_fast_tier(item)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if in_fast_tier(item)]
