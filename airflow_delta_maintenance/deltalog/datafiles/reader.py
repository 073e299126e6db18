"""Read one data file's live rows: its Parquet row groups conformed to the table's current schema,
with the rows its deletion vector deletes dropped.

Row groups are read one at a time (``iter_row_groups``), so a bin's memory is one row group per
input file, never the whole file. Each yields the row indexes it starts at, which row tracking
needs (a row's id is ``baseRowId`` + its physical index when not materialised).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow._parquet import ParquetReader  # ParquetFile's reader without its Python wrapper (per-file GIL time)

from ..errors import CorruptLogError
from .deletion_vectors import DeletionVectorDescriptor, load_deleted_rows
from .files import DataFiles
from .schema import SchemaMismatchError, TableConformer
from .stats import stats_num_records

__all__ = ["SourceFile", "LiveRows", "iter_live_rows", "iter_small_files", "source_file", "SMALL_FILE_BYTES"]

# ParquetReader.open as ``pq.ParquetFile`` (iter_live_rows) calls it: extension types (JSON, UUID)
# read as ParquetFile's default reads them, where this pyarrow has the option (pyproject allows
# pyarrow 19.0.1, whose open() refuses the keyword with a TypeError)
_EXTENSION_TYPES = {
    k: p.default for k, p in inspect.signature(pq.ParquetFile.__init__).parameters.items() if k == "arrow_extensions_enabled"
}

SMALL_FILE_BYTES = 4 << 20  # read by ``iter_small_files`` when local, without deletion vector


@dataclass(frozen=True)
class SourceFile:
    """What reading needs of an ``add`` action."""

    path: str  # add.path as in the log
    size: int
    partition_values: Mapping[str, str | None]
    deletion_vector: Mapping[str, Any] | None = None
    num_records: int | None = None  # physical rows per the stats, when known
    base_row_id: int | None = None
    default_row_commit_version: int | None = None


def source_file(add: Mapping[str, Any]) -> SourceFile:
    num = stats_num_records(add.get("stats"))
    return SourceFile(
        path=add["path"],
        size=int(add.get("size") or 0),
        partition_values=dict(add.get("partitionValues") or {}),
        deletion_vector=add.get("deletionVector") or None,
        num_records=None if num is None else int(num),
        base_row_id=add.get("baseRowId"),
        default_row_commit_version=add.get("defaultRowCommitVersion"),
    )


@dataclass
class LiveRows:
    """One row group's live rows: ``table`` (target schema), ``row_index`` (physical indexes of
    the kept rows in the file, uint64) when asked for."""

    table: pa.Table
    row_index: np.ndarray | None


def iter_live_rows(
    files: DataFiles,
    src: SourceFile,
    target: pa.Schema,
    *,
    match_by_id: bool,
    with_row_index: bool = False,
    extra_columns: tuple[str, ...] = (),
    conformer: TableConformer | None = None,
) -> Iterator[LiveRows]:
    """The file's live rows, one row group at a time, as ``target`` (plus ``extra_columns`` read
    by name as they are, e.g. materialised row-tracking columns). A bin's files share one
    ``conformer`` (of ``target``)."""
    conform = conformer or TableConformer(target, match_by_id)
    rel = files.resolve(src.path)
    deleted: np.ndarray | None = None
    if src.deletion_vector:
        dv = DeletionVectorDescriptor.from_dict(src.deletion_vector)
        deleted = load_deleted_rows(dv, files.resolve, files.read_range, data_file=src.path)
    handle, pre_buffer = files.open_parquet(rel)
    with handle:
        try:
            pf = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us", pre_buffer=pre_buffer)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CorruptLogError(f"data file {src.path} of {files.store.uri} is not readable Parquet: {exc}", path=src.path) from None
        meta = pf.metadata
        if src.num_records is not None and meta.num_rows != src.num_records:
            raise CorruptLogError(
                f"data file {src.path} holds {meta.num_rows} rows, its add action's stats say {src.num_records}", path=src.path
            )
        if deleted is not None and len(deleted) and int(deleted[-1]) >= meta.num_rows:
            raise CorruptLogError(f"deletion vector of {src.path} deletes row {int(deleted[-1])} of {meta.num_rows}", path=src.path)
        names = set(pf.schema_arrow.names)
        start = 0
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            raw = pf.read_row_group(rg, use_threads=False)
            conformed = conform(raw, src.path)
            for extra in extra_columns:
                col = raw.column(extra) if extra in names else pa.nulls(n, pa.int64())
                conformed = conformed.append_column(extra, col)
            index = None
            if deleted is not None and len(deleted):
                lo, hi = np.searchsorted(deleted, [start, start + n])
                if hi > lo:
                    keep = np.ones(n, dtype=bool)
                    keep[(deleted[lo:hi] - np.uint64(start)).astype(np.int64)] = False
                    conformed = conformed.filter(pa.array(keep))
                    if with_row_index:
                        index = np.nonzero(keep)[0].astype(np.uint64) + np.uint64(start)
            if with_row_index and index is None:
                index = np.arange(start, start + n, dtype=np.uint64)
            start += n
            if conformed.num_rows:
                yield LiveRows(conformed, index)


def iter_small_files(
    files: DataFiles, sources: Sequence[SourceFile], target: pa.Schema, *, conformer: TableConformer | None = None, group_bytes: int = 8 << 20,
) -> Iterator[pa.Table]:
    """The rows of many small local files without deletion vectors, as ``target``, in tables of
    about ``group_bytes``: each file read whole by pyarrow's Parquet reader on the calling thread
    (footer, decoding and I/O by one native call without the GIL; no pre-buffering through
    pyarrow's I/O pool, no ``ParquetFile`` wrapper and its per-file Python), consecutive files of
    one Parquet schema concatenated first and conformed to ``target`` once per group (the column
    plan of ``conformer``, matching by name). The Python between two native calls is what holds
    the GIL while the other workers wait for it (a fifth of their time, profiled), so it is kept to
    a few calls per file. pyarrow's dataset scanner does the same reading with twice the CPU (its
    futures and hand-offs per fragment, measured). Each file's row count is checked against its
    ``add`` statistics; a file that cannot be read is read again by ``iter_live_rows``, whose
    precise, typed error is raised."""
    if not files.is_local:
        raise ValueError("iter_small_files reads local tables only")
    conform = conformer or TableConformer(target, False)
    group: list[pa.Table] = []
    names: list[str] = []
    group_schema: pa.Schema | None = None
    size = 0
    for src, path in zip(sources, files.local_paths([s.path for s in sources]), strict=True):
        try:
            reader = ParquetReader()
            reader.open(path, pre_buffer=False, coerce_int96_timestamp_unit="us", **_EXTENSION_TYPES)
            raw = reader.read_all(use_threads=False)
            reader.close()
        except (pa.ArrowException, OSError) as exc:
            for _ in iter_live_rows(files, src, target, match_by_id=False):  # raises the file's own error
                pass
            raise CorruptLogError(f"data file {src.path} of {files.store.uri}: {exc}", path=src.path) from exc
        if src.num_records is not None and raw.num_rows != src.num_records:
            raise CorruptLogError(f"data file {src.path} holds {raw.num_rows} rows, its add action's stats say {src.num_records}", path=src.path)
        if group and (size >= group_bytes or raw.schema != group_schema):
            table = _conform_group(conform, group, names)
            group, names, size = [], [], 0
            if table.num_rows:
                yield table
        if not group:
            group_schema = raw.schema
        group.append(raw)
        names.append(src.path)
        size += src.size
    if group:
        table = _conform_group(conform, group, names)
        if table.num_rows:
            yield table


def _conform_group(conform: TableConformer, group: list[pa.Table], names: list[str]) -> pa.Table:
    """The files of one Parquet schema conformed at once; a file that does not conform is named
    in the error (the group is conformed again file by file to find it)."""
    try:
        return conform(pa.concat_tables(group) if len(group) > 1 else group[0], names[0])
    except SchemaMismatchError:
        if len(group) == 1:
            raise
        for table, name in zip(group, names, strict=True):
            conform(table, name)
        raise
