"""Spark application: write the checkpoint of a published version with distributed replay.

    spark-submit checkpoint.py --table-uri URI --version V [--sidecars N]

Delayed commit: executors write their output under unique names in a private staging
directory (``_delta_log/_spark_staging/<run tag>/``, invisible to readers; the tag names this run
and its start, see ``deltalog.storage.run_identity``); only after every task succeeded does the driver make
the checkpoint visible — sidecars moved into ``_sidecars/`` and the top-level file created if
absent (V2), or the parts' row groups joined into one file in the staging directory by the
driver's JVM (``_parquet_concat``) and that classic file created if absent — and then
``_last_checkpoint``.

The driver trusts no listing that another run could change: the write's own counts (rows, adds,
removes, observed by its tasks and returned with its result) must agree with each other and with
the rows in the footers of exactly the files that write produced (one Spark write-job id); each
moved sidecar is checked before the top-level file names it, and the checkpoint is read back
before ``_last_checkpoint`` points at it.

The log is parsed, reconciled and written in one Spark job. The protocol, metadata, txns and domain
metadata come from the driver itself: the previous checkpoint's columns for them (row groups that
can hold them) and the commits' non-file lines, one commit at a time, file actions skipped
unparsed. Of checkpoints the Python driver reads Parquet footers and those column chunks only,
never a whole file: its memory does not grow with the table.
Leftovers of other runs are removed only when their owner is proven dead or they are a day old.
On failure this run's staging directory and sidecars are removed and the job exits non-zero.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Observation, SparkSession, functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import StructType

from airflow_delta_maintenance.deltalog.checkpoint.readback import parquet_footer, parquet_sidecars, read_back_checkpoint
from airflow_delta_maintenance.deltalog.checkpoint.writer import (
    check_writer_features,
    checkpoint_codec,
    non_file_rows,
    update_last_checkpoint,
)
from airflow_delta_maintenance.deltalog.cleanup.abandoned import abandoned_sidecars, find_abandoned, remove_leftovers
from airflow_delta_maintenance.deltalog.errors import DeltaLogError, LogFileExistsError
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment.segment import build_log_segment
from airflow_delta_maintenance.deltalog.model import action_types as cs
from airflow_delta_maintenance.deltalog.model.actions import NonFileState
from airflow_delta_maintenance.deltalog.model.features import check_read_supported
from airflow_delta_maintenance.deltalog.model.paths import SIDECAR_DIR, ParsedLogPath, classic_checkpoint_name, uuid_checkpoint_name
from airflow_delta_maintenance.deltalog.model.schema import partition_values_type, stats_parse_plan
from airflow_delta_maintenance.deltalog.model.table_properties import TableProperties
from airflow_delta_maintenance.deltalog.storage import FileStat, LogStore
from airflow_delta_maintenance.deltalog.storage.run_identity import STAGING_DIR, new_run
from airflow_delta_maintenance.spark_jobs._common import (
    JobFailed,
    base_parser,
    collect_non_file_state,
    hadoop_path,
    open_store,
    read_actions,
    reconcile,
    run_job,
    spark_session,
)
from airflow_delta_maintenance.spark_jobs._parquet_concat import ConcatFailed, concatenate_parquet

STAGING = STAGING_DIR
# Spark names every file of one write job part-<task>-<write job uuid>-c<n>...
_PART = re.compile(r"^part-\d+-([0-9a-f-]{36})-c\d+.*\.parquet$")
_SIDECAR_SCHEMA = from_arrow_schema(pa.schema([pa.field("sidecar", cs.SIDECAR_TYPE)]))


def _referenced_sidecars(spark: SparkSession, store: LogStore, files: Sequence[ParsedLogPath]) -> list[str]:
    """Sidecars named by the previous checkpoint. Parquet: the footer, then only the ``sidecar``
    column chunks of row groups whose statistics allow a value; JSON parts: read by executors.
    The driver never holds a checkpoint file (a 10M-file one is about a gigabyte)."""
    names: list[str] = []
    json_parts = [hadoop_path(store, f.name) for f in files if f.extension == "json"]
    if json_parts:
        rows = spark.read.schema(_SIDECAR_SCHEMA).option("mode", "FAILFAST").json(json_parts).where(F.col("sidecar.path").isNotNull()).collect()
        names += [r["path"] for r in (row["sidecar"] for row in rows)]
    for f in files:
        if f.extension != "json":
            size = f.size or (st.size if (st := store.stat(f.name)) is not None else 0)
            names += [str(s["path"]) for s in parquet_sidecars(store, f.name, parquet_footer(store, f.name, size)) if s.get("path")]
    return [n.rsplit("/", 1)[-1] for n in names]


def _file_action_frame(files: DataFrame, props: TableProperties, state: NonFileState, with_dv: bool) -> DataFrame:
    """``(_path, add, remove)`` in the checkpoint's column layout, from the reconciled actions."""
    assert state.metadata is not None
    add_fields = [F.col(f"add.{f.name}").alias(f.name) for f in cs.ADD_FIELDS if f.name not in ("dataChange", "stats")]
    add_fields.insert(4, F.lit(False).alias("dataChange"))
    if props.write_stats_as_json:
        add_fields.append(F.col("add.stats").alias("stats"))
    if props.write_stats_as_struct:
        pv_type = partition_values_type(state.metadata.schema, state.metadata.partition_columns)
        if pv_type is not None and pv_type.num_fields:
            parsed = []
            for col, f in zip(state.metadata.partition_columns, pv_type, strict=True):
                raw = F.coalesce(F.col("add.partitionValues")[f.name], F.col("add.partitionValues")[col])
                if not pa.types.is_string(f.type):
                    raw = F.when(raw != "", raw)
                parsed.append(raw.cast(from_arrow_type(f.type)).alias(f.name))
            add_fields.append(F.struct(*parsed).alias("partitionValues_parsed"))
        plan = stats_parse_plan(state.metadata.schema, state.metadata.partition_columns, with_dv)
        stats_type = cast(StructType, from_arrow_type(plan.final_type))  # an Arrow struct maps to a Spark struct
        add_fields.append(F.from_json(F.col("add.stats"), stats_type).alias("stats_parsed"))
    remove_fields = [
        (F.lit(False) if f.name == "dataChange" else F.col(f"remove.{f.name}")).alias(f.name)
        for f in cs.REMOVE_FIELDS
        if f.name not in ("tags", "stats")
    ]
    return files.select(
        "_path",
        F.when(F.col("add").isNotNull(), F.struct(*add_fields)).alias("add"),
        F.when(F.col("remove").isNotNull(), F.struct(*remove_fields)).alias("remove"),
    )


