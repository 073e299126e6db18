"""What ``LogStore`` needs to know about an fsspec file system: which kind it is, a file's
modification time whatever the backend calls it, and whether an error is a failed write
precondition (a conditional create that lost)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import fsspec

__all__ = ["is_local_fs", "is_memory_fs", "mtime_ms", "is_precondition_failure"]


def is_local_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem  # loaded already: the caller built `fs`

    return isinstance(fs, LocalFileSystem)


def is_memory_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.memory import MemoryFileSystem

    return isinstance(fs, MemoryFileSystem)


def mtime_ms(fs: fsspec.AbstractFileSystem, info: Mapping[str, Any]) -> int:
    """Modification time in epoch ms from an fsspec ``info`` dict, whatever the backend calls it."""
    if "mtime" in info:  # local
        return int(float(info["mtime"]) * 1000)
    for key in ("LastModified", "last_modified", "updated", "mtime"):  # s3 / gcs / generic
        value = info.get(key)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, (int, float)):
            return int(value * 1000) if value < 1e11 else int(value)
    if is_memory_fs(fs):  # memory `ls` only reports "created"
        entry = fs.store.get(info["name"]) or fs.store.get("/" + str(info["name"]).lstrip("/"))
        if entry is not None:
            return int(entry.modified.timestamp() * 1000)
    created = info.get("created")
    if isinstance(created, (int, float)):
        return int(created * 1000)
    return 0


def is_precondition_failure(exc: BaseException) -> bool:
    text = str(exc)
    return "PreconditionFailed" in text or "412" in text or "ConditionalRequestConflict" in text
