from __future__ import annotations

from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.model.paths import compaction_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot

from .logbuilder import LogBuilder, add, metadata, ndjson, protocol, remove


def test_unreconciled_compaction_is_ignored_in_favour_of_the_commits(memfs: MemoryFileSystem) -> None:
    """A compaction repeating a logical file cannot say which line is newer (golden table
    compacted-log-files-table does this): readers fall back to the commits."""
    log = LogBuilder(memfs, "/t")
    log.commit(0, [protocol(), metadata(), add("a")])
    log.commit(1, [add("b")])
    log.commit(2, [remove("b", 5)])
    log.write(compaction_name(1, 2), ndjson([remove("b", 5), add("b")]))  # remove listed before the older add
    snap = load_snapshot("memory://t")
    assert snap.active_file_keys() == {("a", None)}
    assert all(d.version == d.end_version for d in snap.segment.deltas)


def test_file_uri_forms_of_one_path_reconcile(memfs: MemoryFileSystem) -> None:
    log = LogBuilder(memfs, "/t")
    log.commit(0, [protocol(), metadata(), add("/data/x.parquet"), add("/data/y.parquet")])
    log.commit(1, [remove("file:/data/x.parquet", 5), remove("file:///data/y.parquet", 5)])
    assert load_snapshot("memory://t").num_files == 0
