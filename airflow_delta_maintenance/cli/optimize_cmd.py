"""``delta-maintenance optimize``: compact small data files (runs, as delta-spark's and delta-rs's
OPTIMIZE do; ``--dry-run`` prints the plan)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import add_storage_options, cli_progress, emit_json, open_cli_table, run_guarded
from .maintain_cmd import _engine, _job_storage_options, _spark_conf, _spark_settings


def register(sub: Any) -> None:
    p = sub.add_parser("optimize", help="compact small data files into larger ones, committed through the table's coordinator")
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--coordinator", default="auto", metavar="SPEC",
                   help="the table's coordinator spec, or auto (default: discovered from the table; a plain table commits by put-if-absent)")
    p.add_argument("--dry-run", action="store_true", help="plan only: print the bins, files and bytes, commit nothing")
    p.add_argument("--where", default=None, metavar="PREDICATE", help="partition predicate, e.g. \"region = 'us' AND year >= 2024\"")
    p.add_argument("--min-file-size", default=None, metavar="SIZE", help="compact files below this size (default: delta.targetFileSize, else 1GiB)")
    p.add_argument("--target-file-size", default=None, metavar="SIZE", help="pack bins up to this size (same default)")
    p.add_argument("--max-bytes", default=None, metavar="SIZE", help="input bytes this run may rewrite; later bins wait for the next run")
    p.add_argument("--max-deleted-rows-ratio", type=float, default=0.05, metavar="R",
                   help="rewrite a file whose deletion vector deletes more than this share of its rows (default 0.05)")
    p.add_argument("--commit-batch-bytes", default=None, metavar="SIZE", help="commit after this many input bytes (default 16GiB)")
    p.add_argument("--allow-catalog-managed", action="store_true", help="the table's catalog permits OPTIMIZE (catalog-managed tables)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--show-bins", action="store_true", help="with --dry-run: list every bin (partition, files, bytes)")
    add_storage_options(p)
    # --engine and the Spark engine's options, as checkpoint and compact-log take them
    _engine(p)
    p.set_defaults(handler=lambda args: run_guarded(lambda: _optimize(args)))


def _optimize(args: argparse.Namespace) -> int:
    from ..deltalog.optimize.plan import OptimizeOptions, parse_size
    from ..deltalog.optimize.predicate import parse_partition_predicate, predicate_types
    from ..maintenance.operations.optimize import DEFAULT_COMMIT_BATCH_BYTES, run_optimize
    from ..maintenance.table.catalog_view import ratified_state

    def size(value: str | None, name: str) -> int | None:
        return None if value is None else parse_size(value, name)

    with open_cli_table(args) as table:
        predicate = None
        if args.where:
            meta = ratified_state(table, table.catalog_view()).metadata
            predicate = parse_partition_predicate(args.where, predicate_types(meta.schema, meta.partition_columns))
        options = OptimizeOptions(
            min_file_size=size(args.min_file_size, "--min-file-size"), target_file_size=size(args.target_file_size, "--target-file-size"),
            max_deleted_rows_ratio=args.max_deleted_rows_ratio, predicate=predicate, max_bytes=size(args.max_bytes, "--max-bytes"),
        )
        progress = None if args.json else cli_progress()
        engine = None
        if args.engine == "spark":
            from ..maintenance.spark.optimize_engine import SparkOptimizeEngine
            from ..maintenance.spark.submit import run_spark_submit

            settings = _spark_settings(args)
            engine = SparkOptimizeEngine(table.store, table.uri, _job_storage_options(table, settings),
                                         lambda job: _job_result(run_spark_submit(job, settings, progress=progress, verbose=args.spark_verbose)),
                                         conf=_spark_conf(args))
        result = run_optimize(
            table, options, dry_run=args.dry_run, catalog_permits_optimize=args.allow_catalog_managed, engine=engine,
            commit_batch_bytes=size(args.commit_batch_bytes, "--commit-batch-bytes") or DEFAULT_COMMIT_BATCH_BYTES,
            progress=progress,
        )
    report = result.report()
    if args.json:
        record = report.to_dict()
        if args.show_bins:
            record = {**record, "bin_list": [b.describe() for b in result.plan.bins]}
        emit_json(record)
        return 0
    print(report.summary())
    for note in result.plan.notes:
        print(f"note: {note}")
    if args.dry_run and args.show_bins:
        for b in result.plan.bins:
            print(json.dumps(b.describe(), ensure_ascii=False))
    return 0


def _job_result(stdout: str) -> dict[str, Any] | None:
    """The job's JSON result line (the engine reads its adds from the table's storage)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            return value if isinstance(value, dict) else None
    return None
