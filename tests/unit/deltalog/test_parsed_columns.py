"""``stats_parsed`` / ``partitionValues_parsed`` agree with independent oracles: pyarrow's own
``map_lookup`` kernel, and ``json.loads`` row by row."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_delta_maintenance.deltalog.model.schema import stats_parse_plan
from airflow_delta_maintenance.deltalog.stats.parsed_columns import map_first_value, parse_partition_values, parse_stats

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


def test_parse_stats_reads_the_strings_bytes_as_they_are() -> None:
    """Statistics are read straight from the strings' bytes: a pretty-printed object (newlines
    inside) still parses, and an empty or blank string (no object) or one holding two objects makes
    the row count differ from the input's: None, never rows shifted onto other files."""
    plan = stats_parse_plan(SCHEMA, [], False)
    pretty = json.dumps({"numRecords": 7, "minValues": {"id": 1}}, indent=2)
    parsed = parse_stats(pa.array([pretty, '{"numRecords": 8}']), plan)
    assert parsed is not None and parsed.field("numRecords").to_pylist() == [7, 8]
    assert parse_stats(pa.array(['{"numRecords": 1}', ""]), plan) is None
    assert parse_stats(pa.array(['{"numRecords": 1}', "  "]), plan) is None
    assert parse_stats(pa.array(['{"numRecords": 1}{"numRecords": 2}', '{"numRecords": 3}']), plan) is None


@pytest.mark.slow  # a large input on threads (1.9 s CPU): make test runs it, the fast tier does not
def test_parse_stats_splits_large_inputs_across_threads_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above 2 MiB the strings are read in one slice per CPU on threads; the slices come back in
    order, equal to parsing row by row (nulls and an offset slice included)."""
    import airflow_delta_maintenance.deltalog.stats.parsed_columns as pcmod

    monkeypatch.setattr(pcmod.os, "cpu_count", lambda: 3)
    plan = stats_parse_plan(SCHEMA, [], False)
    strings = [None if i % 97 == 0 else json.dumps({"numRecords": i, "minValues": {"id": -i, "s": "x" * (i % 40)}, "nullCount": {"id": i % 5}})
               for i in range(40_000)]
    column = pa.array(strings, pa.string()).slice(5)
    assert len(pcmod._slices(column, pcmod._THREADED_BYTES)) == 3
    seen: list[int] = []
    real = pcmod._read_objects
    monkeypatch.setattr(pcmod, "_read_objects", lambda s, schema: (seen.append(len(s)), real(s, schema))[1])
    parsed = parse_stats(column, plan)
    assert parsed is not None and parsed.equals(_oracle(column.to_pylist(), plan.final_type))
    assert len(seen) == 3 and sum(seen) == len(column)


def test_stats_slices_balance_bytes_and_stay_under_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row slices hold about equal bytes (a long string does not leave one thread all the work),
    are never empty, cover every row in order, and are cut finer than one per CPU when a slice
    would exceed the JSON reader's block limit."""
    import airflow_delta_maintenance.deltalog.stats.parsed_columns as pcmod

    monkeypatch.setattr(pcmod.os, "cpu_count", lambda: 2)
    column = pa.array(["x" * 3000] + ["y"] * 2999).slice(1, 2999)
    slices = pcmod._slices(column, pcmod._THREADED_BYTES)
    assert [len(s) for s in slices] == [1499, 1500]
    skewed = pa.array(["x" * 3000] + ["y"] * 2999)
    assert [len(s) for s in pcmod._slices(skewed, pcmod._THREADED_BYTES)] == [1, 2999]
    monkeypatch.setattr(pcmod, "_MAX_BLOCK_BYTES", 1000)
    cut = pcmod._slices(column, 2999)
    assert len(cut) == 3 and all(len(s) for s in cut)
    assert pa.concat_arrays(cut).equals(column)


