"""The compiled stats reader (``fast_stats`` / the accelerators' ``_stats_json.c``) reads exactly what
pyarrow's JSON reader reads — same values bit for bit, same nulls, same refusals — on plain rows, on
every kind of odd row (which it leaves to pyarrow), and on mixtures of both. Without the
accelerators (``DELTA_MAINTENANCE_ACCEL=off``, or not installed) the same tests compare the pure
path with pyarrow and pass alike (tests/integration/test_packaging.py runs them so)."""

from __future__ import annotations

import io
import json
import math
import random
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.model.schema import stats_parse_plan
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.stats import fast_stats, parsed_columns
from airflow_delta_maintenance.deltalog.stats.parsed_columns import parse_stats
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, metadata, protocol

LEAVES = pa.struct(
    [
        ("a", pa.int64()),
        ("b", pa.float64()),
        ("c", pa.float32()),
        ("d", pa.string()),
        ("e", pa.int32()),
        ("f", pa.int8()),
        ("g", pa.struct([("h", pa.int16()), ("i", pa.string())])),
    ]
)
NULLS = pa.struct([("a", pa.int64()), ("d", pa.int64()), ("g", pa.struct([("h", pa.int64())]))])
SCHEMA = pa.schema([("numRecords", pa.int64()), ("minValues", LEAVES), ("maxValues", LEAVES), ("nullCount", NULLS), ("tightBounds", pa.bool_())])


def _strings(rows: list[bytes]) -> pa.Array:
    """A string array of raw bytes, invalid UTF-8 included (as a damaged log could hold)."""
    return pa.array(rows, pa.binary()).view(pa.string())


def _canon(value: Any) -> Any:
    if isinstance(value, float):
        return value.hex()  # bit for bit: -0.0 and 0.0 differ, and so would a rounding
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


def _both(rows: list[bytes], schema: pa.Schema = SCHEMA) -> tuple[Any, Any]:
    strings = _strings(rows)
    fast = parsed_columns._read_objects(strings, schema)
    slow = parsed_columns._read_json(strings, schema)
    # objects and rows that do not pair up: parse_stats refuses them
    fast, slow = (None if t is None or t.num_rows != len(rows) else t for t in (fast, slow))
    if fast is None or slow is None:
        return fast, slow
    assert fast.schema == schema
    try:
        return _canon(fast.to_pylist()), _canon(slow.to_pylist())
    except UnicodeDecodeError:  # pyarrow keeps invalid UTF-8 as it is: compare the arrays
        return fast.equals(slow), True


def _assert_same(rows: list[bytes], schema: pa.Schema = SCHEMA) -> Any:
    fast, slow = _both(rows, schema)
    assert fast == slow, rows
    return fast


# ------------------------------------------------------------------ plain rows, read by C alone


def _plain_row(rng: random.Random) -> dict[str, Any]:
    def leaves() -> dict[str, Any]:
        out: dict[str, Any] = {
            "a": rng.randint(-(2**63), 2**63 - 1),
            "b": rng.choice([rng.uniform(-1e6, 1e6), round(rng.uniform(0, 100), 6), rng.random() * 10 ** rng.randint(-300, 300), 0.0, -0.0, 5]),
            "c": rng.choice([round(rng.uniform(-1e3, 1e3), rng.randint(0, 9)), 3.4e38, 1.17549435e-38, 1e-45, 16777217]),
            "d": "".join(rng.choice("abcXYZ09 _-/:é中🎉") for _ in range(rng.randint(0, 40))),
            "e": rng.randint(-(2**31), 2**31 - 1),
            "f": rng.randint(-128, 127),
            "g": {"h": rng.randint(-(2**15), 2**15 - 1), "i": rng.choice(["", "x" * 12, "y" * 13, "2026-01-02T03:04:05.123456Z"])},
        }
        for k in rng.sample(list(out), rng.randint(0, 3)):  # some null, some absent
            if rng.random() < 0.5:
                out[k] = None
            else:
                del out[k]
        return out

    row: dict[str, Any] = {"numRecords": rng.randint(0, 10**9), "minValues": leaves(), "maxValues": leaves(), "nullCount": {"a": 0, "d": rng.randint(0, 9), "g": {"h": 1}}}
    if rng.random() < 0.5:
        row["tightBounds"] = rng.random() < 0.5
    if rng.random() < 0.3:
        row["unknown"] = rng.choice([1, "s", [1, {"x": [None, True]}], {"deep": {"er": []}}, None, False, -2.5e-3])
    keys = list(row)
    rng.shuffle(keys)  # key order is free
    return {k: row[k] for k in keys}


