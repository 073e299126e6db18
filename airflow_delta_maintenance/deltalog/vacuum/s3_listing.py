"""FULL VACUUM's listing of a table root on S3 through Arrow's C++ client (``storage.native_s3``).

The same listing as the s3fs one in ``listing`` — the root's own entries with a delimiter, then one
recursive listing per visible top-level prefix, in parallel (Arrow releases the GIL while it
lists and parses) — and the same rules: names relative to the root, hidden names at any depth,
checksum shadows aside, directory markers skipped, sizes and mtimes as LIST gives them. Each
prefix's entries become Arrow columns at once, and ``listing.split_hidden`` sets hidden names apart.

Arrow gives keys as stored (no percent-decoding), as s3fs does: ``a%20b`` and ``a b`` are two names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..storage import LogStore
from ..storage.native_s3 import NativeS3
from .listing import FILE_SCHEMA, TableListing, _run_tasks, concat_listings, split_hidden
from .paths import HiddenNames, ListingStoppedError

__all__ = ["list_s3_native", "list_s3_prefix"]

_NS_PER_MS = 1_000_000


def list_s3_native(store: LogStore, native: NativeS3, hidden: HiddenNames, workers: int) -> TableListing:
    """``listing.list_table_files`` for an S3 table, listed by Arrow (see the module docstring)."""
    root = store.fs._strip_protocol(store.table_root).rstrip("/")
    head, prefixes = _root_entries(native, root, hidden)
    return concat_listings([head, *_run_tasks(lambda t: _prefix(native, root, t[0], hidden), [(p, 0) for p in prefixes], workers)])


def list_s3_prefix(store: LogStore, native: NativeS3, prefix: str, hidden: HiddenNames) -> TableListing:
    """``listing.list_prefix`` (one sub-directory of the root: a Spark task's share) by Arrow."""
    return _prefix(native, store.fs._strip_protocol(store.table_root).rstrip("/"), prefix, hidden)


def _selector(base: str, recursive: bool) -> Any:
    from pyarrow.fs import FileSelector

    return FileSelector(base, recursive=recursive, allow_not_found=True)


def _root_entries(native: NativeS3, root: str, hidden: HiddenNames) -> tuple[TableListing, list[str]]:
    from pyarrow.fs import FileType

    infos = native.client().get_file_info(_selector(root, recursive=False))
    cut = len(root) + 1
    prefixes = []
    files = []
    for info in infos:
        name = info.path[cut:]
        if info.type == FileType.Directory:
            if name and not hidden(name):
                prefixes.append(name)
        elif info.type == FileType.File and name:
            files.append(info)
    return _columns(files, cut, hidden), prefixes


def _prefix(native: NativeS3, root: str, prefix: str, hidden: HiddenNames) -> TableListing:
    if hidden.stopped:
        raise ListingStoppedError(f"listing of {root}/{prefix} stopped")
    infos = native.client().get_file_info(_selector(f"{root}/{prefix}", recursive=True))
    return _columns([i for i in infos if i.is_file], len(root) + 1, hidden)


def _columns(files: Sequence[Any], cut: int, hidden: HiddenNames) -> TableListing:
    """Arrow columns of ``files`` (Arrow ``FileInfo``s of objects), hidden names set apart."""
    paths = pc.utf8_slice_codeunits(pa.array([f.path for f in files], pa.string()), cut)
    sizes = pa.array([f.size for f in files], pa.int64())
    mtimes = pc.divide(pa.array([f.mtime_ns for f in files], pa.int64()), _NS_PER_MS)
    visible, shadows = split_hidden(pa.table([paths, sizes, mtimes], schema=FILE_SCHEMA), hidden)
    return TableListing(files=visible, shadows=shadows)
