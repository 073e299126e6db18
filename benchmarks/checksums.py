"""Version checksums: writing 1,000 consecutive ``<v>.crc`` costs the same per checksum on a
200,000-file table as on a 2,000-file one (each is the previous checksum plus one commit), against
what a full replay per version — what a writer without an earlier checksum pays, as delta-rs and
kernels computing one from a snapshot do — costs on the same tables.

Each table: commit 0 with the protocol, metadata and N adds (partitioned, with JSON stats), then
``--commits`` commits of one add and one remove each. The checksum of v0 is written first (one
replay, not timed: the anchor); then ``delta-maintenance checksums``'s walk writes v1..v1000,
create-if-absent, timed. The replay figure is ``load_snapshot`` + the checksum of one version,
sampled. Runs alternate between the sizes; figures are medians of ``--repeat`` runs with min–max
and the 1-minute load average.

    python benchmarks/checksums.py [--small 2000] [--large 200000] [--commits 1000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from airflow_delta_maintenance.deltalog.checksum.chain import walk_checksums
from airflow_delta_maintenance.deltalog.checksum.compute import checksum_from_snapshot
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import commit_name, crc_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in (("id", "long"), ("p", "string"))]})


def _add(i: int) -> str:
    stats = json.dumps({"numRecords": 100, "minValues": {"id": i * 100}, "maxValues": {"id": i * 100 + 99}, "nullCount": {"id": 0}})
    return json.dumps({"add": {"path": f"p={i % 50}/f{i}.parquet", "partitionValues": {"p": str(i % 50)}, "size": 1000 + i % 5000,
                               "modificationTime": 1, "dataChange": True, "stats": stats}})  # fmt: skip


def build(root: str, files: int, commits: int) -> None:
    log = os.path.join(root, "_delta_log")
    os.makedirs(log)
    head = [json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": 0}}),
            json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
            json.dumps({"metaData": {"id": "bench", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                                     "partitionColumns": ["p"], "configuration": {}, "createdTime": 0}})]  # fmt: skip
    with open(os.path.join(log, commit_name(0)), "w") as f:
        f.write("\n".join(head + [_add(i) for i in range(files)]) + "\n")
    for v in range(1, commits + 1):
        gone = v - 1  # the oldest file goes, a new one comes
        remove = {"remove": {"path": f"p={gone % 50}/f{gone}.parquet", "deletionTimestamp": v, "dataChange": True, "extendedFileMetadata": True,
                             "partitionValues": {"p": str(gone % 50)}, "size": 1000 + gone % 5000}}  # fmt: skip
        lines = [json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": v, "txnId": f"t{v}"}}), _add(files + v), json.dumps(remove)]
        with open(os.path.join(log, commit_name(v)), "w") as f:
            f.write("\n".join(lines) + "\n")


def measure(root: str, commits: int) -> tuple[float, float]:
    """Seconds per checksum written by the walk, and seconds of one full replay + checksum."""
    log = os.path.join(root, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".crc"):
            os.unlink(os.path.join(log, name))
    store = open_table_storage(root)
    files = list_log_files(store)
    walk_checksums(store, files, 0, 0, write=True)  # the anchor (a replay): not timed
    files = list_log_files(store)
    started = time.perf_counter()
    run = walk_checksums(store, files, 1, commits, write=True)
    per = (time.perf_counter() - started) / commits
    assert len(run.written) == commits and run.replays == 0 and not run.problems, run
    assert os.path.exists(os.path.join(log, crc_name(commits)))
    started = time.perf_counter()
    checksum_from_snapshot(load_snapshot(store, commits // 2, files=files))
    return per, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--commits", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-checksums-")
    try:
        sizes = {"small": args.small, "large": args.large}
        for label, n in sizes.items():
            build(os.path.join(work, label), n, args.commits)
        per: dict[str, list[float]] = {k: [] for k in sizes}
        replay: dict[str, list[float]] = {k: [] for k in sizes}
        loads = []
        for _ in range(args.repeat):
            for label in sizes:  # alternating: both sizes see the same machine
                p, r = measure(os.path.join(work, label), args.commits)
                per[label].append(p)
                replay[label].append(r)
                loads.append(os.getloadavg()[0])
        result = {
            "commits": args.commits, "repeat": args.repeat, "files": sizes, "load_1min": [min(loads), max(loads)],
            **{f"per_checksum_ms_{k}": [round(1000 * statistics.median(v), 3), round(1000 * min(v), 3), round(1000 * max(v), 3)] for k, v in per.items()},
            **{f"replay_s_{k}": [round(statistics.median(v), 3), round(min(v), 3), round(max(v), 3)] for k, v in replay.items()},
        }  # fmt: skip
        result["per_checksum_ratio_large_over_small"] = round(statistics.median(per["large"]) / statistics.median(per["small"]), 2)
        result["incremental_speedup_over_replay_large"] = round(statistics.median(replay["large"]) / statistics.median(per["large"]), 1)
        if args.json:
            print(json.dumps(result))
        else:
            for k, v in result.items():
                print(f"{k:42} {v}")
            print("(figures: median, min, max; per-checksum = the walk's time / commits, anchor excluded)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
