"""Log compaction files ``<x>.<y>.compacted.json`` (PROTOCOL "Log Compaction Files", delta-io/delta PR #7080).

A compaction is a patch over the state before ``x``, not a snapshot: it keeps every tombstone
whatever its age (removes, ``domainMetadata`` with ``removed=true``) and every txn, or a reader
substituting it for the commits could resurrect older state. It never holds ``commitInfo``.
"""

from __future__ import annotations

import bisect
import itertools
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .._runtime.memory import release_free_memory, uses_log_operation_memory
from .._runtime.pipeline import prefetched
from ..errors import LogFileExistsError, MissingCommitError, UnpublishedVersionError
from ..log_segment.listing import LogSegmentFiles, list_log_files
from ..log_segment.segment import JsonSource, LogSegment
from ..model.actions import DomainMetadata, Metadata, Protocol, Txn
from ..model.features import check_write_supported
from ..model.partition_keys import partition_value_keys
from ..model.paths import compaction_name
from ..replay.parsed_actions import ORDER
from ..replay.reconcile import replay_actions
from ..replay.table_state import load_table_state
from ..storage import LogStore
from .lines import winning_lines

__all__ = [
    "check_compaction_supported",
    "compaction_head",
    "CompactionResult",
    "CompactionWindow",
    "PreparedCompaction",
    "plan_compaction_windows",
    "prepare_compaction",
    "write_prepared",
    "write_compaction",
]


@dataclass(frozen=True)
class CompactionWindow:
    start: int
    end: int
    size_bytes: int
    skip_reason: str | None = None


@dataclass(frozen=True)
class CompactionResult:
    table_uri: str
    start: int
    end: int
    file: str
    existed: bool = False
    num_actions: int = 0
    size_in_bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_compaction_windows(
    files: LogSegmentFiles,
    interval: int,
    *,
    published_version: int | None = None,
    max_window_bytes: int = 0,
) -> list[CompactionWindow]:
    """Aligned windows as in delta-io/delta PR #7080: each ends on a multiple of ``interval`` and starts after the
    last checkpoint before it; windows that a checkpoint at or after their end already covers, or
    shorter than two versions, or with a commit missing, are not listed; windows already written
    or over ``max_window_bytes`` of commits (> 0 enables the guard) are listed with a skip reason.
    Only published versions are considered. The work is bounded by the files present: a stray
    far-future version adds one candidate, never a walk up to it."""
    if interval < 2:
        raise ValueError(f"compaction interval must be >= 2, got {interval}")
    latest = files.latest_commit_version if published_version is None else min(published_version, files.latest_commit_version)
    versions = [c.version for c in files.commits if c.version <= latest]
    sizes = [c.size for c in files.commits if c.version <= latest]
    position = {v: i for i, v in enumerate(versions)}
    prefix = list(itertools.accumulate(sizes, initial=0))
    checkpoint_versions = sorted({g.version for g in files.complete_checkpoints()})
    newest_checkpoint = checkpoint_versions[-1] if checkpoint_versions else -1
    existing = {(c.version, c.end_version) for c in files.compactions}
    out = []
    for end in versions:
        if end < interval or end % interval or end <= newest_checkpoint:
            continue  # not aligned, or a checkpoint at or after the end already serves readers
        last_cp = checkpoint_versions[bisect.bisect_left(checkpoint_versions, end) - 1] if checkpoint_versions else -1
        start = max(end - interval + 1, last_cp + 1)
        if end <= start or start not in position:
            continue
        if position[end] - position[start] != end - start:
            continue  # a commit inside the window is missing (cleaned up, or not published)
        size = prefix[position[end] + 1] - prefix[position[start]]
        reason = None
        if (start, end) in existing:
            reason = "exists"
        elif max_window_bytes > 0 and size > max_window_bytes:
            reason = "windowTooLarge"
        out.append(CompactionWindow(start, end, size, reason))
    return out


def check_compaction_supported(store: LogStore, files: LogSegmentFiles, version: int | None = None) -> None:
    """The shared write gate for log compaction (single node, and before submitting the Spark job)."""
    # the protocol without replaying file actions (an unreadable checkpoint falls back, as for reads)
    protocol = load_table_state(store, version, files=files).protocol
    check_write_supported(protocol, operation=f"log compaction of {store.uri}", path=store.uri)


def compaction_head(
    protocol: Protocol | None, metadata: Metadata | None, txns: Iterable[Txn], domains: Iterable[DomainMetadata]
) -> bytes:
    """The non-file lines of a compaction: protocol, metadata, txns, then domain metadata
    (tombstones included), each sorted by key; shared with the Spark job, so both write the same head."""
    lines = []
    if protocol is not None:
        lines.append(json.dumps({"protocol": protocol.to_dict()}, separators=(",", ":")))
    if metadata is not None:
        lines.append(json.dumps({"metaData": metadata.to_dict()}, separators=(",", ":")))
    for txn in sorted(txns, key=lambda t: t.app_id):
        lines.append(json.dumps({"txn": txn.to_dict()}, separators=(",", ":")))
    for dm in sorted(domains, key=lambda d: d.domain):
        lines.append(json.dumps({"domainMetadata": dm.to_dict()}, separators=(",", ":")))
    return "".join(line + "\n" for line in lines).encode("utf-8")


