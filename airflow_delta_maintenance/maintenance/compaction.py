"""Log compaction use case: aligned windows over published versions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..deltalog.compaction import CompactionResult, plan_compaction_windows, write_compaction
from ..deltalog.features import check_write_supported
from ..deltalog.errors import UnpublishedVersionError
from .table import CatalogView, MaintainedTable, ratified_state

__all__ = ["CompactionRunResult", "run_log_compaction", "check_compaction_window", "compact_window"]


@dataclass(frozen=True)
class CompactionRunResult:
    table_uri: str
    written: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _checked_view(table: MaintainedTable) -> CatalogView:
    view = table.catalog_view()
    state = ratified_state(table, view)
    check_write_supported(state.protocol, operation=f"log compaction of {table.uri}", path=table.uri)
    return view


def check_compaction_window(table: MaintainedTable, start: int, end: int) -> CatalogView:
    """A single window [start, end] may be compacted: published, ratified, features supported."""
    view = _checked_view(table)
    if end > view.published_version:
        raise UnpublishedVersionError(
            f"{table.uri}: version {end} is not durably published (published through {view.published_version}, "
            f"latest ratified {view.latest_ratified_version})",
            version=end,
        )
    return view


def compact_window(table: MaintainedTable, start: int, end: int) -> CompactionResult:
    view = check_compaction_window(table, start, end)
    return write_compaction(table.store, start, end, files=view.files, published_version=view.published_version, check_features=False)


# Writes one window [start, end] another way (a Spark job) and reports it like the local writer.
WindowWriter = Callable[[int, int], dict[str, Any]]


def run_log_compaction(
    table: MaintainedTable, *, interval: int = 10, max_window_bytes: int = 0, writer: WindowWriter | None = None
) -> CompactionRunResult:
    """Aligned windows over versions the catalog ratified and that are durably published.

    ``writer`` (the Spark engine) writes each window instead of this process; the gates, the
    catalog view and the window plan are the same either way."""
    view = _checked_view(table)
    files, published = view.files, view.published_version
    written, skipped = [], []
    for w in plan_compaction_windows(files, interval, published_version=published, max_window_bytes=max_window_bytes):
        if w.skip_reason:
            if w.skip_reason != "exists":
                skipped.append({"start": w.start, "end": w.end, "reason": w.skip_reason, "size_bytes": w.size_bytes})
            continue
        if writer is not None:
            written.append(writer(w.start, w.end))
            continue
        result: CompactionResult = write_compaction(table.store, w.start, w.end, files=files, published_version=published, check_features=False)
        written.append({"start": result.start, "end": result.end, "file": result.file, "existed": result.existed, "num_actions": result.num_actions})
    return CompactionRunResult(table.uri, written, skipped)
