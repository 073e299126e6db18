"""The reader of Parquet checkpoint parts and sidecars into ``ParsedActions``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError
from ..model.action_types import ADD_FIELDS, REMOVE_FIELDS
from ..model.partition_keys import unknown_key_error, unknown_map_key
from ..model.validation import parquet_action, validate_action
from .parsed_actions import ORDER, PLACEHOLDER_ORDER, ParsedActions, empty_file_actions, file_action_table, first_nameless
from .strict_actions import rules_hold

__all__ = ["read_parquet_actions", "check_partition_value_keys"]


_NON_FILE_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata", "checkpointMetadata", "sidecar")


def _as_struct(table: pa.Table, fields: list[pa.Field]) -> pa.ChunkedArray:
    """The file-action columns of ``table`` as one struct column (what ``rules_hold`` checks)."""
    names = [f.name for f in fields]
    return pa.chunked_array(
        [pa.StructArray.from_arrays([b.column(n) for n in names], names=names) for b in table.select(names).to_batches()],
        pa.struct(fields),
    )


def read_parquet_actions(name: str, data: bytes, base_order: int = 0) -> tuple[ParsedActions, int]:
    """Actions of a Parquet checkpoint part or sidecar; returns them and the number of rows read."""
    import pyarrow.parquet as pq  # here: a log without a checkpoint never needs it (~20 ms of start-up)

    try:
        pf = pq.ParquetFile(pa.BufferReader(data))  # native reads: a Python file object takes the GIL per read
        present = set(pf.schema_arrow.names)
        # threads only for a large file: for a small one the hand-off costs more than the decoding
        table = pf.read(columns=[c for c in ("add", "remove", *_NON_FILE_COLUMNS) if c in present], use_threads=len(data) > 8 << 20)
    except (pa.ArrowException, ValueError, OSError) as exc:  # ValueError: a footer whose names are not UTF-8
        raise CorruptLogError(f"{name}: not a readable Parquet checkpoint ({exc})", path=name) from None
    n = table.num_rows
    if table.num_columns > 1:
        valid = np.zeros(n, dtype=np.int64)
        for column in table.columns:
            if column.null_count != len(column):
                valid += np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=np.int64)
        if n and valid.max() > 1:
            row = int(np.argmax(valid > 1))
            raise CorruptLogError(f"{name}: row {row} holds more than one action; one action per row", path=name, line=row + 1)
    order = np.arange(base_order, base_order + n, dtype=np.int64)
    try:
        adds = file_action_table(table.column("add"), ADD_FIELDS, order, placeholders=True) if "add" in present else empty_file_actions(ADD_FIELDS)
        removes = (
            file_action_table(table.column("remove"), REMOVE_FIELDS, order, placeholders=True)
            if "remove" in present
            else empty_file_actions(REMOVE_FIELDS)
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise CorruptLogError(f"{name}: file actions of the wrong type ({exc})", path=name) from None
    for kind, t in (("add", adds), ("remove", removes)):
        if (nameless := first_nameless(t)) is not None:
            row = nameless - base_order
            raise CorruptLogError(f"{name}: row {row}: {kind} action without a path", path=name, line=row + 1)
        real = t.filter(pc.not_equal(t.column(ORDER), PLACEHOLDER_ORDER)) if t.num_rows else t
        if real.num_rows and not rules_hold(_as_struct(real, ADD_FIELDS if kind == "add" else REMOVE_FIELDS), kind):
            raise CorruptLogError(f"{name}: a {kind} action breaks the protocol's rules (a required field missing, "
                                  "an empty path, a negative size or a malformed deletion vector)", path=name)
    others: list[tuple[int, int, int, dict[str, Any]]] = []
    for column in _NON_FILE_COLUMNS:
        if column not in present:
            continue
        col = table.column(column)
        idx = np.flatnonzero(col.is_valid().to_numpy(zero_copy_only=False))
        if len(idx):
            for i, value in zip(idx, col.take(pa.array(idx)).to_pylist(), strict=True):
                action = parquet_action(column, value)
                validate_action(action, f"{name}: row {int(i)}")
                others.append((base_order + int(i), 0, 0, action))
    others.sort(key=lambda t: t[0])
    return ParsedActions(adds, removes, others), n



def check_partition_value_keys(adds: pa.Table, allowed: frozenset[str], name: str, base_order: int) -> None:
    """Every key of the adds' ``partitionValues`` maps is one of ``allowed`` (the checkpoint's own
    partition columns, ``model.partition_keys``); ``CorruptLogError`` naming the file, row, path and
    key if not."""
    if not adds.num_rows or (found := unknown_map_key(adds.column("partitionValues"), allowed)) is None:
        return
    row, key = found
    order = int(adds.column(ORDER)[row].as_py()) - base_order
    raise unknown_key_error(f"{name}: row {order}", adds.column("path")[row].as_py(), key, allowed, path=name, line=order + 1)
