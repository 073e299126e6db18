"""An inventory instead of a listing (delta-spark's ``VACUUM … USING INVENTORY``).

Two inputs are read into the same ``TableListing`` a listing gives:

- **an S3 Inventory report**: its ``manifest.json`` (``fileFormat`` CSV or Parquet, the CSV's
  ``fileSchema``, the data files in the destination bucket). CSV keys are URL-encoded and
  decoded here; only current versions count (``IsLatest``, no delete markers). Keys are matched
  to the table by its bucket and prefix.
- **a listing file** (Parquet, CSV with a header, or JSON lines; a file or a directory of them)
  with delta-spark's inventory schema: ``path`` (the fully qualified URI), ``length``, ``isDir``,
  ``modificationTime`` (epoch ms).

Rows outside the table root, hidden names and the log are dropped as a listing drops them.
An inventory is a snapshot of the past: files written since are simply not in it (they are young
anyway), and execution checks every planned file against the storage before deleting it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOptionError
from ..storage import LogStore, normalize_table_uri
from .listing import DIR_SCHEMA, FILE_SCHEMA, TableListing, split_hidden
from .paths import HiddenNames

__all__ = ["read_inventory", "INVENTORY_COLUMNS"]

INVENTORY_COLUMNS = ("path", "length", "isDir", "modificationTime")


def _open_fs(uri: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(normalize_table_uri(uri), **dict(storage_options or {}))
    return fs, path


def _s3_manifest(uri: str, store: LogStore, storage_options: Mapping[str, Any] | None) -> pa.Table:
    """(key, size, mtime) of the table's current objects in an S3 Inventory report."""
    fs, path = _open_fs(uri, storage_options)
    try:
        manifest = json.loads(fs.cat_file(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidOptionError(f"inventory {uri}: manifest.json is not valid JSON ({exc})", option="inventory") from None
    fmt = str(manifest.get("fileFormat", "")).upper()
    dest = str(manifest.get("destinationBucket", "")).rsplit(":::", 1)[-1]
    files = [f["key"] for f in manifest.get("files", [])]
    if fmt not in ("CSV", "PARQUET") or not dest:
        raise InvalidOptionError(f"inventory {uri}: fileFormat {fmt or '?'} is not supported (CSV or Parquet)", option="inventory")
    bucket, _, prefix = normalize_table_uri(store.uri).partition("://")[2].partition("/")
    want = prefix.rstrip("/") + "/"
    parts = []
    for key in files:
        data_path = f"{dest}/{key}"
        if fmt == "CSV":
            import pyarrow.csv as pcsv

            names = [c.strip() for c in str(manifest.get("fileSchema", "")).split(",")]
            with fs.open(data_path, "rb", compression="gzip" if key.endswith(".gz") else None) as f:
                table = pcsv.read_csv(f, read_options=pcsv.ReadOptions(column_names=names), convert_options=pcsv.ConvertOptions(
                    column_types={n: pa.string() for n in names}))
            rename = {"Bucket": "bucket", "Key": "key", "Size": "size", "LastModifiedDate": "last_modified_date", "IsLatest": "is_latest",
                      "IsDeleteMarker": "is_delete_marker"}
            table = table.rename_columns([rename.get(n, n) for n in table.column_names])
            keys = pa.array([unquote_plus(k) for k in table.column("key").to_pylist()], pa.string())
            table = table.set_column(table.column_names.index("key"), "key", keys)
        else:
            import pyarrow.parquet as pq

            with fs.open(data_path, "rb") as f:
                table = pq.read_table(f)
        parts.append(_current_rows(table, bucket, want))
    return pa.concat_tables(parts) if parts else pa.table({"key": pa.array([], pa.string()), "size": pa.array([], pa.int64()), "mtime": pa.array([], pa.int64())})


def _flag(table: pa.Table, name: str) -> pa.Array | None:
    if name not in table.column_names:
        return None
    col = table.column(name)
    if pa.types.is_boolean(col.type):
        return col
    return pc.equal(pc.utf8_lower(col.cast(pa.string())), "true")


def _current_rows(table: pa.Table, bucket: str, prefix: str) -> pa.Table:
    mask = pc.and_(pc.equal(table.column("bucket").cast(pa.string()), bucket), pc.starts_with(table.column("key").cast(pa.string()), prefix))
    latest, marker = _flag(table, "is_latest"), _flag(table, "is_delete_marker")
    if latest is not None:
        mask = pc.and_(mask, pc.fill_null(latest, True))
    if marker is not None:
        mask = pc.and_(mask, pc.invert(pc.fill_null(marker, False)))
    table = table.filter(mask)
    modified = table.column("last_modified_date")
    if not pa.types.is_timestamp(modified.type):  # CSV: ISO 8601 text in UTC
        modified = pc.cast(modified.cast(pa.string()), pa.timestamp("ms", tz="UTC"))
    mtime = pc.cast(pc.cast(modified, pa.timestamp("ms", tz="UTC")), pa.int64())
    keys = pc.utf8_slice_codeunits(table.column("key").cast(pa.string()), len(prefix))
    return pa.table({"key": keys, "size": pc.cast(table.column("size"), pa.int64()), "mtime": mtime})


def _listing_file(uri: str, store: LogStore, storage_options: Mapping[str, Any] | None) -> tuple[pa.Table, pa.Table]:
    """(files (key, size, mtime), dirs (key, mtime)) of the table from a delta-spark-schema file."""
    import pyarrow.dataset as ds

    fs, path = _open_fs(uri, storage_options)
    fmt = "parquet" if ".parquet" in path or fs.isdir(path) else "csv" if path.endswith(".csv") else "json"
    table = ds.dataset(path, filesystem=fs, format=fmt).to_table()
    missing = [c for c in INVENTORY_COLUMNS if c not in table.column_names]
    if missing:
        raise InvalidOptionError(f"inventory {uri}: columns {', '.join(missing)} are missing (needed: {', '.join(INVENTORY_COLUMNS)})", option="inventory")
    paths = table.column("path").cast(pa.string())
    for alias, canonical in (("s3a://", "s3://"), ("s3n://", "s3://"), ("file:///", "/"), ("file:/", "/")):
        paths = pc.replace_substring_regex(paths, f"^{alias}", canonical)
    root = normalize_table_uri(store.uri).rstrip("/") + "/"
    inside = pc.starts_with(paths, root)
    rel = pc.utf8_slice_codeunits(paths.filter(inside), len(root))
    rows = table.filter(inside)
    is_dir = pc.fill_null(rows.column("isDir").cast(pa.bool_()), False)
    mtime = rows.column("modificationTime").cast(pa.int64())
    files = pa.table({"key": rel.filter(pc.invert(is_dir)), "size": rows.column("length").cast(pa.int64()).filter(pc.invert(is_dir)), "mtime": mtime.filter(pc.invert(is_dir))})
    dirs = pa.table({"key": pc.utf8_rtrim(rel.filter(is_dir), "/"), "mtime": mtime.filter(is_dir)})
    return files, dirs


def read_inventory(source: str, store: LogStore, hidden: HiddenNames, storage_options: Mapping[str, Any] | None = None) -> TableListing:
    """The table's files according to an inventory (see the module docstring)."""
    if source.rstrip("/").endswith("manifest.json"):
        files, dirs = _s3_manifest(source, store, storage_options), pa.table({"key": pa.array([], pa.string()), "mtime": pa.array([], pa.int64())})
    else:
        files, dirs = _listing_file(source, store, storage_options)
    keys = files.column("key").to_pylist()
    key = files.column("key").cast(pa.string())
    named = pc.and_(pc.not_equal(key, ""), pc.invert(pc.ends_with(key, "/")))  # a directory marker is no file
    out, shadow_table = split_hidden(pa.table([key, files.column("size"), files.column("mtime")], schema=FILE_SCHEMA).filter(named), hidden)
    # A directory row is empty when no file row lies below it.
    parents = {k.rsplit("/", 1)[0] for k in keys if "/" in k}
    ancestors = {"/".join(p.split("/")[: i + 1]) for p in parents for i in range(p.count("/") + 1)}
    d_keys, d_mtimes = dirs.column("key").to_pylist(), dirs.column("mtime").to_pylist()
    empty = [(k, m) for k, m in zip(d_keys, d_mtimes, strict=True) if k and k not in ancestors and not hidden.path_hidden(k)]
    empty_dirs = pa.table([pa.array([k for k, _ in empty], pa.string()), pa.array([m for _, m in empty], pa.int64())], schema=DIR_SCHEMA)
    return TableListing(files=out, empty_dirs=empty_dirs, shadows=shadow_table, source="inventory")
