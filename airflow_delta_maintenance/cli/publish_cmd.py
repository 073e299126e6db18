"""``delta-maintenance publish`` and ``delta-maintenance versions``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_PROBLEMS, add_coordinator_option, add_storage_options, emit_json, open_cli_table, run_guarded

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def _common(p: argparse.ArgumentParser, *, read_only: bool = False) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    add_coordinator_option(p, read_only=read_only)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)


def register(sub: Any) -> None:
    p = sub.add_parser("publish", help="publish ratified commits to _delta_log/<v>.json in order, then report")
    _common(p)
    p.add_argument("--up-to", type=int, default=None, metavar="V", help="last version to publish (default: latest ratified)")
    p.add_argument("--allow-unsafe-writes", action="store_true", help="accept storage without atomic create-if-absent")
    p.set_defaults(handler=lambda args: run_guarded(lambda: _publish(args)))

    v = sub.add_parser("versions", help="latest ratified and published versions, the pending ones, and any inconsistency")
    _common(v, read_only=True)
    v.add_argument("--strict", action="store_true", help=f"exit {EXIT_PROBLEMS} when the coordinator is inconsistent")
    v.set_defaults(handler=lambda args: run_guarded(lambda: _versions(args)))


def _publish(args: argparse.Namespace) -> int:
    from ..maintenance.operations.publish import publish_ratified_commits

    with open_cli_table(args, allow_unsafe_writes=args.allow_unsafe_writes) as table:
        result = publish_ratified_commits(table, up_to=args.up_to)
    if args.json:
        emit_json(result.report().to_dict())  # the XCom record
    else:
        print(result.report().summary())
    return 0


def _versions(args: argparse.Namespace) -> int:
    from ..maintenance.operations.status import catalog_versions

    with open_cli_table(args) as table:
        report = catalog_versions(table)
        note = table.published_only_note
    if args.json:
        emit_json({**report.to_dict(), "published_only": note is not None})
    else:
        print(
            f"{report.table_uri}: latest ratified {report.latest_ratified_version}, latest published "
            f"{report.latest_published_version}, pending {_span(report.pending) or 'none'}"
        )
        if note:
            print(f"note: {note}")
        for problem in report.problems:
            print(f"warning: {problem}", file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and report.problems else 0


def _span(versions: list[int]) -> str:
    if not versions:
        return ""
    return f"[{versions[0]}..{versions[-1]}]" if len(versions) > 1 else f"[{versions[0]}]"
