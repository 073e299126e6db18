"""Serialising a proposed commit: NDJSON with ``commitInfo`` first carrying the in-commit timestamp."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .errors import CommitConflictError, CoordinatorError

__all__ = ["commit_bytes", "next_in_commit_timestamp", "staged_name", "published_name", "writer_for", "publish_version_zero"]


def next_in_commit_timestamp(previous: int | None, now_ms: int | None = None) -> int:
    """``max(wall clock, previous + 1)`` (PROTOCOL "In-Commit Timestamps")."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now if previous is None else max(now, previous + 1)


def commit_bytes(actions: Sequence[Mapping[str, Any]], in_commit_timestamp: int) -> bytes:
    """The commit file: ``commitInfo`` first (added if missing) with ``inCommitTimestamp`` set."""
    info: dict[str, Any] = {}
    rest = []
    for action in actions:
        if "commitInfo" in action and not info:
            info = dict(action["commitInfo"])
        elif "commitInfo" in action:
            raise ValueError("a commit holds at most one commitInfo action")
        else:
            rest.append(action)
    info.setdefault("timestamp", in_commit_timestamp)
    info["inCommitTimestamp"] = in_commit_timestamp
    lines = [{"commitInfo": info}, *rest]
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in lines).encode("utf-8")


def staged_name(version: int, legacy: bool = False) -> str:
    """``_staged_commits/<v>.<uuid>.json`` relative to ``_delta_log`` (``_commits/`` when legacy)."""
    return f"{'_commits' if legacy else '_staged_commits'}/{version:020d}.{uuid.uuid4()}.json"


def published_name(version: int) -> str:
    return f"{version:020d}.json"


def writer_for(factory: LogFileWriterFactory | None, normalize: Callable[[str], str], table_uri: str) -> tuple[str, LogFileWriter]:
    """(normalised table URI, its log writer); clients opened without storage cannot commit."""
    if factory is None:
        raise CoordinatorError("this coordinator client was opened without storage; it cannot stage commits")
    uri = normalize(table_uri)
    return uri, factory(uri)


def publish_version_zero(writer: LogFileWriter, uri: str, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
    """Version 0 is published directly, create-if-absent (PROTOCOL "Catalog-managed tables")."""
    ict = next_in_commit_timestamp(None)
    try:
        written = writer.write_new(published_name(0), commit_bytes(actions, ict))
    except FileExistsError:
        raise CommitConflictError(f"{uri}: {published_name(0)} already exists", version=0, retryable=False) from None
    return RatifiedCommit(0, ict, written.file_name, written.size, written.modification_time)
