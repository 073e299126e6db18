"""File statistics exactly as delta-spark writes them in ``add.stats``.

Which columns: the first ``delta.dataSkippingNumIndexedCols`` (default 32, -1 = all) leaf columns
of the data schema in schema order (partition columns excluded; an array, map or variant counts as
one leaf), or exactly the columns ``delta.dataSkippingStatsColumns`` names (every leaf below a
named struct). ``nullCount`` covers every such leaf; ``minValues``/``maxValues`` only numbers,
decimals, dates, timestamps and strings (never booleans, binaries, arrays, maps or variants).

How values are written: strings longer than 32 UTF-16 units are truncated (min: the prefix,
without splitting a surrogate pair; max: the prefix then U+007F or U+10FFFF as a tie-breaker, or
no max at all when none fits within 64 units — delta-spark's ``truncateMaxStringAgg``);
timestamps to milliseconds (``…T…​.SSSZ`` in UTC, no zone for ``timestamp_ntz``); floating point
``NaN``/``±Infinity`` as JSON strings, a column holding a NaN has the max ``"NaN"`` (Spark orders
NaN above every number); ``tightBounds: true`` on tables that support deletion vectors.

Where the values come from: ``StatsCollector.update`` counts nulls and computes min/max over the
rows a writer writes; a writer that writes Parquet can hand the min/max of integer, date, timestamp
and string columns to the file's own column statistics instead (``defer_minmax_to_parquet``, then
``merge_parquet_statistics`` after the file is closed): Parquet computes them anyway, and the same
pass over every value cost ~4% of the CPU of an OPTIMIZE of small files (profiled).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..model.schema_validation import ORJSON

__all__ = ["StatsConfig", "StatsCollector", "stats_leaves", "stats_num_records", "truncate_min_string", "truncate_max_string", "STRING_PREFIX_LENGTH"]

STRING_PREFIX_LENGTH = 32
ASCII_MAX = "\x7f"
UTF8_MAX = "\U0010ffff"
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_MINMAX_TYPES = {"byte", "short", "integer", "long", "float", "double", "date", "timestamp", "timestamp_ntz", "string"}


def _units(c: str) -> int:
    return 2 if ord(c) > 0xFFFF else 1


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _prefix_chars(s: str, units: int) -> int:
    """Chars of ``s`` making its first ``units`` UTF-16 units, a straddling surrogate pair included."""
    n = used = 0
    for c in s:
        if used >= units:
            break
        used += _units(c)
        n += 1
    return n


def truncate_min_string(s: str, prefix: int = STRING_PREFIX_LENGTH) -> str:
    if _utf16_len(s) <= prefix:
        return s
    return s[: _prefix_chars(s, prefix)]


def truncate_max_string(s: str, prefix: int = STRING_PREFIX_LENGTH) -> str | None:
    if _utf16_len(s) <= prefix:
        return s
    limit = 2 * prefix
    chars = _prefix_chars(s, prefix)
    units = _utf16_len(s[:chars])
    while units <= limit:
        if chars >= len(s):
            return s
        c = s[chars]
        if c == UTF8_MAX:
            chars += 1
            units += 2
        elif ord(c) < 0x7F:
            return s[:chars] + ASCII_MAX
        else:
            return s[:chars] + UTF8_MAX
    return None


def stats_num_records(stats: str | None) -> Any:
    """``numRecords`` of an ``add``'s statistics (None when absent or not a JSON object). Parsed by
    orjson where it can (an OPTIMIZE reads it for each of its thousands of source files, on the
    driver's one thread), else by ``json`` (which also takes what orjson refuses, e.g. ``NaN``)."""
    if not stats:
        return None
    try:
        parsed = ORJSON.loads(stats) if ORJSON is not None else json.loads(stats)
    except ValueError:
        try:
            parsed = json.loads(stats)
        except ValueError:
            return None
    return parsed.get("numRecords") if isinstance(parsed, dict) else None


@dataclass(frozen=True)
class Leaf:
    physical_path: tuple[str, ...]
    delta_type: Any  # a primitive type name, or a dict for arrays/maps

    @property
    def has_minmax(self) -> bool:
        return isinstance(self.delta_type, str) and (self.delta_type in _MINMAX_TYPES or bool(_DECIMAL.match(self.delta_type)))


@dataclass(frozen=True)
class StatsConfig:
    num_indexed_cols: int = 32
    stats_columns: tuple[tuple[str, ...], ...] | None = None  # logical paths, when set
    tight_bounds: bool = False
    prefix_length: int = STRING_PREFIX_LENGTH

    @classmethod
    def from_table(cls, configuration: Mapping[str, str], *, supports_deletion_vectors: bool) -> StatsConfig:
        raw_cols = configuration.get("delta.dataSkippingStatsColumns")
        num = int(str(configuration.get("delta.dataSkippingNumIndexedCols", "32")).strip())
        cols = None
        if raw_cols is not None and raw_cols.strip():
            cols = tuple(_parse_column_path(c) for c in _split_top(raw_cols))
        return cls(num_indexed_cols=num, stats_columns=cols, tight_bounds=supports_deletion_vectors)


def _split_top(text: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for c in text:
        if c == "`":
            quoted = not quoted
        if c == "," and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return [c for c in out if c]


def _parse_column_path(text: str) -> tuple[str, ...]:
    parts, cur, quoted, i = [], [], False, 0
    while i < len(text):
        c = text[i]
        if c == "`":
            if quoted and i + 1 < len(text) and text[i + 1] == "`":
                cur.append("`")
                i += 2
                continue
            quoted = not quoted
        elif c == "." and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return tuple(p.strip() if not p.startswith(" ") else p for p in parts)


def _physical(f: Mapping[str, Any]) -> str:
    return str((f.get("metadata") or {}).get("delta.columnMapping.physicalName") or f["name"])


def stats_leaves(schema: Mapping[str, Any], partition_columns: Sequence[str], config: StatsConfig) -> list[Leaf]:
    """The leaves statistics are collected for, in schema order."""
    parts = {c.lower() for c in partition_columns}
    data_fields = [f for f in schema.get("fields", []) if f["name"].lower() not in parts]

    def walk(fields: Sequence[Mapping[str, Any]], prefix: tuple[str, ...], logical: tuple[str, ...], selected: bool) -> list[Leaf]:
        out: list[Leaf] = []
        for f in fields:
            path, lpath = (*prefix, _physical(f)), (*logical, f["name"].lower())
            sel = selected or (config.stats_columns is not None and any(tuple(x.lower() for x in c) == lpath for c in config.stats_columns))
            typ = f["type"]
            if isinstance(typ, Mapping) and typ.get("type") == "struct":
                out += walk(typ.get("fields", []), path, lpath, sel)
            elif config.stats_columns is None or sel:
                out.append(Leaf(path, typ))
        return out

    leaves = walk(data_fields, (), (), False)
    if config.stats_columns is None and config.num_indexed_cols >= 0:
        leaves = leaves[: config.num_indexed_cols]
    return leaves


@dataclass
class _Acc:
    nulls: int = 0
    min: Any = None
    max: Any = None
    nan: bool = False


def _leaf_array(table: pa.Table, path: tuple[str, ...]) -> pa.ChunkedArray:
    col = table.column(path[0])
    for name in path[1:]:
        chunks = []
        for c in col.chunks:
            idx = c.type.get_field_index(name)
            chunks.append(c.flatten()[idx])  # flatten() merges the parent's nulls into the child
        col = pa.chunked_array(chunks, col.type.field(name).type)
    return col


def _merge(acc: _Acc, lo: Any, hi: Any) -> None:
    acc.min = lo if acc.min is None or lo < acc.min else acc.min
    acc.max = hi if acc.max is None or hi > acc.max else acc.max


def _update_minmax(acc: _Acc, arr: pa.ChunkedArray | pa.Array) -> None:
    if arr.null_count == len(arr):
        return
    if pa.types.is_floating(arr.type):
        nan = pc.is_nan(arr)
        if pc.any(nan).as_py():
            acc.nan = True
            arr = pc.filter(arr, pc.invert(pc.fill_null(nan, False)))
            if len(arr) == arr.null_count:
                return
    mm = pc.min_max(arr)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is not None:
        _merge(acc, lo, hi)


def _stored_as_is(typ: pa.DataType) -> bool:
    """Arrow types whose Parquet statistics are exactly the min and max Delta records, as the
    column's own values (``_bound`` reads them): integers, dates and timestamps order as signed
    numbers, strings as unsigned bytes (= code points) in both. Not floats (Parquet leaves NaN out
    and widens a zero bound to -0.0/+0.0), decimals, nor a date64 or a timestamp of another unit
    (the writer converts them)."""
    return bool(pa.types.is_signed_integer(typ) or pa.types.is_date32(typ) or (pa.types.is_timestamp(typ) and typ.unit == "us")
                or pa.types.is_string(typ) or pa.types.is_large_string(typ))


def _exact(st: pq.Statistics) -> bool:
    """Bounds Parquet kept as they are: pyarrow 26 drops a column chunk's bounds rather than
    truncate them (a value over its statistics size limit); a later one that says it truncated is
    not taken at its word."""
    return bool(st.has_min_max and getattr(st, "is_min_value_exact", True) and getattr(st, "is_max_value_exact", True))


@dataclass
class StatsCollector:
    """Statistics of the rows fed to ``update``, rendered by ``to_json`` (see the module docstring
    for the min/max a Parquet writer hands over)."""

    leaves: list[Leaf]
    config: StatsConfig
    num_records: int = 0
    accs: list[_Acc] = field(default_factory=list)
    from_parquet: dict[int, pa.DataType] = field(default_factory=dict)  # leaf index -> its column's type

    def __post_init__(self) -> None:
        self.accs = [_Acc() for _ in self.leaves]

    def defer_minmax_to_parquet(self, schema: pa.Schema) -> None:
        """``update`` leaves the min/max of the top-level columns of ``schema`` (the written
        file's) whose types ``_stored_as_is`` names to ``merge_parquet_statistics``. A name with a
        dot is left out: its Parquet path could also be a nested column's."""
        names = schema.names
        for i, leaf in enumerate(self.leaves):
            name = leaf.physical_path[0]
            if len(leaf.physical_path) == 1 and leaf.has_minmax and "." not in name and names.count(name) == 1:
                typ = schema.field(name).type
                if _stored_as_is(typ):
                    self.from_parquet[i] = typ

    def update(self, table: pa.Table) -> None:
        self.num_records += table.num_rows
        for i, (leaf, acc) in enumerate(zip(self.leaves, self.accs, strict=True)):
            arr = _leaf_array(table, leaf.physical_path)
            acc.nulls += arr.null_count
            if leaf.has_minmax and i not in self.from_parquet:
                _update_minmax(acc, arr)

    def merge_parquet_statistics(self, metadata: pq.FileMetaData, read_column: Callable[[int, str], pa.ChunkedArray]) -> None:
        """The deferred min/max from the closed file's row-group statistics. A row group with
        values but without exact bounds has its column read back (``read_column(row_group,
        name)``) and computed."""
        if not self.from_parquet:
            return
        paths = [metadata.schema.column(j).path for j in range(metadata.num_columns)]
        for i, typ in self.from_parquet.items():
            name, acc = self.leaves[i].physical_path[0], self.accs[i]
            j = paths.index(name)
            for rg in range(metadata.num_row_groups):
                group = metadata.row_group(rg)
                st = group.column(j).statistics
                if st is not None and _exact(st):
                    _merge(acc, _bound(st.min_raw, typ), _bound(st.max_raw, typ))
                elif st is None or not st.has_null_count or st.null_count < group.num_rows:
                    _update_minmax(acc, read_column(rg, name))

    def to_dict_tokens(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for leaf, acc in zip(self.leaves, self.accs, strict=True):
            _put(nulls, leaf.physical_path, str(acc.nulls))
            if not leaf.has_minmax:
                continue
            lo, hi = acc.min, acc.max
            if acc.nan:
                hi = math.nan
                if lo is None:
                    lo = math.nan
            if lo is None:
                continue
            lo_tok = _token(lo, leaf.delta_type, self.config, is_max=False)
            hi_tok = _token(hi, leaf.delta_type, self.config, is_max=True)
            if lo_tok is not None:
                _put(mins, leaf.physical_path, lo_tok)
            if hi_tok is not None:
                _put(maxs, leaf.physical_path, hi_tok)
        return mins, maxs, nulls

    def to_json(self) -> str:
        mins, maxs, nulls = self.to_dict_tokens()
        parts = [f'"numRecords":{self.num_records}']
        if self.leaves:
            parts.append(f'"minValues":{_render(mins)}')
            parts.append(f'"maxValues":{_render(maxs)}')
            parts.append(f'"nullCount":{_render(nulls)}')
        if self.config.tight_bounds:
            parts.append('"tightBounds":true')
        return "{" + ",".join(parts) + "}"


def _bound(raw: Any, typ: pa.DataType) -> Any:
    """A Parquet statistics value (physical) as ``pc.min_max`` gives it for a column of ``typ``."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8")
    return pa.scalar(raw, typ).as_py()


def _put(tree: dict[str, Any], path: tuple[str, ...], token: str) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = token


def _render(tree: Mapping[str, Any]) -> str:
    items = []
    for k, v in tree.items():
        items.append(json.dumps(k, ensure_ascii=False) + ":" + (_render(v) if isinstance(v, dict) else v))
    return "{" + ",".join(items) + "}"


def _float_token(v: float, single: bool) -> str:
    if math.isnan(v):
        return '"NaN"'
    if math.isinf(v):
        return '"Infinity"' if v > 0 else '"-Infinity"'
    return str(np.float32(v)) if single else repr(float(v))


def _token(v: Any, typ: str, config: StatsConfig, *, is_max: bool) -> str | None:
    if typ in ("float", "double"):
        return _float_token(float(v), typ == "float")
    if typ == "string":
        text = truncate_max_string(v, config.prefix_length) if is_max else truncate_min_string(v, config.prefix_length)
        return None if text is None else json.dumps(text, ensure_ascii=False)
    if typ == "date":
        return f'"{v.isoformat()}"'
    if typ in ("timestamp", "timestamp_ntz"):
        assert isinstance(v, dt.datetime)
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        text = v.strftime("%Y-%m-%dT%H:%M:%S") + f".{v.microsecond // 1000:03d}"
        if len(text) < 23:  # years below 1000 are zero-padded by Spark
            text = text.rjust(23, "0")
        return f'"{text}Z"' if typ == "timestamp" else f'"{text}"'
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(int(v))
