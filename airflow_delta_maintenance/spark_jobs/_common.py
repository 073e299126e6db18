"""Shared parts of the Spark jobs: arguments, storage, distributed reading and reconciliation.

The driver lists the log and plans with the log library (one LIST); executors read the checkpoint
parts, sidecars and commits as DataFrames and reconcile file actions by (path, deletion-vector
unique id) with the same rule as the single-node replay: the action from the newest version wins.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from functools import lru_cache, reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession, Window, functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from airflow_delta_maintenance.deltalog.log_segment.segment import CatalogCommit, LogSegment
from airflow_delta_maintenance.deltalog.model import action_types as cs
from airflow_delta_maintenance.deltalog.model.actions import NonFileState
from airflow_delta_maintenance.deltalog.model.paths import ParsedLogPath
from airflow_delta_maintenance.deltalog.replay.table_state import segment_non_file_actions
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from airflow_delta_maintenance.spark_jobs._hadoop_stores import UnsupportedStoreError, hadoop_settings, hadoop_uri

__all__ = [
    "STORAGE_OPTIONS_ENV",
    "CREDENTIALS_FILE_ENV",
    "load_credentials",
    "JobFailed",
    "base_parser",
    "open_store",
    "spark_session",
    "hadoop_path",
    "read_actions",
    "version_from_file",
    "maybe_non_file",
    "collect_non_file_state",
    "reconcile",
    "run_job",
]

# Storage options without secrets (JSON) come from this variable; the secrets from the file named
# by the second one — never from argv nor an environment value (maintenance.spark_submit).
STORAGE_OPTIONS_ENV = "DELTA_MAINTENANCE_STORAGE_OPTIONS"
# Sessions this process's jobs started: only those are stopped when a job ends.
_OWNED_SESSIONS: list[SparkSession] = []
CREDENTIALS_FILE_ENV = "DELTA_MAINTENANCE_CREDENTIALS_FILE"

ACTION_SCHEMA = from_arrow_schema(
    pa.schema(
        [
            pa.field("txn", cs.TXN_TYPE),
            pa.field("add", cs.ADD_TYPE),
            pa.field("remove", cs.REMOVE_TYPE),
            pa.field("metaData", cs.METADATA_TYPE),
            pa.field("protocol", cs.PROTOCOL_TYPE),
            pa.field("domainMetadata", cs.DOMAIN_METADATA_TYPE),
        ]
    )
)
VERSION = "_version"
_DISCOVERY_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_WINDOW_GROUP_LIMIT = "spark.sql.optimizer.windowGroupLimitThreshold"


class JobFailed(Exception):
    """A reason to exit non-zero; the message is printed on stderr."""


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--table-uri", required=True)
    p.add_argument("--storage-options-env", default=STORAGE_OPTIONS_ENV, help="env var holding fsspec storage options as JSON")
    p.add_argument("--now-ms", type=int, default=None, help="clock for tombstone expiry (tests)")
    return p


@lru_cache(maxsize=1)
def load_credentials() -> dict[str, Any]:
    """The job's secrets: the file at the path in ``DELTA_MAINTENANCE_CREDENTIALS_FILE`` (a driver on
    the submitting machine), else the file of that name in the working directory (shipped there
    with ``--files`` for a driver in the cluster)."""
    name = os.environ.get(CREDENTIALS_FILE_ENV)
    if not name:
        return {}
    path = Path(name)
    if not path.is_file():
        path = Path.cwd() / path.name
    if not path.is_file():
        raise JobFailed(f"credentials file {name} not found, nor {path.name} in {Path.cwd()} (was it shipped with --files?)")
    return json.loads(path.read_text())


_STORE_OPTIONS: dict[int, dict[str, Any]] = {}  # id(store) -> the options it was opened with


def open_store(args: argparse.Namespace) -> LogStore:
    raw = os.environ.get(args.storage_options_env) or "{}"
    options = {**json.loads(raw), **load_credentials().get("storage_options", {})}
    store = open_table_storage(args.table_uri, options)
    _STORE_OPTIONS[id(store)] = options
    return store


def spark_session(app_name: str, store: LogStore | None = None) -> SparkSession:
    """The job's session; with ``store``, its Hadoop configuration reaches the table's store
    (Azure, GCS) with the job's own storage options, set in-process (``_hadoop_stores``)."""
    builder = SparkSession.builder.appName(app_name)
    secret = load_credentials().get("storage_options", {})
    if secret.get("key") and secret.get("secret"):  # s3a reads the same keys, set in-process (Spark redacts them in its UI)
        builder = builder.config("spark.hadoop.fs.s3a.access.key", secret["key"]).config("spark.hadoop.fs.s3a.secret.key", secret["secret"])
        if secret.get("token"):
            builder = builder.config("spark.hadoop.fs.s3a.session.token", secret["token"]).config(
                "spark.hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            )
    started_here = SparkContext._active_spark_context is None
    session = builder.getOrCreate()
    if started_here:
        _OWNED_SESSIONS.append(session)
    if store is not None:
        hadoop_conf = session.sparkContext._jsc.hadoopConfiguration()
        for key, value in hadoop_settings(store, _STORE_OPTIONS.get(id(store), {})).items():
            hadoop_conf.set(key, value)
        if store.backend == "gcs":
            _loadable_gcs_filesystem(hadoop_conf)
    # The driver passes every file by name from its own listing: Spark's parallel "listing leaf
    # files" job (one task per path above 32 paths) would only stat them again.
    if session.conf.get(_DISCOVERY_THRESHOLD, None) in (None, "32"):
        session.conf.set(_DISCOVERY_THRESHOLD, str(1 << 30))
    # For reconcile's newest-per-key window Spark adds a map-side WindowGroupLimit: a sort of every
    # full action row before the shuffle, to drop rows that lose. A file has one action per key in
    # most logs, so it drops almost nothing (2M files: the job 66.8 -> 64.1 s without it). A value
    # the user set wins.
    if session.conf.get(_WINDOW_GROUP_LIMIT, None) is None:
        session.conf.set(_WINDOW_GROUP_LIMIT, "-1")
    return session


# Hadoop 3.5's core-default names its own hadoop-gcp module for gs:// (org.apache.hadoop.fs.gs)
# and gives its fs.gs.* sizes with suffixes ("64m"). Clusters and --jars mostly carry Google's
# Cloud Storage connector instead: Hadoop never finds the configured class, and the connector
# reads those sizes as plain numbers (NumberFormatException: For input string: "64m").
_GCS_CONNECTOR_CLASSES = {"fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
                          "fs.AbstractFileSystem.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"}
_SIZE_WITH_SUFFIX = re.compile(r"\d+[kmgtpe]", re.IGNORECASE)


def _loadable_gcs_filesystem(hadoop_conf: Any) -> None:
    """Point gs:// at Google's connector when the configured implementation is not on the
    classpath and the connector is, and give the connector its sizes in bytes; a configured
    class that loads is kept."""
    configured = hadoop_conf.get("fs.gs.impl")
    if not (configured and hadoop_conf.getClassByNameOrNull(configured) is not None):
        if hadoop_conf.getClassByNameOrNull(_GCS_CONNECTOR_CLASSES["fs.gs.impl"]) is None:
            return  # neither loads: Hadoop's own error names the class
        for key, value in _GCS_CONNECTOR_CLASSES.items():
            hadoop_conf.set(key, value)
    if hadoop_conf.get("fs.gs.impl") != _GCS_CONNECTOR_CLASSES["fs.gs.impl"]:
        return
    for entry in hadoop_conf.getPropsWithPrefix("fs.gs.").entrySet().toArray():
        key, value = f"fs.gs.{entry.getKey()}", str(entry.getValue()).strip()
        if _SIZE_WITH_SUFFIX.fullmatch(value):
            hadoop_conf.set(key, str(hadoop_conf.getLongBytes(key, 0)))


def hadoop_path(store: LogStore, name: str = "") -> str:
    """The Hadoop URI of a file of ``_delta_log`` (``s3://`` → ``s3a://``, Azure → ``abfs[s]://``,
    ``gs://``, local → ``file://``)."""
    try:
        return hadoop_uri(store, store.log_dir if not name else store.path(name))
    except UnsupportedStoreError as exc:
        raise JobFailed(str(exc)) from None


def version_from_file(name: Column) -> Column:
    """<v>.json → v ; <x>.<y>.compacted.json → y (a compaction stands for its end version).

    ``name`` is the file's own name (the scan's ``_metadata.file_name``, constant per file), and
    only files of the driver's parsed listing are read, so versions are the fixed 20 digits at
    known places. Three regular expressions over ``input_file_name()`` cost a microsecond each
    per row: 2M rows, 12 s of a two-core scan that takes 1 s without them."""
    end = F.substring(name, 22, 20)
    return F.when(name.endswith(".compacted.json"), end).otherwise(F.substring(name, 1, 20)).cast("long")


def read_actions(spark: SparkSession, store: LogStore, segment: LogSegment, sidecars: Sequence[str] = (), *, include_checkpoint: bool = True) -> DataFrame:
    """All actions of the segment as one DataFrame with ``_version``; checkpoint rows first."""
    frames: list[DataFrame] = []
    if include_checkpoint and segment.checkpoint is not None:
        v = segment.checkpoint.version
        parquet = [hadoop_path(store, f.name) for f in segment.checkpoint.files if f.extension != "json"]
        parquet += [hadoop_path(store, f"_sidecars/{s}") for s in sidecars]
        if parquet:
            frames.append(spark.read.schema(ACTION_SCHEMA).parquet(*parquet).withColumn(VERSION, F.lit(v).cast("long")))
        json_parts = [hadoop_path(store, f.name) for f in segment.checkpoint.files if f.extension == "json"]
        if json_parts:
            frames.append(spark.read.schema(ACTION_SCHEMA).json(json_parts).withColumn(VERSION, F.lit(v).cast("long")))
    published = [d for d in segment.deltas if isinstance(d, ParsedLogPath)]
    if any(isinstance(d, CatalogCommit) for d in segment.deltas):
        raise JobFailed(f"{store.uri}: Spark jobs work on published versions only")
    if published:
        frames.append(
            spark.read.schema(ACTION_SCHEMA)
            .option("mode", "FAILFAST")
            .json([hadoop_path(store, d.name) for d in published])
            .withColumn(VERSION, version_from_file(F.col("_metadata.file_name")))
        )
    if not frames:
        return spark.createDataFrame([], ACTION_SCHEMA.add(VERSION, "long"))
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


# A commit line that starts like this is a file action or commitInfo (one action per line); unless
# it also spells a non-file key somewhere, the compaction job's pass for the few lines the driver
# needs skips it without parsing the JSON.
_SKIPPED_PREFIXES = ('{"add":', '{"remove":', '{"commitInfo":', '{"cdc":')
_NON_FILE_KEYS = ('"txn"', '"metaData"', '"protocol"', '"domainMetadata"')


def maybe_non_file(line: Column) -> Column:
    """False only for a line that surely holds a file action or commitInfo alone."""
    skipped = reduce(lambda acc, p: acc | line.startswith(p), _SKIPPED_PREFIXES[1:], line.startswith(_SKIPPED_PREFIXES[0]))
    spelled = reduce(lambda acc, k: acc | line.contains(k), _NON_FILE_KEYS[1:], line.contains(_NON_FILE_KEYS[0]))
    return ~skipped | spelled


def collect_non_file_state(store: LogStore, segment: LogSegment) -> NonFileState:
    """Protocol, metadata, txns and domain metadata of the segment, read on the driver.

    A few lines among millions of file actions: the driver's numpy line finder reads each commit
    once and parses only the lines that are not ``add``/``remove``, and of the checkpoint only those
    columns (``deltalog.replay.table_state.segment_non_file_actions``: one commit at a time). As a Spark
    text scan this was a job of its own over the whole log (2M files, 730 MB: 5.3 s on two cores).
    """
    state = NonFileState()
    try:
        for _, action in segment_non_file_actions(store, segment):  # replay order: the newest wins
            state.take(action)
    except (KeyError, TypeError, ValueError) as exc:
        raise JobFailed(f"{store.uri}: a protocol, metaData, txn or domainMetadata action is malformed ({exc!s})") from None
    return state


def _dv_unique_id(dv: Column) -> Column:
    offset = F.when(dv["offset"].isNotNull(), F.concat(F.lit("@"), dv["offset"].cast("string"))).otherwise(F.lit(""))
    return F.when(dv.isNotNull(), F.concat(dv["storageType"], dv["pathOrInlineDv"], offset))


def file_key_path(add_path: Column, remove_path: Column, version: Column) -> Column:
    """A file action's path in key form (as deltalog.replay.canonical_paths: ``file:/x`` and
    ``file:///x`` are ``/x``). A file action without a path fails the job naming its version, as
    the single-node reader refuses it: grouped under a null key it would be written out nameless."""
    path = F.coalesce(add_path, remove_path)
    missing = F.raise_error(F.concat(F.lit("a file action without a path in version "), version.cast("string")))
    # the regular expression only where it can match: it runs on every file action of the log
    canonical = F.when(path.startswith("file:"), F.regexp_replace(path, "^file:(?://)?/", "/")).otherwise(path)
    return F.when(path.isNull(), missing).otherwise(canonical)


def reconcile(actions: DataFrame, *, tombstone_cutoff_ms: int | None) -> DataFrame:
    """The winning file actions as one DataFrame ``(_path, add, remove)``, exactly one of the two set:
    the newest action per (path, DV unique id) wins; removes at or below the cutoff (missing
    timestamp = 0) are dropped unless the cutoff is None.

    One hash shuffle on the key and one sort within partitions (key, version descending), then the
    first row of each key: the cost of delta-spark's own state reconstruction. An aggregation with
    ``max_by`` over the action structs cannot hash-aggregate (struct buffers) and sorts every row
    twice, before and after the shuffle.
    """
    files = actions.where(F.col("add").isNotNull() | F.col("remove").isNotNull()).select(
        file_key_path(F.col("add.path"), F.col("remove.path"), F.col(VERSION)).alias("_path"),
        F.coalesce(_dv_unique_id(F.col("add.deletionVector")), _dv_unique_id(F.col("remove.deletionVector")), F.lit("")).alias("_dv"),
        F.col(VERSION),
        F.col("add"),
        F.col("remove"),
    )
    newest = F.row_number().over(Window.partitionBy("_path", "_dv").orderBy(F.col(VERSION).desc()))
    winners = files.withColumn("_rank", newest).where(F.col("_rank") == 1)
    remove = F.col("remove")
    if tombstone_cutoff_ms is not None:
        remove = F.when(F.coalesce(F.col("remove.deletionTimestamp"), F.lit(0)) > F.lit(tombstone_cutoff_ms), remove)
    # a line holding both an add and a remove reconciles as the add (as the single-node replay)
    return (
        winners.select("_path", "add", F.when(F.col("add").isNull(), remove).alias("remove"))
        .where(F.col("add").isNotNull() | F.col("remove").isNotNull())
    )


def run_job(main_fn: Any, argv: Sequence[str] | None) -> int:
    """Run a job body; any failure is reported on stderr with a non-zero exit code."""
    from airflow_delta_maintenance.deltalog._runtime.memory import own_process_allocator

    own_process_allocator()  # the driver's Python process is the job's own
    try:
        return int(main_fn(argv) or 0)
    except JobFailed as exc:
        print(f"delta-maintenance spark job failed: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a job must exit non-zero with the reason
        print(f"delta-maintenance spark job failed: {describe_failure(exc)}", file=sys.stderr)
        return 1
    finally:
        _close_hadoop_filesystems()


def describe_failure(exc: BaseException) -> str:
    """One line naming the failure. A Py4JJavaError's own text is only "An error occurred while
    calling o41.json." with the Java trace on later lines; the launcher keeps this one line, so
    the Java exception and its root cause are named on it."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return f"{type(exc).__name__}: {exc}"
    try:
        root = java
        for _ in range(8):  # a cause chain can loop back on itself
            if root.getCause() is None:
                break
            root = root.getCause()
        text = " ".join(str(java.toString()).split())
        if root is not java:
            text += " <- caused by " + " ".join(str(root.toString()).split())
        return f"{type(exc).__name__}: {text}"[:2000]
    except Exception:  # noqa: BLE001 - the JVM may be gone; the Python text still says something
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000]


def _close_hadoop_filesystems() -> None:
    """Close the JVM's Hadoop file systems before the driver exits: hadoop-azure's ABFS keeps
    non-daemon thread pools until its file system is closed, and spark-submit's JVM would wait
    for them forever after this Python driver ended. Only a session the job started is closed:
    a job run inside a process that already had one (a notebook, a test's session) must leave
    that session and its cached file systems working."""
    while _OWNED_SESSIONS:
        _stop(_OWNED_SESSIONS.pop())


def _stop(session: SparkSession) -> None:
    try:
        session._jvm.org.apache.hadoop.fs.FileSystem.closeAll()  # type: ignore[union-attr]
        session.stop()
    except Exception:  # noqa: BLE001 - the job's outcome is decided; this only lets the JVM exit
        pass
