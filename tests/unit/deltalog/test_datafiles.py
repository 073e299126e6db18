"""Data files: delta-spark's paths, the deletion-vector formats, statistics, and old files read
with the table's current schema. Expected strings are what delta-spark 4.4 wrote (zoo captures)."""

from __future__ import annotations

import functools
import json
import struct
import uuid
import zlib
from dataclasses import replace as dataclasses_replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from airflow_delta_maintenance.deltalog.datafiles.deletion_vectors import (
    PORTABLE_MAGIC,
    DeletionVectorDescriptor,
    DeletionVectorError,
    dv_file_path,
    load_deleted_rows,
    parse_bitmap,
)
from airflow_delta_maintenance.deltalog.datafiles.paths import (
    encode_add_path,
    new_data_file_path,
    partition_directory,
)
from airflow_delta_maintenance.deltalog.datafiles.schema import conform_table, data_schema
from airflow_delta_maintenance.deltalog.datafiles.stats import StatsCollector, StatsConfig, stats_leaves, truncate_max_string, truncate_min_string
from airflow_delta_maintenance.deltalog.errors import DataPathError, InvalidLogPathError
from airflow_delta_maintenance.deltalog.model.data_paths import DataPathResolver

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, r = divmod(value, 85)
            chunk.append(_Z85[r])
        out.append("".join(reversed(chunk)))
    return "".join(out)


