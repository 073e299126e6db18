"""Typed ``stats_parsed`` and ``partitionValues_parsed`` columns from the ``add`` actions' strings.

Both run over whole Arrow arrays, never row by row: the statistics are parsed by pyarrow JSON
reads straight from the ``stats`` strings' bytes, and each partition value is found in the
``partitionValues`` maps with numpy over the flattened keys.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..model.schema import StatsPlan
from . import fast_stats

__all__ = ["parse_stats", "parse_partition_values", "map_first_value", "string_slices", "string_offsets"]

# Large inputs are split into one slice of rows per CPU, each read on its own thread (pyarrow's
# JSON reader releases the GIL): the checkpoint writer's row groups (32k rows, ~4 MiB of stats) are
# parsed on both cores while the Parquet writer waits. Below this size a thread hand-off costs more
# than it saves on a busy machine.
_THREADED_BYTES = 2 << 20


def _single(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def string_offsets(strings: pa.Array) -> np.ndarray:
    """The ``len + 1`` value offsets of a string array (into its data buffer)."""
    offset_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    itemsize = np.dtype(offset_type).itemsize
    return np.frombuffer(strings.buffers()[1], dtype=offset_type, count=len(strings) + 1, offset=strings.offset * itemsize)


def _string_bytes(strings: pa.Array) -> pa.Buffer:
    """The bytes of all ``strings`` back to back, without a copy (a string array stores them so)."""
    offsets = string_offsets(strings)
    data = strings.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    return data.slice(start, end - start) if data is not None else pa.py_buffer(b"")


def _read_json(strings: pa.Array, schema: pa.Schema) -> pa.Table | None:
    """One pyarrow JSON read of the objects held by ``strings``, one row each, or None.

    pyarrow's reader takes objects one after another without a separator, so read back to back a
    blank row would read as nothing and a row of two objects as two, pairing later objects with the
    wrong rows while the count still matched. Each row is read as the value of a one-key object
    (``{"r":<row>}``, built by one vectorised join) instead: such a row is then a parse error and the
    input is refused, as the compiled reader refuses it. That also keeps a leading ``null`` (a damaged
    add's ``"stats": "null"``) away from the start of the input, where pyarrow 26 crashes on it."""
    wrapped = pc.binary_join_element_wise(_ROW_OPEN, strings, _ROW_CLOSE, "")
    data = _string_bytes(wrapped)
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(block_size=data.size + 1, use_threads=False),  # one block: no newlines to split at
            parse_options=pj.ParseOptions(explicit_schema=pa.schema([("r", pa.struct(list(schema)))]), unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != len(strings):
        return None
    rows = _single(table.column("r"))
    # a row ``null`` reads as a row of nulls, as it did read bare (flatten carries the row's null down)
    return pa.Table.from_arrays(rows.flatten() if len(rows) else [pa.array([], f.type) for f in schema], schema=schema)


_ROW_OPEN, _ROW_CLOSE = '{"r":', "}"


def _read_objects(strings: pa.Array, schema: pa.Schema) -> pa.Table | None:
    """The objects held by ``strings`` read under ``schema``: by the compiled reader where it is
    built (the rows it flags, and all rows without it, by pyarrow's), else by pyarrow's."""
    if not fast_stats.AVAILABLE:
        return _read_json(strings, schema)
    offsets = string_offsets(strings).astype(np.int64)
    offsets -= offsets[0]
    return fast_stats.read(strings, _string_bytes(strings), offsets, schema, lambda rows: _read_json(rows, schema))


# One JSON read takes one block of at most this many bytes (its block size is a 32-bit integer).
_MAX_BLOCK_BYTES = 1 << 30


def _slices(strings: pa.Array, size: int, threads: bool = True) -> list[pa.Array]:
    """``strings`` cut into row slices of about equal bytes: one per CPU when there is enough to
    share (and ``threads``), and none above ``_MAX_BLOCK_BYTES`` unless a single string is."""
    parts = min(os.cpu_count() or 1, len(strings)) if threads and size >= _THREADED_BYTES else 1
    return _cut(strings, min(max(parts, -(-size // _MAX_BLOCK_BYTES)), len(strings)))


def string_slices(strings: pa.Array, max_bytes: int) -> list[pa.Array]:
    """``strings`` cut into row slices of about equal bytes, each about ``max_bytes`` or less."""
    return _cut(strings, min(-(-_string_bytes(strings).size // max_bytes), len(strings)))


def _cut(strings: pa.Array, parts: int) -> list[pa.Array]:
    if parts <= 1:
        return [strings]
    offsets = string_offsets(strings).astype(np.int64)
    targets = offsets[0] + (offsets[-1] - offsets[0]) * np.arange(1, parts, dtype=np.int64) // parts
    cuts = np.unique(np.clip(np.concatenate([[0], np.searchsorted(offsets, targets), [len(strings)]]), 0, len(strings))).tolist()
    return [strings.slice(a, b - a) for a, b in pairwise(cuts) if b > a]


def parse_stats(stats: pa.Array, plan: StatsPlan, *, threads: bool = True) -> pa.Array | None:
    """``stats`` JSON strings → ``plan.final_type`` (null where the string is null); None when
    pyarrow cannot read them with the plan's types (the caller then writes no parsed stats).
    With ``threads`` a large input is shared out between threads."""
    n = len(stats)
    if n == 0:
        return pa.nulls(0, plan.final_type)
    # A null reads as an empty object; an empty or blank string reads as nothing, and the row
    # count below no longer matches.
    text = stats if stats.null_count == 0 else pc.fill_null(stats, "{}")
    schema = pa.schema(list(plan.read_type))
    slices = _slices(text, _string_bytes(text).size, threads)
    if len(slices) == 1:
        tables = [_read_objects(slices[0], schema)]
    else:
        with ThreadPoolExecutor(max_workers=len(slices), thread_name_prefix="delta-stats") as pool:
            tables = list(pool.map(lambda s: _read_objects(s, schema), slices))
    if any(t is None for t in tables) or sum(t.num_rows for t in tables if t is not None) != n:
        return None
    table = pa.concat_tables([t for t in tables if t is not None])
    children = []
    try:
        for read, final in zip(plan.read_type, plan.final_type, strict=True):
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
