"""The table zoo: every table is built (or taken from the cache), is what its tags promise, and a
fresh copy of it re-reads version by version exactly as its manifest recorded, in delta-spark and
in the ``deltalake`` wheel; the oracle notices a damaged version; the cache costs nothing twice."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest

from tests._infra.table_zoo import ZOO, Manifest, Zoo, ZooTable, names
from tests._infra.zoo_oracle import assert_versions_unchanged, canonical_rows, compare_versions, read_rows
from tests._infra.zoo_tier import zoo_tables

pytestmark = [pytest.mark.spark, pytest.mark.interop]

# Where the two engines read the same version differently, and why (each is asserted, so a change
# in either engine shows up here rather than in an OPTIMIZE or VACUUM test).
ENGINES_DISAGREE = {
    # delta-spark writes TIMESTAMP as INT96 by default; the wheel converts INT96 through nanoseconds
    # and wraps values outside 1677..2262 (the table has 0001-01-01 and 9999-12-31 in `ts`)
    "spark_timestamp_ntz": "ts",
}
# Tables the wheel cannot open at all, with the reason it gives
WHEEL_CANNOT_READ = {"spark_type_widening": "TypeWidening"}
# make test checks the tables its other tests use (building the rest costs minutes and serves no
# test there) and re-reads a copy at its first and latest versions; make test-zoo: every table, every version.
UNUSED_IN_MAKE_TEST = {"spark_decimals", "wheel_many_small_files", "wheel_many_small_files_partitioned"}
TABLES = zoo_tables(names(), [n for n in names() if n not in UNUSED_IN_MAKE_TEST])
REREAD_ALL_VERSIONS = len(TABLES) == len(names())


def _log_facts(table: Path) -> dict[str, Any]:
    """What the builder wrote, from the commit files themselves (no engine in between)."""
    facts: dict[str, Any] = {"ops": [], "max_adds": 0, "dv": False, "cdc": False, "ict": False, "overwrite": False, "partition_values": set(), "protocol": None, "metadata": None}
    log = table / "_delta_log"
    for name in sorted(os.listdir(log)):
        if not re.fullmatch(r"\d{20}\.json", name):
            continue
        adds = 0
        for line in (log / name).read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                facts["ops"].append(action["commitInfo"].get("operation"))
                facts["ict"] |= "inCommitTimestamp" in action["commitInfo"]
                facts["overwrite"] |= (action["commitInfo"].get("operationParameters") or {}).get("mode") == "Overwrite"
            elif "add" in action:
                adds += 1
                facts["dv"] |= action["add"].get("deletionVector") is not None
                facts["partition_values"].update((action["add"].get("partitionValues") or {}).values())
            elif "remove" in action:
                facts["dv"] |= action["remove"].get("deletionVector") is not None
            elif "cdc" in action:
                facts["cdc"] = True
            elif "protocol" in action:
                facts["protocol"] = action["protocol"]
            elif "metaData" in action:
                facts["metadata"] = action["metaData"]
        facts["max_adds"] = max(facts["max_adds"], adds)
    facts["log_files"] = set(os.listdir(log))
    return facts


def _features(facts: dict[str, Any]) -> set[str]:
    p = facts["protocol"]
    return set(p.get("readerFeatures") or ()) | set(p.get("writerFeatures") or ())


TAG_CHECKS = {
    "partitioned": lambda f: bool(f["metadata"]["partitionColumns"]),
    "unpartitioned": lambda f: not f["metadata"]["partitionColumns"],
    "special_partitions": lambda f: {None, "a/b", "100%", "k=v", "a b", "日本語"} <= f["partition_values"],
    "column_mapping": lambda f: f["metadata"]["configuration"].get("delta.columnMapping.mode") in ("name", "id"),
    "deletion_vectors": lambda f: f["dv"],
    "type_widening": lambda f: "typeWidening" in _features(f) and '"delta.typeChanges"' in f["metadata"]["schemaString"],
    "timestamp_ntz": lambda f: "timestamp_ntz" in f["metadata"]["schemaString"],
    "variant": lambda f: "variantType" in _features(f),
    "decimals": lambda f: '"decimal(' in f["metadata"]["schemaString"],
    "cdf": lambda f: f["cdc"],
    "checkpoint": lambda f: any(".checkpoint" in n for n in f["log_files"]),
    "checkpoint_v2": lambda f: "v2Checkpoint" in _features(f) and "_sidecars" in f["log_files"],
    "log_compaction": lambda f: any(n.endswith(".compacted.json") for n in f["log_files"]),
    "deletes": lambda f: "DELETE" in f["ops"] or "MERGE" in f["ops"],
    "updates": lambda f: "UPDATE" in f["ops"] or "MERGE" in f["ops"],
    "overwrites": lambda f: f["overwrite"],
    "row_tracking": lambda f: "rowTracking" in _features(f),
    "clustered": lambda f: "clustering" in _features(f),
    "many_small_files": lambda f: f["max_adds"] >= 200,
    "in_commit_timestamps": lambda f: f["ict"] and "inCommitTimestamp" in _features(f),
    "nested": lambda f: '"type":{"type":' in f["metadata"]["schemaString"],
}


@pytest.mark.parametrize("name", TABLES)
def test_zoo_table_is_what_its_tags_say_and_rereads_as_recorded(name: str, table_zoo: Zoo, spark: Any, tmp_path: Path) -> None:
    table = table_zoo.get(name)
    m = table.manifest
    assert m.latest_version >= 1 and sorted(m.versions) == list(range(m.latest_version + 1))
    facts = _log_facts(table.path)
    failing = sorted(tag for tag in ZOO[name].tags if not TAG_CHECKS[tag](facts))
    assert not failing, f"{name}: the table lacks what its tags promise: {failing}"

    for v in m.versions:
        assert m.readable(v, "spark"), f"{name} v{v}: delta-spark cannot read its own table"
        if name in WHEEL_CANNOT_READ:
            assert WHEEL_CANNOT_READ[name] in m.versions[v]["wheel"]["error"], m.versions[v]["wheel"]
            continue
        assert m.readable(v, "wheel"), f"{name} v{v}: {m.versions[v]['wheel']}"
        same = m.versions[v]["spark"]["digest"] == m.versions[v]["wheel"]["digest"]
        if name in ENGINES_DISAGREE and v > 0:
            assert not same, f"{name} v{v}: the engines agree now; drop the ENGINES_DISAGREE entry"
        else:
            assert same and m.versions[v]["spark"]["count"] == m.versions[v]["wheel"]["count"], f"{name} v{v}: delta-spark and the wheel read different rows"
    if ZOO[name].row_tracking:
        assert all(m.readable(v, "row_tracking") for v in m.versions)

    copy = table.copy_to(tmp_path / name)  # a copy: what tests of OPTIMIZE / VACUUM get
    versions = None if REREAD_ALL_VERSIONS else sorted({0, m.latest_version})
    assert_versions_unchanged(copy.path, m, spark=spark, versions=versions)


def test_disagreement_is_the_int96_column_only(table_zoo: Zoo, spark: Any) -> None:
    table = table_zoo.get("spark_timestamp_ntz")
    v = table.manifest.latest_version
    drop = ENGINES_DISAGREE["spark_timestamp_ntz"]
    spark_rows = [{k: val for k, val in r.items() if k != drop} for r in read_rows(table.path, v, "spark", spark=spark)]
    wheel_rows = [{k: val for k, val in r.items() if k != drop} for r in read_rows(table.path, v, "wheel")]
    assert sorted(spark_rows, key=repr) == sorted(wheel_rows, key=repr)


def _delete_a_file_of(table: ZooTable, version: int) -> None:
    """Delete one data file that ``version`` added (as a wrong VACUUM would)."""
    log = (table.path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    added = sorted(json.loads(line)["add"]["path"] for line in log if line.startswith('{"add"'))
    (table.path / unquote(added[0])).unlink()


def test_compare_versions_reports_a_version_that_lost_a_file(table_zoo: Zoo, spark: Any, tmp_path: Path) -> None:
    copy = table_zoo.copy("spark_partitioned", tmp_path / "t")
    _delete_a_file_of(copy, 1)
    problems = compare_versions(copy.path, copy.manifest, spark=spark, versions=[1, copy.manifest.latest_version])
    assert any(p.startswith("version 1 (spark)") for p in problems) and any(p.startswith("version 1 (wheel)") for p in problems), problems
    with pytest.raises(AssertionError, match="version 1"):
        assert_versions_unchanged(copy.path, copy.manifest, spark=spark, versions=[1])


def test_compare_versions_reports_changed_rows(table_zoo: Zoo, spark: Any, tmp_path: Path) -> None:
    copy = table_zoo.copy("wheel_unpartitioned", tmp_path / "t")
    m = copy.manifest
    tampered = Manifest.from_json(m.to_json())
    rec = tampered.versions[1]["wheel"]
    rec["rows"] = rec["rows"][1:]
    rec["count"], rec["digest"] = rec["count"] - 1, "0" * 32
    problems = compare_versions(copy.path, tampered, spark=spark, keys=["wheel"], versions=[1])
    n = m.versions[1]["wheel"]["count"]
    assert len(problems) == 1 and f"{n - 1} rows recorded, {n} read" in problems[0] and "missing []; unexpected [" in problems[0], problems


def test_a_second_zoo_loads_from_the_cache_without_spark(table_zoo: Zoo) -> None:
    for name in TABLES:
        table_zoo.get(name)

    def no_spark() -> Any:
        raise AssertionError("a cached table was rebuilt")

    again = Zoo(no_spark, cache=table_zoo.cache)
    for name in TABLES:
        t = again.get(name)
        assert t.path == table_zoo.get(name).path and t.manifest.key == table_zoo.key(name)
    assert not again.built


def test_cached_tables_are_read_only_and_copies_writable_with_mtimes_kept(table_zoo: Zoo, tmp_path: Path) -> None:
    table = table_zoo.get("spark_deletion_vectors")
    files = [p for p in table.path.rglob("*") if p.is_file()]
    assert files and all(not os.access(p, os.W_OK) or os.geteuid() == 0 for p in files)
    assert all(p.stat().st_mode & 0o222 == 0 for p in files)
    copy = table.copy_to(tmp_path / "c")
    for p in files:
        q = copy.path / p.relative_to(table.path)
        assert q.stat().st_mode & 0o200 and int(q.stat().st_mtime) == int(p.stat().st_mtime), q


def test_canonical_values() -> None:
    utc = dt.timezone.utc
    t = pa.table(
        {
            "ts": pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))], pa.timestamp("us", tz="+02:00")),
            "ntz": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us")),
            "dec": pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
            "f": pa.array([float("nan")], pa.float64()),
            "m": pa.array([[("b", 2), ("a", None)]], pa.map_(pa.string(), pa.int32())),
            "s": pa.array([{"x": b"\x00\xff", "y": None}], pa.struct([("x", pa.binary()), ("y", pa.date32())])),
        }
    )
    (row,) = canonical_rows(t)
    assert row == {
        "ts": dt.datetime(2024, 1, 1, 10, tzinfo=utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z",
        "ntz": "1969-12-31T23:59:59.999999",
        "dec": "1.50",
        "f": "NaN",
        "m": [["a", None], ["b", 2]],
        "s": {"x": "hex:00ff", "y": None},
    }
