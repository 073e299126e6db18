"""``stats_parsed`` / ``partitionValues_parsed`` agree with independent oracles: pyarrow's own
``map_lookup`` kernel, and ``json.loads`` row by row."""

from __future__ import annotations

import datetime as dt
import json
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_delta_maintenance.deltalog.parsed_columns import map_first_value, parse_partition_values, parse_stats
from airflow_delta_maintenance.deltalog.schema import stats_parse_plan

STRING_MAP = pa.map_(pa.string(), pa.string())


def _random_maps(rng: random.Random, n: int) -> pa.MapArray:
    rows: list[list[tuple[str, str | None]] | None] = []
    for _ in range(n):
        if rng.random() < 0.1:
            rows.append(None)
            continue
        keys = rng.choices(["a", "b", "col-1", "c"], k=rng.randint(0, 4))  # repeats and absences
        rows.append([(k, rng.choice([None, "", f"v{rng.randint(0, 9)}"])) for k in keys])
    return pa.array(rows, STRING_MAP)


@pytest.mark.parametrize("seed", range(5))
def test_map_first_value_is_pyarrows_map_lookup(seed: int) -> None:
    rng = random.Random(seed)
    maps = _random_maps(rng, 400)
    for arr in (maps, maps.slice(37), maps.slice(5, 120), maps.slice(400), pa.array([], STRING_MAP)):
        for key in ("a", "b", "col-1", "zzz"):
            assert map_first_value(arr, key).equals(pc.map_lookup(arr, key, "first")), (seed, key, arr.offset, len(arr))


def test_partition_values_use_logical_names_and_null_empty_strings() -> None:
    maps = pa.array([[("col-1", "3"), ("d", "")], [("year", "7"), ("d", "2020-01-02")], None, [("d", "2021-03-04")]], STRING_MAP)
    typ = pa.struct([pa.field("col-1", pa.int32()), pa.field("d", pa.date32())])
    parsed = parse_partition_values(maps.slice(0), ["year", "d"], typ)
    assert parsed is not None
    assert parsed.to_pylist() == [
        {"col-1": 3, "d": None},
        {"col-1": 7, "d": dt.date(2020, 1, 2)},
        {"col-1": None, "d": None},
        {"col-1": None, "d": dt.date(2021, 3, 4)},
    ]
    assert parse_partition_values(pa.array([[("year", "x")]], STRING_MAP), ["year"], pa.struct([pa.field("year", pa.int32())])) is None


SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "v", "type": "double", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
        {"name": "d", "type": "date", "nullable": True, "metadata": {}},
        {"name": "n", "type": {"type": "struct", "fields": [{"name": "x", "type": "integer", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}},
    ],
}


def _oracle(strings: list[str | None], plan_type: pa.StructType) -> pa.Array:
    """Row by row with ``json.loads``: only the plan's fields, everything else ignored."""

    def pick(value: object, typ: pa.DataType) -> object:
        if not pa.types.is_struct(typ):
            if pa.types.is_date(typ) and value is not None:
                return dt.date.fromisoformat(str(value))
            return value
        if not isinstance(value, dict):
            return None
        return {f.name: pick(value.get(f.name), f.type) for f in typ}

    rows = [None if s is None else pick(json.loads(s), plan_type) for s in strings]
    return pa.array(rows, plan_type)


@pytest.mark.parametrize("seed", range(5))
def test_parse_stats_is_json_loads_row_by_row(seed: int) -> None:
    rng = random.Random(seed)
    plan = stats_parse_plan(SCHEMA, [], False)
    strings: list[str | None] = []
    for i in range(3000):
        if rng.random() < 0.05:
            strings.append(None)
            continue
        stats: dict[str, object] = {"numRecords": rng.randint(0, 10**12)}
        if rng.random() < 0.9:
            stats["minValues"] = {"id": -i, "v": rng.random(), "s": rng.choice(["a", 'q"uote', "é", ""]), "d": f"2020-01-0{rng.randint(1, 9)}", "n": {"x": i}}
            stats["maxValues"] = {"id": i, "v": rng.random() * 10, "s": "z" * rng.randint(0, 50)}
        if rng.random() < 0.8:
            stats["nullCount"] = {"id": 0, "v": rng.randint(0, 5), "n": {"x": 1}, "unknown": 3}
        if rng.random() < 0.2:
            stats["tightBounds"] = True  # not in the plan without deletion vectors: ignored
        strings.append(json.dumps(stats, separators=rng.choice([(",", ":"), (", ", ": ")])))
    column = pa.array(strings, pa.string())
    for arr in (column, column.slice(11), column.slice(100, 700)):
        parsed = parse_stats(arr, plan)
        assert parsed is not None and parsed.type == plan.final_type
        assert parsed.equals(_oracle(arr.to_pylist(), plan.final_type)), seed


def test_parse_stats_refuses_values_of_the_wrong_type() -> None:
    plan = stats_parse_plan(SCHEMA, [], False)
    assert parse_stats(pa.array(['{"numRecords": 1}', '{"numRecords": "many"}']), plan) is None
    assert parse_stats(pa.array(['{"numRecords": 1}', "not json"]), plan) is None
    empty = parse_stats(pa.array([], pa.string()), plan)
    assert empty is not None and len(empty) == 0 and empty.type == plan.final_type