@pytest.mark.slow  # 0.9 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
@pytest.mark.parametrize("seed", range(4))
def test_plain_rows_are_read_by_the_extension_exactly(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    rows = [json.dumps(_plain_row(rng), ensure_ascii=False, separators=rng.choice([(",", ":"), (", ", ": ")])).encode() for _ in range(3000)]
    calls: list[int] = []
    real = parsed_columns._read_json
    monkeypatch.setattr(parsed_columns, "_read_json", lambda s, schema: calls.append(len(s)) or real(s, schema))
    fast = parsed_columns._read_objects(_strings(rows), SCHEMA)
    if fast_stats.AVAILABLE:  # without the extension pyarrow reads them all (compared below)
        assert calls == [], "plain rows were left to pyarrow"
    monkeypatch.setattr(parsed_columns, "_read_json", real)
    slow = parsed_columns._read_json(_strings(rows), SCHEMA)
    assert fast is not None and slow is not None
    assert _canon(fast.to_pylist()) == _canon(slow.to_pylist())
    assert fast.equals(slow)


# ------------------------------------------------------------------ odd rows, one at a time

ODD_VALUES = {
    "a": ["-0", "01", "1.0", "1e2", "+1", "9223372036854775808", "-9223372036854775809", "-9223372036854775808", '"5"', "true", "[]", "{}", "1 2", "-", "0x10"],
    "b": ["1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", ".5", "1.", "-", "1e", "1e+", "12345678901234567890123", "0.1234567890123456789012345", "1e-99999", "1e99999",
          "2.2250738585072011e-308", "4.9e-324", "1.7976931348623157e308", "9007199254740993", "123456789012345678e-22", "1E22", "1e23", '"1"', "-0.0", "00.5"],
    "c": ["3.4028235e38", "3.4028236e38", "1e39", "1.4e-45", "7e-46", "16777217", "0.1", "1.00000005960464477539", "3.4028234663852886e38"],
    "d": ['"a\\"b"', '"a\\\\b"', '"\\u00e9"', '"\\ud83c\\udf89"', '"\\ud800"', '"tab\there"', '"\\n"', "5", "true", '"é"'],
    "e": ["2147483647", "2147483648", "-2147483648", "-2147483649", "1.5"],
    "f": ["127", "128", "-128", "-129"],
}
ODD_ROWS = [
    b"", b" ", b"\n", b"{}", b" {} ", b"{}{}", b"null", b" \n null", b"null{}", b"{}null", b"{} x", b"[]", b"1", b'"s"', b"{", b"}", b'{"numRecords":1,}', b'{,"numRecords":1}',
    b'{"numRecords":1 "tightBounds":true}', b'{"numRecords":1,"numRecords":2}', b'{"minValues":{"a":1,"a":1}}', b'{"minValues":null}', b'{"minValues":5}',
    b'{"minValues":[]}', b'{"tightBounds":1}', b'{"tightBounds":"true"}', b'{"tightBounds":null}', b'{"nume\\u0052ecords":1}', b'{"numRecords":1}\x00',
    b'{"x":"\xff"}', b'{"minValues":{"d":"\xc3\x28"}}', b'{"minValues":{"d":"\xed\xa0\x80"}}', b'{"minValues":{"d":"\xf4\x90\x80\x80"}}', b'{"minValues":{"d":"\xe0\x80\xaf"}}',
    b'{"x":' + b"[" * 70 + b"]" * 70 + b"}", b'{"x":' + b"[" * 10 + b"]" * 10 + b"}", b'{"x":{"y":[1,2,{"z":"\\"}"}]}}', b'{"x":tru}', b'{"x":"unterminated}',
    b'{"x":1e999}', b'{"x":-1e999}', b'{"x":1e-99999}', b'{"x":[1e400]}', b'{"x":1' + b"0" * 400 + b"}",
    b'\t{"numRecords"\n:\r1}\n', b'{"numRecords":1}//c', b"{'numRecords':1}", b'{"minValues":{"g":{"h":1,"i":"x","j":{"k":[]}}}}', b'{"minValues":{"g":{"h":40000}}}',
]


def _odd_rows() -> list[bytes]:
    rows = list(ODD_ROWS)
    for key, values in ODD_VALUES.items():
        rows += [b'{"minValues":{"%s":%s}}' % (key.encode(), v.encode()) for v in values]
    return rows


@pytest.mark.parametrize("row", _odd_rows(), ids=repr)
def test_an_odd_row_is_read_as_pyarrow_reads_it(row: bytes) -> None:
    plain = [json.dumps({"numRecords": i, "minValues": {"a": i, "b": i / 7, "d": f"s{i}"}}).encode() for i in range(5)]
    _assert_same([row])
    _assert_same([*plain[:2], row, *plain[2:]])  # among plain rows: put back in its place


def test_a_blank_row_is_refused_not_paired_with_another_rows_object() -> None:
    # pyarrow's read of all rows would pair objects with the wrong rows here (the blank one reads
    # as nothing, the double one as two); the compiled reader refuses the whole input instead.
    rows = [b'{"numRecords":1}', b"", b'{"numRecords":2}{"numRecords":3}', b'{"numRecords":4}'] + [b'{"numRecords":5}'] * 10
    strings = _strings(rows)
    assert parsed_columns._read_objects(strings, SCHEMA) is None


def test_many_odd_rows_go_to_pyarrow_at_once() -> None:
    rows = [b'{"minValues":{"d":"\\u00e9%d"}}' % i for i in range(60)] + [b'{"minValues":{"d":"e%d"}}' % i for i in range(40)]
    assert _assert_same(rows) is not None


# The edges of the number matrix, written out: zeros, the subnormal and normal limits of float64
# and float32, just past them (overflow, underflow), halfway roundings, and more digits than a double holds.
EDGE_NUMBERS = [
    "0", "-0", "0.0", "-0.0", "0e0", "-0E-0", "1", "-1", "0.1", "-0.1", "1e-400", "-1e-400", "4.9e-324", "5e-324", "2.4703282292062327e-324",
    "2.2250738585072014e-308", "2.2250738585072011e-308", "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
    "3.4028235e38", "3.4028235677973366e38", "3.4028236e38", "1.401298464324817e-45", "7e-46", "1.1754943508222875e-38",
    "9007199254740993", "9007199254740992.5", "123456789012345678901234", "0.30000000000000004", "1.00000000000000011102230246251565",
    "2.5e-8", "1E+2", "1e+308", "1e309", "12345678901234567890.123456789012345678901e-30",
]


@pytest.mark.slow  # make test runs it, the fast tier does not
def test_numbers_match_pyarrow_bit_for_bit() -> None:
    """Every shape of a JSON number (sign, mantissa of 1 to 24 digits, fraction of 0 to 22, exponent
    of either case and sign up to 330, shortest reprs across the whole double range, the edges
    above) read into float64 and float32 columns. 1,200 random numbers cover the shapes: 25,000
    took 90 s and proved nothing more (the values are independent of each other)."""
    rng = random.Random(11)
    tokens: list[str] = list(EDGE_NUMBERS)
    for _ in range(1000):
        mantissa = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24))).lstrip("0") or "0"
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 22)))
        token = ("-" if rng.random() < 0.3 else "") + mantissa + (f".{frac}" if frac else "")
        if rng.random() < 0.5:
            token += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 330))
        tokens.append(token)
    tokens += [repr(rng.uniform(-1, 1) * 10 ** rng.randint(-320, 308)) for _ in range(200)]
    tokens = [t for t in tokens if "inf" not in t]
    for key in ("b", "c"):
        row = b'{"maxValues":{"%s":%%s}}' % key.encode()
        # one out-of-range value refuses all: the ones out of the column's range are compared one by one
        limit = 1.7976931348623157e308 if key == "b" else 3.4028235677973366e38
        far = [t for t in tokens if not abs(float(t)) < limit]
        near = [t for t in tokens if abs(float(t)) < limit]
        for t in far:
            _assert_same([row % t.encode()])
        fast, slow = _both([row % t.encode() for t in near])
        if slow is None:  # pyarrow refused one we took for in range: keep what it reads, one by one
            near = [t for t in near if _both([row % t.encode()])[1] is not None]
            fast, slow = _both([row % t.encode() for t in near])
        assert len(near) > len(tokens) // 2 and slow is not None and fast == slow, (len(near), len(tokens))


