"""Where ``engine: auto`` should switch checkpoints from the worker to Spark: both engines, same
tables, same run, by the size of the log segment the checkpoint replays.

    python benchmarks/checkpoint_engines.py [--files 10000 100000 500000 2000000] [--repeat 2]
                                            [--commits 200] [--driver-memory 1g] [--json PATH]

- worker: ``delta-maintenance checkpoint TABLE --engine local --interval 1`` — a fresh process, as
  a task runs ``engine: local`` (the Airflow task has the package imported already, so its
  import time, about 1 s here, is on the worker's side of the ledger);
- Spark: our ``spark_jobs/checkpoint.py`` through ``spark-submit --master local[2]`` (the
  ``engine: spark`` submission, ``spark.driver.memory`` = ``--driver-memory``), JVM start
  included, timed from launch to exit.

Tables: the synthetic logs of ``spark_checkpoint.py`` (``--commits`` commits, partitioned, JSON
stats, a few removes per commit), cached under ``--cache``; the log-segment size printed is what
``choose_checkpoint_engine`` measures (the bytes of the commits; no checkpoint yet). Every run
removes what it added to ``_delta_log``. Runs alternate (worker, Spark, Spark, worker, …); each
figure is the median of ``--repeat`` runs with min–max and the 1-minute load before each run.
Peak RSS: the worker process's own (``/usr/bin/time``); for Spark the largest JVM and the PySpark driver.

The crossover: the worker is faster at every size this machine can build (Spark pays 20-40 s of
JVM start and job scheduling before it reads a byte), so the switch is set by the worker's memory,
not its time: the printed "worker MiB per MiB of log" is what the threshold is derived from.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import CLI, compile_package, load1, run_measured
from spark_checkpoint import ensure_table, log_names, ours_cmd, restore, run_tree


def segment_bytes(table: str) -> int:
    log = os.path.join(table, "_delta_log")
    return sum(os.path.getsize(os.path.join(log, f)) for f in os.listdir(log) if f.endswith(".json"))


def worker_cmd(table: str) -> list[str]:
    return [CLI, "checkpoint", table, "--engine", "local", "--interval", "1", "--json"]


def med(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000, 500_000, 2_000_000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--cache", default="/tmp/delta-maintenance-bench-spark")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    compile_package()
    results: list[dict[str, Any]] = []
    for files in args.files:
        table = ensure_table(args.cache, files, args.commits, False, args.driver_memory)
        before = log_names(table)
        size = segment_bytes(table)
        runs: dict[str, list[dict[str, Any]]] = {"worker": [], "spark": []}
        for i in range(args.repeat):
            for side in (["worker", "spark"] if i % 2 == 0 else ["spark", "worker"]):
                load = load1()
                try:
                    if side == "worker":  # /usr/bin/time: the process's own peak RSS
                        seconds, peak, _ = run_measured(worker_cmd(table))
                        r = {"seconds": seconds, "python_mib": peak, "jvm_mib": 0.0}
                    else:
                        cmd, env = ours_cmd(table, args.commits - 1, args.driver_memory)
                        r = run_tree(cmd, env)
                finally:
                    restore(table, before)
                r["load"] = load
                runs[side].append(r)
                mem = r["python_mib"] if side == "worker" else r["jvm_mib"]
                print(f"  {files} {side} run {i + 1}/{args.repeat}: {r['seconds']:.1f}s {mem:.0f} MiB (load {load:.2f})", file=sys.stderr, flush=True)
        w = med([r["seconds"] for r in runs["worker"]])
        s = med([r["seconds"] for r in runs["spark"]])
        w_mib = max(r["python_mib"] for r in runs["worker"])
        results.append({"files": files, "segment_bytes": size, "worker": w, "spark": s, "worker_peak_mib": w_mib,
                        "spark_jvm_mib": max(r["jvm_mib"] for r in runs["spark"]),
                        "spark_python_mib": max(r["python_mib"] for r in runs["spark"]),
                        "loads": [r["load"] for side in runs.values() for r in side]})
    print(f"Checkpoint engines, worker vs Spark local[2] (driver {args.driver_memory}), {args.commits} commits; median [min–max] of n interleaved runs")
    print(f"{'live files':>10} {'log MiB':>8} | {'worker s':>18} {'MiB':>6} | {'spark s':>18} {'JVM MiB':>7} {'py MiB':>6} | worker/spark | worker MiB per log MiB | load")
    for r in results:
        w, s = r["worker"], r["spark"]
        log_mib = r["segment_bytes"] / 2**20
        print(f"{r['files']:>10} {log_mib:8.1f} | {w['median']:6.1f} [{w['min']:.1f}–{w['max']:.1f}] n={w['n']} {r['worker_peak_mib']:6.0f} | "
              f"{s['median']:6.1f} [{s['min']:.1f}–{s['max']:.1f}] n={s['n']} {r['spark_jvm_mib']:7.0f} {r['spark_python_mib']:6.0f} | "
              f"{w['median'] / s['median']:11.2f}x | {r['worker_peak_mib'] / max(log_mib, 1e-9):22.2f} | "
              f"{statistics.mean(r['loads']):.1f} (max {max(r['loads']):.1f})")
    faster = [r for r in results if r["worker"]["median"] > r["spark"]["median"]]
    print("crossover (time): " + (f"Spark faster from {faster[0]['segment_bytes'] / 2**20:.0f} MiB of log" if faster
                                  else "none measured: the worker is faster at every size"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
