"""The UI tests' Airflow deployment is the session's shared one (tests/_infra/airflow_deployment.py:
the ``airflow_deployment`` fixture); its helpers are re-exported for the tests here."""

from __future__ import annotations

from tests._infra.airflow_deployment import (  # noqa: F401 - re-exported: the tests import them from here
    EXAMPLE_DAGS,
    FLEET_DAG,
    INVALID_DAG,
    PASSWORD,
    REPO,
    USER,
    Deployment,
    deployment_env,
    make_table,
    migrate,
    running_components,
)