# ------------------------------------------------------------------ random mixtures (hypothesis)

_WS = st.sampled_from(["", "", "", " ", "\n", "\t", "\r\n  "])


@st.composite
def _json_text(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["int", "float", "str", "lit", "odd"] + (["obj", "arr"] if depth < 3 else [])))
    if kind == "int":
        return str(draw(st.integers(min_value=-(2**64), max_value=2**64)))
    if kind == "float":
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if kind == "str":
        return json.dumps(draw(st.text(max_size=20)), ensure_ascii=draw(st.booleans()))
    if kind == "lit":
        return draw(st.sampled_from(["true", "false", "null"]))
    if kind == "odd":
        return draw(st.sampled_from(["-0", "01", "1.", ".5", "1e999", "NaN", '"\\ud800"', "tru", "", "{", "]"]))
    if kind == "arr":
        items = draw(st.lists(_json_text(depth + 1), max_size=3))
        return "[" + ",".join(items) + "]"
    keys = draw(st.lists(st.sampled_from(["numRecords", "minValues", "maxValues", "nullCount", "tightBounds", "a", "b", "c", "d", "e", "f", "g", "h", "i", "zz"]), max_size=6))
    parts = [draw(_WS) + json.dumps(k) + draw(_WS) + ":" + draw(_WS) + draw(_json_text(depth + 1)) + draw(_WS) for k in keys]
    return "{" + ",".join(parts) + "}"


