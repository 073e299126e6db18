"""Checkpoint writer rules on synthetic logs (interop with real readers lives in tests/interop and tests/spark)."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.errors import UnpublishedVersionError, UnsupportedFeatureError
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import json_checksum, parse_last_checkpoint
from airflow_delta_maintenance.deltalog.log_segment.segment import CatalogCommit
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, metadata, ndjson, protocol, remove

ROOT = "memory://tbl"
NOW = 1_800_000_000_000


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def rows(store, name: str) -> list[dict]:
    return pq.read_table(io.BytesIO(store.read(name))).to_pylist()


def test_classic_v1_content_rules(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata({"delta.deletedFileRetentionDuration": "interval 1 day", "delta.parquet.compression.codec": "snappy"}), add("a", tags={"t": "1"})])
    log.commit(1, [add("b"), remove("a", NOW - 1000), remove("old", NOW - 10 * 86_400_000)])
    store = open_table_storage(ROOT)
    result = write_checkpoint(store, load_snapshot(store, now_ms=NOW))
    assert result.kind == "classic" and result.files == ["00000000000000000001.checkpoint.parquet"]
    data = rows(store, result.files[0])
    assert all(r["add"]["dataChange"] is False for r in data if r["add"])
    removes = [r["remove"] for r in data if r["remove"]]
    assert [r["path"] for r in removes] == ["a"] and "tags" not in removes[0] and "stats" not in removes[0]  # expired "old" dropped
    assert pq.ParquetFile(io.BytesIO(store.read(result.files[0]))).metadata.row_group(0).column(0).compression == "SNAPPY"
    hint = parse_last_checkpoint(store.read("_last_checkpoint"))
    assert hint is not None and hint.version == 1 and hint.num_of_add_files == 1 and hint.checksum == json_checksum(json.loads(store.read("_last_checkpoint")))


def test_classic_named_v2_checkpoint_has_checkpoint_metadata(log: LogBuilder) -> None:
    v2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
    log.commit(0, [v2, metadata(), add("a")])
    store = open_table_storage(ROOT)
    result = write_checkpoint(store, load_snapshot(store))
    assert result.kind == "classic-v2"
    data = rows(store, result.files[0])
    assert data[0]["checkpointMetadata"] == {"version": 0, "tags": None}
    assert load_snapshot(ROOT).checkpoint_version == 0


def test_unknown_writer_features_are_refused_by_name(log: LogBuilder) -> None:
    log.commit(0, [protocol(1, 7, None, ["appendOnly", "timeMachine"]), metadata()])
    store = open_table_storage(ROOT)
    with pytest.raises(UnsupportedFeatureError) as err:
        write_checkpoint(store, load_snapshot(store))
    assert err.value.features == ["timeMachine"]


def test_checkpoint_protection_is_honoured(log: LogBuilder) -> None:
    log.commit(0, [protocol(1, 7, None, ["checkpointProtection"]), metadata({"delta.requireCheckpointProtectionBeforeVersion": "5"})])
    for v in range(1, 3):
        log.commit(v, [add(f"f{v}")])
    store = open_table_storage(ROOT)
    with pytest.raises(UnsupportedFeatureError, match="checkpointProtection"):
        write_checkpoint(store, load_snapshot(store))


def test_unpublished_versions_are_refused(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata()])
    log.write("_staged_commits/00000000000000000001.u.json", ndjson([add("x")]))
    store = open_table_storage(ROOT)
    snap = load_snapshot(store, catalog_commits=[CatalogCommit(1, "_staged_commits/00000000000000000001.u.json")], latest_ratified_version=1)
    with pytest.raises(UnpublishedVersionError) as err:
        write_checkpoint(store, snap)
    assert err.value.version == 1


def test_existing_checkpoint_is_a_no_op_and_older_hints_are_not_written(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(), add("a")])
    log.commit(1, [add("b")])
    store = open_table_storage(ROOT)
    write_checkpoint(store, load_snapshot(store))
    again = write_checkpoint(store, load_snapshot(store))
    assert again.existed and not again.last_checkpoint_updated
    older = write_checkpoint(store, load_snapshot(store, 0))
    assert not older.existed and not older.last_checkpoint_updated
    assert parse_last_checkpoint(store.read("_last_checkpoint")).version == 1


def test_row_groups_follow_the_replay_batches_and_group_small_ones() -> None:
    import pyarrow as pa

    from airflow_delta_maintenance.deltalog.checkpoint.writer import _slices_within_chunks

    def table(*sizes: int) -> pa.Table:
        batches, n = [], 0
        for size in sizes:
            batches.append(pa.record_batch({"i": pa.array(range(n, n + size), pa.int64())}))
            n += size
        return pa.Table.from_batches(batches, pa.schema([("i", pa.int64())]))

    def shape(t: pa.Table, rows: int) -> list[tuple[int, int]]:
        out = [(s.num_rows, s.column("i").num_chunks) for s in _slices_within_chunks(t, rows)]
        assert sum(n for n, _ in out) == t.num_rows
        assert [v for s in _slices_within_chunks(t, rows) for v in s.column("i").to_pylist()] == list(range(t.num_rows))
        return out

    # large batches: cut inside each batch, never across two
    assert shape(table(250, 250), 100) == [(100, 1), (100, 1), (50, 1), (100, 1), (100, 1), (50, 1)]
    # a thousand tiny batches (a table rewritten many times): grouped, 50 to 100 rows per group
    tiny = shape(table(*[3] * 1000), 100)
    assert all(50 <= n <= 100 for n, _ in tiny[:-1]) and len(tiny) == 31
    assert shape(table(), 100) == []
