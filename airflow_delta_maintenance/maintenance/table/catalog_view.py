"""The catalog's view of a table, and the table's latest ratified state.

``MaintainedTable.catalog_view()`` is what every operation acts on: one coordinator call, then one
LIST (in that order: a version the coordinator no longer tracks was reported after its file was
durable, so the listing that follows sees it). Log files above the catalog's latest ratified
version are dropped from the view with a warning naming them — nothing above the catalog's head is
ever acted on — and ``published_version`` is the highest version v such that v and every earlier
version are durably published, decided from ``<v>.json`` files and the coordinator
(``durable_prefix``). A checkpoint or compaction above it is dropped from the view too (listed as
a problem): what it claims to cover is not published, so it is never the basis of reading,
publishing or cleanup. ``ratified_state`` reads protocol, metadata and properties from the
published files plus the verified pending commits: gates never come from a stale snapshot.
``validate_ratified_tail`` reads every commit of that state in full before a writer acts on it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...coordinators.base import RatifiedCommit
from ...deltalog.errors import DeltaLogError
from ...deltalog.log_segment.listing import LogSegmentFiles
from ...deltalog.log_segment.segment import CatalogCommit, build_log_segment
from ...deltalog.model.paths import LEGACY_STAGED_DIR, crc_name
from ...deltalog.replay.table_state import TableState, load_table_state, metadata_before_tail
from ...deltalog.replay.tail_check import Partitioning, validate_tail
from ...deltalog.storage import LogStore
from ..errors import ChecksumMismatchError, CoordinatorMismatchError, InconsistentCoordinatorError, MissingStagedCommitError
from .coordinator_discovery import read_table_coordination
from .staged_commits import StagedListing, fork_error, list_staged, published_matches, verify_ratified_commit

if TYPE_CHECKING:
    from ...deltalog.replay.snapshot import Snapshot
    from .maintained import MaintainedTable

__all__ = [
    "CatalogView",
    "durable_prefix",
    "drop_above_prefix",
    "cap_listing",
    "read_table_state",
    "ratified_state",
    "check_view_coordination",
    "check_identity_checksum",
    "check_published_tracked",
    "load_ratified_snapshot",
    "validate_ratified_tail",
]


def read_table_state(
    store: LogStore,
    files: LogSegmentFiles,
    version: int | None = None,
    *,
    catalog_commits: tuple[Any, ...] = (),
    latest_ratified_version: int | None = None,
    now_ms: int | None = None,
    from_checksum: bool = False,
) -> TableState:
    """Protocol, metadata and properties of ``version`` without replaying file actions (the one
    place identity and gates read them): the worker's cost does not grow with the table. With
    ``from_checksum`` the read stops at the newest usable version checksum (its trust rule:
    ``deltalog.checksum.protocol_metadata``): for answers and skip decisions, never for writing."""
    if from_checksum:
        from ...deltalog.checksum.protocol_metadata import load_table_state_from_checksum

        return load_table_state_from_checksum(
            store, version, files=files, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, now_ms=now_ms
        )
    return load_table_state(
        store, version, files=files, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, now_ms=now_ms
    )


def cap_listing(files: LogSegmentFiles, head: int | None) -> tuple[LogSegmentFiles, tuple[str, ...]]:
    """The listing without files above ``head`` (None: no cap), and the names dropped."""
    if head is None:
        return files, ()
    above = [f.name for f in (*files.commits, *files.checkpoints, *files.crcs) if f.version > head]
    above += [c.name for c in files.compactions if c.end_version > head]
    if not above:
        return files, ()
    capped = LogSegmentFiles(
        commits=tuple(c for c in files.commits if c.version <= head),
        checkpoints=tuple(c for c in files.checkpoints if c.version <= head),
        compactions=tuple(c for c in files.compactions if c.end_version <= head),
        crcs=tuple(c for c in files.crcs if c.version <= head),
        last_checkpoint=files.last_checkpoint,
        hidden=files.hidden,
    )
    return capped, tuple(sorted(above))


def durable_prefix(
    files: LogSegmentFiles,
    tracked: Sequence[RatifiedCommit] = (),
    staged: Callable[[], StagedListing] | None = None,
) -> int:
    """Highest v such that v and every earlier version are durably published, decided from commit
    files, never from a checkpoint's or compaction's name alone.

    The prefix starts at ``0.json``, or at a complete checkpoint whose own commit is still listed
    (delta-spark's, delta-rs's, the kernel's and our cleanup all delete only commits *below* the
    anchor checkpoint), or at a checkpoint with no commit at or below it at all (a log cleaned up
    to its checkpoint), and extends over consecutive commit files. A commit the coordinator still
    tracks (``tracked``) that has no ``<v>.json`` but whose ratified content is still available
    (inline, or its staged file in ``staged()``, listed only when needed) is not published, whatever
    checkpoint claims to cover it: the prefix stops below it and no checkpoint above it anchors.
    Its content being gone too means a cleanup removed both below a checkpoint that covers it.
    """
    versions = {c.version for c in files.commits}
    lowest = files.commits[0].version if files.commits else None
    anchors = sorted(
        {g.version for g in files.complete_checkpoints() if g.version in versions or lowest is None or lowest > g.version}, reverse=True
    )
    if 0 in versions:
        anchors.append(0)
    missing = [c for c in tracked if c.version not in versions]
    blocker = 1 << 62  # the lowest tracked version that must still be published
    if missing and anchors:
        covered = [c for c in missing if c.version <= anchors[0]]
        listing = staged() if staged is not None and any(c.inline_content is None for c in covered) else None
        available = [c.version for c in covered if _content_available(c, listing)]
        blocker = min(available, default=blocker)
    for anchor in anchors:  # the highest usable anchor reaches furthest
        if anchor >= blocker:
            continue
        v = anchor
        while v + 1 in versions:
            v += 1
        return min(v, blocker - 1)
    return -1


def _content_available(commit: RatifiedCommit, listing: StagedListing | None) -> bool:
    """Is the ratified content of ``commit`` still somewhere (inline, or its staged file)? Without
    a listing (no staged-file lister given) it is assumed to be: then it must be published."""
    if commit.inline_content is not None or listing is None:
        return True
    short = commit.file_name.rsplit("/", 1)[-1]
    return listing.get(commit.file_name) is not None or listing.get(f"{LEGACY_STAGED_DIR}/{short}") is not None


def drop_above_prefix(files: LogSegmentFiles, published: int) -> tuple[LogSegmentFiles, tuple[str, ...]]:
    """The listing without complete checkpoints and compaction files above the durable prefix
    (never a basis for reading, publishing or cleanup: what they claim to cover is not published),
    and their names. Parts of an incomplete checkpoint stay: they are never a basis anyway, and a
    reader names them when they explain a missing version."""
    dropped = {f.name for g in files.complete_checkpoints() if g.version > published for f in g.files}
    dropped |= {c.name for c in files.compactions if c.end_version > published}
    if not dropped:
        return files, ()
    kept = dataclasses.replace(
        files,
        checkpoints=tuple(c for c in files.checkpoints if c.name not in dropped),
        compactions=tuple(c for c in files.compactions if c.name not in dropped),
    )
    return kept, tuple(sorted(dropped))


@dataclass(frozen=True)
class CatalogView:
    """The table as its catalog sees it, at one moment (see the module docstring)."""

    table_uri: str
    files: LogSegmentFiles  # the listing, without files above the catalog's head
    latest_ratified_version: int  # the catalog's head (the published log's when nothing is coordinated)
    tracked: tuple[RatifiedCommit, ...]  # commits the coordinator still tracks, ≤ the head, ascending
    published_version: int  # v and every earlier version durably published, ≤ the head
    ignored_files: tuple[str, ...] = ()  # log files above the head: never acted on
    coordinated: bool = False
    reported_latest: int = -1  # the coordinator's raw latest_table_version (-1: nothing ratified)
    tracked_above_head: tuple[int, ...] = ()  # commits the coordinator tracks above its own head (inconsistent)
    unanchored_files: tuple[str, ...] = ()  # checkpoints/compactions above the durable prefix: never acted on
    answer_problem: tuple[str, int] | None = None  # the coordinator's answer contradicts itself (message, version)

    @property
    def pending(self) -> tuple[RatifiedCommit, ...]:
        """Ratified commits not yet durably published."""
        return tuple(c for c in self.tracked if c.version > self.published_version)

    def inconsistency(self) -> tuple[str, int] | None:
        """What makes the coordinator's answer inconsistent with itself or the log (a message and
        the first version concerned), or None. Only a coordinated view can be inconsistent."""
        if not self.coordinated:
            return None
        if self.answer_problem is not None:
            return self.answer_problem
        pending = self.pending
        if pending and any(c.version != self.published_version + 1 + i for i, c in enumerate(pending)):
            return (f"the coordinator's unpublished commits {[c.version for c in pending][:10]} do not follow the "
                    f"published version {self.published_version} contiguously"), self.published_version + 1
        reachable = max(self.published_version, pending[-1].version if pending else -1)
        if reachable < self.latest_ratified_version:
            return (f"the catalog's latest ratified version {self.latest_ratified_version} is beyond anything published or "
                    f"pending (nothing above {reachable})"), reachable + 1
        return None

    def check_consistent(self) -> None:
        """``InconsistentCoordinatorError`` when ``inconsistency()`` finds something: nothing is acted
        on (published, checkpointed, cleaned up, waited for) until the coordinator is repaired."""
        found = self.inconsistency()
        if found is not None:
            message, version = found
            raise InconsistentCoordinatorError(
                f"{self.table_uri}: {message}; nothing is acted on until the coordinator is consistent", version=version
            )

    @property
    def released_version(self) -> int:
        """Published, and no longer tracked by the coordinator: staged files at or below it are
        needed by no reader (a tracked commit is still read from its staged file by some clients)."""
        return min(self.published_version, self.tracked[0].version - 1) if self.tracked else self.published_version

    @property
    def head(self) -> int | None:
        """The cap on versions: the catalog's latest ratified version, None when nothing is ratified."""
        return self.reported_latest if self.reported_latest >= 0 else None

    def recap(self, files: LogSegmentFiles) -> LogSegmentFiles:
        """A fresh listing under the same caps (re-validation right before deleting): nothing above
        the catalog's head, no checkpoint or compaction above the durable prefix."""
        return drop_above_prefix(cap_listing(files, self.head)[0], self.published_version)[0]


