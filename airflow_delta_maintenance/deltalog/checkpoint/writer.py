"""Write a checkpoint for a published version: classic V1, classic-named V2, or UUID-named V2 with sidecars.

The content follows PROTOCOL "Checkpoints" and delta-spark's writer: protocol, metadata, live
domain metadata, txns, then file actions, all with ``dataChange=false``; unexpired
tombstones only, without ``stats`` and ``tags``; ``stats`` / ``stats_parsed`` /
``partitionValues_parsed`` per the table's properties; compression per
``delta.parquet.compression.codec`` (zstd by default). Never multi-part.

Visibility: every file is created if absent and whole (sidecars first, the top-level file last),
so a reader sees the checkpoint complete or not at all. Sidecars carry the writing run's tag
(``run_identity``), so no other run removes them while this one is alive; they are checked before
the top-level file is written, and the whole checkpoint is read back (footers, sidecar sizes, row
total) before ``_last_checkpoint`` may point at it — written only when newer than the current hint.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._runtime.memory import uses_log_operation_memory
from .._runtime.pipeline import prefetched
from ..errors import (
    CorruptLogError,
    DeltaLogError,
    IncompleteCheckpointError,
    InvalidTablePropertyError,
    LogFileExistsError,
    UnpublishedVersionError,
    UnsupportedFeatureError,
)
from ..log_segment.last_checkpoint import LastCheckpointHint, parse_last_checkpoint
from ..log_segment.listing import LogSegmentFiles, list_log_files
from ..log_segment.segment import CatalogCommit
from ..model import action_types as cs
from ..model.actions import DomainMetadata, Metadata, Protocol, Txn
from ..model.features import SUPPORTED_WRITER_FEATURES, check_write_supported as check_writer_features  # the one gate of every writer
from ..model.paths import LAST_CHECKPOINT, SIDECAR_DIR, LogFileType, classic_checkpoint_name, uuid_checkpoint_name
from ..model.table_properties import TableProperties
from ..replay.snapshot import Snapshot
from ..stats.parsed_columns import parse_partition_values, parse_stats
from ..storage import LogStore
from ..storage.run_identity import new_run
from .readback import read_back_checkpoint

__all__ = [
    "SUPPORTED_WRITER_FEATURES",
    "CheckpointResult",
    "check_writer_features",
    "CheckpointLayout",
    "checkpoint_layout",
    "file_action_batches",
    "non_file_rows",
    "non_file_table",
    "checkpoint_num_rows",
    "checkpoint_codec",
    "write_checkpoint",
    "update_last_checkpoint",
]

_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4", "lz4_raw": "lz4", "brotli": "brotli", "uncompressed": "none", "none": "none"}
_CHECKPOINT_REMOVE_FIELDS = [f for f in cs.REMOVE_FIELDS if f.name not in ("tags", "stats")]
# Rows per Parquet row group (and per batch of typed stats being parsed): bounds the writer's memory.
ROWS_PER_ROW_GROUP = 32_768


@dataclass(frozen=True)
class CheckpointResult:
    table_uri: str
    version: int
    kind: str  # "classic" (V1), "classic-v2", "uuid-v2"
    files: list[str] = field(default_factory=list)
    existed: bool = False
    num_actions: int = 0
    num_add_files: int = 0
    size_in_bytes: int = 0
    stats_parsed: bool = False
    last_checkpoint_updated: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checkpoint_codec(properties: TableProperties) -> str:
    raw = properties.compression_codec
    if raw not in _CODECS:
        raise InvalidTablePropertyError(f"delta.parquet.compression.codec: unsupported codec {raw!r}", key="delta.parquet.compression.codec")
    return _CODECS[raw]


# ---- content ---------------------------------------------------------------------------------------


def _stats_parsed(stats: pa.Array, snapshot: Snapshot) -> pa.Array | None:
    """Parse the ``stats`` JSON column into ``stats_parsed``; None if impossible."""
    return parse_stats(stats, snapshot.stats_plan())


def _partition_values_parsed(pv: pa.Array, snapshot: Snapshot) -> pa.Array | None:
    typ = snapshot.partition_values_type()
    if typ is None:
        return None
    return parse_partition_values(pv, list(snapshot.metadata.partition_columns), typ)


def non_file_rows(
    version: int,
    protocol: Protocol,
    metadata: Metadata,
    domains: Iterable[DomainMetadata],
    txns: Iterable[Txn],
    properties: TableProperties,
    now_ms: int,
    *,
    checkpoint_metadata: bool,
) -> list[dict[str, Any]]:
    """Rows of a checkpoint's non-file actions in delta-spark's order (maps as key/value pairs).

    Live domain metadata only; txns older than ``delta.setTransactionRetentionDuration`` dropped.
    """
    rows: list[dict[str, Any]] = []
    if checkpoint_metadata:
        rows.append({"checkpointMetadata": {"version": version, "tags": None}})
    rows.append({"protocol": protocol.to_dict()})
    meta = metadata.to_dict()
    meta["format"]["options"] = list(meta["format"]["options"].items())
    meta["configuration"] = list(meta["configuration"].items())
    rows.append({"metaData": meta})
    for dm in sorted((d for d in domains if not d.removed), key=lambda d: d.domain):
        rows.append({"domainMetadata": dm.to_dict()})
    retention = properties.set_transaction_retention_ms
    for txn in sorted(txns, key=lambda t: t.app_id):
        if retention is not None and txn.last_updated is not None and txn.last_updated <= now_ms - retention:
            continue  # delta-spark drops txns older than delta.setTransactionRetentionDuration
        rows.append({"txn": txn.to_dict()})
    return rows


@dataclass(frozen=True)
class CheckpointLayout:
    """The checkpoint's Parquet schema for one snapshot, and how its ``add`` struct is filled."""

    schema: pa.Schema
    add_fields: list[pa.Field]
    stats_parsed: bool
    partition_values_parsed: bool


