"""`make demo`: create a real sample table under ./demo and inspect it with the CLI."""

from __future__ import annotations

import os
import shutil
import sys

from ..cli import main as cli_main
from .sample_table import create_sample_table


def main() -> int:
    root = os.path.abspath(os.environ.get("DELTA_DEMO_DIR", "demo"))
    table = os.path.join(root, "sample_table")
    shutil.rmtree(table, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    create_sample_table(table, commits=12)
    print(f"created {table}: 12 commits of Parquet data partitioned by region\n", flush=True)
    print(f"$ delta-maintenance inspect {table}", flush=True)
    rc = cli_main(["inspect", table])
    if rc:
        return rc
    print(f"\n$ delta-maintenance inspect {table} --version 3 --files", flush=True)
    return cli_main(["inspect", table, "--version", "3", "--files"])


if __name__ == "__main__":
    sys.exit(main())
