"""The discovery DAG: one task that refreshes the fleet file (see ``fleet.config``).

Building it does no I/O; the maintenance DAGs of the discovered tables are built by the DAG
factory from the fleet file the task writes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from ..fleet.config import DISCOVERY_DAG_ID, DiscoveryConfig
from ..maintenance.config.tables import parse_schedule
from ..operators.fleet_discovery import DeltaFleetDiscoveryOperator
from ..version_compat import DAG

__all__ = ["DISCOVERY_DAG_ID", "build_discovery_dag"]


def build_discovery_dag(config_path: str | Path, discovery: DiscoveryConfig, start_date: Any = None) -> DAG:
    import pendulum

    sources = ", ".join(f"{s.name} ({s.kind})" for s in discovery.sources)
    dag = DAG(
        dag_id=DISCOVERY_DAG_ID,
        description=f"Discover the tables of {sources}; writes {discovery.fleet_file}",
        schedule=None if discovery.schedule is None else parse_schedule(discovery.schedule),
        start_date=start_date or pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["delta-maintenance", "discovery"],
        default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
        doc_md=(f"### Fleet discovery\n\nLists the tables of {sources} and writes them to `{discovery.fleet_file}`, "
                "which the maintenance DAG file reads at parse time (no network I/O there)."),
    )
    with dag:
        DeltaFleetDiscoveryOperator(task_id="discover_tables", config_path=str(config_path), fleet_file=str(discovery.fleet_file))
    return dag
