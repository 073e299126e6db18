"""Ratified commits' bytes, verified before anything relies on them.

A staged commit is trusted only when it is exactly what the coordinator ratified: its name is a
staged commit of that version, it is a regular file inside the table (the store refuses a symlink
in place of the file or of its directory), its size equals the size the coordinator recorded, its modification time equals the
recorded one where both sides know it, every line is one JSON action, and the first line's
in-commit timestamp is the coordinator's. Anything else is a ``StagedCommitError`` naming the file
and version; nothing is published, reported or read into the table's state from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...coordinators.base import RatifiedCommit
from ...deltalog.model.paths import LEGACY_STAGED_DIR, STAGED_DIR, LogFileType, parse_log_path
from ...deltalog.storage import FileStat, LogStore
from ..errors import MissingStagedCommitError, PublishForkError, StagedCommitError

__all__ = ["fork_error", "is_staged_commit", "StagedListing", "list_staged", "read_ratified_commit", "validate_commit_bytes", "MTIME_TOLERANCE_MS"]

# Coordinators record times in ms; Hadoop truncates, a float round trip may land 1 ms off.
MTIME_TOLERANCE_MS = 1


@dataclass(frozen=True)
class StagedListing:
    """One LIST of each staged-commit directory: name (relative to ``_delta_log``) → stat."""

    stats: Mapping[str, FileStat]

    def get(self, name: str) -> FileStat | None:
        return self.stats.get(name)


def is_staged_commit(commit: RatifiedCommit) -> bool:
    parsed = parse_log_path(commit.file_name)
    return parsed is not None and parsed.type is LogFileType.STAGED_COMMIT and parsed.version == commit.version


def fork_error(store: LogStore, commit: RatifiedCommit, name: str) -> PublishForkError:
    """``name`` (a published ``<v>.json``) holds bytes other than the ratified commit's."""
    return PublishForkError(
        f"{store.display(name)} exists with content different from the ratified commit "
        f"{commit.file_name or '(inline)'}: the table has forked at version {commit.version}; "
        "nothing further was published or reported",
        version=commit.version,
        path=name,
    )


def list_staged(store: LogStore) -> StagedListing:
    """Both staged directories (current and legacy), listed once each (no-follow: a symlinked
    directory or file there is a ``SymlinkInLogError``)."""
    stats: dict[str, FileStat] = {}
    for directory in (STAGED_DIR, LEGACY_STAGED_DIR):
        for s in store.list_dir(directory):
            stats[s.name] = s
    return StagedListing(stats)


def _check_recorded(store: LogStore, commit: RatifiedCommit, name: str, data: bytes, stat: FileStat | None) -> None:
    if len(data) != commit.file_size:
        raise StagedCommitError(
            f"{store.display(name)}: staged file of ratified version {commit.version} has {len(data)} bytes, "
            f"but the coordinator recorded {commit.file_size}",
            version=commit.version,
            path=name,
        )
    recorded, actual = commit.file_modification_time, (stat.modification_time if stat is not None else 0)
    if recorded > 0 and actual > 0 and abs(recorded - actual) > MTIME_TOLERANCE_MS:
        raise StagedCommitError(
            f"{store.display(name)}: staged file of ratified version {commit.version} was modified at {actual} ms, "
            f"but the coordinator recorded {recorded} ms (rewritten after ratification?)",
            version=commit.version,
            path=name,
        )


def read_ratified_commit(
    store: LogStore,
    commit: RatifiedCommit,
    listing: StagedListing | None = None,
    prefetched: Mapping[str, bytes] | None = None,
) -> bytes:
    """The verified bytes of a ratified commit: inline, or its staged file (see the module docstring).

    ``FileNotFoundError`` is turned into a ``StagedCommitError`` naming the missing file.
    """
    if commit.inline_content is not None:
        validate_commit_bytes(store, commit, commit.inline_content)
        return commit.inline_content
    parsed = parse_log_path(commit.file_name)
    if parsed is None or parsed.type is not LogFileType.STAGED_COMMIT or parsed.version != commit.version:
        raise StagedCommitError(
            f"{store.uri}: ratified commit {commit.version} points at {commit.file_name!r}, "
            "which is not a staged commit of that version under _staged_commits/ or _commits/",
            version=commit.version,
            path=commit.file_name,
        )
    # Coordinators that store bare names (DynamoDB's fsName) written by older delta-spark
    # releases staged into the legacy _commits/ directory.
    for name in (commit.file_name, f"{LEGACY_STAGED_DIR}/{parsed.filename}"):
        try:
            # the store never follows a symlink inside _delta_log (file or directory)
            data = prefetched[name] if prefetched is not None and name in prefetched else store.read(name)
        except FileNotFoundError:
            continue
        stat = (listing.get(name) if listing is not None else None) or store.stat(name)
        _check_recorded(store, commit, name, data, stat)
        validate_commit_bytes(store, commit, data)
        return data
    raise MissingStagedCommitError(
        f"{store.display(commit.file_name)}: staged file of ratified version {commit.version} is missing",
        version=commit.version,
        path=commit.file_name,
    )


def validate_commit_bytes(store: LogStore, commit: RatifiedCommit, data: bytes) -> None:
    """Every line is one JSON action object; the in-commit timestamp equals the coordinator's."""
    name = commit.file_name or f"<inline commit {commit.version}>"
    first: dict[str, Any] | None = None
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except (ValueError, RecursionError) as exc:
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