def _non_file_frame(spark: SparkSession, rows: list[dict[str, Any]], v2: bool) -> DataFrame:
    columns = [("txn", cs.TXN_TYPE), ("metaData", cs.METADATA_TYPE), ("protocol", cs.PROTOCOL_TYPE), ("domainMetadata", cs.DOMAIN_METADATA_TYPE)]
    if v2:
        columns.append(("checkpointMetadata", cs.CHECKPOINT_METADATA_TYPE))
    schema = pa.schema([pa.field(n, t) for n, t in columns])
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema))


def _counted(frame: DataFrame, observed: Observation) -> DataFrame:
    """The rows, adds and removes the write's own tasks emit, reported back with its result."""
    return frame.observe(observed, F.count(F.lit(1)).alias("rows"), F.count("add").alias("adds"), F.count("remove").alias("removes"))


def _cleanup_strays(store: LogStore) -> None:
    """Remove leftovers of other runs — only those whose owner is proven dead or that are a day old."""
    remove_leftovers(store, [*find_abandoned(store), *abandoned_sidecars(store)])
    root = store.path(STAGING)
    if store.is_local:
        try:
            os.rmdir(root)  # only when empty: another run's directory keeps it
        except OSError:
            pass


def _written_files(store: LogStore, staging: str, rows_written: int) -> list[FileStat]:
    """The files the write produced in this run's staging directory, verified against its row count.

    PySpark does not hand the driver the write's commit messages, so they are rebuilt and checked:
    the files must all come from one write job, and their footers must hold exactly the rows the
    write's tasks observed themselves writing.
    """
    staged = [s for s in store.list_dir(staging) if s.name.endswith(".parquet")]
    jobs = {m.group(1) if (m := _PART.match(s.name.rsplit("/", 1)[-1])) else s.name for s in staged}
    if len(jobs) > 1:
        raise JobFailed(f"{store.display(staging)}: files of more than one write in this run's staging directory: {sorted(jobs)}")
    in_footers = 0
    for s in staged:
        try:
            in_footers += read_back_checkpoint(store, [s.name]).num_actions
        except DeltaLogError as exc:
            raise JobFailed(f"{store.display(s.name)}: a file of this run's write is unreadable: {exc}") from exc
    if in_footers != rows_written:
        raise JobFailed(f"{store.display(staging)}: the write committed {rows_written} rows but its files hold {in_footers}")
    return sorted(staged, key=lambda s: s.name)


