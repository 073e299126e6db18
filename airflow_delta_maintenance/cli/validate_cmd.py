"""``delta-maintenance validate-config FILE [--check-tables]``: the YAML configuration checked as the
DAG file will load it — for CI, before a deployment. Every mistake is listed, one line each (all of a
table's, every table's, and the file's own), so that one round of fixes is enough. Exit 0 when every
table is valid (and, with ``--check-tables``, every check passed), 2 otherwise."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_storage_options, emit_json, run_guarded, storage_options


def register(sub: Any) -> None:
    p = sub.add_parser("validate-config", help="validate a tables.yaml as the DAG file loads it, listing every mistake (exit 2 on any)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--check-tables", action="store_true",
                   help="also read each table (read-only): its _delta_log, its coordinator, its retention")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def _run(args: argparse.Namespace) -> int:
    from ..fleet.config import check_fleet
    from ..maintenance.config.check import check_table

    # the YAML tables and the discovered ones of its fleet file, and the mistakes of the file itself
    fleet, file_problems = check_fleet(args.file)
    # a fleet file that no discovery has written yet (CI, a first deployment) is a note; a malformed
    # or stale one is a failure, as it is for the DAG file
    unusable = [fleet.fleet_error] if fleet.fleet_error and not fleet.fleet_missing else []
    tables, invalid = fleet.tables, fleet.invalid + unusable
    opts = storage_options(args) if args.check_tables else {}
    rows: list[dict[str, Any]] = []
    for table in tables:
        row: dict[str, Any] = {"name": table.name, "dag_id": table.dag_id, "valid": True, "problems": [], "notes": []}
        if args.check_tables:
            check = check_table(table, opts)
            row["problems"], row["notes"] = check.problems, check.notes
        rows.append(row)
    for entry in invalid:
        rows.append({"name": entry.name, "dag_id": entry.dag_id, "valid": False, "problems": entry.error.lines, "notes": []})
    problems = [line for error in file_problems for line in error.lines]
    failed = [r for r in rows if not r["valid"] or r["problems"]]
    notes = [f"discovery: {fleet.fleet_error.error.detail}"] if fleet.fleet_error and fleet.fleet_missing else []
    mistakes = len(problems) + sum(len(r["problems"]) for r in rows)
    if args.json:
        emit_json({"file": args.file, "tables": rows, "problems": problems, "ok": not failed and not problems, "notes": notes})
    else:
        for line in problems:  # the file's own: its top level, defaults, discovery section
            print(f"{'INVALID':<8} {args.file}: {line}")
        for r in rows:
            state = "INVALID" if not r["valid"] else ("FAILED" if r["problems"] else "ok")
            for line in r["problems"] or [f"DAG {r['dag_id']}"]:
                print(f"{state:<8} {r['name']}: {line}")
            for note in r["notes"]:
                print(f"         {r['name']}: {note}")
        for note in notes:
            print(f"note     {note}")
        summary = f"{args.file}: {len(rows)} table(s), {len(failed)} with problems"
        print(summary + (f"; {mistakes} problem(s) in all" if mistakes else ""))
    return 2 if failed or problems else 0
