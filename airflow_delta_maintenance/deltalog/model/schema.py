"""Delta table schemas → Arrow types for ``partitionValues_parsed`` and ``stats_parsed``.

Names are *physical* names under column mapping (``delta.columnMapping.physicalName``), which is
how ``add.stats`` and checkpoints spell them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["physical_name", "primitive_to_arrow", "partition_values_type", "stats_parse_plan", "StatsPlan"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
# min/max statistics we parse: exact in JSON and cheap to convert. Decimals (JSON numbers would
# lose precision through float), binary and booleans are left out: a missing bound only means
# "unknown" to a reader, while a rounded bound could make it skip a file wrongly.
_MINMAX = {"byte", "short", "integer", "long", "float", "double", "string", "date", "timestamp", "timestamp_ntz"}


def physical_name(field: Mapping[str, Any]) -> str:
    return str((field.get("metadata") or {}).get("delta.columnMapping.physicalName") or field["name"])


def primitive_to_arrow(type_name: str) -> pa.DataType | None:
    if type_name in _PRIMITIVES:
        return _PRIMITIVES[type_name]
    m = _DECIMAL.match(type_name)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    return None


def partition_values_type(schema: Mapping[str, Any], partition_columns: Sequence[str]) -> pa.StructType | None:
    """Typed struct of the partition columns (physical names), or None if a type is unknown."""
    by_name = {f["name"]: f for f in schema.get("fields", [])}
    fields = []
    for col in partition_columns:
        f = by_name.get(col)
        if not f or not isinstance(f["type"], str):
            return None
        typ = primitive_to_arrow(f["type"])
        if typ is None:
            return None
        fields.append(pa.field(physical_name(f), typ))
    return pa.struct(fields)


class StatsPlan:
    """How to parse ``add.stats``: the JSON read schema (dates and timestamps as strings) and the
    final ``stats_parsed`` type they are cast to."""

    def __init__(self, read_type: pa.StructType, final_type: pa.StructType) -> None:
        self.read_type = read_type
        self.final_type = final_type


def _leaves(fields: Sequence[Mapping[str, Any]], partition: set[str], top: bool) -> tuple[list[pa.Field], list[pa.Field], list[pa.Field]]:
    """(min/max read fields, min/max final fields, nullCount fields) for a struct's fields."""
    read, final, nulls = [], [], []
    for f in fields:
        if top and f["name"] in partition:
            continue
        name, typ = physical_name(f), f["type"]
        if isinstance(typ, Mapping) and typ.get("type") == "struct":
            r, fi, n = _leaves(typ.get("fields", []), partition, False)
            if r:
                read.append(pa.field(name, pa.struct(r)))
                final.append(pa.field(name, pa.struct(fi)))
            if n:
                nulls.append(pa.field(name, pa.struct(n)))
            continue
        nulls.append(pa.field(name, pa.int64()))
        if isinstance(typ, str) and typ in _MINMAX:
            arrow = _PRIMITIVES[typ]
            is_temporal = pa.types.is_date(arrow) or pa.types.is_timestamp(arrow)
            read.append(pa.field(name, pa.string() if is_temporal else arrow))
            final.append(pa.field(name, arrow))
    return read, final, nulls


def stats_parse_plan(schema: Mapping[str, Any], partition_columns: Sequence[str], with_tight_bounds: bool) -> StatsPlan:
    read, final, nulls = _leaves(schema.get("fields", []), set(partition_columns), True)

    def build(minmax: list[pa.Field]) -> pa.StructType:
        fields = [pa.field("numRecords", pa.int64())]
        if minmax:
            fields += [pa.field("minValues", pa.struct(minmax)), pa.field("maxValues", pa.struct(minmax))]
        if nulls:
            fields.append(pa.field("nullCount", pa.struct(nulls)))
        if with_tight_bounds:
            fields.append(pa.field("tightBounds", pa.bool_()))
        return pa.struct(fields)

    return StatsPlan(build(read), build(final))
