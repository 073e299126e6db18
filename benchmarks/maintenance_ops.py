"""Checkpoint, log compaction and metadata cleanup: ours vs delta-rs (the `deltalake` wheel),
each measured as a whole process, the way a user runs it.

- ours: the installed command, ``delta-maintenance checkpoint|compact-log|cleanup TABLE --json``
  (imports, listing, the work; for cleanup also the anchor checkpoint's verification, the
  abandoned-leftover collection, and the fresh listing and re-planning it performs before
  deleting: the re-validation is included in the time);
- delta-rs: a fresh ``python -c`` doing ``import deltalake``, ``DeltaTable(path)`` and the call:
  ``create_checkpoint()``, ``compact_logs(1, N-1)``, ``cleanup_metadata()``.

The table sets ``delta.checkpoint.writeStatsAsStruct=true`` so that both checkpoints hold the same
columns (``stats``, ``stats_parsed``, ``partitionValues_parsed``). They differ in encoding, which
the script prints: delta-rs writes its checkpoint UNCOMPRESSED in one or two row groups (565 MB at
2M live files), ours follows ``delta.parquet.compression.codec`` (zstd by default: 160 MB, row
groups of at most 32,768 rows) — ours spends CPU on compression that delta-rs does not. Every run
gets its own copy of the same synthetic log (copied before the process starts, not timed). Runs
alternate between the engines; each figure is the median of ``--repeat`` runs with min–max, the
peak RSS of the process itself (``/usr/bin/time``), and the 1-minute load average before each run
(see ``_harness.py``). What each side wrote is printed too (checkpoint columns and rows,
compaction lines, files deleted), so that the comparison is seen to be like for like.

``--baseline-root DIR`` adds ``ours-before``: the same command from the package of another checkout
(an earlier commit, e.g. a ``git worktree`` of main with its C accelerators built), interleaved with
the others in the same run, so a change's cost is measured against the code before it.

    python benchmarks/maintenance_ops.py [--files 200000 2000000] [--cleanup-commits 20000] [--repeat 3]
                                         [--ops checkpoint compaction cleanup] [--workdir DIR] [--baseline-root DIR] [--json]
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
from _harness import BASELINE_CLI, CLI, PYTHON, Runs, baseline_env, build_log_in_subprocess, compile_package, in_subprocess, interleaved, ratio_line, run_measured

# Both writers put the same columns in a checkpoint: stats as JSON and as a struct, and typed
# partition values (delta-rs writes the struct forms only when the table asks for them).
SAME_COLUMNS = {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "true"}

WHEEL = r"""
import os, sys, deltalake
op, path = sys.argv[1], sys.argv[2]
dt = deltalake.DeltaTable(path)
if op == "checkpoint":
    dt.create_checkpoint()
elif op == "compaction":
    dt.compact_logs(int(sys.argv[3]), int(sys.argv[4]))
else:
    dt.cleanup_metadata()
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown (the wheel can abort there)
"""

# What a run left in the log, read in a separate small process after it.
DESCRIBE = r"""
import json, os, sys
import pyarrow.parquet as pq
op, path = sys.argv[1], sys.argv[2]
log = os.path.join(path, "_delta_log")
names = sorted(os.listdir(log))
out = {"log_files": len(names)}
if op == "checkpoint":
    cps = [n for n in names if ".checkpoint." in n and n.endswith(".parquet")]
    f = pq.ParquetFile(os.path.join(log, cps[-1]))
    add = f.schema_arrow.field("add").type
    out.update(file=cps[-1], rows=f.metadata.num_rows, columns=f.schema_arrow.names,
               add_fields=[add.field(i).name for i in range(add.num_fields)], bytes=os.path.getsize(os.path.join(log, cps[-1])),
               codec=f.metadata.row_group(0).column(0).compression, row_groups=f.metadata.num_row_groups)
elif op == "compaction":
    c = [n for n in names if n.endswith(".compacted.json")][-1]
    data = open(os.path.join(log, c), "rb").read()
    out.update(file=c, lines=data.count(b"\n"), bytes=len(data))
