"""The Spark jobs against the single-node writers, the deltalake wheel and delta-spark.

The jobs' logic runs in-process in the suite's shared session (``run_in_session``: a
``spark-submit`` costs 25-40 s); the submission path runs through ``spark-submit`` in the tests
whose point it is: a failed task's exit code and failure line, a killed driver, one golden
equality (and the cluster, store and credentials tests elsewhere)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.log_compaction.windows import write_compaction
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import compaction_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.errors import SparkJobError
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job, compaction_job, verify_checkpoint
from airflow_delta_maintenance.maintenance.spark.submit import run_spark_submit
from tests._infra.spark_in_process import run_in_session
from tests.unit.deltalog.logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol, remove

pytestmark = pytest.mark.spark
NOW = int(time.time() * 1000)
STATS = json.dumps({"numRecords": 3, "minValues": {"x": 1}, "maxValues": {"x": 9}, "nullCount": {"x": 0}})


def synthetic(root: Path, *, v2: bool, versions: int = 12) -> str:
    """Partitioned table with deletion vectors, removes, txns and domain metadata."""
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    features = (["deletionVectors", "v2Checkpoint"] if v2 else ["deletionVectors"])
    conf = {"delta.checkpointPolicy": "v2" if v2 else "classic", "delta.enableDeletionVectors": "true"}
    meta = metadata(conf, partition_columns=["p"])
    meta["metaData"]["schemaString"] = json.dumps(
        {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}, {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    )
    log.commit(0, [commit_info(), protocol(3, 7, features, features), meta, {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}}])
    for v in range(1, versions):
        actions: list[dict[str, Any]] = [commit_info()]
        actions += [add(f"p={v % 3}/f{v}-{i}.parquet", 100 + i, partition_values={"p": str(v % 3)}, stats=STATS) for i in range(4)]
        if v > 2:
            actions.append(remove(f"p={(v - 2) % 3}/f{v - 2}-0.parquet", NOW))
            actions.append(add(f"p={(v - 2) % 3}/f{v - 2}-1.parquet", 101, partition_values={"p": str((v - 2) % 3)}, dv=dv(f"dv{v}", 1), stats=STATS))
        actions.append({"txn": {"appId": f"app{v % 2}", "version": v, "lastUpdated": NOW}})
        log.commit(v, actions)
    return str(root)


def actions_of_checkpoint(uri: str) -> list[str]:
    """Every action of the (single) checkpoint at the latest version, sidecars included, as
    canonical JSON: maps as objects, no nulls, sorted — the logical content."""
    store = open_table_storage(uri)
    group = list_log_files(store).complete_checkpoints()[-1]
    rows: list[dict[str, Any]] = []
    for f in group.files:
        rows += pq.read_table(io.BytesIO(store.read(f.name))).to_pylist()
    sidecars = [r["sidecar"]["path"] for r in rows if r.get("sidecar")]
    for name in sidecars:
        rows += pq.read_table(io.BytesIO(store.read(f"_sidecars/{name}"))).to_pylist()

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None and k not in ("sidecar",)}
        if isinstance(value, list) and value and all(isinstance(x, tuple) for x in value):
            return dict(value)
        return value

    out = []
    for r in rows:
        r = {k: v for k, v in r.items() if v is not None and k != "sidecar"}
        if r:
            out.append(json.dumps(clean(r), sort_keys=True, default=str))
    return sorted(out)


@pytest.mark.parametrize("v2", [False, True], ids=["classic", "uuid-v2-sidecars"])
def test_spark_checkpoint_equals_the_single_node_writer(tmp_path: Path, v2: bool, spark: Any) -> None:
    a = synthetic(tmp_path / "a", v2=v2)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    latest = load_snapshot(a).version
    out = json.loads(run_in_session(spark, checkpoint_job(a, latest, conf={"spark.sql.shuffle.partitions": "3"}, sidecars=2 if v2 else 0)).strip().splitlines()[-1])
    assert out["version"] == latest and not out["existed"]
    store_b = open_table_storage(b)
    write_checkpoint(store_b, load_snapshot(store_b, now_ms=NOW), sidecar_max_actions=20)
    assert actions_of_checkpoint(a) == actions_of_checkpoint(b)
    group = verify_checkpoint(open_table_storage(a), latest)
    if v2:
        assert group.files[0].type.value == "checkpoint_uuid"
        assert len(open_table_storage(a).list_log("_sidecars")) == 2
    else:  # one classic file, joined from the parts the reconciliation's tasks wrote
        assert pq.ParquetFile(Path(a) / "_delta_log" / group.files[0].name).metadata.num_row_groups > 1
    # our reader sees the same state from the Spark checkpoint alone
    for v in range(latest + 1):
        os.rename(Path(a) / "_delta_log" / f"{v:020d}.json", tmp_path / f"{v}.bak")
    assert load_snapshot(a).active_file_keys() == load_snapshot(b).active_file_keys()
    assert not (Path(a) / "_delta_log" / "_spark_staging").exists()


def test_a_compaction_missing_removes_of_its_window_does_not_reach_the_spark_checkpoint(tmp_path: Path, spark: Any) -> None:
    # as the deltalake wheel's compact_logs writes it: tombstones already expired are left out
    a = synthetic(tmp_path / "a", v2=False)
    log = Path(a) / "_delta_log"
    write_compaction(open_table_storage(a), 3, 8)
    name = compaction_name(3, 8)
    lines = (log / name).read_bytes().splitlines()
    (log / name).unlink()
    (log / name).write_bytes(b"".join(line + b"\n" for line in lines if not line.startswith(b'{"remove"')))
    assert len(lines) > len((log / name).read_bytes().splitlines())
    days_ago = (NOW - 10 * 86_400_000) / 1000  # commits older than the compaction minus the 7-day retention
    for v in range(12):
        os.utime(log / f"{v:020d}.json", (days_ago, days_ago))
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    run_in_session(spark, checkpoint_job(a, 11, conf={"spark.sql.shuffle.partitions": "3"}))
    store_b = open_table_storage(b)
    write_checkpoint(store_b, load_snapshot(store_b, now_ms=NOW))
    assert actions_of_checkpoint(a) == actions_of_checkpoint(b)


def test_spark_compaction_holds_the_single_node_writers_lines(tmp_path: Path, spark: Any) -> None:
    a = synthetic(tmp_path / "a", v2=False)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)
    out = json.loads(run_in_session(spark, compaction_job(a, 2, 9)).strip().splitlines()[-1])
    assert out["created"]
    local = write_compaction(open_table_storage(b), 2, 9)
    name = local.file
    spark_lines = (Path(a) / "_delta_log" / name).read_bytes().splitlines(keepends=True)
    local_lines = (Path(b) / "_delta_log" / name).read_bytes().splitlines(keepends=True)
    head = sum(1 for line in local_lines if not line.startswith((b'{"add"', b'{"remove"')))  # they come first
    # the same head, byte for byte; the same file-action lines (Spark sorts them by key, the
    # single-node writer keeps log order: readers give a compaction's lines no order)
    assert spark_lines[:head] == local_lines[:head]
    assert sorted(spark_lines[head:]) == sorted(local_lines[head:]) and len(local_lines) == local.num_actions
    assert load_snapshot(a).active_file_keys() == load_snapshot(b).active_file_keys()


def test_a_failed_task_leaves_no_checkpoint_and_exits_non_zero(tmp_path: Path) -> None:
    uri = synthetic(tmp_path / "t", v2=False)
    # a commit a Spark task cannot parse (FAILFAST): the job must fail, not write a partial checkpoint
    (Path(uri) / "_delta_log" / f"{5:020d}.json").write_text('{"add": {"path": "x", "size": "not a number"}}\n{broken\n')
    with pytest.raises(SparkJobError) as err:
        run_spark_submit(checkpoint_job(uri, 11))
    # spark-submit's exit code, and the job's failure line (the Java exception) kept by the launcher
    assert "exited with" in str(err.value) and "delta-maintenance spark job failed: " in str(err.value), err.value
    files = list_log_files(open_table_storage(uri))
    assert not files.checkpoints and not (Path(uri) / "_delta_log" / "_last_checkpoint").exists()


def test_a_killed_driver_leaves_no_visible_checkpoint_and_the_next_run_removes_strays(tmp_path: Path, spark: Any) -> None:
    from tests._infra.spark import spark_submit_env

    uri = synthetic(tmp_path / "t", v2=True, versions=30)
    job = checkpoint_job(uri, 29, sidecars=4)
    env = {**spark_submit_env(), **job.env_vars}
    proc = subprocess.Popen(job.command("local[2]"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    staging = Path(uri) / "_delta_log" / "_spark_staging"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(staging.glob("*/*")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    # the driver (the Python child of spark-submit's JVM) named in the staging tag: wait until it is
    # gone or a zombie, as the next run's leftover rule requires — SIGKILL's teardown is not instant
    from airflow_delta_maintenance.deltalog.storage.run_identity import find_run_tag

    owners = [run for d in staging.iterdir() if (run := find_run_tag(d.name)) is not None]
    assert owners, "the killed run left no tagged staging directory"
    while time.monotonic() < deadline + 60 and any(run.liveness() for run in owners):
        time.sleep(0.05)
    files = list_log_files(open_table_storage(uri))
    assert not files.complete_checkpoints(), "a killed job made a checkpoint visible"
    assert load_snapshot(uri).version == 29
    run_in_session(spark, checkpoint_job(uri, 29, sidecars=4))  # the next run (its logic: in-process)
    store = open_table_storage(uri)
    group = verify_checkpoint(store, 29)
    referenced = set(r["sidecar"]["path"] for r in pq.read_table(io.BytesIO(store.read(group.files[0].name))).to_pylist() if r.get("sidecar"))
    assert {s.filename for s in store.list_log("_sidecars")} == referenced  # no strays
    assert not staging.exists() or not any(staging.iterdir())


def test_wheel_and_delta_spark_read_spark_checkpoints_with_identical_files(tmp_path: Path, spark: Any) -> None:
    import deltalake
    import pyarrow as pa

    uri = str(tmp_path / "t")
    for i in range(8):
        deltalake.write_deltalake(uri, pa.table({"x": [i, i + 1], "p": [f"p{i % 2}"] * 2}), mode="append", partition_by=["p"])
    deltalake.DeltaTable(uri).delete("x = 3")
    latest = deltalake.DeltaTable(uri).version()
    run_in_session(spark, checkpoint_job(uri, latest))
    for v in range(latest + 1):  # only our checkpoint remains to read from
        os.rename(Path(uri) / "_delta_log" / f"{v:020d}.json", tmp_path / f"{v}.bak")
    os.rename(tmp_path / f"{latest}.bak", Path(uri) / "_delta_log" / f"{latest:020d}.json")
    ours = {f["path"] for f in load_snapshot(uri).file_list()}
    actions = deltalake.DeltaTable(uri).get_add_actions(flatten=True)
    assert set(actions.column("path").to_pylist()) == ours
    spark_files = {Path(f.replace("file:", "")).relative_to(uri).as_posix() for f in spark.read.format("delta").load(uri).inputFiles()}
    assert {p.replace("%3D", "=") for p in spark_files} == ours


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "tables"


SUBMITTED_GOLDEN = "delta-spark/dv-partitioned-with-checkpoint"  # through spark-submit; the others in-process


@pytest.mark.parametrize("name", [SUBMITTED_GOLDEN, "delta-spark/v2-checkpoint-parquet", "delta-spark/basic-with-inserts-deletes-checkpoint"])
def test_spark_checkpoint_of_golden_tables_equals_the_single_node_writer(tmp_path: Path, name: str, request: pytest.FixtureRequest) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    shutil.copytree(GOLDEN / name, a)
    shutil.copytree(GOLDEN / name, b)
    for root in (a, b):  # drop the existing checkpoints: each engine writes its own at the latest version
        for p in (Path(root) / "_delta_log").iterdir():
            if ".checkpoint." in p.name or p.name == "_last_checkpoint":
                p.unlink()
    latest = load_snapshot(a).version
    job = checkpoint_job(a, latest, conf={"spark.sql.shuffle.partitions": "2"})
    run_spark_submit(job) if name == SUBMITTED_GOLDEN else run_in_session(request.getfixturevalue("spark"), job)
    store_b = open_table_storage(b)
    write_checkpoint(store_b, load_snapshot(store_b, now_ms=NOW))
    assert actions_of_checkpoint(a) == actions_of_checkpoint(b)


def _live_run_tag() -> str:
    """A run tag of this (live) process, spelled out so the test also runs against older code."""
    import hashlib
    import socket

    host = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
    return f"{int(time.time() * 1000):013d}-{host}-{os.getpid()}-{'ab' * 8}"


def test_another_live_runs_staging_and_sidecars_survive_a_spark_checkpoint(tmp_path: Path, spark: Any) -> None:
    """Why: "Stray cleanup at the end of one run deletes every other staging directory and every
    unreferenced sidecar of the version, with no age or liveness check"."""
    uri = synthetic(tmp_path / "t", v2=True)
    log = Path(uri) / "_delta_log"
    tag = _live_run_tag()
    other_staging = log / "_spark_staging" / tag
    other_staging.mkdir(parents=True)
    (other_staging / "part-00000-00000000-0000-0000-0000-000000000000-c000.zstd.parquet").write_bytes(b"another run's task output")
    # a single-node writer's sidecar, written just before its top-level file
    other_sidecar = log / "_sidecars" / f"{11:020d}.checkpoint.{1:010d}.{1:010d}.{tag}.parquet"
    other_sidecar.parent.mkdir()
    other_sidecar.write_bytes(b"another run's sidecar")
    run_in_session(spark, checkpoint_job(uri, 11, sidecars=2))
    verify_checkpoint(open_table_storage(uri), 11)
    assert other_staging.exists() and any(other_staging.iterdir()), "a live run's staging directory was deleted"
    assert other_sidecar.exists(), "a live run's sidecar was deleted"


