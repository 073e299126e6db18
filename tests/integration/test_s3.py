"""S3 (moto's server, which enforces If-None-Match): atomic creates, publishing, reading, Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job, verify_checkpoint
from airflow_delta_maintenance.maintenance.spark.submit import run_spark_submit
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.races import race_put_if_absent
from tests.helpers.tables import bind_table

pytestmark = pytest.mark.integration


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


def test_put_if_absent_on_s3_has_exactly_one_winner(s3_bucket: tuple[str, dict]) -> None:
    bucket, options = s3_bucket
    store = open_table_storage(f"s3a://{bucket}/t", options)
    assert store.supports_atomic_create
    winners = race_put_if_absent(store, "00000000000000000001.json", 6)
    assert len(winners) == 1 and store.read("00000000000000000001.json") == f"writer {winners[0]}\n".encode()


def test_publish_and_read_a_table_on_s3(s3_bucket: tuple[str, dict], tmp_path: Path) -> None:
    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/orders"
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true", options)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 8):
        client.commit(uri, v, [add(f"f{v}")])
    store = open_table_storage(uri, options)
    result = publish_ratified_commits(bind_table(store, client))
    assert result.published == list(range(1, 8)) and client.get_commits(uri).commits == ()
    assert publish_ratified_commits(bind_table(store, client)).published == []
    snap = load_snapshot(uri, storage_options=options)
    assert snap.version == 7 and snap.num_files == 7
    assert write_checkpoint(store, snap).version == 7
    assert load_snapshot(uri, storage_options=options).checkpoint_version == 7


@pytest.mark.spark
def test_spark_checkpoint_on_s3a(s3_bucket: tuple[str, dict], tmp_path: Path) -> None:
    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/spark"
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true", options)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}")])
    store = open_table_storage(uri, options)
    publish_ratified_commits(bind_table(store, client))
    jars = ",".join(__import__("tests._infra.jars", fromlist=["x"]).jar_list("delta-spark"))
    out = run_spark_submit(checkpoint_job(uri, 5, options, jars=jars))
    assert json.loads(out.strip().splitlines()[-1])["version"] == 5
    assert verify_checkpoint(store, 5).version == 5
    assert load_snapshot(uri, storage_options=options).active_file_keys() == {(f"f{v}", None) for v in range(1, 6)}


def test_cleanup_on_s3_deletes_in_bulk_and_keeps_every_retained_version(s3_bucket: tuple[str, dict], tmp_path: Path) -> None:
    """1,050 expired commits: more than one 1000-key DeleteObjects request, commits before checkpoints."""
    from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup

    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/cleanup"
    store = open_table_storage(uri, options)
    lines = [json.dumps(a) for a in create_actions(ict=False)]
    commits = {f"{0:020d}.json": ("\n".join(lines) + "\n").encode()}
    commits.update({f"{v:020d}.json": (json.dumps(add(f"f{v}")) + "\n").encode() for v in range(1, 1060)})
    store.fs.pipe({store.path(name): data for name, data in commits.items()})
    # the checkpoint at 1050 written from a local copy of the same log and uploaded: replaying 1,051
    # commits from moto (a GET each) is the setup's cost, not what this test is about
    local = open_table_storage(str(tmp_path / "copy"))
    local.fs.makedirs(local.log_dir, exist_ok=True)
    local.fs.pipe({local.path(name): data for name, data in commits.items()})
    write_checkpoint(local, load_snapshot(local, 1050))
    store.fs.pipe({store.path(name): local.read(name) for name in (f"{1050:020d}.checkpoint.parquet", "_last_checkpoint")})
    day = 86_400_000
    now = int(__import__("time").time() * 1000) + 40 * day  # every commit is older than 30 days then
    before = load_snapshot(store, 1055, now_ms=now).active_file_keys()
    result = run_metadata_cleanup(
        bind_table(store), dry_run=False, retention_ms=30 * day, allow_shorter_retention=True, now_ms=now, allow_future_now=True
    )
    assert result.plan.cutoff_checkpoint == 1050 and result.deleted == 1050
    names = {p.rsplit("/", 1)[-1] for p in store.fs.ls(store.log_dir, detail=False, refresh=True)}
    assert min(int(n[:20]) for n in names if n.endswith(".json")) == 1050
    assert load_snapshot(open_table_storage(uri, options), 1055, now_ms=now).active_file_keys() == before


def test_table_state_on_s3_equals_the_snapshot(s3_bucket: tuple[str, dict], tmp_path: Path) -> None:
    """The light load opens the checkpoint for random access through s3fs (footer, then the
    protocol/metaData column chunks): it must agree with the full load on S3 too."""
    from airflow_delta_maintenance.deltalog.replay.table_state import load_table_state

    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/state"
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true", options)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 5):
        client.commit(uri, v, [add(f"f{v}")])
    store = open_table_storage(uri, options)
    publish_ratified_commits(bind_table(store, client))
    write_checkpoint(store, load_snapshot(store, 3))
    for version in (None, 3, 4):
        state, snap = load_table_state(store, version), load_snapshot(store, version)
        assert (state.version, state.protocol, state.metadata, state.properties, state.timestamp) == (
            snap.version, snap.protocol, snap.metadata, snap.properties, snap.timestamp
        )
    assert load_table_state(store, 3).checkpoint_version == 3 and load_table_state(store).segment.checkpoint_version == 3


def test_cleanup_on_s3_checks_in_commit_timestamps_and_skips_a_torn_anchor(s3_bucket: tuple[str, dict]) -> None:
    """S3 cannot set mtimes: in-commit timestamps carry the ages. The ICT heads are range reads;
    a torn checkpoint is passed over as the anchor; a non-monotonic ICT stops cleanup."""
    import time

    from airflow_delta_maintenance.deltalog.errors import NonMonotonicTimestampError
    from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
    from tests.unit.deltalog.logbuilder import LogBuilder, add as log_add, commit_info, metadata, protocol

    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/ict-cleanup"
    store = open_table_storage(uri, options)
    log = LogBuilder(store.fs, store.table_root)
    day = 86_400_000
    now = int(time.time() * 1000)
    conf = {"delta.logRetentionDuration": "interval 10 days", "delta.enableInCommitTimestamps": "true",
            "delta.inCommitTimestampEnablementVersion": "0"}
    for v in range(30):
        head = [protocol(1, 7, None, ["inCommitTimestamp"]), metadata(conf)] if v == 0 else []
        log.commit(v, [commit_info(now - (30 - v) * day), *head, log_add(f"f{v}")])
    for v in (5, 15, 25):
        write_checkpoint(store, load_snapshot(store, v))
    retained = {v: load_snapshot(store, v).active_file_keys() for v in range(19, 30)}
    torn = f"{15:020d}.checkpoint.parquet"
    store.fs.pipe_file(store.path(torn), store.read(torn)[:200])

    bad = store.read(f"{27:020d}.json").split(b"\n")
    first = json.loads(bad[0])
    first["commitInfo"]["inCommitTimestamp"] = 1000
    good = store.read(f"{27:020d}.json")
    store.fs.pipe_file(store.path(f"{27:020d}.json"), b"\n".join([json.dumps(first).encode(), *bad[1:]]))
    with pytest.raises(NonMonotonicTimestampError, match="version 27"):
        run_metadata_cleanup(bind_table(store), dry_run=False)
    assert store.exists(f"{0:020d}.json")
    store.fs.pipe_file(store.path(f"{27:020d}.json"), good)

    result = run_metadata_cleanup(bind_table(store), dry_run=False)
    assert result.plan.cutoff_checkpoint == 5 and result.plan.unreadable_checkpoints and result.deleted == 5
    for v, keys in retained.items():
        assert load_snapshot(open_table_storage(uri, options), v).active_file_keys() == keys, v


def test_stat_and_exists_see_a_file_another_writer_created_after_a_listing(s3_bucket: tuple[str, dict]) -> None:
    """A listing fills fsspec's directory cache; a file another process (the Spark driver's JVM,
    another run) writes afterwards must not be reported missing from that cache."""
    import boto3

    bucket, options = s3_bucket
    store = open_table_storage(f"s3://{bucket}/t", options)
    store.put_if_absent("00000000000000000000.json", b"{}\n")
    assert [s.name for s in store.list_dir()] == ["00000000000000000000.json"]
    assert store.stat("00000000000000000001.json") is None
    client = boto3.client(
        "s3", endpoint_url=options["client_kwargs"]["endpoint_url"], aws_access_key_id=options["key"], aws_secret_access_key=options["secret"], region_name="us-east-1"
    )
    client.put_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json", Body=b"{}\n{}\n")
    stat = store.stat("00000000000000000001.json")
    assert stat is not None and stat.size == 6
    assert store.exists("00000000000000000001.json")
    client.delete_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json")
    assert store.stat("00000000000000000001.json") is None and not store.exists("00000000000000000001.json")
    # a table created after the bucket was listed (a sensor waiting for a new table)
    later = open_table_storage(f"s3://{bucket}/u", options)
    later.fs.ls(bucket)
    assert not later.has_log_dir()
    client.put_object(Bucket=bucket, Key="u/_delta_log/00000000000000000000.json", Body=b"{}\n")
    assert later.has_log_dir()


def test_a_streamed_create_on_s3_is_create_if_absent_and_all_or_nothing(s3_bucket: tuple[str, dict], s3_endpoint: str) -> None:
    """``put_if_absent_stream`` on S3 is a multipart upload completed with If-None-Match: never whole
    in memory, never replacing an object, and nothing (no object, no open upload) when the writer
    fails. Before, it buffered the whole content."""
    import boto3

    from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
    from airflow_delta_maintenance.deltalog.storage import object_creates

    bucket, options = s3_bucket
    store = open_table_storage(f"s3://{bucket}/t", options)
    chunk = bytes(range(256)) * 4096  # 1 MiB
    parts = object_creates.STREAM_PART_BYTES // len(chunk) * 2 + 3  # more than two parts

    def write(sink: Any) -> None:
        for _ in range(parts):
            sink.write(chunk)

    assert store.put_if_absent_stream("00000000000000000001.json", write) == parts * len(chunk)
    assert store.read("00000000000000000001.json") == chunk * parts
    with pytest.raises(LogFileExistsError):
        store.put_if_absent_stream("00000000000000000001.json", lambda sink: sink.write(b"other\n"))
    with pytest.raises(LogFileExistsError):  # a multipart create meeting an object: refused at completion
        store.put_if_absent_stream("00000000000000000001.json", write)
    assert store.read("00000000000000000001.json") == chunk * parts

    def failing(sink: Any) -> None:
        write(sink)
        raise RuntimeError("the source changed")

    with pytest.raises(RuntimeError):
        store.put_if_absent_stream("00000000000000000002.json", failing)
    assert not store.exists("00000000000000000002.json")
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_publish_streams_a_large_commit_to_s3(s3_bucket: tuple[str, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A staged commit above the whole-file limit is verified in chunks and streamed into place."""
    from airflow_delta_maintenance.maintenance.operations import publish_copy
    from airflow_delta_maintenance.maintenance.table import staged_commits

    monkeypatch.setattr(publish_copy, "WHOLE_FILE_LIMIT", 1 << 20)
    monkeypatch.setattr(staged_commits, "WHOLE_FILE_LIMIT", 1 << 20)
    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/large"
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true", options)
    client.commit(uri, 0, create_actions(ict=True))
    big = [add(f"part-{i:07d}-{'x' * 80}.parquet") for i in range(110_000)]  # ~17 MiB: three parts
    client.commit(uri, 1, big)
    client.commit(uri, 2, [add("small")])
    store = open_table_storage(uri, options)
    staged = {c.version: store.read(c.file_name) for c in client.get_commits(uri).commits}
    assert len(staged[1]) > 16 << 20
    result = publish_ratified_commits(bind_table(store, client))
    assert result.published == [1, 2] and result.reported_version == 2
    assert store.read("00000000000000000001.json") == staged[1] and store.read("00000000000000000002.json") == staged[2]
    assert load_snapshot(uri, storage_options=options).num_files == 110_001
