"""A small writer for real sample tables: Parquet data files plus commits, as a Delta writer makes them.

It writes through the log library's storage (create-if-absent commits), so what the demo shows is
what any reader (delta-spark, delta-rs) sees. It is not a general-purpose writer.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..deltalog.model.paths import commit_name
from ..deltalog.storage import LogStore, open_table_storage

__all__ = ["SCHEMA", "create_sample_table", "append_batch", "data_batch", "add_action_for"]

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("amount", pa.float64()), pa.field("region", pa.string())])
_SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
            {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def data_batch(start_id: int, rows: int, region: str) -> pa.Table:
    ids = pa.array(range(start_id, start_id + rows), pa.int64())
    return pa.table({"id": ids, "amount": pc.multiply(pc.cast(ids, pa.float64()), 1.5), "region": [region] * rows}, schema=SCHEMA)


def _stats(table: pa.Table) -> str:
    data = table.drop_columns(["region"])
    mins = {c: pc.min(data[c]).as_py() for c in data.column_names}
    maxs = {c: pc.max(data[c]).as_py() for c in data.column_names}
    nulls = {c: data[c].null_count for c in data.column_names}
    return json.dumps({"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def add_action_for(table_root: str, table: pa.Table, region: str) -> dict[str, Any]:
    """Write one Parquet data file under ``region=<region>/`` and return its ``add`` action."""
    rel = f"region={region}/part-{uuid.uuid4()}.zstd.parquet"
    path = os.path.join(table_root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table.drop_columns(["region"]), path, compression="zstd")
    st = os.stat(path)
    return {
        "add": {
            "path": rel,
            "partitionValues": {"region": region},
            "size": st.st_size,
            "modificationTime": int(st.st_mtime * 1000),
            "dataChange": True,
            "stats": _stats(table),
        }
    }


def _commit_info(operation: str, ict: int | None) -> dict[str, Any]:
    info: dict[str, Any] = {"timestamp": int(time.time() * 1000), "operation": operation, "engineInfo": "airflow-delta-maintenance-demo"}
    if ict is not None:
        info["inCommitTimestamp"] = ict
    return {"commitInfo": info}


def create_actions(configuration: dict[str, str] | None = None, *, ict: bool = False) -> list[dict[str, Any]]:
    """Protocol and metadata of a new partitioned table (reader 1 / writer 7 with ICT when asked)."""
    conf = dict(configuration or {})
    if ict:
        conf.setdefault("delta.enableInCommitTimestamps", "true")
        protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp", "appendOnly", "invariants"]}
    else:
        protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": _SCHEMA_STRING,
        "partitionColumns": ["region"],
        "configuration": conf,
        "createdTime": int(time.time() * 1000),
    }
    return [{"protocol": protocol}, {"metaData": metadata}]


def write_commit(store: LogStore, version: int, actions: Sequence[dict[str, Any]], operation: str) -> None:
    lines = [_commit_info(operation, None), *actions]
    store.put_if_absent(commit_name(version), "".join(json.dumps(a) + "\n" for a in lines).encode())


def create_sample_table(table_root: str, commits: int = 12, rows_per_file: int = 100) -> LogStore:
    """A partitioned table with ``commits`` published commits of real Parquet data (filesystem table)."""
    store = open_table_storage(table_root)
    write_commit(store, 0, create_actions(), "CREATE TABLE")
    regions = ["emea", "amer", "apac"]
    for v in range(1, commits):
        region = regions[v % len(regions)]
        batch = data_batch(v * rows_per_file, rows_per_file, region)
        write_commit(store, v, [add_action_for(store.table_root, batch, region)], "WRITE")
    return store


def append_batch(store: LogStore, version: int, region: str, rows: int = 100) -> None:
    batch = data_batch(version * rows, rows, region)
    write_commit(store, version, [add_action_for(store.table_root, batch, region)], "WRITE")