def checkpoint_layout(snapshot: Snapshot, *, v2: bool) -> CheckpointLayout:
    props = snapshot.properties
    add_fields = [f for f in cs.ADD_FIELDS if f.name != "stats" or props.write_stats_as_json]
    pv_parsed = stats_parsed = False
    if props.write_stats_as_struct:
        pv_type = snapshot.partition_values_type()
        if pv_type is not None:
            add_fields.append(pa.field("partitionValues_parsed", pv_type))
            pv_parsed = True
        add_fields.append(pa.field("stats_parsed", snapshot.stats_plan().final_type))
        stats_parsed = True
    columns: list[tuple[str, pa.DataType]] = [
        ("txn", cs.TXN_TYPE),
        ("add", pa.struct(add_fields)),
        ("remove", pa.struct(_CHECKPOINT_REMOVE_FIELDS)),
        ("metaData", cs.METADATA_TYPE),
        ("protocol", cs.PROTOCOL_TYPE),
        ("domainMetadata", cs.DOMAIN_METADATA_TYPE),
    ]
    if v2:
        columns += [("checkpointMetadata", cs.CHECKPOINT_METADATA_TYPE), ("sidecar", cs.SIDECAR_TYPE)]
    return CheckpointLayout(pa.schema([pa.field(n, t) for n, t in columns]), add_fields, stats_parsed, pv_parsed)


def non_file_table(snapshot: Snapshot, layout: CheckpointLayout, *, v2: bool) -> pa.Table:
    rows = non_file_rows(
        snapshot.version,
        snapshot.protocol,
        snapshot.metadata,
        snapshot.domain_metadata.values(),
        snapshot.txns.values(),
        snapshot.properties,
        snapshot.now_ms,
        checkpoint_metadata=v2,
    )
    return pa.Table.from_pylist(rows, schema=layout.schema)


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)


