"""Maintenance DAGs, one per table of the YAML configuration.

The configuration file comes from the environment variable ``DELTA_MAINTENANCE_CONFIG``, else the
Airflow Variable ``delta_maintenance_config``, else ``tables.yaml`` next to this file. Parsing this
file reads only the configuration: no table or coordinator is touched.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow_delta_maintenance.dag_factory import build_maintenance_dag
from airflow_delta_maintenance.maintenance.config import load_config


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


for _table in load_config(_config_path()):
    globals()[_table.dag_id] = build_maintenance_dag(_table)


if __name__ == "__main__":
    for _table in load_config(_config_path()):
        globals()[_table.dag_id].test()
