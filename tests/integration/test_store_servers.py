"""What each real store server does with the primitives the storage layer relies on.

MinIO (S3), Azurite (Azure Blob) and fake-gcs-server (GCS), with moto where S3 servers differ: the
conditional create and the error it answers, the same through each fsspec client, creates that take
the multipart path, racing creates, listing order and modification times. Each test pins one fact;
a server or client upgrade that changes one fails here first. The last tests run our own LogStore on
each store where a fact would break our use: gcsfs's datetime mtimes and MinIO's 412 without
<Condition> (s3fs's OSError); ``test_store_contract.py`` holds the rest of the storage contract.
"""

from __future__ import annotations

import errno
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests._infra.store_servers import Bucket, ObjectStore, azurite_connection_string

pytestmark = pytest.mark.integration

MiB = 2**20


def is_create_conflict(exc: BaseException) -> bool:
    """A create refused because the object exists, however the client spells it: FileExistsError
    (s3fs with moto, adlfs, gcsfs), or s3fs's OSError(EINVAL) whose cause is S3's 412
    PreconditionFailed (MinIO's answer has no <Condition> element, which s3fs needs to say so)."""
    if isinstance(exc, FileExistsError):
        return True
    cause = exc.__cause__
    return isinstance(exc, OSError) and isinstance(cause, ClientError) and cause.response["Error"]["Code"] == "PreconditionFailed"


def s3_client(store: ObjectStore) -> Any:
    options = store.storage_options
    return boto3.client("s3", endpoint_url=options["client_kwargs"]["endpoint_url"], region_name="us-east-1",
                        aws_access_key_id=options["key"], aws_secret_access_key=options["secret"])


# --- MinIO ---------------------------------------------------------------------------------------


def test_minio_refuses_a_second_create_with_412_and_no_condition_element(minio_bucket: Bucket) -> None:
    client = s3_client(minio_bucket.store)
    client.put_object(Bucket=minio_bucket.name, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket=minio_bucket.name, Key="k", Body=b"2", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert err.value.response["Error"]["Code"] == "PreconditionFailed"
    assert "Condition" not in err.value.response["Error"]  # moto and S3 name If-None-Match here
    assert client.get_object(Bucket=minio_bucket.name, Key="k")["Body"].read() == b"1"


def test_s3fs_create_on_minio_is_an_oserror_whose_cause_is_the_412(minio_bucket: Bucket) -> None:
    """s3fs sends If-None-Match: * for mode="create" but maps the 412 to FileExistsError only when
    the error names the If-None-Match condition; on MinIO it is OSError(EINVAL)."""
    fs, path = minio_bucket.filesystem(), f"{minio_bucket.name}/x"
    fs.pipe_file(path, b"1", mode="create")
    with pytest.raises(OSError) as err:
        fs.pipe_file(path, b"2", mode="create")
    assert not isinstance(err.value, FileExistsError) and err.value.errno == errno.EINVAL
    assert is_create_conflict(err.value)
    assert err.value.__cause__.response["ResponseMetadata"]["HTTPStatusCode"] == 412  # type: ignore[union-attr]
    assert fs.cat_file(path) == b"1"


@pytest.mark.parametrize("server", ["minio", "moto"])
def test_multipart_create_checks_if_none_match_when_the_upload_completes(server: str, request: pytest.FixtureRequest) -> None:
    """Two multipart uploads of one key, both started before either completes, both completed with
    If-None-Match: *: the first completion wins, the second is refused and changes nothing."""
    if server == "minio":
        bucket: Bucket = request.getfixturevalue("minio_bucket")
        client, name = s3_client(bucket.store), bucket.name
    else:
        name, _ = request.getfixturevalue("s3_bucket")
        client = boto3.client("s3", endpoint_url=request.getfixturevalue("s3_endpoint"), region_name="us-east-1")
    uploads = [client.create_multipart_upload(Bucket=name, Key="mp")["UploadId"] for _ in range(2)]
    etags = [client.upload_part(Bucket=name, Key="mp", UploadId=u, PartNumber=1, Body=bytes([65 + i]) * (5 * MiB))["ETag"]
             for i, u in enumerate(uploads)]

    def complete(i: int) -> None:
        client.complete_multipart_upload(Bucket=name, Key="mp", UploadId=uploads[i], IfNoneMatch="*",
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etags[i]}]})

    complete(0)
    with pytest.raises(ClientError) as err:
        complete(1)
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=name, Key="mp", Range="bytes=0-0")["Body"].read() == b"A"


