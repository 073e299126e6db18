"""``checkpoint``, ``compact-log`` and ``cleanup`` sub-commands (single-node engine, or Spark for the first two)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from typing import Any

from . import common
from .common import add_coordinator_option, add_storage_options, cli_progress, emit_json, open_cli_table, run_guarded

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def _table(p: argparse.ArgumentParser) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_coordinator_option(p)
    add_storage_options(p)


def _engine(p: argparse.ArgumentParser, *, auto: bool = False) -> None:
    if auto:
        p.add_argument("--engine", choices=["auto", "local", "spark"], default="auto",
                       help="auto (default): local unless the log the checkpoint replays exceeds 512 MiB, then spark; "
                       "local (single node) or spark (spark-submit)")
    else:
        p.add_argument("--engine", choices=["local", "spark"], default="local", help="local (single node, default) or spark (spark-submit)")
    g = p.add_argument_group("Spark engine (--engine spark): the package's Python is shipped to non-local masters by itself")
    g.add_argument("--master", default="local[*]", help="Spark master: local[*], spark://HOST:PORT, yarn, k8s://https://HOST:PORT")
    g.add_argument("--deploy-mode", choices=["client", "cluster"], default=None, help="where the driver runs (default: client)")
    g.add_argument("--spark-verbose", action="store_true", help="show Spark's own log lines (default: warnings only, and progress)")
    g.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    g.add_argument("--jars", default=None, help="comma-separated jars for the driver and executors (e.g. hadoop-aws for s3://)")
    g.add_argument("--packages", default=None, help="comma-separated Maven coordinates")
    g.add_argument("--repositories", default=None, help="comma-separated Maven repositories for --packages")
    g.add_argument("--py-files", default=None, help="extra comma-separated .zip/.egg/.py files for the Python path")
    g.add_argument("--no-ship-package", dest="ship_package", action="store_const", const=False, default=None,
                   help="do not ship the package's own modules (the cluster has them installed)")
    g.add_argument("--driver-host", default=None, help="address executors reach the driver at (default: 127.0.0.1 for local masters "
                   "and masters on a loopback address, else Spark's choice)")
    g.add_argument("--driver-bind-address", default=None, help="local address the driver listens on (default: the driver host when loopback)")
    g.add_argument("--driver-port", type=int, default=None, help="the driver's RPC port (default: any free one)")
    g.add_argument("--block-manager-port", type=int, default=None, help="the driver's block manager port (default: any free one)")
    g.add_argument("--spark-ui-port", type=int, default=None, help="enable the driver's UI on this port (default: no UI), bound to the driver's address")
    g.add_argument("--spark-python", default=None, help="the executors' Python (spark.pyspark.python)")
    g.add_argument("--container-image", default=None, help="Kubernetes: spark.kubernetes.container.image")
    g.add_argument("--namespace", default=None, help="Kubernetes: spark.kubernetes.namespace")


def _spark_conf(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _spark_settings(args: argparse.Namespace) -> Any:
    from ..maintenance.spark.settings import SparkSettings

    ui = args.spark_ui_port
    return SparkSettings(master=args.master).override(
        deploy_mode=args.deploy_mode, jars=args.jars, packages=args.packages, repositories=args.repositories, py_files=args.py_files,
        ship_package=args.ship_package, driver_host=args.driver_host, bind_address=args.driver_bind_address, driver_port=args.driver_port,
        block_manager_port=args.block_manager_port, ui_enabled=None if ui is None else True, ui_port=ui, python=args.spark_python,
        container_image=args.container_image, namespace=args.namespace,
    )


def _job_storage_options(table: Any, settings: Any) -> dict[str, Any]:
    """The table's storage options; for executors elsewhere also the keys this process would use
    (from the AWS chain), which reach the job through its private credentials file only."""
    from ..maintenance.spark.credentials import environment_credentials

    options = dict(table.storage_options)
    if settings.kind != "local":
        options = {**environment_credentials(table.uri, options), **options}
    return options


def register(sub: Any) -> None:
    c = sub.add_parser("checkpoint", help="write a checkpoint at the latest published version when due: when the table's "
                       "delta.checkpointInterval (or --interval) commits follow the last one, or now with --force")
    _table(c)
    c.add_argument("--version", type=int, default=None, help="published version (default: latest published)")
    c.add_argument("--interval", type=int, default=None, help="commits between checkpoints (default: the table's delta.checkpointInterval)")
    c.add_argument("--force", action="store_true", help="write now, however few commits follow the last checkpoint")
    _engine(c, auto=True)
    c.set_defaults(handler=lambda a: run_guarded(lambda: _checkpoint(a)))

    k = sub.add_parser("compact-log", help="write a log compaction file [start, end], or aligned windows")
    _table(k)
    k.add_argument("--start", type=int, default=None, help="first version of the window")
    k.add_argument("--end", type=int, default=None, help="last version of the window (> start)")
    k.add_argument("--interval", type=int, default=10, help="without --start/--end: aligned windows ending on multiples of it")
    k.add_argument("--max-window-bytes", type=int, default=0, help="skip windows with more commit bytes (0: no guard)")
    k.add_argument("--list", action="store_true", help="with --interval: list every window written or skipped")
    _engine(k)
    k.set_defaults(handler=lambda a: run_guarded(lambda: _compact(a)))

    d = sub.add_parser("cleanup", help="plan (default) or run retention-gated metadata cleanup")
    _table(d)
    d.add_argument("--execute", action="store_true", help="delete the planned files (default: dry run)")
    d.add_argument("--now", default=None, metavar="ISO8601", help="the clock to plan with (default: now)")
    d.add_argument("--retention-days", type=float, default=None, help="default: delta.logRetentionDuration")
    d.add_argument("--allow-shorter-retention", action="store_true", help="accept a retention below the table's own")
    d.add_argument("--allow-future-now", action="store_true", help="accept a --now later than the real clock")
    d.add_argument("--allow-catalog-managed", action="store_true", help="the table's catalog permits metadata cleanup")
    d.add_argument("--list", action="store_true", help="list every file of the plan (default: the summary and counts per kind)")
    d.set_defaults(handler=lambda a: run_guarded(lambda: _cleanup(a)))


def _checkpoint(args: argparse.Namespace) -> int:
    from ..maintenance.operations.checkpoint import CheckpointOutcome, plan_checkpoint, run_local_checkpoint
    from ..maintenance.operations.checkpoint_engine import choose_checkpoint_engine

    with open_cli_table(args) as table:
        plan = plan_checkpoint(table, interval=args.interval, version=args.version, force=args.force)
        decision = plan.decision
        outcome = CheckpointOutcome(table.uri, decision, args.engine)
        engine = args.engine
        # --force at a version that has a checkpoint runs the writer, which verifies the one there
        # (a torn file is an error, not "already exists")
        work = decision.due or (args.force and decision.last_checkpoint_version == decision.version)
        if work and engine == "auto":
            choice = choose_checkpoint_engine(table.store, plan.state)
            if choice.engine == "spark":  # the worker is the usual choice; a Spark job is worth a word before it starts
                print(choice.reason, file=sys.stderr)
            engine = choice.engine
        if work and engine == "spark":
            outcome = _spark_checkpoint(args, table, plan)
        elif work:
            outcome = CheckpointOutcome.local(table.uri, decision, run_local_checkpoint(table, plan, progress=cli_progress()))
    report = outcome.report()
    if args.json:
        emit_json(report.to_dict())  # the operator's XCom record
    else:
        print(report.summary())
    return 0


def _spark_checkpoint(args: argparse.Namespace, table: Any, plan: Any) -> Any:
    from ..maintenance.operations.checkpoint import CheckpointOutcome
    from ..maintenance.spark.jobs import checkpoint_job, verify_checkpoint
    from ..maintenance.spark.submit import run_spark_submit

    started = time.monotonic()
    version = plan.decision.version
    plan.check_tail(table, base_checkpoint=True)
    settings = _spark_settings(args)
    job = checkpoint_job(table.uri, version, _job_storage_options(table, settings), conf=_spark_conf(args))
    reported = json.loads(run_spark_submit(job, settings, **_spark_output(args)).strip().splitlines()[-1])
    group = verify_checkpoint(table.store, version)  # the log, not the exit code, says it worked
    return CheckpointOutcome.spark(table.uri, plan.decision, group, existed=bool(reported.get("existed", False)),
                                   num_actions=int(reported.get("num_actions", 0)), seconds=time.monotonic() - started)


def _spark_output(args: argparse.Namespace) -> dict[str, Any]:
    """Spark's progress to stderr, throttled; its own log lines only with --spark-verbose."""
    return {"progress": cli_progress(), "verbose": args.spark_verbose}


