"""OPTIMIZE planning: delta-spark's candidates and greedy bins, its one-file rule (with DV purges
kept), sizes from the table, the partition predicate, the byte budget, clustered files."""

from __future__ import annotations

import json

import pytest

from airflow_delta_maintenance.deltalog.errors import InvalidOptionError
from airflow_delta_maintenance.deltalog.optimize.plan import DEFAULT_FILE_SIZE, OptimizeOptions, plan_optimize
from airflow_delta_maintenance.deltalog.optimize.predicate import parse_partition_predicate

KB = 1024


def add(path: str, size: int, *, part: dict | None = None, records: int | None = 100, deleted: int = 0, clustered: bool = False) -> dict:
    out: dict = {"path": path, "size": size, "partitionValues": part or {}}
    if records is not None:
        out["stats"] = json.dumps({"numRecords": records})
    if deleted:
        out["deletionVector"] = {"storageType": "u", "pathOrInlineDv": "x" * 20, "offset": 1, "sizeInBytes": 10, "cardinality": deleted}
    if clustered:
        out["clusteringProvider"] = "liquid"
    return out


def plan(adds, parts=(), conf=None, **opts):
    return plan_optimize("/t", 7, adds, list(parts), conf or {}, OptimizeOptions(**opts))


def test_small_files_are_packed_greedily_by_size_per_partition() -> None:
    adds = [add(f"a{i}", s * KB, part={"p": "a"}) for i, s in enumerate([10, 40, 30, 20, 50])] + [add("b0", 5 * KB, part={"p": "b"}),
                                                                                               add("b1", 5 * KB, part={"p": "b"})]
    p = plan(adds, ["p"], target_file_size=60 * KB, min_file_size=60 * KB)
    bins = [(b.partition_values["p"], sorted(b.paths)) for b in p.bins]
    # sorted 10,20,30,40,50 → [10,20,30] (60) | [40] alone: dropped | [50] alone: dropped; b: [5,5]
    assert bins == [("a", ["a0", "a2", "a3"]), ("b", ["b0", "b1"])]
    assert p.files_in == 5 and p.bytes_in == 70 * KB and p.candidate_files == 7


def test_sizes_default_to_delta_sparks_or_the_tables_target() -> None:
    adds = [add("x", 2 * KB), add("y", 2 * KB)]
    assert (plan(adds).min_file_size, plan(adds).target_file_size) == (DEFAULT_FILE_SIZE, DEFAULT_FILE_SIZE)
    table = plan(adds, conf={"delta.targetFileSize": "3kb"})
    assert (table.min_file_size, table.target_file_size) == (3 * KB, 3 * KB)
    assert len(table.bins) == 0  # 2 KiB + 2 KiB > 3 KiB: two one-file bins, both dropped
    assert plan(adds, conf={"delta.targetFileSize": "104857600"}).target_file_size == 100 << 20
    with pytest.raises(InvalidOptionError):
        plan(adds, conf={"delta.targetFileSize": "lots"})


def test_a_lone_file_is_rewritten_only_when_its_deletion_vector_purges_enough() -> None:
    big = 2 << 30
    many = add("many", big, records=100, deleted=6)  # 6 % > 5 %: rewritten even though it is large
    few = add("few", 10 * KB, records=100, deleted=5)  # exactly 5 %: a one-file bin, dropped
    unknown = add("unknown", big, records=None, deleted=1)  # a DV without numRecords: always
    p = plan([many, few, unknown])
    assert sorted(path for b in p.bins for path in b.paths) == ["many", "unknown"]
    assert {b.paths[0]: b.expected_bytes_out for b in p.bins}["many"] == int(big * 0.94)


def test_the_partition_predicate_selects_partitions_by_typed_value() -> None:
    types = {"region": "string", "year": "integer"}
    adds = [add(f"{r}{y}{i}", KB, part={"region": r, "year": str(y)}) for r in ("us", "eu") for y in (2020, 2021, 9) for i in range(2)]
    adds += [add(f"null{i}", KB, part={"region": None, "year": "2021"}) for i in range(2)]
    pred = parse_partition_predicate("region = 'us' AND year >= 2021 OR region IS NULL", types)
    p = plan(adds, ["region", "year"], predicate=pred)
    assert [tuple(b.partition_values.values()) for b in p.bins] == [("us", "2021"), (None, "2021")]  # nulls sort last
    assert p.considered_files == 4 and p.predicate == pred.text


def test_the_byte_budget_defers_bins_in_a_stable_order() -> None:
    adds = [add(f"{p}{i}", 10 * KB, part={"p": p}) for p in "abc" for i in range(3)]
    p = plan(adds, ["p"], max_bytes=65 * KB)
    assert [b.partition_values["p"] for b in p.bins] == ["a", "b"]
    assert [b.partition_values["p"] for b in p.deferred_bins] == ["c"]
    alone = plan(adds, ["p"], max_bytes=KB)  # a first bin over the budget still runs
    assert len(alone.bins) == 1 and len(alone.deferred_bins) == 2


def test_clustered_files_are_never_candidates() -> None:
    adds = [add("c0", KB, clustered=True), add("c1", KB, clustered=True), add("n0", KB), add("n1", KB)]
    p = plan(adds)
    assert [sorted(b.paths) for b in p.bins] == [["n0", "n1"]]
    assert p.skipped_clustered_files == 2 and "clustering" in p.notes[0]


def test_column_mapping_partition_values_keep_their_physical_keys() -> None:
    adds = [add(f"f{i}", KB, part={"col-1a2b": "x"}) for i in range(2)]
    pred = parse_partition_predicate("`part col` = 'x'", {"part col": "string"})
    p = plan_optimize("/t", 3, adds, ["part col"], {}, OptimizeOptions(predicate=pred), partition_keys=["col-1a2b"])
    assert [dict(b.partition_values) for b in p.bins] == [{"col-1a2b": "x"}]


@pytest.mark.parametrize("bad", ["year > ", "nope = 1", "year = 'x'", "year IN (1", "(year = 1", "year = 1 year"])
def test_a_bad_predicate_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidOptionError, match="predicate"):
        parse_partition_predicate(bad, {"year": "integer"})


def test_options_are_validated() -> None:
    with pytest.raises(InvalidOptionError, match="max_bytes"):
        OptimizeOptions(max_bytes=0)
    with pytest.raises(InvalidOptionError, match="ratio"):
        OptimizeOptions(max_deleted_rows_ratio=2)