def test_s3fs_multipart_create_on_minio_sends_the_precondition_at_completion(minio_bucket: Bucket) -> None:
    fs, path = minio_bucket.filesystem(), f"{minio_bucket.name}/big"
    first = b"a" * (11 * MiB)
    fs.pipe_file(path, first, mode="create", chunksize=5 * MiB)  # 3 parts
    with pytest.raises(OSError) as err:
        fs.pipe_file(path, b"b" * len(first), mode="create", chunksize=5 * MiB)
    assert is_create_conflict(err.value)
    assert fs.cat_file(path) == first
    assert s3_client(minio_bucket.store).list_multipart_uploads(Bucket=minio_bucket.name).get("Uploads", []) == []  # s3fs aborted its upload


# --- Azurite -------------------------------------------------------------------------------------


def _blob_service(store: ObjectStore, **config: Any) -> Any:
    from azure.storage.blob import BlobServiceClient

    return BlobServiceClient.from_connection_string(azurite_connection_string(store.endpoint), **config)


def test_azurite_refuses_a_second_put_blob_if_none_match_with_409_blob_already_exists(azurite_container: Bucket) -> None:
    from azure.core.exceptions import ResourceExistsError

    sent: list[tuple[str, str | None]] = []

    def spy(pipeline_request: Any) -> None:
        http = pipeline_request.http_request
        sent.append((http.url.partition("?")[2], http.headers.get("If-None-Match")))

    blob = _blob_service(azurite_container.store).get_blob_client(azurite_container.name, "k")
    blob.upload_blob(b"1", overwrite=False, raw_request_hook=spy)
    with pytest.raises(ResourceExistsError) as err:
        blob.upload_blob(b"2", overwrite=False, raw_request_hook=spy)
    assert sent == [("", "*"), ("", "*")]  # one Put Blob each, with the condition
    assert (err.value.status_code, getattr(err.value, "error_code", None)) == (409, "BlobAlreadyExists")
    assert blob.download_blob().readall() == b"1"


def test_azurite_staged_blocks_are_checked_when_the_block_list_is_committed(azurite_container: Bucket) -> None:
    """A big upload stages blocks, then commits the list: If-None-Match: * travels on Put Block List
    (azure-storage-blob and adlfs both put it there); two uploads staged at once, one commit wins."""
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobBlock

    sent: list[tuple[str, str | None]] = []

    def spy(pipeline_request: Any) -> None:
        http = pipeline_request.http_request
        sent.append((http.url.partition("?")[2].split("&")[0], http.headers.get("If-None-Match")))

    service = _blob_service(azurite_container.store, max_single_put_size=MiB, max_block_size=2 * MiB)
    big = service.get_blob_client(azurite_container.name, "big")
    big.upload_blob(b"x" * (5 * MiB), overwrite=False, raw_request_hook=spy)
    assert sent == [("comp=block", None)] * 3 + [("comp=blocklist", "*")]

    blob = service.get_blob_client(azurite_container.name, "interleaved")
    ids = [uuid.uuid4().hex for _ in range(2)]
    for i, block_id in enumerate(ids):
        blob.stage_block(block_id, bytes([65 + i]) * 1000)
    blob.commit_block_list([BlobBlock(ids[0])], headers={"If-None-Match": "*"})
    with pytest.raises(ResourceExistsError) as err:
        blob.commit_block_list([BlobBlock(ids[1])], headers={"If-None-Match": "*"})
    assert err.value.status_code == 409
    assert blob.download_blob().readall() == b"A" * 1000


