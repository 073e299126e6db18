"""The Spark checkpoint job's Python driver reads footers and column metadata, never whole files.

A checkpoint of a 10M-file table is about a gigabyte: a driver that reads the previous checkpoint
(to find its sidecars) or the new one (to count its rows) grows with the table. The bytes the
Python process reads are counted by the kernel (``rchar`` of ``/proc/self/io``: every ``read`` of
every thread, pyarrow's C++ reads included); the JVM is another process.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.readback import read_back_checkpoint
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.model import action_types as cs
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests.spark.test_spark_jobs import actions_of_checkpoint
from tests.unit.deltalog.logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

NOW = 1_800_000_000_000


def stats(i: int) -> str:
    return json.dumps({"numRecords": i, "minValues": {"x": i}, "maxValues": {"x": i * 7 + 3}, "nullCount": {"x": i % 5}})

SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}, {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
)


def rchar() -> int:
    """Bytes this process has read so far (all threads, any API)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def big_table(root: Path, versions: int, per_commit: int) -> str:
    """Uncompressed checkpoints (large files from few actions), partitioned, with stats and removes."""
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    meta = metadata({"delta.parquet.compression.codec": "uncompressed"}, partition_columns=["p"])
    meta["metaData"]["schemaString"] = SCHEMA
    log.commit(0, [commit_info(), protocol(1, 2), meta, {"txn": {"appId": "a", "version": 0, "lastUpdated": NOW}}])
    for v in range(1, versions):
        actions: list[dict[str, Any]] = [commit_info()]
        actions += [add(f"p={v % 3}/part-{v:05d}-{i:06d}-c000.snappy.parquet", 1000 + i, partition_values={"p": str(v % 3)}, stats=stats(v * per_commit + i)) for i in range(per_commit)]
        if v > 1:
            actions += [remove(f"p={(v - 1) % 3}/part-{v - 1:05d}-{i:06d}-c000.snappy.parquet", NOW) for i in range(5)]
        log.commit(v, actions)
    return str(root)


@pytest.mark.spark
def test_the_driver_reads_no_whole_checkpoint_and_its_output_equals_the_single_node_writer(tmp_path: Path, spark: Any) -> None:
    """Why: "``spark_jobs/checkpoint.py`` reads whole files into the driver's Python process: the
    previous checkpoint's bytes to look for a ``sidecar`` column (``_referenced_sidecars``), and the
    new classic checkpoint's bytes to count its rows"."""
    import deltalake

    from airflow_delta_maintenance.spark_jobs import checkpoint as job

    a = big_table(tmp_path / "a", versions=8, per_commit=4000)
    store = open_table_storage(a)
    write_checkpoint(store, load_snapshot(store, 5, now_ms=NOW))  # the previous checkpoint the job starts from
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    previous = (Path(a) / "_delta_log" / f"{5:020d}.checkpoint.parquet").stat().st_size
    assert previous > 2 << 20

    # The driver reads the commits after the checkpoint itself, one at a time, for their few
    # non-file lines (as the Airflow worker's protocol/metadata read does): bounded by one commit.
    commits = sum((Path(a) / "_delta_log" / f"{v:020d}.json").stat().st_size for v in (6, 7))
    before = rchar()
    assert job.main(["--table-uri", a, "--version", "7", "--now-ms", str(NOW)]) == 0
    read = rchar() - before - commits
    written = (Path(a) / "_delta_log" / f"{7:020d}.checkpoint.parquet").stat().st_size
    assert read < min(previous, written) // 8, f"the driver read {read} bytes besides the commits; the previous checkpoint is {previous}, the new one {written}"

    store_b = open_table_storage(b)
    write_checkpoint(store_b, load_snapshot(store_b, now_ms=NOW))
    assert actions_of_checkpoint(a) == actions_of_checkpoint(b)

    # only the new checkpoint and the last commit remain to read from: the wheel and delta-spark
    for v in range(7):
        os.rename(Path(a) / "_delta_log" / f"{v:020d}.json", tmp_path / f"{v}.json")
    expected = {f["path"] for f in load_snapshot(b).file_list()}
    assert set(deltalake.DeltaTable(a).get_add_actions(flatten=True).column("path").to_pylist()) == expected
    spark_files = {Path(f.removeprefix("file:")).relative_to(a).as_posix() for f in spark.read.format("delta").load(a).inputFiles()}
    assert {p.replace("%3D", "=") for p in spark_files} == expected