def _table_with_many_files(root: Path, commits: int, per_commit: int, bad_row: int | None = None) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "day", "type": "date", "nullable": True, "metadata": {}}]}
    meta = {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
            "partitionColumns": ["day"], "configuration": {}, "createdTime": 0}
    (log / f"{0:020d}.json").write_text(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n" + json.dumps({"metaData": meta}) + "\n")
    n = 0
    for v in range(1, commits + 1):
        lines = []
        for _ in range(per_commit):
            stats = {"numRecords": n, "minValues": {"id": -n}, "maxValues": {"id": n}, "nullCount": {"id": n % 3}}
            if n == bad_row:
                stats["numRecords"] = "many"
            day = None if n % 7 == 0 else f"2026-01-{n % 28 + 1:02d}"
            add = {"path": f"day={day}/f{n}.parquet", "partitionValues": {"day": day}, "size": n, "modificationTime": 0, "dataChange": True}
            if n % 11:
                add["stats"] = json.dumps(stats)
            lines.append(json.dumps({"add": add}))
            n += 1
        (log / f"{v:020d}.json").write_text("\n".join(lines) + "\n")


@pytest.mark.slow  # 1.5 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
@pytest.mark.parametrize(("commits", "per_commit"), [(2, 50), (3, 9000)])
def test_snapshot_parsed_stats_and_partition_values_match_json_loads_on_threads_or_not(tmp_path: Path, commits: int, per_commit: int) -> None:
    """``Snapshot.parsed_stats()`` / ``parsed_partition_values()``: chunked as ``files``, equal to
    parsing row by row, whether the chunks went to threads (27,000 files) or not (100)."""
    from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot

    _table_with_many_files(tmp_path, commits, per_commit)
    snap = load_snapshot(str(tmp_path))
    stats, parts = snap.parsed_stats(), snap.parsed_partition_values()
    assert stats is not None and parts is not None
    assert [len(c) for c in stats.chunks] == [len(c) for c in snap.files.column("stats").chunks] == [len(c) for c in parts.chunks]
    assert stats.type == snap.stats_plan().final_type
    assert stats.num_chunks > 1 or commits * per_commit < 1000  # the large table goes through the threads
    expected_stats = _oracle(snap.files.column("stats").to_pylist(), snap.stats_plan().final_type)
    assert stats.combine_chunks().equals(expected_stats)
    days = [(m[0][1] if m else None) for m in snap.files.column("partitionValues").to_pylist()]
    assert parts.combine_chunks().field("day").to_pylist() == [dt.date.fromisoformat(d) if d else None for d in days]
    # parsed during the load: the same statistics, row for row with the same files
    during = load_snapshot(str(tmp_path), parse_stats=True)
    assert during.preparsed_stats is not None and during.files.equals(snap.files)
    assert during.parsed_stats() is during.preparsed_stats and during.preparsed_stats.equals(stats)


@pytest.mark.slow  # 0.9 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_snapshot_parsed_stats_is_none_when_a_row_does_not_fit_its_type(tmp_path: Path) -> None:
    from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot

    _table_with_many_files(tmp_path, 3, 9000, bad_row=20_000)
    assert load_snapshot(str(tmp_path)).parsed_stats() is None
    during = load_snapshot(str(tmp_path), parse_stats=True)
    assert during.preparsed_stats is None and during.parsed_stats() is None and during.num_files == 27_000


def _meta(fields: list[str], version: int) -> dict:
    schema = {"type": "struct", "fields": [{"name": f, "type": "long", "nullable": True, "metadata": {}} for f in fields]}
    return {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                         "partitionColumns": [], "configuration": {}, "createdTime": version}}


def _stats_add(path: str, fields: list[str], n: int) -> dict:
    stats = {"numRecords": n, "minValues": dict.fromkeys(fields, -n), "maxValues": dict.fromkeys(fields, n), "nullCount": dict.fromkeys(fields, 0)}
    return {"add": {"path": path, "partitionValues": {}, "size": n, "modificationTime": 0, "dataChange": True, "stats": json.dumps(stats)}}


@pytest.mark.parametrize("checkpoint", [False, True])
def test_stats_parsed_during_the_load_follow_the_final_schema_and_the_winners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint: bool) -> None:
    """``load_snapshot(parse_stats=True)`` starts parsing each part under the schema known so far;
    a column added later (schema evolution) makes it parse the earlier parts again, and files
    removed or re-added later keep only their newest statistics: the same as parsing afterwards.
    Every commit is a batch of its own, so that the parts really are parsed one by one."""
    from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
    from airflow_delta_maintenance.deltalog.replay import reconcile as replay
    from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
    from airflow_delta_maintenance.deltalog.storage import open_table_storage

    log = tmp_path / "_delta_log"
    log.mkdir()

    def commit(v: int, actions: list[dict]) -> None:
        (log / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))

    commit(0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta(["a"], 0), *(_stats_add(f"f{i}", ["a"], i) for i in range(40))])
    commit(1, [{"remove": {"path": "f3", "deletionTimestamp": 1, "dataChange": True}}, _stats_add("f5", ["a"], 500)])
    if checkpoint:
        store = open_table_storage(str(tmp_path))
        write_checkpoint(store, load_snapshot(store, 1))
    commit(2, [_meta(["a", "b"], 2), _stats_add("g", ["a", "b"], 7), _stats_add("f6", ["a", "b"], 600)])
    monkeypatch.setattr(replay, "DELTA_BATCH_BYTES", 1)
    after = load_snapshot(str(tmp_path))
    during = load_snapshot(str(tmp_path), parse_stats=True)
    assert during.segment.checkpoint_version == (1 if checkpoint else -1)
    assert during.preparsed_stats is not None and during.files.equals(after.files)
    expected = after.parsed_stats()
    assert expected is not None and during.preparsed_stats.equals(expected)
    rows = dict(zip(during.files.column("path").to_pylist(), during.preparsed_stats.to_pylist(), strict=True))
    assert "f3" not in rows and rows["f5"]["numRecords"] == 500 and rows["f6"]["maxValues"] == {"a": 600, "b": 600}
    assert rows["f1"]["maxValues"] == {"a": 1, "b": None}  # an old file: no bound for the new column