def test_adlfs_create_and_exclusive_open_raise_file_exists(azurite_container: Bucket) -> None:
    fs, path = azurite_container.filesystem(), f"{azurite_container.name}/x"
    fs.pipe_file(path, b"1", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(path, b"2", mode="create")
    with pytest.raises(FileExistsError), fs.open(path, "xb", block_size=MiB) as f:
        f.write(b"3" * (3 * MiB))  # staged in blocks, refused at the commit
    assert fs.cat_file(path) == b"1"


@pytest.mark.parametrize("scheme", ["az", "abfs", "abfss"])
def test_every_azure_scheme_is_adlfs_on_the_blob_endpoint(scheme: str, azurite_container: Bucket) -> None:
    """Azurite has no ADLS Gen2 (dfs) API; adlfs never uses it: az://, abfs:// and abfss:// URLs,
    with or without the account host, are Blob API calls, which Gen2 accounts serve too."""
    import adlfs
    import fsspec

    options = azurite_container.storage_options
    host = f"{azurite_container.name}@{options['account_name']}.dfs.core.windows.net"
    for url in (f"{scheme}://{azurite_container.name}/t/a", f"{scheme}://{host}/t/a"):
        fs, path = fsspec.core.url_to_fs(url, **options, skip_instance_cache=True)
        assert isinstance(fs, adlfs.AzureBlobFileSystem)
        assert path == f"{azurite_container.name}/t/a"
        fs.pipe_file(path, url.encode())
        assert azurite_container.filesystem().cat_file(f"{azurite_container.name}/t/a") == url.encode()


# --- fake-gcs-server -----------------------------------------------------------------------------


def test_fake_gcs_refuses_a_second_upload_if_generation_match_0_with_412(fake_gcs_bucket: Bucket) -> None:
    base = f"{fake_gcs_bucket.store.endpoint}/upload/storage/v1/b/{fake_gcs_bucket.name}/o"
    for upload_type in ("media", "multipart"):
        name = f"k-{upload_type}"
        params = {"uploadType": upload_type, "name": name, "ifGenerationMatch": "0"}

        def upload(body: bytes, params: dict[str, str] = params) -> requests.Response:
            if params["uploadType"] == "media":
                return requests.post(base, params=params, data=body, timeout=30)
            related = b'--b\r\nContent-Type: application/json\r\n\r\n{"name": "%s"}\r\n--b\r\n\r\n%s\r\n--b--' % (params["name"].encode(), body)
            return requests.post(base, params=params, data=related, headers={"Content-Type": "multipart/related; boundary=b"}, timeout=30)

        assert upload(b"1").status_code == 200
        second = upload(b"2")
        assert second.status_code == 412 and second.json()["error"]["errors"][0]["reason"] == "conditionNotMet"
        assert fake_gcs_bucket.filesystem().cat_file(f"{fake_gcs_bucket.name}/{name}") == b"1"


def test_fake_gcs_resumable_create_checks_the_precondition_when_the_upload_finishes(fake_gcs_bucket: Bucket) -> None:
    """Two resumable sessions with ifGenerationMatch=0, both opened before either finishes: the
    first to finish wins, the second gets 412 (fake-gcs-server checks it at the end, like GCS)."""
    base = f"{fake_gcs_bucket.store.endpoint}/upload/storage/v1/b/{fake_gcs_bucket.name}/o"
    sessions = []
    for _ in range(2):
        opened = requests.post(base, params={"uploadType": "resumable", "name": "res", "ifGenerationMatch": "0"}, json={"name": "res"}, timeout=30)
        assert opened.status_code == 200
        sessions.append(opened.headers["Location"])
    results = [requests.put(url, data=bytes([65 + i]) * 1000, headers={"Content-Range": "bytes 0-999/1000"}, timeout=30).status_code
               for i, url in enumerate(sessions)]
    assert results == [200, 412]
    assert fake_gcs_bucket.filesystem().cat_file(f"{fake_gcs_bucket.name}/res") == b"A" * 1000


def test_gcsfs_create_raises_file_exists_for_simple_and_resumable_uploads(fake_gcs_bucket: Bucket) -> None:
    fs = fake_gcs_bucket.filesystem()
    for name, size, chunksize in (("small", 10, 50 * MiB), ("big", MiB, 256 * 1024)):  # resumable: size >= chunksize
        path = f"{fake_gcs_bucket.name}/{name}"
        fs.pipe_file(path, b"a" * size, mode="create", chunksize=chunksize)
        with pytest.raises(FileExistsError):
            fs.pipe_file(path, b"b" * size, mode="create", chunksize=chunksize)
        assert fs.cat_file(path) == b"a" * size


# --- every store ---------------------------------------------------------------------------------


def test_racing_creates_have_exactly_one_winner(store_bucket: Bucket) -> None:
    """8 writers create one key at once through the store's fsspec client, 10 rounds: one wins,
    every other is refused as a conflict, and the object holds the winner's bytes."""
    fs, writers = store_bucket.filesystem(), 8
    for round_ in range(10):
        path = f"{store_bucket.name}/race/{round_}"
        outcomes: list[Any] = [None] * writers
        barrier = threading.Barrier(writers)

        def attempt(i: int, path: str = path, outcomes: list[Any] = outcomes, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                fs.pipe_file(path, f"writer {i}".encode(), mode="create")
                outcomes[i] = "won"
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
                outcomes[i] = exc

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for i, o in enumerate(outcomes) if o == "won"]
        assert len(winners) == 1, outcomes
        assert all(is_create_conflict(o) for o in outcomes if o != "won"), outcomes
        assert fs.cat_file(path) == f"writer {winners[0]}".encode()


# How each fsspec client reports an object's modification time in a listing, and to what precision.
MTIME_FIELD = {"minio": ("LastModified", "ms"), "azurite": ("last_modified", "s"), "fake-gcs-server": ("mtime", "us")}


def test_listing_is_in_key_order_with_each_stores_modification_time(store_bucket: Bucket) -> None:
    fs = store_bucket.filesystem()
    names = [f"{v:020d}.json" for v in (3, 1, 10, 2)]
    before = datetime.now(timezone.utc) - timedelta(seconds=2)  # Azure's times are whole seconds
    for name in names:
        fs.pipe_file(f"{store_bucket.name}/log/{name}", b"x")
    entries = fs.ls(f"{store_bucket.name}/log", detail=True, refresh=True)
    assert [e["name"].rsplit("/", 1)[1] for e in entries] == sorted(names)
    field, precision = MTIME_FIELD[store_bucket.store.name]
    times = [e[field] for e in entries]
    assert all(isinstance(t, datetime) and before <= t <= datetime.now(timezone.utc) + timedelta(seconds=2) for t in times), times
    if precision == "s":
        assert all(t.microsecond == 0 for t in times)


def _our_store(bucket: Bucket, table: str) -> Any:
    return open_table_storage(f"{bucket.url}/{table}", bucket.storage_options)


@pytest.mark.parametrize("store", ["minio", "azurite", "fake_gcs"])
def test_our_listing_reads_modification_times_on_every_store(store: str, request: pytest.FixtureRequest) -> None:
    bucket: Bucket = request.getfixturevalue({"minio": "minio_bucket", "azurite": "azurite_container", "fake_gcs": "fake_gcs_bucket"}[store])
    bucket.filesystem().pipe_file(f"{bucket.name}/t/_delta_log/{0:020d}.json", b"{}\n")
    listed = _our_store(bucket, "t").list_dir()
    now_ms = datetime.now(timezone.utc).timestamp() * 1000
    assert [s.name for s in listed] == [f"{0:020d}.json"]
    assert now_ms - 60_000 < listed[0].modification_time <= now_ms + 5_000


def test_our_put_if_absent_on_minio_refuses_a_second_create_as_log_file_exists(minio_bucket: Bucket) -> None:
    store = _our_store(minio_bucket, "t")
    assert store.supports_atomic_create
    store.put_if_absent(f"{1:020d}.json", b"first\n")
    with pytest.raises(LogFileExistsError):
        store.put_if_absent(f"{1:020d}.json", b"second\n")
    assert store.read(f"{1:020d}.json") == b"first\n"


def test_a_missing_or_stale_server_is_an_error_that_says_make_servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from tests._infra import store_servers

    monkeypatch.setattr(store_servers, "ROOT", tmp_path)
    with pytest.raises(store_servers.ServerMissingError, match="make servers"):
        store_servers.server_binary("minio")
    (tmp_path / "minio" / "bin").mkdir(parents=True)
    (tmp_path / "minio" / "bin" / "minio").touch()
    (tmp_path / "minio" / ".done-000000000000").touch()  # installed for another line of the script
    with pytest.raises(store_servers.ServerMissingError, match="stale"):
        store_servers.server_binary("minio")
