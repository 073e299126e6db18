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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..deltalog.model.paths import commit_name
from ..deltalog.storage import LogStore, open_table_storage

__all__ = ["SCHEMA", "CreatedTable", "create_coordinated_table", "create_sample_table", "append_batch", "data_batch", "add_action_for"]

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


_REGIONS = ("emea", "amer", "apac")


@dataclass(frozen=True)
class CreatedTable:
    uri: str  # the table's absolute local path
    coordinator: str  # the coordinator spec a tables.yaml names (without ?create=true)
    ratified: int  # the latest ratified version (0 plus the sample commits)


def create_coordinated_table(
    table_path: str | Path, coordinator: str, *, sample_commits: int = 0, rows_per_commit: int = 100,
    configuration: dict[str, str] | None = None,
) -> CreatedTable:
    """A new table on the embedded coordinator, for a trial: version 0 (protocol and metadata with
    in-commit timestamps, the coordinator declared in its properties) created and published through
    the coordinator, then ``sample_commits`` appends of real Parquet data that the coordinator
    ratifies and nobody publishes yet (what the maintenance DAG then publishes).

    ``coordinator`` is ``local:///abs/path/coordinator.db``; its database is created when missing.
    A table the coordinator already has, or a folder that already holds a ``_delta_log``, is refused
    (``FileExistsError``): nothing is overwritten.
    """
    from ..coordinators.registry import parse_coordinator_spec
    from ..maintenance.table.coordinator_client import open_coordinator

    if sample_commits < 0:
        raise ValueError(f"--sample-commits must be 0 or more, got {sample_commits}")
    parsed = parse_coordinator_spec(coordinator)
    if parsed.kind != "local":
        raise ValueError(f"a trial table is created on the embedded coordinator (local:///abs/path/coordinator.db), not {parsed.kind}")
    spec = coordinator.split("?", 1)[0]
    root = Path(str(table_path).removeprefix("file://")).expanduser().resolve()
    if (root / "_delta_log").exists():
        raise FileExistsError(f"{root}/_delta_log already exists: choose a new folder for the table")
    root.mkdir(parents=True, exist_ok=True)
    uri = str(root)
    client = open_coordinator(spec + "?create=true")
    try:
        if client.latest_ratified_version(uri) >= 0:
            raise FileExistsError(f"{uri} is already registered with {spec}")
        client.commit(uri, 0, create_actions(configuration, ict=True))
        for v in range(1, sample_commits + 1):
            region = _REGIONS[v % len(_REGIONS)]
            client.commit(uri, v, [add_action_for(uri, data_batch(v * rows_per_commit, rows_per_commit, region), region)])
    finally:
        client.close()
    return CreatedTable(uri, spec, sample_commits)
