"""The storage contract of ``LogStore`` on every object store we support, on real servers: moto S3,
MinIO, Azurite (Azure Blob; the abfss:// scheme too) and fake-gcs-server (GCS).

Create-if-absent (small, streamed and copied), racing creates, a create whose response was lost,
the conditional header on the wire (a proxy that strips it makes the race test fail), listings
with sizes and modification times, stat, deletes."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from tests._infra.races import race_put_if_absent
from tests._infra.recording_proxy import Recorded, recording_proxy
from tests._infra.store_servers import Bucket

pytestmark = pytest.mark.integration

MiB = 2**20
V1 = f"{1:020d}.json"
# Small blocks, so that a few MiB take each client's multi-request path (S3 multipart upload,
# Azure staged blocks + Put Block List, GCS resumable upload).
SMALL_BLOCKS = {"s3": {"default_block_size": 5 * MiB}, "az": {"blocksize": MiB}, "gs": {"block_size": 256 * 1024}}


def table(bucket: Bucket, name: str = "t", options: dict[str, Any] | None = None, *, scheme: str | None = None) -> LogStore:
    url = bucket.url if scheme is None else f"{scheme}://{bucket.name}"
    return open_table_storage(f"{url}/{name}", options if options is not None else bucket.storage_options)


def test_put_if_absent_refuses_a_second_create_and_keeps_the_first(every_store_bucket: Bucket) -> None:
    store = table(every_store_bucket)
    assert store.supports_atomic_create and store.backend in ("s3", "azure", "gcs")
    store.put_if_absent(V1, b"first\n")
    with pytest.raises(LogFileExistsError) as err:
        store.put_if_absent(V1, b"second\n")
    assert err.value.path == V1
    with pytest.raises(LogFileExistsError):
        store.put_if_absent(V1, b"first\n")  # identical bytes from another writer: still not ours
    assert store.read(V1) == b"first\n"


def test_racing_creates_of_one_commit_have_exactly_one_winner(every_store_bucket: Bucket) -> None:
    store = table(every_store_bucket)
    for v in range(5):
        name = f"{v:020d}.json"
        winners = race_put_if_absent(store, name, 8)
        assert len(winners) == 1, (name, winners)
        assert store.read(name) == f"writer {winners[0]}\n".encode()


def test_streamed_create_uploads_in_parts_and_the_condition_holds_at_completion(every_store_bucket: Bucket) -> None:
    bucket = every_store_bucket
    store = table(bucket, options={**bucket.storage_options, **SMALL_BLOCKS[bucket.store.protocol]})
    name = f"{3:020d}.checkpoint.parquet"
    first = bytes(range(256)) * (12 * MiB // 256)

    def write(data: bytes) -> Any:
        def produce(sink: Any) -> None:
            for i in range(0, len(data), MiB):
                sink.write(data[i : i + MiB])
        return produce

    assert store.put_if_absent_stream(name, write(first)) == len(first)
    with pytest.raises(LogFileExistsError):
        store.put_if_absent_stream(name, write(b"x" * len(first)))
    assert store.read(name) == first
    # an empty stream is one conditional put (s3fs would commit it with an unconditional touch)
    assert store.put_if_absent_stream("empty.json", lambda sink: None) == 0
    with pytest.raises(LogFileExistsError):
        store.put_if_absent_stream("empty.json", lambda sink: None)
    # the copy of a staged file: streamed, conditional
    store.put_if_absent("_staged.tmp", b"staged\n")
    store.put_if_absent_from("_staged.tmp", f"{4:020d}.json")
    with pytest.raises(LogFileExistsError):
        store.put_if_absent_from("_staged.tmp", f"{4:020d}.json")
    if bucket.store.protocol == "s3":  # every refused or finished upload was completed or aborted
        uploads = bucket.filesystem().call_s3("list_multipart_uploads", Bucket=bucket.name)
        assert uploads.get("Uploads", []) == [], uploads


def test_a_writer_that_fails_midway_leaves_no_object(every_store_bucket: Bucket) -> None:
    bucket = every_store_bucket
    store = table(bucket, options={**bucket.storage_options, **SMALL_BLOCKS[bucket.store.protocol]})

    def produce(sink: Any) -> None:
        for _ in range(8):
            sink.write(b"p" * MiB)
        raise RuntimeError("the checkpoint writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        store.put_if_absent_stream("part.parquet", produce)
    assert store.stat("part.parquet") is None
    store.put_if_absent_stream("part.parquet", lambda sink: sink.write(b"whole"))  # nothing was in the way
    assert store.read("part.parquet") == b"whole"


def _is_create(store_protocol: str, r: Recorded) -> bool:
    """The request that creates an object, for each API."""
    if store_protocol == "s3":
        return r.method == "PUT" and "partNumber=" not in r.query and "uploadId=" not in r.query
    if store_protocol == "az":
        return r.method == "PUT" and "comp=" not in r.query and "restype=" not in r.query
    return r.method == "POST" and "/upload/storage/v1/" in r.target


def _conditional(store_protocol: str, r: Recorded) -> bool:
    if store_protocol == "gs":
        return "ifGenerationMatch=0" in r.query
    return r.headers.get("if-none-match") == "*"


def test_every_create_sends_the_stores_condition(every_store_bucket: Bucket) -> None:
    """On the wire: If-None-Match: * (S3 PutObject, Azure Put Blob) or ifGenerationMatch=0 (GCS)."""
    bucket = every_store_bucket
    with recording_proxy(bucket.store.endpoint) as proxy:
        store = table(bucket, options=bucket.options_via(proxy.endpoint))
        for v in range(3):
            store.put_if_absent(f"{v:020d}.json", b"{}\n")
        creates = [r for r in proxy.requests if _is_create(bucket.store.protocol, r)]
        assert len(creates) == 3 and all(_conditional(bucket.store.protocol, r) for r in creates), creates


def test_a_server_that_ignored_the_condition_would_fail_the_race_test(every_store_bucket: Bucket) -> None:
    """The race test through a proxy that makes the store look as if it ignored the condition:
    every writer 'wins', so the race test would fail. Where the server checks no signature (moto,
    fake-gcs-server) the condition itself is stripped, and the second create replaces the first."""
    bucket = every_store_bucket
    with recording_proxy(bucket.store.endpoint) as proxy:
        proxy.accept_conflicts = True
        store = table(bucket, options=bucket.options_via(proxy.endpoint))
        assert len(race_put_if_absent(store, f"{2:020d}.json", 8)) == 8
        if bucket.store.name in ("moto", "fake-gcs-server"):
            proxy.accept_conflicts, proxy.strip = False, True
            store.put_if_absent(V1, b"first\n")
            store.put_if_absent(V1, b"second\n")  # no LogFileExistsError: the server never saw a condition
            assert store.read(V1) == b"second\n"


def test_a_create_whose_response_was_lost_is_our_own_when_the_client_resends_it(every_store_bucket: Bucket) -> None:
    """The server stores the object, the answer never arrives, the client resends the create and
    is refused: the object holds our create's token, so the write succeeded (a coordinator commit
    must not be retried at the next version: that would commit it twice)."""
    bucket = every_store_bucket
    protocol = bucket.store.protocol
    with recording_proxy(bucket.store.endpoint) as proxy:
        store = table(bucket, options=bucket.options_via(proxy.endpoint))
        proxy.drop_next_response(lambda r: _is_create(protocol, r))
        store.put_if_absent(V1, b"ours\n")
        assert proxy.dropped, "no response was dropped"
        creates = [r for r in proxy.requests if _is_create(protocol, r)]
        assert len(creates) == 2, "the client resent the create"
        assert store.read(V1) == b"ours\n"
        # and another writer's identical create after a lost response is still not ours
        other = table(bucket, options=bucket.options_via(proxy.endpoint))
        proxy.drop_next_response(lambda r: _is_create(protocol, r))
        with pytest.raises(LogFileExistsError):
            other.put_if_absent(V1, b"ours\n")


def test_listing_stat_and_deletes(every_store_bucket: Bucket) -> None:
    store = table(every_store_bucket)
    before = datetime.now(timezone.utc).timestamp() * 1000 - 2000  # Azure's times are whole seconds
    for v in (2, 0, 10, 1):
        store.put_if_absent(f"{v:020d}.json", b"{}\n" * (v + 1))
    store.put_if_absent("_sidecars/a.parquet", b"side")
    store.put_if_absent("_spark_staging/run-1/part-0", b"p")
    after = datetime.now(timezone.utc).timestamp() * 1000 + 2000
    listed = store.list_dir()
    assert [s.name for s in listed] == [f"{v:020d}.json" for v in (0, 1, 2, 10)]
    assert [s.size for s in listed] == [3, 6, 9, 33]
    assert all(before <= s.modification_time <= after for s in listed), listed
    assert [p.version for p in store.list_log()] == [0, 1, 2, 10]
    assert [s.name for s in store.list_dir("_sidecars")] == ["_sidecars/a.parquet"]
    assert store.list_subdirs("_spark_staging") == ["_spark_staging/run-1"]
    assert [s.name for s in store.list_tree("_spark_staging")] == ["_spark_staging/run-1/part-0"]
    stat = store.stat(f"{2:020d}.json")
    assert stat is not None and stat.size == 9 and before <= stat.modification_time <= after
    assert store.stat("missing.json") is None and not store.exists("missing.json") and store.exists(f"{0:020d}.json")
    heard: list[int] = []
    store.delete_many([f"{v:020d}.json" for v in (0, 1, 5)], heard.append)  # 5 never existed
    store.delete(f"{2:020d}.json")
    store.delete(f"{2:020d}.json")
    assert heard == [3] and [s.name for s in store.list_dir()] == [f"{10:020d}.json"]
    store.delete_tree("_spark_staging/run-1")
    assert store.list_subdirs("_spark_staging") == []
    store.put_overwrite("_last_checkpoint", b"1")
    store.put_overwrite("_last_checkpoint", b"2")
    assert store.read("_last_checkpoint") == b"2"


@pytest.mark.parametrize("scheme", ["abfss", "abfs", "az"])
def test_every_azure_scheme_is_a_table_with_atomic_creates(scheme: str, azurite_container: Bucket) -> None:
    host = f"{azurite_container.name}@{azurite_container.storage_options['account_name']}.dfs.core.windows.net"
    store = open_table_storage(f"{scheme}://{host}/t", azurite_container.storage_options)
    assert store.uri == f"{scheme}://{host}/t" and store.backend == "azure"
    store.put_if_absent(V1, b"a")
    with pytest.raises(LogFileExistsError):
        store.put_if_absent(V1, b"b")
    assert table(azurite_container).read(V1) == b"a"  # the same blob as az://container/t


def test_gs_tables_use_the_plain_gcs_client(fake_gcs_bucket: Bucket) -> None:
    """Not gcsfs's experimental subclass (gRPC bucket-layout lookups before each call)."""
    import gcsfs.core

    for scheme in ("gs", "gcs"):
        store = open_table_storage(f"{scheme}://{fake_gcs_bucket.name}/t", fake_gcs_bucket.storage_options)
        assert type(store.fs) is gcsfs.core.GCSFileSystem and store.uri == f"gs://{fake_gcs_bucket.name}/t"


