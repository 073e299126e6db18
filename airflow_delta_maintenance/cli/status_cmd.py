"""``delta-maintenance status TABLE_URI [--coordinator SPEC] [--json]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import EXIT_PROBLEMS, add_coordinator_option, add_storage_options, emit_json, open_cli_table, run_guarded

if TYPE_CHECKING:
    from ..maintenance.status import TableStatus

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="a table's maintenance health: versions, checkpoint, log size, cleanup candidates")
    p.add_argument("table_uri", metavar="TABLE_URI")
    add_coordinator_option(p)
    p.add_argument("--strict", action="store_true", help=f"exit {EXIT_PROBLEMS} when the coordinator is inconsistent with the log")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_storage_options(p)
    p.set_defaults(handler=lambda a: run_guarded(lambda: _run(a)))


def render(s: TableStatus) -> str:
    ratified = "-" if s.latest_ratified_version is None else str(s.latest_ratified_version)
    pending = f"{len(s.pending_versions)} ({s.pending_versions[0]}..{s.pending_versions[-1]})" if s.pending_versions else "0"
    cleanup = f"{s.cleanup_candidates} file(s), {s.cleanup_bytes} bytes" if not s.cleanup_skipped_reason else f"none ({s.cleanup_skipped_reason})"
    return "\n".join(
        [
            f"table:                     {s.table_uri}",
            f"latest ratified version:   {ratified}",
            f"latest published version:  {s.latest_published_version}",
            f"unpublished (pending):     {pending}",
            f"latest checkpoint:         {s.checkpoint_version if s.checkpoint_version >= 0 else 'none'}",
            f"commits since checkpoint:  {s.commits_since_checkpoint}",
            f"compaction files:          {', '.join(f'[{a}, {b}]' for a, b in s.compactions) or 'none'}",
            f"_delta_log:                {s.log_files} files, {s.log_bytes} bytes",
            f"cleanup candidates:        {cleanup}",
            *(f"warning: {p}" for p in s.problems),
        ]
    )


def _run(args: argparse.Namespace) -> int:
    from ..maintenance.status import table_status

    with open_cli_table(args) as table:
        status = table_status(table)
    if args.json:
        emit_json(status.to_dict())
    else:
        print(render(status))
    return EXIT_PROBLEMS if args.strict and status.problems else 0