@uses_log_operation_memory
def _compaction_plan(store: LogStore, files: LogSegmentFiles, start: int, end: int) -> tuple[bytes, tuple[JsonSource, ...], np.ndarray]:
    """The compaction's non-file lines, its commits, and the positions of its winning file-action
    lines (to stream): reconciliation keeps only keys (every field is validated, then dropped),
    the lines are read a second time."""
    commits = {c.version: c for c in files.commits}
    present = sorted(v for v in commits if start <= v <= end)
    if len(present) != end - start + 1:  # found from the files present, never by walking the range
        first = next((start + i for i, v in enumerate(present) if v != start + i), start + len(present))
        raise MissingCommitError(
            f"{store.uri}: cannot compact [{start}, {end}]: {first:020d}.json is not published",
            version=first,
            path=f"{first:020d}.json",
        )
    segment = LogSegment(
        version=end,
        checkpoint=None,
        deltas=tuple(commits[v] for v in range(start, end + 1)),
        latest_version=end,
        published_version=end,
        files=files,
    )
    # the partitioning before the window: the strict reader declares its columns (a window's own
    # metaData, if any, says otherwise for the rest)
    before = load_table_state(store, start, files=files).metadata
    result = replay_actions(store, segment, tombstone_cutoff_ms=None, include_checkpoint=False, keys_only=True, partition_columns=before.partition_columns,
                            partition_keys=partition_value_keys(before.to_dict()))
    head = compaction_head(result.protocol, result.metadata, result.txns.values(), result.domains.values())
    wanted = np.sort(np.concatenate([t.column(ORDER).to_numpy() for t in (result.adds, result.removes)]).astype(np.int64))
    del result
    release_free_memory()  # the first pass's freed batches, before the lines are read again
    return head, segment.deltas, wanted


@dataclass(frozen=True)
class PreparedCompaction:
    """A window read and reconciled (its commits validated in full), ready to be written."""

    start: int
    end: int
    head: bytes = b""
    deltas: tuple[JsonSource, ...] = ()
    wanted: np.ndarray | None = None
    existed: bool = False
    started: float = 0.0

    @property
    def name(self) -> str:
        return compaction_name(self.start, self.end)


@uses_log_operation_memory
def prepare_compaction(
    store: LogStore,
    start: int,
    end: int,
    *,
    files: LogSegmentFiles | None = None,
    published_version: int | None = None,
    check_features: bool = True,
) -> PreparedCompaction:
    """Read and reconcile the window ``[start, end]``, validating every commit of it in full; an
    existing compaction of the window is noted, not read. Nothing is written."""
    started = time.monotonic()
    files = files if files is not None else list_log_files(store)
    if check_features:
        check_compaction_supported(store, files, published_version)
    if published_version is not None and end > published_version:
        raise UnpublishedVersionError(
            f"{store.uri}: cannot compact [{start}, {end}]: versions above {published_version} are not published",
            version=published_version + 1,
        )
    if any(c.version == start and c.end_version == end for c in files.compactions):
        return PreparedCompaction(start, end, existed=True, started=started)
    head, deltas, wanted = _compaction_plan(store, files, start, end)
    return PreparedCompaction(start, end, head, deltas, wanted, started=started)


@uses_log_operation_memory
def write_prepared(store: LogStore, prepared: PreparedCompaction) -> CompactionResult:
    """Write a prepared window create-if-absent; an existing file is a no-op."""
    p = prepared
    if p.existed or p.wanted is None:
        return CompactionResult(store.uri, p.start, p.end, p.name, existed=True, seconds=round(time.monotonic() - p.started, 6))
    wanted = p.wanted
    num_actions = p.head.count(b"\n") + len(wanted)

    def write(sink: Any) -> None:
        sink.write(p.head)
        for chunk in prefetched(winning_lines(store, p.deltas, wanted)):  # the next batch is read while this one is written
            sink.write(chunk)

    try:
        size = store.put_if_absent_stream(p.name, write)
    except LogFileExistsError:
        return CompactionResult(store.uri, p.start, p.end, p.name, existed=True, seconds=round(time.monotonic() - p.started, 6))
    return CompactionResult(store.uri, p.start, p.end, p.name, False, num_actions, size, round(time.monotonic() - p.started, 6))


def write_compaction(
    store: LogStore,
    start: int,
    end: int,
    *,
    files: LogSegmentFiles | None = None,
    published_version: int | None = None,
    check_features: bool = True,
) -> CompactionResult:
    """Write ``<start>.<end>.compacted.json`` create-if-absent; an existing one is a no-op.

    The table's features go through the shared write gate first (``check_features=False`` only
    for callers that already passed it with this listing). Every line copied was validated first."""
    prepared = prepare_compaction(store, start, end, files=files, published_version=published_version, check_features=check_features)
    return write_prepared(store, prepared)