def test_threads_of_one_process_share_one_store_safely(every_store_bucket: Bucket) -> None:
    """The Spark driver and the operators use one LogStore from several threads."""
    store = table(every_store_bucket)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            store.put_if_absent(f"{100 + i:020d}.json", b"x")
            assert store.read(f"{100 + i:020d}.json") == b"x"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(store.list_dir()) == 8


def test_stat_and_exists_see_a_file_another_writer_created_after_a_listing(every_store_bucket: Bucket) -> None:
    """The Spark driver's JVM writes a file after our listing of its directory: stat, exists and
    has_log_dir must not answer from that cached listing (adlfs answers info() from the parent's)."""
    store = table(every_store_bucket)
    store.put_if_absent("_spark_staging/run-1/part-0.parquet", b"p")
    assert [s.name for s in store.list_dir("_spark_staging/run-1")] == ["_spark_staging/run-1/part-0.parquet"]
    assert store.stat("_spark_staging/run-1/joined.parquet") is None
    every_store_bucket.filesystem().pipe_file(store.path("_spark_staging/run-1/joined.parquet"), b"joined")  # another process
    stat = store.stat("_spark_staging/run-1/joined.parquet")
    assert stat is not None and stat.size == 6 and store.exists("_spark_staging/run-1/joined.parquet")
    later = table(every_store_bucket, "u")
    later.fs.ls(every_store_bucket.name)
    assert not later.has_log_dir()
    every_store_bucket.filesystem().pipe_file(later.path(f"{0:020d}.json"), b"{}\n")
    assert later.has_log_dir()
