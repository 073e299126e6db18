"""OPTIMIZE's Spark engine against delta-spark's ``OPTIMIZE``, same tables, same Spark, same run.

    python benchmarks/optimize_spark.py [--files 20000 --partitions 20] [--flat-files 10000] [--repeat 3]
                                        [--driver-memory 1g] [--work DIR]

The tables of ``benchmarks/optimize.py`` (small Parquet files of about 50 KB, ``--files`` in
``--partitions`` partitions and ``--flat-files`` unpartitioned, ``delta.targetFileSize`` 100 MiB),
built once under ``--work`` and reset to their one-commit state before every run. Each side is a
whole command as a user runs it, on ``local[2]`` with ``spark.driver.memory`` = ``--driver-memory``,
UI off, the same pyspark and delta-spark jars, JVM start included:

- ours: ``delta-maintenance optimize TABLE --engine spark --master local[2] --json`` — plan in the
  task, one Spark task per bin writing its file and returning its ``add``, the commit by the task;
- delta-spark: ``spark-submit`` of ``OPTIMIZE delta.`TABLE``` with
  ``spark.databricks.delta.optimize.maxFileSize`` = 100 MiB (delta-spark's bin size; the table
  property is not read by its OPTIMIZE), so both plan the same bins (the script prints the files
  each removed and added).

Runs alternate; medians with min–max, the peak RSS of the largest JVM and Python process of each
run's tree (sampled from ``/proc``), and the 1-minute load before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import optimize as worker_bench
from _harness import CLI, compile_package, in_subprocess
from spark_checkpoint import COMMON_CONF, run_tree, spark_env

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests._infra.jars import delta_spark_jars

TARGET = 100 << 20

THEIRS = r"""
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
row = spark.sql(f"OPTIMIZE delta.`{sys.argv[1]}`").collect()[0]
m = row["metrics"]
print(json.dumps({"files_added": m["numFilesAdded"], "files_removed": m["numFilesRemoved"]}))
"""


def ours_cmd(table: str, driver_memory: str) -> tuple[list[str], dict[str, str]]:
    conf = {**COMMON_CONF, "spark.driver.memory": driver_memory}
    return [CLI, "optimize", table, "--json", "--engine", "spark", "--master", "local[2]", *(f"--spark-conf={k}={v}" for k, v in conf.items())], spark_env()


def theirs_cmd(table: str, driver_memory: str, script: str) -> tuple[list[str], dict[str, str]]:
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    cmd = [submit, "--master", "local[2]", "--jars", ",".join(delta_spark_jars())]
    conf = {**COMMON_CONF, "spark.driver.memory": driver_memory, "spark.databricks.delta.optimize.maxFileSize": str(TARGET),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, script, table], spark_env()


def base_files(root: str) -> set[str]:
    """The data files the one-commit table references (what a reset keeps)."""
    import urllib.parse

    with open(os.path.join(root, "_delta_log", "00000000000000000000.json")) as f:
        lines = [json.loads(line) for line in f]
    return {os.path.join(root, urllib.parse.unquote(a["add"]["path"])) for a in lines if "add" in a}


def bench(label: str, root: str, repeat: int, driver_memory: str, script: str) -> str:
    base = base_files(root)
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "delta-spark": []}
    order = [s for i in range(repeat) for s in (("ours", "delta-spark") if i % 2 == 0 else ("delta-spark", "ours"))]
    for n, side in enumerate(order):
        worker_bench.reset(root, base)
        shutil.rmtree(os.path.join(root, "_delta_log", "_spark_staging"), ignore_errors=True)
        cmd, env = ours_cmd(root, driver_memory) if side == "ours" else theirs_cmd(root, driver_memory, script)
        load = os.getloadavg()[0]
        r = run_tree(cmd, env)
        r["load"] = load
        runs[side].append(r)
        rep = r["reported"]
        print(f"  {label} {side} run {n // 2 + 1}: {r['seconds']:.1f}s JVM {r['jvm_mib']:.0f} MiB python {r['python_mib']:.0f} MiB "
              f"files {rep.get('files_removed')} -> {rep.get('files_added')} (load {load:.1f})", file=sys.stderr, flush=True)
    worker_bench.reset(root, base)
    med = {s: statistics.median(r["seconds"] for r in rs) for s, rs in runs.items()}
    parts = [f"{label:<34}"]
    for side, rs in runs.items():
        secs = [r["seconds"] for r in rs]
        parts.append(f"{side} {med[side]:.1f}s [{min(secs):.1f}–{max(secs):.1f}] JVM {max(r['jvm_mib'] for r in rs):.0f} MiB "
                     f"python {max(r['python_mib'] for r in rs):.0f} MiB")
    loads = [r["load"] for rs in runs.values() for r in rs]
    parts.append(f"time {med['ours'] / med['delta-spark']:.2f}x | n={repeat}+{repeat} load {statistics.mean(loads):.1f} (max {max(loads):.1f})")
    return " | ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--flat-files", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=1_500, help="rows per file (1,500: about 50 KB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--work", default=None, help="a directory to keep the built tables in (reused when present; shared with optimize.py)")
    args = ap.parse_args()
    compile_package()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-optimize-spark-"))
    work.mkdir(parents=True, exist_ok=True)
    script = str(work / "delta_spark_optimize.py")
    Path(script).write_text(THEIRS)
    lines = []
    for label, files, parts in ((f"{args.files:,} files / {args.partitions} partitions", args.files, args.partitions),
                                (f"{args.flat_files:,} files unpartitioned", args.flat_files, 0)):
        if not files:
            continue
        root = str(work / f"t-{files}-{parts}")
        if not os.path.exists(os.path.join(root, "_delta_log", "00000000000000000000.json")):
            shutil.rmtree(root, ignore_errors=True)
            size = int(in_subprocess(worker_bench.BUILD, root, str(files), str(parts), str(args.rows)))
            print(f"built {label}: {size / files / 1024:.1f} KB per file", file=sys.stderr)
        lines.append(bench(label, root, args.repeat, args.driver_memory, script))
    print(json.dumps({"argv": sys.argv[1:]}))
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
