"""Serialising a proposed commit: NDJSON with ``commitInfo`` first carrying the in-commit timestamp.

Shared by the three clients so that every coordinator writes the same bytes for the same actions.
A new coordinated table's ``protocol`` action is upgraded to table features here too
(``upgrade_protocol``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .base import LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .errors import CommitConflictError, CoordinatorError

__all__ = [
    "commit_bytes",
    "next_in_commit_timestamp",
    "previous_in_commit_timestamp",
    "staged_name",
    "published_name",
    "writer_for",
    "publish_version_zero",
    "STAGED_DIR",
    "LEGACY_STAGED_DIR",
    "upgrade_protocol",
]

STAGED_DIR = "_staged_commits"
LEGACY_STAGED_DIR = "_commits"  # the rejected managed-commits RFC and delta-spark 3.x


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def next_in_commit_timestamp(previous: int | None, now_ms: int | None = None) -> int:
    """``max(wall clock, previous + 1)`` (PROTOCOL "In-Commit Timestamps")."""
    now = wall_clock_ms() if now_ms is None else now_ms
    return now if previous is None else max(now, previous + 1)


def previous_in_commit_timestamp(writer: LogFileWriter, version: int) -> int | None:
    """The ICT of published ``<version>.json`` (first line), when the coordinator no longer tracks it.

    ``None`` when the file is missing or carries no ICT (the wall clock is then used alone).
    """
    if version < 0:
        return None
    try:
        data = writer.read(published_name(version))
    except OSError:  # FileNotFoundError included (LogFileWriter.read's contract)
        return None
    first = data.split(b"\n", 1)[0]
    try:
        info = json.loads(first).get("commitInfo") or {}
    except (ValueError, AttributeError):
        return None
    ict = info.get("inCommitTimestamp")
    return int(ict) if isinstance(ict, int) else None


def commit_bytes(actions: Sequence[Mapping[str, Any]], in_commit_timestamp: int) -> bytes:
    """The commit file: ``commitInfo`` first (added if missing) with ``inCommitTimestamp`` set.

    A ``txnId`` is added when missing: catalog-managed tables require one in every commit.
    """
    info: dict[str, Any] = {}
    rest = []
    seen_info = False
    for action in actions:
        if "commitInfo" in action:
            if seen_info:
                raise ValueError("a commit holds at most one commitInfo action")
            seen_info = True
            info = dict(action["commitInfo"])
        else:
            rest.append(action)
    info.setdefault("timestamp", in_commit_timestamp)
    info["inCommitTimestamp"] = in_commit_timestamp
    info.setdefault("txnId", str(uuid.uuid4()))
    lines = [{"commitInfo": info}, *rest]
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in lines).encode("utf-8")


def staged_name(version: int, legacy: bool = False) -> str:
    """``_staged_commits/<v>.<uuid>.json`` relative to ``_delta_log`` (``_commits/`` when legacy)."""
    return f"{LEGACY_STAGED_DIR if legacy else STAGED_DIR}/{version:020d}.{uuid.uuid4()}.json"


def published_name(version: int) -> str:
    return f"{version:020d}.json"


def writer_for(factory: LogFileWriterFactory | None, normalize: Callable[[str], str], table_uri: str) -> tuple[str, LogFileWriter]:
    """(normalised table URI, its log writer); clients opened without storage cannot commit."""
    if factory is None:
        raise CoordinatorError("this coordinator client was opened without storage; it cannot stage commits")
    uri = normalize(table_uri)
    return uri, factory(uri)


def publish_version_zero(writer: LogFileWriter, uri: str, actions: Sequence[Mapping[str, Any]], ict: int | None = None) -> RatifiedCommit:
    """Version 0 is published directly, create-if-absent (PROTOCOL "Catalog-managed tables")."""
    ict = next_in_commit_timestamp(None) if ict is None else ict
    try:
        written = writer.write_new(published_name(0), commit_bytes(actions, ict))
    except FileExistsError:
        raise CommitConflictError(f"{uri}: {published_name(0)} already exists", version=0, retryable=False) from None
    return RatifiedCommit(0, ict, written.file_name, written.size, written.modification_time)


# --- a new table's protocol, upgraded to table features (reader 3 / writer 7) ----------------------
# Coordinated and catalog-managed tables need named features (``coordinatedCommits-preview``,
# ``catalogManaged``, ``inCommitTimestamp``, …), which only exist from reader 3 / writer 7; the
# features implied by the legacy versions must then be listed explicitly (PROTOCOL "Table Features").

_IMPLIED_WRITER = ((2, "appendOnly"), (2, "invariants"), (3, "checkConstraints"), (4, "changeDataFeed"),
                   (4, "generatedColumns"), (5, "columnMapping"), (6, "identityColumns"))


def upgrade_protocol(protocol: Mapping[str, Any], reader_features: Iterable[str], writer_features: Iterable[str]) -> dict[str, Any]:
    """``protocol`` at (3, 7) with the given features added (reader features are also writer features)."""
    reader_v, writer_v = int(protocol.get("minReaderVersion", 1)), int(protocol.get("minWriterVersion", 2))
    implied_w = [f for v, f in _IMPLIED_WRITER if writer_v < 7 and writer_v >= v]
    implied_r = ["columnMapping"] if reader_v == 2 else []
    readers = set(protocol.get("readerFeatures") or []) | set(implied_r) | set(reader_features)
    writers = set(protocol.get("writerFeatures") or []) | set(implied_w) | set(writer_features) | readers
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(readers), "writerFeatures": sorted(writers)}
