"""``delta-maintenance checksums TABLE_URI`` (write the missing ``<v>.crc`` of published versions)
and ``delta-maintenance verify TABLE_URI`` (compare the present ones with the replay)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_PROBLEMS, add_coordinator_option, add_storage_options, cli_progress, emit_json, open_cli_table, run_guarded

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def _table(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("table_uri", metavar="TABLE_URI")
    p.add_argument("--from", dest="from_version", type=int, default=None, metavar="V", help=f"first version to {what}")
    p.add_argument("--to", dest="to_version", type=int, default=None, metavar="V", help=f"last version to {what} (default: latest published)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_coordinator_option(p)
    add_storage_options(p)


def register(sub: Any) -> None:
    w = sub.add_parser("checksums", help="write the missing version checksums (<v>.crc) of published versions, each from the previous one")
    _table(w, "write (default: the one after the newest checksum, else the newest checkpoint's)")
    w.set_defaults(handler=lambda a: run_guarded(lambda: _write(a)))
    v = sub.add_parser("verify", help="compare the version checksums (<v>.crc) in the log with the table's replay")
    _table(v, "verify (default: the oldest checksum the log can still replay)")
    v.set_defaults(handler=lambda a: run_guarded(lambda: _verify(a)))


def _write(args: argparse.Namespace) -> int:
    from ..maintenance.operations.checksums import plan_checksums, run_checksums

    with open_cli_table(args) as table:
        plan = plan_checksums(table, from_version=args.from_version, to_version=args.to_version)
        outcome = run_checksums(table, plan, progress=cli_progress())
    report = outcome.report()
    if args.json:
        emit_json(report.to_dict())
    else:
        print(report.summary())
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ..maintenance.operations.checksums import verify_checksums

    with open_cli_table(args) as table:
        run = verify_checksums(table, from_version=args.from_version, to_version=args.to_version, progress=cli_progress())
    problems = [str(p) for p in run.problems]
    if args.json:
        from ..maintenance.operations.summary import TaskReport

        report = TaskReport(table.uri, "verify", what=f"{len(run.verified)} checksum(s) agree with the log", version=run.end,
                            from_version=run.start, to_version=run.end, count=len(run.verified), duration_s=run.seconds,
                            details={"replays": run.replays, "problems": problems})  # the keys of every other record
        emit_json(report.to_dict())
    else:
        span = f"v{run.verified[0]}..v{run.verified[-1]}" if run.verified else "none"
        print(f"verify: {len(run.verified)} checksum(s) agree with the log ({span}), {len(problems)} do not")
        for p in problems:
            print(f"delta-maintenance: checksum mismatch: {p}", file=sys.stderr)
    return EXIT_PROBLEMS if problems else 0