@pytest.mark.slow  # a property run (4.6 s CPU): make test runs it, the fast tier does not
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_json_text(), min_size=1, max_size=8))
def test_random_rows_read_alike(texts: list[str]) -> None:
    rows = [t.encode() for t in texts]
    _assert_same(rows)
    for row in rows:  # and one by one, where a refusal of one row does not hide the others
        _assert_same([row])


def test_without_the_extension_the_results_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in [("id", "long"), ("x", "double"), ("s", "string"), ("d", "date"), ("t", "timestamp")]]}
    plan = stats_parse_plan(schema, [], True)
    rows = ["null"] + [  # first: pyarrow's reader crashes the process when its input begins with null
        json.dumps({"numRecords": i, "minValues": {"id": i, "x": i / 3, "s": f"é{i}", "d": "2026-01-02", "t": "2026-01-02T03:04:05.000Z"}, "nullCount": {"id": 0}, "tightBounds": True})
        for i in range(3000)
    ] + ['{"minValues":{"s":"\\u00e9"}}', None]
    stats = pa.array(rows, pa.string())
    with_ext = parse_stats(stats, plan)
    monkeypatch.setattr(fast_stats, "AVAILABLE", False)
    without = parse_stats(stats, plan)
    assert with_ext is not None and without is not None and with_ext.equals(without)
    assert math.isclose(with_ext.to_pylist()[4]["minValues"]["x"], 1.0)
    assert with_ext.to_pylist()[0] == dict.fromkeys(plan.final_type.names)  # `null`: a row of nulls, as pyarrow reads it elsewhere


@pytest.mark.parametrize("extension", [True, False])
def test_a_damaged_stats_null_neither_crashes_a_load_nor_a_checkpoint(extension: bool, memfs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # An add whose stats string is `null` once crashed the process (pyarrow's reader, handed a
    # block that begins with null); now the file's statistics are all unknown.
    monkeypatch.setattr(fast_stats, "AVAILABLE", extension)
    log = LogBuilder(memfs, "/tbl")
    log.commit(0, [protocol(), metadata()])
    log.commit(1, [add("a", stats="null"), add("b", stats='{"numRecords":3,"minValues":{"x":1},"maxValues":{"x":2},"nullCount":{"x":0}}')])
    store = open_table_storage("memory://tbl")
    snapshot = load_snapshot(store, parse_stats=True)
    stats = {p: s for p, s in zip(snapshot.files.column("path").to_pylist(), snapshot.parsed_stats().to_pylist(), strict=True)}
    assert stats["a"] == {"numRecords": None, "minValues": None, "maxValues": None, "nullCount": None}
    assert stats["b"] == {"numRecords": 3, "minValues": {"x": 1}, "maxValues": {"x": 2}, "nullCount": {"x": 0}}
    result = write_checkpoint(store, load_snapshot(store))
    written = pq.read_table(io.BytesIO(store.read(result.files[0]))).column("add").to_pylist()
    assert {a["path"]: a["stats_parsed"] for a in written if a} == stats
