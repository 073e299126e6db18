"""Verifying and copying a publish backlog in bounded memory, whatever its size.

Two passes keep publish's guarantees without holding the backlog: the first verifies every commit
of the run in order (``verify_ratified_commit``: recorded size and modification time, every line
one JSON action, the coordinator's in-commit timestamp, and the one strict validation of log
actions, ``validate_sources``) and keeps each one's size and SHA-256; the
second copies them strictly in order, each create-if-absent, and proves for each that the bytes it
copies are the bytes it verified (a staged file altered in between publishes nothing from it). So
an altered commit anywhere in the backlog still publishes nothing at all.

Memory: the bytes of the first ``KEEP_BYTES`` of the backlog are kept between the passes (a small
backlog is read once, as before); object stores fetch staged files ``WINDOW_BYTES`` at a time
(concurrently, in each pass); a staged file above ``WHOLE_FILE_LIMIT`` is never whole in memory —
it is verified in chunks and copied as a stream (``LogStore.put_if_absent_stream``: a temp file
linked into place locally, on object stores an upload completed with the store's create-if-absent
condition, ``object_creates``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from ...coordinators.base import RatifiedCommit
from ...deltalog.errors import LogFileExistsError, MissingCommitError
from ...deltalog.model.paths import commit_name
from ...deltalog.replay.commit_stream import PartitionKeys
from ...deltalog.storage import LogStore
from ..errors import StagedCommitError
from ..table.staged_commits import (
    WHOLE_FILE_LIMIT,
    StagedListing,
    VerifiedCommit,
    fork_error,
    is_staged_commit,
    published_matches,
    stream_verified_copy,
    verify_ratified_commit,
)

__all__ = ["KEEP_BYTES", "WINDOW_BYTES", "verify_backlog", "copy_verified", "copy_bytes"]

KEEP_BYTES = 32 << 20  # verified bytes kept for the copy pass
WINDOW_BYTES = 16 << 20  # staged bytes an object store fetches at once
_CREATE_ATTEMPTS = 3


def _windows(commits: Sequence[RatifiedCommit]) -> Iterator[Sequence[RatifiedCommit]]:
    """Consecutive runs of commits whose recorded sizes add up to at most ``WINDOW_BYTES`` (at least one)."""
    start, size = 0, 0
    for i, c in enumerate(commits):
        if i > start and size + c.file_size > WINDOW_BYTES:
            yield commits[start:i]
            start, size = i, 0
        size += c.file_size
    if start < len(commits):
        yield commits[start:]


def _prefetch(store: LogStore, commits: Sequence[RatifiedCommit]) -> dict[str, bytes]:
    """Staged files of one window, fetched concurrently from an object store (local reads refuse
    symbolic links one by one, so they are read where they are needed)."""
    names = [c.file_name for c in commits if c.inline_content is None and is_staged_commit(c) and c.file_size <= WHOLE_FILE_LIMIT]
    if not names or store.is_local:
        return {}
    try:
        return store.read_many(names)
    except (FileNotFoundError, OSError):
        return {}  # read one by one, so that a missing file gets its typed error


def verify_backlog(
    store: LogStore, commits: Sequence[RatifiedCommit], listing: StagedListing, keys: PartitionKeys | None = None
) -> list[VerifiedCommit]:
    """Every commit verified, in order, before anything is copied; bytes kept up to ``KEEP_BYTES``.

    Verified means both what the coordinator recorded and the one strict validation of log actions
    every reader applies (``strict=True``), from the very bytes (or chunks) whose digest the copy
    proves: a commit no reader could load is never copied into the published log. ``keys``: the
    published table's partition-value keys; each commit's adds are checked against the keys in
    effect (a metaData of the backlog changes them from its commit on)."""
    out: list[VerifiedCommit] = []
    kept = 0
    for window in _windows(commits):
        prefetched = _prefetch(store, window)
        for c in window:
            keep = c.inline_content is not None or kept + c.file_size <= KEEP_BYTES
            v = verify_ratified_commit(store, c, listing, prefetched, keep=keep, strict=True, keys=keys)
            if v.data is not None and c.inline_content is None:
                kept += v.size
            out.append(v)
    return out


def copy_verified(store: LogStore, verified: Sequence[VerifiedCommit]) -> Iterator[tuple[VerifiedCommit, bool]]:
    """Copy the verified commits to ``<v>.json`` strictly in order: (commit, True) when we wrote
    it, (commit, False) when identical bytes were there. Raises on the first fork or altered file."""
    by_version = {v.commit.version: v for v in verified}
    for window in _windows([v.commit for v in verified]):
        missing = [c for c in window if by_version[c.version].data is None]
        prefetched = _prefetch(store, missing)
        for c in window:
            v = by_version[c.version]
            if v.data is None and v.size > WHOLE_FILE_LIMIT:
                yield v, _copy_stream(store, v)
                continue
            data = v.data if v.data is not None else _reread(store, v, prefetched)
            yield v, copy_bytes(store, c, data)


def _reread(store: LogStore, v: VerifiedCommit, prefetched: dict[str, bytes]) -> bytes:
    """The staged bytes again (from this window's fetch or the file), proven to be the verified ones."""
    assert v.name is not None
    try:
        data = prefetched.pop(v.name) if v.name in prefetched else store.read(v.name)
    except FileNotFoundError:
        data = b""
    if not v.matches(len(data), hashlib.sha256(data).digest()):
        raise StagedCommitError(
            f"{store.display(v.name)}: staged file of ratified version {v.commit.version} changed or vanished after it was "
            "verified; nothing was published from it",
            version=v.commit.version,
            path=v.name,
        )
    return data


def copy_bytes(store: LogStore, commit: RatifiedCommit, data: bytes) -> bool:
    """Make ``<v>.json`` hold the ratified bytes; True if we wrote it, False if identical bytes were
    already there. A file that vanishes between our create and our read (a concurrent cleanup
    removed it below its checkpoint) is created again: a version is only ever counted published
    once its file was seen holding the ratified bytes."""
    target = commit_name(commit.version)
    for _ in range(_CREATE_ATTEMPTS):
        try:
            store.put_if_absent(target, data)
            return True
        except LogFileExistsError:
            try:
                existing = store.read(target)
            except FileNotFoundError:
                continue
        if existing != data:
            raise fork_error(store, commit, target)
        return False
    raise _kept_vanishing(store, commit.version, target)


def _copy_stream(store: LogStore, v: VerifiedCommit) -> bool:
    """``copy_bytes`` for a staged file too large to hold: streamed into place, compared by digest."""
    target = commit_name(v.commit.version)
    for _ in range(_CREATE_ATTEMPTS):
        try:
            store.put_if_absent_stream(target, lambda sink: stream_verified_copy(store, v, sink))
            return True
        except LogFileExistsError:
            try:
                same = published_matches(store, v, target)
            except FileNotFoundError:
                continue
        if not same:
            raise fork_error(store, v.commit, target)
        return False
    raise _kept_vanishing(store, v.commit.version, target)


def _kept_vanishing(store: LogStore, version: int, target: str) -> MissingCommitError:
    return MissingCommitError(
        f"{store.display(target)} kept vanishing between its create and its read ({_CREATE_ATTEMPTS} attempts); "
        f"version {version} was not published or reported",
        version=version, path=target,
    )