# ---- paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "values", "types", "add_path_dir"),
    [
        # delta-spark 4.4's own add.path directories (tests/_infra/delta_reference captures)
        (["p", "q"], {"p": "%2F literal", "q": None}, {}, "p=%25252F%20literal/q=__HIVE_DEFAULT_PARTITION__"),
        (["p", "q"], {"p": "日本語", "q": "1"}, {}, "p=日本語/q=1"),
        (["pntz", "pts"], {"pntz": "2024-01-01 10:30:00.25", "pts": "1999-12-31T23:59:59.999000Z"},
         {"pntz": "timestamp_ntz", "pts": "timestamp"}, "pntz=2024-01-01%2010%253A30%253A00.25/pts=1999-12-31%2023%253A59%253A59.999"),
        (["pntz"], {"pntz": None}, {}, "pntz=__HIVE_DEFAULT_PARTITION__"),
        (["region", "year"], {"region": "eu", "year": "2020"}, {}, "region=eu/year=2020"),
        (["s"], {"s": "a=b/c d%e"}, {}, "s=a%253Db%252Fc%20d%2525e"),
        (["s"], {"s": ""}, {}, "s=__HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_partition_directories_and_add_paths_are_spelled_as_delta_spark_spells_them(columns, values, types, add_path_dir) -> None:
    assert encode_add_path(partition_directory(columns, values, types)) == add_path_dir
    assert _rel(add_path_dir + "/f.parquet") == partition_directory(columns, values, types) + "/f.parquet"


def test_new_file_names_follow_delayed_commit_protocol() -> None:
    part = new_data_file_path(["p"], {"p": "a"}, codec="snappy", split=3)
    assert part.startswith("p=a/part-00003-") and part.endswith(".c000.snappy.parquet")
    flat = new_data_file_path([], {}, codec="zstd")
    assert flat.startswith("part-00000-") and flat.endswith("-c000.zstd.parquet")
    mapped = new_data_file_path(["p"], {"p": "a"}, codec="snappy", column_mapping=True)
    prefix, name = mapped.split("/")
    assert len(prefix) == 2 and prefix.isalnum() and name.endswith(".c000.snappy.parquet")


def _rel(logged: str, root: str = "/t") -> str:
    """What OPTIMIZE reads for a logged path: the one resolver's (``DataFiles.resolve``)."""
    return DataPathResolver(root).resolve(logged).relative


@pytest.mark.parametrize("bad", ["../x.parquet", "a/../../x.parquet", "/elsewhere/x.parquet", "s3://other/t/x.parquet", "hdfs:///t/x.parquet",
                                 "_delta_log/00000000000000000000.json", "file:///t/_delta_log/00000000000000000000.json", "file:/t/../u/x.parquet"])
def test_paths_that_leave_the_table_are_refused(bad: str) -> None:
    with pytest.raises(DataPathError) as refused:
        _rel(bad)
    assert isinstance(refused.value, InvalidLogPathError)  # a path no retry can fix


def test_absolute_paths_inside_the_table_are_made_relative() -> None:
    assert _rel("file:///t/a%20b/x.parquet") == "a b/x.parquet"
    assert _rel("a//b.parquet") == "a/b.parquet"  # as the wheel and delta-spark read it
    assert DataPathResolver("s3://bucket/t", "bucket/t").resolve("s3://bucket/t/p=1/x.parquet").relative == "p=1/x.parquet"


# ---- deletion vectors ----------------------------------------------------------------------------


def _serialized(rows: list[int]) -> bytes:
    return struct.pack("<i", PORTABLE_MAGIC) + BitMap64(rows).serialize()


def test_inline_deletion_vector() -> None:
    rows = [0, 5, 7, 2**32 + 1]
    data = _serialized(rows)
    padded = data + b"\0" * (-len(data) % 4)
    dv = DeletionVectorDescriptor("i", z85_encode(padded), len(data), len(rows))
    assert load_deleted_rows(dv, _rel, lambda *_: b"").tolist() == rows


def _dv_file(tmp_path: Path, payloads: list[bytes], prefix: str = "ab") -> tuple[str, list[int]]:
    file_uuid = uuid.uuid4()
    blob, offsets = bytearray(b"\x01"), []
    for p in payloads:
        offsets.append(len(blob))
        blob += struct.pack(">i", len(p)) + p + struct.pack(">I", zlib.crc32(p))
    target = tmp_path / prefix / f"deletion_vector_{file_uuid}.bin"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(bytes(blob))
    return prefix + z85_encode(file_uuid.bytes), offsets


def _reader(root: Path):
    def read(rel: str, offset: int, length: int) -> bytes:
        with open(root / rel, "rb") as f:
            f.seek(offset)
            return f.read(length)

    return read


def test_on_disk_deletion_vectors_at_offsets_with_their_checksums(tmp_path: Path) -> None:
    a, b = _serialized([1, 2, 3]), _serialized([10])
    encoded, offsets = _dv_file(tmp_path, [a, b])
    resolve = functools.partial(_rel, root=str(tmp_path))
    dv_b = DeletionVectorDescriptor("u", encoded, len(b), 1, offset=offsets[1])
    assert dv_file_path(dv_b, resolve).startswith("ab/deletion_vector_")
    assert load_deleted_rows(dv_b, resolve, _reader(tmp_path)).tolist() == [10]
    dv_a = DeletionVectorDescriptor("u", encoded, len(a), 3, offset=offsets[0])
    assert load_deleted_rows(dv_a, resolve, _reader(tmp_path)).tolist() == [1, 2, 3]
    absolute = DeletionVectorDescriptor("p", "file://" + str(tmp_path / dv_file_path(dv_a, resolve)), len(a), 3, offset=offsets[0])
    assert load_deleted_rows(absolute, resolve, _reader(tmp_path)).tolist() == [1, 2, 3]


def test_a_corrupt_or_mismatched_deletion_vector_is_refused_naming_the_file(tmp_path: Path) -> None:
    a = _serialized([1, 2, 3])
    encoded, offsets = _dv_file(tmp_path, [a])
    resolve = functools.partial(_rel, root=str(tmp_path))
    wrong_count = DeletionVectorDescriptor("u", encoded, len(a), 4, offset=offsets[0])
    with pytest.raises(DeletionVectorError, match="holds 3 rows, its descriptor says 4"):
        load_deleted_rows(wrong_count, resolve, _reader(tmp_path), data_file="p=a/f.parquet")
    path = tmp_path / dv_file_path(wrong_count, resolve)
    raw = bytearray(path.read_bytes())
    raw[offsets[0] + 6] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DeletionVectorError, match="checksum"):
        load_deleted_rows(DeletionVectorDescriptor("u", encoded, len(a), 3, offset=offsets[0]), resolve, _reader(tmp_path))
    outside = DeletionVectorDescriptor("p", "file:///elsewhere/dv.bin", len(a), 3, offset=1)
    with pytest.raises(InvalidLogPathError):
        load_deleted_rows(outside, resolve, _reader(tmp_path))


def test_the_native_bitmap_array_format_is_read_too() -> None:
    from pyroaring import BitMap

    low, high = BitMap([1, 4]), BitMap([2])
    data = struct.pack("<ii", PORTABLE_MAGIC - 1, 2) + low.serialize() + high.serialize()
    assert parse_bitmap(data).tolist() == [1, 4, 2**32 + 2]


# ---- statistics ----------------------------------------------------------------------------------


def test_string_truncation_is_delta_sparks() -> None:
    long_ascii = "a" * 40
    assert truncate_min_string(long_ascii) == "a" * 32
    assert truncate_max_string(long_ascii) == "a" * 32 + "\x7f"
    umlauts = "ü" * 40  # delta-spark 4.4 wrote max "üüü…ü" (32) + U+10FFFF for such a column
    assert truncate_max_string(umlauts) == "ü" * 32 + "\U0010ffff"
    emoji = "a" * 31 + "😀" + "b"  # a surrogate pair straddling the prefix stays whole
    assert truncate_min_string(emoji) == "a" * 31 + "😀"
    assert truncate_max_string("\U0010ffff" * 40) is None  # nothing fits within 64 units
    assert truncate_max_string("short") == "short"


def _schema(*fields: tuple[str, object]) -> dict:
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]}


