"""Replay a log segment: reconcile actions into the state of one version (PROTOCOL "Action Reconciliation")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .actions import DomainMetadata, Metadata, Protocol, Txn
from .errors import CorruptLogError, DeltaLogError, MissingCommitError, MissingSidecarError
from .log_segment import CatalogCommit, LogSegment
from .paths import SIDECAR_DIR, LogFileType, ParsedLogPath
from .reader import ORDER, ParsedActions, parse_ndjson, read_parquet_actions
from .storage import LogStore

__all__ = ["UnreconciledCompactionError", "ReplayResult", "replay_actions", "file_action_keys", "reconcile_file_actions", "DV_ID"]

DV_ID = "dv_unique_id"


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


def file_action_keys(table: pa.Table) -> pa.Array:
    """``deletionVector.uniqueId`` per row (``<storageType><pathOrInlineDv>[@<offset>]``), null without a DV."""
    dv = table.column("deletionVector")
    storage = pc.struct_field(dv, "storageType")
    path = pc.struct_field(dv, "pathOrInlineDv")
    offset = pc.struct_field(dv, "offset").cast(pa.string())
    suffix = pc.if_else(pc.is_null(offset), "", pc.binary_join_element_wise("@", offset, ""))
    return pc.binary_join_element_wise(storage, path, suffix, "")


def canonical_paths(paths: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Key form of file paths: ``file:/x`` and ``file:///x`` name the same file as ``/x``
    (delta-spark canonicalises paths before reconciling; golden tables canonicalized-paths-*)."""
    if len(paths) == 0 or not pc.any(pc.starts_with(paths, "file:")).as_py():
        return paths
    return pc.replace_substring_regex(paths, pattern="^file:(?://)?/", replacement="/")


def _key_table(t: pa.Table) -> pa.Table:
    return pa.table({"path": canonical_paths(t.column("path")), "dv": pc.fill_null(t.column(DV_ID), ""), ORDER: t.column(ORDER)})


class UnreconciledCompactionError(DeltaLogError):
    """A compaction file holds more than one action for the same logical file, so the order of
    its lines cannot say which one is newer; readers must use the commits instead."""


def _check_compactions(segment: LogSegment, deltas: ParsedActions, base: int, sources: list[tuple[str, bytes]]) -> None:
    bounds = [*deltas.source_first_line, None]
    for i, d in enumerate(segment.deltas):
        if isinstance(d, CatalogCommit) or d.end_version == d.version:
            continue
        lo = base + bounds[i]
        hi = base + bounds[i + 1] if bounds[i + 1] is not None else None
        keys = []
        for t in (deltas.adds, deltas.removes):
            order = t.column(ORDER)
            mask = pc.greater_equal(order, lo) if hi is None else pc.and_(pc.greater_equal(order, lo), pc.less(order, hi))
            keys.append(t.filter(mask).select(["path", "deletionVector"]).append_column("dv", file_action_keys(t.filter(mask))).select(["path", "dv"]))
        both = pa.concat_tables(keys)
        both = both.set_column(1, "dv", pc.fill_null(both.column("dv"), "")).set_column(0, "path", canonical_paths(both.column("path")))
        if both.group_by(["path", "dv"]).aggregate([]).num_rows != both.num_rows:
            raise UnreconciledCompactionError(f"{sources[i][0]} repeats a logical file; it is not a reconciled compaction", path=d.name)


def reconcile_file_actions(
    adds: pa.Table, removes: pa.Table, tombstone_cutoff_ms: int | None = None
) -> tuple[pa.Table, pa.Table]:
    """Keep the newest action per ``(path, dv unique id)``; adds that lost are dropped, and so are
    removes that lost or expired (``deletionTimestamp`` ≤ cutoff; a missing timestamp counts as 0)."""
    adds = adds.append_column(DV_ID, file_action_keys(adds))
    removes = removes.append_column(DV_ID, file_action_keys(removes))
    keys = pa.concat_tables([_key_table(adds), _key_table(removes)])
    if keys.num_rows:
        winners = keys.group_by(["path", "dv"], use_threads=False).aggregate([(ORDER, "max")]).column(f"{ORDER}_max")
        if len(winners) != keys.num_rows:  # some file was touched more than once
            adds = adds.filter(pc.is_in(adds.column(ORDER), value_set=winners))
            removes = removes.filter(pc.is_in(removes.column(ORDER), value_set=winners))
    if tombstone_cutoff_ms is not None and removes.num_rows:
        ts = pc.fill_null(removes.column("deletionTimestamp"), 0)
        removes = removes.filter(pc.greater(ts, tombstone_cutoff_ms))
    return adds, removes


def _sidecar_name(path: str) -> str:
    # `sidecar.path` is the bare file name (delta-spark), or a path ending in _sidecars/<name>.
    return f"{SIDECAR_DIR}/{path.rsplit('/', 1)[-1]}"


