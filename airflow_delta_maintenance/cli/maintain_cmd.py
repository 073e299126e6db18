"""``checkpoint``, ``compact-log`` and ``cleanup`` sub-commands (single-node engine)."""

from __future__ import annotations

import argparse
from typing import Any

from ..deltalog.listing import list_log_files
from ..deltalog.storage import open_table_storage
from ..deltalog.table_properties import DAY_MS
from ..maintenance.checkpoint import decide_checkpoint, run_local_checkpoint
from ..maintenance.cleanup import run_metadata_cleanup
from ..maintenance.compaction import run_log_compaction
from .common import add_storage_options, emit_json, run_guarded, storage_options


def _table(p: argparse.ArgumentParser) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)


def register(sub: Any) -> None:
    c = sub.add_parser("checkpoint", help="write a checkpoint at the latest published version when due")
    _table(c)
    c.add_argument("--version", type=int, default=None, help="published version (default: latest published)")
    c.add_argument("--interval", type=int, default=None, help="commits between checkpoints (default: delta.checkpointInterval)")
    c.add_argument("--force", action="store_true", help="write even if not due by policy")
    c.add_argument("--engine", choices=["local"], default="local", help="local (single node)")
    c.set_defaults(handler=lambda a: run_guarded(lambda: _checkpoint(a)))

    k = sub.add_parser("compact-log", help="write aligned log compaction files over published versions")
    _table(k)
    k.add_argument("--interval", type=int, default=10, help="window length; windows end on multiples of it")
    k.add_argument("--max-window-bytes", type=int, default=0, help="skip windows with more commit bytes (0: no guard)")
    k.set_defaults(handler=lambda a: run_guarded(lambda: _compact(a)))

    d = sub.add_parser("cleanup", help="plan (default) or run retention-gated metadata cleanup")
    _table(d)
    d.add_argument("--delete", action="store_true", help="delete the planned files (default: dry run)")
    d.add_argument("--retention-days", type=float, default=None, help="default: delta.logRetentionDuration")
    d.add_argument("--allow-shorter-retention", action="store_true", help="accept a retention below the table's own")
    d.add_argument("--catalog-permits-cleanup", action="store_true", help="the table's catalog allows metadata cleanup")
    d.set_defaults(handler=lambda a: run_guarded(lambda: _cleanup(a)))


def _checkpoint(args: argparse.Namespace) -> int:
    store = open_table_storage(args.table_uri, storage_options(args))
    files = list_log_files(store)
    interval = args.interval
    if interval is None:
        from ..deltalog.snapshot import load_snapshot

        interval = load_snapshot(store, args.version, files=files).properties.checkpoint_interval
    decision = decide_checkpoint(files, interval=interval, version=args.version, force=args.force)
    out: dict[str, Any] = {"decision": decision.to_dict(), "checkpoint": None}
    if decision.due:
        out["checkpoint"] = run_local_checkpoint(store, decision.version, files=files).to_dict()
    if args.json:
        emit_json(out)
    elif out["checkpoint"]:
        r = out["checkpoint"]
        print(f"{store.uri}: wrote {r['kind']} checkpoint at {r['version']} ({r['num_actions']} actions, {r['size_in_bytes']} bytes)")
    else:
        print(f"{store.uri}: no checkpoint written: {decision.reason}")
    return 0


def _compact(args: argparse.Namespace) -> int:
    store = open_table_storage(args.table_uri, storage_options(args))
    result = run_log_compaction(store, interval=args.interval, max_window_bytes=args.max_window_bytes)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(f"{store.uri}: wrote {len(result.written)} compaction file(s), skipped {len(result.skipped)}")
        for w in result.written:
            print(f"  [{w['start']}, {w['end']}] {w['file']}")
        for w in result.skipped:
            print(f"  skipped [{w['start']}, {w['end']}]: {w['reason']}")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    store = open_table_storage(args.table_uri, storage_options(args))
    retention = None if args.retention_days is None else int(args.retention_days * DAY_MS)
    result = run_metadata_cleanup(
        store,
        dry_run=not args.delete,
        retention_ms=retention,
        allow_shorter_retention=args.allow_shorter_retention,
        catalog_permits_cleanup=args.catalog_permits_cleanup,
    )
    if args.json:
        emit_json(result.to_dict())
        return 0
    p = result.plan
    if p.skipped:
        print(f"{store.uri}: cleanup skipped: {p.skip_reason}")
        return 0
    verb = "would delete" if result.dry_run else "deleted"
    print(
        f"{store.uri}: cutoff {p.cutoff_timestamp} → commit {p.cutoff_commit}, anchor checkpoint {p.cutoff_checkpoint}; "
        f"{verb} {len(p.deletions)} file(s), {p.bytes} bytes: " + ", ".join(f"{k}={v}" for k, v in p.counts.items())
    )
    return 0
