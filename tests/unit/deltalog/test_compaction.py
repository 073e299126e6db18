from __future__ import annotations

import json

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.errors import MissingCommitError, UnpublishedVersionError
from airflow_delta_maintenance.deltalog.log_compaction.windows import plan_compaction_windows, write_compaction
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

ROOT = "memory://tbl"
NOW = 1_800_000_000_000


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def test_protocol_spec_example_keeps_every_tombstone(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(), add("f0")])
    log.commit(1, [add("f1")])
    for v in (2, 3):
        log.commit(v, [commit_info()])
    log.commit(4, [commit_info(), add("f2"), remove("f1", 5)])
    log.commit(5, [commit_info(), add("f3"), add("f4"), {"txn": {"appId": "3ae45b72", "version": 4389, "lastUpdated": 1}}])
    log.commit(6, [commit_info(), remove("f3", 6), {"txn": {"appId": "3ae45b72", "version": 4390, "lastUpdated": 2}}])
    store = open_table_storage(ROOT)
    result = write_compaction(store, 4, 6)
    lines = [json.loads(x) for x in store.read(result.file).decode().splitlines()]
    assert not any("commitInfo" in a for a in lines)
    assert {a["add"]["path"] for a in lines if "add" in a} == {"f2", "f4"}
    assert {a["remove"]["path"] for a in lines if "remove" in a} == {"f1", "f3"}  # f3 was added inside the window
    assert [a["txn"]["version"] for a in lines if "txn" in a] == [4390]
    # readers substituting the compaction see the same state as from the commits
    assert load_snapshot(ROOT, now_ms=NOW).active_file_keys() == {("f0", None), ("f2", None), ("f4", None)}
    assert write_compaction(store, 4, 6).existed


def test_domain_tombstones_are_kept(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(), {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}}])
    log.commit(1, [add("a")])
    log.commit(2, [{"domainMetadata": {"domain": "d", "configuration": "{}", "removed": True}}])
    store = open_table_storage(ROOT)
    lines = [json.loads(x) for x in store.read(write_compaction(store, 1, 2).file).decode().splitlines()]
    assert {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": True}} in lines


def test_unpublished_or_missing_versions_are_refused(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata()])
    log.commit(1, [add("a")])
    store = open_table_storage(ROOT)
    with pytest.raises(MissingCommitError):
        write_compaction(store, 1, 3)
    with pytest.raises(UnpublishedVersionError):
        write_compaction(store, 0, 1, published_version=0)


def test_aligned_windows_start_after_the_last_checkpoint_and_respect_the_size_guard(log: LogBuilder) -> None:
    # windows that checkpoint 12 covers ([1, 5], [6, 10]) are wasted work: not planned (as in delta-io/delta PR #7080)
    log.commit(0, [protocol(), metadata()])
    for v in range(1, 26):
        log.commit(v, [add(f"f{v}")])
    log.checkpoint(12, [protocol(), metadata(), *[add(f"f{v}") for v in range(1, 13)]])
    files = list_log_files(open_table_storage(ROOT))
    windows = plan_compaction_windows(files, 5)
    assert [(w.start, w.end) for w in windows] == [(13, 15), (16, 20), (21, 25)]
    guarded = plan_compaction_windows(files, 5, max_window_bytes=1)
    assert all(w.skip_reason == "windowTooLarge" for w in guarded)
    assert [(w.start, w.end) for w in plan_compaction_windows(files, 5, published_version=19)] == [(13, 15)]
