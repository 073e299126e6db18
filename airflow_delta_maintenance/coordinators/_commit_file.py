"""Serialising a proposed commit: NDJSON with ``commitInfo`` first carrying the in-commit timestamp."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["commit_bytes", "next_in_commit_timestamp", "staged_name", "published_name"]


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
