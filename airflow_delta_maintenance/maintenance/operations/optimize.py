"""OPTIMIZE use case: plan bins from the catalog's view, rewrite them, commit batch by batch.

The table as its catalog sees it (published files plus ratified unpublished commits) is planned
(``deltalog.optimize.plan``); an engine rewrites each bin into one file (``BinTask`` → ``add``: the
worker engine here, a Spark engine on the same seam); the driver commits each batch once, through
the table's coordinator or by put-if-absent ``<v>.json`` on a plain table. A lost race is settled
by Delta's rules: the table is read again at the winner's version; if its protocol or metadata
changed, nothing more is committed; bins whose source files are no longer all live (removed, or
given a new deletion vector, or compacted by another OPTIMIZE) are dropped, their files deleted;
the rest is retried at the next version, a bounded number of times with jitter. Appends never
conflict. A killed run leaves only files no version references.

Catalog-managed tables are maintained only with the catalog's permission (Delta protocol,
"Maintenance Operations on Catalog-managed Tables"), gated as metadata cleanup is.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...coordinators.errors import CommitConflictError
from ...deltalog.datafiles.files import DataFiles
from ...deltalog.datafiles.schema import data_schema
from ...deltalog.datafiles.writer import BinTask
from ...deltalog.errors import DeltaLogError, LogFileExistsError
from ...deltalog.model.features import check_data_rewrite_supported, in_commit_timestamps_enabled, is_catalog_managed, is_coordinated
from ...deltalog.model.paths import commit_name
from ...deltalog.model.schema_validation import ORJSON
from ...deltalog.optimize.actions import commit_info, operation_metrics, remove_action
from ...deltalog.optimize.plan import Bin, OptimizeOptions, OptimizePlan, plan_optimize
from ...deltalog.optimize.tasks import ROW_TRACKING_DOMAIN, bin_tasks, file_key, live_adds, row_id_high_water_mark, row_tracking_columns
from ...deltalog.optimize.worker import BinFailedError, WorkerEngine
from ...deltalog.replay.snapshot import Snapshot
from ..errors import CoordinatorMismatchError, MaintenanceError
from ..table.catalog_view import load_ratified_snapshot
from ..table.maintained import MaintainedTable
from .summary import Progress, TaskReport, human_bytes

__all__ = [
    "OptimizeEngine",
    "OptimizeResult",
    "OptimizeConflictError",
    "run_optimize",
    "optimize_report",
    "small_file_counts",
    "CATALOG_MANAGED_RULE",
    "DEFAULT_COMMIT_BATCH_BYTES",
]

log = logging.getLogger(__name__)

DEFAULT_COMMIT_BATCH_BYTES = 16 << 30  # input bytes per commit: a kill or a conflict loses at most this
COMMIT_ATTEMPTS = 10
CATALOG_MANAGED_RULE = (
    "catalog-managed table: OPTIMIZE needs the catalog's explicit permission (Delta protocol, "
    "'Maintenance Operations on Catalog-managed Tables'; Unity Catalog prohibits it); to accept it pass --allow-catalog-managed (the operator's and tables.yaml's catalog_permits_optimize)"
)


class OptimizeEngine(Protocol):
    """Rewrites bins: one ``add`` (or None when every row was deleted) per task, in order; on a
    failed task raises ``BinFailedError`` naming the files the other tasks wrote."""

    name: str

    def run(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]: ...


class OptimizeConflictError(MaintenanceError):
    """A concurrent commit changed the table's protocol or metadata, or the retries ran out."""


@dataclass
class OptimizeResult:
    plan: OptimizePlan
    dry_run: bool
    engine: str
    skip_reason: str | None = None
    commits: list[int] = field(default_factory=list)
    bins_committed: int = 0
    bins_dropped: int = 0  # invalidated by concurrent commits
    conflicts: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    files_added: int = 0
    bytes_added: int = 0
    files_before: int = 0
    bytes_before: int = 0
    seconds: float = 0.0
    stopped: str | None = None  # why the run stopped before every bin was committed

    @property
    def files_after(self) -> int:
        return self.files_before - self.files_removed + self.files_added

    @property
    def bytes_after(self) -> int:
        return self.bytes_before - self.bytes_removed + self.bytes_added

    def report(self) -> TaskReport:
        return optimize_report(self)


