"""Checkpoint, log compaction and metadata cleanup: ours vs delta-rs (the `deltalake` wheel).

Every operation runs on an identical copy of the same synthetic log, each engine in a fresh
subprocess after a warm-up on a one-commit table, so time and peak RSS are its own.

    python benchmarks/maintenance_ops.py [--files 200000 2000000] [--cleanup-commits 20000] [--repeat 1]

- checkpoint: our `load_snapshot` + `write_checkpoint` vs `DeltaTable(...).create_checkpoint()`
- compaction: our `write_compaction(store, 1, N)` vs `DeltaTable(...).compact_logs(1, N)`
- cleanup: our plan + execute vs `DeltaTable(...).cleanup_metadata()` on a log of many commits,
  all older than the retention, with a checkpoint near the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_load import build_log  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time
op, engine, path, warmup = sys.argv[1:5]
args = json.loads(sys.argv[5])
if engine == "ours":
    from airflow_delta_maintenance.deltalog.storage import open_table_storage
    from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
    from airflow_delta_maintenance.deltalog.checkpoint_writer import write_checkpoint
    from airflow_delta_maintenance.deltalog.compaction import write_compaction
    from airflow_delta_maintenance.deltalog.cleanup import plan_log_cleanup, execute_cleanup
    load_snapshot(warmup)
    t = time.perf_counter()
    store = open_table_storage(path)
    if op == "checkpoint":
        write_checkpoint(store, load_snapshot(store))
    elif op == "compaction":
        write_compaction(store, args["start"], args["end"])
    else:
        from airflow_delta_maintenance.deltalog.listing import list_log_files
        files = list_log_files(store)  # one LIST, shared by the snapshot and the plan
        plan = plan_log_cleanup(store, load_snapshot(store, files=files), retention_ms=args["retention_ms"], files=files)
        execute_cleanup(store, plan, dry_run=False)
else:
    import deltalake
    deltalake.DeltaTable(warmup).get_add_actions()
    t = time.perf_counter()
    dt = deltalake.DeltaTable(path)
    if op == "checkpoint":
        dt.create_checkpoint()
    elif op == "compaction":
        dt.compact_logs(args["start"], args["end"])
    else:
        dt.cleanup_metadata()
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
sys.stdout.flush()
os._exit(0)
"""


def run(op: str, engine: str, source: str, warmup: str, work: str, args: dict, repeat: int) -> dict[str, float]:
    runs = []
    for i in range(repeat):
        copy = os.path.join(work, f"{op}-{engine}-{i}")
        shutil.copytree(source, copy)
        out = subprocess.run([sys.executable, "-c", CHILD, op, engine, copy, warmup, json.dumps(args)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{op}/{engine} failed: {out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        shutil.rmtree(copy, ignore_errors=True)
    return {"seconds": statistics.median(r["seconds"] for r in runs), "peak_rss_mib": max(r["maxrss_kb"] for r in runs) / 1024}


def age_log(path: str, days: int) -> None:
    """Make every log file look `days` old (cleanup benchmarks need expired commits)."""
    old = time.time() - days * 86400
    for name in os.listdir(os.path.join(path, "_delta_log")):
        os.utime(os.path.join(path, "_delta_log", name), (old, old))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, nargs="+", default=[200_000, 2_000_000])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--cleanup-commits", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--ops", nargs="+", default=["checkpoint", "compaction", "cleanup"])
    ns = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-maint-")
    rows = []
    try:
        warmup = os.path.join(work, "warmup")
        build_log(warmup, 2, 10)
        for files in ns.files:
            source = os.path.join(work, f"log-{files}")
            t = time.perf_counter()
            build_log(source, ns.commits, files)
            print(f"built {ns.commits} commits / {files} files in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            if "checkpoint" in ns.ops:
                rows.append(("checkpoint", files, {e: run("checkpoint", e, source, warmup, work, {}, ns.repeat) for e in ("ours", "delta-rs")}))
            if "compaction" in ns.ops:
                args = {"start": 1, "end": ns.commits - 1}
                rows.append(("compaction", files, {e: run("compaction", e, source, warmup, work, args, ns.repeat) for e in ("ours", "delta-rs")}))
            shutil.rmtree(source, ignore_errors=True)
        if "cleanup" in ns.ops:
            import deltalake

            source = os.path.join(work, "cleanup-log")
            build_log(source, ns.cleanup_commits, ns.cleanup_commits * 2)
            deltalake.DeltaTable(source, version=ns.cleanup_commits - 10).create_checkpoint()
            age_log(source, 60)
            args = {"retention_ms": 30 * 86_400_000}
            rows.append(("cleanup", ns.cleanup_commits, {e: run("cleanup", e, source, warmup, work, args, ns.repeat) for e in ("ours", "delta-rs")}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'operation':<11} {'size':>9} {'ours s':>8} {'delta-rs s':>10} {'time ratio':>10} {'ours MiB':>9} {'delta-rs MiB':>12} {'mem ratio':>9}")
    for op, size, r in rows:
        o, p = r["ours"], r["delta-rs"]
        print(
            f"{op:<11} {size:>9} {o['seconds']:>8.2f} {p['seconds']:>10.2f} {o['seconds'] / p['seconds']:>10.2f} "
            f"{o['peak_rss_mib']:>9.0f} {p['peak_rss_mib']:>12.0f} {o['peak_rss_mib'] / p['peak_rss_mib']:>9.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
