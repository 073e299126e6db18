"""Metadata cleanup use case: dry run by default, retention never shorter than the table's by accident."""

from __future__ import annotations

import dataclasses

from ...deltalog.cleanup.plan import CleanupPlan, CleanupResult, check_cleanup_clock, execute_cleanup, plan_log_cleanup
from ...deltalog.log_segment.listing import LogSegmentFiles, list_log_files
from ...deltalog.model.table_properties import DAY_MS, human_duration
from ...deltalog.storage import LogStore
from ...deltalog.vacuum.last_vacuum import read_last_vacuum_info
from ..errors import MaintenanceError
from ..table.catalog_view import ratified_state, validate_ratified_tail
from ..table.maintained import MaintainedTable
from .summary import JSONValue, Progress, TaskReport, human_bytes, iso_utc

__all__ = ["RetentionTooShortError", "refuse_shorter_retention", "run_metadata_cleanup", "cleanup_report", "lite_vacuum_note"]

_PLAN_ATTEMPTS = 3


class RetentionTooShortError(MaintenanceError):
    """A retention shorter than the table's (``delta.logRetentionDuration``, ``delta.deletedFileRetentionDuration``)
    needs an explicit override."""


def refuse_shorter_retention(
    uri: str, what: str, retention_ms: int | None, table_retention_ms: int, table_property: str, section: str, *, allowed: bool, risk: str = ""
) -> None:
    """The one rule of metadata cleanup and VACUUM: a retention shorter than the table's
    ``table_property`` stops the run unless the user allowed it (flag, operator, ``tables.yaml``'s
    ``section``), with the three ways to say so."""
    if retention_ms is None or retention_ms >= table_retention_ms or allowed:
        return
    raise RetentionTooShortError(
        f"{uri}: {what} {human_duration(retention_ms)} is shorter than the table's {table_property} ({human_duration(table_retention_ms)})"
        f"{risk}; to accept it pass --allow-shorter-retention (the operator's allow_shorter_retention=True, tables.yaml's "
        f"{section}.allow_shorter_retention: true)"
    )


def run_metadata_cleanup(
    table: MaintainedTable,
    *,
    dry_run: bool = True,
    retention_ms: int | None = None,
    allow_shorter_retention: bool = False,
    catalog_permits_cleanup: bool = False,
    now_ms: int | None = None,
    allow_future_now: bool = False,
    progress: Progress | None = None,
) -> CleanupResult:
    """Plan the cleanup of the table as its catalog sees it and, unless ``dry_run``, execute it.

    Gates and retention come from the latest *ratified* state (a pending commit that disables
    cleanup, lengthens retention or protects checkpoints counts), whose every commit is first read
    and validated in full (a corrupt one stops the run: nothing is deleted); only durably published versions
    at or below the catalog's head are considered. When the anchor checkpoint is UUID-named only,
    a classic-named V2 checkpoint is written at the same version first (as delta-spark does), so
    old clients can still read the protocol. A ``now_ms`` later than the real clock needs
    ``allow_future_now``, like a shorter retention.
    """
    check_cleanup_clock(now_ms, allow_future_now=allow_future_now)
    store = table.store
    view = table.catalog_view()
    state = ratified_state(table, view, now_ms=now_ms)
    validate_ratified_tail(table, state)  # gates from a head nobody can read would delete on its word
    refuse_shorter_retention(store.uri, "retention", retention_ms, state.properties.log_retention_ms, "delta.logRetentionDuration", "cleanup",
                             allowed=allow_shorter_retention)

    def make_plan(listing: LogSegmentFiles) -> CleanupPlan:
        for attempt in range(_PLAN_ATTEMPTS):
            try:
                return _with_notes(store, plan_log_cleanup(
                    store,
                    state,
                    now_ms=state.now_ms,
                    retention_ms=retention_ms,
                    catalog_permits_cleanup=catalog_permits_cleanup,
                    latest_published_version=view.released_version,
                    files=listing,
                ))
            except FileNotFoundError:
                # A listed file vanished: another cleanup ran meanwhile. Plan again from a fresh listing.
                if attempt == _PLAN_ATTEMPTS - 1:
                    raise
                listing = view.recap(list_log_files(store))
        raise AssertionError("unreachable")

    plan = make_plan(view.files)
    if dry_run or plan.skipped:
        return execute_cleanup(store, plan, dry_run=dry_run)
    if plan.needs_compat_checkpoint and plan.cutoff_checkpoint is not None:
        # Imported here: only this rare case replays files and writes (numpy, Arrow compute).
        from ...deltalog.checkpoint.writer import write_checkpoint
        from ...deltalog.replay.snapshot import load_snapshot

        anchor = load_snapshot(store, plan.cutoff_checkpoint, files=view.files, now_ms=state.now_ms)
        write_checkpoint(store, anchor, files=view.files, classic_name=True)
    # Re-validate against a fresh listing (same cap) right before deleting: a writer or cleaner may
    # have run. Commits already listed keep their stat (published commits are never rewritten).
    fresh = view.recap(list_log_files(store, since=view.files))
    return execute_cleanup(store, plan, dry_run=False, fresh_plan=make_plan(fresh), progress=progress)


