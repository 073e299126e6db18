"""Airflow assets of a Delta table, for writer DAGs and the generated maintenance DAGs.

- ``table_asset(uri)`` — the table itself (its normalised URI; ``s3a://`` → ``s3://``, no trailing
  slash). A writer DAG lists it as an outlet of the task that commits; a maintenance DAG with
  ``schedule: asset`` runs on its events, and the ``schedule: watch`` watcher emits on it when the
  coordinator has ratified new commits.
- ``published_log_asset(uri)`` — ``<table>/_delta_log``: what publish and checkpoint produce, with
  ``published_version`` / ``checkpoint_version`` in each event's extra. Readers that read the
  published log (not the catalog) schedule on it. It is a separate asset so that a maintenance DAG
  scheduled on the table's asset is not re-triggered by its own publish.

.. code-block:: python

    from airflow_delta_maintenance.assets.table import table_asset

    @task(outlets=[table_asset("s3://lake/orders")])
    def write_orders(): ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Asset

from ..maintenance.table.lineage import published_log_asset_uri, table_asset_uri

__all__ = ["table_asset", "published_log_asset", "PUBLISHED_LOG_GROUP"]

PUBLISHED_LOG_GROUP = "delta_log"


def table_asset(table_uri: str, *, watchers: Sequence[Any] | None = None) -> Asset:
    """The table's asset (name = URI, the default group: equal to a writer's ``Asset(uri)``)."""
    uri = table_asset_uri(table_uri)
    return Asset(uri, uri, watchers=list(watchers)) if watchers else Asset(uri, uri)


def published_log_asset(table_uri: str) -> Asset:
    """The table's published ``_delta_log`` (what the maintenance tasks emit events on)."""
    uri = published_log_asset_uri(table_uri)
    return Asset(uri, uri, group=PUBLISHED_LOG_GROUP)
