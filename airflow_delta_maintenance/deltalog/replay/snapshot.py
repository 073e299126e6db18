"""``Snapshot``: the reconciled state of a table at one version, and ``load_snapshot``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .._runtime.memory import uses_log_operation_memory
from ..errors import DeltaLogError, MissingCommitError, ProtocolViolationError
from ..log_segment.listing import LISTING_ATTEMPTS, LogSegmentFiles, list_log_files
from ..log_segment.segment import CatalogCommit, LogSegment, build_log_segment
from ..model.actions import DomainMetadata, Metadata, Protocol, Txn
from ..model.features import check_read_supported, in_commit_timestamps_enabled
from ..model.schema import StatsPlan, partition_values_type
from ..model.table_properties import TableProperties
from ..stats.parsed_columns import parse_partition_values, parse_stats
from ..stats.pipeline import stats_plan_for
from ..storage import LogStore, open_table_storage
from .parsed_actions import ORDER
from .reconcile import ReplayResult, UnreadableCheckpointError, UnreconciledCompactionError, replay_actions
from .version_facts import VersionFacts, in_commit_timestamp, timestamp_at

__all__ = ["Snapshot", "load_snapshot"]


@dataclass(frozen=True)
class Snapshot(VersionFacts):
    """State of a table at ``version``.

    ``files`` holds the live ``add`` actions (one row per ``(path, dv_unique_id)``, in replay order);
    ``tombstones`` the ``remove`` actions not yet expired at ``now_ms``. ``commit_timestamps`` maps
    each version whose commit was read to its timestamp: the in-commit timestamp where enabled, the
    commit file's modification time otherwise (for catalog commits, the catalog's timestamp).
    """

    table_uri: str
    version: int
    protocol: Protocol
    metadata: Metadata
    properties: TableProperties
    files: pa.Table
    tombstones: pa.Table
    txns: Mapping[str, Txn]
    domain_metadata: Mapping[str, DomainMetadata]  # live domains only
    segment: LogSegment
    timestamp: int
    commit_timestamps: Mapping[int, int]
    now_ms: int
    # `parsed_stats()` when the load parsed them already (load_snapshot(parse_stats=True))
    preparsed_stats: pa.ChunkedArray | None = field(default=None, repr=False, compare=False)

    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    @property
    def size_bytes(self) -> int:
        total = pc.sum(self.files.column("size")).as_py()
        return int(total or 0)

    def file_list(self) -> list[dict[str, Any]]:
        """Active files as ``{"path", "size"}`` sorted by path (for display, not for hot paths)."""
        ordered = self.files.select(["path", "size"]).sort_by("path")
        rows: list[dict[str, Any]] = ordered.to_pylist()
        return rows

    def active_file_keys(self) -> set[tuple[str, str | None]]:
        return set(zip(self.files.column("path").to_pylist(), self.files.column("dv_unique_id").to_pylist(), strict=True))

    def add_actions(self) -> pa.Table:
        """The live adds without bookkeeping columns."""
        return self.files.drop_columns([ORDER, "dv_unique_id"])

    def stats_plan(self) -> StatsPlan:
        """How ``stats`` strings parse for this table (the checkpoint's ``stats_parsed`` type)."""
        return stats_plan_for(self.protocol, self.metadata)

    def partition_values_type(self) -> pa.StructType | None:
        """Typed struct of the partition values (physical names); None when unpartitioned or a type is unknown."""
        typ = partition_values_type(self.metadata.schema, self.metadata.partition_columns)
        return typ if typ is not None and typ.num_fields else None

    def parsed_stats(self) -> pa.ChunkedArray | None:
        """The live files' statistics parsed (``numRecords``, ``minValues``, ``maxValues``,
        ``nullCount`` typed as the checkpoint's ``stats_parsed``), one chunk per chunk of
        ``files``; None when the strings cannot be read with the table's types. Chunks are parsed
        on a few threads: pyarrow's JSON reader releases the GIL."""
        if self.preparsed_stats is not None:
            return self.preparsed_stats
        plan = self.stats_plan()
        parsed = _map_chunks(lambda stats: parse_stats(stats, plan), self.files.column("stats").chunks)
        return None if any(p is None for p in parsed) else pa.chunked_array(parsed, plan.final_type)

    def parsed_partition_values(self) -> pa.ChunkedArray | None:
        """The live files' partition values typed (physical names), chunked as ``files``; None
        when the table is unpartitioned or a value does not cast to its column's type."""
        typ = self.partition_values_type()
        if typ is None:
            return None
        columns = list(self.metadata.partition_columns)
        parsed = _map_chunks(lambda maps: parse_partition_values(maps, columns, typ), self.files.column("partitionValues").chunks)
        return None if any(p is None for p in parsed) else pa.chunked_array(parsed, typ)


# Below this many rows a thread hand-off costs more than the parsing it would overlap.
_PARALLEL_ROWS = 16_384


def _map_chunks(parse: Callable[[pa.Array], pa.Array | None], chunks: Sequence[pa.Array]) -> list[pa.Array | None]:
    """``parse`` over ``chunks`` in order; on as many threads as CPUs when there is enough work."""
    workers = min(os.cpu_count() or 1, len(chunks))
    if workers < 2 or sum(len(c) for c in chunks) < _PARALLEL_ROWS:
        return [parse(c) for c in chunks]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delta-parse") as pool:
        return list(pool.map(parse, chunks))


def _commit_timestamps(
    segment: LogSegment, commit_infos: Mapping[int, Mapping[str, Any]], ict_from: int | None
) -> dict[int, int]:
    out: dict[int, int] = {}
    for version, source in segment.commit_sources.items():
        ict = in_commit_timestamp(commit_infos.get(version)) if ict_from is not None and version >= ict_from else None
        if ict is None and isinstance(source, CatalogCommit):
            ict = source.timestamp if source.timestamp >= 0 else source.modification_time
        out[version] = ict if ict is not None else source.modification_time
    return out


def _may_lack_expired_tombstones(segment: LogSegment, retention_ms: int) -> bool:
    """Whether a chosen compaction may have dropped removes its window's commits hold.

    A compaction must keep every remove of its window: the files they cancel were added before the
    window. Some writers (the deltalake wheel's ``compact_logs``) drop tombstones already expired
    under ``delta.deletedFileRetentionDuration`` when they write, which resurrects those files for a
    reader that trusts the compaction. A tombstone of the window can only have been expired if one
    of the window's commits is older than the compaction's write time minus the retention; then
    the window's commits are replayed instead."""
    commits = {c.version: c for c in segment.files.commits}
    for d in segment.deltas:
        if isinstance(d, CatalogCommit) or d.end_version == d.version:
            continue
        window = [commits[v] for v in range(d.version, d.end_version + 1) if v in commits]
        if window and min(c.modification_time for c in window) <= d.modification_time - retention_ms:
            return True
    return False


def _replay_with_fallbacks(
    store: LogStore,
    files: LogSegmentFiles,
    version: int | None,
    catalog_commits: Sequence[CatalogCommit],
    latest_ratified_version: int | None,
    parse_stats: bool,
    keys_only: bool = False,
) -> tuple[LogSegment, ReplayResult, set[str]]:
    """Replay ``version``; a checkpoint that cannot be read is never used: the segment is rebuilt
    without it (an older checkpoint, or the commits)."""
    unreadable: set[str] = set()
    first_error: UnreadableCheckpointError | None = None
    while True:
        try:
            segment, result = _replay_segment(
                store, files, version, catalog_commits, latest_ratified_version, frozenset(unreadable), parse_stats=parse_stats,
                keys_only=keys_only,
            )
            return segment, result, unreadable
        except UnreadableCheckpointError as exc:
            if exc.path is None or exc.path in unreadable:
                raise
            first_error = first_error or exc
            unreadable.add(exc.path)
        except DeltaLogError as exc:
            if first_error is not None:  # no older way to this version: the unreadable checkpoint is the cause
                cause = first_error.__cause__
                raise (cause if isinstance(cause, (DeltaLogError, FileNotFoundError)) else first_error) from exc
            raise


def _replay_segment(
    store: LogStore,
    files: LogSegmentFiles,
    version: int | None,
    catalog_commits: Sequence[CatalogCommit],
    latest_ratified_version: int | None,
    skip_checkpoints: frozenset[str],
    use_compactions: bool = True,
    *,
    parse_stats: bool,
    keys_only: bool = False,
) -> tuple[LogSegment, Any]:
    def segment_for(use_compactions: bool) -> LogSegment:
        return build_log_segment(
            files,
            version,
            catalog_commits=catalog_commits,
            latest_ratified_version=latest_ratified_version,
            use_compactions=use_compactions,
            skip_checkpoints=skip_checkpoints,
            table=store.uri,
        )

    segment = segment_for(use_compactions)
    if not use_compactions:
        return segment, replay_actions(store, segment, parse_stats=parse_stats, keys_only=keys_only)
    try:
        return segment, replay_actions(store, segment, parse_stats=parse_stats, keys_only=keys_only)
    except UnreconciledCompactionError:
        # Like delta-spark's failed compacted-delta validation: fall back to the plain commits.
        segment = segment_for(False)
        return segment, replay_actions(store, segment, parse_stats=parse_stats, keys_only=keys_only)


@uses_log_operation_memory
def load_snapshot(
    table: str | LogStore,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    catalog_commits: Sequence[CatalogCommit] = (),
    latest_ratified_version: int | None = None,
    files: LogSegmentFiles | None = None,
    now_ms: int | None = None,
    parse_stats: bool = False,
    keys_only: bool = False,
) -> Snapshot:
    """Load the snapshot at ``version`` (default latest) with one LIST of ``_delta_log``.

    ``catalog_commits``/``latest_ratified_version`` come from a coordinator for coordinated and
    catalog-managed tables: ratified commits not yet published, which win over published files.
    ``parse_stats`` parses the live files' statistics during the load (``Snapshot.parsed_stats``
    then returns them at once): it fills the CPUs the replay's serial steps leave idle.
    ``keys_only``: the files' actions carry only what identifies them (path, size, deletion
    vector, times; no statistics, tags or partition values) — for callers that need no more (VACUUM).
    """
    store = table if isinstance(table, LogStore) else open_table_storage(table, storage_options)
    files = files if files is not None else list_log_files(store)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    # Tombstone expiry needs the table's retention, which is only known after replay: keep all
    # tombstones in the replay and filter afterwards. A checkpoint that cannot be read is never
    # used: the segment is rebuilt without it (an older checkpoint, or the commits).
    for attempt in range(LISTING_ATTEMPTS):
        try:
            segment, result, unreadable = _replay_with_fallbacks(store, files, version, catalog_commits, latest_ratified_version, parse_stats,
                                                                       keys_only)
            break
        except (FileNotFoundError, MissingCommitError) as exc:
            # A file of this listing vanished while it was read (MissingCommitError with version -1
            # is `_read_deltas` saying so): a concurrent cleanup removed files below a newer
            # checkpoint, which a fresh listing shows. A gap in the listing itself is not retried.
            vanished = isinstance(exc, FileNotFoundError) or exc.version == -1
            if not vanished or attempt == LISTING_ATTEMPTS - 1:
                if isinstance(exc, FileNotFoundError):
                    raise MissingCommitError(f"{store.uri}: a log file vanished while the log was read, {attempt + 1} listings in a row ({exc})",
                                             version=-1, path=store.log_dir) from None
                raise
            files = list_log_files(store)
    protocol, metadata = result.protocol, result.metadata
    if protocol is None:
        raise ProtocolViolationError(f"{store.uri}: no protocol action in versions ≤ {segment.version}", path=store.log_dir)
    if metadata is None:
        raise ProtocolViolationError(f"{store.uri}: no metaData action in versions ≤ {segment.version}", path=store.log_dir)
    check_read_supported(protocol, path=store.uri)
    properties = TableProperties.from_configuration(metadata.configuration)
    if _may_lack_expired_tombstones(segment, properties.deleted_file_retention_ms):
        segment, result = _replay_segment(
            store, files, version, catalog_commits, latest_ratified_version, frozenset(unreadable), False, parse_stats=parse_stats,
            keys_only=keys_only,
        )
    cutoff = now - properties.deleted_file_retention_ms
    tombstones = result.removes.filter(pc.greater(pc.fill_null(result.removes.column("deletionTimestamp"), 0), cutoff))

    ict_from: int | None = None
    if in_commit_timestamps_enabled(protocol, dict(metadata.configuration)):
        ict_from = properties.ict_enablement_version or 0
    timestamps = _commit_timestamps(segment, result.commit_infos, ict_from)
    if segment.version not in timestamps:
        timestamps[segment.version] = timestamp_at(store, files, segment.version, ict_from)
    return Snapshot(
        table_uri=store.uri,
        version=segment.version,
        protocol=protocol,
        metadata=metadata,
        properties=properties,
        files=result.adds,
        tombstones=tombstones,
        txns=result.txns,
        domain_metadata={k: v for k, v in result.domains.items() if not v.removed},
        segment=segment,
        timestamp=timestamps[segment.version],
        commit_timestamps=timestamps,
        now_ms=now,
        preparsed_stats=result.stats_parsed,
    )
