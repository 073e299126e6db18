"""Publish (backfill) ratified commits to ``_delta_log/<v>.json``, strictly in order, then report.

Rules (PROTOCOL "Catalog-managed tables", reference §8): each copy is create-if-absent; a file that
already exists with identical bytes was published by someone else; different bytes are a fork and
abort the run. The coordinator hears about a version only after its file and every earlier one are
durable, so a crash at any point converges on the next run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..coordinators.base import CommitCoordinatorClient, CommitsResponse, RatifiedCommit
from ..deltalog.errors import AtomicWriteUnsupportedError, LogFileExistsError
from ..deltalog.listing import list_log_files
from ..deltalog.paths import LEGACY_STAGED_DIR, LogFileType, commit_name, parse_log_path
from ..deltalog.storage import LogStore
from .errors import PublishForkError, StagedCommitError

__all__ = ["PublishResult", "publish_ratified_commits", "read_ratified_commit", "validate_commit_bytes"]


@dataclass(frozen=True)
class PublishResult:
    table_uri: str
    published: list[int] = field(default_factory=list)
    already_published: list[int] = field(default_factory=list)
    latest_ratified_version: int = -1
    latest_published_version: int = -1
    reported_version: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_ratified_commit(store: LogStore, commit: RatifiedCommit, prefetched: Mapping[str, bytes] | None = None) -> bytes:
    """The bytes of a ratified commit: inline, or its staged file (which must be named for its version)."""
    if commit.inline_content is not None:
        return commit.inline_content
    if prefetched and commit.file_name in prefetched:
        return prefetched[commit.file_name]
    parsed = parse_log_path(commit.file_name)
    if parsed is None or parsed.type is not LogFileType.STAGED_COMMIT or parsed.version != commit.version:
        raise StagedCommitError(
            f"{store.uri}: ratified commit {commit.version} points at {commit.file_name!r}, "
            "which is not a staged commit of that version under _staged_commits/ or _commits/",
            version=commit.version,
            path=commit.file_name,
        )
    try:
        return store.read(commit.file_name)  # store.path() refuses names escaping _delta_log
    except FileNotFoundError:
        pass
    # Coordinators that store bare names (DynamoDB's fsName) written by older delta-spark
    # releases staged into the legacy _commits/ directory.
    legacy = f"{LEGACY_STAGED_DIR}/{parsed.filename}"
    try:
        return store.read(legacy)
    except FileNotFoundError:
        raise StagedCommitError(
            f"{store.display(commit.file_name)}: staged file of ratified version {commit.version} is missing",
            version=commit.version,
            path=commit.file_name,
        ) from None


def validate_commit_bytes(store: LogStore, commit: RatifiedCommit, data: bytes) -> None:
    """Every line is a JSON action object; the in-commit timestamp equals the coordinator's."""
    name = commit.file_name or f"<inline commit {commit.version}>"
    first: dict[str, Any] | None = None
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            raise StagedCommitError(
                f"{store.display(name)}: line {number} of ratified commit {commit.version} is not JSON ({exc})",
                version=commit.version,
                path=name,
            ) from None
        if not isinstance(action, dict) or len(action) != 1:
            raise StagedCommitError(
                f"{store.display(name)}: line {number} of ratified commit {commit.version} is not one action",
                version=commit.version,
                path=name,
            )
        first = first if first is not None else action
    if first is None:
        raise StagedCommitError(f"{store.display(name)}: ratified commit {commit.version} is empty", version=commit.version, path=name)
    if commit.commit_timestamp >= 0:
        ict = (first.get("commitInfo") or {}).get("inCommitTimestamp")
        if ict is not None and int(ict) != commit.commit_timestamp:
            raise StagedCommitError(
                f"{store.display(name)}: in-commit timestamp {ict} of version {commit.version} differs from "
                f"the coordinator's {commit.commit_timestamp}",
                version=commit.version,
                path=name,
            )


