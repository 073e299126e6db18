"""Identity, gate and status loads with a version checksum against the same loads without one, on a
table with ``--commits`` (10,000) commits since its last checkpoint.

The table: commit 0 (protocol, metadata with ``delta.checkpointInterval`` above the tail, so the
checkpoint gate says "not due" as it does on a table another engine checkpoints, and ``--files``
adds), a checkpoint at 0, then commits of one add and one remove each. The newest version gets its
``<v>.crc`` from ``delta-maintenance checksums``'s walk (one replay, not timed). Each run times, in
this process, with the checksum present and then with it moved aside (alternating the order run
by run, so a burst of load falls on both):

- identity: ``open_table`` (one LIST, the coordinator declaration: protocol and metadata);
- gate: ``open_table`` + ``plan_checkpoint`` (the scheduled checkpoint task's decision);
- status: ``open_table`` + ``table_status`` (which also reads and validates every commit after
  the checkpoint and replays the newest checksum's version to verify it: the checksum saves only
  its protocol/metadata read).

Figures: median, min–max over ``--repeat`` runs, the ratio with/without of the medians, and the
1-minute load average.

    python benchmarks/checksum_loads.py [--commits 10000] [--files 2000] [--repeat 7] [--json]
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
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.checksum.chain import walk_checksums
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import commit_name, crc_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.checkpoint import plan_checkpoint
from airflow_delta_maintenance.maintenance.operations.status import table_status
from airflow_delta_maintenance.maintenance.table.maintained import open_table

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in (("id", "long"), ("p", "string"))]})


def _add(i: int, ts: int) -> str:
    stats = json.dumps({"numRecords": 100, "minValues": {"id": i * 100}, "maxValues": {"id": i * 100 + 99}, "nullCount": {"id": 0}})
    return json.dumps({"add": {"path": f"p={i % 50}/f{i}.parquet", "partitionValues": {"p": str(i % 50)}, "size": 1000 + i % 5000,
                               "modificationTime": ts, "dataChange": True, "stats": stats}})  # fmt: skip


def build(root: str, files: int, commits: int) -> None:
    log = os.path.join(root, "_delta_log")
    os.makedirs(log)
    now = int(time.time() * 1000)
    conf = {"delta.checkpointInterval": str(commits * 10)}
    head = [json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": now}}),
            json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
            json.dumps({"metaData": {"id": "bench", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                                     "partitionColumns": ["p"], "configuration": conf, "createdTime": now}})]  # fmt: skip
    with open(os.path.join(log, commit_name(0)), "w") as f:
        f.write("\n".join(head + [_add(i, now) for i in range(files)]) + "\n")
    store = open_table_storage(root)
    write_checkpoint(store, load_snapshot(store, 0))
    for v in range(1, commits + 1):
        gone = v - 1
        remove = {"remove": {"path": f"p={gone % 50}/f{gone}.parquet", "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                             "partitionValues": {"p": str(gone % 50)}, "size": 1000 + gone % 5000}}  # fmt: skip
        lines = [json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": now + v, "txnId": f"t{v}"}}), _add(files + v, now), json.dumps(remove)]
        with open(os.path.join(log, commit_name(v)), "w") as f:
            f.write("\n".join(lines) + "\n")
    run = walk_checksums(store, list_log_files(store), commits, commits, write=True)
    assert run.written == [commits] and not run.problems, run


def identity(root: str) -> object:
    return open_table(root)


def gate(root: str) -> object:
    plan = plan_checkpoint(open_table(root))
    assert not plan.decision.due, plan.decision
    return plan


def status(root: str) -> object:
    return table_status(open_table(root))


CASES: dict[str, Callable[[str], object]] = {"identity": identity, "gate": gate, "status": status}


def timed(fn: Callable[[str], object], root: str) -> float:
    started = time.perf_counter()
    fn(root)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-checksum-loads-")
    try:
        root = os.path.join(work, "t")
        build(root, args.files, args.commits)
        crc = os.path.join(root, "_delta_log", crc_name(args.commits))
        aside = os.path.join(work, "aside.crc")
        for fn in CASES.values():  # warm-up of both sides (imports, page cache); checks that the checksum is used
            fn(root)
        assert open_table(root).identity_state.checksum_version == args.commits  # type: ignore[union-attr]
        times: dict[str, dict[str, list[float]]] = {k: {"with": [], "without": []} for k in CASES}
        loads: list[float] = []
        for i in range(args.repeat):
            order = ("with", "without") if i % 2 == 0 else ("without", "with")
            for side in order:
                if side == "without":
                    os.rename(crc, aside)
                loads.append(os.getloadavg()[0])
                for name, fn in CASES.items():
                    times[name][side].append(timed(fn, root))
                if side == "without":
                    os.rename(aside, crc)
        result: dict[str, object] = {"commits_since_checkpoint": args.commits, "files": args.files, "repeat": args.repeat,
                                     "load_1min": [round(min(loads), 2), round(max(loads), 2)]}  # fmt: skip
        for name, sides in times.items():
            for side, v in sides.items():
                result[f"{name}_{side}_ms"] = [round(1000 * statistics.median(v), 1), round(1000 * min(v), 1), round(1000 * max(v), 1)]
            result[f"{name}_ratio"] = round(statistics.median(sides["with"]) / statistics.median(sides["without"]), 3)
        if args.json:
            print(json.dumps(result))
        else:
            for k, val in result.items():
                print(f"{k:28} {val}")
            print("(ms: median, min, max; ratio: median with the checksum / median without)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