print(json.dumps(out))
"""


BASELINE_ROOT: str | None = None  # --baseline-root


def command(op: str, engine: str, path: str, commits: int) -> list[str]:
    if engine.startswith("ours"):
        extra = {"checkpoint": [], "compaction": ["--start", "1", "--end", str(commits - 1)], "cleanup": ["--execute"]}[op]
        cli = [CLI] if engine == "ours" else [PYTHON, "-c", BASELINE_CLI]
        return [*cli, {"checkpoint": "checkpoint", "compaction": "compact-log", "cleanup": "cleanup"}[op], path, "--json", *extra]
    return [PYTHON, "-c", WHEEL, op, path, "1", str(commits - 1)]


def engines() -> tuple[str, ...]:
    return ("ours", "delta-rs") + (("ours-before",) if BASELINE_ROOT else ())


def measure(op: str, source: str, work: str, commits: int, repeat: int) -> tuple[dict[str, Runs], dict[str, dict]]:
    described: dict[str, dict] = {}
    before = len(os.listdir(os.path.join(source, "_delta_log")))

    def one(engine: str, i: int):
        copy = os.path.join(work, f"{op}-{engine}-{i}")
        shutil.copytree(source, copy)
        try:
            env = baseline_env(BASELINE_ROOT) if engine == "ours-before" and BASELINE_ROOT else None
            result = run_measured(command(op, engine, copy, commits), env=env)
            if engine not in described:
                d = json.loads(in_subprocess(DESCRIBE, op, copy))
                d["deleted"] = before - d["log_files"] if op == "cleanup" else None
                described[engine] = d
            return result
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    return interleaved(list(engines()), repeat, one), described


def age_log(path: str, days: int) -> None:
    """Make every log file look `days` old (cleanup needs expired commits)."""
    old = time.time() - days * 86400
    for name in os.listdir(os.path.join(path, "_delta_log")):
        os.utime(os.path.join(path, "_delta_log", name), (old, old))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, nargs="+", default=[200_000, 2_000_000])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--cleanup-commits", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ops", nargs="+", default=["checkpoint", "compaction", "cleanup"])
    ap.add_argument("--workdir", default=None, help="where the copies live (default: the system temp dir, i.e. the disk)")
    ap.add_argument("--baseline-root", default=None, help="also run the command from this checkout's package (ours-before)")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    global BASELINE_ROOT
    BASELINE_ROOT = ns.baseline_root
    compile_package()
    if BASELINE_ROOT:
        compile_package(BASELINE_ROOT)
    work = tempfile.mkdtemp(prefix="bench-maint-", dir=ns.workdir)
    rows: list[tuple[str, int, dict[str, Runs], dict[str, dict]]] = []
    try:
        for files in ns.files:
            if not {"checkpoint", "compaction"} & set(ns.ops):
                break
            source = os.path.join(work, f"log-{files}")
            t = time.perf_counter()
            build_log_in_subprocess(source, ns.commits, files, SAME_COLUMNS)
            print(f"built {ns.commits} commits / {files} files in {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)
            for op in ("checkpoint", "compaction"):
                if op in ns.ops:
                    print(f"  {op} {files}", file=sys.stderr, flush=True)
                    rows.append((op, files, *measure(op, source, work, ns.commits, ns.repeat)))
            shutil.rmtree(source, ignore_errors=True)
        if "cleanup" in ns.ops:
            source = os.path.join(work, "cleanup-log")
            build_log_in_subprocess(source, ns.cleanup_commits, ns.cleanup_commits * 2)
            in_subprocess("import sys, deltalake; deltalake.DeltaTable(sys.argv[1], version=int(sys.argv[2])).create_checkpoint()", source, str(ns.cleanup_commits - 10))
            age_log(source, 60)
            print(f"  cleanup {ns.cleanup_commits} commits", file=sys.stderr, flush=True)
            rows.append(("cleanup", ns.cleanup_commits, *measure("cleanup", source, work, ns.cleanup_commits, ns.repeat)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ns.json:
        print(json.dumps([{"op": op, "size": size, **{e: r.to_dict() for e, r in runs.items()}, "wrote": d} for op, size, runs, d in rows], indent=2))
        return 0
    print(f"cpus {os.cpu_count()}; whole processes; median [min–max]; ratios ours/delta-rs; work dir {work}")
    for op, size, runs, described in rows:
        for engine in (e for e in runs if e != "delta-rs"):
            print(ratio_line(f"{op} {size}" + ("" if engine == "ours" else f" ({engine})"), runs[engine], runs["delta-rs"]))
        if "ours-before" in runs:
            print(ratio_line(f"{op} {size} (ours after / ours before)", runs["ours"], runs["ours-before"]))
        for engine, d in described.items():
            print(f"    {engine:<8} wrote: {json.dumps(d)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
