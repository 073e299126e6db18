"""The table's schema as the Arrow schema of its data files, and old files conformed to it.

Data files use *physical* names (column mapping) and, with column mapping, carry Parquet field ids
(``PARQUET:field_id``); in ``id`` mode a file's columns are matched by field id, otherwise by
physical name. A file written before a schema change is read with the table's *current* schema: a
column it lacks reads as nulls, a widened type (``typeWidening``: byte→short→int→long, float→double,
integers→double or decimal, decimal scale/precision, date→timestamp_ntz) is cast, and columns the
schema no longer has are dropped. Timestamps are microseconds (``INT96`` is read as such).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError
from ..model.schema import primitive_to_arrow

__all__ = [
    "DataSchema",
    "arrow_type",
    "data_schema",
    "conform_table",
    "TableConformer",
    "FIELD_ID_KEY",
    "SchemaMismatchError",
]

FIELD_ID_KEY = b"PARQUET:field_id"
VARIANT_TYPE = pa.struct([pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), nullable=False)])


class SchemaMismatchError(CorruptLogError):
    """A data file's column cannot be read as the table's type; names the file and column."""


def _physical(field: Mapping[str, Any]) -> str:
    return str((field.get("metadata") or {}).get("delta.columnMapping.physicalName") or field["name"])


def _field_id(field: Mapping[str, Any]) -> int | None:
    fid = (field.get("metadata") or {}).get("delta.columnMapping.id")
    return None if fid is None else int(fid)


def arrow_type(typ: Any, *, with_ids: bool) -> pa.DataType:
    """A Delta type (JSON schema) as its Arrow type in data files (physical names)."""
    if isinstance(typ, str):
        primitive = primitive_to_arrow(typ)  # the log's own mapping: one table of Delta's primitive types
        if primitive is not None:
            return primitive
        if typ == "variant":
            return VARIANT_TYPE
        raise SchemaMismatchError(f"unsupported data type {typ!r}")
    kind = typ.get("type")
    if kind == "struct":
        return pa.struct([arrow_field(f, with_ids=with_ids) for f in typ.get("fields", [])])
    if kind == "array":
        return pa.list_(pa.field("element", arrow_type(typ["elementType"], with_ids=with_ids), nullable=bool(typ.get("containsNull", True))))
    if kind == "map":
        key = pa.field("key", arrow_type(typ["keyType"], with_ids=with_ids), nullable=False)
        value = pa.field("value", arrow_type(typ["valueType"], with_ids=with_ids), nullable=bool(typ.get("valueContainsNull", True)))
        return pa.map_(key, value)
    raise SchemaMismatchError(f"unsupported data type {typ!r}")


def arrow_field(field: Mapping[str, Any], *, with_ids: bool) -> pa.Field:
    meta = None
    fid = _field_id(field)
    if with_ids and fid is not None:
        meta = {FIELD_ID_KEY: str(fid).encode()}
    return pa.field(_physical(field), arrow_type(field["type"], with_ids=with_ids), nullable=bool(field.get("nullable", True)), metadata=meta)


@dataclass(frozen=True)
class DataSchema:
    """What a data file of the table holds: ``schema`` (physical names, field ids), the logical →
    physical names of the top-level columns, and which of them are partition columns."""

    schema: pa.Schema  # data columns then, when materialised, partition columns (files' order)
    data_columns: tuple[str, ...]  # physical names of the non-partition top-level columns
    partition_columns: tuple[str, ...]  # physical names of the partition columns
    logical_to_physical: Mapping[str, str]
    match_by_id: bool
    types: Mapping[str, Any]  # logical name -> Delta type (top level)

    def without_partitions(self) -> pa.Schema:
        return pa.schema([f for f in self.schema if f.name in self.data_columns])


def data_schema(table_schema: Mapping[str, Any], partition_columns: Sequence[str], column_mapping_mode: str) -> DataSchema:
    with_ids = column_mapping_mode in ("id", "name")
    fields = list(table_schema.get("fields", []))
    by_name = {f["name"]: f for f in fields}
    parts = [by_name[c] for c in partition_columns if c in by_name]
    data = [f for f in fields if f["name"] not in set(partition_columns)]
    schema = pa.schema([arrow_field(f, with_ids=with_ids) for f in data + parts])
    return DataSchema(
        schema=schema,
        data_columns=tuple(_physical(f) for f in data),
        partition_columns=tuple(_physical(f) for f in parts),
        logical_to_physical={f["name"]: _physical(f) for f in fields},
        match_by_id=column_mapping_mode == "id",
        types={f["name"]: f["type"] for f in fields},
    )


def _fid(field: pa.Field) -> int | None:
    meta = field.metadata or {}
    raw = meta.get(FIELD_ID_KEY)
    return None if raw is None else int(raw)


def _find(source_type: pa.StructType | pa.Schema, target: pa.Field, by_id: bool) -> int:
    fields = list(source_type)
    tid = _fid(target)
    if by_id and tid is not None:
        for i, f in enumerate(fields):
            if _fid(f) == tid:
                return i
        return -1
    for i, f in enumerate(fields):
        if f.name == target.name:
            return i
    return -1


def conform_array(arr: pa.Array, target: pa.DataType, by_id: bool, where: str) -> pa.Array:
    """``arr`` as ``target``: structs by field (missing → null), lists/maps element-wise, primitives cast."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([conform_array(c, target, by_id, where) for c in arr.chunks], target)
    src = arr.type
    if src == target:
        return arr
    if pa.types.is_struct(target) and pa.types.is_struct(src):
        children = []
        for tf in target:
            i = _find(src, tf, by_id)
            if i < 0:
                children.append(pa.nulls(len(arr), tf.type))
            else:
                children.append(conform_array(arr.field(i), tf.type, by_id, f"{where}.{tf.name}"))
        mask = arr.is_null() if arr.null_count else None
        flat = [c for c in children]
        return pa.StructArray.from_arrays(flat, fields=list(target), mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(src):
        keys = conform_array(arr.keys, target.key_type, by_id, f"{where}.key")
        items = conform_array(arr.items, target.item_type, by_id, f"{where}.value")
        offsets = arr.offsets
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and (pa.types.is_list(src) or pa.types.is_large_list(src)):
        values = conform_array(arr.flatten() if False else arr.values, target.value_type, by_id, f"{where}.element")
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=mask)
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"{where}: cannot read {src} as {target}: {exc}", path=where.split(":", 1)[0]) from None