def test_stats_json_matches_delta_sparks_shape() -> None:
    schema = _schema(("id", "long"), ("name", "string"), ("amount", "double"), ("flag", "boolean"), ("day", "date"),
                     ("ts", "timestamp"), ("tags", {"type": "array", "elementType": "string", "containsNull": True}),
                     ("info", {"type": "struct", "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": {}}]}),
                     ("f", "float"), ("p", "string"))
    ds = data_schema(schema, ["p"], "none")
    import datetime as dt

    table = pa.table({
        "id": [200, 319], "name": ["name-200", None], "amount": [-0.0, float("nan")], "flag": [True, False],
        "day": [dt.date(2020, 7, 19), dt.date(2020, 11, 15)],
        "ts": [dt.datetime(2020, 9, 21, 20, 30, tzinfo=dt.timezone.utc), dt.datetime(2020, 9, 26, 19, 31, 59, 999999, tzinfo=dt.timezone.utc)],
        "tags": [["x"], None], "info": [{"a": 200}, None], "f": pa.array([28.571428, 45.57143], pa.float32()),
    }).cast(ds.without_partitions())
    collector = StatsCollector(stats_leaves(schema, ["p"], StatsConfig()), StatsConfig())
    collector.update(table)
    assert collector.to_json() == (
        '{"numRecords":2,"minValues":{"id":200,"name":"name-200","amount":-0.0,"day":"2020-07-19","ts":"2020-09-21T20:30:00.000Z",'
        '"info":{"a":200},"f":28.571428},"maxValues":{"id":319,"name":"name-200","amount":"NaN","day":"2020-11-15",'
        '"ts":"2020-09-26T19:31:59.999Z","info":{"a":200},"f":45.57143},"nullCount":{"id":0,"name":1,"amount":0,"flag":0,"day":0,'
        '"ts":0,"tags":1,"info":{"a":1},"f":0}}'
    )


def test_indexed_columns_and_stats_columns_choose_the_leaves() -> None:
    nested = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "y", "type": "long", "nullable": True, "metadata": {}}]}
    schema = _schema(("a", "long"), ("s", nested), ("b", "long"))
    first_two = stats_leaves(schema, [], StatsConfig.from_table({"delta.dataSkippingNumIndexedCols": "2"}, supports_deletion_vectors=False))
    assert [leaf.physical_path for leaf in first_two] == [("a",), ("s", "x")]
    chosen = stats_leaves(schema, [], StatsConfig.from_table({"delta.dataSkippingStatsColumns": "b, `s`"}, supports_deletion_vectors=False))
    assert [leaf.physical_path for leaf in chosen] == [("s", "x"), ("s", "y"), ("b",)]
    assert StatsConfig.from_table({}, supports_deletion_vectors=True).tight_bounds


# ---- old files, current schema -------------------------------------------------------------------


