"""A table's maintenance health, for `delta-maintenance status` and the demo."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ...deltalog.cleanup.plan import plan_log_cleanup
from ...deltalog.errors import DeltaLogError
from ...deltalog.model.paths import LEGACY_STAGED_DIR, SIDECAR_DIR, STAGED_DIR
from ..errors import ChecksumMismatchError
from ..table.catalog_view import CatalogView, check_identity_checksum, ratified_state, validate_ratified_tail
from ..table.maintained import MaintainedTable
from ..table.staged_commits import StagedListing, list_staged

__all__ = ["TableStatus", "VersionsReport", "catalog_versions", "coordinator_problems", "table_status"]


def coordinator_problems(view: CatalogView, staged: StagedListing | None) -> list[str]:
    """What makes the coordinator's answer inconsistent with itself or with the log."""
    problems: list[str] = []
    if view.ignored_files:
        shown = ", ".join(view.ignored_files[:5]) + (" …" if len(view.ignored_files) > 5 else "")
        problems.append(
            f"{len(view.ignored_files)} log file(s) above the catalog's latest ratified version {view.latest_ratified_version} "
            f"(written around the coordinator; ignored): {shown}"
        )
    if view.unanchored_files:
        shown = ", ".join(view.unanchored_files[:5]) + (" …" if len(view.unanchored_files) > 5 else "")
        problems.append(
            f"{len(view.unanchored_files)} checkpoint/compaction file(s) above the published version {view.published_version} "
            f"(what they cover is not published; never used to read, publish or clean up): {shown}"
        )
    if view.tracked_above_head:
        problems.append(
            f"the coordinator tracks commits {_span(list(view.tracked_above_head))} above the catalog's latest ratified version "
            f"{view.latest_ratified_version}"
        )
    inconsistent = view.inconsistency()
    if inconsistent is not None:
        problems.append(inconsistent[0])
    if staged is not None:
        missing = [
            c.version
            for c in view.pending
            if c.inline_content is None
            and staged.get(c.file_name) is None
            and staged.get(f"{LEGACY_STAGED_DIR}/{c.file_name.rsplit('/', 1)[-1]}") is None
        ]
        if missing:
            problems.append(f"pending versions {_span(missing)} have no staged file")
    return problems


def _span(versions: list[int]) -> str:
    if not versions:
        return "none"
    return f"{versions[0]}..{versions[-1]}" if len(versions) > 1 else str(versions[0])


@dataclass(frozen=True)
class VersionsReport:
    table_uri: str
    latest_ratified_version: int
    latest_published_version: int
    pending: list[int]
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def catalog_versions(table: MaintainedTable, view: CatalogView | None = None) -> VersionsReport:
    """Latest ratified and published versions, the pending ones, and any inconsistency."""
    view = view if view is not None else table.catalog_view()
    staged = list_staged(table.store) if view.pending else None
    return VersionsReport(
        table_uri=table.uri,
        latest_ratified_version=view.latest_ratified_version,
        latest_published_version=view.published_version,
        pending=[c.version for c in view.pending],
        problems=coordinator_problems(view, staged),
    )


@dataclass(frozen=True)
class TableStatus:
    table_uri: str
    latest_ratified_version: int | None
    latest_published_version: int
    pending_versions: list[int]
    checkpoint_version: int
    compactions: list[list[int]]
    commits_since_checkpoint: int
    log_files: int
    log_bytes: int
    cleanup_candidates: int
    cleanup_bytes: int
    cleanup_skipped_reason: str | None
    checksum_version: int = -1  # the newest version with a <v>.crc (-1: none)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _checksum_problems(table: MaintainedTable, view: CatalogView) -> list[str]:
    from .checksums import checksum_problems  # a replay at the newest checksum: only status pays for it

    try:
        return checksum_problems(table, view)
    except DeltaLogError as exc:
        return [f"the newest checksum cannot be verified: {' '.join(str(exc).split())}"]


def table_status(table: MaintainedTable, *, now_ms: int | None = None) -> TableStatus:
    store = table.store
    view = table.catalog_view()
    versions = catalog_versions(table, view)
    files = view.files
    complete = files.complete_checkpoints()
    checkpoint = complete[-1].version if complete else -1
    entries = [*store.list_dir(), *store.list_dir(STAGED_DIR), *store.list_dir(LEGACY_STAGED_DIR), *store.list_dir(SIDECAR_DIR)]
    published = view.published_version
    reason: str | None
    problems = list(versions.problems)
    if problems:
        candidates, size, reason = 0, 0, "the coordinator is inconsistent (see problems); cleanup would not run"
    else:
        # Protocol and metadata from the newest checksum where usable; the log's own whenever
        # that checksum is not the one verified below or does not verify.
        state = ratified_state(table, view, now_ms=now_ms, from_checksum=True)
        crc_problems = _checksum_problems(table, view)
        verified = max((c.version for c in files.crcs if c.version <= published), default=None)
        if state.checksum_version is not None and (crc_problems or state.checksum_version != verified):
            state = ratified_state(table, view, now_ms=now_ms, check_identity=False)
        identity = table.identity_state
        try:
            if state.checksum_version is None or identity is None or identity.checksum_version != state.checksum_version:
                check_identity_checksum(table, view, state)  # else: the identity's checksum is the one just verified
        except ChecksumMismatchError as exc:
            problems.append(" ".join(str(exc).removeprefix(f"{store.uri}: ").split()))
        try:
            validate_ratified_tail(table, state)
        except DeltaLogError as exc:
            problems.append(f"the log cannot be read up to the catalog's head: {' '.join(str(exc).split())}")
        if problems:
            candidates, size, reason = 0, 0, "a commit up to the head cannot be read (see problems); no writer or cleanup would run"
        else:
            problems.extend(crc_problems)
            plan = plan_log_cleanup(store, state, now_ms=state.now_ms, latest_published_version=view.released_version, files=files)
            candidates, size, reason = len(plan.deletions), plan.bytes, plan.skip_reason
    return TableStatus(
        table_uri=store.uri,
        latest_ratified_version=view.latest_ratified_version if view.coordinated else None,
        latest_published_version=published,
        pending_versions=versions.pending,
        checkpoint_version=checkpoint,
        checksum_version=max((c.version for c in files.crcs if c.version <= published), default=-1),
        compactions=[[c.version, c.end_version] for c in files.compactions],
        commits_since_checkpoint=published - checkpoint if published >= 0 else 0,
        log_files=len(entries),
        log_bytes=sum(e.size for e in entries),
        cleanup_candidates=candidates,
        cleanup_bytes=size,
        cleanup_skipped_reason=reason,
        problems=problems,
    )
