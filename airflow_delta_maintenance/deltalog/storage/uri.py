"""Table URIs: one normalised form per table (``s3a://`` → ``s3://``, absolute local paths) and the
``LogStore`` of a URI."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .log_store import LogStore

__all__ = ["normalize_table_uri", "open_table_storage"]

# Hadoop-style schemes that mean plain S3 to fsspec.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def normalize_table_uri(uri: str) -> str:
    """``s3a://b/t`` → ``s3://b/t``; plain and ``file://`` paths become absolute local paths."""
    uri = uri.rstrip("/") or "/"
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return os.path.abspath(os.path.expanduser(uri))
    scheme = _SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    if scheme == "file":
        return os.path.abspath(rest)
    return f"{scheme}://{rest}"


def open_table_storage(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, allow_unsafe_writes: bool = False
) -> LogStore:
    """Build a ``LogStore`` for a table URI (plain path, ``file://``, ``s3://``/``s3a://``, ``memory://``)."""
    normalized = normalize_table_uri(uri)
    if "://" not in normalized and not storage_options:
        return LogStore(None, normalized, uri=normalized, allow_unsafe_writes=allow_unsafe_writes)
    import fsspec

    fs, root = fsspec.core.url_to_fs(normalized, **dict(storage_options or {}))
    return LogStore(fs, root, uri=normalized, allow_unsafe_writes=allow_unsafe_writes)
