"""What an Airflow worker needs to plan and run maintenance, by table size: peak RSS and time of
each operation in a fresh process (``/usr/bin/time``), at 200k, 2M (and, with ``--sizes``, 10M)
live files.

The table: commit 0 (protocol, metadata), commits 1..10 of one file each, a classic checkpoint at
10 holding every live file (written row group by row group, so building a 10M-file table needs
little memory), then 20 small commits. Commits 0..10 and the checkpoint are 60 days old, so
cleanup has work to plan. Operations, as the use cases the operators call them:

- ``import``: the modules only (the fixed cost of a process);
- ``import-operators``: the checkpoint and cleanup operator classes (Airflow itself included), for
  scale: a worker process holds that anyway;
- ``spark-worker``: what ``DeltaCheckpointOperator(engine="spark")`` runs on the worker around the
  submission: ``open_table``, ``plan_checkpoint`` (listing, ratified protocol/metadata/properties,
  ``delta.checkpointInterval``, the decision) and, after the job, ``verify_checkpoint`` of the
  checkpoint (here the existing one at version 10, which holds every live file);
- ``cleanup``: ``run_metadata_cleanup(table, dry_run=True)``, as ``DeltaMetadataCleanupOperator``;
- ``status``: ``table_status(table)``, as the status sensor/CLI;
- ``checkpoint-local``: ``delta-maintenance checkpoint TABLE`` (the single-node engine replays
  every file action: it is expected to grow with the table; run only up to ``--heavy-up-to``);
- ``*-airflow``: the same, in a process that imported the operator classes first (Airflow
  included), as in a worker.

None of the first four replays file actions (protocol/metadata-only loading, checkpoint
verification by column and batch), so their peak should not grow with the table. The machine is
shared (2 cores, other agents running); runs are interleaved and reported with the load average.

    python benchmarks/worker_memory.py [--sizes 200000 2000000] [--repeat 3] [--ops ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import CLI, PYTHON, Runs, compile_package, in_subprocess, interleaved, run_measured

BUILD = r"""
import json, os, sys, time, uuid
import pyarrow as pa, pyarrow.parquet as pq
from airflow_delta_maintenance.deltalog.model import action_types as cs
root, n = sys.argv[1], int(sys.argv[2])
log = os.path.join(root, "_delta_log"); os.makedirs(log)
now = int(time.time() * 1000)
schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
          {"name": "day", "type": "string", "nullable": True, "metadata": {}}]}
protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
metadata = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
            "partitionColumns": ["day"], "configuration": {}, "createdTime": now}
def commit(v, actions):
    with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
        f.write("".join(json.dumps(a) + "\n" for a in [{"commitInfo": {"timestamp": now, "operation": "WRITE"}}, *actions]))
def add(path, day):
    stats = json.dumps({"numRecords": 10, "minValues": {"id": 1}, "maxValues": {"id": 9}, "nullCount": {"id": 0}})
    return {"path": path, "partitionValues": {"day": day}, "size": 1000, "modificationTime": now, "dataChange": True, "stats": stats}
commit(0, [{"protocol": protocol}, {"metaData": metadata}])
for v in range(1, 11):
    commit(v, [{"add": add(f"day=d{v}/c{v}.parquet", f"d{v}")}])
first = [add(f"day=d{v}/c{v}.parquet", f"d{v}") for v in range(1, 11)]
cols = {"protocol": cs.PROTOCOL_TYPE, "metaData": cs.METADATA_TYPE, "add": cs.ADD_TYPE, "remove": cs.REMOVE_TYPE, "txn": cs.TXN_TYPE}
arrow_schema = pa.schema([pa.field(k, t) for k, t in cols.items()])
def conv(a):
    return {**a, "partitionValues": list(a["partitionValues"].items())}
meta_row = {**metadata, "format": {"provider": "parquet", "options": []}, "configuration": []}
with pq.ParquetWriter(os.path.join(log, f"{10:020d}.checkpoint.parquet"), arrow_schema, compression="zstd") as w:
    head = [{"protocol": protocol}, {"metaData": meta_row}] + [{"add": conv(a)} for a in first]
    w.write_table(pa.Table.from_pylist(head, arrow_schema))
    done, batch = 0, 100_000
    while done < n - 10:
        k = min(batch, n - 10 - done)
        days = [f"2026-01-{(i % 28) + 1:02d}" for i in range(done, done + k)]
        rows = [{"add": conv(add(f"day={d}/part-{done + i:08d}-{uuid.UUID(int=done + i)}.parquet", d))} for i, d in enumerate(days)]
        w.write_table(pa.Table.from_pylist(rows, arrow_schema))
        done += k
