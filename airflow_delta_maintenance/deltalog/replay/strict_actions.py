"""The vectorised half of the one strict validation (``model.validation``): ``add``/``remove``
lines read by pyarrow under an explicit, complete schema, and the same rules checked on the columns.

pyarrow's JSON reader never infers a type here. A value of the wrong type, a number out of its
column's range, a duplicated key, an unknown field or a second action on the line makes the read
fail (``unexpected_field_behavior="error"``); then the caller validates those lines one by one
with ``model.validation`` — which names the file, line and key of a real error — and reads them
again knowing their tag keys. Inference is avoided on purpose: pyarrow infers nested values
recursively (a tag nested 100,000 levels deep crashes the process; 4,000 levels take 12 s).

Tags have free-form keys, so the schema declares the keys seen so far in this process
(``known_tag_keys``; none at first: every declared key costs a column of nulls in a table without
tags). A read that fails is tried once more with the keys Databricks writes (``SEED_TAG_KEYS``),
then a table with other keys pays the line-by-line pass once per process, then reads at full speed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..model.action_types import ADD_FIELDS, REMOVE_FIELDS
from ..model.validation import CommitRules, canonical_path
from . import file_keys
from .parsed_actions import ORDER

__all__ = [
    "read_schema",
    "read_lines",
    "read_strict",
    "rules_hold",
    "canonical_paths",
    "known_tag_keys",
    "learn_tag_keys",
    "first_commit_rule_broken",
    "take_keys",
    "KEY_FIELDS",
    "SEED_TAG_KEYS",
]

# What reconciliation needs of a file action (``keys_only`` readers drop the rest after validation).
KEY_FIELDS = ("path", "deletionVector", "deletionTimestamp", "size")

SEED_TAG_KEYS = (
    "INSERTION_TIME",
    "MIN_INSERTION_TIME",
    "MAX_INSERTION_TIME",
    "OPTIMIZE_TARGET_SIZE",
    "NUM_AUTO_OPTIMIZES",
    "ZCUBE_ID",
    "ZCUBE_ZORDER_BY",
    "ZCUBE_ZORDER_CURVE",
)
_MAX_TAG_KEYS = 256  # beyond this a table's tags are read line by line (each declared key costs a column)
_tags_lock = threading.Lock()
_tag_keys: tuple[str, ...] = ()


def known_tag_keys() -> tuple[str, ...]:
    return _tag_keys


def learn_tag_keys(keys: Iterable[str]) -> bool:
    """Remember tag keys for later reads; False when there are too many to declare."""
    global _tag_keys
    with _tags_lock:
        new = [k for k in dict.fromkeys(keys) if k not in _tag_keys]
        if len(_tag_keys) + len(new) > _MAX_TAG_KEYS:
            return False
        _tag_keys = _tag_keys + tuple(new)
        return True


def read_schema(kind: str, partition_columns: Sequence[str], tag_keys: Sequence[str], keys_only: bool = False) -> pa.Schema:
    """The complete read schema of one kind of file-action line: every protocol field typed,
    ``partitionValues`` and ``tags`` as structs of string columns."""
    fields = []
    for f in ADD_FIELDS if kind == "add" else REMOVE_FIELDS:
        if f.name == "partitionValues":
            f = pa.field(f.name, pa.struct([pa.field(c, pa.string()) for c in partition_columns]))
        elif f.name == "tags":
            f = pa.field(f.name, pa.struct([pa.field(k, pa.string()) for k in tag_keys]))
        fields.append(f)
    return pa.schema([pa.field(kind, pa.struct(fields))])


def read_lines(data: np.ndarray, schema: pa.Schema, *, unknown: str = "error") -> pa.Table | None:
    """One JSON read of newline-separated lines under ``schema``; None when a line does not fit it.
    Blocks let pyarrow parse a large input on several threads; a small one is read on this thread
    (handing a few lines to the pool costs 40 times their parsing on a busy machine)."""
    size = len(data)
    try:
        return pj.read_json(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pj.ReadOptions(block_size=max(1 << 20, size // 8 + 1), use_threads=size > _THREADED_BYTES),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unknown),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


_THREADED_BYTES = 4 << 20


def read_strict(data: np.ndarray, kind: str, rows: int, partition_columns: Sequence[str]) -> pa.Table | None:
    """The fast path: ``rows`` lines of ``kind`` read under the complete schema with the tag keys
    known so far (and, failing that, with Databricks' tag keys too), every rule holding; None when
    some line needs the line-by-line pass."""
    for keys in (known_tag_keys(), (*known_tag_keys(), *(k for k in SEED_TAG_KEYS if k not in known_tag_keys()))):
        table = read_lines(data, read_schema(kind, partition_columns, keys))
        if table is not None and table.num_rows == rows and rules_hold(table.column(kind), kind):
            if keys != known_tag_keys():
                learn_tag_keys(keys)
            return table
        if table is not None or set(SEED_TAG_KEYS) <= set(known_tag_keys()):
            return None  # read, but a rule is broken (or the seed keys are known already): line by line
    return None
_REQUIRED = {"add": ("path", "partitionValues", "size", "modificationTime", "dataChange"), "remove": ("path", "dataChange")}
_NON_NEGATIVE = ("size", "baseRowId", "defaultRowCommitVersion")
_DV_REQUIRED = ("storageType", "pathOrInlineDv", "sizeInBytes", "cardinality")
_DV_NON_NEGATIVE = ("offset", "sizeInBytes", "cardinality", "maxRowIndex")


def _negative(values: pa.ChunkedArray | pa.Array) -> bool:
    if values.null_count == len(values):
        return False
    low = pc.min(values).as_py()
    return low is not None and low < 0


def rules_hold(column: pa.ChunkedArray, kind: str) -> bool:
    """The field rules of ``model.validation`` that a typed read does not already enforce
    (required fields, non-empty paths, non-negative sizes and ids, deletion vector descriptors),
    checked on a whole column at once. False: some row breaks one (the caller finds which)."""
    if column.null_count:
        return False
    for name in _REQUIRED[kind]:
        if pc.struct_field(column, name).null_count:
            return False
    if pc.min(pc.binary_length(pc.struct_field(column, "path"))).as_py() == 0:
        return False
    if any(_negative(pc.struct_field(column, name)) for name in _NON_NEGATIVE):
        return False
    dv = pc.struct_field(column, "deletionVector")
    if dv.null_count == len(dv):
        return True
    dv = dv.filter(pc.is_valid(dv))
    if any(pc.struct_field(dv, name).null_count for name in _DV_REQUIRED):
        return False
    if not pc.all(pc.is_in(pc.struct_field(dv, "storageType"), pa.array(["u", "i", "p"]))).as_py():
        return False
    return not any(_negative(pc.struct_field(dv, name)) for name in _DV_NON_NEGATIVE)


def canonical_paths(paths: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Key form of file paths: ``file:/x`` and ``file:///x`` name the same file as ``/x``
    (delta-spark canonicalises paths before reconciling; golden tables canonicalized-paths-*)."""
    if len(paths) == 0 or not pc.any(pc.starts_with(paths, "file:")).as_py():
        return paths
    return pc.replace_substring_regex(paths, pattern="^file:(?://)?/", replacement="/")


def _repeated_rows(paths: pa.ChunkedArray, orders: np.ndarray) -> np.ndarray | None:
    """Row indexes of every path that occurs more than once; None when all are distinct (the
    common case, answered by one hash pass: the compiled one when it is built)."""
    native = file_keys.newest_orders(paths.chunks, np.split(orders, np.cumsum([len(c) for c in paths.chunks])[:-1]), int(orders.max()) + 1)
    if native is not None:
        won, distinct = native
        if distinct == len(paths):
            return None
        losers = pa.chunked_array(paths.chunks, pa.string()).filter(pa.array(~won[orders]))
        return np.flatnonzero(pc.is_in(paths, value_set=pc.unique(losers)).to_numpy(zero_copy_only=False))
    encoded = pc.dictionary_encode(paths, null_encoding="encode")
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in encoded.chunks]).astype(np.int64)
    counts = np.bincount(codes)
    if counts.max(initial=0) <= 1:
        return None
    return np.flatnonzero(counts[codes] > 1)


