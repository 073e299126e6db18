"""Metadata cleanup: the protocol's algorithm (PROTOCOL "Metadata Cleanup"), as a plan, then an execution.

1. ``cutoff`` = UTC midnight of ``now - delta.logRetentionDuration``.
2. ``cutOffCommit`` = newest commit with timestamp ≤ cutoff: in-commit timestamps for ICT-era
   versions (monotonic, found by binary search), monotonically adjusted file mtimes before them.
3. ``cutOffCheckpoint`` = newest complete checkpoint ≤ ``cutOffCommit`` (and ≤ the
   ``_last_checkpoint`` version when that hint is readable) that opens: every part and sidecar is
   read and checked (``checkpoint_check``); an unreadable one is passed over for an older one,
   and if none opens cleanup stops with a typed error. None at all → delete nothing.
4. Delete commits, checkpoints and ``.crc`` files below it, compactions starting at or below it,
   published staged commits at or below it, then sidecars no remaining checkpoint references and
   whose storage mtime is over a day before the real clock (never the caller's ``now``: a V2
   checkpoint being written has sidecars that nothing references yet). Commits go before
   checkpoints (checkpointProtection rule d). Last, on a local file system, the Hadoop checksum
   shadows (``.<name>.crc``) of those files and orphaned ones of files already gone (``shadows``).

Inputs are not trusted: in-commit timestamps must strictly increase from their enablement version
on (else ``NonMonotonicTimestampError``), the table's features must be supported (the shared write
gate), and a symbolic link anywhere in ``_delta_log`` is refused by the store's listing.

Gates that skip with a reason: ``delta.enableExpiredLogCleanup=false``; catalog-managed tables
unless the caller says the catalog permits it; ``checkpointProtection`` with a protected version.

Leftovers of killed runs of our own writers (temp files, Spark staging directories, tagged sidecars
no checkpoint references) are collected whatever the gates say, by ``abandoned``'s rule: owner
proven dead, or a day old by storage modification times and the real clock — never ``now_ms``.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .._runtime.memory import uses_log_operation_memory
from ..checkpoint.check import newest_readable_checkpoint, verify_checkpoint
from ..errors import CorruptLogError, DeltaLogError, InvalidOptionError, NonMonotonicTimestampError
from ..log_segment.last_checkpoint import LastCheckpointHint, parse_last_checkpoint
from ..log_segment.listing import CheckpointGroup, LogSegmentFiles, list_log_files
from ..model.features import check_write_supported, is_catalog_managed
from ..model.paths import LAST_CHECKPOINT, LEGACY_STAGED_DIR, SIDECAR_DIR, STAGED_DIR, LogFileType, ParsedLogPath, parse_log_path
from ..model.table_properties import DAY_MS, human_duration
from ..replay.table_state import TableState, referenced_sidecar_names
from ..replay.version_facts import in_commit_timestamp
from ..storage import FileStat, LogStore
from .abandoned import Leftover, abandoned_sidecars, find_abandoned, remove_leftovers
from .shadows import SHADOW_KIND, shadows_to_delete

if TYPE_CHECKING:
    from ..replay.snapshot import Snapshot

__all__ = [
    "Deletion",
    "PlanChangedError",
    "CleanupPlan",
    "CleanupResult",
    "plan_log_cleanup",
    "execute_cleanup",
    "utc_midnight",
    "adjusted_commit_timestamps",
    "retention_ms_from_days",
    "check_cleanup_clock",
]

MAX_RETENTION_DAYS = 365_000  # a thousand years: anything longer means "keep everything" anyway
# A --now this far past the wall clock is a clock skew, not a request to look into the future.
CLOCK_SKEW_MS = 60_000


def retention_ms_from_days(days: float | str, *, option: str = "--retention-days") -> int:
    """A retention in days as milliseconds; finite and not negative, else ``InvalidOptionError``."""
    try:
        value = float(days)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{option} must be a number of days, got {days!r}", option=option) from None
    if not math.isfinite(value) or not 0 <= value <= MAX_RETENTION_DAYS:
        raise InvalidOptionError(f"{option} must be a number of days from 0 to {MAX_RETENTION_DAYS}, got {days!r}", option=option)
    return int(value * DAY_MS)


def check_cleanup_clock(now_ms: int | None, *, allow_future_now: bool = False, option: str = "--now") -> None:
    """A planning clock later than the real one would move the cutoff forward: it needs an override."""
    if now_ms is None or allow_future_now:
        return
    real = int(time.time() * 1000)
    if now_ms > real + CLOCK_SKEW_MS:
        raise InvalidOptionError(
            f"{option} is {human_duration(now_ms - real)} later than the real clock; to plan with it pass --allow-future-now "
            "(the Python argument allow_future_now=True)",
            option=option,
        )


def utc_midnight(ms: int) -> int:
    return ms - ms % DAY_MS


@dataclass(frozen=True, slots=True)
class Deletion:
    path: str  # relative to _delta_log
    kind: str  # LogFileType value: commit, checkpoint_classic, crc, compaction, staged_commit, sidecar, ...
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "size": self.size}  # dataclasses.asdict is 30x slower


@dataclass(frozen=True)
class CleanupPlan:
    table_uri: str
    now_ms: int
    retention_ms: int
    cutoff_timestamp: int
    cutoff_commit: int | None = None
    cutoff_checkpoint: int | None = None
    skip_reason: str | None = None
    deletions: tuple[Deletion, ...] = ()  # in execution order
    bytes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    needs_compat_checkpoint: bool = False
    unreadable_checkpoints: tuple[str, ...] = ()  # passed over as anchors: "<file>: <reason>"
    leftovers: tuple[Deletion, ...] = ()  # our killed runs' temp files / staging dirs / sidecars
    notes: tuple[str, ...] = ()  # what this cleanup means for other operations (VACUUM LITE)

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    @property
    def paths(self) -> list[str]:
        return [d.path for d in self.deletions]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table_uri": self.table_uri,
            "now_ms": self.now_ms,
            "retention_ms": self.retention_ms,
            "cutoff_timestamp": self.cutoff_timestamp,
            "cutoff_commit_version": self.cutoff_commit,
            "cutoff_checkpoint_version": self.cutoff_checkpoint,
            "skipped_reason": self.skip_reason,
            "delete": [d.to_dict() for d in self.deletions],
            "delete_bytes": self.bytes,
            "counts": dict(self.counts),
            "needs_compat_checkpoint": self.needs_compat_checkpoint,
            "unreadable_checkpoints": list(self.unreadable_checkpoints),
            "leftovers": [d.to_dict() for d in self.leftovers],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class CleanupResult:
    plan: CleanupPlan
    dry_run: bool
    deleted: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = self.plan.to_dict()
        out.update(executed=not self.dry_run and not self.plan.skipped, dry_run=self.dry_run, deleted=self.deleted, seconds=self.seconds)
        return out


def adjusted_commit_timestamps(commits: Sequence[ParsedLogPath]) -> dict[int, int]:
    """File mtimes made strictly increasing with the version (delta-spark's BufferingLogDeletionIterator)."""
    out: dict[int, int] = {}
    previous = None
    for c in commits:
        ts = c.modification_time if previous is None or c.modification_time > previous else previous + 1
        out[c.version] = ts
        previous = ts
    return out


def _ict(store: LogStore, name: str, first: bytes) -> int:
    try:
        ict = in_commit_timestamp(json.loads(first).get("commitInfo"))
    except (ValueError, AttributeError, RecursionError):
        ict = None
    if ict is None:
        raise CorruptLogError(f"{store.display(name)}: in-commit timestamps are enabled but the first action has none", path=name, line=1)
    return ict


def _checked_icts(store: LogStore, commits: Sequence[ParsedLogPath]) -> list[int]:
    """The in-commit timestamps of ``commits`` (ICT era), verified strictly increasing.

    The cutoff search relies on that order; one bad value would send it to a later commit, so a
    violation is a corrupt log, not a hint."""
    heads = store.read_heads([c.name for c in commits])
    icts = [_ict(store, c.name, heads[c.name]) for c in commits]
    for (a, ta), (b, tb) in itertools.pairwise(zip(commits, icts, strict=True)):
        if tb <= ta:
            raise NonMonotonicTimestampError(
                f"{store.display(b.name)}: inCommitTimestamp {tb} of version {b.version} is not after {ta} of version {a.version}; "
                "in-commit timestamps must strictly increase",
                versions=(a.version, b.version),
                path=b.name,
            )
    return icts


def _cutoff_commit(store: LogStore, commits: Sequence[ParsedLogPath], cutoff: int, ict_from: int | None) -> int | None:
    """Newest commit version whose timestamp ≤ cutoff."""
    if not commits:
        return None
    pre = [c for c in commits if ict_from is None or c.version < ict_from]
    ict_era = [c for c in commits if ict_from is not None and c.version >= ict_from]
    if ict_era:
        icts = _checked_icts(store, ict_era)
        best = next((c.version for c, ts in zip(reversed(ict_era), reversed(icts), strict=True) if ts <= cutoff), None)
        if best is not None:
            return best
    adjusted = adjusted_commit_timestamps(pre)
    eligible = [v for v, ts in adjusted.items() if ts <= cutoff]
    return max(eligible) if eligible else None


def _referenced_sidecars(store: LogStore, checkpoints: Sequence[ParsedLogPath]) -> set[str] | None:
    """Sidecar file names the checkpoints reference; None when one cannot be read (then no
    sidecar may be deleted: it could be one of the unreadable checkpoint's). Only the ``sidecar``
    column (or a JSON checkpoint's non-file lines) is read, never the whole file."""
    names: set[str] = set()
    for c in checkpoints:
        try:
            names |= referenced_sidecar_names(store, [c])
        except FileNotFoundError:
            continue  # deleted since the listing: it references nothing any more
        except (DeltaLogError, ValueError, KeyError, TypeError, AttributeError, OSError, pa.ArrowException):
            return None
    return names


@uses_log_operation_memory
def plan_log_cleanup(
    store: LogStore,
    snapshot: Snapshot | TableState,
    *,
    now_ms: int | None = None,
    retention_ms: int | None = None,
    catalog_permits_cleanup: bool = False,
    latest_published_version: int | None = None,
    files: LogSegmentFiles | None = None,
) -> CleanupPlan:
    """Plan (never delete) the cleanup of ``_delta_log`` for the latest ``snapshot`` of the table.

    Only its protocol, properties and in-commit-timestamp enablement are read, so a ``TableState``
    from ``load_table_state`` (no file actions replayed) plans exactly what a ``Snapshot`` does.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    props = snapshot.properties
    retention = props.log_retention_ms if retention_ms is None else retention_ms
    if retention < 0:
        raise InvalidOptionError(f"{store.uri}: a retention must not be negative, got {retention / DAY_MS:g} days", option="retention")
    check_write_supported(snapshot.protocol, operation=f"metadata cleanup of {store.uri}", path=store.uri)
    cutoff = utc_midnight(now - retention)
    files = files if files is not None else list_log_files(store)
    leftovers = _leftovers(store, files.hidden)
    base: dict[str, Any] = dict(table_uri=store.uri, now_ms=now, retention_ms=retention, cutoff_timestamp=cutoff, leftovers=leftovers)
    if not props.enable_expired_log_cleanup:
        return CleanupPlan(**base, skip_reason="delta.enableExpiredLogCleanup is false")
    if is_catalog_managed(snapshot.protocol) and not catalog_permits_cleanup:
        return CleanupPlan(**base, skip_reason="catalog-managed table: metadata cleanup needs the catalog's explicit permission: pass --allow-catalog-managed (the operator's and tables.yaml's "
                          "catalog_permits_cleanup)")
    if snapshot.protocol.has_writer_feature("checkpointProtection") and props.checkpoint_protection_version > 0:
        return CleanupPlan(
            **base,
            skip_reason=f"checkpointProtection: delta.requireCheckpointProtectionBeforeVersion={props.checkpoint_protection_version}",
        )

    ict_from = (props.ict_enablement_version or 0) if snapshot.in_commit_timestamps_enabled else None
    cutoff_commit = _cutoff_commit(store, files.commits, cutoff, ict_from)
    if cutoff_commit is None:
        return CleanupPlan(**base, skip_reason="no commit is older than the retention cutoff")
    limit = cutoff_commit
    try:
        hint = parse_last_checkpoint(store.read(LAST_CHECKPOINT))
    except FileNotFoundError:
        hint = None
    if hint is not None:
        limit = min(limit, hint.version)
    candidates = [g for g in files.complete_checkpoints() if g.version <= limit]
    if not candidates:
        return CleanupPlan(**base, cutoff_commit=cutoff_commit, skip_reason="no complete checkpoint at or before the cutoff commit")
    # Every commit below the anchor goes: it must open, or an older one must serve.
    anchor, unreadable = newest_readable_checkpoint(store, candidates, hint)
    if anchor is None:
        raise unreadable[0]
    cp = anchor.version
    anchor_has_classic = anchor.files[0].type is not LogFileType.CHECKPOINT_UUID or any(
        g.version == cp and g.files[0].type is not LogFileType.CHECKPOINT_UUID and _opens(store, g, hint) for g in candidates
    )

    published = files.latest_commit_version if latest_published_version is None else latest_published_version
    commits = [c for c in files.commits if c.version < cp]
    checkpoints = [c for c in files.checkpoints if c.version < cp]
    crcs = [c for c in files.crcs if c.version < cp]
    compactions = [c for c in files.compactions if c.version <= cp]
    listed = {d: store.list_dir(d) for d in (STAGED_DIR, LEGACY_STAGED_DIR, SIDECAR_DIR)}  # one LIST each
    parsed = {d: [p for s in stats if (p := parse_log_path(s.name, s.size, s.modification_time)) is not None] for d, stats in listed.items()}
    staged = [
        s
        for d in (STAGED_DIR, LEGACY_STAGED_DIR)
        for s in parsed[d]
        if s.type is LogFileType.STAGED_COMMIT and s.version <= cp and s.version <= published
    ]
    remaining = [c for c in files.checkpoints if c.version >= cp]
    referenced = _referenced_sidecars(store, remaining)
    # The storage's mtimes against the real clock: a future `now` must not age a fresh sidecar.
    sidecar_cutoff = int(time.time() * 1000) - DAY_MS
    sidecars = (
        []
        if referenced is None
        else [s for s in parsed[SIDECAR_DIR] if s.filename not in referenced and s.modification_time < sidecar_cutoff]
    )
    ordered = [*commits, *checkpoints, *crcs, *compactions, *staged, *sidecars]
    shadows = _shadows(store, files, listed, parsed, ordered, cp, published) if store.is_local else []
    counts = {
        "commits": len(commits),
        "checkpoints": len(checkpoints),
        "crcs": len(crcs),
        "compactions": len(compactions),
        "staged_commits": len(staged),
        "sidecars": len(sidecars),
        **({"crc_shadows": len(shadows)} if shadows else {}),
    }
    return CleanupPlan(
        **base,
        cutoff_commit=cutoff_commit,
        cutoff_checkpoint=cp,
        deletions=(*(Deletion(p.name, _KIND[p.type], p.size) for p in ordered), *(Deletion(n, SHADOW_KIND, size) for n, size in shadows)),
        bytes=sum(p.size for p in ordered) + sum(size for _, size in shadows),
        counts=counts,
        needs_compat_checkpoint=bool(checkpoints) and not anchor_has_classic,
        unreadable_checkpoints=tuple(f"{e.path}: {e}" for e in unreadable),
    )


def _shadows(
    store: LogStore,
    files: LogSegmentFiles,
    listed: dict[str, list[FileStat]],
    parsed: dict[str, list[ParsedLogPath]],
    ordered: Sequence[ParsedLogPath],
    anchor: int,
    published: int,
) -> list[tuple[str, int]]:
    """Hadoop checksum shadows to delete (local file systems): those of the planned files, and
    orphaned ones of files below the anchor (see ``shadows``)."""
    top_hidden = files.hidden if files.hidden is not None else [s for s in store.list_dir() if s.name.startswith(".")]
    hidden = {"": top_hidden, **{d: [s for s in stats if s.name.rpartition("/")[2].startswith(".")] for d, stats in listed.items()}}
    top = [*files.commits, *files.checkpoints, *files.compactions, *files.crcs]
    present = {p.name for p in top} | {p.name for ps in parsed.values() for p in ps}
    return shadows_to_delete(hidden, {p.name for p in ordered}, present, anchor, published)


_KIND = {t: t.value for t in LogFileType}  # an Enum's .value is a descriptor call: one per planned file


def _opens(store: LogStore, group: CheckpointGroup, hint: LastCheckpointHint | None) -> bool:
    try:
        verify_checkpoint(store, group, hint)
    except DeltaLogError:
        return False
    return True
def _leftovers(store: LogStore, top_level_hidden: Sequence[FileStat] | None) -> tuple[Deletion, ...]:
    found: list[Leftover] = [*find_abandoned(store, top_level_hidden), *abandoned_sidecars(store)]
    return tuple(Deletion(x.path, x.kind, x.size) for x in found)


class PlanChangedError(DeltaLogError):
    """The log changed between planning and execution in a way that invalidates the plan."""


def execute_cleanup(
    store: LogStore,
    plan: CleanupPlan,
    *,
    dry_run: bool = True,
    fresh_plan: CleanupPlan | None = None,
    progress: Callable[[str], None] | None = None,
) -> CleanupResult:
    """Delete the planned files in order (commits first); a file already gone is fine.

    ``fresh_plan`` is the same plan recomputed from a new listing just before deleting: it must
    keep the same anchor checkpoint, and only files in both plans are deleted. ``progress`` hears
    one line per batch of ``DELETE_BATCH`` files (the caller throttles).
    """
    started = time.monotonic()
    if dry_run:
        return CleanupResult(plan, dry_run=dry_run, seconds=round(time.monotonic() - started, 6))
    allowed = set(plan.paths)
    if fresh_plan is not None and not plan.skipped:
        if fresh_plan.skipped or fresh_plan.cutoff_checkpoint != plan.cutoff_checkpoint:
            raise PlanChangedError(
                f"{store.uri}: the cleanup plan no longer holds (anchor checkpoint {plan.cutoff_checkpoint} → "
                f"{fresh_plan.cutoff_checkpoint}, {fresh_plan.skip_reason or 'not skipped'}); nothing was deleted",
                path=store.log_dir,
            )
        allowed &= set(fresh_plan.paths)
    # No-follow check before the first deletion. A fresh plan's files all come from no-follow
    # listings made just now (a link there is refused by the listing), so then only the
    # directories are checked again, not every file (one lstat per file).
    store.refuse_links([d.path for d in plan.deletions if d.path in allowed], files=fresh_plan is None)
    # Leftovers are judged again by a fresh plan; only ones abandoned both times go.
    leftovers = plan.leftovers if fresh_plan is None else tuple(d for d in plan.leftovers if d.path in {f.path for f in fresh_plan.leftovers})
    deleted = _remove(store, leftovers)
    if plan.skipped:
        return CleanupResult(plan, dry_run=False, deleted=deleted, seconds=round(time.monotonic() - started, 6))
    total = sum(1 for d in plan.deletions if d.path in allowed)
    done = [deleted]

    def batch_gone(n: int) -> None:
        done[0] += n
        if progress is not None:
            progress(f"cleanup: deleted {done[0]:,} of {total:,} files below v{plan.cutoff_checkpoint}")

    # Kind by kind in plan order (commits before checkpoints); within a kind the order is free.
    for _, group in itertools.groupby((d for d in plan.deletions if d.path in allowed), key=lambda d: d.kind):
        store.delete_many([d.path for d in group], batch_gone)
    deleted = done[0]
    return CleanupResult(plan, dry_run=False, deleted=deleted, seconds=round(time.monotonic() - started, 6))


def _remove(store: LogStore, leftovers: Sequence[Deletion]) -> int:
    return remove_leftovers(store, [Leftover(d.path, d.kind, d.size, 0, None) for d in leftovers])