def _is_staged(commit: RatifiedCommit) -> bool:
    parsed = parse_log_path(commit.file_name)
    return parsed is not None and parsed.type is LogFileType.STAGED_COMMIT and parsed.version == commit.version


def _copy(store: LogStore, commit: RatifiedCommit, data: bytes) -> bool:
    """Create ``<v>.json``; True if we wrote it, False if identical bytes were already there."""
    target = commit_name(commit.version)
    try:
        store.put_if_absent(target, data)
        return True
    except LogFileExistsError:
        existing = store.read(target)
        if existing != data:
            raise PublishForkError(
                f"{store.display(target)} exists with content different from the ratified commit "
                f"{commit.file_name or '(inline)'}: the table has forked at version {commit.version}; "
                "nothing further was published or reported",
                version=commit.version,
                path=target,
            ) from None
        return False


def publish_ratified_commits(
    store: LogStore,
    client: CommitCoordinatorClient,
    *,
    up_to: int | None = None,
    table_conf: Mapping[str, str] | None = None,
    response: CommitsResponse | None = None,
) -> PublishResult:
    """Publish every ratified, unpublished commit up to ``up_to`` (default: the latest ratified).

    One ``get_commits`` call (unless ``response`` is given), one LIST of ``_delta_log``, one read
    and one create per commit, and one ``report_published`` at the end.
    """
    started = time.monotonic()
    if not (store.supports_atomic_create or store.allow_unsafe_writes):
        raise AtomicWriteUnsupportedError(
            f"{store.uri}: this storage cannot create files if absent atomically; refusing to publish "
            "(accept the risk explicitly with allow_unsafe_writes)",
            path=store.log_dir,
        )
    # Ask the coordinator first, then LIST: a version it no longer tracks was reported after its
    # file was durable, so the listing that follows sees it (the reverse order races with other
    # publishers that publish and report in between).
    resp = response if response is not None else client.get_commits(store.uri, 0, up_to, table_conf=table_conf)
    files = list_log_files(store)
    published_max = files.latest_commit_version
    latest_ratified = max(resp.latest_table_version, published_max)
    target = latest_ratified if up_to is None else min(up_to, latest_ratified)
    commits = sorted((c for c in resp.commits if c.version <= target), key=lambda c: c.version)

    published: list[int] = []
    already: list[int] = []
    expected = None
    # Staged files are read concurrently up front (S3 round trips); writes stay strictly ordered.
    names = [c.file_name for c in commits if c.inline_content is None and _is_staged(c)]
    try:
        prefetched = store.read_many(names)
    except (FileNotFoundError, OSError):
        prefetched = {}  # read one by one below, so a missing file gets its typed error
    for c in commits:
        if expected is not None and c.version != expected:
            raise StagedCommitError(
                f"{store.uri}: the coordinator's ratified commits are not contiguous ({expected} missing)",
                version=expected,
            )
        if expected is None and c.version > published_max + 1:
            raise StagedCommitError(
                f"{store.uri}: version {c.version} is ratified but {commit_name(published_max + 1)} is "
                "neither published nor tracked by the coordinator; refusing to publish out of order",
                version=published_max + 1,
                path=commit_name(published_max + 1),
            )
        data = read_ratified_commit(store, c, prefetched)
        validate_commit_bytes(store, c, data)
        (published if _copy(store, c, data) else already).append(c.version)
        expected = c.version + 1

    latest_published = max(published_max, commits[-1].version if commits else -1)
    reported = None
    # Report when the coordinator still tracks something we now know is durable (including commits
    # a crashed run copied but never reported).
    if any(c.version <= latest_published for c in resp.commits):
        client.report_published(store.uri, latest_published, table_conf=table_conf)
        reported = latest_published
    return PublishResult(
        table_uri=store.uri,
        published=published,
        already_published=already,
        latest_ratified_version=latest_ratified,
        latest_published_version=latest_published,
        reported_version=reported,
        seconds=round(time.monotonic() - started, 6),
    )
