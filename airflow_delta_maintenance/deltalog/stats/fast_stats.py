"""The compiled reader of plain ``add.stats`` objects (``_stats_json`` of the optional
``airflow-delta-maintenance-accel`` distribution), when it is installed.

``read(strings, ...)`` gives what ``pyarrow.json.read_json`` gives for the same objects
under the same explicit schema (unknown keys ignored), or None when pyarrow would fail. The C code
reads the rows in the plain form writers produce (about 4.5x faster than pyarrow's reader: no
chunking, no type inference machinery, numbers by Clinger's fast path) and *flags* every row it
cannot read exactly as pyarrow would — escapes, invalid UTF-8, duplicate keys, out-of-range or
non-integer numbers for integer fields, other types. The flagged rows are read by pyarrow and put
back in place, so results never depend on whether the extension exists, only speed does.

The extension is optional (the ``[accel]`` extra installs it; a Spark job's zipped copy of the
package never has it): ``AVAILABLE`` says whether it loaded (see ``_runtime/accelerators.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from .._runtime import accelerators

_stats_json = accelerators.load("_stats_json")  # None: the pyarrow reader does all the work
AVAILABLE = _stats_json is not None

__all__ = ["AVAILABLE", "read"]

_STRUCT, _INT, _F64, _F32, _STR, _BOOL = range(6)
_INTS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_VALUE_DTYPES = {_INT: np.int64, _F64: np.float64, _F32: np.float32, _BOOL: np.uint8}
# Rows the extension flags are read again by pyarrow and moved into place with a take; above this
# share the whole input goes to pyarrow at once instead.
_MAX_FLAGGED_SHARE = 0.5


class _Field:
    """One field of the read schema with the buffers the extension fills for it."""

    def __init__(self, field: pa.Field, rows: int) -> None:
        self.field = field
        typ = field.type
        self.children: list[_Field] = []
        self.lo, self.hi = 0, 0
        if pa.types.is_struct(typ):
            self.kind = _STRUCT
            self.children = [_Field(typ.field(i), rows) for i in range(typ.num_fields)]
        elif typ in _INTS:
            self.kind = _INT
            bits = _INTS[typ]
            self.lo, self.hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        elif typ == pa.float64():
            self.kind = _F64
        elif typ == pa.float32():
            self.kind = _F32
        elif typ == pa.string():
            self.kind = _STR
        elif typ == pa.bool_():
            self.kind = _BOOL
        else:
            raise _Unsupported(typ)
        self.valid = np.zeros(rows, dtype=np.uint8)
        if self.kind == _STR:
            self.values = np.zeros(rows * 16, dtype=np.uint8)  # one 16-byte string view per row
        elif self.kind in _VALUE_DTYPES:
            self.values = np.zeros(rows, dtype=_VALUE_DTYPES[self.kind])
        else:
            self.values = np.zeros(0, dtype=np.uint8)

    def spec(self) -> tuple[Any, ...]:
        return (self.field.name.encode(), self.kind, self.valid, self.values, self.lo, self.hi, tuple(c.spec() for c in self.children))

    def array(self, rows: int, data: pa.Buffer) -> pa.Array:
        bitmap = pa.py_buffer(np.packbits(self.valid, bitorder="little"))
        typ = self.field.type
        if self.kind == _STRUCT:
            return pa.Array.from_buffers(typ, rows, [bitmap], children=[c.array(rows, data) for c in self.children])
        if self.kind == _STR:
            # views into `data` (the input bytes), copied out once by the cast
            return pa.Array.from_buffers(pa.string_view(), rows, [bitmap, pa.py_buffer(self.values), data]).cast(pa.string())
        if self.kind == _BOOL:
            return pa.Array.from_buffers(typ, rows, [bitmap, pa.py_buffer(np.packbits(self.values, bitorder="little"))])
        if self.kind == _INT and typ != pa.int64():
            # in range: the extension flags a row whose value does not fit the declared type
            return pa.Array.from_buffers(pa.int64(), rows, [bitmap, pa.py_buffer(self.values)]).cast(typ, safe=False)
        return pa.Array.from_buffers(typ, rows, [bitmap, pa.py_buffer(self.values)])


class _Unsupported(Exception):
    """A read type the extension has no reader for: pyarrow reads everything."""


def read(
    strings: pa.Array, data: pa.Buffer, offsets: np.ndarray, schema: pa.Schema, read_json: Callable[[pa.Array], pa.Table | None]
) -> pa.Table | None:
    """The objects held by ``strings`` (no nulls) read under ``schema``, like ``read_json`` of them
    (which reads the flagged rows and, when the extension cannot help, all of them). ``data`` are
    the strings' bytes and ``offsets`` their ``rows + 1`` int64 positions in it."""
    rows = len(strings)
    if _stats_json is None or rows == 0:
        return read_json(strings)
    try:
        fields = [_Field(f, rows) for f in schema]
    except _Unsupported:
        return read_json(strings)
    flags = np.zeros(rows, dtype=np.uint8)
    flagged = _stats_json.parse(data, offsets, tuple(f.spec() for f in fields), flags)
    if flagged < 0:
        return None  # a blank row: no object to pair with its file
    if flagged > rows * _MAX_FLAGGED_SHARE:
        return read_json(strings)
    table = pa.Table.from_arrays([f.array(rows, data) for f in fields], schema=schema)
    if flagged == 0:
        return table
    where = np.flatnonzero(flags)
    rest = read_json(strings.take(pa.array(where)))
    if rest is None or rest.num_rows != len(where):
        return None
    index = np.arange(rows, dtype=np.int64)
    index[where] = rows + np.arange(len(where), dtype=np.int64)
    return pa.concat_tables([table, rest]).take(pa.array(index))
