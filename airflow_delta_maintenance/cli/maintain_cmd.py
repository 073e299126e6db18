"""``checkpoint``, ``compact-log`` and ``cleanup`` sub-commands (single-node engine)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from typing import Any

from .common import add_coordinator_option, add_storage_options, cli_progress, emit_json, open_cli_table, run_guarded

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def _table(p: argparse.ArgumentParser) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_coordinator_option(p)
    add_storage_options(p)


def _engine(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["local", "spark"], default="local", help="local (single node, default) or spark (spark-submit)")
    p.add_argument("--master", default="local[*]", help="Spark master for --engine spark")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    p.add_argument("--spark-verbose", action="store_true", help="show Spark's own log lines (default: warnings only, and progress)")


def _spark_conf(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def register(sub: Any) -> None:
    c = sub.add_parser("checkpoint", help="write a checkpoint at the latest published version when due")
    _table(c)
    c.add_argument("--version", type=int, default=None, help="published version (default: latest published)")
    c.add_argument("--interval", type=int, default=None, help="write only when this many commits follow the last checkpoint")
    _engine(c)
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
    import time

    from ..maintenance.checkpoint import CheckpointOutcome, plan_checkpoint, run_local_checkpoint
    from ..maintenance.spark_submit import checkpoint_job, run_spark_submit, verify_checkpoint

    with open_cli_table(args) as table:
        plan = plan_checkpoint(table, interval=args.interval or 1, version=args.version, force=args.interval is None)
        decision, store = plan.decision, table.store
        out: dict[str, Any] = {"decision": decision.to_dict(), "checkpoint_version": decision.version, "written": False,
                               "files": [], "num_actions": 0, "num_add_files": 0, "size_bytes": 0}
        outcome = CheckpointOutcome(table.uri, decision, args.engine)
        if (decision.due or decision.last_checkpoint_version == decision.version) and args.engine == "spark":
            started = time.monotonic()
            job = checkpoint_job(table.uri, decision.version, table.storage_options, conf=_spark_conf(args))
            reported = json.loads(run_spark_submit(job, args.master, **_spark_output(args)).strip().splitlines()[-1])
            group = verify_checkpoint(store, decision.version)  # the log, not the exit code, says it worked
            out.update(kind="spark", written=not reported.get("existed", False), existed=reported.get("existed", False),
                       files=[f.name for f in group.files], num_actions=reported.get("num_actions", 0),
                       num_add_files=reported.get("num_add_files", 0), size_bytes=group.size_in_bytes)
            outcome = CheckpointOutcome.spark(table.uri, decision, group, existed=bool(reported.get("existed", False)),
                                              num_actions=int(reported.get("num_actions", 0)), seconds=time.monotonic() - started)
        elif decision.due or decision.last_checkpoint_version == decision.version:
            r = run_local_checkpoint(table, plan, progress=cli_progress())
            out.update(kind=r.kind, written=not r.existed, existed=r.existed, files=r.files, num_actions=r.num_actions,
                       num_add_files=r.num_add_files, size_bytes=r.size_in_bytes, stats_parsed=r.stats_parsed)
            outcome = CheckpointOutcome.local(table.uri, decision, r)
    if args.json:
        emit_json(out)
    else:
        print(outcome.report().summary())
    return 0


def _spark_output(args: argparse.Namespace) -> dict[str, Any]:
    """Spark's progress to stderr, throttled; its own log lines only with --spark-verbose."""
    return {"progress": cli_progress(), "verbose": args.spark_verbose}


def _compact(args: argparse.Namespace) -> int:
    from ..maintenance.compaction import check_compaction_window, compact_window
    from ..maintenance.spark_submit import compaction_job, run_spark_submit, verify_compaction

    if (args.start is None) != (args.end is None):
        raise ValueError("--start and --end go together")
    if args.start is None and args.engine == "spark":
        raise ValueError("--engine spark needs --start and --end")
    with open_cli_table(args) as table:
        if args.start is None:
            return _compact_windows(table, args)
        out: dict[str, Any]
        if args.engine == "spark":
            check_compaction_window(table, args.start, args.end)
            job = compaction_job(table.uri, args.start, args.end, table.storage_options, conf=_spark_conf(args))
            reported = json.loads(run_spark_submit(job, args.master, **_spark_output(args)).strip().splitlines()[-1])
            found = verify_compaction(table.store, args.start, args.end)  # the log, not the exit code, says it worked
            out = {"start_version": args.start, "end_version": args.end, "path": found.name, "created": reported["created"], "size_bytes": found.size}
        else:
            r = compact_window(table, args.start, args.end)
            out = {"start_version": r.start, "end_version": r.end, "path": r.file, "created": not r.existed,
                   "num_actions": r.num_actions, "size_bytes": r.size_in_bytes}
    if args.json:
        emit_json(out)
    else:
        print(f"{table.uri}: {'wrote' if out['created'] else 'already had'} {out['path']}")
    return 0


def _compact_windows(table: Any, args: argparse.Namespace) -> int:
    from ..maintenance.compaction import run_log_compaction

    result = run_log_compaction(table, interval=args.interval, max_window_bytes=args.max_window_bytes)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result.report().summary())
        for w in result.written if args.list else ():
            print(f"  [{w['start']}, {w['end']}] {w['file']}")
        for w in result.skipped if args.list else ():
            print(f"  skipped [{w['start']}, {w['end']}]: {w['reason']}")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    from ..deltalog.cleanup import retention_ms_from_days
    from ..maintenance.cleanup import cleanup_report, run_metadata_cleanup

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
    if args.json:
        emit_json(result.to_dict())
        return 0
    report = cleanup_report(result)
    print(report.summary())
    p = result.plan
    if not p.skipped:
        print(f"  cutoff {report.details['cutoff']} → commit {p.cutoff_commit}, anchor checkpoint {p.cutoff_checkpoint}; "
              + ", ".join(f"{k}={v}" for k, v in p.counts.items()))
    for d in p.deletions if args.list else ():
        print(f"  {d.kind:<20} {d.size:>10}  {d.path}")
    return 0
