"""``delta-maintenance vacuum``: plan (default) or run the VACUUM of unreferenced data files."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_storage_options, cli_progress, emit_json, open_cli_table, run_guarded
from .maintain_cmd import _engine, _job_storage_options, _spark_conf, _spark_settings

# The use case is imported inside the handler: `delta-maintenance X` loads only what X needs.

SHOWN = 20  # files a dry run prints without --list


def register(sub: Any) -> None:
    p = sub.add_parser("vacuum", help="plan (default) or run the VACUUM of data files no retained version references")
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument(
        "--coordinator",
        default="auto",
        metavar="SPEC",
        help="the table's coordinator spec; default auto: the coordinator the table declares (its ratified, unpublished commits are "
        "part of what VACUUM keeps), none for a filesystem table",
    )
    p.add_argument("--execute", action="store_true", help="delete the planned files (default: dry run)")
    p.add_argument("--lite", action="store_true", help="LITE: candidates from the retained log's removes instead of a listing of the table root")
    p.add_argument("--retention-hours", type=float, default=None, metavar="H", help="default: delta.deletedFileRetentionDuration (7 days)")
    p.add_argument("--allow-shorter-retention", action="store_true", help="accept a retention below the table's own")
    p.add_argument("--allow-catalog-managed", action="store_true", help="the table's catalog permits VACUUM (catalog-managed tables)")
    p.add_argument("--inventory", default=None, metavar="URI", help="an S3 Inventory manifest.json or a listing file instead of listing the root")
    p.add_argument("--list", action="store_true", help=f"print every planned file (default: the first {SHOWN})")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)
    _engine(p)  # --engine spark: the listing and the deletions as Spark jobs (the options checkpoint takes)
    p.set_defaults(handler=lambda a: run_guarded(lambda: _vacuum(a)))


def _vacuum(args: argparse.Namespace) -> int:
    from ..maintenance.operations.vacuum import HOUR_MS, run_vacuum

    if args.retention_hours is not None and args.retention_hours < 0:
        raise ValueError(f"--retention-hours must not be negative, got {args.retention_hours:g}")
    coordinator = None if args.coordinator in ("", "none") else args.coordinator
    args.coordinator = coordinator
    retention = None if args.retention_hours is None else round(args.retention_hours * HOUR_MS)
    progress = cli_progress()
    with open_cli_table(args) as table:
        engine = None
        if args.engine == "spark":
            from ..maintenance.spark.submit import run_spark_submit
            from ..maintenance.spark.vacuum_engine import SparkVacuumEngine
            from .optimize_cmd import _job_result

            settings = _spark_settings(args)
            engine = SparkVacuumEngine(table.store, table.uri, _job_storage_options(table, settings),
                                       lambda job: _job_result(run_spark_submit(job, settings, progress=progress, verbose=args.spark_verbose)),
                                       conf=_spark_conf(args))
        result = run_vacuum(
            table,
            dry_run=not args.execute,
            mode="lite" if args.lite else "full",
            retention_ms=retention,
            allow_shorter_retention=args.allow_shorter_retention,
            catalog_permits_vacuum=args.allow_catalog_managed,
            inventory=args.inventory,
            progress=progress,
            engine=engine,
        )
    if args.json:
        out = result.report().to_dict()  # the XCom record; --list adds the files
        if args.list and result.plan is not None:
            out["files"] = result.plan.paths()
        emit_json(out)
        return 0
    print(result.report().summary())
    plan = result.plan
    if plan is None:
        return 0
    for partition, files, size in plan.by_partition[:SHOWN] if plan.by_partition and plan.by_partition[0][0] else ():
        print(f"  {partition}: {files:,} file(s), {size:,} bytes")
    if plan.kept_young[0]:
        print(f"  kept {plan.kept_young[0]:,} untracked file(s) younger than the retention (a writer may be about to commit them)")
    for warning in plan.warnings:
        print(f"  warning: {warning}")
    if result.dry_run:
        paths = plan.paths()
        for path in paths if args.list else paths[:SHOWN]:
            print(f"  {path}")
        if not args.list and len(paths) > SHOWN:
            print(f"  … {len(paths) - SHOWN:,} more (--list prints them all)")
    return 0
