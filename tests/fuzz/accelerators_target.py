"""libFuzzer target (atheris) over the accelerators' three C parsers of bytes any writer controls.

Run by tests/fuzz/test_fuzz_accelerators.py with the extensions built by clang with AddressSanitizer
and libFuzzer's coverage instrumentation, so that the fuzzer is guided by the C code's branches and
any out-of-bounds read or write stops it. Each input is cut into rows at ``\\x00``; the first byte
picks the target (modulo 3):

- 0: ``add.stats`` objects read through the compiled reader (``fast_stats.read``, as
  ``parsed_columns`` calls it) must equal pyarrow's reading of the same rows, or both refuse them;
- 1: the newest-action-per-path pass must pick the winners dictionary encoding picks;
- 2: commit lines (rows joined by newlines) through the strict validation of a streamed commit with
  the compiled line scanner and without: the same outcome, and every line it vouches for is one the
  pure path accepts with the same path.
"""

from __future__ import annotations

import sys

import atheris
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.model.validation import loads_action
from airflow_delta_maintenance.deltalog.replay import commit_stream, file_keys
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


def _outcome(block: bytes, accelerated: bool) -> object:
    validator = commit_stream.CommitStreamValidator("c", accelerated=accelerated)
    try:
        validator.feed(block)
        validator.finish()
    except CorruptLogError as exc:
        return str(exc)
    return validator.rules._paths, validator.rules._files, validator.first


def lines(rows: list[bytes]) -> None:
    block = b"\n".join(rows)
    codes, paths = commit_stream._log_lines.scan(block)  # type: ignore[union-attr]
    raws = block.split(b"\n")
    if len(codes) != len(raws):
        raise AssertionError(f"{len(codes)} codes for {len(raws)} lines of {block!r}")
    path = iter(paths)
    for code, raw in zip(codes, raws, strict=True):
        if code in (1, 2):
            action = loads_action(raw, "c", 1)  # raises if the scanner vouched for a line the pure path refuses
            if (next(iter(action)), action[next(iter(action))]["path"]) != (("add", "remove")[code - 1], next(path)):
                raise AssertionError(f"scanner and pure path differ on {raw!r}")
        elif code == 0 and raw.strip():
            raise AssertionError(f"a non-blank line taken for blank: {raw!r}")
    fast, slow = _outcome(block, True), _outcome(block, False)
    if fast != slow:
        raise AssertionError(f"compiled and pure validation differ on {block!r}: {fast!r} != {slow!r}")


def one_input(data: bytes) -> None:
    if not data:
        return
    rows = data[1:].split(b"\x00")
    (stats, keys, lines)[data[0] % 3](rows)


def main() -> None:
    if not (fast_stats.AVAILABLE and file_keys.AVAILABLE and commit_stream.AVAILABLE):
        raise SystemExit("the accelerators are not loaded: nothing to fuzz")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
