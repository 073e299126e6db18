"""``validate-config --check-tables``: what a configuration promises, checked against the tables.

Read-only: each table's ``_delta_log`` is listed, its coordinator (when given as a spec) opened and
asked for the table, and a configured cleanup retention compared with the table's
``delta.logRetentionDuration``. Airflow connections cannot be resolved here (no Airflow), so a
table using ``coordinator_conn_id`` / ``storage_conn_id`` is checked with the environment's
credentials and the storage options given, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...deltalog.errors import DeltaLogError
from ...deltalog.model.table_properties import human_duration
from ...deltalog.replay.snapshot import load_snapshot
from ...deltalog.storage import open_table_storage
from ..table.coordinator_client import open_coordinator
from .tables import TableConfig

__all__ = ["TableCheck", "check_table"]

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


@dataclass
class TableCheck:
    problems: list[str] = field(default_factory=list)  # each one makes the command fail
    notes: list[str] = field(default_factory=list)


def check_table(table: TableConfig, storage_options: Mapping[str, Any] | None = None) -> TableCheck:
    out = TableCheck()
    if table.storage_conn_id:
        out.notes.append(f"storage connection {table.storage_conn_id!r} not resolved here: environment credentials and -o options used")
    store = open_table_storage(table.uri, storage_options)
    has_log = store.has_log_dir()
    latest = -1
    if table.coordinator:
        try:
            client = open_coordinator(table.coordinator, storage_options)
            try:
                out.notes.append(client.check())
                latest = client.latest_ratified_version(table.uri)
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - reported per table
            out.problems.append(f"coordinator: {type(exc).__name__}: {exc}")
    elif table.coordinator_conn_id:
        out.notes.append(f"coordinator connection {table.coordinator_conn_id!r} not resolved here: not checked")
    if not has_log and latest < 0:
        out.problems.append(f"no _delta_log at {store.log_dir}" + (" and unknown to the coordinator" if table.coordinator else ""))
        return out
    cleanup_days = table.cleanup.retention_days if table.cleanup.enabled else None
    vacuum_hours = table.vacuum.retention_hours if table.vacuum.enabled else None
    if has_log and (cleanup_days is not None or vacuum_hours is not None):
        try:
            properties = load_snapshot(store).properties
        except DeltaLogError as exc:
            out.problems.append(f"reading the table: {type(exc).__name__}: {exc}")
            return out
        if cleanup_days is not None and cleanup_days * DAY_MS < properties.log_retention_ms and not table.cleanup.allow_shorter_retention:
            out.problems.append(
                f"cleanup.retention_days {cleanup_days} is shorter than the table's delta.logRetentionDuration "
                f"({properties.log_retention_ms / DAY_MS:g} days); set cleanup.allow_shorter_retention: true to accept it"
            )
        table_vacuum_ms = properties.deleted_file_retention_ms
        if vacuum_hours is not None and vacuum_hours * HOUR_MS < table_vacuum_ms and not table.vacuum.allow_shorter_retention:
            out.problems.append(
                f"vacuum.retention_hours {vacuum_hours:g} is shorter than the table's delta.deletedFileRetentionDuration "
                f"({human_duration(table_vacuum_ms)}); set vacuum.allow_shorter_retention: true to accept it"
            )
    return out
