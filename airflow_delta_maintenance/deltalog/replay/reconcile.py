"""Replay a log segment: reconcile actions into the state of one version (PROTOCOL "Action Reconciliation")."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError, DeltaLogError, MissingCommitError, MissingSidecarError
from ..log_segment.segment import CatalogCommit, JsonSource, LogSegment, is_single_commit
from ..model.actions import DomainMetadata, Metadata, NonFileState, Protocol, Txn
from ..model.partition_keys import partition_value_keys
from ..model.paths import SIDECAR_DIR, LogFileType, ParsedLogPath
from ..model.validation import require_commit_content
from ..stats.pipeline import StatsPipeline, slice_rows, stats_plan_for
from ..storage import LogStore
from . import file_keys
from .ndjson import parse_ndjson
from .parquet import check_partition_value_keys, read_parquet_actions
from .parsed_actions import ORDER, PLACEHOLDER_ORDER, ParsedActions
from .strict_actions import canonical_paths
from .tail_check import mark_validated
from .version_facts import in_commit_timestamp  # noqa: F401  (moved to the light module; re-exported)

__all__ = ["UnreconciledCompactionError", "UnreadableCheckpointError", "ReplayResult", "replay_actions", "file_action_keys", "reconcile_file_actions", "DV_ID"]

DV_ID = "dv_unique_id"
STATS_PARSED = "stats_parsed"  # the column the statistics ride in through reconciliation


@dataclass
class ReplayResult:
    protocol: Protocol | None
    metadata: Metadata | None
    adds: pa.Table  # live adds, ADD_FIELDS + dv_unique_id, in replay order
    removes: pa.Table  # tombstones (all, or only unexpired when a cutoff was given)
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]  # latest per domain, tombstones (removed=True) included
    commit_infos: dict[int, dict[str, Any]]  # version -> commitInfo of commits read
    sidecars: list[dict[str, Any]] = field(default_factory=list)  # sidecar actions of a V2 checkpoint
    checkpoint_metadata: dict[str, Any] | None = None
    deltas: ParsedActions | None = None  # the parsed JSON deltas, with their original lines
    delta_base_order: int = 0
    stats_parsed: pa.ChunkedArray | None = None  # with parse_stats: the statistics of `adds`, row for row


def file_action_keys(table: pa.Table) -> pa.Array:
    """``deletionVector.uniqueId`` per row (``<storageType><pathOrInlineDv>[@<offset>]``), null without a DV."""
    dv = table.column("deletionVector")
    if dv.null_count == len(dv):  # no deletion vectors (the common case): no keys to build
        return pa.nulls(len(dv), pa.string())
    storage = pc.struct_field(dv, "storageType")
    path = pc.struct_field(dv, "pathOrInlineDv")
    offset = pc.struct_field(dv, "offset").cast(pa.string())
    suffix = pc.if_else(pc.is_null(offset), "", pc.binary_join_element_wise("@", offset, ""))
    return pc.binary_join_element_wise(storage, path, suffix, "")


def _codes(values: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Dense integer code per value (equal values, equal codes; all nulls one code) and the
    number of distinct values."""
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    if encoded.num_chunks == 0:
        return np.zeros(0, np.int64), 0
    # one hash table across chunks: every chunk's indices refer to the final, shared dictionary
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in encoded.chunks]).astype(np.int64)
    return codes, len(encoded.chunks[-1].dictionary)


