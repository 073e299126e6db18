"""``delta-maintenance discover --config tables.yaml [--out fleet.json]``: run the YAML's discovery
sources now and write the fleet file atomically (what the discovery DAG does in a task).

Credentials come from the environment (``DELTA_MAINTENANCE_UC_TOKEN``, the AWS credential chain);
a source's ``conn_id`` is an Airflow connection, which only the discovery DAG reads. Exit 0 when
every source answered (the file is written), 2 when the configuration or a source failed (the
previous fleet file is left as it was)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import emit_json, run_guarded


def register(sub: Any) -> None:
    p = sub.add_parser("discover", help="list the tables of the YAML's discovery sources and write the fleet file")
    p.add_argument("--config", required=True, metavar="FILE", help="the tables.yaml with a discovery: section")
    p.add_argument("--out", default=None, metavar="FILE", help="where to write the fleet (default: discovery.fleet_file of the YAML)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def _run(args: argparse.Namespace) -> int:
    from ..fleet.catalog_discovery import discover_fleet, write_fleet_file
    from ..fleet.config import load_fleet, parse_discovery
    from ..maintenance.config.tables import read_yaml

    discovery = parse_discovery(read_yaml(args.config), args.config)
    if discovery is None:
        raise ValueError(f"{args.config}: no discovery: section")
    result = discover_fleet(discovery)
    out = Path(args.out) if args.out else discovery.fleet_file
    write_fleet_file(out, result.document(discovery))
    summary = {"fleet_file": str(out), **result.summary()}
    if out.resolve() == discovery.fleet_file:  # what the DAG file will make of it
        fleet = load_fleet(args.config)
        summary.update(maintained=[t.name for t in fleet.discovered], disabled=fleet.disabled, shadowed=fleet.shadowed,
                       invalid=[f"{e.name}: {line}" for e in fleet.invalid for line in e.error.lines])
    if args.json:
        emit_json(summary)
        return 0
    for s in result.sources:
        print(f"{s.name} ({s.kind}): {len(s.tables)} table(s), {len(s.skipped)} skipped")
        for skip in s.skipped:
            print(f"  skipped {skip['table']}: {skip['reason']}")
    print(f"{out}: {len(result.tables)} discovered table(s) written")
    for key in ("disabled", "shadowed", "invalid"):
        for name in summary.get(key, []):
            print(f"  {key}: {name}")
    return 0