def _compact(args: argparse.Namespace) -> int:
    from ..maintenance.operations.log_compaction import check_compaction_window, compact_window, single_window_report
    from ..maintenance.spark.jobs import compaction_job, verify_compaction
    from ..maintenance.spark.submit import run_spark_submit

    if (args.start is None) != (args.end is None):
        raise ValueError("--start and --end go together")
    with open_cli_table(args) as table:
        if args.start is None:
            return _compact_windows(table, args)
        started = time.monotonic()
        if args.engine == "spark":
            check_compaction_window(table, args.start, args.end)
            settings = _spark_settings(args)
            job = compaction_job(table.uri, args.start, args.end, _job_storage_options(table, settings), conf=_spark_conf(args))
            reported = json.loads(run_spark_submit(job, settings, **_spark_output(args)).strip().splitlines()[-1])
            found = verify_compaction(table.store, args.start, args.end)  # the log, not the exit code, says it worked
            window = {"start": args.start, "end": args.end, "file": found.name, "existed": not reported["created"],
                      "num_actions": int(reported.get("num_actions", 0)), "size_bytes": found.size}
        else:
            r = compact_window(table, args.start, args.end)
            window = {"start": r.start, "end": r.end, "file": r.file, "existed": r.existed, "num_actions": r.num_actions,
                      "size_bytes": r.size_in_bytes}
        report = single_window_report(table.uri, window, time.monotonic() - started)
    if args.json:
        emit_json({**report.to_dict(), "file": window["file"]})  # the XCom record's keys, and the file's name
    else:
        print(report.summary() + f": {window['file']}")
    return 0


