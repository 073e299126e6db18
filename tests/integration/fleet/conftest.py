"""The fleet tests' Airflow deployment is the session's shared one (tests/_infra/airflow_deployment.py):
its DAGs folder holds the generated maintenance DAGs and a writer DAG (writer_dag.py); the fleet's
tables are one on ``schedule: asset``, one on ``schedule: watch``, both in their coordinator
endpoint's pool (created by ``delta-maintenance pools --apply``). ``fleet_deployment`` is that
deployment; ``airflow_home`` (dag.test() runs) comes from the same plugin."""

from __future__ import annotations

from tests._infra.airflow_deployment import ASSET_DAG, WATCH_DAG  # noqa: F401 - the tests import them from here
