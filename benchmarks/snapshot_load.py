"""Snapshot load: ours vs delta-rs (the `deltalake` wheel), measured in the same run.

Builds a synthetic log of ~200 commits and ~200,000 live files (partitioned, with JSON stats and
some removes), in two layouts: commits only, and a checkpoint (written by delta-rs) halfway. Each
measurement runs in a fresh subprocess so that peak RSS is its own; the time is the median of
``--repeat`` runs. Prints a table and the ratios ours / delta-rs (≤ 1.0 means we are not slower).

    python benchmarks/snapshot_load.py [--files 200000] [--commits 200] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}

# The measured code, run in a child process: prints {"seconds": .., "files": .., "maxrss_kb": ..}.
# Both engines first load a one-commit table (imports, lazy initialisation, thread pools), so the
# timed load measures the work on the big log, not start-up.
CHILD = r"""
import json, resource, sys, time
which, path, warmup = sys.argv[1], sys.argv[2], sys.argv[3]
if which == "ours":
    from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
    load_snapshot(warmup).num_files
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    snap = load_snapshot(path)
    n = snap.num_files
else:
    import deltalake
    deltalake.DeltaTable(warmup).get_add_actions(flatten=False).num_rows
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    dt = deltalake.DeltaTable(path)
    n = dt.get_add_actions(flatten=False).num_rows
elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "files": n, "maxrss_kb": peak, "base_kb": base}))
sys.stdout.flush()
import os
os._exit(0)  # skip interpreter teardown (the deltalake wheel can abort there)
"""


def build_log(root: str, commits: int, files: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    log = os.path.join(root, "_delta_log")
    os.makedirs(log, exist_ok=True)
    per_commit = max(1, files // (commits - 1))
    live: list[str] = []
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
                "configuration": {},
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
            stats = {"numRecords": 1000, "minValues": {"id": i, "value": 0.5}, "maxValues": {"id": i + 999, "value": 99.5}, "nullCount": {"id": 0, "value": 0}}
            add = {"path": path, "partitionValues": {"day": day}, "size": 100_000 + i, "modificationTime": now + v, "dataChange": True, "stats": json.dumps(stats)}
            lines.append(json.dumps({"add": add}))
            live.append(path)
        with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
            f.write("\n".join(lines) + "\n")


def measure(which: str, path: str, warmup: str, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, which, path, warmup], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "files": runs[0]["files"],
        "peak_rss_mib": max(r["maxrss_kb"] for r in runs) / 1024,
        "delta_rss_mib": max(r["maxrss_kb"] - r["base_kb"] for r in runs) / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-snapshot-")
    results = {}
    try:
        warmup = os.path.join(work, "warmup")
        build_log(warmup, 2, 10)
        table = os.path.join(work, "table")
        t = time.perf_counter()
        build_log(table, args.commits, args.files)
        print(f"built {args.commits} commits / ~{args.files} live files in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        results["commits only"] = {w: measure(w, table, warmup, args.repeat) for w in ("ours", "delta-rs")}

        import deltalake

        checkpointed = os.path.join(work, "checkpointed")
        shutil.copytree(table, checkpointed)
        # a checkpoint halfway, written by delta-rs itself, then the commits after it remain
        half = args.commits // 2
        deltalake.DeltaTable(checkpointed, version=half).create_checkpoint()
        results[f"checkpoint at {half}"] = {w: measure(w, checkpointed, warmup, args.repeat) for w in ("ours", "delta-rs")}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'layout':<20} {'engine':<9} {'files':>8} {'seconds':>8} {'peak RSS MiB':>13} {'load RSS MiB':>13}")
    for layout, by_engine in results.items():
        for engine, r in by_engine.items():
            print(f"{layout:<20} {engine:<9} {r['files']:>8} {r['seconds']:>8.3f} {r['peak_rss_mib']:>13.0f} {r['delta_rss_mib']:>13.0f}")
    print()
    for layout, r in results.items():
        ours, peer = r["ours"], r["delta-rs"]
        assert ours["files"] == peer["files"], f"{layout}: file counts differ {ours['files']} vs {peer['files']}"
        print(
            f"{layout:<20} time ratio ours/delta-rs = {ours['seconds'] / peer['seconds']:.2f}   "
            f"peak-RSS ratio = {ours['peak_rss_mib'] / peer['peak_rss_mib']:.2f}   "
            f"load-RSS ratio = {ours['delta_rss_mib'] / max(peer['delta_rss_mib'], 1):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
