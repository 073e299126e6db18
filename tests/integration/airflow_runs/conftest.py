"""The ``dag.test()`` runs' helpers; the migrated Airflow home (``airflow_home``) is the session's one
(tests/_infra/airflow_deployment.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._infra import airflow_deployment as _deployment
from tests._infra.airflow_deployment import EXAMPLE_DAGS, REPO, airflow_env  # noqa: F401 - the tests import them from here


def __getattr__(name: str) -> Any:
    """``airflow_home`` stays importable from here (tests/spark imports it); not bound in this module,
    so pytest does not register it a second time for this directory."""
    if name == "airflow_home":
        return _deployment.airflow_home
    raise AttributeError(name)


@pytest.fixture
def dag_runner(airflow_home: Path) -> Iterator[Callable[..., Any]]:
    """``dag_runner(config, **env)``: a DagRunner (several dag.test() runs in one Airflow process), closed after the test."""
    from .dag_runner import DagRunner

    runners: list[DagRunner] = []

    def start(config: Path, **env: str) -> DagRunner:
        runners.append(DagRunner(airflow_home, config, **env))
        return runners[-1]

    yield start
    for runner in runners:
        runner.close()
