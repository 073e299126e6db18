"""Snapshot load: ours vs delta-rs (the `deltalake` wheel), like for like, measured in the same run.

Builds a synthetic log of ~200 commits and ~200,000 live files (partitioned, with JSON stats and
some removes), in two layouts: commits only, and a checkpoint (written by delta-rs) halfway.

What each side does, timed inside a fresh process after both engines loaded a small table with a
checkpoint and a commit after it (imports, lazy initialisation and thread pools are not timed; a
warm-up table without a checkpoint left ours importing ``pyarrow.parquet``, ~15 ms, inside the
timed load of the checkpointed layout):

- delta-rs: ``DeltaTable(path)`` then ``get_add_actions(flatten=False)``: the live files with their
  statistics parsed (``num_records``, ``null_count``, ``min``, ``max``) and typed partition values.
- ours: ``load_snapshot(path, parse_stats=True)``, then ``parsed_stats()`` and
  ``parsed_partition_values()`` (the checkpoint writer's ``stats_parsed`` and
  ``partitionValues_parsed``: the stats strings read by the compiled reader when it is built —
  pyarrow's JSON reader takes the rows it leaves, and all of them without it — started on a thread
  pool as each part of the log is read; partition values looked up and cast), so both sides end
  with parsed statistics. ``--strings`` also
  reports ours without the parsing (stats kept as JSON strings, as ``load_snapshot`` returns them;
  delta-rs has no such mode, so that figure is not a ratio). ``ours`` runs as the command's own
  process does (``own_process_allocator()``: glibc's thresholds tuned while the load runs);
  ``--embedded`` also reports ours as a library inside a host process such as an Airflow worker,
  where glibc's thresholds are never touched.

Runs alternate between the engines (see ``_harness.py``); each figure is the median of
``--repeat`` runs with min–max and the 1-minute load average at the time, the load's wall time
beside its CPU time (all threads; on a machine loaded above its cores the wall time mostly says how
the scheduler shared them, the CPU time what each engine spent). Peak RSS is each
process's own (``/usr/bin/time``); "load RSS" is the growth of the peak during the timed load.

``--baseline-root DIR`` adds ``ours-before``: the same load from the package of another checkout (an
earlier commit, with its C accelerators built), interleaved in the same run.

    python benchmarks/snapshot_load.py [--files 200000] [--commits 200] [--repeat 5] [--strings] [--baseline-root DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import PYTHON, Runs, baseline_env, build_log_in_subprocess, compile_package, fmt, in_subprocess, interleaved, run_measured

# The measured code, in a fresh process: prints {"inner_seconds", "inner_cpu_seconds" (all threads),
# "files", "maxrss_kb", "base_kb"}.
CHILD = r"""
import json, os, resource, sys, time
which, path, warmup = sys.argv[1], sys.argv[2], sys.argv[3]
if which.startswith("ours"):
    from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
    if which != "ours-embedded":  # a process of its own, as the command's: glibc's thresholds tuned per operation
        from airflow_delta_maintenance.deltalog._runtime.memory import own_process_allocator
        own_process_allocator()
    def load(p):
        snap = load_snapshot(p, parse_stats=which != "ours-strings")  # ours-before: another checkout's, as ours
        if which != "ours-strings":  # the statistics and partition values typed, as delta-rs returns them
            assert snap.parsed_stats() is not None and snap.parsed_partition_values() is not None
        return snap.num_files
else:
    import deltalake
    def load(p):
        return deltalake.DeltaTable(p).get_add_actions(flatten=False).num_rows
