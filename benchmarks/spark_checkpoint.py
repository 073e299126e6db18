"""Spark checkpoint vs the single-node writer vs `deltalake.create_checkpoint`, on big logs.

    python benchmarks/spark_checkpoint.py [--files 2000000 10000000] [--commits 200] [--driver-memory 1g]
                                          [--memory-cap-gib 3]

For each size, each engine runs in a fresh subprocess on its own copy of the same synthetic log;
the script reports wall time and peak RSS (the largest process of the engine's tree: the JVM for
Spark, the Python process otherwise). Spark runs in ``local[2]`` with ``spark.driver.memory`` =
``--driver-memory``. With ``--memory-cap-gib`` the single-node writer and delta-rs also run under
that address-space cap (RLIMIT_AS), to show which engines complete within bounded memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_load import build_log

from airflow_delta_maintenance.maintenance.spark_submit import checkpoint_job

LOCAL = r"""
import sys
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.checkpoint_writer import write_checkpoint
store = open_table_storage(sys.argv[1]); write_checkpoint(store, load_snapshot(store))
"""
WHEEL = r"""
import os, sys, deltalake
deltalake.DeltaTable(sys.argv[1]).create_checkpoint(); sys.stdout.flush(); os._exit(0)
"""


# Runs one engine and reports the peak RSS of its process tree (RUSAGE_CHILDREN of a fresh
# wrapper, so engines never see each other's peaks), with an optional address-space cap.
WRAP = r"""
import json, resource, subprocess, sys
spec = json.loads(sys.argv[1])
def limit():
    if spec["cap"]:
        size = int(spec["cap"] * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
p = subprocess.run(spec["cmd"], capture_output=True, text=True, preexec_fn=limit)
err = "" if p.returncode == 0 else ((p.stderr.strip().splitlines() or ["?"])[-1])[:120]
print(json.dumps({"rc": p.returncode, "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "error": err}))
"""


def measure(cmd: list[str], env: dict[str, str] | None = None, cap_gib: float | None = None) -> dict[str, object]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAP, json.dumps({"cmd": cmd, "cap": cap_gib})], env=env, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - started
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"ok": r["rc"] == 0, "seconds": elapsed, "peak_rss_mib": r["maxrss_kb"] / 1024, "error": r["error"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, nargs="+", default=[2_000_000, 10_000_000])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--memory-cap-gib", type=float, default=None)
    ap.add_argument("--engines", nargs="+", default=["spark", "single-node", "delta-rs"], choices=["spark", "single-node", "delta-rs"])
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-spark-ckpt-")
    rows = []
    try:
        for files in args.files:
            source = os.path.join(work, f"log-{files}")
            t = time.perf_counter()
            build_log(source, args.commits, files)
            print(f"built {args.commits} commits / {files} live files in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
            results = {}
            for engine in args.engines:
                copy = os.path.join(work, f"{engine}-{files}")
                shutil.copytree(source, copy)
                if engine == "spark":
                    job = checkpoint_job(copy, args.commits - 1, conf={"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "64"})
                    env = {**os.environ, **job.env_vars, "SPARK_LOCAL_IP": "127.0.0.1"}
                    results[engine] = measure(job.command("local[2]"), env)
                else:
                    code = LOCAL if engine == "single-node" else WHEEL
                    results[engine] = measure([sys.executable, "-c", code, copy], cap_gib=args.memory_cap_gib)
                print(f"  {engine}: {json.dumps(results[engine])}", file=sys.stderr, flush=True)
                shutil.rmtree(copy, ignore_errors=True)
            rows.append((files, results))
            shutil.rmtree(source, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cap = f" (single-node and delta-rs capped at {args.memory_cap_gib} GiB)" if args.memory_cap_gib else ""
    print(f"Spark local[2], spark.driver.memory={args.driver_memory}{cap}")
    print(f"{'live files':>10} {'engine':<12} {'ok':<4} {'seconds':>8} {'peak RSS MiB':>13}  note")
    for files, results in rows:
        for engine, r in results.items():
            peak = f"{r['peak_rss_mib']:.0f}" if r["peak_rss_mib"] else "-"
            print(f"{files:>10} {engine:<12} {'yes' if r['ok'] else 'NO':<4} {r['seconds']:>8.1f} {peak:>13}  {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
