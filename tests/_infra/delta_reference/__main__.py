"""Capture what delta-spark 4.4 and the ``deltalake`` wheel do for OPTIMIZE, VACUUM and version
checksums on the zoo's tables, as raw JSON samples (the notes in reference-delta-spark.md are
written from them):

    .venv/bin/python -m tests._infra.delta_reference OUT_DIR [optimize|vacuum|checksums ...] [--only LABEL,...]

One local[2] Spark session; every run works on a fresh copy of a cached zoo table.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from ..spark import start_local_spark
from ..table_zoo import Zoo
from . import checksums, optimize, vacuum


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests._infra.delta_reference")
    parser.add_argument("out", type=Path)
    parser.add_argument("parts", nargs="*", default=["optimize", "vacuum", "checksums"])
    parser.add_argument("--only", default="", help="comma-separated run labels / table names")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(","))) or None
    work = Path(tempfile.mkdtemp(prefix="delta-reference-"))
    spark = start_local_spark(work / "spark")
    zoo = Zoo(lambda: spark, log=print)
    started = time.monotonic()
    try:
        if "optimize" in args.parts:
            optimize.spark_runs(spark, zoo, work, args.out, only)
            optimize.wheel_runs(spark, zoo, work, args.out, only)
        if "vacuum" in args.parts:
            vacuum.run(spark, zoo, work, args.out, only)
        if "checksums" in args.parts:
            checksums.dump_tables(zoo, args.out)
            checksums.behaviour_runs(spark, zoo, work, args.out)
            checksums.tamper_runs(spark, zoo, work, args.out)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
