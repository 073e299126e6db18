"""Rewrite a bin of data files as one new file: the seam both engines share.

``BinTask`` is everything one task needs (plain, picklable values: a Spark executor receives it as
is); ``write_bin`` reads the bin's files one row group at a time with their deletion vectors
applied, writes one Parquet file with a ``DelayedCommitProtocol`` name into the partition's
directory, collects delta-spark's statistics on the way, and returns the ``add`` action as the
task's commit message (``None`` when every row of the bin was deleted: the bin is only removed).
Nothing is visible until the driver commits; a failed task's file is referenced by no version.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._runtime.pipeline import prefetched
from .files import DataFiles
from .paths import encode_add_path, new_data_file_path
from .reader import SMALL_FILE_BYTES, SourceFile, iter_live_rows, iter_small_files
from .schema import TableConformer, data_schema
from .shared_reads import AHEAD, read_in_slices, slices_by_size
from .stats import StatsCollector, StatsConfig, stats_leaves

__all__ = ["BinTask", "RowTracking", "write_bin", "ROW_GROUP_ROWS", "ROW_GROUP_BYTES"]

ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 32 << 20


@dataclass(frozen=True)
class RowTracking:
    """Row tracking's materialised columns: each kept row keeps its row id and row commit version."""

    row_id_column: str
    commit_version_column: str
    base_row_id: int  # the new file's baseRowId (the table's high-water mark + 1)


@dataclass(frozen=True)
class BinTask:
    """One output file's worth of work (see the module docstring)."""

    sources: tuple[SourceFile, ...]
    partition_values: Mapping[str, str | None]
    table_schema: Mapping[str, Any]  # the metaData's schema (JSON)
    partition_columns: tuple[str, ...]
    column_mapping_mode: str = "none"
    codec: str = "snappy"
    stats: StatsConfig = field(default_factory=StatsConfig)
    materialize_partition_columns: bool = False
    row_tracking: RowTracking | None = None
    split: int = 0
    row_group_rows: int = ROW_GROUP_ROWS
    row_group_bytes: int = ROW_GROUP_BYTES


def _partition_array(value: str | None, typ: pa.DataType, n: int) -> pa.Array:
    if value is None or value == "":
        return pa.nulls(n, typ)
    if pa.types.is_timestamp(typ):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if typ.tz is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        scalar = pa.scalar(parsed, type=typ)
    else:
        scalar = pa.scalar(value).cast(typ)
    return pa.repeat(scalar, n) if n else pa.array([], typ)


