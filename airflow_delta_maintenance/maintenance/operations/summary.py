"""What a maintenance run did, in one shape: a summary line a person reads, a small record for XCom.

Every use case's result gives a ``TaskReport`` (``result.report()``); the operators log its
``summary()`` and push its ``to_dict()``, the CLI prints the same line. The record's keys are the
same for every operation (docs/operators/results.md documents them): ranges and counts, never lists of versions
or files, and ISO-8601 UTC timestamps.

``Throttled`` turns a stream of progress messages from a long step into at most one line every
few seconds; a step that ends quickly prints none (its summary line is enough).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TypeAlias

__all__ = ["JSONValue", "TaskReport", "Progress", "Throttled", "human_bytes", "iso_utc", "version_range", "utc_now_iso"]

JSONValue: TypeAlias = "str | int | float | bool | Sequence[JSONValue] | Mapping[str, JSONValue] | None"
# A progress sink: one human-readable line per call (already throttled, or to be throttled).
Progress = Callable[[str], None]

PROGRESS_EVERY_S = 5.0


def human_bytes(n: float) -> str:
    """``14.2 MiB``: binary units, one decimal from KiB on."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(n):,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def iso_utc(epoch_ms: int | None) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC (``2026-11-23T18:40:00Z``), None stays None."""
    if epoch_ms is None:
        return None
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    text = moment.isoformat(timespec="milliseconds" if epoch_ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def utc_now_iso() -> str:
    return iso_utc(int(time.time() * 1000)) or ""


def version_range(first: int | None, last: int | None) -> str:
    """``101-120``, ``v7`` for one version, ``none`` for an empty range."""
    if first is None or last is None:
        return "none"
    return f"v{first}" if first == last else f"{first}-{last}"


@dataclass(frozen=True)
class TaskReport:
    """One maintenance operation's outcome.

    ``what`` is the action in words (``wrote v120 (classic, 1 part, 210,345 actions, 14.2 MiB)``);
    ``details`` are the operation's own small keys (counts, versions, flags — no lists of files or
    versions). ``to_dict()`` puts the common keys first; a detail never overrides one of them.
    """

    table: str
    operation: str  # publish | checkpoint | compaction | cleanup | wait
    what: str = ""
    skipped: bool = False
    reason: str | None = None  # why skipped; or what was decided, e.g. "forced"
    version: int | None = None  # the version acted at (checkpoint, cleanup anchor, latest seen)
    from_version: int | None = None  # the range acted on (publish, compaction)
    to_version: int | None = None
    count: int = 0  # commits published, actions checkpointed, windows written, files deleted
    bytes: int = 0
    duration_s: float = 0.0
    finished_at: str = field(default_factory=utc_now_iso)
    details: Mapping[str, JSONValue] = field(default_factory=dict)

    COMMON_KEYS = ("table", "operation", "skipped", "reason", "version", "from_version", "to_version", "count", "bytes", "duration_s", "finished_at")

    def summary(self) -> str:
        """The one line a task log or the CLI shows for this operation."""
        if self.skipped:
            return f"{self.operation}: skipped — {self.reason or 'nothing to do'}"
        return f"{self.operation}: {self.what} in {self.duration_s:.1f} s"

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "table": self.table,
            "operation": self.operation,
            "skipped": self.skipped,
            "reason": self.reason,
            "version": self.version,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "count": self.count,
            "bytes": self.bytes,
            "duration_s": round(self.duration_s, 3),
            "finished_at": self.finished_at,
        }
        clash = set(self.details) & set(out)
        if clash:
            raise ValueError(f"report details may not redefine common keys: {sorted(clash)}")
        out.update(self.details)
        return out


class Throttled:
    """A progress sink that passes on at most one message every ``every_s`` seconds, counted from
    its creation: a quick step says nothing, a long one says where it is now and then."""

    def __init__(self, emit: Progress, every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._emit = emit
        self._every = PROGRESS_EVERY_S if every_s is None else every_s
        self._clock = clock
        self._last = clock()

    def __call__(self, message: str) -> None:
        now = self._clock()
        if now - self._last >= self._every:
            self._last = now
            self._emit(message)
