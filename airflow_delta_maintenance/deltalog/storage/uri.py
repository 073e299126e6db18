"""Table URIs: one normalised form per table (``s3a://`` → ``s3://``, ``gcs://`` → ``gs://``,
absolute local paths) and the ``LogStore`` of a URI.

Azure tables keep the scheme they are given: ``abfss://container@account.dfs.core.windows.net/t``,
``abfs://…`` and ``az://container/t`` (the account then comes from the storage options) are all
adlfs on the Blob API; the account in the host is what Spark's ABFS driver needs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .log_store import LogStore

__all__ = ["normalize_table_uri", "open_table_storage", "AZURE_SCHEMES", "GCS_SCHEMES"]

# Hadoop-style schemes that mean plain S3 to fsspec; gcsfs registers gs and gcs alike.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
AZURE_SCHEMES = ("abfss", "abfs", "az")
GCS_SCHEMES = ("gs",)


def normalize_table_uri(uri: str) -> str:
    """``s3a://b/t`` → ``s3://b/t``, ``gcs://b/t`` → ``gs://b/t``; plain and ``file://`` paths
    become absolute local paths."""
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
    """Build a ``LogStore`` for a table URI: a plain path, ``file://``, ``s3://`` (``s3a://``),
    ``abfss://`` / ``abfs://`` / ``az://``, ``gs://`` (``gcs://``) or ``memory://``."""
    normalized = normalize_table_uri(uri)
    if "://" not in normalized and not storage_options:
        return LogStore(None, normalized, uri=normalized, allow_unsafe_writes=allow_unsafe_writes)
    options = dict(storage_options or {})
    if normalized.startswith("gs://"):
        # gcsfs.GCSFileSystem (what fsspec resolves gs:// to) may be its experimental subclass, which
        # asks the storage-control gRPC API for each bucket's layout before object calls: a repeated
        # RPC (and a warning) per operation for a principal without storage.buckets.getStorageLayout,
        # a 60 s wait against an emulator. The log needs flat-namespace object calls only.
        from gcsfs.core import GCSFileSystem

        fs = GCSFileSystem(**options)
        return LogStore(fs, GCSFileSystem._strip_protocol(normalized), uri=normalized, allow_unsafe_writes=allow_unsafe_writes)
    import fsspec

    fs, root = fsspec.core.url_to_fs(normalized, **options)
    return LogStore(fs, root, uri=normalized, allow_unsafe_writes=allow_unsafe_writes)