def write_bin(files: DataFiles, task: BinTask, *, spare_core: Callable[[], bool] | None = None) -> dict[str, Any] | None:
    """Rewrite ``task``'s sources as one file (see the module docstring). ``spare_core`` is asked
    between source groups whether a spare core may help read the rest (``_source_tables``; once
    yes, yes until the bin ends); without it, or until it says yes, one thread reads and writes."""
    ds = data_schema(task.table_schema, task.partition_columns, task.column_mapping_mode)
    read_target = ds.without_partitions()
    part_fields = [f for f in ds.schema if f.name in ds.partition_columns]
    physical_of = {logical: ds.logical_to_physical[logical] for logical in task.partition_columns}
    out_fields = list(read_target)
    rt = task.row_tracking
    if rt is not None:
        out_fields += [pa.field(rt.row_id_column, pa.int64()), pa.field(rt.commit_version_column, pa.int64())]
    if task.materialize_partition_columns:
        out_fields += part_fields
    out_schema = pa.schema(out_fields)
    stats = StatsCollector(stats_leaves(task.table_schema, task.partition_columns, task.stats), task.stats)
    stats.defer_minmax_to_parquet(out_schema)
    types = {c: ds.types.get(c) for c in task.partition_columns}
    rel = new_data_file_path(
        task.partition_columns, task.partition_values, codec=task.codec, split=task.split,
        column_mapping=task.column_mapping_mode != "none", types={k: v for k, v in types.items() if isinstance(v, str)},
    )
    handle = None
    writer: pq.ParquetWriter | None = None
    buffer: list[pa.Table] = []
    buffered_rows = buffered_bytes = 0

    def flush() -> None:
        nonlocal writer, handle, buffer, buffered_rows, buffered_bytes
        if not buffer:
            return
        table = pa.concat_tables(buffer)
        # statistics once per buffer, not per source file: one min/max kernel call over all its
        # chunks instead of one per 50 KB file (the bins of small files are what OPTIMIZE rewrites)
        stats.update(table)
        if writer is None:
            handle = files.open_output(rel)
            writer = pq.ParquetWriter(
                handle, out_schema, compression=task.codec if task.codec != "uncompressed" else "none",
                version="2.6", coerce_timestamps="us", allow_truncated_timestamps=False, store_schema=False,
                write_statistics=True, use_dictionary=dictionary_columns(table),
            )
        writer.write_table(table, row_group_size=task.row_group_rows)
        buffer, buffered_rows, buffered_bytes = [], 0, 0

    def take(table: pa.Table) -> None:
        nonlocal buffered_rows, buffered_bytes
        if task.materialize_partition_columns:
            for f, logical in zip(part_fields, task.partition_columns, strict=True):
                table = table.append_column(f, _partition_array(task.partition_values.get(physical_of[logical]), f.type, table.num_rows))
        table = table.cast(out_schema) if table.schema != out_schema else table
        buffer.append(table)
        buffered_rows += table.num_rows
        buffered_bytes += table.get_total_buffer_size()
        if buffered_rows >= task.row_group_rows or buffered_bytes >= task.row_group_bytes:
            flush()

    tables = _source_tables(files, task, read_target, TableConformer(read_target, ds.match_by_id), ds.match_by_id, spare_core or _alone)
    try:
        with closing(tables):  # on a failure, a helping thread stops before the file is deleted
            for table in tables:
                take(table)
        flush()
        if writer is None:
            return None  # every row of the bin was deleted
        writer.close()
        written = files.finish(rel, handle)
        stats.merge_parquet_statistics(writer.writer.metadata, lambda rg, name: _read_back(files, rel, rg, name))
    except BaseException:
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the original error is what matters
                pass
        if handle is not None:
            try:
                handle.close()
            except Exception:  # noqa: BLE001
                pass
            files.delete_quietly(rel)
        raise
    add: dict[str, Any] = {
        "path": encode_add_path(rel),
        "partitionValues": dict(task.partition_values),
        "size": written.size,
        "modificationTime": written.modification_time or int(time.time() * 1000),
        "dataChange": False,
        "stats": stats.to_json(),
    }
    if rt is not None:
        add["baseRowId"] = rt.base_row_id
    return add


def _source_tables(files: DataFiles, task: BinTask, read_target: pa.Schema, conformer: TableConformer, match_by_id: bool,
                   helped: Callable[[], bool]) -> Generator[pa.Table, None, None]:
    """The bin's live rows in source order, conformed to ``read_target`` (with row tracking's
    materialised columns when the table has them). Once ``helped()``, a second thread reads too:
    small files in shared slices (``shared_reads``), other files a row group ahead."""
    rt = task.row_tracking
    group_bytes = task.row_group_bytes // AHEAD  # a row group is the read helper's reach
    for fast, run in _runs(files, task, match_by_id):
        if fast:  # many small files, read whole and conformed a group at a time
            slices = slices_by_size(run, lambda s: s.size, group_bytes)

            def read(i: int, slices: list[list[SourceFile]] = slices) -> list[pa.Table]:
                return list(iter_small_files(files, slices[i], read_target, conformer=conformer, group_bytes=group_bytes))

            yield from read_in_slices(len(slices), read, helped)
            continue
        tables = _live_tables(files, run, read_target, conformer, match_by_id, rt)
        for table in tables:
            yield table
            if helped():
                yield from prefetched(tables, 1)
                break


def _live_tables(files: DataFiles, run: Sequence[SourceFile], read_target: pa.Schema, conformer: TableConformer, match_by_id: bool,
                 rt: RowTracking | None) -> Generator[pa.Table, None, None]:
    extra = (rt.row_id_column, rt.commit_version_column) if rt is not None else ()
    for src in run:
        for live in iter_live_rows(files, src, read_target, match_by_id=match_by_id, with_row_index=rt is not None,
                                   extra_columns=extra, conformer=conformer):
            yield live.table if rt is None else _materialise_row_tracking(live.table, live.row_index, src, rt)


