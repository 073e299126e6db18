"""Listener that records the last success of each maintenance task for the fleet health view.

When a task of a table's maintenance DAG (``delta_maintenance__<table>``) succeeds, its end time
is written to ``<report dir>/runs/<table>/<task>.json`` (replaced atomically; the directory of
``report_dir.report_dir()``), where the fleet report and ``delta-maintenance status --config``
read it. A failure to record is logged and never fails the task.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)

DAG_PREFIX = "delta_maintenance__"


def _report_dir() -> Path:
    from .report_dir import report_dir

    return report_dir()


def record(task_instance: Any) -> bool:
    """Record ``task_instance``'s success if it belongs to a maintenance DAG; True when written."""
    dag_id = str(getattr(task_instance, "dag_id", ""))
    if not dag_id.startswith(DAG_PREFIX):
        return False
    report_dir = _report_dir()
    from ..fleet.history import record_task_success

    end = getattr(task_instance, "end_date", None) or datetime.now(timezone.utc)
    record_task_success(report_dir, dag_id[len(DAG_PREFIX):], str(task_instance.task_id), end.isoformat(timespec="seconds"),
                        getattr(task_instance, "run_id", None))
    return True


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    try:
        record(task_instance)
    except Exception:
        log.exception("could not record the success of %s.%s for the fleet health view",
                      getattr(task_instance, "dag_id", "?"), getattr(task_instance, "task_id", "?"))
