"""``load_table_state``: the same protocol, metadata, properties and timestamp as ``load_snapshot``,
from far fewer bytes (no file-action columns of a checkpoint, no sidecars, commits only until both
actions are found)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog import errors as E
from airflow_delta_maintenance.deltalog.cleanup.plan import plan_log_cleanup
from airflow_delta_maintenance.deltalog.log_segment.segment import CatalogCommit
from airflow_delta_maintenance.deltalog.model import action_types as cs
from airflow_delta_maintenance.deltalog.model.paths import classic_checkpoint_name, compaction_name
from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot, load_snapshot
from airflow_delta_maintenance.deltalog.replay.table_state import TableState, load_table_state
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, ndjson, protocol, remove

ROOT = "memory://tbl"
NOW = 1_800_000_000_000
V2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def assert_same(state: TableState, snap: Snapshot) -> None:
    assert state.version == snap.version
    assert state.protocol == snap.protocol
    assert state.metadata == snap.metadata
    assert state.properties == snap.properties
    assert state.timestamp == snap.timestamp
    assert state.segment == snap.segment
    assert state.checkpoint_version == snap.checkpoint_version
    assert state.latest_checkpoint_version == snap.latest_checkpoint_version
    assert state.in_commit_timestamps_enabled == snap.in_commit_timestamps_enabled


def assert_same_at_every_version(latest: int, **kwargs: object) -> None:
    for v in [None, *range(latest + 1)]:
        assert_same(load_table_state(ROOT, v, now_ms=NOW, **kwargs), load_snapshot(ROOT, v, now_ms=NOW, **kwargs))  # type: ignore[arg-type]


class CountingFS(MemoryFileSystem):
    """A memory filesystem that records every file it opens or reads whole, and the bytes read."""

    opened: ClassVar[list[str]] = []
    bytes_read = 0

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: object) -> bytes:
        CountingFS.opened.append(path)
        data = super().cat_file(path, start, end, **kwargs)
        CountingFS.bytes_read += len(data)
        return data

    def _open(self, path: str, mode: str = "rb", **kwargs: object):  # type: ignore[no-untyped-def]
        f = super()._open(path, mode, **kwargs)
        if "r" in mode:
            CountingFS.opened.append(path)
            read = f.read

            def counted(n: int = -1) -> bytes:
                data = read(n)
                CountingFS.bytes_read += len(data)
                return data

            f.read = counted
        return f


@pytest.fixture
def counting(memfs: MemoryFileSystem) -> Callable[[], LogStore]:
    CountingFS.opened, CountingFS.bytes_read = [], 0

    def store() -> LogStore:
        CountingFS.opened, CountingFS.bytes_read = [], 0
        return LogStore(CountingFS(skip_instance_cache=True), "/tbl", uri=ROOT)

    return store


def simple_log(log: LogBuilder, versions: int = 6) -> None:
    log.commit(0, [commit_info(), protocol(), metadata({"delta.checkpointInterval": "3"}), add("a", 1)], mtime_ms=1000)
    for v in range(1, versions):
        log.commit(v, [commit_info(), add(f"f{v}", v), remove(f"f{v - 1}", NOW) if v > 1 else add("b", 2)], mtime_ms=1000 + v)


def test_commits_only_and_with_a_checkpoint(log: LogBuilder) -> None:
    simple_log(log)
    assert_same_at_every_version(5)
    log.checkpoint(3, [protocol(), metadata({"delta.checkpointInterval": "3"}), add("a", 1), add("b", 2), add("f3", 3)])
    assert_same_at_every_version(5)
    state = load_table_state(ROOT)
    assert state.properties.checkpoint_interval == 3 and state.checkpoint_version == 3


def test_newest_protocol_and_metadata_win_across_commits_and_checkpoint(log: LogBuilder) -> None:
    log.commit(0, [protocol(), metadata({"k": "0"})])
    log.commit(1, [add("a")])
    log.checkpoint(1, [protocol(), metadata({"k": "0"}), add("a")])
    log.commit(2, [metadata({"k": "2"})])  # metadata in a commit, protocol only in the checkpoint
    log.commit(3, [add("b")])
    log.commit(4, [protocol(1, 4), add("c")])
    log.commit(5, [metadata({"k": "5a"})])
    assert_same_at_every_version(5)
    assert load_table_state(ROOT).metadata.configuration == {"k": "5a"}
    assert load_table_state(ROOT, 3).protocol.min_writer_version == 2
    log.commit(6, [metadata({"k": "6a"}), metadata({"k": "6b"})])  # two in one commit: no reader may pick one
    for load in (load_table_state, load_snapshot):
        with pytest.raises(E.CorruptLogError, match=r"00000000000000000006\.json: line 2: holds more than one metaData"):
            load(ROOT)


def test_multipart_checkpoint_with_actions_in_any_part(log: LogBuilder) -> None:
    simple_log(log, 4)
    log.checkpoint(2, [add("a", 1), add("b", 2), protocol(1, 3), metadata({"x": "y"}), add("f2", 2)], parts=3)
    for v in range(3):
        log.fs.rm(f"/tbl/_delta_log/{v:020d}.json")
    assert_same(load_table_state(ROOT, now_ms=NOW), load_snapshot(ROOT, now_ms=NOW))
    assert load_table_state(ROOT).metadata.configuration == {"x": "y"}


def test_v2_checkpoint_never_opens_sidecars(log: LogBuilder, counting: Callable[[], LogStore]) -> None:
    conf = {"delta.checkpointPolicy": "v2"}
    log.commit(0, [V2, metadata(conf), add("a", 1)])
    log.commit(1, [add("b", 2)])
    side = log.sidecar("00000000000000000001.checkpoint.0000000001.0000000001.s1.parquet", [add("a", 1), add("b", 2)])
    log.checkpoint(1, [V2, metadata(conf), {"checkpointMetadata": {"version": 1}}, side], uuid="u1")
    log.commit(2, [add("c", 3)])
    assert_same_at_every_version(2)
    state = load_table_state(counting(), now_ms=NOW)
    assert state.checkpoint_version == 1
    assert not [p for p in CountingFS.opened if "_sidecars" in p]
    # and it does not need them: with a sidecar gone the snapshot falls back past the unreadable
    # checkpoint to the commits; the state reads the same protocol and metadata
    log.fs.rm("/tbl/_delta_log/_sidecars/00000000000000000001.checkpoint.0000000001.0000000001.s1.parquet")
    assert load_snapshot(ROOT).checkpoint_version == -1
    assert load_table_state(ROOT).protocol == state.protocol


def test_v2_json_checkpoint(log: LogBuilder) -> None:
    log.commit(0, [V2, metadata(), add("a", 1)])
    log.commit(1, [add("b", 2)])
    log.checkpoint(1, [{"checkpointMetadata": {"version": 1}}, V2, metadata({"k": "v"}), add("a", 1), add("b", 2)], uuid="u2", fmt="json")
    log.fs.rm("/tbl/_delta_log/00000000000000000000.json")
    assert_same(load_table_state(ROOT, now_ms=NOW), load_snapshot(ROOT, now_ms=NOW))


def test_compactions_and_catalog_tail(log: LogBuilder) -> None:
    simple_log(log, 8)
    # compactions written right after their windows (an old window is replayed from its commits)
    log.write(compaction_name(1, 3), ndjson([add("b", 2), add("f3", 3), remove("f1", NOW), remove("f2", NOW)]), mtime_ms=1010)
    log.write(compaction_name(4, 6), ndjson([metadata({"from": "compaction"}), add("f6", 6), remove("f3", NOW), remove("f4", NOW), remove("f5", NOW)]), mtime_ms=1010)
    log.commit(6, [commit_info(), metadata({"from": "compaction"}), add("f6", 6), remove("f5", NOW)], mtime_ms=1006)
    assert_same_at_every_version(7)
    assert [(d.version, d.end_version) for d in load_table_state(ROOT).segment.deltas] == [(0, 0), (1, 3), (4, 6), (7, 7)]
    log.commit(8, [add("published-but-not-ratified", 1)])
    log.write("_staged_commits/00000000000000000008.u8.json", ndjson([commit_info(), metadata({"from": "catalog"})]))
    tail = [
        CatalogCommit(8, "_staged_commits/00000000000000000008.u8.json", timestamp=1000),
        CatalogCommit(9, inline_content=ndjson([commit_info(), protocol(1, 4), add("inline-9", 9)]), timestamp=3000),
    ]
    assert_same_at_every_version(9, catalog_commits=tail, latest_ratified_version=9)
    state = load_table_state(ROOT, catalog_commits=tail, latest_ratified_version=9)
    assert state.version == 9 and state.timestamp == 3000 and state.metadata.configuration == {"from": "catalog"}
    assert state.protocol.min_writer_version == 4
    capped = load_table_state(ROOT, latest_ratified_version=7)
    assert capped.version == 7 and capped.metadata.configuration == {"from": "compaction"}


def test_timestamps_use_ict_where_enabled(log: LogBuilder) -> None:
    log.commit(0, [commit_info(), protocol(1, 7, None, ["inCommitTimestamp"]), metadata()], mtime_ms=10_000)
    log.commit(1, [commit_info(), add("a")], mtime_ms=20_000)
    conf = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "2", "delta.inCommitTimestampEnablementTimestamp": "25000"}
    log.commit(2, [commit_info(25_000), metadata(conf)], mtime_ms=90_000)
    log.commit(3, [commit_info(26_000), add("b")], mtime_ms=80_000)
    log.checkpoint(3, [protocol(1, 7, None, ["inCommitTimestamp"]), metadata(conf), add("a"), add("b")])
    assert_same_at_every_version(3)
    state = load_table_state(ROOT)
    assert state.timestamp == 26_000 and state.ict_enablement_version == 2 and load_table_state(ROOT, 1).timestamp == 20_000


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda log: log.commit(0, [protocol(), add("a")]), E.ProtocolViolationError),
        (lambda log: log.commit(0, [metadata(), add("a")]), E.ProtocolViolationError),
        (lambda log: log.commit(0, [protocol(3, 7, ["futureFeature"], []), metadata()]), E.UnsupportedFeatureError),
        (lambda log: (log.commit(0, [protocol(), metadata()]), log.commit(2, [add("a")])), E.MissingCommitError),
        (lambda log: log.write("00000000000000000000.json", b'{"protocol": {"minReaderVersion": 1, "minWr'), E.CorruptLogError),
        (lambda log: log.write("00000000000000000000.json", b'{"protocol": {"minWriterVersion": 2}}\n'), E.CorruptLogError),
        (lambda log: log.write("README", b"x"), E.TableNotFoundError),
        (lambda log: log.checkpoint(0, [add("a")]), E.ProtocolViolationError),
    ],
    ids=["no-metadata", "no-protocol", "unsupported", "gap", "truncated", "malformed-protocol", "empty-log", "checkpoint-without-pm"],
)
def test_refuses_what_load_snapshot_refuses(log: LogBuilder, build: Callable[[LogBuilder], object], error: type[E.DeltaLogError]) -> None:
    build(log)
    with pytest.raises(error):
        load_snapshot(ROOT)
    with pytest.raises(error) as refused:
        load_table_state(ROOT)
    assert refused.type is error and refused.value.path


def test_a_big_checkpoint_is_read_by_column_projection_only(log: LogBuilder, counting: Callable[[], LogStore]) -> None:
    """The add column of a checkpoint is never read: a 60,000-file checkpoint costs its footer and
    the protocol/metaData chunks, and row groups whose statistics say "no protocol" are skipped."""
    n = 60_000
    adds = pa.array([{"path": f"part-{i:06d}-{'x' * 40}.parquet", "partitionValues": [], "size": i, "modificationTime": 1, "dataChange": False} for i in range(n)], cs.ADD_TYPE)
    rows = n + 2
    columns = {
        "protocol": pa.array([{"minReaderVersion": 1, "minWriterVersion": 2}] + [None] * (rows - 1), cs.PROTOCOL_TYPE),
        "metaData": pa.array(
            [None, {"id": "t", "format": {"provider": "parquet", "options": []}, "schemaString": '{"type":"struct","fields":[]}', "partitionColumns": [], "configuration": [("k", "v")]}]
            + [None] * (rows - 2),
            cs.METADATA_TYPE,
        ),
        "add": pa.concat_arrays([pa.nulls(2, cs.ADD_TYPE), adds]),
    }
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink, row_group_size=10_000)
    data = sink.getvalue().to_pybytes()
    log.write(classic_checkpoint_name(5), data)
    log.commit(6, [commit_info(), add("new")])
    state = load_table_state(counting(), now_ms=NOW)
    assert state.metadata.configuration == {"k": "v"} and state.protocol.min_writer_version == 2
    assert CountingFS.bytes_read < len(data) / 10, (CountingFS.bytes_read, len(data))
    assert state.bytes_read < len(data) / 10
    snap_store = counting()
    assert_same(load_table_state(ROOT, now_ms=NOW), load_snapshot(snap_store, now_ms=NOW))
    assert CountingFS.bytes_read >= len(data)  # the full replay reads it all


def test_commits_are_read_newest_first_and_only_until_both_actions_are_found(log: LogBuilder, counting: Callable[[], LogStore]) -> None:
    log.commit(0, [protocol(), metadata()])
    for v in range(1, 20):
        log.commit(v, [commit_info(), add(f"f{v}")])
    log.commit(20, [commit_info(), protocol(1, 3), metadata({"k": "20"})])
    log.commit(21, [commit_info(), add("g")])
    load_table_state(counting())
    assert [p.rsplit("/", 1)[-1] for p in CountingFS.opened] == ["00000000000000000021.json", "00000000000000000020.json"]


def test_cleanup_plans_the_same_from_the_state(log: LogBuilder) -> None:
    day = 86_400_000
    log.commit(0, [commit_info(), protocol(), metadata({"delta.logRetentionDuration": "interval 2 days"})], mtime_ms=NOW - 10 * day)
    for v in range(1, 6):
        log.commit(v, [commit_info(), add(f"f{v}")], mtime_ms=NOW - (10 - v) * day)
    log.checkpoint(4, [protocol(), metadata({"delta.logRetentionDuration": "interval 2 days"})], mtime_ms=NOW - 6 * day)
    store = open_table_storage(ROOT)
    from_state = plan_log_cleanup(store, load_table_state(store, now_ms=NOW), now_ms=NOW)
    from_snapshot = plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW)
    assert from_state == from_snapshot and from_state.cutoff_checkpoint == 4 and from_state.counts["commits"] == 4


@pytest.mark.slow  # 1.1 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_referenced_sidecars_read_only_the_sidecar_column(log: LogBuilder, counting: Callable[[], LogStore]) -> None:
    from airflow_delta_maintenance.deltalog.cleanup.plan import _referenced_sidecars
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
    from airflow_delta_maintenance.deltalog.replay.table_state import referenced_sidecar_names

    conf = {"delta.checkpointPolicy": "v2"}
    log.commit(0, [V2, metadata(conf), add("a", 1)])
    s1 = log.sidecar("00000000000000000000.checkpoint.0000000001.0000000001.s1.parquet", [add("a", 1)])
    s2 = log.sidecar("s2.parquet", [add("a", 1)])
    big = [add(f"inline-{i:05d}-{'y' * 60}", i) for i in range(20_000)]
    log.checkpoint(0, [V2, metadata(conf), {"checkpointMetadata": {"version": 0}}, s1, *big], uuid="u1")
    log.checkpoint(0, [{"checkpointMetadata": {"version": 0}}, V2, metadata(conf), s2], uuid="u2", fmt="json")
    log.checkpoint(0, [V2, metadata(conf), add("a", 1)], parts=2)
    store = counting()
    checkpoints = list_log_files(store).checkpoints
    expected = _referenced_sidecars(open_table_storage(ROOT), checkpoints)
    assert expected == {"00000000000000000000.checkpoint.0000000001.0000000001.s1.parquet", "s2.parquet"}
    CountingFS.opened, CountingFS.bytes_read = [], 0
    assert referenced_sidecar_names(store, checkpoints) == expected
    parquet = next(c for c in checkpoints if c.name.endswith("u1.parquet"))
    # the footer read (pyarrow reads the last 64 KiB at once) and the sidecar column, not the adds
    assert CountingFS.bytes_read < parquet.size / 3, (CountingFS.bytes_read, parquet.size)
    assert not [p for p in CountingFS.opened if "_sidecars" in p]


def test_a_checkpoint_swapped_for_a_link_after_the_listing_is_not_followed(tmp_path: Path) -> None:
    """The listing refuses links, but a checkpoint replaced by one between the LIST and the read
    was followed by the Parquet reads (``fs.open``): table state and checkpoint verification."""
    from fsspec.implementations.local import LocalFileSystem

    from airflow_delta_maintenance.deltalog.checkpoint.check import verify_checkpoint
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files

    local = LogBuilder(LocalFileSystem(), str(tmp_path / "t"))
    simple_log(local, 4)
    local.checkpoint(3, [protocol(), metadata({"delta.checkpointInterval": "3"}), add("a", 1), add("b", 2), add("f3", 3)])
    store = open_table_storage(str(tmp_path / "t"))
    files = list_log_files(store)
    cp = tmp_path / "t" / "_delta_log" / classic_checkpoint_name(3)
    outside = tmp_path / "outside.parquet"
    cp.rename(outside)
    cp.symlink_to(outside)
    with pytest.raises(E.SymlinkInLogError):
        load_table_state(store, 3, files=files)
    with pytest.raises(E.SymlinkInLogError):
        verify_checkpoint(store, files.complete_checkpoints()[-1])


def test_files_removed_after_the_listing_by_a_concurrent_cleanup_are_listed_again(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    """A publish read version 5 from a listing; meanwhile a checkpoint at 4 appeared and a cleanup
    removed the commits below it (CI: ``FileNotFoundError: .../00000000000000000023.json``)."""
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files

    simple_log(log)
    store = open_table_storage(ROOT)
    stale = list_log_files(store)
    log.checkpoint(4, [protocol(), metadata({"delta.checkpointInterval": "4"}), add("a", 1), add("b", 2)])
    for v in range(4):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    state = load_table_state(store, 5, files=stale, now_ms=NOW)
    assert state.version == 5 and state.checkpoint_version == 4 and state.properties.checkpoint_interval == 4
    # a file that keeps vanishing, listing after listing: one typed line, not a bare FileNotFoundError
    real = LogStore.read_into

    def gone(self: LogStore, name: str, scratch: bytearray) -> memoryview:
        if name.endswith(f"{5:020d}.json"):
            raise FileNotFoundError(name)
        return real(self, name, scratch)

    import unittest.mock

    with unittest.mock.patch.object(LogStore, "read_into", gone), pytest.raises(E.MissingCommitError, match="vanished while version 5 was read"):
        load_table_state(store, 5, files=stale, now_ms=NOW)


def test_a_snapshot_from_a_listing_a_concurrent_cleanup_outdated_is_read_from_a_fresh_one(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    """The sibling of the table-state case: the full replay (a checkpoint's input) lists again."""
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files

    simple_log(log)
    store = open_table_storage(ROOT)
    expected = load_snapshot(store, 5, now_ms=NOW).active_file_keys()
    stale = list_log_files(store)
    log.checkpoint(4, [protocol(), metadata({"delta.checkpointInterval": "3"}), add("a", 1), add("b", 2), add("f4", 4)])
    for v in range(4):
        memfs.rm(f"/tbl/_delta_log/{v:020d}.json")
    snap = load_snapshot(store, 5, files=stale, now_ms=NOW)
    assert snap.version == 5 and snap.checkpoint_version == 4 and snap.active_file_keys() == expected
    memfs.rm(f"/tbl/_delta_log/{4:020d}.checkpoint.parquet")  # now truly missing: a typed error, not a retry loop
    with pytest.raises(E.DeltaLogError):
        load_snapshot(store, 5, files=stale, now_ms=NOW)


def non_file_state(store: LogStore, version: int | None = None) -> tuple:
    """Fold ``segment_non_file_actions`` of the snapshot's segment (as the Spark checkpoint job
    does) next to the snapshot's own protocol, metadata, txns and live domains."""
    from airflow_delta_maintenance.deltalog.model.actions import NonFileState
    from airflow_delta_maintenance.deltalog.replay.table_state import segment_non_file_actions

    snap = load_snapshot(store, version, now_ms=NOW)
    state = NonFileState()
    for _, action in segment_non_file_actions(store, snap.segment):
        assert state.take(action)
    got = (state.protocol, state.metadata, state.txns, {k: v for k, v in state.domains.items() if not v.removed})
    return got, (snap.protocol, snap.metadata, dict(snap.txns), dict(snap.domain_metadata))


def test_segment_non_file_actions_fold_to_the_snapshots_state(log: LogBuilder) -> None:
    """Protocol, metadata, txns and live domains from the checkpoint's columns plus the commits'
    non-file lines equal the full replay's, with a Parquet and a multi-part checkpoint."""
    txn = lambda app, v: {"txn": {"appId": app, "version": v, "lastUpdated": NOW}}  # noqa: E731
    dom = lambda d, c, removed=False: {"domainMetadata": {"domain": d, "configuration": c, "removed": removed}}  # noqa: E731
    log.commit(0, [protocol(), metadata({"k": "0"}), txn("a", 1), dom("d1", "x"), add("f0")])
    log.commit(1, [txn("b", 1), add("f1"), dom("d2", "y")])
    log.checkpoint(1, [protocol(), metadata({"k": "0"}), txn("a", 1), txn("b", 1), dom("d1", "x"), dom("d2", "y"), add("f0"), add("f1")], parts=2)
    log.commit(2, [txn("a", 2), dom("d1", "x", removed=True), metadata({"k": "2"}), add("f2")])
    log.commit(3, [protocol(1, 4), add("f3"), txn("c", 7)])
    store = open_table_storage(ROOT)
    for v in range(4):
        got, want = non_file_state(store, v)
        assert got == want, v
    assert non_file_state(store)[0][2]["a"].version == 2


def test_segment_non_file_actions_skip_file_lines_and_name_a_bad_line(log: LogBuilder) -> None:
    """``add``/``remove`` lines are not parsed (a broken one is the replay's to refuse); a broken
    non-file line is a CorruptLogError naming its file and line."""
    from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
    from airflow_delta_maintenance.deltalog.log_segment.segment import build_log_segment
    from airflow_delta_maintenance.deltalog.replay.table_state import segment_non_file_actions

    log.commit(0, [protocol(), metadata()])
    log.write(f"{1:020d}.json", b'{"add": {"path": broken\n{"txn": {"appId": "a", "version": 3, "lastUpdated": 1}}\n')
    store = open_table_storage(ROOT)
    segment = build_log_segment(list_log_files(store), table=store.uri)
    assert [(v, next(iter(a))) for v, a in segment_non_file_actions(store, segment)] == [(0, "protocol"), (0, "metaData"), (1, "txn")]
    log.write(f"{2:020d}.json", b'{"add": {"path": "x"}}\n{"txn": {"appId": \n')
    segment = build_log_segment(list_log_files(store), table=store.uri)
    with pytest.raises(E.CorruptLogError, match=r"00000000000000000002\.json: line 2 is not valid JSON"):
        list(segment_non_file_actions(store, segment))
