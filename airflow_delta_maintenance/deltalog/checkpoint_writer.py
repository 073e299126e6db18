"""Write a checkpoint for a published version: classic V1, classic-named V2, or UUID-named V2 with sidecars.

The content follows PROTOCOL "Checkpoints" and delta-spark's writer: protocol, metadata, live
domain metadata, txns, then file actions, all with ``dataChange=false``; unexpired
tombstones only, without ``stats`` and ``tags``; ``stats`` / ``stats_parsed`` /
``partitionValues_parsed`` per the table's properties; compression per
``delta.parquet.compression.codec`` (zstd by default). Never multi-part.

Visibility: every file is created if absent and whole (sidecars first, the top-level file last),
so a reader sees the checkpoint complete or not at all. ``_last_checkpoint`` is written after it,
and only when newer than the current hint.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from . import checkpoint_schema as cs
from .actions import DomainMetadata, Metadata, Protocol, Txn
from .errors import InvalidTablePropertyError, LogFileExistsError, UnpublishedVersionError, UnsupportedFeatureError
from .last_checkpoint import LastCheckpointHint, parse_last_checkpoint
from .listing import LogSegmentFiles, list_log_files
from .log_segment import CatalogCommit
from .paths import LAST_CHECKPOINT, SIDECAR_DIR, LogFileType, classic_checkpoint_name, uuid_checkpoint_name
from .schema import partition_values_type, stats_parse_plan
from .snapshot import Snapshot
from .storage import LogStore
from .table_properties import TableProperties

__all__ = [
    "SUPPORTED_WRITER_FEATURES",
    "CheckpointResult",
    "check_writer_features",
    "checkpoint_actions_table",
    "non_file_rows",
    "checkpoint_num_rows",
    "checkpoint_codec",
    "write_checkpoint",
    "update_last_checkpoint",
]

# Writer features whose rules a checkpoint writer can honour: it copies reconciled actions, so a
# feature is supported when it adds no checkpoint-specific obligation we do not implement.
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "columnMapping",
        "changeDataFeed",
        "identityColumns",
        "deletionVectors",
        "rowTracking",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "inCommitTimestamp",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "checkpointProtection",
        "coordinatedCommits-preview",
        "catalogManaged",
        "catalogOwned-preview",
        "allowColumnDefaults",
        "collations-preview",
        "materializePartitionColumns",
        "collations",
    }
)
_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4", "lz4_raw": "lz4", "brotli": "brotli", "uncompressed": "none", "none": "none"}
_CHECKPOINT_REMOVE_FIELDS = [f for f in cs.REMOVE_FIELDS if f.name not in ("tags", "stats")]


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


def check_writer_features(protocol: Protocol, *, operation: str, path: str | None = None) -> None:
    """Refuse tables whose writer features we do not understand, naming them."""
    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"{operation}: writer version {protocol.min_writer_version} is not supported", features=[f"writerVersion{protocol.min_writer_version}"], path=path
        )
    unknown = sorted(set(protocol.writer_features or ()) - SUPPORTED_WRITER_FEATURES)
    if unknown:
        raise UnsupportedFeatureError(f"{operation}: unsupported writer features {', '.join(unknown)}", features=unknown, path=path)


def checkpoint_codec(properties: TableProperties) -> str:
    raw = properties.compression_codec
    if raw not in _CODECS:
        raise InvalidTablePropertyError(f"delta.parquet.compression.codec: unsupported codec {raw!r}", key="delta.parquet.compression.codec")
    return _CODECS[raw]


# ---- content ---------------------------------------------------------------------------------------


def _stats_parsed(stats: pa.Array, snapshot: Snapshot) -> pa.Array | None:
    """Parse the ``stats`` JSON column into ``stats_parsed`` in one pyarrow JSON read; None if impossible."""
    with_dv = snapshot.protocol.has_writer_feature("deletionVectors")
    plan = stats_parse_plan(snapshot.metadata.schema, snapshot.metadata.partition_columns, with_dv)
    n = len(stats)
    if n == 0:
        return pa.nulls(0, plan.final_type)
    text = pc.fill_null(stats, "{}")
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text), "\n")[0].as_buffer()
    try:
        table = pj.read_json(
            pa.BufferReader(joined),
            read_options=pj.ReadOptions(block_size=max(1 << 20, joined.size // 4 + 1)),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(plan.read_type)), unexpected_field_behavior="ignore"),
        )
        if table.num_rows != n:
            return None
        parsed = pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in plan.read_type], fields=list(plan.read_type))
        parsed = parsed.cast(plan.final_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return pa.StructArray.from_arrays(
        [parsed.field(i) for i in range(parsed.type.num_fields)], fields=list(plan.final_type), mask=stats.is_null()
    )


def _partition_values_parsed(pv: pa.Array, snapshot: Snapshot) -> pa.Array | None:
    typ = partition_values_type(snapshot.metadata.schema, snapshot.metadata.partition_columns)
    if typ is None or typ.num_fields == 0:
        return None
    children = []
    try:
        for col, target in zip(snapshot.metadata.partition_columns, typ):
            physical = target.name
            values = pc.map_lookup(pv, physical, "first")
            if physical != col:  # older writers key partitionValues by logical name
                values = pc.coalesce(values, pc.map_lookup(pv, col, "first"))
            values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values) if not pa.types.is_string(target.type) else values
            children.append(values.cast(target.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.StructArray.from_arrays(children, fields=list(typ))


def _struct(table: pa.Table, fields: Sequence[pa.Field]) -> pa.StructArray:
    return pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in fields], fields=list(fields))


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


def checkpoint_actions_table(snapshot: Snapshot, *, v2: bool, with_file_actions: bool = True) -> tuple[pa.Table, pa.Table, bool]:
    """(non-file rows, file-action rows (adds, then tombstones), whether stats_parsed was written).

    Both tables share one schema, so they can be concatenated or written separately (sidecars).
    """
    props = snapshot.properties
    adds = snapshot.files
    add_fields = [f for f in cs.ADD_FIELDS if f.name != "stats" or props.write_stats_as_json]
    add_columns = {f.name: adds.column(f.name) for f in add_fields}
    add_columns["dataChange"] = pa.array([False] * adds.num_rows, pa.bool_())
    stats_parsed = None
    pv_parsed = None
    if props.write_stats_as_struct:
        stats_parsed = _stats_parsed(adds.column("stats").combine_chunks(), snapshot)
        if snapshot.metadata.partition_columns:
            pv_parsed = _partition_values_parsed(adds.column("partitionValues").combine_chunks(), snapshot)
    fields = list(add_fields)
    if pv_parsed is not None:
        fields.append(pa.field("partitionValues_parsed", pv_parsed.type))
        add_columns["partitionValues_parsed"] = pv_parsed
    if stats_parsed is not None:
        fields.append(pa.field("stats_parsed", stats_parsed.type))
        add_columns["stats_parsed"] = stats_parsed
    add_struct = pa.StructArray.from_arrays(
        [add_columns[f.name].combine_chunks() if isinstance(add_columns[f.name], pa.ChunkedArray) else add_columns[f.name] for f in fields],
        fields=fields,
    )
    tomb = snapshot.tombstones
    remove_columns = {f.name: tomb.column(f.name) for f in _CHECKPOINT_REMOVE_FIELDS}
    remove_columns["dataChange"] = pa.array([False] * tomb.num_rows, pa.bool_())
    remove_struct = pa.StructArray.from_arrays(
        [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in remove_columns.values()], fields=_CHECKPOINT_REMOVE_FIELDS
    )

    columns: list[tuple[str, pa.DataType]] = [
        ("txn", cs.TXN_TYPE),
        ("add", add_struct.type),
        ("remove", remove_struct.type),
        ("metaData", cs.METADATA_TYPE),
        ("protocol", cs.PROTOCOL_TYPE),
        ("domainMetadata", cs.DOMAIN_METADATA_TYPE),
    ]
    if v2:
        columns += [("checkpointMetadata", cs.CHECKPOINT_METADATA_TYPE), ("sidecar", cs.SIDECAR_TYPE)]
    schema = pa.schema([pa.field(name, typ) for name, typ in columns])

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
    non_file = pa.Table.from_pylist(rows, schema=schema)

    n_add, n_rem = len(add_struct), len(remove_struct)

    def column(name: str, typ: pa.DataType) -> pa.Array:
        if name == "add":
            return pa.concat_arrays([add_struct, pa.nulls(n_rem, typ)])
        if name == "remove":
            return pa.concat_arrays([pa.nulls(n_add, typ), remove_struct])
        return pa.nulls(n_add + n_rem, typ)

    # Replay order, not sorted by path: the protocol does not ask for an order, and sorting
    # would copy every column of the biggest table once more.
    file_rows = pa.Table.from_arrays([column(n, t) for n, t in columns], schema=schema)
    if not with_file_actions:
        file_rows = file_rows.slice(0, 0)
    return non_file, file_rows, stats_parsed is not None


def _parquet_bytes(table: pa.Table, codec: str) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=codec)
    return buf.getvalue()


# ---- writing ---------------------------------------------------------------------------------------


def _ensure_published(store: LogStore, snapshot: Snapshot, files: LogSegmentFiles) -> None:
    unpublished = [d.version for d in snapshot.segment.deltas if isinstance(d, CatalogCommit)]
    if unpublished or snapshot.version > files.latest_commit_version and snapshot.version != snapshot.checkpoint_version:
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


def write_checkpoint(
    store: LogStore,
    snapshot: Snapshot,
    *,
    sidecar_max_actions: int = 1_000_000,
    files: LogSegmentFiles | None = None,
    classic_name: bool = False,
) -> CheckpointResult:
    """Write the checkpoint of ``snapshot.version`` (must be published); idempotent.

    ``classic_name`` forces a classic-named (V2 when the table has v2Checkpoint) checkpoint, which
    cleanup leaves behind so that old clients can read the protocol and fail cleanly.
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
        hint = LastCheckpointHint(version=v, size=checkpoint_num_rows(store, group.files), size_in_bytes=group.size_in_bytes,
                                  parts=group.expected_parts if group.expected_parts > 1 else None)
        updated = update_last_checkpoint(store, hint)
        return CheckpointResult(store.uri, v, kind, [f.name for f in group.files], existed=True, last_checkpoint_updated=updated,
                                seconds=round(time.monotonic() - started, 6))

    codec = checkpoint_codec(props)
    non_file, file_rows, has_stats_parsed = checkpoint_actions_table(snapshot, v2=v2)
    num_adds = snapshot.num_files
    written: list[str] = []
    total_bytes = 0
    if uuid_named:
        sidecar_rows = []
        n = file_rows.num_rows
        parts = max(1, -(-n // sidecar_max_actions)) if n else 0
        file_only = file_rows.select(["add", "remove"])
        for i in range(parts):
            chunk = file_only.slice(i * sidecar_max_actions, sidecar_max_actions)
            name = f"{v:020d}.checkpoint.{i + 1:010d}.{parts:010d}.{uuid.uuid4()}.parquet"
            data = _parquet_bytes(chunk, codec)
            store.put_if_absent(f"{SIDECAR_DIR}/{name}", data)
            written.append(f"{SIDECAR_DIR}/{name}")
            total_bytes += len(data)
            stat = store.stat(f"{SIDECAR_DIR}/{name}")
            sidecar_rows.append({"sidecar": {"path": name, "sizeInBytes": len(data), "modificationTime": stat.modification_time if stat else 0, "tags": None}})
        top = pa.concat_tables([non_file, pa.Table.from_pylist(sidecar_rows, schema=non_file.schema)])
        top_name = uuid_checkpoint_name(v, str(uuid.uuid4()), "parquet")
        num_actions = non_file.num_rows + n
    else:
        top = pa.concat_tables([non_file, file_rows])
        top_name = classic_checkpoint_name(v)
        num_actions = top.num_rows
    data = _parquet_bytes(top, codec)
    try:
        store.put_if_absent(top_name, data)
    except LogFileExistsError:
        # Another writer made the same checkpoint (classic names are deterministic): content is equivalent.
        for name in written:
            store.delete(name)
        return CheckpointResult(store.uri, v, kind, [top_name], existed=True, seconds=round(time.monotonic() - started, 6))
    written.append(top_name)
    total_bytes += len(data)
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
        stats_parsed=has_stats_parsed,
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
            total += pq.ParquetFile(io.BytesIO(store.read(f.name))).metadata.num_rows
    return total