def check_view_coordination(table: MaintainedTable, view: CatalogView, state: TableState) -> None:
    """Files above the head were read when the identity was built: the ratified state must declare
    the same coordinator, or the identity came from a rogue file."""
    if not view.ignored_files or table.coordinator is None:
        return
    again = read_table_coordination(state.protocol, state.metadata.configuration, table.uri)
    if again != table.coordination:
        raise CoordinatorMismatchError(
            f"{table.uri}: log files above the catalog's latest ratified version ({', '.join(view.ignored_files[:3])}) "
            f"declare {table.coordination.describe()}, but the ratified table declares {again.describe()}"
        )


# Verified bytes of the pending tail handed to the state reader as they are; beyond this the tail's
# staged files are handed by name (verified first, read again by the reader one at a time), so a
# large backlog costs a status, a checkpoint plan or a cleanup no more memory than a small one.
TAIL_KEEP_BYTES = 32 << 20


def _verified_tail(table: MaintainedTable, view: CatalogView) -> tuple[CatalogCommit, ...]:
    """The pending commits, each verified (``verify_ratified_commit``), once the coordinator's
    answer is consistent and every commit it still tracks inside the published prefix holds the
    ratified bytes. The first ``TAIL_KEEP_BYTES`` are carried inline, the rest by name."""
    view.check_consistent()
    pending = view.pending
    listing = list_staged(table.store) if any(c.inline_content is None for c in view.tracked) else None
    check_published_tracked(table.store, view, listing)
    tail: list[CatalogCommit] = []
    kept = 0
    for c in pending:
        v = verify_ratified_commit(table.store, c, listing, keep=c.inline_content is not None or kept + c.file_size <= TAIL_KEEP_BYTES)
        if v.data is not None and c.inline_content is None:
            kept += v.size
        tail.append(CatalogCommit(
            version=c.version, file_name=v.name or c.file_name, inline_content=v.data, timestamp=c.commit_timestamp,
            size=c.file_size, modification_time=c.file_modification_time,
        ))
    return tuple(tail)