def _add_struct(adds: pa.Table, snapshot: Snapshot, layout: CheckpointLayout) -> pa.StructArray:
    n = adds.num_rows
    children = []
    for f in layout.add_fields:
        if f.name == "dataChange":
            children.append(pa.array(np.zeros(n, dtype=bool)))
        elif f.name == "stats_parsed":
            parsed = _stats_parsed(_column(adds, "stats"), snapshot)
            children.append(parsed if parsed is not None and parsed.type == f.type else pa.nulls(n, f.type))
        elif f.name == "partitionValues_parsed":
            parsed = _partition_values_parsed(_column(adds, "partitionValues"), snapshot)
            children.append(parsed if parsed is not None and parsed.type == f.type else pa.nulls(n, f.type))
        else:
            children.append(_column(adds, f.name))
    return pa.StructArray.from_arrays(children, fields=layout.add_fields)


def _remove_struct(removes: pa.Table) -> pa.StructArray:
    children = [
        pa.array(np.zeros(removes.num_rows, dtype=bool)) if f.name == "dataChange" else _column(removes, f.name)
        for f in _CHECKPOINT_REMOVE_FIELDS
    ]
    return pa.StructArray.from_arrays(children, fields=_CHECKPOINT_REMOVE_FIELDS)


def file_action_batches(
    snapshot: Snapshot, layout: CheckpointLayout, columns: Sequence[str], rows_per_batch: int | None = None
) -> Iterator[pa.RecordBatch]:
    """Adds (replay order), then unexpired tombstones, as batches with ``columns`` of the layout.

    The protocol asks for no order; keeping replay order avoids a sort that would copy every
    column. Batches are built one at a time, so typed stats never exist for the whole table at once.
    """
    schema = pa.schema([layout.schema.field(c) for c in columns])
    rows_per_batch = rows_per_batch or ROWS_PER_ROW_GROUP
    for table, kind in ((snapshot.files, "add"), (snapshot.tombstones, "remove")):
        for part in _slices_within_chunks(table, rows_per_batch):
            struct = _add_struct(part, snapshot, layout) if kind == "add" else _remove_struct(part)
            yield pa.RecordBatch.from_arrays(
                [struct if c == kind else pa.nulls(part.num_rows, schema.field(c).type) for c in columns], schema=schema
            )


