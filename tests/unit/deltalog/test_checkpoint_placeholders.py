"""A checkpoint's file actions sit among its other rows (delta-rs writes removes among adds):
replay keeps them in place as placeholder rows and drops those once, in reconciliation. The state
must be exactly what the commits alone give, and a file action without a path is refused."""

from __future__ import annotations

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.model.paths import classic_checkpoint_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot

from .logbuilder import LogBuilder, add, checkpoint_parquet, commit_info, dv, metadata, protocol, remove

ROOT = "memory://tbl"
NOW = 1_800_000_000_000


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def _state(snap) -> tuple[set, set]:
    files = {(f["path"], f["size"], f["dv_unique_id"]) for f in snap.files.select(["path", "size", "dv_unique_id"]).to_pylist()}
    tombs = set(zip(snap.tombstones.column("path").to_pylist(), snap.tombstones.column("dv_unique_id").to_pylist(), strict=True))
    return files, tombs


def _history(log: LogBuilder) -> list[dict]:
    """Commits 0-3 and, in a shuffled order, the state a checkpoint at 3 holds."""
    p, m = protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), metadata({"delta.deletedFileRetentionDuration": "interval 1000 days"})
    log.commit(0, [commit_info(), p, m, *(add(f"f{i}", i) for i in range(8)), add("d", 5)])
    log.commit(1, [remove("f1", NOW), remove("f3", NOW), add("f8", 8), {"txn": {"appId": "a", "version": 1}}])
    log.commit(2, [remove("d", NOW), add("d", 5, dv=dv("dv1", 1)), remove("f5", NOW)])
    log.commit(3, [add("f0", 100), remove("f6", NOW)])
    live = [add("f0", 100), add("f2", 2), add("f4", 4), add("f7", 7), add("f8", 8), add("d", 5, dv=dv("dv1", 1))]
    dead = [remove(x, NOW) for x in ("f1", "f3", "f5", "f6", "d")]
    # removes and the other actions between the adds: no add run is contiguous
    return [dead[0], live[0], p, live[1], dead[1], m, live[2], dead[2], {"txn": {"appId": "a", "version": 1}}, live[3], dead[3], live[4], dead[4], live[5]]


def _later_commits(log: LogBuilder) -> None:
    log.commit(4, [remove("f2", NOW), add("f9", 9), add("f4", 44)])  # a checkpoint file removed, one replaced
    log.commit(5, [remove("d", NOW, dv=dv("dv1", 1)), add("d", 5, dv=dv("dv2", None, storage_type="i"))])


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_interleaved_checkpoint_rows_give_the_state_of_the_commits(log: LogBuilder, memfs: MemoryFileSystem, parts: int) -> None:
    checkpoint = _history(log)
    _later_commits(log)
    from_commits = _state(load_snapshot(ROOT, now_ms=NOW))
    log.checkpoint(3, checkpoint, parts=parts)
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.segment.checkpoint is not None and snap.segment.checkpoint.version == 3
    assert _state(snap) == from_commits
    assert snap.files.column("path").null_count == 0 and snap.num_files == 6
    assert snap.txns["a"].version == 1


def test_interleaved_checkpoint_rows_at_its_own_version(log: LogBuilder) -> None:
    checkpoint = _history(log)
    from_commits = _state(load_snapshot(ROOT, now_ms=NOW))
    log.checkpoint(3, checkpoint)
    assert _state(load_snapshot(ROOT, now_ms=NOW)) == from_commits


@pytest.mark.parametrize("kind", ["add", "remove"])
def test_a_checkpoint_file_action_without_a_path_is_refused_by_row(log: LogBuilder, memfs: MemoryFileSystem, kind: str) -> None:
    log.commit(0, [protocol(), metadata(), add("a", 1)])
    log.commit(1, [add("b", 2)])
    nameless = {kind: {**(add("x", 1) if kind == "add" else remove("x", NOW))[kind], "path": None}}
    log.write(classic_checkpoint_name(1), checkpoint_parquet([protocol(), add("a", 1), nameless, metadata(), add("b", 2)]))
    # with the commits there, the unreadable checkpoint is passed over (as delta-spark does)
    assert _state(load_snapshot(ROOT, now_ms=NOW))[0] == {("a", 1, None), ("b", 2, None)}
    memfs.rm("/tbl/_delta_log/00000000000000000000.json")
    with pytest.raises(CorruptLogError, match=rf"00000000000000000001\.checkpoint\.parquet.*row 2: {kind} action without a path"):
        load_snapshot(ROOT, now_ms=NOW)
