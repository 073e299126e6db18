"""Spark application: write ``<start>.<end>.compacted.json`` over published commits.

    spark-submit log_compaction.py --table-uri URI --start X --end Y

Executors read the commits as text, parse only the file keys, and keep the newest line per
(path, deletion-vector unique id) — every tombstone kept, whatever its age. The file holds the
single-node writer's head and lines (the lines sorted by key here, in log order there: readers
give a compaction's lines no order), written by one task into a private staging directory,
checked against the bytes that task reports writing, and created if absent (local: a hard link):
nothing is visible before that single atomic step, and the driver's Python process never holds
the file.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from pyspark.sql import Observation, Window, functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.log_compaction.windows import check_compaction_supported, compaction_head
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.actions import NonFileState
from airflow_delta_maintenance.deltalog.model.paths import compaction_name
from airflow_delta_maintenance.deltalog.storage.run_identity import STAGING_DIR, new_run
from airflow_delta_maintenance.spark_jobs._common import JobFailed, base_parser, file_key_path, hadoop_path, maybe_non_file, open_store, run_job, spark_session, version_from_file

_DV = StructType([StructField("storageType", StringType()), StructField("pathOrInlineDv", StringType()), StructField("offset", LongType())])
_KEYS = StructType(
    [
        StructField("add", StructType([StructField("path", StringType()), StructField("deletionVector", _DV)])),
        StructField("remove", StructType([StructField("path", StringType()), StructField("deletionVector", _DV)])),
    ]
)


def _dv_id(dv: F.Column) -> F.Column:
    offset = F.when(dv["offset"].isNotNull(), F.concat(F.lit("@"), dv["offset"].cast("string"))).otherwise(F.lit(""))
    return F.when(dv.isNotNull(), F.concat(dv["storageType"], dv["pathOrInlineDv"], offset))


def _main(argv: Sequence[str] | None) -> int:
    p = base_parser("Write a Delta log compaction file with Spark")
    p.add_argument("--start", type=int, required=True)
    p.add_argument("--end", type=int, required=True)
    args = p.parse_args(argv)
    started = time.monotonic()
    if args.end <= args.start:
        raise JobFailed(f"a compaction needs end > start, got [{args.start}, {args.end}]")
    store = open_store(args)
    files = list_log_files(store)
    name = compaction_name(args.start, args.end)
    if any(c.version == args.start and c.end_version == args.end for c in files.compactions):
        print(json.dumps({"path": name, "created": False}))
        return 0
    check_compaction_supported(store, files)  # the shared write gate, as on a single node
    commits = {c.version: c for c in files.commits}
    present = sorted(v for v in commits if args.start <= v <= args.end)  # from the files, never the range
    if len(present) != args.end - args.start + 1:
        first = next((args.start + i for i, v in enumerate(present) if v != args.start + i), args.start + len(present))
        raise JobFailed(f"{store.uri}: version {first} is not published; compactions cover published versions only")

    spark = spark_session(f"delta-compaction {store.uri}[{args.start},{args.end}]", store)
    paths = [hadoop_path(store, commits[v].name) for v in range(args.start, args.end + 1)]
    lines = (
        spark.read.text(paths)
        .withColumn("_version", version_from_file(F.col("_metadata.file_name")))
        .where(F.trim(F.col("value")) != "")
    )
    parsed = lines.withColumn("_a", F.from_json("value", _KEYS))
    is_file = F.col("_a.add.path").isNotNull() | F.col("_a.remove.path").isNotNull()

    # One cheap pass for the few lines the driver needs: non-file actions (a prefix test skips the
    # file actions without parsing them) and any line holding both an add and a remove.
    value = F.ltrim(F.col("value"))
    few = parsed.where(maybe_non_file(value) | (value.contains('"add"') & value.contains('"remove"')))
    state = NonFileState()
    rows = few.select("value", "_version", F.col("_a.add").isNotNull().alias("a"), F.col("_a.remove").isNotNull().alias("r"), is_file.alias("f")).collect()
    two = sorted(r["_version"] for r in rows if r["a"] and r["r"])
    if two:  # one action per line: nothing is written from a line holding two
        raise JobFailed(f"{store.uri}: {commits[two[0]].name} has a line with more than one action")
    # Non-file actions are few: reconcile them on the driver in version order.
    for row in sorted((r for r in rows if not r["f"]), key=lambda r: r["_version"]):
        state.take(json.loads(row["value"]))

    # every add/remove line, a nameless one too (it fails the job rather than vanish from the file)
    files_df = parsed.where(F.col("_a.add").isNotNull() | F.col("_a.remove").isNotNull()).select(
        file_key_path(F.col("_a.add.path"), F.col("_a.remove.path"), F.col("_version")).alias("path"),
        F.coalesce(_dv_id(F.col("_a.add.deletionVector")), _dv_id(F.col("_a.remove.deletionVector")), F.lit("")).alias("dv"),
        F.col("_a.add.path").isNotNull().alias("is_add"),
        "value",
        "_version",
    )
    # newest line per key: one shuffle and a sort within partitions (an aggregation over the line
    # cannot hash-aggregate); then the lines sorted by key (deterministic), in one partition
    newest = F.row_number().over(Window.partitionBy("path", "dv").orderBy(F.col("_version").desc()))
    winners = files_df.withColumn("_rank", newest).where(F.col("_rank") == 1)
    ordered = winners.repartition(1).sortWithinPartitions(F.col("is_add").desc(), "path", "dv").select("value")
    head = compaction_head(state.protocol, state.metadata, state.txns.values(), state.domains.values()).decode("utf-8").splitlines()
    head_df = spark.createDataFrame([(h,) for h in head], StructType([StructField("value", StringType())])).coalesce(1)
    body = head_df.union(ordered).coalesce(1)  # the head's partition first, then the sorted lines

    run = new_run()
    staging = f"{STAGING_DIR}/{run.tag}"
    observed = Observation(f"compaction-{run.token}")
    counted = body.observe(observed, F.count(F.lit(1)).alias("lines"), F.coalesce(F.sum(F.octet_length("value") + 1), F.lit(0)).alias("bytes"))
    created = False
    try:
        # Written by one task into a private staging directory; the driver never holds the file.
        counted.write.option("compression", "none").text(hadoop_path(store, staging))
        got = observed.get
        lines_written, size = int(got["lines"]), int(got["bytes"])
        staged = [f for f in store.list_dir(staging) if f.name.rsplit("/", 1)[-1].startswith("part-")]
        if len(staged) > 1 or (staged and staged[0].size != size) or (not staged and size):
            raise JobFailed(f"{store.display(staging)}: the write produced {[(f.name, f.size) for f in staged]}, its task wrote {size} bytes")
        try:
            if staged:
                store.put_if_absent_from(staged[0].name, name)
            else:
                store.put_if_absent(name, b"")
            created = True
        except LogFileExistsError:
            pass
    finally:
        store.delete_tree(staging)
    print(json.dumps({"path": name, "created": created, "num_file_actions": lines_written - len(head), "size_bytes": size,
                      "seconds": round(time.monotonic() - started, 3)}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(_main, argv)


if __name__ == "__main__":  # spark-submit runs the file: the driver ends without teardown (see end_process)
    from airflow_delta_maintenance.deltalog._runtime.process_end import end_process

    sys.exit(end_process(main()))
