"""``delta-maintenance create-table DIR --coordinator local:///abs/coordinator.db [--sample-commits N]``:
a new coordinated table for a trial, on the embedded coordinator (``demo.sample_table.create_coordinated_table``).

It prints the ``tables.yaml`` entry that maintains the table; with ``--sample-commits`` the
coordinator has ratified that many appends (real Parquet data) that nobody has published yet, so
the table's maintenance DAG has something to do on its first run.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from .common import emit_json, run_guarded

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "create-table",
        help="create a coordinated table for a trial on the embedded coordinator (version 0, optional sample commits)",
        description="Create a new Delta table on the embedded coordinator, for a trial: version 0 published, then "
        "--sample-commits appends ratified by the coordinator and not yet published. Prints the tables.yaml entry.",
    )
    p.add_argument("table_uri", metavar="DIR", help="a new local folder for the table")
    p.add_argument("--coordinator", required=True, metavar="SPEC",
                   help="the embedded coordinator's database, local:///abs/path/coordinator.db (created when missing)")
    p.add_argument("--sample-commits", type=int, default=0, metavar="N", help="ratified, unpublished appends of sample data (default 0)")
    p.add_argument("--checkpoint-interval", type=int, default=None, metavar="N", help="the table's delta.checkpointInterval")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def _run(args: argparse.Namespace) -> int:
    from ..demo.sample_table import create_coordinated_table

    if args.checkpoint_interval is not None and args.checkpoint_interval < 1:
        raise ValueError(f"--checkpoint-interval must be 1 or more, got {args.checkpoint_interval}")
    conf = {} if args.checkpoint_interval is None else {"delta.checkpointInterval": str(args.checkpoint_interval)}
    created = create_coordinated_table(args.table_uri, args.coordinator, sample_commits=args.sample_commits, configuration=conf)
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(created.uri).name) or "table"
    if args.json:
        emit_json({"table_uri": created.uri, "coordinator": created.coordinator, "latest_ratified_version": created.ratified,
                   "latest_published_version": 0, "name": name})
        return 0
    pending = f"; versions 1-{created.ratified} ratified, not yet published" if created.ratified else ""
    print(f"created {created.uri} on {created.coordinator}: version 0 published{pending}")
    print("maintain it with this entry under tables: in tables.yaml:")
    print(f"  - name: {name}\n    uri: {created.uri}\n    coordinator: {created.coordinator}")
    return 0