def first_commit_rule_broken(
    adds: pa.Table, removes: pa.Table, locate: Callable[[int], tuple[str, int]], single_commit: Callable[[int], bool]
) -> None:
    """Raise the first break of the one-file-action-per-path rules (``CommitRules``) among these
    file actions: ``locate(order)`` gives a row's ``(file name, line)``; sources for which
    ``single_commit(source)`` is False (compactions, checkpoints) are skipped. Only the rows of
    repeated paths are examined one by one: they are few."""
    tables = [t for t in (adds, removes) if t.num_rows]
    if sum(t.num_rows for t in tables) < 2:
        return
    paths = pa.chunked_array([c for t in tables for c in canonical_paths(t.column("path")).chunks], pa.string())
    orders = np.concatenate([t.column(ORDER).to_numpy() for t in tables])
    rows = _repeated_rows(paths, orders)
    if rows is None:
        return
    kinds = np.concatenate([np.full(t.num_rows, k) for k, t in zip(("add", "remove"), (adds, removes), strict=True) if t.num_rows])
    both = pa.concat_tables([t.select(["path", "deletionVector"]) for t in tables])
    picked = both.take(pa.array(rows)).to_pylist()
    checkers: dict[str, CommitRules] = {}
    for row, order, kind in sorted(zip(picked, orders[rows].tolist(), kinds[rows].tolist(), strict=True), key=lambda t: t[1]):
        name, line = locate(order)
        if not single_commit(order):
            continue
        rules = checkers.setdefault(name, CommitRules(name, canonical_path))
        rules.feed(str(kind), row, line)


def take_keys(column: pa.ChunkedArray) -> list[pa.Array]:
    """The chunks of a file-action struct column with only the ``KEY_FIELDS`` (the rest is
    released: a keys-only reader never holds the statistics)."""
    out = []
    for chunk in column.chunks:
        names = [chunk.type.field(i).name for i in range(chunk.type.num_fields)]
        keep = [n for n in names if n in KEY_FIELDS]
        out.append(pa.StructArray.from_arrays([chunk.field(n) for n in keep], names=keep, mask=chunk.is_null()))
    return out
