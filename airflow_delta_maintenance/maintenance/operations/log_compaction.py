"""Log compaction use case: aligned windows over published versions."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ...deltalog.errors import UnpublishedVersionError
from ...deltalog.log_compaction.windows import CompactionResult, plan_compaction_windows, prepare_compaction, write_prepared
from ...deltalog.model.features import check_write_supported
from ...deltalog.replay.table_state import TableState
from ..table.catalog_view import CatalogView, ratified_state, validate_ratified_tail
from ..table.maintained import MaintainedTable
from .summary import JSONValue, TaskReport, human_bytes, version_range

__all__ = ["CompactionRunResult", "run_log_compaction", "check_compaction_window", "compact_window", "single_window_report"]


@dataclass(frozen=True)
class CompactionRunResult:
    table_uri: str
    written: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    interval: int = 10
    published_version: int = -1
    already_compacted: int = 0  # aligned windows found written already
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def report(self) -> TaskReport:
        """The span the windows written cover, their count and bytes; skipped windows by reason."""
        new = [w for w in self.written if not w["existed"]]
        by_reason: dict[str, int] = {}
        for w in self.skipped:
            by_reason[w["reason"]] = by_reason.get(w["reason"], 0) + 1
        details: dict[str, JSONValue] = {
            "interval": self.interval,
            "windows": len(new),
            "actions": sum(int(w["num_actions"]) for w in new),
            "skipped_windows": dict(by_reason),
            "already_compacted": self.already_compacted + len(self.written) - len(new),
            "published_version": self.published_version,
        }
        first = min((int(w["start"]) for w in new), default=None)
        last = max((int(w["end"]) for w in new), default=None)
        size = sum(int(w["size_bytes"]) for w in new)
        duration = self.seconds
        if not new:
            parts = [f"{n} window(s) {reason}" for reason, n in sorted(by_reason.items())]
            if self.already_compacted or len(self.written):
                parts.append(f"{self.already_compacted + len(self.written)} window(s) already compacted")
            reason = (f"no window of {self.interval} to compact through v{self.published_version}"
                      + (f" ({'; '.join(parts)})" if parts else " (windows a checkpoint covers are not compacted)"))
            return TaskReport(self.table_uri, "compaction", skipped=True, reason=reason, version=self.published_version,
                              duration_s=duration, details=details)
        what = f"wrote {len(new)} window(s) over {version_range(first, last)} ({human_bytes(size)})"
        if by_reason:
            what += ", skipped " + ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items()))
        return TaskReport(self.table_uri, "compaction", what=what, version=self.published_version, from_version=first,
                          to_version=last, count=len(new), bytes=size, duration_s=duration, details=details)


def single_window_report(table_uri: str, window: dict[str, Any], seconds: float) -> TaskReport:
    """The record of one window [start, end] compacted on request, in the keys of a scheduled run's."""
    length = int(window["end"]) - int(window["start"]) + 1
    return CompactionRunResult(table_uri, written=[window], interval=length, published_version=int(window["end"]), seconds=seconds).report()


def _checked_view(table: MaintainedTable) -> tuple[CatalogView, TableState]:
    view = table.catalog_view()
    state = ratified_state(table, view)
    check_write_supported(state.protocol, operation=f"log compaction of {table.uri}", path=table.uri)
    return view, state


def check_compaction_window(table: MaintainedTable, start: int, end: int) -> CatalogView:
    """A single window [start, end] may be compacted: published, ratified, features supported,
    and every commit up to the catalog's head reads and validates in full (before a Spark job)."""
    view, state = _checked_view(table)
    _require_published(table, view, end)
    validate_ratified_tail(table, state)
    return view


def _require_published(table: MaintainedTable, view: CatalogView, end: int) -> None:
    if end > view.published_version:
        raise UnpublishedVersionError(
            f"{table.uri}: version {end} is not durably published (published through {view.published_version}, "
            f"latest ratified {view.latest_ratified_version})",
            version=end,
        )


def compact_window(table: MaintainedTable, start: int, end: int) -> CompactionResult:
    view, state = _checked_view(table)
    _require_published(table, view, end)
    prepared = prepare_compaction(table.store, start, end, files=view.files, published_version=view.published_version, check_features=False)
    validate_ratified_tail(table, state)  # the rest of the tail: what the window's own read did not cover
    return write_prepared(table.store, prepared)


# Writes one window [start, end] another way (a Spark job) and reports it like the local writer.
WindowWriter = Callable[[int, int], dict[str, Any]]


def run_log_compaction(
    table: MaintainedTable, *, interval: int = 10, max_window_bytes: int = 0, writer: WindowWriter | None = None
) -> CompactionRunResult:
    """Aligned windows over versions the catalog ratified and that are durably published.

    ``writer`` (the Spark engine) writes each window instead of this process; the gates, the
    catalog view and the window plan are the same either way."""
    started = time.monotonic()
    view, state = _checked_view(table)
    files, published = view.files, view.published_version
    written: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    exists = 0
    todo = []
    for w in plan_compaction_windows(files, interval, published_version=published, max_window_bytes=max_window_bytes):
        if w.skip_reason:
            if w.skip_reason != "exists":
                skipped.append({"start": w.start, "end": w.end, "reason": w.skip_reason, "size_bytes": w.size_bytes})
            else:
                exists += 1
            continue
        todo.append(w)
    # Nothing is written before every commit up to the catalog's head has been read and validated:
    # the local engine reads (and so validates) its windows first, the rest of the tail after.
    prepared = [] if writer is not None else [
        prepare_compaction(table.store, w.start, w.end, files=files, published_version=published, check_features=False) for w in todo
    ]
    validate_ratified_tail(table, state)
    if writer is not None:
        written.extend(writer(w.start, w.end) for w in todo)
    for p in prepared:
        result: CompactionResult = write_prepared(table.store, p)
        written.append({"start": result.start, "end": result.end, "file": result.file, "existed": result.existed,
                        "num_actions": result.num_actions, "size_bytes": result.size_in_bytes})
    return CompactionRunResult(table.uri, written, skipped, interval, published, exists, round(time.monotonic() - started, 6))
