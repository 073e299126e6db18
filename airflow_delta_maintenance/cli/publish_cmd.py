"""``delta-maintenance publish`` and ``delta-maintenance versions``."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_storage_options, emit_json, run_guarded, storage_options

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--coordinator", required=True, metavar="SPEC", help="e.g. local:///path/coordinator.db, dynamodb://..., unity-catalog://...")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)


def register(sub: Any) -> None:
    p = sub.add_parser("publish", help="publish ratified commits to _delta_log/<v>.json in order, then report")
    _common(p)
    p.add_argument("--up-to", type=int, default=None, metavar="V", help="last version to publish (default: latest ratified)")
    p.add_argument("--allow-unsafe-writes", action="store_true", help="accept storage without atomic create-if-absent")
    p.set_defaults(handler=lambda args: run_guarded(lambda: _publish(args)))

    v = sub.add_parser("versions", help="latest ratified and published versions, and the pending ones")
    _common(v)
    v.set_defaults(handler=lambda args: run_guarded(lambda: _versions(args)))


def _publish(args: argparse.Namespace) -> int:
    from ..deltalog.storage import open_table_storage
    from ..maintenance.coordinator import open_coordinator
    from ..maintenance.publish import publish_ratified_commits

    opts = storage_options(args)
    store = open_table_storage(args.table_uri, opts, allow_unsafe_writes=args.allow_unsafe_writes)
    client = open_coordinator(args.coordinator, opts, allow_unsafe_writes=args.allow_unsafe_writes)
    try:
        result = publish_ratified_commits(store, client, up_to=args.up_to)
    finally:
        client.close()
    if args.json:
        emit_json(result.to_dict())
    else:
        print(
            f"{result.table_uri}: published {len(result.published)} commit(s) {_span(result.published)}, "
            f"{len(result.already_published)} already published; latest ratified {result.latest_ratified_version}, "
            f"latest published {result.latest_published_version} ({result.seconds:.3f}s)"
        )
    return 0


def _versions(args: argparse.Namespace) -> int:
    from ..deltalog.listing import list_log_files
    from ..deltalog.storage import open_table_storage
    from ..maintenance.coordinator import open_coordinator

    opts = storage_options(args)
    store = open_table_storage(args.table_uri, opts)
    client = open_coordinator(args.coordinator, opts)
    try:
        resp = client.get_commits(store.uri, 0, None)
    finally:
        client.close()
    published = list_log_files(store).latest_commit_version
    latest = max(resp.latest_table_version, published)
    pending = [c.version for c in resp.commits if c.version > published]
    out = {
        "table_uri": store.uri,
        "latest_ratified_version": latest,
        "latest_published_version": published,
        "pending": pending,
    }
    if args.json:
        emit_json(out)
    else:
        print(f"{store.uri}: latest ratified {latest}, latest published {published}, pending {_span(pending) or 'none'}")
    return 0


def _span(versions: list[int]) -> str:
    if not versions:
        return ""
    return f"[{versions[0]}..{versions[-1]}]" if len(versions) > 1 else f"[{versions[0]}]"