def test_an_old_file_is_read_with_the_current_schema(tmp_path: Path) -> None:
    """Type widening (int → long, float → double, date → timestamp_ntz, decimal widened), a
    column added since (nulls), a dropped column ignored, and field ids matched in id mode."""
    import datetime as dt

    old = pa.table({"i": pa.array([1, 2], pa.int32()), "f": pa.array([1.5, 2.5], pa.float32()),
                    "d": [dt.date(2024, 1, 1), None], "dec": pa.array([1, 2], pa.decimal128(5, 2)), "gone": ["x", "y"]})
    schema = _schema(("i", "long"), ("f", "double"), ("d", "timestamp_ntz"), ("dec", "decimal(10,4)"), ("new", "string"))
    target = data_schema(schema, [], "none").without_partitions()
    out = conform_table(old, target, False, "f.parquet")
    assert out.schema == target
    assert out.column("i").to_pylist() == [1, 2] and out.column("new").null_count == 2
    assert out.column("d").to_pylist() == [dt.datetime(2024, 1, 1), None]

    fields = [{"name": "renamed", "type": "long", "nullable": True, "metadata": {"delta.columnMapping.id": 7, "delta.columnMapping.physicalName": "col-new"}}]
    by_id = data_schema({"type": "struct", "fields": fields}, [], "id")
    written = pa.table([pa.array([5, 6])], schema=pa.schema([pa.field("col-old", pa.int64(), metadata={b"PARQUET:field_id": b"7"})]))
    pq.write_table(written, tmp_path / "x.parquet")
    read = pq.read_table(tmp_path / "x.parquet")
    assert conform_table(read, by_id.without_partitions(), True, "x.parquet").column("col-new").to_pylist() == [5, 6]
    assert json.loads(json.dumps(by_id.logical_to_physical)) == {"renamed": "col-new"}


def _bin_table(tmp_path: Path) -> tuple[Any, list[Any], dict]:
    """A local table and a bin of its small files in three schemas: older files with narrower
    types and a missing column (read by the small-file reader), and one with a deletion vector
    between them (read file by file)."""
    import deltalake

    from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
    from airflow_delta_maintenance.deltalog.datafiles.reader import SourceFile
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"id": pa.array([0], pa.int64()), "v": ["x"]}))
    schema = _schema(("id", "long"), ("v", "string"), ("s", {"type": "struct", "fields": [
        {"name": "a", "type": "integer", "nullable": True, "metadata": {}}, {"name": "b", "type": "string", "nullable": True, "metadata": {}}]}))
    sources = []
    for i in range(6):
        if i % 2:
            t = pa.table({"id": pa.array([10 * i, 10 * i + 1], pa.int32()), "v": [f"a{i}", None]})  # before s was added, id widened since
        else:
            t = pa.table({"id": pa.array([10 * i, 10 * i + 1], pa.int64()), "v": [f"a{i}", f"b{i}"],
                          "s": pa.array([{"a": i}, None], pa.struct([("a", pa.int32())]))})  # before s.b was added
        pq.write_table(t, root / f"f{i}.parquet")
        dv = None
        if i == 2:
            data = _serialized([1])
            dv = {"storageType": "i", "pathOrInlineDv": z85_encode(data + b"\0" * (-len(data) % 4)), "sizeInBytes": len(data), "cardinality": 1}
        sources.append(SourceFile(path=f"f{i}.parquet", size=(root / f"f{i}.parquet").stat().st_size, partition_values={},
                                  deletion_vector=dv, num_records=2))
    return DataFiles(open_table(str(root)).store), sources, schema


# A bin reads on its own thread, or, granted a spare core at its first question, reads the rest
# ahead on another: the same rows in the same order, the same statistics, the same failures.
# (row_group_bytes=8: every small file is a slice of its own, read by either thread)
SPARE_CORE = pytest.mark.parametrize(("spare_core", "row_group_bytes"), [(None, 32 << 20), (lambda: True, 32 << 20), (lambda: True, 8)],
                                     ids=["own-thread", "helped", "helped-file-slices"])


@SPARE_CORE
def test_a_bin_of_small_files_is_read_by_the_small_file_reader_with_the_same_rows_and_stats(tmp_path: Path, spare_core: Any, row_group_bytes: int) -> None:
    """Many small local files go through ``iter_small_files`` (each read whole): the rows
    (conformed to the table's schema: widened ids, the missing column and struct field as nulls,
    the deletion vector of the middle file applied) and the statistics are those of reading each
    file on its own."""
    from airflow_delta_maintenance.deltalog.datafiles import writer

    files, sources, schema = _bin_table(tmp_path)
    task = writer.BinTask(sources=tuple(sources), partition_values={}, table_schema=schema, partition_columns=(), row_group_bytes=row_group_bytes)
    assert [(fast, len(run)) for fast, run in writer._runs(files, task, False)] == [(True, 2), (False, 1), (True, 3)]
    add = writer.write_bin(files, task, spare_core=spare_core)
    assert add is not None
    out = pq.read_table(Path(files.root) / add["path"]).to_pylist()  # in the sources' order
    expected = []
    for i in range(6):
        expected.append({"id": 10 * i, "v": f"a{i}", "s": {"a": i, "b": None} if i % 2 == 0 else None})
        if i != 2:
            expected.append({"id": 10 * i + 1, "v": None if i % 2 else f"b{i}", "s": None})
    assert out == expected
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == 11 and stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 51
    assert stats["nullCount"] == {"id": 0, "v": 3, "s": {"a": 8, "b": 11}}