def _compact_windows(table: Any, args: argparse.Namespace) -> int:
    from ..maintenance.operations.log_compaction import run_log_compaction

    writer = None
    if args.engine == "spark":
        from ..maintenance.spark.compaction_engine import SparkCompactionWriter
        from ..maintenance.spark.submit import run_spark_submit

        settings = _spark_settings(args)

        def submit(job: Any) -> None:
            run_spark_submit(job, settings)

        writer = SparkCompactionWriter(table.store, table.uri, _job_storage_options(table, settings), submit, conf=_spark_conf(args))
    result = run_log_compaction(table, interval=args.interval, max_window_bytes=args.max_window_bytes, writer=writer)
    if args.json:
        record = result.report().to_dict()  # the XCom record; --list adds the windows
        emit_json({**record, "window_list": [*result.written, *result.skipped]} if args.list else record)
    else:
        print(result.report().summary())
        for w in result.written if args.list else ():
            print(f"  [{w['start']}, {w['end']}] {w['file']}")
        for w in result.skipped if args.list else ():
            print(f"  skipped [{w['start']}, {w['end']}]: {w['reason']}")
    return 0


def _without_numpy_if_local_classic(args: argparse.Namespace) -> None:
    """In the command's own process, keep numpy out when the table is local and has no UUID-named
    checkpoint: then cleanup never writes a compatibility checkpoint (the one step that needs
    numpy), and pyarrow, which imports numpy whenever it can, loads without it (~0.1 s and
    ~13 MiB of a cleanup that lasts about a second). A UUID-named checkpoint that becomes the
    anchor meanwhile stops the run before anything is deleted, with the reason; a re-run loads numpy."""
    import os

    from ..deltalog.model.paths import LOG_DIR, LogFileType, parse_log_path
    from ..deltalog.storage import normalize_table_uri

    uri = normalize_table_uri(args.table_uri)
    if not common.STANDALONE or "numpy" in sys.modules or "://" in uri or args.storage_option:
        return
    try:
        names = os.listdir(os.path.join(uri, LOG_DIR))
    except OSError:
        return
    for n in names:
        if ".checkpoint." in n and (p := parse_log_path(n)) is not None and p.type is LogFileType.CHECKPOINT_UUID:
            return
    sys.meta_path.insert(0, common.BlockedImport(
        "numpy", "not loaded by this cleanup: the table had no UUID-named checkpoint when it started and one is the anchor "
        "now; nothing was deleted, run the command again"))


def _cleanup(args: argparse.Namespace) -> int:
    _without_numpy_if_local_classic(args)
    try:
        return _run_cleanup(args)
    except ModuleNotFoundError as exc:
        if exc.name != "numpy":
            raise
        print(f"delta-maintenance: error: {exc}", file=sys.stderr)  # one line, as run_guarded's
        return 1


def _run_cleanup(args: argparse.Namespace) -> int:
    from ..deltalog.cleanup.plan import retention_ms_from_days
    from ..maintenance.operations.log_cleanup import cleanup_report, run_metadata_cleanup

    retention = None if args.retention_days is None else retention_ms_from_days(args.retention_days)
    now_ms = None
    if args.now is not None:
        now = datetime.fromisoformat(args.now.replace("Z", "+00:00"))
        now_ms = int((now if now.tzinfo else now.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    with open_cli_table(args) as table:
        result = run_metadata_cleanup(
            table,
            dry_run=not args.execute,
            retention_ms=retention,
            allow_shorter_retention=args.allow_shorter_retention,
            catalog_permits_cleanup=args.allow_catalog_managed,
            now_ms=now_ms,
            allow_future_now=args.allow_future_now,
            progress=cli_progress(),
        )
    report = cleanup_report(result)
    if args.json:
        record = report.to_dict()  # the XCom record; --list adds the files
        emit_json({**record, "files": [d.to_dict() for d in result.plan.deletions]} if args.list else record)
        return 0
    print(report.summary())
    p = result.plan
    if not p.skipped:
        print(f"  cutoff {report.details['cutoff']} → commit {p.cutoff_commit}, anchor checkpoint {p.cutoff_checkpoint}; "
              + ", ".join(f"{k}={v}" for k, v in p.counts.items()))
    for note in p.notes:
        print(f"  note: {note}")
    for d in p.deletions if args.list else ():
        print(f"  {d.kind:<20} {d.size:>10}  {d.path}")
    return 0
