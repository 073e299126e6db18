from __future__ import annotations

import time
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.errors import AtomicWriteUnsupportedError, CorruptLogError, InvalidLogPathError, LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import LogStore, normalize_table_uri, open_table_storage
from tests._infra.races import race_put_if_absent


@pytest.mark.parametrize("name", ["../x.json", "/etc/passwd", "a/../../b", "s3://bucket/x", "", "a//b", "./x", "a\\b"])
def test_names_that_escape_delta_log_are_refused(tmp_path: Path, name: str) -> None:
    store = open_table_storage(str(tmp_path))
    with pytest.raises(InvalidLogPathError):
        store.put_if_absent(name, b"x")


def test_local_put_if_absent_has_exactly_one_winner_under_a_race(tmp_path: Path) -> None:
    store = open_table_storage(str(tmp_path))
    winners = race_put_if_absent(store, "00000000000000000001.json", 8)
    assert len(winners) == 1
    assert store.read("00000000000000000001.json") == f"writer {winners[0]}\n".encode()
    # no temporary files are left behind
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == ["00000000000000000001.json"]


def test_memory_put_if_absent_refuses_an_existing_file(memfs: MemoryFileSystem) -> None:
    store = open_table_storage("memory://t")
    store.put_if_absent("_staged_commits/00000000000000000001.u.json", b"a")
    with pytest.raises(LogFileExistsError):
        store.put_if_absent("_staged_commits/00000000000000000001.u.json", b"b")
    assert store.read("_staged_commits/00000000000000000001.u.json") == b"a"


def test_backends_without_atomic_create_are_refused_unless_accepted(tmp_path: Path) -> None:
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    fs = DirFileSystem(path=str(tmp_path), fs=LocalFileSystem())
    store = LogStore(fs, "t")
    with pytest.raises(AtomicWriteUnsupportedError):
        store.put_if_absent("00000000000000000000.json", b"x")
    LogStore(fs, "t", allow_unsafe_writes=True).put_if_absent("00000000000000000000.json", b"x")
    assert (tmp_path / "t" / "_delta_log" / "00000000000000000000.json").read_bytes() == b"x"


def test_overwrite_is_atomic_replace_and_delete_is_idempotent(tmp_path: Path) -> None:
    store = open_table_storage(str(tmp_path))
    store.put_overwrite("_last_checkpoint", b"1")
    store.put_overwrite("_last_checkpoint", b"2")
    assert store.read("_last_checkpoint") == b"2"
    store.delete("_last_checkpoint")
    store.delete("_last_checkpoint")
    assert store.stat("_last_checkpoint") is None


def test_listing_is_sorted_and_reports_size_and_mtime(tmp_path: Path) -> None:
    store = open_table_storage(f"file://{tmp_path}")
    for v in (2, 0, 1):
        store.put_if_absent(f"{v:020d}.json", b"{}\n" * (v + 1))
    listed = store.list_log()
    assert [p.version for p in listed] == [0, 1, 2]
    assert [p.size for p in listed] == [3, 6, 9] and all(p.modification_time > 1e12 for p in listed)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [("s3a://b/t/", "s3://b/t"), ("s3n://b/t", "s3://b/t"), ("file:///x/y", "/x/y"), ("memory://m/t", "memory://m/t")],
)
def test_uri_normalisation(uri: str, expected: str) -> None:
    assert normalize_table_uri(uri) == expected


def test_local_bulk_unlink_runs_on_threads_and_stops_at_the_first_error(tmp_path: Path) -> None:
    """``delete_many`` overlaps local unlinks on threads (a busy disk blocks each one), batch after
    batch: a file already gone is fine, every other file goes, each batch is gone before the
    next starts, and an error stops the deletion (no later batch starts) and is raised."""
    from airflow_delta_maintenance.deltalog.storage import local_files as storage_module

    paths = [tmp_path / f"{i:05d}" for i in range(300)]
    for p in paths:
        p.write_bytes(b"")
    left: list[int] = []
    storage_module.unlink_batches(
        [[str(p) for p in paths[:150]] + [str(tmp_path / "gone")], [str(p) for p in paths[150:]]],
        lambda n: left.append(len(list(tmp_path.iterdir()))),
    )
    assert list(tmp_path.iterdir()) == [] and left == [150, 0]
    for p in paths:
        p.write_bytes(b"")
    (tmp_path / "dir").mkdir()  # unlink of a directory fails
    with pytest.raises(OSError):
        storage_module.unlink_batches([[str(tmp_path / "dir"), *(str(p) for p in paths[:100])], [str(p) for p in paths[100:]]], None)
    assert (tmp_path / "dir").is_dir() and all(p.exists() for p in paths[100:])


