"""The fleet health DAG: one task that reports on every table of the maintenance configuration.

Building it reads nothing (the configuration is loaded by the task), so it parses in constant time
whatever the fleet's size. Runs never overlap (``max_active_runs=1``): the history is appended by
one run at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..operators.fleet_report import DeltaFleetReportOperator
from ..version_compat import DAG

__all__ = ["FLEET_DAG_ID", "build_fleet_dag"]

FLEET_DAG_ID = "delta_maintenance_fleet_health"


def build_fleet_dag(
    config_path: str | Path,
    *,
    report_dir: str | Path | None = None,
    schedule: Any = "*/15 * * * *",
    notifiers: Sequence[Any] = (),
    dag_id: str = FLEET_DAG_ID,
    start_date: Any = None,
    max_history_samples: int | None = None,
) -> DAG:
    """The fleet health DAG over the maintenance configuration at ``config_path``: one task,
    ``fleet_report`` (``DeltaFleetReportOperator``), on ``schedule`` (None: manual runs only).

    :param report_dir: where the report and its history go (default: ``plugins.report_dir``'s
        resolution, read by the task)
    :param notifiers: called on threshold crossings, e.g. ``DeltaHealthNotifier``
    :param dag_id: the DAG id (default ``delta_maintenance_fleet_health``)
    :param max_history_samples: history samples kept (default: the operator's)
    """
    import pendulum

    dag = DAG(
        dag_id=dag_id,
        description="Health of every Delta table under maintenance: backlog, checkpoint lag, log size, cleanup",
        schedule=schedule,
        start_date=start_date or pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["delta-maintenance", "fleet-health"],
        doc_md=(
            "### Delta maintenance fleet health\n\nWrites `report.html` / `report.json` (worst tables first) and the history "
            "behind its charts; sends per-table gauges; notifies when a table's backlog or checkpoint lag crosses its threshold."
        ),
    )
    history: dict[str, Any] = {} if max_history_samples is None else {"max_history_samples": max_history_samples}
    with dag:
        DeltaFleetReportOperator(
            task_id="fleet_report",
            config_path=str(config_path),
            report_dir=None if report_dir is None else str(report_dir),
            notifiers=notifiers,
            retries=0,
            **history,
        )
    return dag