@SPARE_CORE
def test_a_bad_small_file_fails_the_bin_with_its_own_error_and_leaves_no_file(tmp_path: Path, spare_core: Any, row_group_bytes: int) -> None:
    import threading

    from airflow_delta_maintenance.deltalog.datafiles import writer
    from airflow_delta_maintenance.deltalog.errors import CorruptLogError, SymlinkInLogError

    threads_before = set(threading.enumerate())
    files, sources, schema = _bin_table(tmp_path)
    root = Path(files.root)
    before = set(root.iterdir())
    lying = [*sources[:4], dataclasses_replace(sources[4], num_records=3), sources[5]]
    with pytest.raises(CorruptLogError, match=r"f4\.parquet holds 2 rows, its add action's stats say 3"):
        writer.write_bin(files, writer.BinTask(sources=tuple(lying), partition_values={}, table_schema=schema, partition_columns=(), row_group_bytes=row_group_bytes), spare_core=spare_core)
    (root / "f3.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(CorruptLogError, match=r"data file f3\.parquet of .* is not readable Parquet"):
        writer.write_bin(files, writer.BinTask(sources=tuple(sources), partition_values={}, table_schema=schema, partition_columns=(), row_group_bytes=row_group_bytes), spare_core=spare_core)
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), outside)
    (root / "f5.parquet").unlink()
    (root / "f5.parquet").symlink_to(outside)
    with pytest.raises(SymlinkInLogError, match=r"f5\.parquet"):
        task = writer.BinTask(sources=(sources[4], sources[5]), partition_values={}, table_schema=schema, partition_columns=(), row_group_bytes=row_group_bytes)
        writer.write_bin(files, task, spare_core=spare_core)
    assert set(root.iterdir()) == before  # nothing written is left behind
    assert not set(threading.enumerate()) - threads_before  # a bin's helping thread ends with it


LOGGED_PATHS = ["x.parquet", "p=1/x.parquet", "a b/é.parquet", "a%20b/x.parquet", "a//b.parquet", "p=1/./x.parquet", ".hidden/x.parquet",
                "..x/y.parquet", "../x.parquet", "a/../../x.parquet", "/elsewhere/x.parquet", "_delta_log/00000000000000000000.json",
                "_delta_logs/x.parquet", "file:///t/_delta_log/x.json", "p:1/x.parquet", "x.parquet?v=1", "a\\b.parquet", "", "a/"]


def test_the_bulk_path_check_of_a_bins_small_files_decides_as_resolve_then_path(tmp_path: Path) -> None:
    """``DataFiles.local_paths`` (a bin's thousands of small files at once, plain relative paths
    without the resolver) gives exactly ``path(resolve(p))``: the same file, or the same typed
    error, for every spelling — escapes, odd segments, the log, a scheme, a link out of the table."""
    import deltalake

    from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"id": pa.array([0], pa.int64())}))
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "p=1").mkdir()
    (root / "p=1" / "link.parquet").symlink_to(outside / "x.parquet")
    (root / "out").symlink_to(outside)
    files = DataFiles(open_table(str(root)).store)

    def one(paths: list[str]) -> Any:
        try:
            return files.local_paths(paths)
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            return type(exc), str(exc)

    def reference(path: str) -> Any:
        try:
            return [files.path(files.resolve(path))]
        except Exception as exc:  # noqa: BLE001
            return type(exc), str(exc)

    for logged_path in (*LOGGED_PATHS, "p=1/link.parquet", "out/x.parquet", "p=1/in.parquet"):
        assert one([logged_path]) == reference(logged_path), logged_path
    assert one(["p=1/in.parquet", "x.parquet"]) == [str(root / "p=1" / "in.parquet"), str(root / "x.parquet")]


