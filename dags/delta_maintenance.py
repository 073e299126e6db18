"""Maintenance DAGs, one per table of the YAML configuration.

The configuration file comes from the environment variable ``DELTA_MAINTENANCE_CONFIG``, else the
Airflow Variable ``delta_maintenance_config``, else ``tables.yaml`` next to this file. Parsing this
file reads only the configuration: no table or coordinator is touched. A table with an invalid
configuration gets a failing placeholder DAG (tag ``invalid-config``) that states the error; the
other tables' DAGs load regardless. Check a file before deploying it with
``delta-maintenance validate-config tables.yaml``.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow_delta_maintenance.dag_builders.maintenance_dag import build_dags


def _config_path() -> Path:
    env = os.environ.get("DELTA_MAINTENANCE_CONFIG")
    if env:
        return Path(env)
    try:
        from airflow.sdk import Variable

        value = Variable.get("delta_maintenance_config", default=None)
    except Exception:  # noqa: BLE001 - no metadata database at parse time (tests, CLI)
        value = None
    return Path(value) if value else Path(__file__).with_name("tables.yaml")


globals().update(build_dags(_config_path()))


if __name__ == "__main__":  # run every table's DAG once, in-process: python delta_maintenance.py
    for _dag in build_dags(_config_path()).values():
        _dag.test()