def _slices_within_chunks(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    """``table`` in slices of ``rows // 2`` to ``rows`` rows (the last may be smaller) that cut
    its record batches as little as possible: a slice inside one batch has one chunk per column,
    used without a copy, where a slice straddling two is concatenated column by column. Small
    batches (what reconciliation leaves of a batch whose files were mostly replaced) are grouped,
    so that a checkpoint never has thousands of tiny row groups."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in table.to_batches():
        start = 0
        while start < batch.num_rows:
            if count >= rows // 2 and count + batch.num_rows - start > rows:
                yield pa.Table.from_batches(pending)
                pending, count = [], 0
            take = min(rows - count, batch.num_rows - start)
            pending.append(batch.slice(start, take))
            count += take
            start += take
            if count == rows:
                yield pa.Table.from_batches(pending)
                pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _write_parquet(
    store: LogStore, name: str, schema: pa.Schema, codec: str, head: pa.Table | None, batches: Iterable[pa.RecordBatch]
) -> int:
    """Stream row groups into ``name`` created if absent (atomic); returns its size in bytes."""

    def write(sink: Any) -> None:
        with pq.ParquetWriter(sink, schema, compression=codec) as writer:
            if head is not None and head.num_rows:
                writer.write_table(head)
            for batch in batches:
                writer.write_batch(batch)

    return store.put_if_absent_stream(name, write)


def _take_rows(pending: list[pa.RecordBatch], batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """Up to ``limit`` rows from ``pending`` then ``batches``; the rest of a split batch stays pending."""
    taken = 0
    while taken < limit:
        if not pending:
            nxt = next(batches, None)
            if nxt is None:
                return
            pending.append(nxt)
        batch = pending.pop()
        if taken + batch.num_rows > limit:
            pending.append(batch.slice(limit - taken))
            batch = batch.slice(0, limit - taken)
        taken += batch.num_rows
        yield batch


# ---- writing ---------------------------------------------------------------------------------------


def _ensure_published(store: LogStore, snapshot: Snapshot, files: LogSegmentFiles) -> None:
    unpublished = [d.version for d in snapshot.segment.deltas if isinstance(d, CatalogCommit)]
    if unpublished or (snapshot.version > files.latest_commit_version and snapshot.version != snapshot.checkpoint_version):
        version = unpublished[0] if unpublished else snapshot.version
        raise UnpublishedVersionError(
            f"{store.uri}: version {version} is not published (no {version:020d}.json); "
            "checkpoints and compactions only cover published versions",
            version=version,
        )


def update_last_checkpoint(store: LogStore, hint: LastCheckpointHint) -> bool:
    """Write ``_last_checkpoint`` if it is missing, unreadable or older than ``hint``."""
    current = None
    try:
        current = parse_last_checkpoint(store.read(LAST_CHECKPOINT))
    except FileNotFoundError:
        pass
    if current is not None and current.version >= hint.version:
        return False
    store.put_overwrite(LAST_CHECKPOINT, hint.to_json_bytes())
    return True


@uses_log_operation_memory
def write_checkpoint(
    store: LogStore,
    snapshot: Snapshot,
    *,
    sidecar_max_actions: int = 1_000_000,
    files: LogSegmentFiles | None = None,
    classic_name: bool = False,
    progress: Callable[[str], None] | None = None,
) -> CheckpointResult:
    """Write the checkpoint of ``snapshot.version`` (must be published); idempotent.

    ``classic_name`` forces a classic-named (V2 when the table has v2Checkpoint) checkpoint, which
    cleanup leaves behind so that old clients can read the protocol and fail cleanly. ``progress``
    hears one line per row group of file actions written (the caller throttles).
    """
    started = time.monotonic()
    files = files if files is not None else list_log_files(store)
    v = snapshot.version
    _ensure_published(store, snapshot, files)
    check_writer_features(snapshot.protocol, operation=f"checkpoint of {store.uri} at {v}", path=store.uri)
    props = snapshot.properties
    if snapshot.protocol.has_writer_feature("checkpointProtection") and v < props.checkpoint_protection_version:
        raise UnsupportedFeatureError(
            f"{store.uri}: checkpointProtection forbids creating a checkpoint at {v} below "
            f"delta.requireCheckpointProtectionBeforeVersion={props.checkpoint_protection_version}",
            features=["checkpointProtection"],
        )
    v2 = snapshot.protocol.has_writer_feature("v2Checkpoint") and snapshot.protocol.has_reader_feature("v2Checkpoint")
    uuid_named = v2 and props.checkpoint_policy == "v2" and not classic_name
    kind = "uuid-v2" if uuid_named else ("classic-v2" if v2 else "classic")
    existing = [
        g
        for g in files.complete_checkpoints()
        if g.version == v and (not classic_name or g.files[0].type is not LogFileType.CHECKPOINT_UUID)
    ]
    if existing:
        group = existing[-1]
        back = read_back_checkpoint(store, [f.name for f in group.files])  # never a hint to a checkpoint we cannot read
        hint = LastCheckpointHint(version=v, size=back.num_actions, size_in_bytes=group.size_in_bytes,
                                  parts=group.expected_parts if group.expected_parts > 1 else None)
        updated = update_last_checkpoint(store, hint)
        return CheckpointResult(store.uri, v, kind, [f.name for f in group.files], existed=True, last_checkpoint_updated=updated,
                                seconds=round(time.monotonic() - started, 6))

    codec = checkpoint_codec(props)
    layout = checkpoint_layout(snapshot, v2=v2)
    non_file = non_file_table(snapshot, layout, v2=v2)
    num_adds = snapshot.num_files
    n = snapshot.num_files + snapshot.tombstones.num_rows
    written: list[str] = []
    total_bytes = 0
    run = new_run()
    done = 0

    def counted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        nonlocal done
        for batch in batches:
            yield batch
            done += batch.num_rows  # the writer asks for the next batch once this one is written
            if progress is not None:
                progress(f"checkpoint: v{v} {done:,} of {n:,} file actions written")

    if uuid_named:
        sidecar_rows = []
        parts = max(1, -(-n // sidecar_max_actions)) if n else 0
        side_schema = pa.schema([layout.schema.field("add"), layout.schema.field("remove")])
        batches = counted(prefetched(file_action_batches(snapshot, layout, ["add", "remove"], min(ROWS_PER_ROW_GROUP, sidecar_max_actions))))
        pending: list[pa.RecordBatch] = []
        for i in range(parts):
            name = f"{v:020d}.checkpoint.{i + 1:010d}.{parts:010d}.{run.tag}.parquet"
            size = _write_parquet(store, f"{SIDECAR_DIR}/{name}", side_schema, codec, None, _take_rows(pending, batches, sidecar_max_actions))
            written.append(f"{SIDECAR_DIR}/{name}")
            total_bytes += size
            stat = store.stat(f"{SIDECAR_DIR}/{name}")
            sidecar_rows.append({"sidecar": {"path": name, "sizeInBytes": size, "modificationTime": stat.modification_time if stat else 0, "tags": None}})
        top = pa.concat_tables([non_file, pa.Table.from_pylist(sidecar_rows, schema=non_file.schema)])
        top_name = uuid_checkpoint_name(v, str(uuid.uuid4()), "parquet")
        num_actions = non_file.num_rows + n
        top_batches: Iterable[pa.RecordBatch] = ()
    else:
        top = non_file
        top_name = classic_checkpoint_name(v)
        num_actions = non_file.num_rows + n
        top_batches = counted(prefetched(file_action_batches(snapshot, layout, layout.schema.names)))
    try:
        for row in sidecar_rows if uuid_named else ():
            side = f"{SIDECAR_DIR}/{row['sidecar']['path']}"
            stat = store.stat(side)
            if stat is None or stat.size != row["sidecar"]["sizeInBytes"]:
                raise IncompleteCheckpointError(f"{store.display(side)}: sidecar vanished or changed before the checkpoint was written", path=side)
        size = _write_parquet(store, top_name, layout.schema, codec, top, top_batches)
    except LogFileExistsError:
        # Another writer made the same checkpoint (classic names are deterministic): content is equivalent.
        for name in written:
            store.delete(name)
        return CheckpointResult(store.uri, v, kind, [top_name], existed=True, seconds=round(time.monotonic() - started, 6))
    except BaseException:
        for name in written:  # our sidecars that no checkpoint references
            store.delete(name)
        raise
    written.append(top_name)
    total_bytes += size
    try:
        read_back_checkpoint(store, [top_name], expected_actions=num_actions)
    except DeltaLogError:
        for name in reversed(written):  # ours alone (unique or just created): unpublish, then fail
            store.delete(name)
        raise
    hint = LastCheckpointHint(version=v, size=num_actions, size_in_bytes=total_bytes, num_of_add_files=num_adds)
    updated = update_last_checkpoint(store, hint)
    return CheckpointResult(
        table_uri=store.uri,
        version=v,
        kind=kind,
        files=written,
        num_actions=num_actions,
        num_add_files=num_adds,
        size_in_bytes=total_bytes,
        stats_parsed=layout.stats_parsed,
        last_checkpoint_updated=updated,
        seconds=round(time.monotonic() - started, 6),
    )


def checkpoint_num_rows(store: LogStore, files: Sequence[Any]) -> int:
    """Number of actions in a checkpoint's files (Parquet footers, or JSON lines)."""
    total = 0
    for f in files:
        if f.extension == "json":
            total += sum(1 for line in store.read(f.name).split(b"\n") if line.strip())
        else:
            data = store.read(f.name)
            try:
                total += pq.ParquetFile(io.BytesIO(data)).metadata.num_rows
            except (pa.ArrowException, ValueError, OSError) as exc:
                raise CorruptLogError(f"{store.display(f.name)}: not a readable Parquet checkpoint ({exc})", path=f.name) from None
    return total

