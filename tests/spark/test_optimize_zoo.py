"""OPTIMIZE (worker engine) on every zoo table, read back by delta-spark 4.4 and the deltalake
wheel: every earlier version reads as recorded, the new version reads as the one before it (row
ids and row commit versions too), a range predicate returns the same rows with data skipping on,
and the commit's file counts are the plan's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.maintenance.operations.optimize import run_optimize
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests._infra.table_zoo import ZOO, ZooTable
from tests._infra.zoo_oracle import RECORDED_KEYS, assert_versions_unchanged, read_rows, record
from tests._infra.zoo_tier import zoo_tables
from tests.spark.test_table_zoo import ENGINES_DISAGREE

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.timeout(1800)]


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines() if line.strip()]


# make test: the features the acceptance names (column mapping, deletion vectors, type widening,
# timestamp NTZ, variant, special partition values); make test-zoo: every table.
ACCEPTANCE = ["spark_column_mapping_id", "spark_deletion_vectors", "spark_type_widening", "spark_timestamp_ntz", "spark_variant",
              "wheel_special_partitions"]
# zoo tables left with one file per partition (nothing to compact): their rows are appended once
# more by delta-spark first, so each partition holds the old files (narrow types before widening,
# variant values) and new ones, and OPTIMIZE rewrites them together
APPEND_FIRST = {"spark_type_widening", "spark_variant"}


@pytest.mark.parametrize("name", zoo_tables(sorted(ZOO), ACCEPTANCE))
def test_optimize_keeps_every_version_and_the_rows(name: str, zoo_copy: Any, spark: Any) -> None:
    t: ZooTable = zoo_copy(name)
    if name in APPEND_FIRST:
        t = append_rows_again(t, spark)
    before = t.manifest.latest_version
    result = run_optimize(open_table(str(t.path), coordinator="auto"))
    if not result.plan.bins:
        assert name not in ACCEPTANCE, f"{name}: nothing to compact ({result.report().reason})"
        pytest.skip(f"{name}: nothing to compact ({result.report().reason})")
    assert_optimized(t, name, before, result.commits, result.plan.files_in, len(result.plan.bins), spark)


def append_rows_again(t: ZooTable, spark: Any) -> ZooTable:
    """``t`` after delta-spark appended its latest rows again (a new version), with that version
    recorded by every engine that read the one before it."""
    spark.sql(f"INSERT INTO delta.`{t.path}` SELECT * FROM delta.`{t.path}`")
    old = t.manifest.latest_version
    new = old + 1
    assert (t.path / "_delta_log" / f"{new:020d}.json").exists()
    entry = {key: record(t.path, new, key, spark=spark) for key in RECORDED_KEYS if t.manifest.versions[old].get(key)}
    manifest = dataclasses.replace(t.manifest, latest_version=new, versions={**t.manifest.versions, new: entry})
    return dataclasses.replace(t, manifest=manifest)


def assert_optimized(t: ZooTable, name: str, before: int, commits: list[int], files_in: int, bins: int, spark: Any) -> None:
    """The checks of an OPTIMIZE of zoo table ``t`` (either engine) that committed ``commits``."""
    new = commits[-1]
    assert commits == [before + 1]
    actions = _commit(t.path, new)
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert len(removes) == files_in and len(adds) <= bins  # a bin whose rows were all deleted adds no file
    assert all(not a["dataChange"] for a in adds) and all(not r["dataChange"] for r in removes)

    assert_versions_unchanged(t.path, t.manifest, spark=spark)
    old = t.manifest.versions[before]
    for key in ("spark", "wheel", "row_tracking"):
        expected = old.get(key)
        if not expected or "error" in expected:
            continue
        if key == "wheel" and name in ENGINES_DISAGREE:
            # the wheel misreads delta-spark's INT96 column of the old files (beyond 1677..2262) and
            # reads our INT64 one right: every other column must agree
            drop = ENGINES_DISAGREE[name]
            now_rows, old_rows = (sorted(({k: v for k, v in r.items() if k != drop} for r in read_rows(t.path, v, "wheel")), key=repr)
                                  for v in (new, before))
            assert now_rows == old_rows
            continue
        got = record(t.path, new, key, spark=spark)
        assert (got.get("count"), got.get("digest")) == (expected["count"], expected["digest"]), f"{name} v{new} {key}: {got.get('error')}"

    fields = {f.name for f in spark.read.format("delta").load(str(t.path)).schema.fields}
    if "id" in fields:
        q = "id >= 5 AND id < 120"
        spark.conf.set("spark.databricks.delta.stats.skipping", "true")
        now = spark.read.format("delta").load(str(t.path)).where(q).count()
        then = spark.read.format("delta").option("versionAsOf", before).load(str(t.path)).where(q).count()
        assert now == then
