"""A ``MaintainedTable`` over a store and a client the test built itself (a counting wrapper, a
client that dies mid-call, a second client on the same coordinator), instead of ``open_table``'s
spec or connection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_delta_maintenance.coordinators.base import CommitCoordinatorClient
from airflow_delta_maintenance.deltalog.storage import LogStore
from airflow_delta_maintenance.maintenance.table.coordinator_discovery import TableCoordination
from airflow_delta_maintenance.maintenance.table.maintained import MaintainedTable, _read_coordination

__all__ = ["bind_table"]


def bind_table(
    store: LogStore,
    coordinator: CommitCoordinatorClient | None = None,
    *,
    coordinator_spec: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> MaintainedTable:
    """A table over an already opened client (the table's conf is still read from the table, as
    ``open_table`` reads it)."""
    coordination, state = _read_coordination(store) if coordinator is not None else (TableCoordination(), None)
    return MaintainedTable(store.uri, store, coordinator, coordinator_spec, coordination, dict(storage_options or {}), identity_state=state)