def _alone() -> bool:
    return False


def _read_back(files: DataFiles, rel: str, row_group: int, column: str) -> pa.ChunkedArray:
    """One column of one row group of the file just written (its statistics have no bounds)."""
    handle, pre_buffer = files.open_parquet(rel)
    with handle:
        return pq.ParquetFile(handle, pre_buffer=pre_buffer).read_row_group(row_group, columns=[column], use_threads=False).column(0)


def _runs(files: DataFiles, task: BinTask, match_by_id: bool) -> list[tuple[bool, list[SourceFile]]]:
    """The task's sources in order, as runs of (read by ``iter_small_files``?, files): small local
    files without deletion vectors, unless row tracking needs each row's index or columns are
    matched by field id; every other file is read by ``iter_live_rows``."""
    runs: list[tuple[bool, list[SourceFile]]] = []
    eligible = files.is_local and task.row_tracking is None and not match_by_id
    for src in task.sources:
        fast = eligible and not src.deletion_vector and 0 < src.size <= SMALL_FILE_BYTES
        if runs and runs[-1][0] == fast:
            runs[-1][1].append(src)
        else:
            runs.append((fast, [src]))
    return runs


DICTIONARY_SAMPLE_ROWS = 8_192  # hashing 65,536 distinct values cost ~50 ms a bin (the hash table outgrows the cache); 8,192: ~3 ms
DICTIONARY_MAX_DISTINCT_SHARE = 0.5


def dictionary_columns(sample: pa.Table) -> list[str]:
    """The top-level columns worth dictionary encoding: few distinct values in the first rows.

    Dictionary encoding every column (pyarrow's default) triples the writer's time on
    high-cardinality columns (ids, measurements, timestamps) and makes those pages larger, until
    the writer falls back to plain encoding anyway; low-cardinality columns keep it."""
    head = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    out = []
    for name, column in zip(head.column_names, head.columns, strict=True):
        typ = column.type
        if pa.types.is_nested(typ) or pa.types.is_boolean(typ):
            out.append(name)
            continue
        n = len(column) - column.null_count
        if n == 0 or pc.count_distinct(column).as_py() <= n * DICTIONARY_MAX_DISTINCT_SHARE:
            out.append(name)
    return out


def _materialise_row_tracking(table: pa.Table, row_index: np.ndarray | None, src: SourceFile, rt: RowTracking) -> pa.Table:
    """Fill the materialised row-tracking columns where the file left them null: row id =
    ``baseRowId`` + physical row index, commit version = ``defaultRowCommitVersion``."""
    from ..errors import CorruptLogError

    assert row_index is not None
    ids = table.column(rt.row_id_column)
    versions = table.column(rt.commit_version_column)
    if ids.null_count:
        if src.base_row_id is None:
            raise CorruptLogError(f"row tracking: {src.path} has rows without a materialised row id and no baseRowId", path=src.path)
        fallback = pa.array(row_index.astype(np.int64) + np.int64(src.base_row_id))
        ids = pa.chunked_array([pa.compute.coalesce(ids.combine_chunks(), fallback)])
    if versions.null_count:
        if src.default_row_commit_version is None:
            raise CorruptLogError(f"row tracking: {src.path} has rows without a row commit version and no defaultRowCommitVersion", path=src.path)
        versions = pa.chunked_array([pa.compute.fill_null(versions.combine_chunks(), pa.scalar(int(src.default_row_commit_version), pa.int64()))])
    i, j = table.schema.get_field_index(rt.row_id_column), table.schema.get_field_index(rt.commit_version_column)
    table = table.set_column(i, pa.field(rt.row_id_column, pa.int64()), ids.cast(pa.int64()))
    return table.set_column(j, pa.field(rt.commit_version_column, pa.int64()), versions.cast(pa.int64()))


def partition_key(values: Mapping[str, str | None], columns: Sequence[str]) -> tuple[str | None, ...]:
    return tuple(values.get(c) for c in columns)