def _winners(tables: Sequence[pa.Table]) -> np.ndarray | None:
    """``won[order]`` is True for the newest action per ``(path, dv unique id)``; None if every
    action is the only one for its file. Hashes the keys once (no group-by table is built)."""
    paths = pa.chunked_array([c for t in tables for c in canonical_paths(t.column("path")).chunks], pa.string())
    if len(paths) == 0:
        return None
    dvs = pa.chunked_array([c for t in tables for c in t.column(DV_ID).chunks], pa.string())
    if dvs.null_count == len(dvs):  # no deletion vectors (the common case): the key is the path alone
        orders = np.concatenate([t.column(ORDER).to_numpy() for t in tables])
        # cut like the paths: a regex rewrite of file: paths may have chunked them differently
        chunk_orders = np.split(orders, np.cumsum([len(c) for c in paths.chunks])[:-1])
        native = file_keys.newest_orders(paths.chunks, chunk_orders, max(int(orders.max()), 0) + 1)
        if native is not None:
            won, distinct = native
            return None if distinct == len(paths) else won
    key, distinct = _codes(paths)
    if dvs.null_count != len(dvs):  # deletion vectors: the key is (path, dv)
        dv_codes, dv_distinct = _codes(pc.fill_null(dvs, ""))
        key, inverse = np.unique(key * dv_distinct + dv_codes, return_inverse=True)
        distinct, key = len(key), inverse.ravel()
    if distinct == len(paths):
        return None
    # Placeholder rows (order -1, null path) share one code and never win: a group's newest order
    # stays -1 only when it holds nothing else.
    orders = np.concatenate([t.column(ORDER).to_numpy() for t in tables])
    newest = np.full(distinct, PLACEHOLDER_ORDER, dtype=np.int64)
    np.maximum.at(newest, key, orders)
    won = np.zeros(max(int(orders.max()), 0) + 1, dtype=bool)
    won[newest[newest != PLACEHOLDER_ORDER]] = True
    return won


class UnreconciledCompactionError(DeltaLogError):
    """A compaction file holds more than one action for the same logical file, so the order of
    its lines cannot say which one is newer; readers must use the commits instead."""


class UnreadableCheckpointError(CorruptLogError):
    """The segment's checkpoint (a part or a sidecar) cannot be read; readers fall back to an
    older checkpoint, as delta-spark does when loading from a checkpoint fails."""


def _check_compactions(segment: LogSegment, deltas: ParsedActions, base: int, names: list[str]) -> None:
    firsts = deltas.source_first_line
    for i, d in enumerate(segment.deltas):
        if isinstance(d, CatalogCommit) or d.end_version == d.version:
            continue
        lo = base + firsts[i]
        hi = base + firsts[i + 1] if i + 1 < len(firsts) else None
        keys = []
        for t in (deltas.adds, deltas.removes):
            order = t.column(ORDER)
            mask = pc.greater_equal(order, lo) if hi is None else pc.and_(pc.greater_equal(order, lo), pc.less(order, hi))
            keys.append(t.filter(mask).select(["path", "deletionVector"]).append_column("dv", file_action_keys(t.filter(mask))).select(["path", "dv"]))
        both = pa.concat_tables(keys)
        both = both.set_column(1, "dv", pc.fill_null(both.column("dv"), "")).set_column(0, "path", canonical_paths(both.column("path")))
        if both.group_by(["path", "dv"]).aggregate([]).num_rows != both.num_rows:
            raise UnreconciledCompactionError(f"{names[i]} repeats a logical file; it is not a reconciled compaction", path=d.name)


