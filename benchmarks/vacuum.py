"""VACUUM planning (listing + plan, a dry run) vs the deltalake wheel's ``vacuum(dry_run=True)``.

    python benchmarks/vacuum.py [--files 1000000 --partitions 100] [--repeat 3] [--work DIR]

A local table whose one commit adds ``--files`` files in ``--partitions`` partitions; a second
commit removes a tenth of them, and as many untracked strays lie beside them (every file is a few
bytes: VACUUM reads names, sizes and times, never data). Both sides plan a FULL VACUUM with no
retention, in a fresh process as a user runs it: ours as ``delta-maintenance vacuum ROOT
--retention-hours 0 --allow-shorter-retention --json``, the wheel as ``DeltaTable(ROOT).vacuum(
retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)``. Both must plan the
same number of files. Engines alternate; medians with spread, CPU time and load (``_harness``).
The issue's target: time ≤ 0.5x, peak memory ≤ 1.0x the wheel's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import CLI, PYTHON, compile_package, in_subprocess, interleaved, ratio_line, run_measured

BUILD = r"""
import json, os, sys, uuid
root, files, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.join(root, "_delta_log"))
fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}, {"name": "part", "type": "string", "nullable": True, "metadata": {}}]
head = [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps({"type": "struct", "fields": fields}),
                      "partitionColumns": ["part"], "configuration": {}, "createdTime": 1}}]
names = []
for p in range(partitions):
    os.makedirs(os.path.join(root, f"part=p{p:04d}"))
with open(os.path.join(root, "_delta_log", "00000000000000000000.json"), "w") as log:
    log.write("".join(json.dumps(x) + "\n" for x in head))
    for i in range(files):
        part = f"p{i % partitions:04d}"
        rel = f"part={part}/part-{i:07d}-{uuid.uuid4()}.snappy.parquet"
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"PAR1")
        names.append(rel)
        log.write(json.dumps({"add": {"path": rel, "partitionValues": {"part": part}, "size": 4, "modificationTime": 1, "dataChange": True}}) + "\n")
with open(os.path.join(root, "_delta_log", "00000000000000000001.json"), "w") as log:
    log.write(json.dumps({"commitInfo": {"timestamp": 2, "operation": "DELETE"}}) + "\n")
    for rel in names[::10]:
        log.write(json.dumps({"remove": {"path": rel, "deletionTimestamp": 2, "dataChange": True, "size": 4}}) + "\n")
for i in range(files // 10):
    with open(os.path.join(root, f"part=p{i % partitions:04d}", f"stray-{i:07d}.parquet"), "wb") as f:
        f.write(b"PAR1")
"""

WHEEL = r"""
import json, sys, deltalake
paths = deltalake.DeltaTable(sys.argv[1]).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
print(json.dumps({"files": len(paths)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="a directory to keep the built table in (reused when present)")
    args = ap.parse_args()
    compile_package()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-vacuum-"))
    root = str(work / f"t-{args.files}-{args.partitions}")
    if not os.path.exists(os.path.join(root, "_delta_log", "00000000000000000001.json")):
        in_subprocess(BUILD, root, str(args.files), str(args.partitions))
        print(f"built {args.files:,} files in {args.partitions} partitions", file=sys.stderr)

    def run_one(engine: str, i: int) -> tuple[float, float, dict]:
        if engine == "ours":
            wall, peak, rep = run_measured([CLI, "vacuum", root, "--retention-hours", "0", "--allow-shorter-retention", "--json"])
            return wall, peak, {"files": rep["plan"]["files"], "_cpu_seconds": rep["_cpu_seconds"]}
        return run_measured([PYTHON, "-c", WHEEL, root])

    runs = interleaved(["ours", "wheel"], args.repeat, run_one)
    planned = {e: r.reported[-1]["files"] for e, r in runs.items()}
    print(f"  planned files: {planned}", file=sys.stderr)
    if planned["ours"] != planned["wheel"]:
        raise SystemExit(f"the plans differ: {planned}")
    print(json.dumps({"argv": sys.argv[1:]}))
    print(ratio_line(f"{args.files:,} files / {args.partitions} partitions", runs["ours"], runs["wheel"]).replace("delta-rs", "wheel"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
