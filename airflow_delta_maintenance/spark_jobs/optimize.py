"""Spark application: rewrite OPTIMIZE's planned bins in parallel, one Spark task per bin.

    spark-submit optimize.py --table-uri URI --run-dir _spark_staging/optimize-<tag>

The submitter (``maintenance.operations.optimize``, the one orchestration of both engines) plans
the bins and writes them as JSON tasks to ``<run-dir>/tasks.json`` under ``_delta_log``. This job
follows Spark's DelayedCommitProtocol: each task reads its bin's files (deletion vectors
applied), writes one file ``part-<split>-<uuid>.<codec>.parquet`` into the partition's directory
and returns its ``add`` action as its commit message; only when every task has succeeded does the
driver collect them, and it writes them, created if absent, to ``<run-dir>/result.json``. The job
commits nothing: the submitter commits the adds batch by batch through the table's coordinator,
with Delta's conflict checks. A failed task's or a dead run's files are referenced by no version.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence

from airflow_delta_maintenance.deltalog.optimize.tasks import task_from_json
from airflow_delta_maintenance.deltalog.storage.run_identity import STAGING_DIR
from airflow_delta_maintenance.spark_jobs._bin_rewrite import rewrite_bins
from airflow_delta_maintenance.spark_jobs._common import JobFailed, base_parser, load_credentials, open_store, run_job, spark_session

TASKS = "tasks.json"
RESULT = "result.json"


def _main(argv: Sequence[str] | None) -> int:
    p = base_parser("Rewrite OPTIMIZE's bins with Spark (the submitter commits)")
    p.add_argument("--run-dir", required=True, help=f"the run's directory under _delta_log ({STAGING_DIR}/optimize-<tag>)")
    args = p.parse_args(argv)
    started = time.monotonic()
    if not args.run_dir.startswith(f"{STAGING_DIR}/optimize-") or ".." in args.run_dir.split("/"):
        raise JobFailed(f"--run-dir must be a directory {STAGING_DIR}/optimize-<tag>, got {args.run_dir!r}")
    store = open_store(args)
    try:
        raw = json.loads(store.read(f"{args.run_dir}/{TASKS}"))
    except (OSError, ValueError) as exc:
        raise JobFailed(f"{store.display(args.run_dir + '/' + TASKS)}: cannot read the tasks: {exc}") from exc
    tasks = raw.get("tasks") if isinstance(raw, dict) else None
    if not isinstance(tasks, list) or not tasks:
        raise JobFailed(f"{store.display(args.run_dir + '/' + TASKS)}: no tasks")
    for t in tasks:
        task_from_json(t)  # every task well-formed before any is run

    spark = spark_session(f"delta-optimize {store.uri} ({len(tasks)} bin(s))")
    # the executors open the table's storage themselves: its options (credentials included) travel
    # in the tasks' closure, never in argv, environment or Spark conf
    options = {**json.loads(os.environ.get(args.storage_options_env) or "{}"), **load_credentials().get("storage_options", {})}
    options_json, uri = json.dumps(options), args.table_uri
    rdd = spark.sparkContext.parallelize(list(enumerate(tasks)), numSlices=len(tasks))
    # DelayedCommitProtocol: collect() returns only when every task succeeded (a failed attempt's
    # file is left unreferenced; its retry writes a new name)
    collected = dict(rdd.mapPartitions(lambda items: rewrite_bins(uri, options_json, items)).collect())
    adds = [collected[i] for i in range(len(tasks))]
    store.put_if_absent(f"{args.run_dir}/{RESULT}", json.dumps({"adds": adds}, separators=(",", ":")).encode("utf-8"))
    written = sum(1 for a in adds if a)
    print(json.dumps({"version": raw.get("version"), "bins": len(tasks), "files_written": written, "result": f"{args.run_dir}/{RESULT}",
                      "seconds": round(time.monotonic() - started, 3)}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(_main, argv)


if __name__ == "__main__":  # spark-submit runs the file: the driver ends without teardown (see end_process)
    from airflow_delta_maintenance.deltalog._runtime.process_end import end_process

    sys.exit(end_process(main()))
