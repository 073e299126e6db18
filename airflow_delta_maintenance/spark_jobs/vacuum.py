"""Spark application: VACUUM's listing of the table root, or its deletions, in parallel on a cluster.

    spark-submit vacuum.py --table-uri URI --run-dir _spark_staging/vacuum-<tag>

The submitter (``maintenance.operations.vacuum``: the one orchestration of both engines) plans,
re-validates and records; this job only does the part whose cost grows with the number of objects.
``<run-dir>/tasks.json`` under ``_delta_log`` says which:

- ``{"action": "list", "partition_columns": [...], "iceberg_hidden": bool}``: the driver lists the
  root's own entries (one LIST) and hands each top-level directory to a Spark task, which lists
  everything below it with the worker's own rules (``deltalog.vacuum.listing``: hidden names, no
  link followed) and writes its part to ``<run-dir>/listing/part-<i>.parquet``;
- ``{"action": "delete", "row_groups": n}``: each Spark task deletes the paths of some row groups
  of ``<run-dir>/delete.parquet`` (the re-validated plan, written by the submitter).

The driver writes ``<run-dir>/result.json`` (created if absent) once every task has succeeded; the
submitter reads it back and checks it. Listing and deleting are idempotent: a retried task
redoes its part, a killed job is simply run again.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence

from airflow_delta_maintenance.deltalog.storage.run_identity import STAGING_DIR
from airflow_delta_maintenance.deltalog.vacuum.listing import listing_to_arrow, split_listing
from airflow_delta_maintenance.deltalog.vacuum.paths import HiddenNames
from airflow_delta_maintenance.spark_jobs._common import JobFailed, base_parser, load_credentials, open_store, run_job, spark_session
from airflow_delta_maintenance.spark_jobs._vacuum_tasks import delete_row_groups, list_prefixes, parquet_bytes

TASKS = "tasks.json"
RESULT = "result.json"
DELETE = "delete.parquet"


def _main(argv: Sequence[str] | None) -> int:
    p = base_parser("List a Delta table's root or delete VACUUM's planned files with Spark (the submitter plans)")
    p.add_argument("--run-dir", required=True, help=f"the run's directory under _delta_log ({STAGING_DIR}/vacuum-<tag>)")
    args = p.parse_args(argv)
    started = time.monotonic()
    if not args.run_dir.startswith(f"{STAGING_DIR}/vacuum-") or ".." in args.run_dir.split("/") or args.run_dir.count("/") != 1:
        raise JobFailed(f"--run-dir must be a directory {STAGING_DIR}/vacuum-<tag>, got {args.run_dir!r}")
    store = open_store(args)
    where = store.display(f"{args.run_dir}/{TASKS}")
    try:
        raw = json.loads(store.read(f"{args.run_dir}/{TASKS}"))
    except (OSError, ValueError) as exc:
        raise JobFailed(f"{where}: cannot read the tasks: {exc}") from exc
    action = raw.get("action") if isinstance(raw, dict) else None
    if action not in ("list", "delete"):
        raise JobFailed(f"{where}: action must be list or delete, got {action!r}")
    # the executors open the table's storage themselves: its options (credentials included) travel
    # in the tasks' closure, never in argv, environment or Spark conf
    options = {**json.loads(os.environ.get(args.storage_options_env) or "{}"), **load_credentials().get("storage_options", {})}
    options_json, uri, run_dir = json.dumps(options), args.table_uri, args.run_dir
    spark = spark_session(f"delta-vacuum-{action} {store.uri}")
    sc = spark.sparkContext
    if action == "list":
        columns = [str(c) for c in raw.get("partition_columns") or []]
        iceberg = bool(raw.get("iceberg_hidden"))
        head, prefixes = split_listing(store, HiddenNames(columns, iceberg_metadata_hidden=iceberg))
        head_name = f"{run_dir}/listing/head.parquet"
        store.put_if_absent(head_name, parquet_bytes(listing_to_arrow(head)))
        parts = [(head_name, head.num_files)]
        if prefixes:
            rdd = sc.parallelize(list(enumerate(prefixes)), numSlices=min(len(prefixes), max(sc.defaultParallelism * 4, 1)))
            done = sorted(rdd.mapPartitions(lambda items: list_prefixes(uri, options_json, run_dir, columns, iceberg, items)).collect())
            parts += [(name, n) for _, name, n in done]
        result = {"action": "list", "parts": [n for n, _ in parts], "files": sum(n for _, n in parts), "tasks": len(prefixes)}
    else:
        groups = int(raw.get("row_groups") or 0)
        name = f"{run_dir}/{DELETE}"
        deleted = 0
        if groups:
            groups_rdd = sc.parallelize(list(range(groups)), numSlices=min(groups, max(sc.defaultParallelism * 4, 1)))
            counts: list[int] = groups_rdd.mapPartitions(lambda gs: delete_row_groups(uri, options_json, name, gs)).collect()
            deleted = sum(counts)
        result = {"action": "delete", "deleted": deleted, "tasks": groups}
    store.put_if_absent(f"{run_dir}/{RESULT}", json.dumps(result, separators=(",", ":")).encode("utf-8"))
    print(json.dumps({**{k: v for k, v in result.items() if k != "parts"}, "result": f"{run_dir}/{RESULT}",
                      "seconds": round(time.monotonic() - started, 3)}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(_main, argv)


if __name__ == "__main__":  # spark-submit runs the file: the driver ends without teardown (see end_process)
    from airflow_delta_maintenance.deltalog._runtime.process_end import end_process

    sys.exit(end_process(main()))
