"""Publish (backfill) ratified commits to ``_delta_log/<v>.json``, strictly in order, then report.

Rules (PROTOCOL "Catalog-managed tables"): each copy is create-if-absent; a file that
already exists with identical bytes was published by someone else; different bytes are a fork and
abort the run. The coordinator hears about a version only after its file and every earlier one are
durable, so a crash at any point converges on the next run. Every commit of a run is verified
before the first copy, in memory bounded whatever the backlog (``publish_copy``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ...coordinators.base import CommitsResponse, RatifiedCommit
from ...deltalog.errors import AtomicWriteUnsupportedError, DeltaLogError
from ...deltalog.model.partition_keys import partition_value_keys
from ...deltalog.replay.commit_stream import PartitionKeys
from ...deltalog.storage import LogStore
from ..errors import MissingStagedCommitError, StagedCommitError
from ..table.catalog_view import CatalogView, check_identity_checksum, read_table_state
from ..table.maintained import MaintainedTable
from ..table.staged_commits import StagedListing, fork_error, list_staged, published_matches, verify_ratified_commit
from .publish_copy import copy_verified, verify_backlog
from .summary import JSONValue, TaskReport, human_bytes, version_range

__all__ = ["PublishResult", "publish_ratified_commits"]


@dataclass(frozen=True)
class PublishResult:
    table_uri: str
    published: list[int] = field(default_factory=list)
    already_published: list[int] = field(default_factory=list)
    latest_ratified_version: int = -1
    latest_published_version: int = -1
    reported_version: int | None = None
    seconds: float = 0.0
    bytes: int = 0  # of the commits this run copied

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def report(self) -> TaskReport:
        """Ranges and counts (the versions published are consecutive), never the version lists."""
        details: dict[str, JSONValue] = {
            "already_published": len(self.already_published),
            "latest_ratified_version": self.latest_ratified_version,
            "latest_published_version": self.latest_published_version,
            "reported_version": self.reported_version,
        }
        first, last = (self.published[0], self.published[-1]) if self.published else (None, None)
        n = len(self.published)
        skipped = not self.published and self.reported_version is None
        if self.latest_published_version >= self.latest_ratified_version:
            reason = f"nothing to publish: latest ratified v{self.latest_ratified_version} is published"
        else:
            reason = (f"nothing to publish up to the requested version (published through v{self.latest_published_version}, "
                      f"latest ratified v{self.latest_ratified_version})")
        what = f"published {version_range(first, last)} ({n} commit{'' if n == 1 else 's'}, {human_bytes(self.bytes)})"
        if self.reported_version is not None:
            what += f", reported v{self.reported_version}"
        return TaskReport(
            self.table_uri, "publish", what=what, skipped=skipped, reason=reason if skipped else None,
            version=self.latest_published_version, from_version=first, to_version=last, count=n, bytes=self.bytes,
            duration_s=self.seconds, details=details,
        )


def _already_published(store: LogStore, view: CatalogView, commit: RatifiedCommit, listing: StagedListing) -> None:
    """A tracked version inside the durable prefix: published, unless its file contradicts the
    ratified commit (a fork). Without a ``<v>.json`` it is inside the prefix only because a cleanup
    removed its commit and its staged file below a checkpoint that covers it (``durable_prefix``):
    nothing is left to compare, and the checkpoint holds it. A staged file gone while ``<v>.json``
    is listed (a protocol-compliant cleanup at or below a checkpoint) leaves nothing to compare
    either; a ``<v>.json`` gone since the listing is created again from the ratified bytes."""
    published = {c.version: c for c in view.files.commits}.get(commit.version)
    if published is None:
        return
    try:
        verified = verify_ratified_commit(store, commit, listing, strict=True)
    except MissingStagedCommitError:
        return
    try:
        same = published.size == verified.size and published_matches(store, verified, published.name)
    except FileNotFoundError:  # removed since the listing by a concurrent cleanup
        for _ in copy_verified(store, [verified]):
            pass
        return
    if not same:
        raise fork_error(store, commit, published.name)


def _published_partition_keys(table: MaintainedTable, view: CatalogView) -> PartitionKeys:
    """The partition-value keys of the published table, which the first commit to publish is
    checked against (then each commit's own metaData's, ``verify_backlog``): the identity's read
    when it is of that version and from the log, else the published log's protocol and metadata.
    Unknown (nothing checked until a metaData) when nothing is published or it cannot be read:
    publishing never depended on reading the published state."""
    if view.published_version < 0:
        return PartitionKeys(None)
    state = table.identity_state
    if state is None or state.version != view.published_version or state.checksum_version is not None:
        try:
            state = read_table_state(table.store, view.files, view.published_version, latest_ratified_version=view.head)
        except DeltaLogError:
            return PartitionKeys(None)
    return PartitionKeys(partition_value_keys(state.metadata.to_dict()))


def publish_ratified_commits(table: MaintainedTable, *, up_to: int | None = None, response: CommitsResponse | None = None) -> PublishResult:
    """Publish every ratified, unpublished commit up to ``up_to`` (default: the latest ratified).

    One ``get_commits`` call (unless ``response`` is given), one LIST of ``_delta_log`` and of the
    staged directories, every commit verified before the first create (``publish_copy``: in memory
    bounded whatever the backlog), one create per commit in order, and one ``report_published``
    of the highest version that is durable together with every earlier one.
    """
    started = time.monotonic()
    store = table.store
    if table.coordinator is None:
        raise StagedCommitError(f"{table.uri}: publishing needs the table's coordinator")
    if not (store.supports_atomic_create or store.allow_unsafe_writes):
        raise AtomicWriteUnsupportedError(
            f"{store.uri}: this storage cannot create files if absent atomically; refusing to publish "
            "(accept the risk explicitly with allow_unsafe_writes)",
            path=store.log_dir,
        )
    view = table.catalog_view(response)
    # A head nothing reaches, pending commits out of order, twice or with gaps: a failure, never a
    # green "nothing to publish" run after run on a wedged table.
    view.check_consistent()
    check_identity_checksum(table, view)  # the coordinator published through is the one the log declares
    listing = list_staged(store)
    head = view.latest_ratified_version
    target = head if up_to is None else min(up_to, head)
    durable = view.published_version

    published: list[int] = []
    already: list[int] = []
    for c in view.tracked:
        if c.version <= durable:
            _already_published(store, view, c, listing)
            already.append(c.version)
    todo = [c for c in view.pending if c.version <= target]  # contiguous from durable + 1: check_consistent
    if todo:  # learn that we may report before copying: a refusal after copying leaves <v>.json files unreported
        table.coordinator.check_may_report(table.uri, table.table_conf)
    # Every commit is verified before the first copy: an altered one publishes nothing at all. In
    # bounded memory (publish_copy): sizes and digests are kept, the bytes of a small backlog too.
    verified = verify_backlog(store, todo, listing, _published_partition_keys(table, view) if todo else None)
    copied_bytes = 0
    for v, wrote in copy_verified(store, verified):
        if wrote:
            published.append(v.commit.version)
            copied_bytes += v.size
        else:
            already.append(v.commit.version)
        durable = v.commit.version

    reported = None
    # Report when the coordinator still tracks something now known durable (including commits a
    # crashed run copied but never reported, or that a cleanup left without staged files).
    if any(c.version <= durable for c in view.tracked):
        table.report_published(durable)
        reported = durable
    return PublishResult(
        table_uri=store.uri,
        published=published,
        already_published=already,
        latest_ratified_version=head,
        latest_published_version=durable,
        reported_version=reported,
        seconds=round(time.monotonic() - started, 6),
        bytes=copied_bytes,
    )

