"""libFuzzer target (atheris) over the accelerators' two C parsers of bytes any writer controls.

Run by tests/fuzz/test_fuzz_accelerators.py with the extensions built by clang with AddressSanitizer
and libFuzzer's coverage instrumentation, so that the fuzzer is guided by the C code's branches and
any out-of-bounds read or write stops it. Each input is cut into rows at ``\\x00``; the first byte
picks the target:

- even: ``add.stats`` objects read through the compiled reader (``fast_stats.read``, as
  ``parsed_columns`` calls it) must equal pyarrow's reading of the same rows, or both refuse them;
- odd: the newest-action-per-path pass must pick the winners dictionary encoding picks.
"""

from __future__ import annotations

import sys

import atheris
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_maintenance.deltalog.replay import file_keys
from airflow_delta_maintenance.deltalog.stats import fast_stats, parsed_columns

# Coverage comes from the C code (compiled with -fsanitize=fuzzer-no-link); the Python around it is
# not instrumented, which would only slow each run down.

LEAVES = pa.struct([("a", pa.int64()), ("b", pa.float64()), ("c", pa.float32()), ("d", pa.string()), ("e", pa.int32()), ("f", pa.int8()),
                    ("g", pa.struct([("h", pa.int16()), ("i", pa.string())]))])
SCHEMA = pa.schema([("numRecords", pa.int64()), ("minValues", LEAVES), ("maxValues", LEAVES),
                    ("nullCount", pa.struct([("a", pa.int64()), ("g", pa.struct([("h", pa.int64())]))])), ("tightBounds", pa.bool_())])


def _canon(table: pa.Table | None, rows: int) -> object:
    if table is None or table.num_rows != rows:
        return None  # parse_stats refuses both alike
    try:
        return [{k: (v.hex() if isinstance(v, float) else v) for k, v in row.items()} for row in table.to_pylist()]
    except UnicodeDecodeError:  # invalid UTF-8 is kept as it is: compare the arrays
        return table


def stats(rows: list[bytes]) -> None:
    strings = pa.array(rows, pa.binary()).view(pa.string())
    fast = parsed_columns._read_objects(strings, SCHEMA)
    slow = parsed_columns._read_json(strings, SCHEMA)
    a, b = _canon(fast, len(rows)), _canon(slow, len(rows))
    same = a.equals(b) if isinstance(a, pa.Table) and isinstance(b, pa.Table) else a == b
    if not same:
        raise AssertionError(f"compiled and pyarrow readers differ on {rows!r}: {a!r} != {b!r}")


def keys(rows: list[bytes]) -> None:
    paths = pa.array([r if r != b"-" else None for r in rows], pa.binary()).view(pa.string())
    orders = np.arange(len(rows), dtype=np.int64)
    native = file_keys.newest_orders([paths], [orders], len(rows))
    assert native is not None
    codes = pc.dictionary_encode(pc.fill_null(paths, "\x00null")).indices.to_numpy()
    newest = np.full(int(codes.max()) + 1 if len(codes) else 0, -1)
    np.maximum.at(newest, codes, orders)
    expected = np.zeros(len(rows), dtype=bool)
    expected[newest[newest >= 0]] = True
    if not np.array_equal(native[0], expected):
        raise AssertionError(f"winners differ on {rows!r}")


def one_input(data: bytes) -> None:
    if not data:
        return
    rows = data[1:].split(b"\x00")
    (stats if data[0] % 2 == 0 else keys)(rows)


def main() -> None:
    if not (fast_stats.AVAILABLE and file_keys.AVAILABLE):
        raise SystemExit("the accelerators are not loaded: nothing to fuzz")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