@pytest.mark.slow  # timed unlinks: on a loaded machine the fast phase is slow too (failed at load 24); make test runs it
def test_local_bulk_unlink_escalates_threads_only_when_unlinks_wait_on_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fast unlinks stay on a few threads (more only contend for the directory's lock); when a
    batch's unlinks were slow (a busy disk), the next batches overlap the waits on many threads."""
    import threading
    import types

    from airflow_delta_maintenance.deltalog.storage import local_files as storage_module

    real_unlink = storage_module.os.unlink
    real_time = storage_module.time
    # The fast case runs on a clock that only the unlinks move (1 µs each): real unlinks on a
    # loaded machine can take longer than the "waiting on the disk" threshold and escalate.
    virtual = {"now": 0.0}
    virtual_lock = threading.Lock()
    threads_per_batch: list[set[int]] = [set()]
    delay = {"s": 0.0}
    one_at_a_time = threading.Lock()
    serialized = {"on": False}

    def unlink(path: str, *args: object, **kwargs: object) -> None:
        threads_per_batch[-1].add(threading.get_ident())
        if serialized["on"]:  # slow, but under one lock: more threads cannot overlap anything
            with one_at_a_time:
                time.sleep(delay["s"])
        elif delay["s"]:
            time.sleep(delay["s"])
        else:
            with virtual_lock:
                virtual["now"] += 1e-6
        real_unlink(path)

    monkeypatch.setattr(storage_module.os, "unlink", unlink)

    def run(batches: int, seconds: float) -> list[int]:
        delay["s"] = seconds
        threads_per_batch[:] = [set()]
        paths = [tmp_path / f"{b}-{i:04d}" for b in range(batches) for i in range(256)]
        for p in paths:
            p.write_bytes(b"")
        storage_module.unlink_batches([[str(p) for p in paths[b * 256 : (b + 1) * 256]] for b in range(batches)],
                                       lambda n: threads_per_batch.append(set()))
        assert list(tmp_path.iterdir()) == []
        return [len(t) for t in threads_per_batch[:-1]]

    monkeypatch.setattr(storage_module, "time", types.SimpleNamespace(perf_counter=lambda: virtual["now"]))
    fast = run(3, 0.0)
    monkeypatch.setattr(storage_module, "time", real_time)
    assert max(fast) <= storage_module._UNLINK_THREADS_FAST
    slow = run(5, 0.002)  # 2 ms per unlink: waiting on the disk (the first batch also starts the threads)
    few = storage_module._UNLINK_THREADS_FAST
    assert max(slow[:2]) <= few and min(slow[2:]) > few, slow
    serialized["on"] = True
    contended = run(5, 0.0005)  # slow only because unlinks queue on one lock: back to a few threads
    assert max(contended[:2]) <= few and contended[2] > few and max(contended[3:]) <= few, contended


def test_read_into_reuses_one_buffer_grows_it_and_refuses_symlinks(tmp_path: Path) -> None:
    from airflow_delta_maintenance.deltalog.errors import SymlinkInLogError

    store = open_table_storage(str(tmp_path))
    big, small = bytes(range(256)) * 40, b"{}\n"
    store.put_if_absent("00000000000000000000.json", big)
    store.put_if_absent("00000000000000000001.json", small)
    scratch = bytearray(16)
    view = store.read_into("00000000000000000000.json", scratch)
    assert bytes(view) == big and len(scratch) > len(big)
    del view
    size = len(scratch)
    assert bytes(store.read_into("00000000000000000001.json", scratch)) == small
    assert len(scratch) == size  # no new buffer for a smaller file
    (tmp_path / "outside.json").write_bytes(b"secret\n")
    (tmp_path / "_delta_log" / "00000000000000000002.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(SymlinkInLogError):
        store.read_into("00000000000000000002.json", scratch)


def test_read_into_reads_a_file_that_grew_after_it_was_sized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    store = open_table_storage(str(tmp_path))
    data = b"x" * 10_000 + b"\n"
    store.put_if_absent("00000000000000000000.json", data)
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 10, *real_fstat(fd)[7:])))
    assert bytes(store.read_into("00000000000000000000.json", bytearray())) == data