def _read_checkpoint(store: LogStore, files: tuple[ParsedLogPath, ...]) -> tuple[list[ParsedActions], int]:
    parts: list[ParsedActions] = []
    order = 0
    contents = store.read_many(f.name for f in files)
    for f in files:
        data = contents[f.name]
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
            parsed, rows = read_parquet_actions(store.display(name), side_data[name], base_order=order)
            order += rows
            parts.append(ParsedActions(parsed.adds, parsed.removes, []))
    return parts, order


def _read_deltas(store: LogStore, segment: LogSegment) -> list[tuple[str, bytes]]:
    published = [d.name for d in segment.deltas if isinstance(d, ParsedLogPath)]
    staged = [d.file_name for d in segment.deltas if isinstance(d, CatalogCommit) and d.inline_content is None]
    try:
        contents = store.read_many(published + staged)
    except FileNotFoundError as exc:
        missing = next((n for n in published + staged if not store.exists(n)), str(exc))
        raise MissingCommitError(
            f"{store.display(missing)} disappeared while reading the log", version=-1, path=missing
        ) from None
    out = []
    for d in segment.deltas:
        if isinstance(d, CatalogCommit):
            data = d.inline_content if d.inline_content is not None else contents[d.file_name]
            out.append((store.display(d.source_name) if d.file_name else d.source_name, data))
        else:
            out.append((store.display(d.name), contents[d.name]))
    return out


def replay_actions(
    store: LogStore,
    segment: LogSegment,
    *,
    tombstone_cutoff_ms: int | None = None,
    include_checkpoint: bool = True,
    keys_only: bool = False,
) -> ReplayResult:
    """Reconcile the checkpoint (with its sidecars) and the deltas of ``segment``.

    ``keys_only`` parses only the fields reconciliation needs from JSON file actions (the other
    columns are null); for callers that only need which actions won, like compaction.
    """
    parts: list[ParsedActions] = []
    base = 0
    if include_checkpoint and segment.checkpoint is not None:
        parts, base = _read_checkpoint(store, segment.checkpoint.files)
    sources = _read_deltas(store, segment)
    partition_columns = {
        c for part in parts for _, _, _, a in part.others if a.get("metaData") for c in (a["metaData"].get("partitionColumns") or ())
    }
    deltas = parse_ndjson(sources, base_order=base, keys_only=keys_only, partition_columns=sorted(partition_columns))
    _check_compactions(segment, deltas, base, sources)
    parts.append(deltas)

    source_versions = [d.version for d in segment.deltas]
    single_commit = [isinstance(d, CatalogCommit) or d.end_version == d.version for d in segment.deltas]
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = {}
    domains: dict[str, DomainMetadata] = {}
    commit_infos: dict[int, dict[str, Any]] = {}
    sidecars: list[dict[str, Any]] = []
    checkpoint_metadata = None
    for i, part in enumerate(parts):
        from_deltas = part is deltas
        for _, s, line, action in part.others:
            try:
                if (p := action.get("protocol")) is not None:
                    protocol = Protocol.from_dict(p)
                elif (m := action.get("metaData")) is not None:
                    metadata = Metadata.from_dict(m)
                elif (t := action.get("txn")) is not None:
                    txn = Txn.from_dict(t)
                    txns[txn.app_id] = txn
                elif (d := action.get("domainMetadata")) is not None:
                    dm = DomainMetadata.from_dict(d)
                    domains[dm.domain] = dm
                elif (c := action.get("commitInfo")) is not None:
                    if from_deltas and single_commit[s]:
                        commit_infos.setdefault(source_versions[s], c)
                elif (sc := action.get("sidecar")) is not None and not from_deltas:
                    sidecars.append(sc)
                elif (cm := action.get("checkpointMetadata")) is not None and not from_deltas:
                    checkpoint_metadata = cm
            except (KeyError, TypeError, ValueError) as exc:
                name = sources[s][0] if from_deltas else (segment.checkpoint.files[0].name if segment.checkpoint else "?")
                raise CorruptLogError(f"{name}: line {line}: malformed action {exc!s}", path=name, line=line or None) from None
    adds = pa.concat_tables([p.adds for p in parts])
    removes = pa.concat_tables([p.removes for p in parts])
    adds, removes = reconcile_file_actions(adds, removes, tombstone_cutoff_ms)
    return ReplayResult(
        protocol=protocol,
        metadata=metadata,
        adds=adds,
        removes=removes,
        txns=txns,
        domains=domains,
        commit_infos=commit_infos,
        sidecars=sidecars,
        checkpoint_metadata=checkpoint_metadata,
        deltas=deltas,
        delta_base_order=base,
    )


def in_commit_timestamp(commit_info: Mapping[str, Any] | None) -> int | None:
    if not commit_info:
        return None
    value = commit_info.get("inCommitTimestamp")
    return int(value) if isinstance(value, (int, float, np.integer)) else None