def test_bounds_taken_from_the_written_files_statistics_are_the_computed_ones(tmp_path: Path) -> None:
    """The min/max of top-level integer, date, timestamp and string columns come from the Parquet
    writer's row-group statistics: the ``add`` stats are exactly those computed over every written
    row — across row groups, with nulls, a row group of only nulls, values before 1970 and at the
    type limits, non-ASCII strings, a row group whose long string makes Parquet keep no bounds
    (that column is read back), beside an array and a struct (computed as before)."""
    import datetime as dt
    import random

    import deltalake

    from airflow_delta_maintenance.deltalog.datafiles import writer
    from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
    from airflow_delta_maintenance.deltalog.datafiles.reader import SourceFile
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    rng = random.Random(11)
    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"b": pa.array([0], pa.int8())}))
    schema = _schema(("b", "byte"), ("sh", "short"), ("i", "integer"), ("l", "long"), ("d", "date"), ("ts", "timestamp"),
                     ("ntz", "timestamp_ntz"), ("s", "string"), ("x", "double"),
                     ("tags", {"type": "array", "elementType": "string", "containsNull": True}),
                     ("st", {"type": "struct", "fields": [{"name": "k", "type": "long", "nullable": True, "metadata": {}}]}))
    ds = data_schema(schema, [], "none")
    utc = dt.timezone.utc
    alphabet = ["a", "z", "é", "日", "\U0010ffff", "😀", "\x7f", ""]

    def value(col: str, k: int) -> Any:
        if rng.random() < 0.2:
            return None
        return {
            "b": rng.choice([-128, 127, rng.randint(-128, 127)]), "sh": rng.randint(-32768, 32767), "i": rng.randint(-2**31, 2**31 - 1),
            "l": rng.choice([-2**63, 2**63 - 1, rng.randint(-2**63, 2**63 - 1)]),
            "d": dt.date(1, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000)),
            "ts": dt.datetime(1900, 1, 1, tzinfo=utc) + dt.timedelta(microseconds=rng.randint(0, 5 * 10**15)),
            "ntz": dt.datetime(1960, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**15)),
            "s": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) + str(k),
            "x": rng.uniform(-1e6, 1e6), "tags": [str(k)], "st": {"k": rng.randint(-10, 10)},
        }[col]

    sources, tables = [], []
    for f in range(5):
        rows = [{c: value(c, 10 * f + k) for c in ds.without_partitions().names} for k in range(30)]
        if f == 2:
            rows = [{c: None for c in rows[0]} for _ in range(30)]  # a file (a row group below) of nulls only
        if f == 3:
            rows[7]["s"] = "\U0010ffff" * 3000  # the largest value, over Parquet's statistics size limit: no bounds for s there
        t = pa.Table.from_pylist(rows, schema=ds.without_partitions())
        tables.append(t)
        pq.write_table(t, root / f"f{f}.parquet")
        sources.append(SourceFile(path=f"f{f}.parquet", size=(root / f"f{f}.parquet").stat().st_size, partition_values={}, num_records=30))
    files = DataFiles(open_table(str(root)).store)
    task = writer.BinTask(sources=tuple(sources), partition_values={}, table_schema=schema, partition_columns=(), row_group_rows=30)
    add = writer.write_bin(files, task)
    assert add is not None

    meta = pq.ParquetFile(root / add["path"]).metadata
    s_column = meta.schema.names.index("s")
    assert meta.num_row_groups == 5 and [meta.row_group(g).column(s_column).statistics.has_min_max for g in range(5)] == [True, True, False, False, True]
    deferred = StatsCollector(stats_leaves(schema, [], StatsConfig()), StatsConfig())
    deferred.defer_minmax_to_parquet(ds.without_partitions())  # the written file's schema
    assert {deferred.leaves[i].physical_path[0] for i in deferred.from_parquet} == {"b", "sh", "i", "l", "d", "ts", "ntz", "s"}
    computed = StatsCollector(stats_leaves(schema, [], StatsConfig()), StatsConfig())
    computed.update(pa.concat_tables(tables))
    assert json.loads(add["stats"]) == json.loads(computed.to_json())
    assert set(json.loads(add["stats"])["minValues"]) == {"b", "sh", "i", "l", "d", "ts", "ntz", "s", "x", "st"}
