"""OPTIMIZE on the worker vs the deltalake wheel's ``optimize.compact()``, same tables, same run.

    python benchmarks/optimize.py [--files 20000 --partitions 20] [--flat-files 10000] [--repeat 3]

Two tables of small Parquet files of about 50 KB (ids, doubles, short strings, timestamps):
``--files`` in ``--partitions`` partitions, and ``--flat-files`` unpartitioned. Both declare
``delta.targetFileSize = 100 MiB`` (the wheel's own default target), so both engines plan the same
bins. Before every run the table is reset to its one-commit state (later commits and the files
they added are removed), then each engine runs in a fresh process as a user runs it: ours as the
``delta-maintenance optimize`` command, the wheel as ``DeltaTable(path).optimize.compact()``.
Engines alternate; medians with spread, CPU time and the machine's load are printed (``_harness``).

``--baseline-root DIR`` adds ``ours-before``: the same command from the package of another checkout
(an earlier commit, e.g. a ``git worktree`` of main), interleaved with the others in the same run,
so a change's effect is measured against the code before it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BASELINE_CLI, CLI, PYTHON, baseline_env, compile_package, in_subprocess, interleaved, ratio_line, run_measured

BUILD = r"""
import json, os, sys, uuid
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
root, files, partitions, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(os.path.join(root, "_delta_log"))
rng = np.random.default_rng(7)
fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in
          [("id", "long"), ("value", "double"), ("name", "string"), ("ts", "timestamp")] + ([("part", "string")] if partitions else [])]
lines = [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}},
         {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
         {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                       "schemaString": json.dumps({"type": "struct", "fields": fields}),
                       "partitionColumns": ["part"] if partitions else [], "configuration": {"delta.targetFileSize": "104857600"},
                       "createdTime": 1}}]
for i in range(files):
    start = i * rows
    ids = np.arange(start, start + rows, dtype=np.int64)
    t = pa.table({"id": ids, "value": rng.standard_normal(rows),
                  "name": pa.array([f"n{x:09d}" for x in rng.integers(0, 10**9, rows)]),
                  "ts": pa.array((1_700_000_000_000_000 + ids * 1_000_000).astype("datetime64[us]")).cast(pa.timestamp("us", tz="UTC"))})
    part = f"p{i % partitions:02d}" if partitions else None
    rel = (f"part={part}/" if part else "") + f"part-{i:05d}-{uuid.uuid4()}.snappy.parquet"
    full = os.path.join(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    pq.write_table(t, full, compression="snappy")
    stats = {"numRecords": rows, "minValues": {"id": int(ids[0])}, "maxValues": {"id": int(ids[-1])}, "nullCount": {"id": 0}}
    lines.append({"add": {"path": rel, "partitionValues": {"part": part} if part else {}, "size": os.path.getsize(full),
                          "modificationTime": 1, "dataChange": True, "stats": json.dumps(stats)}})
with open(os.path.join(root, "_delta_log", "00000000000000000000.json"), "w") as f:
    f.write("".join(json.dumps(x) + "\n" for x in lines))
print(sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(root) for n in ns if n.endswith(".parquet")))
"""

WHEEL = r"""
import json, sys, deltalake
m = deltalake.DeltaTable(sys.argv[1]).optimize.compact()
print(json.dumps({"files_added": m["numFilesAdded"], "files_removed": m["numFilesRemoved"]}))
"""


def reset(root: str, base: set[str]) -> None:
    """Back to the one-commit table: later commits and the files they added go."""
    for name in os.listdir(os.path.join(root, "_delta_log")):
        if name != "00000000000000000000.json":
            path = os.path.join(root, "_delta_log", name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    for d, _, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            if n.endswith(".parquet") and full not in base:
                os.unlink(full)


def parquet_files(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns if n.endswith(".parquet")}


def bench(label: str, root: str, repeat: int, baseline_root: str | None) -> list[str]:
    base = parquet_files(root)

    def run_one(engine: str, i: int) -> tuple[float, float, dict]:
        reset(root, base)
        if engine.startswith("ours"):
            before = engine == "ours-before"
            cmd = [PYTHON, "-c", BASELINE_CLI] if before else [CLI]
            wall, peak, rep = run_measured([*cmd, "optimize", root, "--json"], env=baseline_env(baseline_root) if before and baseline_root else None)
            return wall, peak, {"files_added": rep["files_added"], "files_removed": rep["files_removed"], "_cpu_seconds": rep["_cpu_seconds"]}
        return run_measured([PYTHON, "-c", WHEEL, root])

    runs = interleaved(["ours", "wheel"] + (["ours-before"] if baseline_root else []), repeat, run_one)
    reset(root, base)
    for engine, r in runs.items():
        print(f"  {label} {engine}: files {r.reported[-1]['files_removed']} -> {r.reported[-1]['files_added']}", file=sys.stderr)
    lines = [ratio_line(label, runs["ours"], runs["wheel"]).replace("delta-rs", "wheel")]
    if baseline_root:
        lines.append(ratio_line(f"{label} (before)", runs["ours-before"], runs["wheel"]).replace("delta-rs", "wheel"))
        lines.append(ratio_line(f"{label} (after/before)", runs["ours"], runs["ours-before"]).replace("delta-rs", "before"))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--flat-files", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=1_500, help="rows per file (1,500: about 50 KB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="a directory to keep the built tables in (reused when present)")
    ap.add_argument("--baseline-root", default=None, help="also run the command from this checkout's package (ours-before)")
    args = ap.parse_args()
    compile_package()
    if args.baseline_root:
        compile_package(args.baseline_root)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-optimize-"))
    lines = []
    for label, files, parts in ((f"{args.files:,} files / {args.partitions} partitions", args.files, args.partitions),
                                (f"{args.flat_files:,} files unpartitioned", args.flat_files, 0)):
        if not files:
            continue
        root = str(work / f"t-{files}-{parts}")
        if not os.path.exists(os.path.join(root, "_delta_log", "00000000000000000000.json")):
            shutil.rmtree(root, ignore_errors=True)
            size = int(in_subprocess(BUILD, root, str(files), str(parts), str(args.rows)))
            print(f"built {label}: {size / files / 1024:.1f} KB per file", file=sys.stderr)
        lines += bench(label, root, args.repeat, args.baseline_root)
    print(json.dumps({"argv": sys.argv[1:]}))
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