def _gate(table: MaintainedTable, snapshot: Snapshot, catalog_permits_optimize: bool) -> str | None:
    check_data_rewrite_supported(snapshot.protocol, operation=f"OPTIMIZE of {table.uri}", path=table.uri)
    if is_catalog_managed(snapshot.protocol) and not catalog_permits_optimize:
        return CATALOG_MANAGED_RULE
    if table.coordinator is None and is_coordinated(snapshot.protocol, dict(snapshot.metadata.configuration)):
        raise CoordinatorMismatchError(
            f"{table.uri}: the table declares a commit coordinator; OPTIMIZE commits only through it (open the table with coordinator='auto')"
        )
    return None


def run_optimize(
    table: MaintainedTable,
    options: OptimizeOptions | None = None,
    *,
    dry_run: bool = False,
    engine: OptimizeEngine | None = None,
    catalog_permits_optimize: bool = False,
    commit_batch_bytes: int = DEFAULT_COMMIT_BATCH_BYTES,
    max_attempts: int = COMMIT_ATTEMPTS,
    progress: Progress | None = None,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> OptimizeResult:
    """Plan and (unless ``dry_run``) run an OPTIMIZE of ``table`` (see the module docstring)."""
    started = time.monotonic()
    options = options or OptimizeOptions()
    snapshot = load_ratified_snapshot(table)
    adds = live_adds(snapshot.files)
    skip = _gate(table, snapshot, catalog_permits_optimize)
    meta = snapshot.metadata
    physical = data_schema(meta.schema, meta.partition_columns, snapshot.properties.column_mapping_mode).logical_to_physical
    plan = plan_optimize(table.uri, snapshot.version, adds, meta.partition_columns, meta.configuration, options,
                         partition_keys=[physical.get(c, c) for c in meta.partition_columns])
    result = OptimizeResult(plan, dry_run, engine.name if engine else "local", skip_reason=skip,
                            files_before=len(adds), bytes_before=sum(int(a.get("size") or 0) for a in adds))
    if skip is not None:
        log.warning("%s: OPTIMIZE skipped: %s", table.uri, skip)
    if dry_run or skip is not None or not plan.bins:
        result.seconds = time.monotonic() - started
        return result
    data_files = DataFiles(table.store)
    engine = engine or WorkerEngine(data_files)
    committer = _Committer(table, snapshot, plan, result, max_attempts, rng or random.Random(), sleep)
    for batch in _batches(plan.bins, commit_batch_bytes):
        batch = committer.still_valid(batch)
        if not batch:
            continue
        tasks = bin_tasks(batch, snapshot.protocol, snapshot.metadata, codec=_codec(snapshot), column_mapping_mode=snapshot.properties.column_mapping_mode)
        try:
            outputs = engine.run(tasks)
        except BinFailedError as exc:
            _delete_files(table, exc.written)
            if isinstance(exc.__cause__, DeltaLogError):  # a file of the table (path, bytes, DV): its typed, one-line error
                raise exc.__cause__ from None
            raise
        written = [a["path"] for a in outputs if a]
        try:
            data_files.sync([data_files.resolve(p) for p in written])
        except OSError:
            _delete_files(table, written)
            raise
        if progress is not None:
            progress(f"rewrote {len(batch)} bin(s) ({human_bytes(sum(b.bytes_in for b in batch))}); committing")
        try:
            committer.commit(list(zip(batch, outputs, strict=True)))
        except OptimizeConflictError as exc:
            result.stopped = str(exc)
            break
    result.seconds = time.monotonic() - started
    return result


def _codec(snapshot: Snapshot) -> str:
    """delta-spark's data files default to Snappy (``spark.sql.parquet.compression.codec``)."""
    raw = snapshot.metadata.configuration.get("delta.parquet.compression.codec")
    return str(raw).strip().lower() if raw else "snappy"


def _batches(bins: Sequence[Bin], batch_bytes: int) -> list[list[Bin]]:
    out: list[list[Bin]] = [[]]
    size = 0
    for b in bins:
        if out[-1] and size + b.bytes_in > batch_bytes:
            out.append([])
            size = 0
        out[-1].append(b)
        size += b.bytes_in
    return [b for b in out if b]


def _delete_files(table: MaintainedTable, add_paths: Sequence[str]) -> None:
    """Files this run wrote and will never commit (the version they were meant for went to
    another writer): removed now, VACUUM's job otherwise."""
    files = DataFiles(table.store)
    for path in add_paths:
        files.delete_quietly(files.resolve(path))


def _same_table(a: Snapshot, b: Snapshot) -> bool:
    return a.protocol == b.protocol and a.metadata.schema_string == b.metadata.schema_string and \
        a.metadata.partition_columns == b.metadata.partition_columns and dict(a.metadata.configuration) == dict(b.metadata.configuration) and \
        a.metadata.id == b.metadata.id


class _Committer:
    """Commits batches; tracks the version the remaining bins were last checked against."""

    def __init__(self, table: MaintainedTable, snapshot: Snapshot, plan: OptimizePlan, result: OptimizeResult,
                 max_attempts: int, rng: random.Random, sleep: Callable[[float], None]) -> None:
        self.table = table
        self.base = snapshot  # the plan's snapshot: protocol/metadata must stay as they were
        self.plan = plan
        self.result = result
        self.max_attempts = max_attempts
        self.rng = rng
        self.sleep = sleep
        self.checked_version = snapshot.version  # bins not yet committed were validated here
        self.live: set[tuple[str, str | None]] | None = None  # live file keys at checked_version, when read again
        self.latest = snapshot  # the newest snapshot read
        self.hwm = row_id_high_water_mark(snapshot.domain_metadata)
        self.op_start = int(time.time() * 1000)

    def still_valid(self, batch: list[Bin]) -> list[Bin]:
        if self.live is None:
            return batch
        keep = [b for b in batch if all(file_key(f) in self.live for f in b.files)]
        self.result.bins_dropped += len(batch) - len(keep)
        return keep

    def _refresh(self) -> None:
        snap = load_ratified_snapshot(self.table)
        if not _same_table(self.base, snap):
            raise OptimizeConflictError(
                f"{self.table.uri}: a concurrent commit (up to v{snap.version}) changed the table's protocol or metadata; "
                "the remaining bins are not committed", version=snap.version,
            )
        self.latest = snap
        self.live = {file_key(a) for a in live_adds(snap.files.select(["path", "deletionVector"]))}
        self.checked_version = snap.version
        self.hwm = row_id_high_water_mark(snap.domain_metadata)

    def commit(self, pairs: list[tuple[Bin, Mapping[str, Any] | None]]) -> None:
        for attempt in range(self.max_attempts):
            if self.live is not None:
                valid = [(b, a) for b, a in pairs if all(file_key(f) in self.live for f in b.files)]
                dropped = [(b, a) for b, a in pairs if (b, a) not in valid]
                if dropped:
                    self.result.bins_dropped += len(dropped)
                    _delete_files(self.table, [a["path"] for _, a in dropped if a])
                    log.warning("%s: %d bin(s) dropped: a concurrent commit removed or changed their files", self.table.uri, len(dropped))
                pairs = valid
            if not pairs:
                return
            version = self.checked_version + 1
            actions = self._actions(pairs, version)
            try:
                self._write(version, actions)
            except (CommitConflictError, LogFileExistsError) as exc:
                self.result.conflicts += 1
                log.info("%s: v%d went to another writer (%s); reading the table again", self.table.uri, version, exc)
                self.sleep(self.rng.uniform(0.05, 0.25) * (attempt + 1))
                self._refresh()
                continue
            self._committed(version, pairs, actions)
            return
        _delete_files(self.table, [a["path"] for _, a in pairs if a])
        raise OptimizeConflictError(f"{self.table.uri}: {self.max_attempts} commit attempts lost to concurrent writers", version=self.checked_version)

    def _committed(self, version: int, pairs: list[tuple[Bin, Mapping[str, Any] | None]], actions: list[dict[str, Any]]) -> None:
        r = self.result
        r.commits.append(version)
        r.bins_committed += len(pairs)
        adds = [a["add"] for a in actions if "add" in a]
        removes = [a["remove"] for a in actions if "remove" in a]
        r.files_added += len(adds)
        r.bytes_added += sum(int(a["size"]) for a in adds)
        r.files_removed += len(removes)
        r.bytes_removed += sum(int(a.get("size") or 0) for a in removes)
        self.checked_version = version  # our own commit removed only this batch's files
        if self.live is not None:
            self.live -= {file_key(f) for b, _ in pairs for f in b.files}
        for a in actions:
            if "domainMetadata" in a and a["domainMetadata"]["domain"] == ROW_TRACKING_DOMAIN:
                self.hwm = int(json.loads(a["domainMetadata"]["configuration"])["rowIdHighWaterMark"])
        log.info("%s: committed OPTIMIZE of %d bin(s) as v%d", self.table.uri, len(pairs), version)

    def _actions(self, pairs: list[tuple[Bin, Mapping[str, Any] | None]], version: int) -> list[dict[str, Any]]:
        snap = self.latest
        removes = [remove_action(f, self.op_start) for b, _ in pairs for f in b.files]
        adds = [dict(a) for _, a in pairs if a]
        rt = row_tracking_columns(snap.protocol, snap.metadata) is not None or snap.protocol.has_writer_feature("rowTracking")
        domain: list[dict[str, Any]] = []
        if rt:
            hwm = self.hwm
            for add in adds:
                add["baseRowId"] = hwm + 1
                add["defaultRowCommitVersion"] = version
                hwm += json.loads(add["stats"])["numRecords"]
            if adds:
                conf = {"rowIdHighWaterMark": hwm, "domainName": ROW_TRACKING_DOMAIN}
                domain.append({"domainMetadata": {"domain": ROW_TRACKING_DOMAIN, "configuration": json.dumps(conf, separators=(",", ":")), "removed": False}})
        now = int(time.time() * 1000)
        ict = None
        if in_commit_timestamps_enabled(snap.protocol, dict(snap.metadata.configuration)) or self.table.coordinator is not None:
            ict = max(now, snap.timestamp + 1)
        info = commit_info(
            timestamp=ict or now, read_version=version - 1, predicate=self.plan.predicate,
            metrics=operation_metrics(adds, removes), in_commit_timestamp=ict,
            row_tracking_preserved=row_tracking_columns(snap.protocol, snap.metadata) is not None,
        )
        return [{"commitInfo": info}, *({"add": a} for a in adds), *({"remove": r} for r in removes), *domain]

    def _write(self, version: int, actions: list[dict[str, Any]]) -> None:
        if self.table.coordinator is not None:
            self.table.commit(version, actions)
            return
        data = _ndjson(actions)
        self.table.store.put_if_absent(commit_name(version), data)


def _ndjson(actions: list[dict[str, Any]]) -> bytes:
    """The commit's lines: by orjson where it can (one line per source file's ``remove``: tens of
    thousands on the driver's one thread), else by ``json`` (both compact, UTF-8 unescaped)."""
    if ORJSON is not None:
        try:
            return b"".join(ORJSON.dumps(a) + b"\n" for a in actions)
        except TypeError:  # e.g. an integer beyond 64 bits: json writes it
            pass
    return "".join(json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in actions).encode("utf-8")


def small_file_counts(table: MaintainedTable, min_file_size: int | None = None) -> tuple[int, int]:
    """(count, bytes) of the live files below OPTIMIZE's minimum size (``min_file_size``, else
    ``delta.targetFileSize``, else 1 GiB), as the catalog sees the table: the health view's figure."""
    import pyarrow.compute as pc

    from ...deltalog.optimize.plan import file_sizes_for

    snapshot = load_ratified_snapshot(table)
    minimum, _ = file_sizes_for(OptimizeOptions(min_file_size=min_file_size), snapshot.metadata.configuration)
    sizes = snapshot.files.column("size")
    small = pc.filter(sizes, pc.less(sizes, minimum))
    return len(small), int(pc.sum(small).as_py() or 0)


def optimize_report(result: OptimizeResult) -> TaskReport:
    """One line and a small record: files and bytes before and after, bins, commits, conflicts."""
    p = result.plan
    details: dict[str, Any] = {
        "dry_run": result.dry_run,
        "engine": result.engine,
        "plan": p.summary(),
        "files_before": result.files_before,
        "bytes_before": result.bytes_before,
        "files_after": result.files_after if not result.dry_run else result.files_before - p.files_in + len(p.bins),
        "bytes_after": result.bytes_after if not result.dry_run else result.bytes_before - p.bytes_in + p.expected_bytes_out,
        "bins": len(p.bins),
        "bins_committed": result.bins_committed,
        "bins_dropped": result.bins_dropped,
        "commits": len(result.commits),
        "first_commit": result.commits[0] if result.commits else None,
        "last_commit": result.commits[-1] if result.commits else None,
        "conflicts": result.conflicts,
        "files_removed": result.files_removed,
        "files_added": result.files_added,
        "bytes_removed": result.bytes_removed,
        "bytes_added": result.bytes_added,
        "stopped": result.stopped,
    }
    if result.skip_reason is not None:
        return TaskReport(p.table_uri, "optimize", skipped=True, reason=result.skip_reason, version=p.version,
                          duration_s=result.seconds, details=details)
    if not p.bins:
        why = f"no bin to compact among {p.considered_files:,} file(s) (minimum size {human_bytes(p.min_file_size)})"
        return TaskReport(p.table_uri, "optimize", skipped=True, reason=why, version=p.version, duration_s=result.seconds, details=details)
    if result.dry_run:
        what = (f"would compact {p.files_in:,} file(s) ({human_bytes(p.bytes_in)}) in {len(p.bins):,} bin(s) into "
                f"{len(p.bins):,} file(s) (~{human_bytes(p.expected_bytes_out)}) at v{p.version} (dry run)")
        return TaskReport(p.table_uri, "optimize", what=what, version=p.version, count=p.files_in, bytes=p.bytes_in,
                          duration_s=result.seconds, details=details)
    commits = result.commits
    where = "no commit" if not commits else (f"v{commits[0]}" if len(commits) == 1 else f"v{commits[0]}-v{commits[-1]} ({len(commits)} commits)")
    what = (f"compacted {result.files_removed:,} file(s) ({human_bytes(result.bytes_removed)}) into {result.files_added:,} "
            f"({human_bytes(result.bytes_added)}) in {result.bins_committed:,} bin(s), {where}; files {result.files_before:,} → "
            f"{result.files_after:,}")
    if result.conflicts or result.bins_dropped:
        what += f"; {result.conflicts} conflict(s), {result.bins_dropped} bin(s) dropped"
    if result.stopped:
        what += f"; stopped: {result.stopped}"
    return TaskReport(p.table_uri, "optimize", what=what, version=commits[-1] if commits else p.version,
                      from_version=commits[0] if commits else None, to_version=commits[-1] if commits else None,
                      count=result.files_removed, bytes=result.bytes_removed, duration_s=result.seconds, details=details)