def test_read_into_on_object_stores_returns_the_bytes(memfs: MemoryFileSystem) -> None:
    store = open_table_storage("memory://t")
    store.put_if_absent("00000000000000000000.json", b"abc\n")
    assert bytes(store.read_into("00000000000000000000.json", bytearray())) == b"abc\n"


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"mtime": 1700000000.5}, 1700000000500),  # local: float seconds
        ({"LastModified": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)}, 1767323045678),
        ({"last_modified": datetime(2026, 1, 2, 3, 4, 5)}, 1767323045000),  # naive: UTC
        ({"mtime": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)}, 1767323045000),  # gcsfs
        ({"updated": "2026-01-02T03:04:05.678Z"}, 1767323045678),
        ({"updated": "2026-01-02T03:04:05.6789123+00:00"}, 1767323045678),  # 7 fraction digits (Python 3.10 takes 3 or 6)
        ({"updated": "2026-01-02T03:04:05Z"}, 1767323045000),
        ({"last_modified": date(2026, 1, 2)}, 1767312000000),
        ({"mtime": 1767323045678}, 1767323045678),  # already milliseconds
        ({"mtime": None, "updated": "2026-01-02T03:04:05Z"}, 1767323045000),
        ({"mtime": "not a time", "created": 1.5}, 1500),
        ({}, 0),
    ],
)
def test_modification_times_of_every_client_in_epoch_ms(info: dict, expected: int) -> None:
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    from airflow_delta_maintenance.deltalog.storage.fsspec_files import mtime_ms

    assert mtime_ms(DirFileSystem(path="/", fs=LocalFileSystem()), {"name": "x", **info}) == expected


def test_create_conflicts_are_told_by_type_and_service_code_never_by_message() -> None:
    import errno

    from botocore.exceptions import ClientError

    from airflow_delta_maintenance.deltalog.storage.fsspec_files import is_conflict_in_flight, is_create_conflict

    def s3_error(code: str | None, status: int, message: str = "x") -> OSError:
        error = ClientError({"Error": {"Code": code, "Message": message} if code else {}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")
        wrapped = OSError(errno.EINVAL, message)
        wrapped.__cause__ = error  # as s3fs raises it
        return wrapped

    assert is_create_conflict(FileExistsError("x"))
    assert is_create_conflict(s3_error("PreconditionFailed", 412))  # MinIO: no <Condition>, OSError(EINVAL)
    assert is_create_conflict(s3_error(None, 412))
    assert not is_create_conflict(s3_error("ConditionalRequestConflict", 409)) and is_conflict_in_flight(s3_error("ConditionalRequestConflict", 409))
    # message text decides nothing: the old check matched "412" and "PreconditionFailed" anywhere in it
    assert not is_create_conflict(OSError("PreconditionFailed 412 ConditionalRequestConflict"))
    assert not is_create_conflict(s3_error("AccessDenied", 403, "PreconditionFailed 412"))
    assert not is_conflict_in_flight(OSError("ConditionalRequestConflict"))

    from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceModifiedError

    def azure_error(cls: type, status: int, code: str) -> Exception:
        exc = cls(message="m")
        exc.status_code, exc.error_code = status, code
        return exc

    assert is_create_conflict(azure_error(ResourceExistsError, 409, "BlobAlreadyExists"))
    assert is_create_conflict(azure_error(ResourceModifiedError, 412, "ConditionNotMet"))
    assert not is_create_conflict(azure_error(HttpResponseError, 403, "AuthorizationFailure"))
    assert not is_create_conflict(azure_error(ResourceExistsError, 409, "LeaseIdMissing"))


def test_memory_creates_race_under_one_lock(memfs: MemoryFileSystem) -> None:
    """fsspec's generic create is an exists-check then a write: two threads could both pass it."""
    store = open_table_storage("memory://t")
    for v in range(20):
        assert len(race_put_if_absent(store, f"{v:020d}.json", 8)) == 1


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_backends_are_told_by_class() -> None:
    import adlfs
    import gcsfs.core
    import s3fs
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem
    from fsspec.implementations.memory import MemoryFileSystem

    from airflow_delta_maintenance.deltalog.storage.fsspec_files import backend_of

    cases = {s3fs.S3FileSystem: "s3", adlfs.AzureBlobFileSystem: "azure", gcsfs.core.GCSFileSystem: "gcs", LocalFileSystem: "local",
             MemoryFileSystem: "memory", DirFileSystem: "other"}
    for cls, expected in cases.items():
        assert backend_of(cls.__new__(cls)) == expected, cls
    subclass = type("MyS3", (s3fs.S3FileSystem,), {"__module__": "mine"})
    assert backend_of(subclass.__new__(subclass)) == "s3"


@pytest.mark.parametrize("name", [f"{12:020d}.json", "_last_checkpoint", f"{3:020d}.checkpoint.parquet"])
def test_object_store_listing_refuses_a_directory_named_like_a_log_file(memfs: MemoryFileSystem, name: str) -> None:
    """The listing every object store shares (list_files) keeps the local scan's rule: a "directory"
    named like a log file (a prefix with objects under it) would be read as that file, so it is a
    typed error naming it, never skipped as if the file were absent."""
    store = open_table_storage("memory://t")
    store.put_if_absent(f"{0:020d}.json", b"{}\n")
    memfs.pipe(f"/t/_delta_log/{name}/part", b"x")
    with pytest.raises(CorruptLogError, match="is a directory, not a log file") as refused:
        store.list_dir()
    assert refused.value.path == name