load(warmup)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t, cpu = time.perf_counter(), time.process_time()
n = load(path)
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"inner_seconds": elapsed, "inner_cpu_seconds": cpu, "files": n, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "base_kb": base}))
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown (the deltalake wheel can abort there)
"""

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}



def build_log(root: str, commits: int, files: int, seed: int = 7, configuration: dict[str, str] | None = None) -> None:
    rng = random.Random(seed)
    log = os.path.join(root, "_delta_log")
    os.makedirs(log, exist_ok=True)
    per_commit = max(1, files // (commits - 1))
    live: list[str] = []
    next_id = 0
    now = int(time.time() * 1000)
    header = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": ["day"],
                "configuration": dict(configuration or {}),
                "createdTime": now,
            }
        },
    ]
    with open(os.path.join(log, f"{0:020d}.json"), "w") as f:
        f.write("".join(json.dumps(a) + "\n" for a in header))
    for v in range(1, commits):
        lines = [json.dumps({"commitInfo": {"timestamp": now + v, "operation": "WRITE"}})]
        day = f"2026-01-{(v % 28) + 1:02d}"
        # a few removes per commit so reconciliation has work to do; adds keep the live count
        for _ in range(min(5, len(live))):
            victim = live.pop(rng.randrange(len(live)))
            lines.append(json.dumps({"remove": {"path": victim, "deletionTimestamp": now + v, "dataChange": True}}))
        for i in range(per_commit + (5 if v > 1 else 0)):
            path = f"day={day}/part-{v:05d}-{i:05d}-{uuid.UUID(int=rng.getrandbits(128))}.parquet"
            # every file its own statistics, as in a real table (repeated ones would flatter
            # dictionary encoding and any de-duplicating parser)
            rows = rng.randint(500, 5000)
            low, high = round(rng.uniform(0, 50), 6), round(rng.uniform(50, 100), 6)
            stats = {"numRecords": rows, "minValues": {"id": next_id, "value": low}, "maxValues": {"id": next_id + rows - 1, "value": high},
                     "nullCount": {"id": 0, "value": rng.randint(0, 3)}}
            next_id += rows
            add = {"path": path, "partitionValues": {"day": day}, "size": 100_000 + i, "modificationTime": now + v, "dataChange": True, "stats": json.dumps(stats)}
            lines.append(json.dumps({"add": add}))
            live.append(path)
        with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
            f.write("\n".join(lines) + "\n")


def measure(layouts: dict[str, str], warmup: str, repeat: int, engines: list[str], baseline_root: str | None = None) -> dict[str, dict[str, Runs]]:
    out = {}
    for layout, path in layouts.items():
        print(f"  {layout}", file=sys.stderr, flush=True)

        def one(e: str, i: int, path: str = path) -> tuple[float, float, dict]:
            env = baseline_env(baseline_root) if e == "ours-before" and baseline_root else None
            return run_measured([PYTHON, "-c", CHILD, e, path, warmup], env=env)

        out[layout] = interleaved(engines, repeat, one)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--strings", action="store_true", help="also time ours without parsing the stats")
    ap.add_argument("--embedded", action="store_true",
                    help="also time ours as a library inside a host process (an Airflow worker): glibc's malloc thresholds untouched")
    ap.add_argument("--baseline-root", default=None, help="also load with this checkout's package (ours-before)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    compile_package()
    if args.baseline_root:
        compile_package(args.baseline_root)

    work = tempfile.mkdtemp(prefix="bench-snapshot-")
    try:
        warmup = os.path.join(work, "warmup")
        build_log_in_subprocess(warmup, 3, 10)
        in_subprocess("import sys, deltalake; deltalake.DeltaTable(sys.argv[1], version=1).create_checkpoint()", warmup)
        table = os.path.join(work, "table")
        t = time.perf_counter()
        build_log_in_subprocess(table, args.commits, args.files)
        print(f"built {args.commits} commits / ~{args.files} live files in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        checkpointed = os.path.join(work, "checkpointed")
        shutil.copytree(table, checkpointed)
        half = args.commits // 2  # a checkpoint halfway, written by delta-rs itself; the commits after it remain
        in_subprocess("import sys, deltalake; deltalake.DeltaTable(sys.argv[1], version=int(sys.argv[2])).create_checkpoint()", checkpointed, str(half))
        engines = ["ours", "delta-rs"] + (["ours-strings"] if args.strings else []) + (["ours-embedded"] if args.embedded else [])
        engines += ["ours-before"] if args.baseline_root else []
        results = measure({"commits only": table, f"checkpoint at {half}": checkpointed}, warmup, args.repeat, engines, args.baseline_root)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps({k: {e: r.to_dict() for e, r in v.items()} for k, v in results.items()}, indent=2))
        return 0
    print(
        f"{'layout':<20} {'engine':<13} {'files':>8} {'load s median [min-max]':>26} {'load CPU s median [min-max]':>28} "
        f"{'peak MiB':>9} {'load RSS MiB':>13} {'n':>3} {'loadavg':>8}"
    )
    for layout, by_engine in results.items():
        for engine, r in by_engine.items():
            d = r.to_dict()
            growth = max(x["maxrss_kb"] - x["base_kb"] for x in r.reported) / 1024
            print(
                f"{layout:<20} {engine:<13} {r.reported[0]['files']:>8} {fmt(_inner(r), 's', 3):>26} {fmt(_inner(r, 'inner_cpu_seconds'), 's', 3):>28} "
                f"{d['peak_mib']['median']:>9.0f} {growth:>13.0f} {d['seconds']['n']:>3} {d['load_mean']:>4.1f}/{d['load_max']:.1f}"
            )
    print()
    for layout, r in results.items():
        ours, peer = r["ours"], r["delta-rs"]
        assert ours.reported[0]["files"] == peer.reported[0]["files"], f"{layout}: file counts differ"
        t = _inner(ours)["median"] / _inner(peer)["median"]
        c = _inner(ours, "inner_cpu_seconds")["median"] / _inner(peer, "inner_cpu_seconds")["median"]
        m = ours.to_dict()["peak_mib"]["median"] / peer.to_dict()["peak_mib"]["median"]
        print(f"{layout:<20} parsed stats on both sides: time ours/delta-rs = {t:.2f}   CPU ratio = {c:.2f}   peak-RSS ratio = {m:.2f}")
        if "ours-before" in r:
            before = r["ours-before"]
            tb = _inner(before)["median"] / _inner(peer)["median"]
            print(f"{layout:<20} ours-before/delta-rs = {tb:.2f}   ours after/before: time {_inner(ours)['median'] / _inner(before)['median']:.2f}   "
                  f"CPU {_inner(ours, 'inner_cpu_seconds')['median'] / _inner(before, 'inner_cpu_seconds')['median']:.2f}")
    return 0


def _inner(r: Runs, key: str = "inner_seconds") -> dict[str, float]:
    """What each process measured itself around the load (imports and warm-up excluded): wall
    time, or CPU time of all its threads (``inner_cpu_seconds``). Above a load of 2 the wall time
    mostly measures the other agents; the CPU time says what each engine spent."""
    return r.summary(key)


if __name__ == "__main__":
    sys.exit(main())
