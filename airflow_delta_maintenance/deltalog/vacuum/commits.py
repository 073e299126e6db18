"""The ``VACUUM START`` / ``VACUUM END`` commits, shaped as delta-spark 4.4 writes them.

Each is a commit with a single ``commitInfo`` action (no file actions: a blind append):
``operation``, ``operationParameters`` (START: ``retentionCheckEnabled``,
``defaultRetentionMillis``, ``specifiedRetentionMillis`` when one was given; END: ``status``
``COMPLETED`` or ``FAILED``), ``readVersion``, ``isolationLevel: SnapshotIsolation``,
``isBlindAppend: true``, ``operationMetrics`` as strings (START: ``numFilesToDelete``,
``sizeOfDataToDelete``; END: ``numDeletedFiles``, ``numVacuumedDirectories``), ``engineInfo`` and
``txnId``; ``inCommitTimestamp`` first on tables with in-commit timestamps.

delta-spark writes them when ``spark.databricks.delta.vacuum.logging.enabled`` says so, and
otherwise only on the file systems of ``writes_vacuum_commits`` (not on S3).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ... import __version__

__all__ = ["ENGINE_INFO", "VACUUM_LOGGING_SCHEMES", "writes_vacuum_commits", "vacuum_start", "vacuum_end"]

ENGINE_INFO = f"airflow-delta-maintenance/{__version__}"
# delta-spark's VacuumCommandImpl.supportedFsForLogging (a local path is "file")
VACUUM_LOGGING_SCHEMES = frozenset({"wasbs", "wasbss", "abfs", "abfss", "adl", "gs", "file", "hdfs"})


def writes_vacuum_commits(table_uri: str) -> bool:
    """Whether delta-spark records VACUUM in the log of a table at ``table_uri`` by default."""
    scheme, sep, _ = table_uri.partition("://")
    return (scheme.lower() if sep else "file") in VACUUM_LOGGING_SCHEMES


def _info(operation: str, parameters: Mapping[str, Any], metrics: Mapping[str, int] | None, *, timestamp: int, ict: int | None, read_version: int) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if ict is not None:
        info["inCommitTimestamp"] = ict
    info.update(
        timestamp=timestamp,
        operation=operation,
        operationParameters=dict(parameters),
        readVersion=read_version,
        isolationLevel="SnapshotIsolation",
        isBlindAppend=True,
    )
    if metrics is not None:
        info["operationMetrics"] = {k: str(v) for k, v in metrics.items()}
    info["engineInfo"] = ENGINE_INFO
    info["txnId"] = str(uuid.uuid4())
    return {"commitInfo": info}


def vacuum_start(
    *, timestamp: int, ict: int | None, read_version: int, retention_check: bool, default_retention_ms: int,
    specified_retention_ms: int | None, files: int, size: int,
) -> dict[str, Any]:
    params: dict[str, Any] = {"retentionCheckEnabled": retention_check, "defaultRetentionMillis": default_retention_ms}
    if specified_retention_ms is not None:
        params["specifiedRetentionMillis"] = specified_retention_ms
    return _info("VACUUM START", params, {"numFilesToDelete": files, "sizeOfDataToDelete": size}, timestamp=timestamp, ict=ict, read_version=read_version)


def vacuum_end(*, timestamp: int, ict: int | None, read_version: int, status: str, deleted: int | None, directories: int | None) -> dict[str, Any]:
    metrics = None if deleted is None else {"numDeletedFiles": deleted, "numVacuumedDirectories": directories or 0}
    return _info("VACUUM END", {"status": status}, metrics, timestamp=timestamp, ict=ict, read_version=read_version)
