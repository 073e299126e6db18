"""``delta-maintenance status TABLE_URI [--coordinator SPEC] [--json]``, and the fleet view
``delta-maintenance status --config tables.yaml [--report-dir DIR] [--json]``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    EXIT_PROBLEMS,
    add_coordinator_option,
    add_storage_options,
    emit_json,
    open_cli_table,
    run_guarded,
    storage_options,
)

if TYPE_CHECKING:
    from ..fleet.status import TableHealth
    from ..maintenance.config.tables import TableConfig
    from ..maintenance.operations.status import TableStatus
    from ..maintenance.table.maintained import MaintainedTable

# Use cases are imported inside the handlers: `delta-maintenance X` loads only what X needs.


def register(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="a table's maintenance health (versions, checkpoint, log size, cleanup candidates), or every table of a "
        "configuration with --config, worst first",
    )
    p.add_argument("table_uri", metavar="TABLE_URI", nargs="?")
    add_coordinator_option(p, read_only=True)
    p.add_argument("--config", metavar="FILE", help="every table of this YAML configuration, worst first (instead of TABLE_URI)")
    p.add_argument(
        "--report-dir",
        metavar="DIR",
        default=None,
        help="the fleet report directory, for each task's last success (default: $DELTA_MAINTENANCE_REPORT_DIR, else "
        "$AIRFLOW_HOME/delta-maintenance-report when it exists; without one the last successes are unknown)",
    )
    p.add_argument("--parallel", type=int, default=4, metavar="N", help="with --config: tables measured at once (default 4)")
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_PROBLEMS} when the coordinator is inconsistent with the log (with --config: or a table lags or cannot be read)",
    )
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
            f"latest checksum (.crc):    {s.checksum_version if s.checksum_version >= 0 else 'none'}",
            f"compaction files:          {', '.join(f'[{a}, {b}]' for a, b in s.compactions) or 'none'}",
            f"_delta_log:                {s.log_files} files, {s.log_bytes} bytes",
            f"cleanup candidates:        {cleanup}",
            *(f"warning: {p}" for p in s.problems),
        ]
    )


def _run(args: argparse.Namespace) -> int:
    from ..maintenance.operations.status import table_status

    if args.config:
        if args.table_uri or args.coordinator or args.published_only:
            raise ValueError("give TABLE_URI (with --coordinator or --published-only) or --config FILE, not both")
        return _run_fleet(args)
    if not args.table_uri:
        raise ValueError("status needs TABLE_URI or --config FILE")

    with open_cli_table(args) as table:
        status = table_status(table)
        note = table.published_only_note
    if args.json:
        emit_json({**status.to_dict(), "published_only": note is not None})
    else:
        print(render(status) + (f"\nnote:                      {note}" if note else ""))
    return EXIT_PROBLEMS if args.strict and status.problems else 0


def _fleet_opener(args: argparse.Namespace) -> Any:
    from ..maintenance.table.maintained import open_table

    options = storage_options(args)

    def opener(table: TableConfig) -> MaintainedTable:
        if table.coordinator is None and table.coordinator_conn_id:
            raise ValueError(
                f"coordinator_conn_id {table.coordinator_conn_id!r} is an Airflow connection, which this command cannot read; "
                "give the table a coordinator spec (or coordinator: auto), or see the fleet report"
            )
        return open_table(table.uri, options, coordinator=table.coordinator)

    return opener


def render_fleet(healths: list[TableHealth]) -> str:
    """One line per table, worst first, then each table's details."""
    rows = [("TABLE", "SCORE", "PENDING", "SINCE_CKPT", "LOG_FILES", "LOG_BYTES", "COMPACTED", "CLEANUP")]
    for h in healths:
        s = h.status
        if s is None:
            rows.append((h.name, f"{h.lag_score:.2f}", "?", "?", "?", "?", "?", "?"))
            continue
        covered, total = h.compaction_coverage
        cleanup = f"{s.cleanup_candidates}/{s.cleanup_bytes}B" if not s.cleanup_skipped_reason else "-"
        rows.append(
            (h.name, f"{h.lag_score:.2f}", str(len(s.pending_versions)), str(s.commits_since_checkpoint), str(s.log_files),
             str(s.log_bytes), f"{covered}/{total}", cleanup)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]
    for h in healths:
        lines.append("")
        flag = "LAGGING" if h.breaches else ("UNREADABLE" if h.error else "ok")
        lines.append(f"{h.name} ({h.uri}): {flag}" + (f" — above threshold: {', '.join(h.breaches)}" if h.breaches else ""))
        if h.error:
            lines.append(f"  error: {h.error}")
        if h.status is not None and h.status.cleanup_skipped_reason:
            lines.append(f"  cleanup: none ({h.status.cleanup_skipped_reason})")
        runs = ", ".join(f"{task} {when or 'unknown'}" for task, when in h.last_success.items())
        lines.append(f"  last success: {runs}")
        lines.extend(f"  problem: {p}" for p in (h.status.problems if h.status else []))
    return "\n".join(lines)


def _airflow_home_report_dir() -> str | None:
    """Airflow's default report directory, when this machine has one (the CLI reads no Airflow config)."""
    home = os.environ.get("AIRFLOW_HOME")
    candidate = Path(os.path.expanduser(home)) / "delta-maintenance-report" if home else None
    return str(candidate) if candidate is not None and candidate.is_dir() else None


def _run_fleet(args: argparse.Namespace) -> int:
    from ..fleet.config import fleet_entries
    from ..fleet.history import read_last_success
    from ..fleet.status import fleet_status

    tables, invalid = fleet_entries(args.config)
    report_dir = args.report_dir or os.environ.get("DELTA_MAINTENANCE_REPORT_DIR") or _airflow_home_report_dir()
    if args.parallel < 1:
        raise ValueError(f"--parallel must be at least 1, got {args.parallel}")
    healths = fleet_status(
        tables, _fleet_opener(args), last_success=read_last_success(Path(report_dir) if report_dir else None), parallelism=args.parallel
    )
    if args.json:
        emit_json(
            {
                "tables": [h.to_dict() for h in healths],
                "invalid": [{"name": e.name, "error": str(e.error)} for e in invalid],
                "last_success_source": report_dir,
            }
        )
    else:
        print(render_fleet(healths))
        for e in invalid:
            print("\n" + "\n".join(f"invalid configuration: {line}" for line in str(e.error).splitlines()))
    bad = invalid or any(h.breaches or h.error or (h.status and h.status.problems) for h in healths)
    return EXIT_PROBLEMS if args.strict and bad else 0