with open(os.path.join(log, "_last_checkpoint"), "w") as f:
    f.write(json.dumps({"version": 10, "size": n + 2}))
for v in range(11, 31):
    commit(v, [{"add": add(f"day=new/n{v}.parquet", "new")}])
old = time.time() - 60 * 86400
for name in os.listdir(log):
    if name.startswith("000000000000000000") and int(name[:20]) <= 10:
        os.utime(os.path.join(log, name), (old, old))
print(json.dumps({"bytes": sum(os.path.getsize(os.path.join(log, x)) for x in os.listdir(log))}))
"""

OPS = r"""
import json, os, sys, time
op, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
op, in_airflow = op.removesuffix("-airflow"), op.endswith("-airflow") or op == "import-operators"
if in_airflow:
    from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator  # noqa: F401
    from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator  # noqa: F401
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from airflow_delta_maintenance.maintenance.operations.checkpoint import plan_checkpoint
from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
from airflow_delta_maintenance.maintenance.operations.status import table_status
from airflow_delta_maintenance.maintenance.spark.jobs import verify_checkpoint
imported = time.perf_counter()
out = {}
if not op.startswith("import"):
    with open_table(path) as table:
        if op == "spark-worker":
            plan = plan_checkpoint(table)
            group = verify_checkpoint(table.store, 10)
            out = {**plan.decision.to_dict(), "verified_files": len(group.files)}
        elif op == "cleanup":
            out = {"deletions": len(run_metadata_cleanup(table, dry_run=True).plan.deletions)}
        elif op == "status":
            out = {"cleanup_candidates": table_status(table).cleanup_candidates}
out.update(import_seconds=imported - t, op_seconds=time.perf_counter() - imported)
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""

ALL_OPS = ["import", "import-operators", "spark-worker", "cleanup", "status", "checkpoint-local",
           "spark-worker-airflow", "cleanup-airflow", "status-airflow"]
LIGHT_OPS = ("import", "import-operators", "spark-worker", "cleanup", "status", "spark-worker-airflow", "cleanup-airflow", "status-airflow")


def run_op(op: str, table: str, work: str, i: int) -> tuple[float, float, dict]:
    if op == "checkpoint-local":
        copy = os.path.join(work, f"ckpt-{i}")
        shutil.copytree(table, copy)
        try:
            return run_measured([CLI, "checkpoint", copy, "--force", "--json"])
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    return run_measured([PYTHON, "-c", OPS, op, table])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ops", nargs="+", default=ALL_OPS, choices=ALL_OPS)
    ap.add_argument("--heavy-up-to", type=int, default=2_000_000, help="the local checkpoint (a full replay) only up to this size")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    compile_package()
    work = tempfile.mkdtemp(prefix="bench-worker-")
    results: dict[int, dict[str, Runs]] = {}
    try:
        for size in ns.sizes:
            table = os.path.join(work, f"t{size}")
            t = time.perf_counter()
            built = json.loads(in_subprocess(BUILD, table, str(size)))
            print(f"built {size} live files ({built['bytes'] >> 20} MiB of log) in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
            ops = [o for o in ns.ops if size <= ns.heavy_up_to or o in LIGHT_OPS]
            results[size] = interleaved(ops, ns.repeat, lambda op, i, table=table: run_op(op, table, work, i))
            shutil.rmtree(table, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ns.json:
        print(json.dumps({str(k): {o: r.to_dict() for o, r in v.items()} for k, v in results.items()}, indent=2))
        return 0
    print(f"cpus {os.cpu_count()}; fresh process per run; median [min–max] of n runs; loadavg mean/max")
    print(f"{'live files':>10} {'operation':<20} {'peak RSS MiB':>22} {'wall s':>20} {'n':>2} {'loadavg':>9}")
    for size, by_op in results.items():
        for op, r in by_op.items():
            d = r.to_dict()
            m, s = d["peak_mib"], d["seconds"]
            print(
                f"{size:>10} {op:<20} {m['median']:>8.0f} [{m['min']:.0f}–{m['max']:.0f}]".ljust(55)
                + f"{s['median']:>7.2f} [{s['min']:.2f}–{s['max']:.2f}] {s['n']:>2} {d['load_mean']:>4.1f}/{d['load_max']:.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
