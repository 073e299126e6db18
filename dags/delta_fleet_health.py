"""The fleet health DAG over the same configuration as ``delta_maintenance.py``.

Configuration file: ``DELTA_MAINTENANCE_CONFIG``, else ``tables.yaml`` next to this file. Report
directory: ``DELTA_MAINTENANCE_REPORT_DIR`` or Airflow's ``[delta_maintenance] report_dir`` (read
by the task). Alerts go to the task log, and to the webhook of the connection named by
``DELTA_MAINTENANCE_ALERT_CONN_ID`` when set.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow_delta_maintenance.dag_builders.health_dag import build_fleet_dag
from airflow_delta_maintenance.notifications.health import DeltaHealthNotifier

_config = os.environ.get("DELTA_MAINTENANCE_CONFIG") or str(Path(__file__).with_name("tables.yaml"))
_alerts = DeltaHealthNotifier(webhook_conn_id=os.environ.get("DELTA_MAINTENANCE_ALERT_CONN_ID") or None)

_schedule = os.environ.get("DELTA_MAINTENANCE_FLEET_SCHEDULE", "*/15 * * * *")

delta_maintenance_fleet_health = build_fleet_dag(
    _config, schedule=None if _schedule.lower() in ("", "none", "null") else _schedule, notifiers=[_alerts]
)
