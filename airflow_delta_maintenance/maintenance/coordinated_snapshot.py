"""Snapshots of coordinated tables: the published log plus the coordinator's unpublished tail."""

from __future__ import annotations

from collections.abc import Mapping

from ..coordinators.base import CommitCoordinatorClient, CommitsResponse, RatifiedCommit
from ..deltalog.log_segment import CatalogCommit
from ..deltalog.snapshot import Snapshot, load_snapshot
from ..deltalog.storage import LogStore

__all__ = ["to_catalog_commit", "load_coordinated_snapshot"]


def to_catalog_commit(c: RatifiedCommit) -> CatalogCommit:
    return CatalogCommit(
        version=c.version,
        file_name=c.file_name,
        inline_content=c.inline_content,
        timestamp=c.commit_timestamp,
        size=c.file_size,
        modification_time=c.file_modification_time,
    )


def load_coordinated_snapshot(
    store: LogStore,
    client: CommitCoordinatorClient,
    version: int | None = None,
    *,
    table_conf: Mapping[str, str] | None = None,
    response: CommitsResponse | None = None,
) -> Snapshot:
    """One ``get_commits`` call, then one snapshot load with the ratified tail (which wins)."""
    resp = response if response is not None else client.get_commits(store.uri, 0, None, table_conf=table_conf)
    cap = resp.latest_table_version if resp.latest_table_version >= 0 else None
    return load_snapshot(store, version, catalog_commits=[to_catalog_commit(c) for c in resp.commits], latest_ratified_version=cap)