def _joined(spark: SparkSession, store: LogStore, staging: str, staged: list[FileStat]) -> FileStat:
    """The classic checkpoint as one file in the staging directory: the single part as it is, or
    the parts' row groups joined in part order (the non-file rows' part is part 0)."""
    if len(staged) == 1:
        return staged[0]
    name = f"{staging}/checkpoint.parquet"
    try:
        concatenate_parquet(spark, [hadoop_path(store, s.name) for s in staged], hadoop_path(store, name))
    except ConcatFailed as exc:
        raise JobFailed(f"{store.display(staging)}: the {len(staged)} parts of the checkpoint could not be joined: {exc}") from exc
    stat = store.stat(name)
    if stat is None:
        raise JobFailed(f"{store.display(name)}: the joined checkpoint is missing after its write")
    return stat


def _main(argv: Sequence[str] | None) -> int:
    p = base_parser("Write a Delta checkpoint with Spark")
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--sidecars", type=int, default=0, help="number of sidecar files for V2 (default: Spark's partitions)")
    args = p.parse_args(argv)
    started = time.monotonic()
    store = open_store(args)
    files = list_log_files(store)
    v = args.version
    if v not in {c.version for c in files.commits}:
        raise JobFailed(f"{store.uri}: version {v} is not published ({v:020d}.json is missing)")
    existing = [g for g in files.complete_checkpoints() if g.version == v]
    if existing:
        g = existing[-1]
        back = read_back_checkpoint(store, [f.name for f in g.files])  # never a hint to a checkpoint we cannot read
        update_last_checkpoint(store, LastCheckpointHint(version=v, size=back.num_actions, size_in_bytes=g.size_in_bytes))
        _cleanup_strays(store)
        print(json.dumps({"version": v, "existed": True, "files": [f.name for f in g.files]}))
        return 0
    # The commits, never compaction files: a compaction may lack removes of its window (the deltalake
    # wheel's drops tombstones expired when it wrote), and the executors read commits in parallel anyway.
    segment = build_log_segment(files, v, use_compactions=False, table=store.uri)
    spark = spark_session(f"delta-checkpoint {store.uri}@{v}", store)
    sidecars = _referenced_sidecars(spark, store, segment.checkpoint.files) if segment.checkpoint else []
    actions = read_actions(spark, store, segment, sidecars)
    state = collect_non_file_state(store, segment)
    if state.protocol is None or state.metadata is None:
        raise JobFailed(f"{store.uri}: no protocol or metadata at version {v}")
    check_read_supported(state.protocol, path=store.uri)
    check_writer_features(state.protocol, operation=f"checkpoint of {store.uri} at {v}", path=store.uri)
    props = TableProperties.from_configuration(state.metadata.configuration)
    if state.protocol.has_writer_feature("checkpointProtection") and v < props.checkpoint_protection_version:
        raise JobFailed(f"{store.uri}: checkpointProtection forbids a checkpoint at {v}")
    now = args.now_ms if args.now_ms is not None else int(time.time() * 1000)
    reconciled = reconcile(actions, tombstone_cutoff_ms=now - props.deleted_file_retention_ms)
    v2 = state.protocol.has_writer_feature("v2Checkpoint") and state.protocol.has_reader_feature("v2Checkpoint")
    uuid_named = v2 and props.checkpoint_policy == "v2"
    codec = checkpoint_codec(props)
    compression = "uncompressed" if codec == "none" else codec
    file_frame = _file_action_frame(reconciled, props, state, state.protocol.has_writer_feature("deletionVectors"))
    rows = non_file_rows(v, state.protocol, state.metadata, state.domains.values(), state.txns.values(), props, now, checkpoint_metadata=v2)

    run = new_run()
    staging = f"{STAGING}/{run.tag}"
    staging_uri = hadoop_path(store, staging)
    moved: list[str] = []
    observed = Observation(f"checkpoint-{run.token}")
    try:
        # One Spark job: the log is parsed, reconciled and written in a single pass; the counts come
        # back with the write (its tasks observe them), so nothing is scanned twice.
        if uuid_named:
            frame = file_frame if args.sidecars <= 0 else file_frame.repartition(args.sidecars, "_path")
            _counted(frame.select("add", "remove"), observed).write.option("compression", compression).parquet(staging_uri)
            got = observed.get
            num_adds, num_removes = int(got["adds"]), int(got["removes"])
            if int(got["rows"]) != num_adds + num_removes:
                raise JobFailed(f"{store.uri}: the write committed {got['rows']} rows for {num_adds} adds and {num_removes} removes")
            staged = _written_files(store, staging, int(got["rows"]))
            sidecar_rows = []
            for i, s in enumerate(staged, start=1):
                name = f"{v:020d}.checkpoint.{i:010d}.{len(staged):010d}.{run.tag}.parquet"
                store.move(s.name, f"{SIDECAR_DIR}/{name}")
                moved.append(f"{SIDECAR_DIR}/{name}")
                stat = store.stat(f"{SIDECAR_DIR}/{name}")
                if stat is None or stat.size != s.size:
                    raise JobFailed(f"{store.display(SIDECAR_DIR + '/' + name)}: sidecar vanished or changed after the move")
                sidecar_rows.append({"sidecar": {"path": name, "sizeInBytes": s.size, "modificationTime": stat.modification_time, "tags": None}})
            # delta-spark reads a V2 top-level file through the checkpoint schema and needs its add
            # and remove columns even when every file action lives in sidecars: the sidecars' own
            # types (null here), so both files of the checkpoint agree.
            file_types = {"add": cs.ADD_TYPE, "remove": cs.REMOVE_TYPE}
            if sidecar_rows:
                first = f"{SIDECAR_DIR}/{sidecar_rows[0]['sidecar']['path']}"
                side = parquet_footer(store, first, staged[0].size).schema.to_arrow_schema()
                file_types.update({n: side.field(n).type for n in file_types if n in side.names})
            top_schema = pa.schema(
                [pa.field(n, t) for n, t in [("txn", cs.TXN_TYPE), ("add", file_types["add"]), ("remove", file_types["remove"]),
                                             ("metaData", cs.METADATA_TYPE), ("protocol", cs.PROTOCOL_TYPE),
                                             ("domainMetadata", cs.DOMAIN_METADATA_TYPE), ("checkpointMetadata", cs.CHECKPOINT_METADATA_TYPE),
                                             ("sidecar", cs.SIDECAR_TYPE)]]
            )
            top = pa.Table.from_pylist(rows + sidecar_rows, schema=top_schema)  # non-file rows and one row per sidecar: small
            buf = io.BytesIO()
            pq.write_table(top, buf, compression=codec)
            final = uuid_checkpoint_name(v, str(uuid.uuid4()), "parquet")
            store.put_if_absent(final, buf.getvalue())
            moved.append(final)  # ours alone: removed again if it cannot be read back
            num_actions = len(rows) + num_adds + num_removes
            total = buf.tell() + sum(s.size for s in staged)
            written = [*moved]
        else:
            # No global sort (readers need no order) and no shuffle into one task: every task of the
            # reconciliation writes its part (the non-file rows' partition first), and the parts'
            # row groups are then copied into the one classic file (_parquet_concat).
            columns = ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"] + (["checkpointMetadata"] if v2 else [])
            parts = _non_file_frame(spark, rows, v2).coalesce(1).unionByName(file_frame.drop("_path"), allowMissingColumns=True)
            _counted(parts.select(*columns), observed).write.option("compression", compression).parquet(staging_uri)
            got = observed.get
            num_adds, num_removes, rows_written = int(got["adds"]), int(got["removes"]), int(got["rows"])
            num_actions = len(rows) + num_adds + num_removes
            if rows_written != num_actions:
                raise JobFailed(f"{store.uri}: the write committed {rows_written} rows for {len(rows)} non-file actions, {num_adds} adds and {num_removes} removes")
            staged = _written_files(store, staging, rows_written)
            joined = _joined(spark, store, staging, staged)
            final = classic_checkpoint_name(v)
            try:
                store.put_if_absent_from(joined.name, final)
            except LogFileExistsError:
                print(json.dumps({"version": v, "existed": True, "files": [final]}))
                return 0
            moved.append(final)
            total = joined.size
            written = [final]
        try:
            read_back_checkpoint(store, [final], expected_actions=num_actions)
        except DeltaLogError as exc:
            raise JobFailed(f"the checkpoint cannot be read back, so it was removed again: {exc}") from exc
        moved = []  # visible and verified: from here on nothing of it is removed
        update_last_checkpoint(store, LastCheckpointHint(version=v, size=num_actions, size_in_bytes=total, num_of_add_files=num_adds))
    except BaseException:
        for name in reversed(moved):  # this run's files: the top-level one first, then its sidecars
            store.delete(name)
        raise
    finally:
        store.delete_tree(staging)
    _cleanup_strays(store)
    print(json.dumps({"version": v, "existed": False, "files": written, "num_actions": num_actions, "num_add_files": num_adds,
                      "size_bytes": total, "seconds": round(time.monotonic() - started, 3)}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(_main, argv)


if __name__ == "__main__":  # spark-submit runs the file: the driver ends without teardown (see end_process)
    from airflow_delta_maintenance.deltalog._runtime.process_end import end_process

    sys.exit(end_process(main()))
