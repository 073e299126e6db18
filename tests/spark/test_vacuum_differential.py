"""VACUUM plans against delta-spark 4.4's ``VACUUM … DRY RUN`` and the ``deltalake`` wheel's
``vacuum(dry_run=True)``, on the same copies of zoo tables with the same retention.

Each copy has strays planted and every data file aged ten days (the log keeps its own times), as
the reference captures do (``tests/_infra/delta_reference/vacuum.py``). Our FULL and LITE file sets
equal delta-spark's, except where the docs (docs/operators/vacuum.md, "Compared with delta-spark
and the deltalake wheel") explain why — each exception is asserted to be exactly that:

- a symbolic link under the root: delta-spark lists it (or a file through it); we never follow or
  delete a link;
- ``_change_data`` files of commits inside the retention: delta-spark protects change data by
  its file's mtime only and deletes these; we keep them (CDF reads of retained versions need them).

The wheel: its LITE mode lists removed data files (once per remove) but never their deletion
vectors or change data files; its FULL mode also lists Hadoop ``.crc`` shadows inside directories,
follows the link, and lists deletion vectors still referenced by live files (deleting them would
break reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.maintenance.operations.vacuum import HOUR_MS, run_vacuum
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests._infra.delta_reference.vacuum import CHECK_OFF, age_everything, plant_strays, spark_vacuum, wheel_vacuum
from tests._infra.zoo_tier import zoo_tables

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.slow]

TABLES = [
    "spark_deletion_vectors",  # deletion vectors, checkpoint, in-commit timestamps
    "spark_cdf",  # change data feed, partition column named _c
    "spark_column_mapping_name",  # column mapping: random directory prefixes
    "spark_special_partitions",  # %, spaces, unicode, = and null partition values; deletes, overwrites
    "spark_checkpoint_v2",  # V2 checkpoint with sidecars, deletion vectors
    "spark_log_compaction",  # log compaction files
    "wheel_partitioned",  # the wheel's layout, checkpoint, overwrite
    "wheel_special_partitions",
]


def _ours(table_uri: str, mode: str, retention_ms: int | None) -> tuple[set[str], Any]:
    with open_table(table_uri) as table:
        result = run_vacuum(table, mode=mode, retention_ms=retention_ms, allow_shorter_retention=True)  # type: ignore[arg-type]
    plan = result.plan
    assert plan is not None
    return set(plan.paths()) | set(plan.empty_dirs), plan


def _retained_cdc(path: Path, retained_from: int | None) -> set[str]:
    """The change data files of commits after ``retained_from`` (what we keep and delta-spark does not)."""
    import json
    from urllib.parse import unquote

    out = set()
    for commit in sorted((path / "_delta_log").glob("*.json")):
        if not commit.stem.isdigit() or (retained_from is not None and int(commit.stem) <= retained_from):
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "cdc" in action:
                out.add(unquote(action["cdc"]["path"]))
    return out


@pytest.mark.parametrize("name", zoo_tables(TABLES, ["spark_deletion_vectors"]))  # 4 min a table: make test-zoo runs all
def test_plans_equal_delta_spark_and_the_wheel(name: str, zoo_copy: Any, spark: Any, tmp_path: Path) -> None:
    t = zoo_copy(name)
    plant_strays(t, tmp_path / "outside")
    age_everything(t, 10)
    link = {"link_out", "link_out/outside.parquet"}

    # FULL with the table's retention (7 days): the young and 5-day-old strays stay in both.
    spark_full = set(spark_vacuum(spark, t, "DRY RUN")["paths"])
    ours_full, plan = _ours(t.uri, "full", None)
    cdc_kept = _retained_cdc(t.path, plan.retained_from)
    assert ours_full == spark_full - link - cdc_kept, (sorted(ours_full ^ (spark_full - link - cdc_kept)))
    assert spark_full & link, "delta-spark lists the symlink (the difference we document)"
    assert "young-stray.parquet" not in ours_full and "stray-5-days.parquet" not in ours_full
    assert not any(p.startswith(("link_out", ".", "_delta_log", "_tmp_dir", "_underscore")) for p in ours_full)

    # FULL with no retention (an explicit override on both sides): every unreferenced file.
    spark_full0 = set(spark_vacuum(spark, t, "RETAIN 0 HOURS DRY RUN", CHECK_OFF)["paths"])
    ours_full0, plan0 = _ours(t.uri, "full", 0)
    assert plan0.retained_from == plan0.head_version
    assert ours_full0 == spark_full0 - link, sorted(ours_full0 ^ (spark_full0 - link))

    # LITE with no retention: the files the log removed.
    spark_lite0 = set(spark_vacuum(spark, t, "LITE RETAIN 0 HOURS DRY RUN", CHECK_OFF)["paths"])
    ours_lite0, lite_plan = _ours(t.uri, "lite", 0)
    assert ours_lite0 == spark_lite0
    assert lite_plan.lite_range == (0, lite_plan.head_version)

    # The wheel, where comparable.
    wheel_lite = wheel_vacuum(t, retention_hours=0, dry_run=True, enforce_retention_duration=False, full=False)
    wheel_lite_set = set(wheel_lite["paths"])
    extra = ours_lite0 - wheel_lite_set
    assert wheel_lite_set <= ours_lite0
    assert all(p.rsplit("/", 1)[-1].startswith("deletion_vector_") or p.startswith("_change_data/") for p in extra), sorted(extra)
    wheel_full = set(wheel_vacuum(t, retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True)["paths"])
    only_wheel = wheel_full - ours_full0
    only_ours = ours_full0 - wheel_full
    live_dvs = {p for p in only_wheel if p.rsplit("/", 1)[-1].startswith("deletion_vector_")}
    assert all(p in link or (p.rsplit("/", 1)[-1].startswith(".") and p.endswith(".crc")) or p in live_dvs for p in only_wheel), sorted(only_wheel)
    assert only_ours <= set(plan0.empty_dirs), sorted(only_ours)
    for dv in live_dvs:  # the wheel would delete deletion vectors live files still use
        assert dv not in ours_full0

    # The retention the user names is honoured (delta-spark ignores a RETAIN other than 0 unless told).
    spark_100 = set(spark_vacuum(spark, t, "RETAIN 100 HOURS DRY RUN", {**CHECK_OFF, "spark__databricks__delta__vacuum__retentionWindowIgnore__enabled": "false"})["paths"])
    ours_100, plan100 = _ours(t.uri, "full", 100 * HOUR_MS)
    assert ours_100 == spark_100 - link - _retained_cdc(t.path, plan100.retained_from)
    assert "stray-5-days.parquet" in ours_100 and "young-stray.parquet" not in ours_100


EXECUTED = ["spark_deletion_vectors", "spark_cdf", "spark_special_partitions", "wheel_partitioned"]


@pytest.mark.parametrize("name", zoo_tables(EXECUTED, ["spark_special_partitions"]))
def test_after_execute_every_retained_version_reads_identically_in_delta_spark_and_the_wheel(
    name: str, zoo_copy: Any, spark: Any, tmp_path: Path
) -> None:
    from tests._infra.zoo_oracle import compare_versions

    t = zoo_copy(name)
    plant_strays(t, tmp_path / "outside")
    age_everything(t, 10)
    recorded = sorted(int(v) for v in t.manifest.versions)
    for retention in (None, 0):  # the table's (7 days), then none at all (the head only is retained)
        with open_table(t.uri) as table:
            result = run_vacuum(table, dry_run=False, retention_ms=retention, allow_shorter_retention=retention is not None)
        plan = result.plan
        assert plan is not None and result.deleted == plan.count - result.dropped
        # our VACUUM START/END commits read as the recorded head: the recorded versions from the
        # one live at the cutoff (or the recorded head) on must read as recorded
        start = 0 if plan.retained_from is None else min(plan.retained_from, max(recorded))
        retained = [v for v in recorded if v >= start]
        problems = compare_versions(t.path, t.manifest, spark=spark, versions=retained)
        assert problems == [], problems
    assert (tmp_path / "outside" / "outside.parquet").exists() and (t.path / "link_out").is_symlink()
    assert not (t.path / "stray-root.parquet").exists()  # and, with no retention, the young stray too
    # delta-spark reads the head after our VACUUM START/END commits as the recorded head
    head = max(recorded)
    rows = spark.read.format("delta").load(str(t.path)).count()
    assert rows == spark.read.format("delta").option("versionAsOf", head).load(str(t.path)).count()
