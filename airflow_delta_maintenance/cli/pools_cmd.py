"""``delta-maintenance pools FILE [--output POOLS.json] [--apply]``: the Airflow pools a
``tables.yaml`` uses — one per coordinator endpoint for tables with ``pool: auto`` — with their
sizes, for its tables and the discovered ones of its fleet file. ``--output`` writes them in the
format of ``airflow pools import``; ``--apply`` runs that command (on a host with the Airflow CLI
and access to the deployment). A task whose pool does not exist is never scheduled, so create the
pools before deploying the DAG file.

An invalid table is left out with a warning on stderr naming it and its mistakes (the DAG file
gives it a placeholder DAG, which uses no pool): the pools of the valid tables are still written
and applied, and the exit status is 0. A mistake of the file itself (not YAML, an unknown
top-level key, a bad ``defaults`` or ``discovery`` section) stops the command with exit status 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from typing import Any

from .common import emit_json, run_guarded


def register(sub: Any) -> None:
    p = sub.add_parser(
        "pools",
        help="the Airflow pools of a tables.yaml (pool: auto → one per coordinator endpoint); --apply creates them. "
        "Invalid tables are left out with a warning (exit 0); a mistake of the file itself exits 2",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--output", metavar="POOLS_JSON", help="write them for `airflow pools import`")
    p.add_argument("--apply", action="store_true", help="run `airflow pools import` with them")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def pools_import_document(tables: list[Any]) -> dict[str, dict[str, Any]]:
    """``airflow pools import`` JSON: name → slots, description, include_deferred (False: a deferred
    sensor holds no slot; the triggerer's token bucket budgets its polls)."""
    from ..fleet.scheduling import pools_for

    named = [t for t in tables if t.resolved_pool]
    sizes = pools_for((t.resolved_pool, t.pool_slots) for t in named)
    users = Counter(t.resolved_pool for t in named)
    endpoints = {t.resolved_pool: t.coordinator_endpoint for t in named}
    return {
        name: {"slots": slots, "include_deferred": False,
               "description": f"delta maintenance: {users[name]} table(s) on coordinator endpoint {endpoints[name]}"}
        for name, slots in sorted(sizes.items())
    }


def _airflow() -> str:
    local = os.path.join(os.path.dirname(sys.executable), "airflow")
    import shutil  # the imports of --apply stay out of every other command's start-up

    found = local if os.path.exists(local) else shutil.which("airflow")
    if not found:
        raise FileNotFoundError("the airflow command is not installed here: write the pools with --output and import them where it is")
    return found


def _run(args: argparse.Namespace) -> int:
    from ..fleet.config import load_fleet

    fleet = load_fleet(args.file)
    skipped = fleet.invalid + ([fleet.fleet_error] if fleet.fleet_error and not fleet.fleet_missing else [])
    for entry in skipped:
        for line in entry.error.lines:
            print(f"delta-maintenance: warning: table {entry.name} left out (invalid): {line}", file=sys.stderr)
    if fleet.fleet_error and fleet.fleet_missing:  # no discovery yet: its tables' pools come later
        print(f"delta-maintenance: warning: discovered tables left out: {fleet.fleet_error.error.detail}", file=sys.stderr)
    document = pools_import_document(fleet.tables)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(document, f, indent=2, sort_keys=True)
    applied = None
    if args.apply:
        import subprocess
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
            json.dump(document, tmp)
        try:
            done = subprocess.run([_airflow(), "pools", "import", tmp.name], capture_output=True, text=True, timeout=600)
        finally:
            os.unlink(tmp.name)
        if done.returncode != 0:
            raise RuntimeError(f"airflow pools import failed ({done.returncode}): {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        applied = True
    if args.json:
        emit_json({"file": args.file, "pools": document, "applied": bool(applied), "skipped": [{"name": e.name, "problems": e.error.lines} for e in skipped]})
    else:
        for name, pool in document.items():
            print(f"{name}\t{pool['slots']} slots\t{pool['description']}")
        left_out = f"; {len(skipped)} invalid table(s) left out (see the warnings)" if skipped else ""
        print(f"{args.file}: {len(document)} pool(s)" + (" created/updated in Airflow" if applied else "") + left_out)
    return 0