def check_published_tracked(store: LogStore, view: CatalogView, listing: StagedListing | None) -> None:
    """Commits the coordinator still tracks whose ``<v>.json`` is inside the published prefix (a
    publisher copied them and has not reported yet) count as published only when the file holds
    the ratified bytes: a different file is a fork (``PublishForkError``), never read, checkpointed
    or compacted. A tracked commit whose staged file is gone leaves nothing to compare. One commit
    in memory at a time."""
    listed = {c.version: c for c in view.files.commits}
    for c in view.tracked:
        published = listed.get(c.version)
        if c.version > view.published_version or published is None:
            continue
        try:
            verified = verify_ratified_commit(store, c, listing)
        except MissingStagedCommitError:
            continue
        try:
            same = published.size == verified.size and published_matches(store, verified, published.name)
        except FileNotFoundError:  # removed since the listing (a concurrent cleanup): not read by anyone here
            continue
        if not same:
            raise fork_error(store, c, published.name)


def ratified_state(
    table: MaintainedTable, view: CatalogView, *, now_ms: int | None = None, from_checksum: bool = False, check_identity: bool = True
) -> TableState:
    """The table's latest *ratified* state (published files plus the verified pending commits):
    gates, retention and protocol come from here, never from a stale published snapshot.

    ``from_checksum``: protocol and metadata may come from the newest version checksum (status,
    a gate deciding to skip). Without it (every writer and cleanup) they come from the log, and an
    identity whose coordinator was read from a checksum is checked against the log first
    (``check_identity``: status reports it instead)."""
    tail = _verified_tail(table, view)
    state = _identity_state_if_same(table, view, tail, now_ms, from_checksum) or read_table_state(
        table.store, view.files, view.latest_ratified_version, catalog_commits=tail,
        latest_ratified_version=view.head, now_ms=now_ms, from_checksum=from_checksum,
    )
    if not from_checksum and check_identity:
        check_identity_checksum(table, view, state)
    check_view_coordination(table, view, state)
    return state