def test_read_back_of_a_v2_checkpoint_reads_its_sidecar_column_only(tmp_path: Path) -> None:
    """A V2 top-level file may hold every file action besides its sidecar rows: finding the
    sidecars reads the footer and the ``sidecar`` column chunks, not the file."""
    log = tmp_path / "_delta_log"
    (log / "_sidecars").mkdir(parents=True)
    side = pa.table({"add": pa.array([{"path": f"s{i}", "size": 1} for i in range(10)], type=pa.struct([("path", pa.string()), ("size", pa.int64())]))})
    pq.write_table(side, log / "_sidecars" / "one.parquet")
    n = 200_000
    adds = pa.array([{"path": f"part-{i:08d}-{'x' * 40}.parquet", "size": i} for i in range(n)] + [None], type=pa.struct([("path", pa.string()), ("size", pa.int64())]))
    sidecar = pa.array([None] * n + [{"path": "one.parquet", "sizeInBytes": (log / "_sidecars" / "one.parquet").stat().st_size, "modificationTime": 1, "tags": None}],
                       type=cs.SIDECAR_TYPE)
    name = f"{3:020d}.checkpoint.0b8d5f0c-3a8f-4bd3-9a63-5e3c7f3f6b1a.parquet"
    pq.write_table(pa.table({"add": adds, "sidecar": sidecar}), log / name, compression="none", row_group_size=32_768)
    size = (log / name).stat().st_size
    before = rchar()
    back = read_back_checkpoint(open_table_storage(str(tmp_path)), [name])
    read = rchar() - before
    assert (back.num_actions, back.num_sidecars) == (n + 10, 1)
    assert read < size // 8, f"read {read} bytes of a {size}-byte checkpoint"


@pytest.mark.spark
def test_reconcile_sorts_the_actions_once_after_the_shuffle_not_also_before_it(tmp_path: Path, spark: Any) -> None:
    """Spark adds a map-side WindowGroupLimit to the newest-per-key window: a sort of every full
    action row before the shuffle, which drops almost nothing when files have one action each.
    The jobs' session turns it off (a value the user set wins) and the newest action still wins."""
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
    from airflow_delta_maintenance.deltalog.log_segment.segment import build_log_segment
    from airflow_delta_maintenance.spark_jobs import _common as common

    store = open_table_storage(big_table(tmp_path / "t", versions=4, per_commit=20))
    segment = build_log_segment(list_log_files(store), None, use_compactions=False, table=store.uri)

    def plan_and_paths() -> tuple[str, set[str]]:
        frame = common.reconcile(common.read_actions(spark, store, segment), tombstone_cutoff_ms=0)
        plan = str(frame._jdf.queryExecution().executedPlan().toString())
        return plan, {r["_path"] for r in frame.where("add IS NOT NULL").select("_path").collect()}

    try:
        spark.conf.set(common._WINDOW_GROUP_LIMIT, "1000")  # set by the user: kept
        assert common.spark_session("t").conf.get(common._WINDOW_GROUP_LIMIT) == "1000"
        with_limit, live = plan_and_paths()
        assert "WindowGroupLimit" in with_limit
        spark.conf.unset(common._WINDOW_GROUP_LIMIT)
        assert common.spark_session("t").conf.get(common._WINDOW_GROUP_LIMIT) == "-1"
        without, live_after = plan_and_paths()
        assert "WindowGroupLimit" not in without and without.count("Sort [") == 1
        assert live_after == live == {str(p) for p in load_snapshot(store, now_ms=NOW).files.column("path").to_pylist()}
    finally:
        spark.conf.unset(common._WINDOW_GROUP_LIMIT)
