"""A table's maintenance health, for `delta-maintenance status` and the demo."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..coordinators.base import CommitCoordinatorClient
from ..deltalog.cleanup import plan_log_cleanup
from ..deltalog.listing import list_log_files
from ..deltalog.paths import LEGACY_STAGED_DIR, SIDECAR_DIR, STAGED_DIR
from ..deltalog.snapshot import load_snapshot
from ..deltalog.storage import LogStore

__all__ = ["TableStatus", "table_status"]


@dataclass(frozen=True)
class TableStatus:
    table_uri: str
    latest_ratified_version: int | None
    latest_published_version: int
    pending_versions: list[int]
    checkpoint_version: int
    compactions: list[list[int]]
    commits_since_checkpoint: int
    log_files: int
    log_bytes: int
    cleanup_candidates: int
    cleanup_bytes: int
    cleanup_skipped_reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def table_status(
    store: LogStore,
    client: CommitCoordinatorClient | None = None,
    *,
    table_conf: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> TableStatus:
    files = list_log_files(store)
    ratified = None
    pending: list[int] = []
    if client is not None:
        resp = client.get_commits(store.uri, 0, None, table_conf=table_conf)
        ratified = max(resp.latest_table_version, files.latest_commit_version)
        pending = [c.version for c in resp.commits if c.version > files.latest_commit_version]
    complete = files.complete_checkpoints()
    checkpoint = complete[-1].version if complete else -1
    entries = [*store.list_dir(), *store.list_dir(STAGED_DIR), *store.list_dir(LEGACY_STAGED_DIR), *store.list_dir(SIDECAR_DIR)]
    snapshot = load_snapshot(store, files=files, now_ms=now_ms)
    plan = plan_log_cleanup(store, snapshot, now_ms=snapshot.now_ms, latest_published_version=files.latest_commit_version, files=files)
    return TableStatus(
        table_uri=store.uri,
        latest_ratified_version=ratified,
        latest_published_version=files.latest_commit_version,
        pending_versions=pending,
        checkpoint_version=checkpoint,
        compactions=[[c.version, c.end_version] for c in files.compactions],
        commits_since_checkpoint=files.latest_commit_version - checkpoint if files.latest_commit_version >= 0 else 0,
        log_files=len(entries),
        log_bytes=sum(e.size for e in entries),
        cleanup_candidates=len(plan.deletions),
        cleanup_bytes=plan.bytes,
        cleanup_skipped_reason=plan.skip_reason,
    )
