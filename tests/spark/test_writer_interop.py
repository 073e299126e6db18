"""After each of our writers, the deltalake wheel and delta-spark read every retained version with
exactly the same active files as before; delta-spark selects our compaction files; both read our
checkpoints of golden tables."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake  # the independent oracle: a test dependency, never skipped
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.cleanup.plan import execute_cleanup, plan_log_cleanup
from airflow_delta_maintenance.deltalog.log_compaction.windows import write_compaction
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

pytestmark = [pytest.mark.spark, pytest.mark.interop]
DAY_S = 86_400


def spark_files(spark: Any, uri: str, version: int) -> set[str]:
    files = spark.read.format("delta").option("versionAsOf", version).load(uri).inputFiles()
    return {Path(f.replace("file:", "")).relative_to(uri).as_posix().replace("%3D", "=") for f in files}


def wheel_files(uri: str, version: int) -> set[str]:
    return set(deltalake.DeltaTable(uri, version=version).get_add_actions(flatten=True).column("path").to_pylist())


def delta_spark_segment(spark: Any, uri: str) -> list[str]:
    """File names delta-spark's snapshot management chose for the latest version."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
    log.clearCache() if hasattr(log, "clearCache") else None
    segment = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty()).logSegment()
    deltas = segment.deltas()
    return [deltas.apply(i).getPath().getName() for i in range(deltas.size())]


def build(uri: str, versions: int) -> None:
    for i in range(versions):
        deltalake.write_deltalake(uri, pa.table({"x": [i, i + 100], "p": [f"p{i % 3}"] * 2}), mode="append", partition_by=["p"])
        if i % 4 == 3:
            deltalake.DeltaTable(uri).delete(f"x = {i - 1}")


def test_checkpoint_compaction_and_cleanup_keep_every_retained_version(tmp_path: Path, spark: Any) -> None:
    uri = str(tmp_path / "t")
    build(uri, 16)
    latest = deltalake.DeltaTable(uri).version()
    expected = {v: wheel_files(uri, v) for v in range(latest + 1)}
    store = open_table_storage(uri)

    # compaction files over published versions: delta-spark must pick them and agree
    write_compaction(store, 1, 8)
    write_compaction(store, 9, latest - 2)
    chosen = delta_spark_segment(spark, uri)
    assert f"{1:020d}.{8:020d}.compacted.json" in chosen and f"{9:020d}.{latest - 2:020d}.compacted.json" in chosen, chosen
    assert spark_files(spark, uri, latest) == expected[latest] == {f["path"] for f in load_snapshot(uri).file_list()}

    # checkpoint at latest - 4, then cleanup with commits aged beyond retention up to it
    cp = latest - 4
    write_checkpoint(store, load_snapshot(store, cp))
    # 3 days old with a 2-day retention: expired for cleanup, yet within delta-spark's 7-day
    # deletedFileRetentionDuration time-travel guard
    old = time.time() - 3 * DAY_S
    for v in range(cp + 1):
        os.utime(Path(uri) / "_delta_log" / f"{v:020d}.json", (old, old))
    plan = plan_log_cleanup(store, load_snapshot(store), retention_ms=2 * DAY_S * 1000)
    assert plan.cutoff_checkpoint == cp
    execute_cleanup(store, plan, dry_run=False)
    for v in range(cp, latest + 1):  # every retained version, by both independent readers
        assert wheel_files(uri, v) == expected[v], v
        assert spark_files(spark, uri, v) == expected[v], v
        assert {f["path"] for f in load_snapshot(uri, v).file_list()} == expected[v], v


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "tables"


@pytest.mark.parametrize(
    "name",
    ["delta-spark/dv-partitioned-with-checkpoint", "delta-spark/basic-with-inserts-deletes-checkpoint", "delta-rs/simple_table", "delta-spark/checkpoint"],
)
def test_our_checkpoints_of_golden_tables_are_read_by_both(tmp_path: Path, spark: Any, name: str) -> None:
    uri = str(tmp_path / "t")
    shutil.copytree(GOLDEN / name, uri)
    snap = load_snapshot(uri)
    before = {f["path"] for f in snap.file_list()}
    for p in (Path(uri) / "_delta_log").glob("*.checkpoint*.parquet"):
        p.unlink()  # only our checkpoint remains
    (Path(uri) / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    store = open_table_storage(uri)
    result = write_checkpoint(store, load_snapshot(uri))
    assert not result.existed
    for v in range(snap.version):  # readers must rebuild the state from our checkpoint alone
        (Path(uri) / "_delta_log" / f"{v:020d}.json").unlink(missing_ok=True)
    assert set(deltalake.DeltaTable(uri).get_add_actions(flatten=True).column("path").to_pylist()) == before
    assert {unquote(p) for p in spark_files(spark, uri, snap.version)} == {unquote(p) for p in before}