def test_a_spark_run_whose_staging_is_emptied_publishes_nothing(tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why: the run that "learns its output by listing its staging directory, then writes a
    UUID-named V2 checkpoint with no sidecars and ``_last_checkpoint`` points at it"."""
    from pyspark.sql.readwriter import DataFrameWriter

    from airflow_delta_maintenance.spark_jobs import checkpoint as job

    uri = synthetic(tmp_path / "t", v2=True)
    original = DataFrameWriter.parquet

    def write_then_lose_output(self: Any, path: str, *args: Any, **kwargs: Any) -> None:
        original(self, path, *args, **kwargs)
        shutil.rmtree(path.removeprefix("file://"))  # another run's stray cleanup strikes here

    monkeypatch.setattr(DataFrameWriter, "parquet", write_then_lose_output)
    assert job.main(["--table-uri", uri, "--version", "11", "--sidecars", "2"]) != 0
    store = open_table_storage(uri)
    assert not list_log_files(store).checkpoints, "a checkpoint without its files became visible"
    assert not store.exists("_last_checkpoint")
    assert not store.list_log("_sidecars")
    assert load_snapshot(uri).num_files == load_snapshot(uri, 11).num_files


def test_a_job_run_in_a_process_that_has_a_session_leaves_that_session_working(tmp_path: Path, spark: Any) -> None:
    """A job stops the session it started (spark-submit's JVM must exit), never one it found: run
    in a notebook or beside other work, stopping it broke every later query (the suite's own
    session died this way and every later Spark test failed)."""
    from airflow_delta_maintenance.spark_jobs import checkpoint as job

    uri = synthetic(tmp_path / "t", v2=False)
    assert job.main(["--table-uri", uri, "--version", "11"]) == 0
    assert not spark.sparkContext._jsc.sc().isStopped()
    assert spark.range(3).count() == 3
    assert spark.read.text(f"{uri}/_delta_log/{0:020d}.json").count() == 4  # its Hadoop file systems too


@pytest.mark.parametrize("job", ["checkpoint", "compaction"])
def test_a_file_action_without_a_path_fails_the_job_naming_its_version(tmp_path: Path, job: str, spark: Any) -> None:
    uri = synthetic(tmp_path / "t", v2=False)
    commit = Path(uri) / "_delta_log" / f"{5:020d}.json"
    commit.write_text(commit.read_text() + '{"add":{"size":1,"partitionValues":{},"modificationTime":1,"dataChange":true}}\n')
    before = sorted(p.name for p in (Path(uri) / "_delta_log").iterdir())
    spec = checkpoint_job(uri, 11) if job == "checkpoint" else compaction_job(uri, 1, 11)
    with pytest.raises(SparkJobError, match="a file action without a path in version 5"):
        run_in_session(spark, spec)
    # nothing written: no checkpoint, no compaction, no hint
    assert sorted(p.name for p in (Path(uri) / "_delta_log").iterdir() if not p.name.startswith(".")) == [n for n in before if not n.startswith(".")]