def check_identity_checksum(table: MaintainedTable, view: CatalogView, state: TableState | None = None) -> None:
    """The identity (which coordinator the table declares) was read from a version checksum: the
    log at that version must declare the same before anything is written or deleted through it.
    ``state``: the log's own read, reused when it is of the identity's version."""
    identity = table.identity_state
    if identity is None or identity.checksum_version is None:
        return
    same = state is not None and state.version == identity.version and state.checksum_version is None
    logged = state if same and state is not None else read_table_state(
        table.store, view.files, identity.version, latest_ratified_version=view.head
    )
    declared = read_table_coordination(logged.protocol, logged.metadata.configuration, table.uri)
    if declared != table.coordination:
        raise ChecksumMismatchError(
            f"{table.uri}: the checksum of v{identity.checksum_version} ({crc_name(identity.checksum_version)}) says the table "
            f"declares {table.coordination.describe()}, the log says {declared.describe()}; nothing was done "
            "(delta-maintenance verify names the checksum; remove it or write it again)",
            version=identity.checksum_version, path=crc_name(identity.checksum_version),
        )


def validate_ratified_tail(table: MaintainedTable, state: TableState) -> None:
    """Read and validate in full every commit the ratified state is built from (after its
    checkpoint, up to the catalog's head, pending commits included): a writer acts on nothing that
    cannot be read. Files this process already validated (a checkpoint's own replay) are skipped."""
    def before() -> Partitioning:  # what the adds before a metaData of the tail were written under
        meta = metadata_before_tail(table.store, state)
        return Partitioning.of(meta.to_dict() if meta is not None else None)

    validate_tail(table.store, state.segment, Partitioning.of(state.metadata.to_dict()), state.metadata_version, before)


def _identity_state_if_same(
    table: MaintainedTable, view: CatalogView, tail: Sequence[CatalogCommit], now_ms: int | None, from_checksum: bool = False
) -> TableState | None:
    """The identity's protocol/metadata read, when the view's state is read from exactly the same
    files: no pending commit, the same version, and the same checkpoint and commits by name, size
    and modification time (log files are never rewritten in place; a changed one is read again)."""
    cached = table.identity_state
    if cached is None or tail or cached.version != view.latest_ratified_version:
        return None
    if cached.checksum_version is not None and not from_checksum:
        return None  # read from a checksum: a writer reads the log
    try:
        segment = build_log_segment(view.files, view.latest_ratified_version, latest_ratified_version=view.head, table=table.store.uri)
    except DeltaLogError:
        return None  # the full read raises it, with its own message
    if segment.checkpoint != cached.segment.checkpoint or segment.deltas != cached.segment.deltas:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return dataclasses.replace(cached, segment=segment, now_ms=now)


def load_ratified_snapshot(table: MaintainedTable, version: int | None = None, *, keys_only: bool = False) -> Snapshot:
    """The table at ``version`` (default: the latest ratified) as its catalog sees it, with its
    files (``keys_only``: only what identifies each, see ``load_snapshot``)."""
    from ...deltalog.replay.snapshot import load_snapshot  # the replay machinery: only callers that need files pay for it

    view = table.catalog_view()
    return load_snapshot(
        table.store, view.latest_ratified_version if version is None else version, files=view.files,
        catalog_commits=_verified_tail(table, view), latest_ratified_version=view.head, keys_only=keys_only,
    )
