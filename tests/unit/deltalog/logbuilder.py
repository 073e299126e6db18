"""Builders for synthetic ``_delta_log`` directories (in memory or on disk) used by unit tests."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_maintenance.deltalog.model import action_types as cs
from airflow_delta_maintenance.deltalog.model.paths import (
    classic_checkpoint_name,
    commit_name,
    multipart_checkpoint_name,
    uuid_checkpoint_name,
)

SCHEMA_STRING = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})


def protocol(reader: int = 1, writer: int = 2, reader_features: Sequence[str] | None = None, writer_features: Sequence[str] | None = None) -> dict:
    p: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        p["readerFeatures"] = list(reader_features)
    if writer_features is not None:
        p["writerFeatures"] = list(writer_features)
    return {"protocol": p}


def schema_string(partition_columns: Sequence[str] = ()) -> str:
    """The builder's schema (``x: long``) plus a string column per partition column (a valid
    metaData names its partition columns among the schema's fields)."""
    if not partition_columns:
        return SCHEMA_STRING
    extra = [{"name": c, "type": "string", "nullable": True, "metadata": {}} for c in partition_columns if c != "x"]
    return json.dumps({"type": "struct", "fields": [*json.loads(SCHEMA_STRING)["fields"], *extra]})


def metadata(configuration: Mapping[str, str] | None = None, partition_columns: Sequence[str] = (), table_id: str = "tbl-1") -> dict:
    return {
        "metaData": {
            "id": table_id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string(partition_columns),
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration or {}),
            "createdTime": 1,
        }
    }


def add(path: str, size: int = 10, *, dv: Mapping[str, Any] | None = None, partition_values: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None, stats: str | None = None, data_change: bool = True) -> dict:
    a: dict[str, Any] = {"path": path, "partitionValues": dict(partition_values or {}), "size": size, "modificationTime": 1, "dataChange": data_change}
    if dv is not None:
        a["deletionVector"] = dict(dv)
    if tags is not None:
        a["tags"] = dict(tags)
    if stats is not None:
        a["stats"] = stats
    return {"add": a}


def remove(path: str, deletion_timestamp: int | None = None, *, dv: Mapping[str, Any] | None = None) -> dict:
    r: dict[str, Any] = {"path": path, "dataChange": True}
    if deletion_timestamp is not None:
        r["deletionTimestamp"] = deletion_timestamp
    if dv is not None:
        r["deletionVector"] = dict(dv)
    return {"remove": r}


def dv(path_or_inline: str, offset: int | None = 1, storage_type: str = "u") -> dict:
    d: dict[str, Any] = {"storageType": storage_type, "pathOrInlineDv": path_or_inline, "sizeInBytes": 10, "cardinality": 1}
    if offset is not None:
        d["offset"] = offset
    return d


def commit_info(ict: int | None = None) -> dict:
    info: dict[str, Any] = {"operation": "WRITE", "timestamp": 0}
    if ict is not None:
        info["inCommitTimestamp"] = ict
    return {"commitInfo": info}


def ndjson(actions: Iterable[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(a) + "\n" for a in actions).encode()


class LogBuilder:
    """Writes log files under ``<root>/_delta_log`` on any fsspec filesystem, with explicit mtimes."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.log = f"{self.root}/_delta_log"
        fs.makedirs(self.log, exist_ok=True)

    def write(self, name: str, data: bytes, mtime_ms: int | None = None) -> str:
        path = f"{self.log}/{name}"
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, data)
        if mtime_ms is not None:
            self.set_mtime(name, mtime_ms)
        return path

    def set_mtime(self, name: str, mtime_ms: int) -> None:
        path = f"{self.log}/{name}"
        if hasattr(self.fs, "store"):  # memory
            self.fs.store[path].modified = datetime.fromtimestamp(mtime_ms / 1000, tz=timezone.utc)
        else:
            import os

            os.utime(path, (mtime_ms / 1000, mtime_ms / 1000))

    def commit(self, version: int, actions: Iterable[Mapping[str, Any]], mtime_ms: int | None = None) -> str:
        return self.write(commit_name(version), ndjson(actions), mtime_ms)

    def checkpoint(self, version: int, actions: Sequence[Mapping[str, Any]], *, parts: int = 1, write_parts: Sequence[int] | None = None,
                   uuid: str | None = None, fmt: str = "parquet", mtime_ms: int | None = None) -> list[str]:
        """A V1 (or V2 when actions hold checkpointMetadata) checkpoint; multi-part splits actions round-robin."""
        if uuid is not None:
            name = uuid_checkpoint_name(version, uuid, fmt)
            data = ndjson(actions) if fmt == "json" else checkpoint_parquet(actions)
            return [self.write(name, data, mtime_ms)]
        if parts == 1:
            return [self.write(classic_checkpoint_name(version), checkpoint_parquet(actions), mtime_ms)]
        out = []
        for part in write_parts or range(1, parts + 1):
            chunk = [a for i, a in enumerate(actions) if i % parts == part - 1]
            out.append(self.write(multipart_checkpoint_name(version, part, parts), checkpoint_parquet(chunk), mtime_ms))
        return out

    def sidecar(self, name: str, actions: Sequence[Mapping[str, Any]]) -> dict:
        data = checkpoint_parquet(actions, columns=("add", "remove"))
        self.write(f"_sidecars/{name}", data)
        return {"sidecar": {"path": name, "sizeInBytes": len(data), "modificationTime": 1}}


_COLUMN_TYPES = {
    "txn": cs.TXN_TYPE,
    "add": cs.ADD_TYPE,
    "remove": cs.REMOVE_TYPE,
    "metaData": cs.METADATA_TYPE,
    "protocol": cs.PROTOCOL_TYPE,
    "domainMetadata": cs.DOMAIN_METADATA_TYPE,
    "checkpointMetadata": cs.CHECKPOINT_METADATA_TYPE,
    "sidecar": cs.SIDECAR_TYPE,
}


def _to_arrow_value(value: Any, typ: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(typ):
        return list(value.items())
    if pa.types.is_struct(typ):
        return {f.name: _to_arrow_value(value.get(f.name), f.type) for f in typ}
    return value


def checkpoint_parquet(actions: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> bytes:
    cols = list(columns or [c for c in _COLUMN_TYPES if c not in ("checkpointMetadata", "sidecar")])
    for a in actions:
        for k in a:
            if k in _COLUMN_TYPES and k not in cols:
                cols.append(k)
    arrays = {c: pa.array([_to_arrow_value(a.get(c), _COLUMN_TYPES[c]) for a in actions], _COLUMN_TYPES[c]) for c in cols}
    buf = io.BytesIO()
    pq.write_table(pa.table(arrays), buf)
    return buf.getvalue()
