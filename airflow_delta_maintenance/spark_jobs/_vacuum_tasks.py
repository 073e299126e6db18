"""What an executor of the VACUUM job runs (a module of its own so that Spark pickles the functions
by reference, not the job's ``__main__`` by value)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from functools import lru_cache

import pyarrow.parquet as pq

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from airflow_delta_maintenance.deltalog.vacuum.execute import delete_files
from airflow_delta_maintenance.deltalog.vacuum.listing import list_prefix, listing_to_arrow
from airflow_delta_maintenance.deltalog.vacuum.paths import HiddenNames

__all__ = ["list_prefixes", "delete_row_groups", "parquet_bytes"]


@lru_cache(maxsize=4)
def _store(table_uri: str, options_json: str) -> LogStore:
    """One store per executor process and table (its filesystem is reused by every task)."""
    return open_table_storage(table_uri, json.loads(options_json))


def parquet_bytes(table: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def list_prefixes(table_uri: str, options_json: str, run_dir: str, partition_columns: list[str], iceberg: bool,
                  items: Iterable[tuple[int, tuple[str, int]]]) -> Iterator[tuple[int, str, int]]:
    """Each (index, (prefix, mtime)) listed and written as ``<run_dir>/listing/part-<index>.parquet``
    (created if absent: a retried task finds its own part); yields (index, part name, files)."""
    store = _store(table_uri, options_json)
    hidden = HiddenNames(partition_columns, iceberg_metadata_hidden=iceberg)
    for index, (prefix, mtime) in items:
        listing = list_prefix(store, prefix, mtime, hidden)
        name = f"{run_dir}/listing/part-{index:06d}.parquet"
        try:
            store.put_if_absent(name, parquet_bytes(listing_to_arrow(listing)))
        except LogFileExistsError:
            pass  # a retried or speculative attempt of this task wrote the same listing
        yield index, name, listing.num_files


def delete_row_groups(table_uri: str, options_json: str, name: str, groups: Iterable[int]) -> Iterator[int]:
    """The paths of row groups ``groups`` of ``<run_dir>/delete.parquet`` deleted; yields how many
    were deleted (already gone: not counted, as on the worker)."""
    store = _store(table_uri, options_json)
    with store.open_input(name) as f:
        reader = pq.ParquetFile(f)
        for g in groups:
            paths = reader.read_row_group(g, columns=["path"]).column("path").to_pylist()
            yield delete_files(store, paths, workers=4)
