"""Typed ``stats_parsed`` and ``partitionValues_parsed`` columns from the ``add`` actions' strings.

Both run over whole Arrow arrays, never row by row: the statistics are parsed by one pyarrow JSON
read of the ``stats`` strings, and each partition value is found in the ``partitionValues`` maps
with numpy over the flattened keys.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .schema import StatsPlan

__all__ = ["parse_stats", "parse_partition_values", "map_first_value"]

# The stats JSON read runs in the calling thread unless the text is large: each hand-off to the CPU
# pool waits for a worker to be scheduled, which on a busy machine costs more than it saves for the
# few hundred KiB of one replay chunk. The checkpoint writer's row groups (32k rows, ~4 MiB of stats)
# are split in one block per CPU, so both cores parse while the Parquet writer waits.
_THREADED_BYTES = 2 << 20


def _read_options(size: int) -> pj.ReadOptions:
    if size < _THREADED_BYTES:
        return pj.ReadOptions(block_size=size + 1, use_threads=False)
    return pj.ReadOptions(block_size=min(size // (os.cpu_count() or 1) + 1, 1 << 30))


def _single(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def parse_stats(stats: pa.Array, plan: StatsPlan) -> pa.Array | None:
    """``stats`` JSON strings → ``plan.final_type`` (null where the string is null); None when
    pyarrow cannot read them with the plan's types (the caller then writes no parsed stats)."""
    n = len(stats)
    if n == 0:
        return pa.nulls(0, plan.final_type)
    text = stats if stats.null_count == 0 else pc.fill_null(stats, "{}")
    # One NDJSON buffer: the strings joined by newlines (stats are JSON objects: no raw newline).
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text), "\n")[0].as_buffer()
    read_fields = list(plan.read_type)
    try:
        table = pj.read_json(
            pa.BufferReader(joined),
            read_options=_read_options(joined.size),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(read_fields), unexpected_field_behavior="ignore"),
        )
        if table.num_rows != n:
            return None
        children = []
        for read, final in zip(read_fields, plan.final_type, strict=True):
            child = _single(table.column(read.name))
            children.append(child if child.type == final.type else child.cast(final.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    mask = stats.is_null() if stats.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(plan.final_type), mask=mask)


def map_first_value(maps: pa.Array, key: str) -> pa.Array:
    """``pc.map_lookup(maps, key, "first")`` without its per-row search: the value of the first
    entry named ``key`` in each map (null for a null map or a map without that key)."""
    if not isinstance(maps, pa.MapArray):
        return pc.map_lookup(maps, key, "first")
    n = len(maps)
    offsets = maps.offsets.to_numpy()  # positions in `values`, which ignores a slice's offset
    start, end = int(offsets[0]), int(offsets[-1])
    entries = maps.values.slice(start, end - start)
    keys, items = entries.field(0), entries.field(1)
    hits = np.flatnonzero(pc.equal(keys, key).to_numpy(zero_copy_only=False)) + start
    rows = np.searchsorted(offsets, hits, side="right") - 1
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]  # hits are in order, so a row's first hit is where its run starts
    index = np.full(n, -1, dtype=np.int64)
    index[rows[first]] = hits[first] - start
    if maps.null_count:
        index[maps.is_null().to_numpy(zero_copy_only=False)] = -1
    return items.take(pa.array(index, mask=index < 0))


def parse_partition_values(maps: pa.Array, partition_columns: list[str], typ: pa.StructType) -> pa.Array | None:
    """``partitionValues`` maps → ``typ`` (physical names); an empty string is null for
    non-string columns. None when a value cannot be cast to its column's type."""
    children = []
    try:
        for col, target in zip(partition_columns, typ, strict=True):
            physical = target.name
            values = map_first_value(maps, physical)
            if physical != col:  # older writers key partitionValues by logical name
                values = pc.coalesce(values, map_first_value(maps, col))
            if not pa.types.is_string(target.type):
                values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
            children.append(values.cast(target.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.StructArray.from_arrays(children, fields=list(typ))
