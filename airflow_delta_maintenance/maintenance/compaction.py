"""Log compaction use case: aligned windows over published versions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..deltalog.compaction import CompactionResult, check_compaction_supported, plan_compaction_windows, write_compaction
from ..deltalog.listing import LogSegmentFiles, list_log_files
from ..deltalog.storage import LogStore

__all__ = ["CompactionRunResult", "run_log_compaction"]


@dataclass(frozen=True)
class CompactionRunResult:
    table_uri: str
    written: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_log_compaction(
    store: LogStore,
    *,
    interval: int = 10,
    max_window_bytes: int = 0,
    published_version: int | None = None,
    files: LogSegmentFiles | None = None,
) -> CompactionRunResult:
    files = files if files is not None else list_log_files(store)
    check_compaction_supported(store, files, published_version)
    written, skipped = [], []
    for w in plan_compaction_windows(files, interval, published_version=published_version, max_window_bytes=max_window_bytes):
        if w.skip_reason:
            if w.skip_reason != "exists":
                skipped.append({"start": w.start, "end": w.end, "reason": w.skip_reason, "size_bytes": w.size_bytes})
            continue
        result: CompactionResult = write_compaction(store, w.start, w.end, files=files, published_version=published_version, check_features=False)
        written.append({"start": result.start, "end": result.end, "file": result.file, "existed": result.existed, "num_actions": result.num_actions})
    return CompactionRunResult(store.uri, written, skipped)