def reconcile_file_actions(
    batches: list[list[pa.RecordBatch]],
    schemas: list[pa.Schema],
    tombstone_cutoff_ms: int | None = None,
    late_add_column: Callable[[], tuple[pa.Field, pa.ChunkedArray] | None] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Keep the newest action per ``(path, dv unique id)`` of ``batches = [adds, removes]``; adds
    that lost are dropped, and so are a checkpoint's placeholder rows and removes that lost or
    expired (``deletionTimestamp`` ≤ cutoff; a missing timestamp counts as 0). The lists are
    consumed: each input batch is released as soon as its winners are copied, so the file actions
    never exist twice in memory. ``late_add_column`` is asked, once the winners are known, for a
    column of every add row (as many rows as the add batches together) filtered with them."""
    for i, kind in enumerate(batches):
        batches[i] = [b.append_column(DV_ID, file_action_keys(b)) for b in kind]
        schemas[i] = schemas[i].append(pa.field(DV_ID, pa.string()))
    won = _winners([pa.Table.from_batches(kind, schema) for kind, schema in zip(batches, schemas, strict=True)])
    late = late_add_column() if late_add_column is not None else None
    if late is not None:
        late_field, column = late
        pieces = slice_rows(column, [b.num_rows for b in batches[0]])
        batches[0] = [b.append_column(late_field, p) for b, p in zip(batches[0], pieces, strict=True)]
        schemas[0] = schemas[0].append(late_field)
    out = []
    for kind, schema in zip(batches, schemas, strict=True):
        kept = []
        kind.reverse()
        while kind:
            b = kind.pop()
            orders = b.column(ORDER).to_numpy()
            real = orders != PLACEHOLDER_ORDER
            keep = real if won is None else real & won[np.where(real, orders, 0)]
            if not keep.all():  # most batches lose nothing: no copy for them
                b = b.filter(keep)
            kept.append(b)
        out.append(pa.Table.from_batches(kept, schema))
    adds, removes = out
    if tombstone_cutoff_ms is not None and removes.num_rows:
        ts = pc.fill_null(removes.column("deletionTimestamp"), 0)
        removes = removes.filter(pc.greater(ts, tombstone_cutoff_ms))
    return adds, removes


def _sidecar_name(path: str) -> str:
    # `sidecar.path` is the bare file name (delta-spark), or a path ending in _sidecars/<name>.
    return f"{SIDECAR_DIR}/{path.rsplit('/', 1)[-1]}"


def _read_checkpoint(store: LogStore, files: tuple[ParsedLogPath, ...]) -> tuple[list[ParsedActions], int]:
    parts: list[ParsedActions] = []
    read: list[tuple[str, int]] = []  # each part's name and first order
    order = 0
    contents = store.read_many(f.name for f in files)
    for f in files:
        data = contents[f.name]
        read.append((store.display(f.name), order))
        if f.type is LogFileType.CHECKPOINT_UUID and f.extension == "json":
            parsed = parse_ndjson([(store.display(f.name), data)], base_order=order)
            order += parsed.adds.num_rows + parsed.removes.num_rows + len(parsed.others) + 1
        else:
            parsed, rows = read_parquet_actions(store.display(f.name), data, base_order=order)
            order += rows
        parts.append(parsed)
    sidecars = [a["sidecar"] for p in parts for _, _, _, a in p.others if a.get("sidecar")]
    if sidecars:
        names = [_sidecar_name(s["path"]) for s in sidecars]
        try:
            side_data = store.read_many(names)
        except FileNotFoundError:
            side_data = {}
        for name in names:
            if name not in side_data:
                if not store.exists(name):
                    raise MissingSidecarError(
                        f"{store.display(name)} is referenced by checkpoint {files[0].name} but does not exist",
                        path=name,
                    )
                side_data[name] = store.read(name)
            read.append((store.display(name), order))
            parsed, rows = read_parquet_actions(store.display(name), side_data[name], base_order=order)
            order += rows
            parts.append(ParsedActions(parsed.adds, parsed.removes, []))
    # every add's partition-value keys are the checkpoint's own partition columns, whichever part
    # (or sidecar) holds the add and whichever holds the metaData
    metadata = [a["metaData"] for p in parts for _, _, _, a in p.others if a.get("metaData")]
    allowed = partition_value_keys(metadata[-1]) if len(metadata) == 1 else None
    if allowed is not None:
        for part, (name, base) in zip(parts, read, strict=True):
            check_partition_value_keys(part.adds, allowed, name, base)
    return parts, order


# JSON sources are parsed in batches of about this many bytes: parsing memory stays bounded by the
# batch, not the log, and no file's bytes outlive its batch.
DELTA_BATCH_BYTES = 16 << 20


def _delta_batches(segment: LogSegment, batch_bytes: int) -> list[list[JsonSource]]:
    batches: list[list[JsonSource]] = [[]]
    size = 0
    for d in segment.deltas:
        if batches[-1] and size + d.size > batch_bytes:
            batches.append([])
            size = 0
        batches[-1].append(d)
        size += d.size
    return batches


def _read_deltas(store: LogStore, deltas: list[JsonSource]) -> list[tuple[str, bytes]]:
    published = [d.name for d in deltas if isinstance(d, ParsedLogPath)]
    staged = [d.file_name for d in deltas if isinstance(d, CatalogCommit) and d.inline_content is None]
    try:
        contents = store.read_many(published + staged)
    except FileNotFoundError as exc:
        missing = next((n for n in published + staged if not store.exists(n)), str(exc))
        raise MissingCommitError(
            f"{store.display(missing)} disappeared while reading the log", version=-1, path=missing
        ) from None
    out = []
    for d in deltas:
        if isinstance(d, CatalogCommit):
            data = d.inline_content if d.inline_content is not None else contents.pop(d.file_name)
            out.append((store.display(d.source_name) if d.file_name else d.source_name, data))
        else:
            out.append((store.display(d.name), contents.pop(d.name)))
        if is_single_commit(d):
            require_commit_content(*out[-1])
    return out



def _parse_deltas(
    store: LogStore,
    segment: LogSegment,
    base: int,
    partition_columns: list[str],
    *,
    keys_only: bool,
    keep_lines: bool,
    batch_bytes: int,
    on_part: Callable[[ParsedActions], None] | None = None,
    partition_keys: frozenset[str] | None = None,
) -> tuple[ParsedActions, list[str]]:
    """Parse the JSON deltas batch by batch into one ``ParsedActions`` (orders continue across
    batches); returns it with the display name of every source. ``on_part`` sees each batch's
    actions as soon as they are parsed."""
    names: list[str] = []
    adds, removes, lines = [], [], []
    others: list[tuple[int, int, int, dict[str, Any]]] = []
    odd_lines: dict[int, bytes] = {}
    first_lines: list[int] = []
    offset = 0
    # Original lines are taken by random index later: one batch keeps them in one buffer.
    for batch in _delta_batches(segment, sys.maxsize if keep_lines else batch_bytes):
        sources = _read_deltas(store, batch)
        part = parse_ndjson(sources, base_order=base + offset, keys_only=keys_only, partition_columns=partition_columns, keep_lines=keep_lines,
                            single_commit=[is_single_commit(d) for d in batch], consume=not keep_lines,
                            partition_keys=partition_keys)
        first_source = len(names)
        names.extend(name for name, _ in sources)
        del sources
        mark_validated(store, batch)
        if on_part is not None:
            on_part(part)
        adds.append(part.adds)
        removes.append(part.removes)
        if part.lines is not None:
            lines.append(part.lines)
        others.extend((o, s + first_source, line, a) for o, s, line, a in part.others)
        odd_lines.update({i + offset: raw for i, raw in part.odd_lines.items()})
        first_lines.extend(i + offset for i in part.source_first_line)
        for _, _, _, action in part.others:
            if action.get("metaData") is not None:  # later batches declare the current partitioning
                partition_columns = sorted((action["metaData"] or {}).get("partitionColumns") or ())
                partition_keys = partition_value_keys(action["metaData"] or {})
        offset += part.num_lines
    kept = (lines[0] if len(lines) == 1 else pa.chunked_array(lines, pa.large_binary())) if keep_lines else None
    merged = ParsedActions(pa.concat_tables(adds), pa.concat_tables(removes), others, kept, odd_lines, first_lines, offset)
    return merged, names


def replay_actions(
    store: LogStore,
    segment: LogSegment,
    *,
    tombstone_cutoff_ms: int | None = None,
    include_checkpoint: bool = True,
    keys_only: bool = False,
    keep_lines: bool = False,
    parse_stats: bool = False,
    partition_columns: Sequence[str] = (),
    partition_keys: frozenset[str] | None = None,
) -> ReplayResult:
    """Reconcile the checkpoint (with its sidecars) and the deltas of ``segment``.

    ``keys_only`` parses only the fields reconciliation needs from JSON file actions (the other
    columns are null); for callers that only need which actions won, like compaction.
    ``keep_lines`` keeps the original bytes of the JSON lines in ``ReplayResult.deltas``.
    ``parse_stats`` also returns the live files' statistics typed (``ReplayResult.stats_parsed``),
    parsed on a thread pool while the replay goes on. ``partition_columns``: the table's, when the
    segment has neither a checkpoint nor a metaData to say (a compaction window): the strict reader
    declares them; ``partition_keys``: the partition-value keys its adds may carry then
    (``partition_value_keys``).
    """
    if not parse_stats or keys_only:
        return _replay(store, segment, tombstone_cutoff_ms, include_checkpoint, keys_only, keep_lines, None, partition_columns, partition_keys)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="delta-stats") as pool:
        return _replay(store, segment, tombstone_cutoff_ms, include_checkpoint, keys_only, keep_lines, StatsPipeline(pool), partition_columns,
                       partition_keys)


def _feed(pipeline: StatsPipeline | None, part: ParsedActions) -> None:
    if pipeline is not None:
        pipeline.observe(part.others)
        pipeline.submit(part.adds)


def _replay(
    store: LogStore,
    segment: LogSegment,
    tombstone_cutoff_ms: int | None,
    include_checkpoint: bool,
    keys_only: bool,
    keep_lines: bool,
    pipeline: StatsPipeline | None,
    known_partition_columns: Sequence[str] = (),
    known_partition_keys: frozenset[str] | None = None,
) -> ReplayResult:
    parts: list[ParsedActions] = []
    base = 0
    if include_checkpoint and segment.checkpoint is not None:
        try:
            parts, base = _read_checkpoint(store, segment.checkpoint.files)
        except (CorruptLogError, MissingSidecarError, FileNotFoundError) as exc:
            first = segment.checkpoint.files[0].name
            raise UnreadableCheckpointError(f"checkpoint {store.display(first)} cannot be read: {exc}", path=first) from exc
        for part in parts:
            _feed(pipeline, part)
    metadata_bodies = [a["metaData"] for part in parts for _, _, _, a in part.others if a.get("metaData")]
    partition_columns = {c for m in metadata_bodies for c in (m.get("partitionColumns") or ())} or set(known_partition_columns)
    partition_keys = partition_value_keys(metadata_bodies[-1]) if metadata_bodies else known_partition_keys
    deltas, names = _parse_deltas(
        store,
        segment,
        base,
        sorted(partition_columns),
        keys_only=keys_only,
        keep_lines=keep_lines,
        batch_bytes=DELTA_BATCH_BYTES,
        on_part=None if pipeline is None else lambda part: _feed(pipeline, part),
        partition_keys=partition_keys,
    )
    _check_compactions(segment, deltas, base, names)
    parts.append(deltas)

    source_versions = [d.version for d in segment.deltas]
    single_commit = [isinstance(d, CatalogCommit) or d.end_version == d.version for d in segment.deltas]
    state = NonFileState()
    commit_infos: dict[int, dict[str, Any]] = {}
    sidecars: list[dict[str, Any]] = []
    checkpoint_metadata = None
    for part in parts:
        from_deltas = part is deltas
        for _, s, line, action in part.others:
            try:
                if state.take(action):
                    continue
                if (c := action.get("commitInfo")) is not None:
                    if from_deltas and single_commit[s]:
                        commit_infos.setdefault(source_versions[s], c)
                elif (sc := action.get("sidecar")) is not None and not from_deltas:
                    sidecars.append(sc)
                elif (cm := action.get("checkpointMetadata")) is not None and not from_deltas:
                    checkpoint_metadata = cm
            except (KeyError, TypeError, ValueError) as exc:
                name = names[s] if from_deltas else (segment.checkpoint.files[0].name if segment.checkpoint else "?")
                raise CorruptLogError(f"{name}: line {line}: malformed action {exc!s}", path=name, line=line or None) from None
    batches = [[b for p in parts for b in p.adds.to_batches()], [b for p in parts for b in p.removes.to_batches()]]
    schemas = [deltas.adds.schema, deltas.removes.schema]
    for p in parts:  # only `batches` holds the file actions now: reconciliation releases them as it goes
        p.adds = p.adds.schema.empty_table()  # (a zero-length slice would keep the buffers alive)
        p.removes = p.removes.schema.empty_table()
    del parts
    late_stats = None
    if pipeline is not None and state.protocol is not None and state.metadata is not None:
        plan = stats_plan_for(state.protocol, state.metadata)
        rows = sum(b.num_rows for b in batches[0])

        def late_stats() -> tuple[pa.Field, pa.ChunkedArray] | None:
            parsed = pipeline.result(plan, rows)
            return None if parsed is None else (pa.field(STATS_PARSED, plan.final_type), parsed)

    adds, removes = reconcile_file_actions(batches, schemas, tombstone_cutoff_ms, late_stats)
    stats_parsed = None
    if STATS_PARSED in adds.column_names:
        stats_parsed = adds.column(STATS_PARSED)
        adds = adds.drop_columns([STATS_PARSED])
    return ReplayResult(
        protocol=state.protocol,
        metadata=state.metadata,
        adds=adds,
        removes=removes,
        txns=state.txns,
        domains=state.domains,
        commit_infos=commit_infos,
        sidecars=sidecars,
        checkpoint_metadata=checkpoint_metadata,
        deltas=deltas if keep_lines else None,
        delta_base_order=base,
        stats_parsed=stats_parsed,
    )
