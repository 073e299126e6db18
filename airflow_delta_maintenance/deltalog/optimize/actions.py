"""The actions of an OPTIMIZE commit, shaped as delta-spark 4.4 writes them.

``commitInfo``: ``operation: OPTIMIZE``, ``operationParameters`` (``predicate`` as a JSON list,
``zOrderBy``/``clusterBy`` ``"[]"``, ``auto: false``), ``readVersion``, ``isolationLevel:
SnapshotIsolation``, ``isBlindAppend: false``, ``operationMetrics`` (strings: files and bytes
removed and added, the added files' size percentiles, deletion vectors removed), ``engineInfo``,
``txnId``; ``inCommitTimestamp`` first when the table has in-commit timestamps; on row-tracking
tables the tag ``delta.rowTracking.preserved``. Removes carry ``dataChange: false``, the
operation's start as ``deletionTimestamp``, ``extendedFileMetadata: true``, partition values, size,
the deletion vector, tags, row-tracking fields, and stats reduced to ``numRecords``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ... import __version__
from ..datafiles.stats import stats_num_records

__all__ = ["remove_action", "commit_info", "operation_metrics", "ENGINE_INFO"]

ENGINE_INFO = f"airflow-delta-maintenance/{__version__}"


def remove_action(add: Mapping[str, Any], deletion_timestamp: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": deletion_timestamp,
        "dataChange": False,
        "extendedFileMetadata": True,
        "partitionValues": dict(add.get("partitionValues") or {}),
        "size": int(add.get("size") or 0),
    }
    if add.get("tags"):
        out["tags"] = dict(add["tags"])
    if add.get("deletionVector"):
        out["deletionVector"] = {k: v for k, v in dict(add["deletionVector"]).items() if v is not None}
    for key in ("baseRowId", "defaultRowCommitVersion"):
        if add.get(key) is not None:
            out[key] = add[key]
    stats = add.get("stats")
    if stats:
        records = stats_num_records(stats)
        if records is not None:
            out["stats"] = f'{{"numRecords":{int(records)}}}'  # json.dumps builds an encoder per call: 10x this, per source file
    return out


def _percentile(sorted_sizes: Sequence[int], q: float) -> int:
    return sorted_sizes[min(len(sorted_sizes) - 1, int(len(sorted_sizes) * q))]


def operation_metrics(adds: Sequence[Mapping[str, Any]], removes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    sizes = sorted(int(a["size"]) for a in adds)
    dvs = [r["deletionVector"] for r in removes if r.get("deletionVector")]
    metrics = {
        "numRemovedFiles": str(len(removes)),
        "numRemovedBytes": str(sum(int(r.get("size") or 0) for r in removes)),
        "numAddedFiles": str(len(adds)),
        "numAddedBytes": str(sum(sizes)),
        "numDeletionVectorsRemoved": str(len(dvs)),
        "numDeletionVectorRowsRemoved": str(sum(int(d.get("cardinality") or 0) for d in dvs)),
    }
    if sizes:
        metrics.update(
            minFileSize=str(sizes[0]), p25FileSize=str(_percentile(sizes, 0.25)), p50FileSize=str(_percentile(sizes, 0.5)),
            p75FileSize=str(_percentile(sizes, 0.75)), maxFileSize=str(sizes[-1]),
        )
    return metrics


def commit_info(
    *,
    timestamp: int,
    read_version: int,
    predicate: str | None,
    metrics: Mapping[str, str],
    in_commit_timestamp: int | None = None,
    row_tracking_preserved: bool = False,
    txn_id: str | None = None,
) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if in_commit_timestamp is not None:
        info["inCommitTimestamp"] = in_commit_timestamp
    info.update(
        timestamp=timestamp,
        operation="OPTIMIZE",
        operationParameters={
            "predicate": json.dumps([predicate] if predicate else []),
            "zOrderBy": "[]",
            "clusterBy": "[]",
            "auto": False,
        },
        readVersion=read_version,
        isolationLevel="SnapshotIsolation",
        isBlindAppend=False,
        operationMetrics=dict(metrics),
    )
    if row_tracking_preserved:
        info["tags"] = {"delta.rowTracking.preserved": "true"}
    info["engineInfo"] = ENGINE_INFO
    info["txnId"] = txn_id or str(uuid.uuid4())
    return info
