"""What both readers of log files produce: ``ParsedActions`` (file actions as Arrow tables with
their replay position ``_order``, other actions as dicts), and the conversions they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..model.action_types import STRING_MAP

__all__ = [
    "ParsedActions",
    "conform_array",
    "empty_file_actions",
    "file_action_table",
    "first_nameless",
    "ORDER",
    "PLACEHOLDER_ORDER",
]


ORDER = "_order"  # replay position: a later action for the same file wins


def empty_file_actions(fields: Sequence[pa.Field]) -> pa.Table:
    return pa.schema([*fields, pa.field(ORDER, pa.int64())]).empty_table()


@dataclass
class ParsedActions:
    """Actions of a set of log files: file actions as Arrow tables, others as ordered dicts.

    ``others`` holds ``(order, source_index, line_number, action)`` in replay order. A
    checkpoint's file-action tables may hold placeholder rows (``_order`` -1, null fields): rows of
    other actions between its file actions, dropped by ``reconcile_file_actions``.
    """

    adds: pa.Table
    removes: pa.Table
    others: list[tuple[int, int, int, dict[str, Any]]] = field(default_factory=list)
    # NDJSON only: every line as written (with its newline), indexed by ``_order - base_order``;
    # lines that are not canonical file actions are blank here (their bytes are in ``odd_lines``).
    lines: pa.LargeBinaryArray | pa.ChunkedArray | None = None
    odd_lines: dict[int, bytes] = field(default_factory=dict)
    source_first_line: list[int] = field(default_factory=list)  # global index of each source's first line
    num_lines: int = 0  # NDJSON only: lines read, blank ones included (the next file's first order)

    def original_lines(self, orders: pa.Array, base_order: int = 0) -> bytes | memoryview:
        """The original NDJSON bytes of the actions with these ``_order`` values, in that order
        (a view of one gathered buffer, not copied again into ``bytes``)."""
        if self.lines is None or len(orders) == 0:
            return b""
        if isinstance(orders, pa.ChunkedArray):
            orders = orders.combine_chunks()
        index = pc.subtract(orders, pa.scalar(base_order, pa.int64()))
        taken = self.lines.take(index)
        if isinstance(taken, pa.ChunkedArray):
            taken = taken.combine_chunks()
        out = taken.buffers()[2]
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[taken.offset : taken.offset + len(taken) + 1]
        data = memoryview(out)[offsets[0] : offsets[-1]] if out is not None else memoryview(b"")
        if not self.odd_lines:
            return data
        # rare: re-assemble with the saved bytes of lines that were not in canonical form
        pieces = []
        for i, o in enumerate(index.to_pylist()):
            pieces.append(self.odd_lines.get(o) or data[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]])
        return b"".join(pieces)


def _struct_to_map(arr: pa.StructArray, drop_null_values: bool) -> pa.Array:
    """A JSON object inferred as a struct → ``map<string,string>`` (pyarrow's JSON reader has no maps)."""
    n, k = len(arr), arr.type.num_fields
    names = [arr.type.field(i).name for i in range(k)]
    if k == 0:
        offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
        keys, items = pa.array([], pa.string()), pa.array([], pa.string())
    else:
        children = [pc.struct_field(arr, [i]).cast(pa.string()) for i in range(k)]
        concatenated = pa.concat_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in children])
        if k == 1:
            items = concatenated
        else:  # row-major interleave: row r's entries are children[0][r], children[1][r], ...
            items = concatenated.take(pa.array((np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()))
        keys = pa.array(names, pa.string()).take(pa.array(np.tile(np.arange(k, dtype=np.int32), n)))
        counts = np.full(n, k, dtype=np.int64)
        if drop_null_values:
            valid = np.asarray(items.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            counts = valid.reshape(n, k).sum(axis=1)
            keys, items = keys.filter(pa.array(valid)), items.filter(pa.array(valid))
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    return pa.MapArray.from_arrays(offsets, keys, items, type=STRING_MAP, mask=arr.is_null())


def conform_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, *, drop_null_map_values: bool = False) -> pa.Array:
    """Cast ``arr`` to ``target``: structs get exactly the target's fields (missing ones null),
    JSON-inferred structs become maps, and null-typed columns become typed nulls."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.type == target:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pa.types.is_map(target) and pa.types.is_struct(arr.type):
        return _struct_to_map(arr, drop_null_map_values)
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        present = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = []
        for f in target:
            if f.name in present:
                child = arr.field(present[f.name])
                children.append(conform_array(child, f.type, drop_null_map_values=f.name == "tags"))
            else:
                children.append(pa.nulls(len(arr), f.type))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())
    return arr.cast(target)


# ``_order`` of a placeholder row: a checkpoint row holding another action, kept in a file-action
# table (reconciliation drops it) so that the table is filtered once, not twice.
PLACEHOLDER_ORDER = -1


def file_action_table(
    struct: pa.Array | pa.ChunkedArray, fields: Sequence[pa.Field], order: np.ndarray, *, placeholders: bool = False
) -> pa.Table:
    """Valid rows of an ``add``/``remove`` struct column as a flat table with ``_order``.

    Chunk by chunk: combining the JSON reader's blocks first would copy every string once more.
    With ``placeholders``, null rows scattered among valid ones stay, with ``_order`` -1: copying
    out the valid rows here and copying the winners again in reconciliation would write a
    checkpoint's file actions twice (its removes sit among its adds).
    """
    chunks = struct.chunks if isinstance(struct, pa.ChunkedArray) else [struct]
    target = pa.struct(list(fields))
    schema = pa.schema([*fields, pa.field(ORDER, pa.int64())])
    batches = []
    offset = 0
    for chunk in chunks:
        n = len(chunk)
        chunk_order = order[offset : offset + n]
        offset += n
        if chunk.null_count:  # JSON: only lines like {"add": null}; Parquet: the other actions' rows
            valid = np.asarray(chunk.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            rows = np.flatnonzero(valid)
            if len(rows) and rows[-1] - rows[0] + 1 == len(rows):  # one run (a checkpoint's adds): no copy
                chunk, chunk_order = chunk.slice(int(rows[0]), len(rows)), chunk_order[rows[0] : rows[-1] + 1]
            elif placeholders and len(rows):
                chunk = chunk.slice(int(rows[0]), int(rows[-1]) + 1 - int(rows[0]))
                chunk_order = np.where(valid, chunk_order, PLACEHOLDER_ORDER)[rows[0] : rows[-1] + 1]
            else:
                chunk, chunk_order = chunk.filter(pa.array(valid)), chunk_order[valid]
        if len(chunk) == 0:
            continue
        conformed = conform_array(chunk, target)
        columns = [conformed.field(i) for i in range(len(fields))]
        batches.append(pa.RecordBatch.from_arrays([*columns, pa.array(chunk_order, pa.int64())], schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def first_nameless(table: pa.Table) -> int | None:
    """``_order`` of the first real file action without a path (placeholder rows have none), or
    None: a file action must name its file (readers would crash on it or drop it)."""
    if not table.column("path").null_count:
        return None
    orders = table.column(ORDER).to_numpy()
    nameless = np.flatnonzero(table.column("path").is_null().to_numpy(zero_copy_only=False) & (orders != PLACEHOLDER_ORDER))
    return int(orders[nameless[0]]) if len(nameless) else None
