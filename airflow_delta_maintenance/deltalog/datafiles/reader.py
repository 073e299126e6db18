"""Read one data file's live rows: its Parquet row groups conformed to the table's current schema,
with the rows its deletion vector deletes dropped.

Row groups are read one at a time (``iter_row_groups``), so a bin's memory is one row group per
input file, never the whole file. Each yields the row indexes it starts at, which row tracking
needs (a row's id is ``baseRowId`` + its physical index when not materialised).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError
from .deletion_vectors import DeletionVectorDescriptor, load_deleted_rows
from .files import DataFiles
from .schema import TableConformer

__all__ = ["SourceFile", "LiveRows", "iter_live_rows", "iter_small_files", "source_file", "SMALL_FILE_BYTES"]

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
    import json

    num = None
    stats = add.get("stats")
    if stats:
        try:
            num = json.loads(stats).get("numRecords")
        except ValueError:
            num = None
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


def iter_small_files(files: DataFiles, sources: Sequence[SourceFile], target: pa.Schema, *, conformer: TableConformer | None = None) -> Iterator[pa.Table]:
    """The rows of many small local files without deletion vectors, as ``target``, one table per
    file: each file read whole by one native call on the calling thread (footer, decoding and
    I/O without the GIL), with only a few Python calls per file — no row groups one by one, no
    pre-buffering through pyarrow's I/O pool, and the column plan of ``conformer`` (matching by
    name) worked out once per source schema. pyarrow's dataset scanner did the same work with 30%
    more CPU (its per-fragment futures and thread hand-offs) and on its own two threads, so a
    worker spent most of its time waiting for it; read here, each worker thread is one more
    runnable reader. Each file's row count is checked against its ``add`` statistics; a file that
    cannot be read is read again by ``iter_live_rows``, whose precise, typed error is raised."""
    if not files.is_local:
        raise ValueError("iter_small_files reads local tables only")
    conform = conformer or TableConformer(target, False)
    for src in sources:
        path = files.path(files.resolve(src.path))
        try:
            with pa.OSFile(path) as handle:
                raw = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us", pre_buffer=False).read(use_threads=False)
        except (pa.ArrowException, OSError) as exc:
            for _ in iter_live_rows(files, src, target, match_by_id=False):  # raises the file's own error
                pass
            raise CorruptLogError(f"data file {src.path} of {files.store.uri}: {exc}", path=src.path) from exc
        if src.num_records is not None and raw.num_rows != src.num_records:
            raise CorruptLogError(f"data file {src.path} holds {raw.num_rows} rows, its add action's stats say {src.num_records}", path=src.path)
        table = conform(raw, src.path)
        if table.num_rows:
            yield table
