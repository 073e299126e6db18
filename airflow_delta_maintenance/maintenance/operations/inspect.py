"""Read-only inspection of a table: what `delta-maintenance inspect` shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..table.catalog_view import load_ratified_snapshot
from ..table.maintained import MaintainedTable

__all__ = ["InspectResult", "inspect_table"]


@dataclass(frozen=True)
class InspectResult:
    table_uri: str
    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    num_files: int
    size_bytes: int
    latest_checkpoint_version: int
    commit_timestamp: int
    files: list[dict[str, Any]] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "table_uri": self.table_uri,
            "version": self.version,
            "protocol": self.protocol,
            "metadata": self.metadata,
            "num_files": self.num_files,
            "size_bytes": self.size_bytes,
            "latest_checkpoint_version": self.latest_checkpoint_version,
            "commit_timestamp": self.commit_timestamp,
            "commit_time_utc": _iso(self.commit_timestamp),
        }
        if self.files is not None:
            out["files"] = self.files
        return out


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def inspect_table(table: MaintainedTable, version: int | None = None, *, include_files: bool = False) -> InspectResult:
    """The table at ``version`` (default: the latest ratified) as its catalog sees it."""
    snap = load_ratified_snapshot(table, version)
    return InspectResult(
        table_uri=snap.table_uri,
        version=snap.version,
        protocol=snap.protocol.to_dict(),
        metadata=snap.metadata.to_dict(),
        num_files=snap.num_files,
        size_bytes=snap.size_bytes,
        latest_checkpoint_version=snap.latest_checkpoint_version,
        commit_timestamp=snap.timestamp,
        files=snap.file_list() if include_files else None,
    )