def conform_table(table: pa.Table | pa.RecordBatch, target: pa.Schema, by_id: bool, where: str) -> pa.Table:
    """``table`` with exactly ``target``'s columns, in its order (see ``conform_array``)."""
    columns = []
    for tf in target:
        i = _find(table.schema, tf, by_id)
        if i < 0:
            columns.append(pa.nulls(table.num_rows, tf.type))
        else:
            columns.append(conform_array(table.column(i), tf.type, by_id, f"{where}: column {tf.name}"))
    return pa.Table.from_arrays(columns, schema=target)


class TableConformer:
    """``conform_table`` for the many files of one bin: the column plan (which source column
    feeds each target column, and whether it needs conforming) is worked out once per distinct
    source schema, not once per file — a bin's small files almost always share one schema, and
    per-file Python work is what holds the GIL while the other workers wait.

    Two threads of one bin (``shared_reads``) conform at once, files of different schemas among
    them: the schema and its plan are one value, read once per call, so a thread never pairs its
    schema with the plan another thread has just put in its place."""

    def __init__(self, target: pa.Schema, by_id: bool) -> None:
        self.target = target
        self.by_id = by_id
        self._cached: tuple[pa.Schema, list[tuple[int, bool]]] | None = None

    def __call__(self, table: pa.Table | pa.RecordBatch, where: str) -> pa.Table:
        schema = table.schema
        cached = self._cached
        if cached is None or not schema.equals(cached[0], check_metadata=True):
            plan = []
            for tf in self.target:
                i = _find(schema, tf, self.by_id)
                plan.append((i, i >= 0 and schema.field(i).type == tf.type))
            cached = self._cached = (schema, plan)
        columns = []
        for (i, same), tf in zip(cached[1], self.target, strict=True):
            if i < 0:
                columns.append(pa.nulls(table.num_rows, tf.type))
            elif same:
                columns.append(table.column(i))
            else:
                columns.append(conform_array(table.column(i), tf.type, self.by_id, f"{where}: column {tf.name}"))
        return pa.Table.from_arrays(columns, schema=self.target)
