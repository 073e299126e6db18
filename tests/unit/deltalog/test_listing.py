"""``list_log_files`` with an earlier listing: commits it holds are taken from it, not stat'ed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.errors import SymlinkInLogError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage


def _commit(log: Path, v: int, body: bytes = b'{"commitInfo":{}}\n') -> None:
    (log / f"{v:020d}.json").write_bytes(body)


def test_a_listing_since_an_earlier_one_sees_new_and_vanished_files_and_reuses_commit_stats(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    for v in range(5):
        _commit(log, v)
    (log / "00000000000000000003.checkpoint.parquet").write_bytes(b"x" * 10)
    store = open_table_storage(str(tmp_path))
    first = list_log_files(store)

    (log / "00000000000000000000.json").unlink()  # a concurrent cleanup
    _commit(log, 5, b"{}\n" * 7)  # a new commit
    (log / "00000000000000000004.checkpoint.parquet").write_bytes(b"y" * 20)
    (log / ".00000000000000000006.json.tmp").write_bytes(b"t")
    old = 1_000_000_000
    os.utime(log / "00000000000000000001.json", (old, old))  # a listed commit is immutable: its stat is reused
    os.utime(log / "00000000000000000003.checkpoint.parquet", (old, old))  # a checkpoint is stat'ed again

    again = list_log_files(store, since=first)
    fresh = list_log_files(store)
    assert [c.version for c in again.commits] == [1, 2, 3, 4, 5]
    assert again.commits[0] is first.commits[1]  # the same entry, no stat
    assert again.commits[-1] == fresh.commits[-1] and again.commits[-1].size == 21
    assert again.checkpoints == fresh.checkpoints and [c.version for c in again.checkpoints] == [3, 4]
    assert again.checkpoints[0].modification_time == old * 1000
    assert again.hidden == fresh.hidden and again.commits[1:] == fresh.commits[1:]
    assert fresh.commits[0].modification_time == old * 1000 != again.commits[0].modification_time


def test_a_listing_since_an_earlier_one_still_refuses_a_symlink(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    _commit(log, 0)
    _commit(log, 1)
    store = open_table_storage(str(tmp_path))
    first = list_log_files(store)
    (log / "00000000000000000001.json").unlink()
    (log / "00000000000000000001.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SymlinkInLogError):
        list_log_files(store, since=first)
