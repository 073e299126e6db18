"""What an Airflow worker needs to plan and run maintenance, by table size: peak RSS and time of
each operation in a fresh process (``/usr/bin/time``), at 200k, 2M (and, with ``--sizes``, 10M)
live files.

The table: commit 0 (protocol, metadata), commits 1..10 of one file each, a classic checkpoint at
10 holding every live file (written row group by row group, so building a 10M-file table needs
little memory), then 20 small commits. Commits 0..10 and the checkpoint are 60 days old, so
cleanup has work to plan. Operations, as the use cases the operators call them:

- ``import``: the modules only (the fixed cost of a process);
- ``checkpoint local``: ``delta-maintenance checkpoint TABLE`` (full replay, checkpoint written);
- ``spark worker side``: what ``DeltaCheckpointOperator(engine="spark")`` runs on the worker
  before submitting: one listing, the table's ``delta.checkpointInterval``, ``decide_checkpoint``;
- ``cleanup``: ``maintenance.cleanup.run_metadata_cleanup(dry_run=True)``;
- ``status``: ``maintenance.status.table_status``.

Each of the last three is measured as wired today (``load_snapshot``: every file action replayed)
and with ``load_table_state`` in its place (``*-state``: protocol, metadata and properties only),
the change the ``deltalog.table_state`` API exists for; ``cleanup-light``/``status-light`` also
plan cleanup with ``referenced_sidecar_names`` (only the checkpoints' ``sidecar`` column) in place
of ``deltalog.cleanup``'s whole-file read of every remaining checkpoint. The machine is shared (2 cores, other
agents running); runs are short, interleaved, and reported with the load average.

    python benchmarks/worker_memory.py [--sizes 200000 2000000] [--repeat 2] [--ops ...] [--json]
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
from _harness import CLI, PYTHON, Runs, in_subprocess, interleaved, run_measured

BUILD = r"""
import json, os, sys, time, uuid
import pyarrow as pa, pyarrow.parquet as pq
from airflow_delta_maintenance.deltalog import checkpoint_schema as cs
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
from airflow_delta_maintenance.deltalog.listing import list_log_files
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.deltalog.table_state import load_table_state
from airflow_delta_maintenance.maintenance import cleanup, status
from airflow_delta_maintenance.maintenance.checkpoint import decide_checkpoint
light = op.endswith("-state") or op.endswith("-light")
load = load_table_state if light else load_snapshot
if light:  # the wiring the table-state API is for: same arguments, no file actions
    cleanup.load_snapshot = status.load_snapshot = load_table_state
if op.endswith("-light"):  # and cleanup planning reading only the checkpoints' sidecar column
    from airflow_delta_maintenance.deltalog import cleanup as plan
    from airflow_delta_maintenance.deltalog.table_state import referenced_sidecar_names
    plan._referenced_sidecars = referenced_sidecar_names
imported = time.perf_counter()
store = open_table_storage(path)
out = {}
if op == "import":
    pass
elif op.startswith("spark-worker"):
    files = list_log_files(store)
    interval = load(store, files=files).properties.checkpoint_interval
    out = decide_checkpoint(files, interval=interval).to_dict()
elif op.startswith("cleanup"):
    out = {"deletions": len(cleanup.run_metadata_cleanup(store, dry_run=True).plan.deletions)}
elif op.startswith("status"):
    out = {"cleanup_candidates": status.table_status(store).cleanup_candidates}
out.update(import_seconds=imported - t, op_seconds=time.perf_counter() - imported)
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""

ALL_OPS = ["import", "spark-worker", "spark-worker-state", "cleanup", "cleanup-state", "cleanup-light", "status", "status-state", "status-light", "checkpoint-local"]


def run_op(op: str, table: str, work: str, i: int) -> tuple[float, float, dict]:
    if op == "checkpoint-local":
        copy = os.path.join(work, f"ckpt-{i}")
        shutil.copytree(table, copy)
        try:
            return run_measured([CLI, "checkpoint", copy, "--json"])
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    return run_measured([PYTHON, "-c", OPS, op, table])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ops", nargs="+", default=ALL_OPS, choices=ALL_OPS)
    ap.add_argument("--heavy-up-to", type=int, default=2_000_000, help="replaying ops (today's wiring, local checkpoint) only up to this size")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-worker-")
    results: dict[int, dict[str, Runs]] = {}
    try:
        for size in ns.sizes:
            table = os.path.join(work, f"t{size}")
            t = time.perf_counter()
            built = json.loads(in_subprocess(BUILD, table, str(size)))
            print(f"built {size} live files ({built['bytes'] >> 20} MiB of log) in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
            ops = [o for o in ns.ops if size <= ns.heavy_up_to or o == "import" or o.endswith(("-state", "-light"))]
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
