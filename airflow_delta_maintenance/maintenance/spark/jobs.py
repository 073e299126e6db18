"""The maintenance jobs as ``SparkJobSpec`` (checkpoint, log compaction), and how their result is
verified: by reading the log afterwards — a zero exit code alone is not success."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ...deltalog.log_segment.listing import CheckpointGroup, list_log_files
from ...deltalog.model.paths import ParsedLogPath
from ...deltalog.storage import LogStore
from ..errors import SparkJobError
from .credentials import credential_source, storage_env
from .packaging import job_application
from .submit import SparkJobSpec

__all__ = ["checkpoint_job", "compaction_job", "run_dir_job", "verify_checkpoint", "verify_compaction"]


def _job(
    name: str,
    job: str,
    table_uri: str,
    args: list[str],
    storage_options: Mapping[str, Any] | None,
    conf: Mapping[str, Any] | None,
    jars: str | None,
    packages: str | None,
) -> SparkJobSpec:
    env, storage_conf, credentials = storage_env(storage_options or {})
    merged = {**storage_conf, **{k: str(v) for k, v in (conf or {}).items()}}
    return SparkJobSpec(
        name=name,
        application=job_application(job),
        application_args=["--table-uri", table_uri, *args],
        conf=merged,
        jars=jars,
        packages=packages,
        env_vars=env,
        credentials=credentials,
        credential_source=credential_source(storage_options or {}),
    )


def checkpoint_job(
    table_uri: str,
    version: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
    sidecars: int = 0,
) -> SparkJobSpec:
    args = ["--version", str(version)] + (["--sidecars", str(sidecars)] if sidecars else [])
    return _job(f"delta-checkpoint-{version}", "checkpoint", table_uri, args, storage_options, conf, jars, packages)


def compaction_job(
    table_uri: str,
    start: int,
    end: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
) -> SparkJobSpec:
    args = ["--start", str(start), "--end", str(end)]
    return _job(f"delta-compaction-{start}-{end}", "log_compaction", table_uri, args, storage_options, conf, jars, packages)


def run_dir_job(
    kind: Literal["optimize", "vacuum"],
    table_uri: str,
    run_dir: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
) -> SparkJobSpec:
    """OPTIMIZE's rewrite of bins or VACUUM's listing or deletions, as ``<run_dir>/tasks.json``
    says (``spark_jobs/optimize.py``, ``spark_jobs/vacuum.py``)."""
    return _job(f"delta-{kind}-{run_dir.rsplit('-', 1)[-1]}", kind, table_uri, ["--run-dir", run_dir], storage_options, conf, jars, packages)


def verify_checkpoint(store: LogStore, version: int) -> CheckpointGroup:
    """The complete checkpoint at ``version`` that the job must have made visible."""
    groups = [g for g in list_log_files(store).complete_checkpoints() if g.version == version]
    if not groups:
        raise SparkJobError(f"{store.uri}: the Spark job finished but no complete checkpoint exists at version {version}", version=version)
    return groups[-1]


def verify_compaction(store: LogStore, start: int, end: int) -> ParsedLogPath:
    found = [c for c in list_log_files(store).compactions if c.version == start and c.end_version == end]
    if not found:
        raise SparkJobError(f"{store.uri}: the Spark job finished but {start}.{end}.compacted.json is missing", version=end)
    return found[0]
