"""Log segments and replay on synthetic logs in memory: every error case by name, and the rules."""

from __future__ import annotations

import json

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.errors import (
    CorruptLogError,
    IncompleteCheckpointError,
    MissingCommitError,
    MissingSidecarError,
    ProtocolViolationError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment.segment import CatalogCommit, build_log_segment
from airflow_delta_maintenance.deltalog.model.paths import compaction_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, dv, metadata, ndjson, protocol, remove

ROOT = "memory://tbl"
DAY = 86_400_000
NOW = 1_800_000_000_000


def files_of(snapshot) -> dict[str, int]:
    return {f["path"]: f["size"] for f in snapshot.file_list()}


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def simple_log(log: LogBuilder, versions: int = 6) -> None:
    log.commit(0, [commit_info(), protocol(), metadata(), add("a", 1)])
    for v in range(1, versions):
        log.commit(v, [commit_info(), add(f"f{v}", v), remove(f"f{v - 1}", NOW) if v > 1 else add("b", 2)])


def test_snapshot_from_commits_only(log: LogBuilder) -> None:
    simple_log(log)
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.version == 5
    assert files_of(snap) == {"a": 1, "b": 2, "f5": 5}
    assert sorted(snap.tombstones.column("path").to_pylist()) == ["f1", "f2", "f3", "f4"]
    assert files_of(load_snapshot(ROOT, 2, now_ms=NOW)) == {"a": 1, "b": 2, "f2": 2}


def test_checkpoint_then_commits_and_older_commits_not_needed(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    simple_log(log)
    state3 = load_snapshot(ROOT, 3, now_ms=NOW)
    log.checkpoint(3, [protocol(), metadata(), add("a", 1), add("b", 2), add("f3", 3), remove("f2", NOW)])
    for v in range(3):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == 3 and snap.latest_checkpoint_version == 3
    assert files_of(snap) == {"a": 1, "b": 2, "f5": 5}
    assert files_of(load_snapshot(ROOT, 3, now_ms=NOW)) == files_of(state3)
    with pytest.raises(MissingCommitError) as err:
        load_snapshot(ROOT, 2)
    assert err.value.version == 0 and "00000000000000000000.json" in str(err.value)


def test_gap_in_versions_raises_missing_commit_naming_the_file(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    simple_log(log)
    memfs.rm("/tbl/_delta_log/00000000000000000003.json")
    with pytest.raises(MissingCommitError) as err:
        load_snapshot(ROOT)
    assert err.value.version == 3 and err.value.path == "00000000000000000003.json"
    assert files_of(load_snapshot(ROOT, 2)) == {"a": 1, "b": 2, "f2": 2}


def test_truncated_line_raises_corrupt_log_with_file_and_line(log: LogBuilder) -> None:
    simple_log(log, 3)
    log.write("00000000000000000003.json", ndjson([commit_info(), add("x", 1)]) + b'{"add":{"path":"y","si')
    with pytest.raises(CorruptLogError) as err:
        load_snapshot(ROOT)
    assert err.value.line == 3 and "00000000000000000003.json" in str(err.value)


def test_non_json_line_raises_corrupt_log(log: LogBuilder) -> None:
    simple_log(log, 3)
    log.write("00000000000000000003.json", ndjson([commit_info()]) + b"this is not json\n")
    with pytest.raises(CorruptLogError) as err:
        load_snapshot(ROOT)
    assert err.value.line == 2 and err.value.path.endswith("00000000000000000003.json")


def test_wrongly_typed_file_action_raises_corrupt_log(log: LogBuilder) -> None:
    simple_log(log, 2)
    log.write("00000000000000000002.json", b'{"add":{"path":"z","size":"big","partitionValues":{},"modificationTime":1,"dataChange":true}}\n')
    with pytest.raises(CorruptLogError):
        load_snapshot(ROOT)


def test_no_delta_log_raises_table_not_found(memfs: MemoryFileSystem) -> None:
    memfs.makedirs("/nothing", exist_ok=True)
    with pytest.raises(TableNotFoundError):
        load_snapshot("memory://nothing")


def test_empty_delta_log_raises_table_not_found(log: LogBuilder) -> None:
    log.write("_last_checkpoint", b'{"version": 1, "size": 1}')
    with pytest.raises(TableNotFoundError):
        load_snapshot(ROOT)


def test_unsupported_reader_feature_is_refused_by_name(log: LogBuilder) -> None:
    log.commit(0, [protocol(3, 7, ["deletionVectors", "futureMagic"], ["deletionVectors"]), metadata()])
    with pytest.raises(UnsupportedFeatureError) as err:
        load_snapshot(ROOT)
    assert err.value.features == ["futureMagic"] and "futureMagic" in str(err.value)


def test_reader_version_above_three_is_refused(log: LogBuilder) -> None:
    log.commit(0, [protocol(4, 7, [], []), metadata()])
    with pytest.raises(UnsupportedFeatureError):
        load_snapshot(ROOT)


def test_missing_protocol_or_metadata_is_a_protocol_violation(log: LogBuilder) -> None:
    log.commit(0, [metadata(), add("a")])
    with pytest.raises(ProtocolViolationError):
        load_snapshot(ROOT)


def test_version_beyond_latest_raises_version_not_found(log: LogBuilder) -> None:
    simple_log(log, 3)
    with pytest.raises(VersionNotFoundError) as err:
        load_snapshot(ROOT, 7)
    assert err.value.version == 7


def test_incomplete_multipart_checkpoint_is_ignored(log: LogBuilder) -> None:
    simple_log(log)
    state = [protocol(), metadata(), add("a", 1), add("b", 2), add("f4", 4)]
    log.checkpoint(4, state, parts=3, write_parts=[1, 3])
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == -1 and files_of(snap) == {"a": 1, "b": 2, "f5": 5}


def test_complete_multipart_checkpoint_is_used(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    simple_log(log)
    log.checkpoint(4, [protocol(), metadata(), add("a", 1), add("b", 2), add("f4", 4)], parts=3)
    for v in range(4):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == 4 and files_of(snap) == {"a": 1, "b": 2, "f5": 5}


def test_missing_checkpoint_part_without_fallback_raises_incomplete_checkpoint(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    simple_log(log)
    log.checkpoint(4, [protocol(), metadata(), add("a", 1), add("b", 2), add("f4", 4)], parts=3, write_parts=[1, 2])
    for v in range(4):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    with pytest.raises(IncompleteCheckpointError) as err:
        load_snapshot(ROOT)
    assert "missing parts [3]" in str(err.value) and "checkpoint.0000000001.0000000003" in err.value.path


@pytest.mark.parametrize(
    "hint",
    [
        LastCheckpointHint(version=2, size=5).to_json_bytes(),  # stale
        LastCheckpointHint(version=9, size=5).to_json_bytes(),  # dangling (no such checkpoint)
        LastCheckpointHint(version=4, size=5, parts=7).to_json_bytes(),  # wrong part count
        b'{"version": 4, "si',  # corrupt
    ],
    ids=["stale", "dangling", "wrong-parts", "corrupt"],
)
def test_bad_last_checkpoint_falls_back_to_the_listing(log: LogBuilder, hint: bytes) -> None:
    simple_log(log)
    log.checkpoint(4, [protocol(), metadata(), add("a", 1), add("b", 2), add("f4", 4)])
    log.write("_last_checkpoint", hint)
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == 4 and files_of(snap) == {"a": 1, "b": 2, "f5": 5}


def test_v2_checkpoint_with_sidecars(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    v2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
    log.commit(0, [v2, metadata({"delta.checkpointPolicy": "v2"}), add("a", 1)])
    log.commit(1, [add("b", 2)])
    log.commit(2, [add("c", 3), remove("a", NOW)])
    s1 = log.sidecar("00000000000000000002.checkpoint.0000000001.0000000002.s1.parquet", [add("b", 2)])
    s2 = log.sidecar("00000000000000000002.checkpoint.0000000001.0000000002.s2.parquet", [add("c", 3), remove("a", NOW)])
    log.checkpoint(2, [v2, metadata({"delta.checkpointPolicy": "v2"}), {"checkpointMetadata": {"version": 2}}, s1, s2], uuid="u1")
    log.commit(3, [add("d", 4)])
    for v in range(2):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == 2 and files_of(snap) == {"b": 2, "c": 3, "d": 4}
    assert snap.tombstones.column("path").to_pylist() == ["a"]
    memfs.rm("/tbl/_delta_log/_sidecars/00000000000000000002.checkpoint.0000000001.0000000002.s2.parquet")
    with pytest.raises(MissingSidecarError) as err:
        load_snapshot(ROOT)
    assert "s2.parquet" in str(err.value)


def test_v2_json_checkpoint_with_embedded_file_actions(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    v2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
    log.commit(0, [v2, metadata(), add("a", 1)])
    log.commit(1, [add("b", 2)])
    log.checkpoint(1, [{"checkpointMetadata": {"version": 1}}, v2, metadata(), add("a", 1), add("b", 2)], uuid="u2", fmt="json")
    memfs.rm("/tbl/_delta_log/00000000000000000000.json")
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.checkpoint_version == 1 and files_of(snap) == {"a": 1, "b": 2}


def test_compactions_are_chosen_greedily_like_delta_spark(log: LogBuilder) -> None:
    simple_log(log, 8)
    full = load_snapshot(ROOT, now_ms=NOW)
    # [1,3] and [1,5] start together: the shorter one sorts first and wins; [4,6] then tiles on.
    log.write(compaction_name(1, 3), ndjson([add("f1", 1), add("f2", 2), add("f3", 3), remove("f1", NOW), remove("f2", NOW), add("b", 2)]))
    log.write(compaction_name(1, 5), b"garbage that must not be read\n")
    log.write(compaction_name(4, 6), ndjson([add("f6", 6), remove("f3", NOW), remove("f4", NOW), remove("f5", NOW)]))
    log.write(compaction_name(5, 9), b"beyond the snapshot\n")
    store = open_table_storage(ROOT)
    segment = build_log_segment(list_log_files(store))
    assert [(d.version, d.end_version) for d in segment.deltas] == [(0, 0), (1, 3), (4, 6), (7, 7)]
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert files_of(snap) == files_of(full)
    # at version 5, [4,6] does not fit: plain commits after [1,3]
    seg5 = build_log_segment(list_log_files(store), 5)
    assert [(d.version, d.end_version) for d in seg5.deltas] == [(0, 0), (1, 3), (4, 4), (5, 5)]


def test_a_compaction_that_may_have_dropped_expired_tombstones_yields_to_its_commits(log: LogBuilder) -> None:
    # The deltalake wheel's compact_logs drops removes already expired under the table's
    # deletedFileRetentionDuration; trusting such a file resurrects the files they removed.
    retention = {"delta.deletedFileRetentionDuration": "interval 1 hours"}
    log.commit(0, [commit_info(), protocol(), metadata(retention), add("a", 1), add("b", 2)], mtime_ms=NOW - 3 * 3_600_000)
    log.commit(1, [commit_info(), remove("a", NOW - 3 * 3_600_000), add("c", 3)], mtime_ms=NOW - 3 * 3_600_000)
    log.commit(2, [commit_info(), add("d", 4)], mtime_ms=NOW - 3 * 3_600_000)
    lossy = ndjson([add("c", 3), add("d", 4)])  # the remove of "a" expired two hours before this was written
    log.write(compaction_name(1, 2), lossy, mtime_ms=NOW)
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert files_of(snap) == {"b": 2, "c": 3, "d": 4}
    assert [(d.version, d.end_version) for d in snap.segment.deltas] == [(0, 0), (1, 1), (2, 2)]
    # written within the retention, no tombstone of the window could have expired: it is used
    log.set_mtime(compaction_name(1, 2), NOW - 3 * 3_600_000 + 60_000)
    log.write(compaction_name(1, 2), ndjson([remove("a", NOW - 3 * 3_600_000), add("c", 3), add("d", 4)]), mtime_ms=NOW - 3 * 3_600_000 + 60_000)
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert files_of(snap) == {"b": 2, "c": 3, "d": 4}
    assert [(d.version, d.end_version) for d in snap.segment.deltas] == [(0, 0), (1, 2)]


def test_catalog_tail_caps_the_latest_version_and_wins(log: LogBuilder) -> None:
    simple_log(log, 4)  # published 0..3
    log.commit(4, [add("published-but-not-ratified", 1)])
    log.write("_staged_commits/00000000000000000003.u3.json", ndjson([commit_info(), add("from-catalog-3", 33)]))
    log.write("_staged_commits/00000000000000000004.u4.json", ndjson([commit_info(), add("from-catalog-4", 44)]))
    tail = [
        CatalogCommit(3, "_staged_commits/00000000000000000003.u3.json", timestamp=1000),
        CatalogCommit(4, "_staged_commits/00000000000000000004.u4.json", timestamp=2000),
        CatalogCommit(5, inline_content=ndjson([commit_info(), add("inline-5", 55)]), timestamp=3000),
    ]
    snap = load_snapshot(ROOT, catalog_commits=tail, latest_ratified_version=5, now_ms=NOW)
    assert snap.version == 5
    assert files_of(snap) == {"a": 1, "b": 2, "f2": 2, "from-catalog-3": 33, "from-catalog-4": 44, "inline-5": 55}
    assert snap.commit_timestamps[5] == 3000 and snap.segment.published_version == 4
    capped = load_snapshot(ROOT, latest_ratified_version=3, now_ms=NOW)
    assert capped.version == 3 and "published-but-not-ratified" not in files_of(capped)


def test_deletion_vectors_make_distinct_logical_files(log: LogBuilder) -> None:
    log.commit(0, [protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), metadata(), add("p", 5)])
    log.commit(1, [remove("p", NOW), add("p", 5, dv=dv("dv1", 1))])
    log.commit(2, [remove("p", NOW, dv=dv("dv1", 1)), add("p", 5, dv=dv("dv2", None, storage_type="i"))])
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.active_file_keys() == {("p", "idv2")}
    tomb = set(zip(snap.tombstones.column("path").to_pylist(), snap.tombstones.column("dv_unique_id").to_pylist(), strict=True))
    assert tomb == {("p", None), ("p", "udv1@1")}


def test_tombstones_expire_after_deleted_file_retention(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata({"delta.deletedFileRetentionDuration": "interval 2 days"}), add("a"), add("b"), add("c")])
    log.commit(1, [remove("a", NOW - 3 * DAY), remove("b", NOW - DAY), remove("c")])
    snap = load_snapshot(ROOT, now_ms=NOW)
    assert snap.tombstones.column("path").to_pylist() == ["b"]  # missing timestamp counts as 0: expired


def test_txns_and_domain_metadata_reconcile(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(), {"txn": {"appId": "app", "version": 1}}, {"domainMetadata": {"domain": "d1", "configuration": "x", "removed": False}}])
    log.commit(1, [{"txn": {"appId": "app", "version": 2, "lastUpdated": 5}}, {"domainMetadata": {"domain": "d1", "configuration": "x", "removed": True}},
                   {"domainMetadata": {"domain": "d2", "configuration": "y", "removed": False}}])
    snap = load_snapshot(ROOT)
    assert snap.txns["app"].version == 2 and set(snap.domain_metadata) == {"d2"}


def test_latest_protocol_and_metadata_win(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata({"k": "1"})])
    log.commit(1, [protocol(1, 4), metadata({"k": "2"}, table_id="tbl-1")])
    snap = load_snapshot(ROOT)
    assert snap.protocol.min_writer_version == 4 and snap.metadata.configuration == {"k": "2"}


def test_commit_timestamps_use_ict_where_enabled_and_mtime_before(log: LogBuilder) -> None:
    log.commit(0, [commit_info(), protocol(1, 7, None, ["inCommitTimestamp"]), metadata()], mtime_ms=10_000)
    log.commit(1, [commit_info(), add("a")], mtime_ms=20_000)
    conf = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "2", "delta.inCommitTimestampEnablementTimestamp": "25000"}
    log.commit(2, [commit_info(25_000), metadata(conf)], mtime_ms=90_000)
    log.commit(3, [commit_info(26_000), add("b")], mtime_ms=80_000)
    snap = load_snapshot(ROOT)
    assert dict(snap.commit_timestamps) == {0: 10_000, 1: 20_000, 2: 25_000, 3: 26_000}
    assert snap.timestamp == 26_000


def test_oddly_formatted_file_action_lines_are_still_read(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(partition_columns=["p"])])
    body = json.dumps({"add": {"path": "x", "size": 3, "partitionValues": {"p": "1"}, "modificationTime": 1, "dataChange": True}}, indent=None, separators=(", ", " : "))
    log.write("00000000000000000001.json", (body + "\n").encode())
    snap = load_snapshot(ROOT)
    assert files_of(snap) == {"x": 3}
    assert snap.files.column("partitionValues").to_pylist() == [[("p", "1")]]


def test_partition_values_keep_nulls_and_tags_drop_absent_keys(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata(partition_columns=["p", "q"])])
    log.commit(1, [add("x", partition_values={"p": "1", "q": None}, tags={"t": "v"}), add("y", partition_values={"p": "2", "q": "z"})])
    snap = load_snapshot(ROOT)
    rows = {r["path"]: r for r in snap.files.select(["path", "partitionValues", "tags"]).to_pylist()}
    assert rows["x"]["partitionValues"] == [("p", "1"), ("q", None)] and rows["x"]["tags"] == [("t", "v")]
    assert (rows["y"]["partitionValues"] == [("p", "2"), ("q", "z")] and rows["y"]["tags"] is None) or rows["y"]["tags"] == []


def test_unknown_files_in_the_log_do_not_change_the_state(log: LogBuilder) -> None:
    simple_log(log, 3)
    before = files_of(load_snapshot(ROOT, now_ms=NOW))
    log.write(".00000000000000000003.json.tmp", b"junk")
    log.write("00000000000000000003.json.crc", b"junk")
    log.write("README", b"junk")
    log.write("_staged_commits/00000000000000000003.uuid.json", ndjson([add("staged-only")]))
    assert files_of(load_snapshot(ROOT, now_ms=NOW)) == before
