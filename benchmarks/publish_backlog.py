"""Publishing a large backlog: peak RSS and time per MiB of ``publish_ratified_commits`` at 50 MiB,
400 MiB and 2 GiB of ratified, unpublished commits, against the code of a baseline git ref (today's
main by default), in the same run.

    python benchmarks/publish_backlog.py [--sizes-mib 50 400 2048] [--commit-mib 1] [--repeat 3]
                                         [--baseline main] [--json]

Each table (local disk, the embedded coordinator) holds version 0 and ``size / commit-mib``
ratified commits of about ``commit-mib`` MiB each (add actions with stats, ~330 bytes a line; far
above the coordinator's 64 KiB inline limit, so the staged files are the only copies). Every
measured run is a fresh process (``/usr/bin/time``: its own peak RSS) that opens the table with
its coordinator and publishes the whole backlog, exactly as ``delta-maintenance publish`` does;
between runs the published ``<v>.json`` files are removed and the coordinator's database restored,
so every run publishes the same backlog from the same page-cache state. ``baseline`` runs the
package as it is at ``--baseline`` (``git archive``), ``ours`` the working tree; runs alternate
(``_harness.interleaved``) and the load average is recorded before each.

Targets: ours flat in the backlog's size and below 250 MiB; time per MiB no worse than
the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import PYTHON, ROOT, Runs, compile_package, fmt, in_subprocess, interleaved, run_measured

BUILD = r"""
import json, sys
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
uri, spec, commits, commit_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
stats = json.dumps({"numRecords": 1000, "minValues": {"id": 1, "amount": 0.5}, "maxValues": {"id": 1000, "amount": 999.5},
                    "nullCount": {"id": 0, "amount": 0}})
def add(v, i):
    return {"add": {"path": f"region=x/part-{v:06d}-{i:06d}-c000.zstd.parquet", "partitionValues": {"region": "x"},
                    "size": 40000 + i, "modificationTime": 1700000000000 + i, "dataChange": True, "stats": stats}}
per_line = len(json.dumps(add(0, 0), separators=(",", ":"))) + 1
n = max(1, commit_bytes // per_line)
client = open_coordinator(spec + "?create=true")
client.commit(uri, 0, create_actions(ict=True))
total = 0
for v in range(1, commits + 1):
    total += client.commit(uri, v, [add(v, i) for i in range(n)]).file_size
print(json.dumps({"bytes": total}))
"""

PUBLISH = r"""
import json, sys, time
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.maintained import open_table
uri, spec = sys.argv[1], sys.argv[2]
started = time.perf_counter()
with open_table(uri, coordinator=spec) as table:
    result = publish_ratified_commits(table)
print(json.dumps({"publish_seconds": time.perf_counter() - started, "bytes": result.bytes, "published": len(result.published),
                  "reported": result.reported_version}))
"""


# The working tree, and its accelerators when they are built in place there (a worktree's own build,
# not the one the shared environment installed from another checkout).
OURS_PATH = os.pathsep.join([ROOT, *([os.path.join(ROOT, "accel")] if list(Path(ROOT, "accel", "airflow_delta_maintenance_accel").glob("_log_lines*.so")) else [])])


def build(work: Path, size_mib: int, commit_mib: float) -> tuple[str, str, int, int]:
    """(table uri, coordinator spec, commits, pending bytes); the database is kept pristine beside it."""
    table, db = work / f"t{size_mib}", work / f"c{size_mib}.db"
    commits = max(1, round(size_mib / commit_mib))
    started = time.perf_counter()
    built = json.loads(in_subprocess(BUILD, str(table), f"local://{db}", str(commits), str(int(commit_mib * 2**20))))
    with sqlite3.connect(db) as conn:  # one file to copy back: the write-ahead log folded in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy2(db, f"{db}.pristine")
    print(f"built {commits} commits, {built['bytes'] / 2**20:.0f} MiB pending, in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    return str(table), f"local://{db}", commits, int(built["bytes"])


def reset(uri: str, spec: str) -> None:
    """The backlog unpublished again: no <v>.json above 0, the coordinator's database as built."""
    log = Path(uri) / "_delta_log"
    for p in log.iterdir():
        if p.is_file() and p.name.endswith(".json") and p.name[:-5].isdigit() and int(p.name[:-5]) > 0:
            p.unlink()
    db = spec.removeprefix("local://")
    for suffix in ("-wal", "-shm"):
        Path(db + suffix).unlink(missing_ok=True)
    shutil.copy2(f"{db}.pristine", db)


def baseline_tree(ref: str, work: Path) -> str:
    """The package as it is at ``ref``, extracted beside the tables (compiled, as installed)."""
    tree = work / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref, "airflow_delta_maintenance"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(tree)], check=True)
    return str(tree)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mib", type=int, nargs="+", default=[50, 400, 2048])
    ap.add_argument("--commit-mib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", default="main", help="git ref whose package is the baseline (default: main)")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="bench-publish-backlog-"))
    results: dict[int, tuple[int, dict[str, Runs]]] = {}
    try:
        trees = {"baseline": baseline_tree(ns.baseline, work), "ours": ROOT}
        for size in ns.sizes_mib:
            uri, spec, commits, pending = build(work, size, ns.commit_mib)

            def run_one(engine: str, i: int, uri: str = uri, spec: str = spec, commits: int = commits) -> tuple[float, float, dict]:
                reset(uri, spec)
                env = {**os.environ, "PYTHONPATH": trees[engine] if engine == "baseline" else OURS_PATH}
                # -P: the package comes from PYTHONPATH, never from the working directory
                wall, peak, reported = run_measured([PYTHON, "-P", "-c", PUBLISH, uri, spec], env=env, timeout=7200)
                assert reported.get("published") == commits and reported.get("reported") == commits, reported
                return wall, peak, reported

            results[size] = (pending, interleaved(["baseline", "ours"], ns.repeat, run_one))
            shutil.rmtree(uri, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ns.json:
        print(json.dumps({str(k): {"pending_bytes": p, **{e: r.to_dict() for e, r in v.items()}} for k, (p, v) in results.items()}, indent=2))
        return 0
    print(f"cpus {os.cpu_count()}; fresh process per run; median [min–max] of n runs; loadavg mean/max; baseline = {ns.baseline}")
    print(f"{'pending':>9} {'engine':<9} {'peak RSS MiB':>20} {'publish s':>22} {'ms per MiB':>12} {'cpu s':>16} {'n':>2} {'loadavg':>9}")
    for pending, by_engine in results.values():
        mib = pending / 2**20
        for engine, r in by_engine.items():
            d, m = r.to_dict(), r.to_dict()["peak_mib"]
            s = r.summary("publish_seconds")
            print(
                f"{mib:>6.0f} MiB {engine:<9} {m['median']:>7.0f} [{m['min']:.0f}–{m['max']:.0f}]".ljust(42)
                + f"{fmt(s):>22} {s['median'] * 1000 / mib:>12.1f} {fmt(d['cpu_seconds']):>16} {s['n']:>2} {d['load_mean']:>4.1f}/{d['load_max']:.1f}"
            )
        b, o = by_engine["baseline"], by_engine["ours"]
        print(f"{'':>9} ours/baseline: time {o.summary('publish_seconds')['median'] / b.summary('publish_seconds')['median']:.2f}x, "
              f"peak RSS {o.summary('peak_mib')['median'] / b.summary('peak_mib')['median']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
