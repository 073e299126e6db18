"""From a snapshot and a plan to the engines' ``BinTask``s, and the live files as plain dicts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from ..datafiles.reader import SourceFile, source_file
from ..datafiles.stats import StatsConfig
from ..datafiles.writer import BinTask, RowTracking
from ..model.actions import Metadata, Protocol
from .plan import Bin

__all__ = ["live_adds", "bin_tasks", "task_to_json", "task_from_json", "row_tracking_columns", "row_id_high_water_mark", "ROW_TRACKING_DOMAIN", "file_key"]

ROW_TRACKING_DOMAIN = "delta.rowTracking"
_MAPS = ("partitionValues", "tags")
_COLUMNS = ("path", "partitionValues", "size", "modificationTime", "tags", "deletionVector", "baseRowId",
            "defaultRowCommitVersion", "clusteringProvider", "stats", "dv_unique_id")


def live_adds(files: pa.Table) -> list[dict[str, Any]]:
    """A snapshot's ``files`` as ``add`` dicts (maps as dicts, absent fields dropped)."""
    table = files.select([c for c in _COLUMNS if c in files.column_names])
    out = []
    for row in table.to_pylist():
        for key in _MAPS:
            value = row.get(key)
            if isinstance(value, list):
                row[key] = dict(value)
        dv = row.get("deletionVector")
        if dv:
            row["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
        out.append({k: v for k, v in row.items() if v is not None or k == "partitionValues"})
    return out


def file_key(add: Mapping[str, Any]) -> tuple[str, str | None]:
    """(path, DV id): what identifies one logical file (a changed DV is another file)."""
    dv = add.get("deletionVector")
    if not dv:
        return add["path"], None
    uid = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    if dv.get("offset") is not None:
        uid += f"@{dv['offset']}"
    return add["path"], uid


def row_tracking_columns(protocol: Protocol, metadata: Metadata) -> tuple[str, str] | None:
    """The materialised row-id and row-commit-version column names when row tracking is supported."""
    if not protocol.has_writer_feature("rowTracking"):
        return None
    conf = metadata.configuration
    rid, rcv = conf.get("delta.rowTracking.materializedRowIdColumnName"), conf.get("delta.rowTracking.materializedRowCommitVersionColumnName")
    return (rid, rcv) if rid and rcv else None


def row_id_high_water_mark(domains: Mapping[str, Any]) -> int:
    dm = domains.get(ROW_TRACKING_DOMAIN)
    if dm is None or getattr(dm, "removed", False):
        return -1
    try:
        return int(json.loads(dm.configuration).get("rowIdHighWaterMark", -1))
    except (ValueError, TypeError, AttributeError):
        return -1


def bin_tasks(
    bins: Sequence[Bin],
    protocol: Protocol,
    metadata: Metadata,
    *,
    codec: str,
    column_mapping_mode: str,
) -> list[BinTask]:
    conf = metadata.configuration
    stats = StatsConfig.from_table(conf, supports_deletion_vectors=protocol.has_writer_feature("deletionVectors"))
    rt_cols = row_tracking_columns(protocol, metadata)
    materialize = protocol.has_writer_feature("materializePartitionColumns")
    tasks = []
    for b in bins:
        rt = RowTracking(rt_cols[0], rt_cols[1], base_row_id=-1) if rt_cols else None
        tasks.append(
            BinTask(
                sources=tuple(source_file(a) for a in b.files),
                partition_values=dict(b.partition_values),
                table_schema=metadata.schema,
                partition_columns=tuple(metadata.partition_columns),
                column_mapping_mode=column_mapping_mode,
                codec=codec,
                stats=stats,
                materialize_partition_columns=materialize,
                row_tracking=rt,
                split=b.index % 100_000,
            )
        )
    return tasks



def task_to_json(task: BinTask) -> dict[str, Any]:
    """A ``BinTask`` as plain JSON (what the Spark engine hands its job: data, never code)."""
    return dataclasses.asdict(task)


def task_from_json(raw: Mapping[str, Any]) -> BinTask:
    """``task_to_json``'s inverse; a malformed task fails here, before anything is written."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("sources"), list) or not raw["sources"]:
        raise ValueError(f"an OPTIMIZE task needs a non-empty list of sources, got {str(raw)[:200]!r}")
    fields = {f.name for f in dataclasses.fields(BinTask)}
    unknown = set(raw) - fields
    if unknown:
        raise ValueError(f"an OPTIMIZE task has unknown keys {sorted(unknown)}")
    stats = dict(raw.get("stats") or {})
    if stats.get("stats_columns") is not None:
        stats["stats_columns"] = tuple(tuple(c) for c in stats["stats_columns"])
    rt = raw.get("row_tracking")
    return BinTask(**{
        **raw,
        "sources": tuple(SourceFile(**s) for s in raw["sources"]),
        "partition_values": dict(raw.get("partition_values") or {}),
        "partition_columns": tuple(raw.get("partition_columns") or ()),
        "stats": StatsConfig(**stats),
        "row_tracking": RowTracking(**rt) if rt else None,
    })