def lite_vacuum_note(store: LogStore, plan: CleanupPlan) -> str | None:
    """What the plan means for VACUUM LITE on a vacuumed table (``_last_vacuum_info`` present, as
    delta-spark and we write it): LITE reads the removes of every commit after the recorded
    horizon (none recorded: from commit 0), so deleting one of those commits leaves files only a
    FULL VACUUM finds. Said in the plan (the log's retention decides what cleanup deletes, not a
    possible later LITE run); None when no such commit goes or the table was never vacuumed."""
    versions = [int(d.path[:20]) for d in plan.deletions if d.kind == "commit" and d.path[:20].isdigit()]
    if not versions:
        return None
    last = read_last_vacuum_info(store)
    if not last.present:
        return None
    horizon = last.horizon if last.horizon is not None else -1
    needed = [v for v in versions if v > horizon]
    if not needed:
        return None
    since = f"the last VACUUM's horizon v{horizon}" if last.horizon is not None else "commit 0 (_last_vacuum_info records no horizon)"
    return (f"VACUUM LITE needs every commit after {since}; this cleanup deletes commits {min(needed)}..{max(needed)}: "
            "the next VACUUM must be FULL (LITE will refuse)")


def _with_notes(store: LogStore, plan: CleanupPlan) -> CleanupPlan:
    note = None if plan.skipped else lite_vacuum_note(store, plan)
    return dataclasses.replace(plan, notes=(*plan.notes, note)) if note else plan


def cleanup_report(result: CleanupResult) -> TaskReport:
    """The summary and the small record of a cleanup: counts and bytes per kind, never the files."""
    p = result.plan
    details: dict[str, JSONValue] = {
        "dry_run": result.dry_run,
        "executed": not result.dry_run and not p.skipped,
        "deleted": result.deleted,
        "counts": dict(p.counts),
        "cutoff": iso_utc(p.cutoff_timestamp),
        "now": iso_utc(p.now_ms),
        "retention_days": round(p.retention_ms / DAY_MS, 6),
        "cutoff_commit_version": p.cutoff_commit,
        "needs_compat_checkpoint": p.needs_compat_checkpoint,
        "unreadable_checkpoints": len(p.unreadable_checkpoints),
        "leftovers": len(p.leftovers),
        "note": " ".join(p.notes) or None,  # a string: XCom records hold no lists
    }
    if p.skipped:
        return TaskReport(p.table_uri, "cleanup", skipped=True, reason=p.skip_reason, version=p.cutoff_checkpoint,
                          duration_s=result.seconds, details=details)
    n = len(p.deletions) if result.dry_run else result.deleted
    verb = "would delete" if result.dry_run else "deleted"
    files = f"{n:,} file" + ("" if n == 1 else "s")
    what = f"{verb} {files} ({human_bytes(p.bytes)}) below v{p.cutoff_checkpoint}" + (" (dry run)" if result.dry_run else "")
    return TaskReport(p.table_uri, "cleanup", what=what, version=p.cutoff_checkpoint, count=n, bytes=p.bytes,
                      duration_s=result.seconds, details=details)
