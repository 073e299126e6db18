"""VACUUM use case: plan on the catalog's view (dry run by default), re-validate, delete, record.

1. The table at the catalog's latest ratified version (published commits plus the verified
   unpublished tail) gives the protocol, the retention and the referenced files
   (``deltalog.vacuum.plan``). Gates: the protocol must be readable and writable here (always:
   ``vacuumProtocolCheck``), a catalog-managed table needs ``catalog_permits_vacuum``, a table
   that declares a coordinator is acted on only through it, and a retention shorter than
   ``delta.deletedFileRetentionDuration`` needs ``allow_shorter_retention``.
2. FULL lists the table root (or reads an inventory); LITE reads the log's tombstones.
3. Executing: the plan is re-validated right before deleting — a fresh catalog view (files that
   commits since the plan name are kept) and the storage (each planned file must still be there
   and old) — then files go in parallel batches with progress. ``VACUUM START``/``END`` commits
   are written where delta-spark writes them (through the coordinator on coordinated tables), and
   ``_last_vacuum_info`` records the horizon for the next LITE run.

A killed run deleted only unreferenced files: run it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ...coordinators.errors import CommitConflictError
from ...deltalog.errors import LogFileExistsError
from ...deltalog.log_segment.segment import CatalogCommit
from ...deltalog.model.data_paths import DataPathResolver
from ...deltalog.model.features import check_write_supported, is_catalog_managed
from ...deltalog.model.paths import commit_name
from ...deltalog.replay.snapshot import Snapshot
from ...deltalog.vacuum.commits import vacuum_end, vacuum_start, writes_vacuum_commits
from ...deltalog.vacuum.execute import delete_files, remove_empty_dirs, still_deletable
from ...deltalog.vacuum.inventory import read_inventory
from ...deltalog.vacuum.last_vacuum import read_last_vacuum_info, write_last_vacuum_info
from ...deltalog.vacuum.listing import TableListing, list_table_files
from ...deltalog.vacuum.paths import DeferredHiddenNames, protected_name_array
from ...deltalog.vacuum.plan import VacuumMode, VacuumPlan, hidden_names_for, plan_vacuum
from ...deltalog.vacuum.referenced import read_file_actions
from ..errors import CoordinatorMismatchError
from ..table.catalog_view import load_ratified_snapshot, ratified_state
from ..table.coordinator_discovery import read_table_coordination
from ..table.maintained import MaintainedTable
from .log_cleanup import refuse_shorter_retention
from .summary import JSONValue, Progress, TaskReport, human_bytes, iso_utc

__all__ = ["VacuumResult", "run_vacuum", "vacuum_report", "HOUR_MS"]

log = logging.getLogger(__name__)
HOUR_MS = 3_600_000
_COMMIT_ATTEMPTS = 5

Lister = Callable[[MaintainedTable, Snapshot], TableListing]


class VacuumEngine(Protocol):
    """Where the listing and the deletions run (the worker's threads when none is given): the Spark
    engine (``maintenance.spark.vacuum_engine``) runs them on a cluster."""

    name: str

    def list(self, table: MaintainedTable, snapshot: Snapshot) -> TableListing: ...

    def delete(self, paths: Sequence[str]) -> int: ...


@dataclass(frozen=True)
class VacuumResult:
    table_uri: str
    dry_run: bool
    plan: VacuumPlan | None = None
    skip_reason: str | None = None
    deleted: int = 0
    dirs_removed: int = 0
    dropped: int = 0  # planned files re-validation kept (referenced since, gone or young again)
    commits: tuple[int, ...] = ()  # VACUUM START / END versions written
    seconds: float = 0.0
    engine: str = "local"

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    def report(self) -> TaskReport:
        return vacuum_report(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table_uri": self.table_uri, "dry_run": self.dry_run, "skipped_reason": self.skip_reason,
                               "deleted": self.deleted, "dirs_removed": self.dirs_removed, "dropped_by_revalidation": self.dropped,
                               "commits": list(self.commits), "seconds": self.seconds, "engine": self.engine}
        if self.plan is not None:
            out["plan"] = self.plan.summary_dict(top=10_000)
            out["cutoff"] = iso_utc(self.plan.cutoff_ms)
        return out


def _gate(table: MaintainedTable, snapshot: Snapshot, catalog_permits_vacuum: bool) -> str | None:
    """A reason to skip, or None; a table whose coordinator is not in use is an error."""
    check_write_supported(snapshot.protocol, operation=f"VACUUM of {table.uri}", path=table.uri)
    if is_catalog_managed(snapshot.protocol) and not catalog_permits_vacuum:
        return "catalog-managed table: VACUUM needs the catalog's explicit permission: pass --allow-catalog-managed (the operator's and tables.yaml's catalog_permits_vacuum)"
    declared = read_table_coordination(snapshot.protocol, snapshot.metadata.configuration, table.uri)
    if declared.kind is not None and table.coordinator is None:
        raise CoordinatorMismatchError(
            f"{table.uri}: the table declares {declared.describe()}; VACUUM acts only on the catalog's view (ratified, unpublished commits "
            "included): open the table with its coordinator (coordinator='auto')"
        )
    return None


def _snapshot_and_listing(
    table: MaintainedTable, workers: int, listing_wanted: bool
) -> tuple[Snapshot, Callable[[Snapshot | None], TableListing | None]]:
    """The catalog's snapshot, loaded while (``listing_wanted``) the table root is listed on a
    second thread — the two are independent until the listing meets a name only the snapshot's
    partition columns can judge (``DeferredHiddenNames``). The returned function gives the
    listing (the snapshot resolves those names), or, with None, stops it and waits for its end."""
    if not listing_wanted:
        return load_ratified_snapshot(table, keys_only=True), lambda _snapshot: None
    hidden = DeferredHiddenNames()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vacuum-listing")
    pending = pool.submit(list_table_files, table.store, hidden, workers=workers, lazy_stats=True)

    def finish(snapshot: Snapshot | None) -> TableListing | None:
        try:
            if snapshot is None:
                hidden.stop()
                with contextlib.suppress(Exception):  # a listing not wanted any more: its own error does not matter
                    pending.result()
                return None
            try:
                real = hidden_names_for(snapshot)
            except BaseException:
                hidden.stop()  # else the listing would wait for it, and the pool's shutdown for the listing
                raise
            hidden.resolve(real)
            return pending.result()
        finally:
            pool.shutdown(wait=True)

    try:
        snapshot = load_ratified_snapshot(table, keys_only=True)
    except BaseException:
        finish(None)
        raise
    return snapshot, finish


def run_vacuum(
    table: MaintainedTable,
    *,
    dry_run: bool = True,
    mode: VacuumMode = "full",
    retention_ms: int | None = None,
    allow_shorter_retention: bool = False,
    catalog_permits_vacuum: bool = False,
    inventory: str | None = None,
    log_commits: bool | None = None,
    now_ms: int | None = None,
    workers: int = 8,
    progress: Progress | None = None,
    lister: Lister | None = None,
    engine: VacuumEngine | None = None,
) -> VacuumResult:
    """Plan the VACUUM of the table as its catalog sees it and, unless ``dry_run``, execute it
    (see the module docstring). ``log_commits``: write ``VACUUM START``/``END`` commits (None:
    where delta-spark does, i.e. not on S3). ``lister`` replaces the worker's listing (the Spark
    engine's, tests); ``engine`` lists (FULL, without an inventory) and deletes elsewhere."""
    started = time.monotonic()
    if mode == "full" and lister is None and engine is not None and not inventory:
        lister = engine.list
    snapshot, listed = _snapshot_and_listing(table, workers, mode == "full" and lister is None and not inventory)
    try:  # any way out before the listing is used stops it (and waits for its thread)
        reason = _gate(table, snapshot, catalog_permits_vacuum)
        if reason is None:
            refuse_shorter_retention(table.uri, "a VACUUM retention of", retention_ms, snapshot.properties.deleted_file_retention_ms,
                                     "delta.deletedFileRetentionDuration", "vacuum", allowed=allow_shorter_retention,
                                     risk=" and may delete files a running writer or reader still needs")
            last = read_last_vacuum_info(table.store)
    except BaseException:
        listed(None)
        raise
    if reason is not None:
        listed(None)
        return VacuumResult(table.uri, dry_run, skip_reason=reason, seconds=round(time.monotonic() - started, 3))
    listing = listed(snapshot)
    if mode == "full" and listing is None:
        listing = (lister(table, snapshot) if lister is not None
                   else read_inventory(inventory or "", table.store, hidden_names_for(snapshot), table.storage_options))
    plan = plan_vacuum(table.store, snapshot, mode=mode, retention_ms=retention_ms, now_ms=now_ms, listing=listing, last_vacuum=last)
    name = engine.name if engine is not None else "local"
    if dry_run:
        return VacuumResult(table.uri, True, plan, seconds=round(time.monotonic() - started, 3), engine=name)
    return _execute(table, plan, snapshot, catalog_permits_vacuum=catalog_permits_vacuum, log_commits=log_commits,
                    retention_check=not allow_shorter_retention, specified_retention_ms=retention_ms, workers=workers,
                    progress=progress, started=started, engine=engine)


def revalidate(table: MaintainedTable, plan: VacuumPlan, catalog_permits_vacuum: bool, workers: int) -> tuple[list[str], Snapshot]:
    """The plan's files that may still go, against a fresh catalog view and the storage."""
    fresh = load_ratified_snapshot(table, keys_only=True)
    reason = _gate(table, fresh, catalog_permits_vacuum)
    if reason is not None:
        raise CoordinatorMismatchError(f"{table.uri}: the table changed since the VACUUM plan: {reason}; nothing was deleted")
    resolver = DataPathResolver.for_store(table.store)
    planned = plan.deletions.column("path")
    # Commits since the plan (and the fresh head's files): what they name stays.
    newer = [c for c in fresh.segment.files.commits if plan.head_version < c.version <= fresh.version]
    pending = [d for d in fresh.segment.deltas if isinstance(d, CatalogCommit) and d.version > plan.head_version]
    names = read_file_actions(table.store, sorted([*newer, *pending], key=lambda s: s.version)).protected(resolver)
    live = protected_name_array(fresh.files.column("path"), resolver)
    stay = pc.is_in(planned, value_set=pc.unique(pa.concat_arrays([names, live])))
    remaining = planned.filter(pc.invert(stay)).to_pylist()
    if plan.mode == "full" or table.store.is_local:
        remaining = still_deletable(table.store, remaining, plan.cutoff_ms, workers=workers)
    return remaining, fresh


def _execute(
    table: MaintainedTable,
    plan: VacuumPlan,
    snapshot: Snapshot,
    *,
    catalog_permits_vacuum: bool,
    log_commits: bool | None,
    retention_check: bool,
    specified_retention_ms: int | None,
    workers: int,
    progress: Progress | None,
    started: float,
    engine: VacuumEngine | None = None,
) -> VacuumResult:
    remaining, fresh = revalidate(table, plan, catalog_permits_vacuum, workers)
    dropped = plan.count - len(remaining)
    if dropped:
        log.info("%s: %d planned file(s) stay after re-validation (referenced by a newer commit, gone, or young again)", table.uri, dropped)
    sizes = dict(zip(plan.deletions.column("path").to_pylist(), plan.deletions.column("size").to_pylist(), strict=True))
    size = sum(int(sizes.get(p) or 0) for p in remaining)
    record = writes_vacuum_commits(table.uri) if log_commits is None else log_commits
    commits: list[int] = []
    if record:
        commits.append(_commit(table, lambda v, ts, ict: [vacuum_start(
            timestamp=ts, ict=ict, read_version=v - 1, retention_check=retention_check,
            default_retention_ms=fresh.properties.deleted_file_retention_ms, specified_retention_ms=specified_retention_ms,
            files=len(remaining), size=size)]))
    total = len(remaining)
    done = [0]

    def batch_gone(n: int) -> None:
        done[0] += n
        if progress is not None:
            progress(f"vacuum: deleted {done[0]:,} of {total:,} files")

    try:
        if engine is not None:
            deleted = engine.delete(remaining)
            batch_gone(len(remaining))
        else:
            deleted = delete_files(table.store, remaining, progress=batch_gone, workers=workers)
        dirs = remove_empty_dirs(table.store, plan.empty_dirs) if plan.mode == "full" else 0
    except BaseException:
        if record:
            try:
                commits.append(_commit(table, lambda v, ts, ict: [vacuum_end(timestamp=ts, ict=ict, read_version=v - 1, status="FAILED",
                                                                              deleted=None, directories=None)]))
            except Exception:  # the deletion's error is the one to report
                log.exception("%s: could not record VACUUM END (FAILED)", table.uri)
        raise
    if plan.horizon is not None:
        write_last_vacuum_info(table.store, plan.horizon)
    if record:
        directories = len({p.rpartition("/")[0] for p in remaining}) + 1
        commits.append(_commit(table, lambda v, ts, ict: [vacuum_end(timestamp=ts, ict=ict, read_version=v - 1, status="COMPLETED",
                                                                      deleted=deleted, directories=directories)]))
    return VacuumResult(table.uri, False, plan, deleted=deleted, dirs_removed=dirs, dropped=dropped, commits=tuple(commits),
                        seconds=round(time.monotonic() - started, 3), engine=engine.name if engine is not None else "local")


def _commit(table: MaintainedTable, make: Callable[[int, int, int | None], Sequence[Mapping[str, Any]]]) -> int:
    """Commit one empty (commitInfo-only) version on top of the catalog's head; another writer's
    commit at that version means trying the next one. Returns the version written."""
    for _ in range(_COMMIT_ATTEMPTS):
        state = ratified_state(table, table.catalog_view())
        version = state.version + 1
        now = int(time.time() * 1000)
        ict = max(now, state.timestamp + 1) if state.in_commit_timestamps_enabled or table.coordinator is not None else None
        actions = make(version, ict or now, ict)
        try:
            if table.coordinator is not None:
                table.commit(version, actions)
            else:
                data = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()
                table.store.put_if_absent(commit_name(version), data)
            return version
        except (CommitConflictError, LogFileExistsError):
            continue
    raise CommitConflictError(f"{table.uri}: {_COMMIT_ATTEMPTS} attempts to record VACUUM lost to concurrent writers", version=version)


def vacuum_report(result: VacuumResult) -> TaskReport:
    """The summary line and the small record of a VACUUM (counts, bytes, top partitions; never the files)."""
    p = result.plan
    details: dict[str, JSONValue] = {"dry_run": result.dry_run, "executed": not result.dry_run and not result.skipped, "engine": result.engine}
    if p is None:
        return TaskReport(result.table_uri, "vacuum", skipped=True, reason=result.skip_reason, duration_s=result.seconds, details=details)
    details.update({k: v for k, v in p.summary_dict().items() if k not in ("files", "bytes")})
    details.update(cutoff=iso_utc(p.cutoff_ms), now=iso_utc(p.now_ms), retention_hours=round(p.retention_ms / HOUR_MS, 6),
                   deleted=result.deleted, dirs_removed=result.dirs_removed, dropped_by_revalidation=result.dropped,
                   commits=list(result.commits), planned_files=p.count, planned_bytes=p.bytes)
    n = p.count if result.dry_run else result.deleted
    verb = "would delete" if result.dry_run else "deleted"
    parts = f" in {len(p.by_partition):,} partition" + ("" if len(p.by_partition) == 1 else "s") if p.by_partition and p.by_partition[0][0] else ""
    what = (f"{verb} {n:,} file{'' if n == 1 else 's'} ({human_bytes(p.bytes)}){parts}; {p.mode.upper()}, retention "
            f"{p.retention_ms / HOUR_MS:g} h, v{p.head_version}" + (" (dry run)" if result.dry_run else ""))
    return TaskReport(result.table_uri, "vacuum", what=what, version=p.head_version, count=n, bytes=p.bytes,
                      duration_s=result.seconds, details=details)
