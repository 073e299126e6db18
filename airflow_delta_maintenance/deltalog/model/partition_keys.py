"""The keys an ``add``'s ``partitionValues`` may carry: the table's partition columns. A key the
table does not have (a flipped byte, an extra key) makes the ``deltalake`` wheel refuse the table;
every reader of the log refuses it too, naming the file, line and key. Kept apart from
``validation`` (which checks one action on its own): this rule needs the table's metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import CorruptLogError
from .schema_validation import strict_json_loads

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["partition_value_keys", "check_partition_keys", "map_keys", "unknown_key_error", "unknown_map_key"]


def partition_value_keys(metadata: Mapping[str, Any]) -> frozenset[str] | None:
    """The keys an add's ``partitionValues`` may carry under the ``metaData`` body ``metadata``: its
    partition columns by physical name (column mapping) and by logical name (what older writers
    wrote; the readers take both). A key outside them is a column the table does not have: the
    ``deltalake`` wheel refuses such a table. A missing key is a null value (the wheel and
    delta-spark read it so). None when the metadata cannot say (no readable schema)."""
    columns = metadata.get("partitionColumns") or []
    if not isinstance(columns, list):
        return None
    try:
        schema = strict_json_loads(metadata.get("schemaString") or "")
        by_name = {f["name"]: f for f in schema.get("fields", [])}
        return frozenset(columns) | {str((by_name[c].get("metadata") or {}).get("delta.columnMapping.physicalName") or c) for c in columns}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def check_partition_keys(body: Mapping[str, Any], allowed: frozenset[str], name: str, line: int | None) -> None:
    """An add's ``partitionValues`` keys are partition columns of the table (``allowed``:
    ``partition_value_keys``); ``CorruptLogError`` naming the file, line and key if not."""
    values = body.get("partitionValues")
    if isinstance(values, dict) and not allowed.issuperset(values):
        key = next(k for k in values if k not in allowed)
        raise unknown_key_error(f"{name}: line {line}" if line else name, body.get("path"), key, allowed, path=name, line=line)


def unknown_key_error(where: str, add_path: object, key: str, allowed: frozenset[str], *, path: str, line: int | None) -> CorruptLogError:
    """The one wording of this refusal, whichever reader finds it (``where``: the file and its line or row)."""
    return CorruptLogError(
        f"{where}: add of {add_path!r} has a partition value for {key!r}, which is not a partition "
        f"column of the table (partition columns: {sorted(allowed)})", path=path, line=line,
    )


def unknown_map_key(values: pa.Array | pa.ChunkedArray, allowed: frozenset[str]) -> tuple[int, str] | None:
    """The first row of ``values`` (``partitionValues`` maps, as a checkpoint stores them) holding
    a key outside ``allowed``, and that key; None when every key is allowed. Columnar: all keys
    against the set at once, never a row in Python; pyarrow alone (a cleanup process keeps numpy
    out)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    value_set = pa.array(sorted(allowed), pa.string())
    rows = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        offsets = chunk.offsets
        start, end = offsets[0].as_py(), offsets[-1].as_py()
        keys = chunk.keys.slice(start, end - start)
        known = pc.is_in(keys, value_set=value_set)
        if pc.all(known).as_py() is not False:
            rows += len(chunk)
            continue
        first = pc.index(known, False).as_py()
        # the row holding key ``first``: the rows that end at or before it
        row = pc.sum(pc.less_equal(offsets.slice(1), start + first)).as_py() or 0
        return rows + row, str(keys[first].as_py())
    return None


def map_keys(values: pa.Array | pa.ChunkedArray) -> set[str]:
    """The distinct keys of ``partitionValues`` maps (as a checkpoint stores them), every entry
    ``unknown_map_key`` reads; columnar (it then finds the row of one outside the table's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: set[str] = set()
    for chunk in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        if len(chunk):
            offsets = chunk.offsets
            start, end = offsets[0].as_py(), offsets[-1].as_py()
            out.update(pc.unique(chunk.keys.slice(start, end - start)).to_pylist())
    return out
