"""Metadata cleanup plans on synthetic logs with explicit mtimes and a frozen clock."""

from __future__ import annotations

import time

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from airflow_delta_maintenance.deltalog.cleanup.plan import adjusted_commit_timestamps, execute_cleanup, plan_log_cleanup, utc_midnight
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.model.paths import parse_log_path
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, ndjson, protocol

ROOT = "memory://tbl"
DAY = 86_400_000
NOW = utc_midnight(1_800_000_000_000) + 15 * 3_600_000  # 15:00 UTC
RET = {"delta.logRetentionDuration": "interval 10 days"}


@pytest.fixture
def log(memfs: MemoryFileSystem) -> LogBuilder:
    return LogBuilder(memfs, "/tbl")


def daily_log(log: LogBuilder, versions: int, conf: dict[str, str] | None = None, proto: dict | None = None, ict: bool = False) -> None:
    """Version v committed (days_ago = versions - v) days before NOW."""
    for v in range(versions):
        ts = NOW - (versions - v) * DAY
        actions = [commit_info(ts if ict else None)]
        if v == 0:
            actions += [proto or protocol(), metadata(conf if conf is not None else RET)]
        actions.append(add(f"f{v}"))
        log.commit(v, actions, mtime_ms=ts)


def checkpoint_at(log: LogBuilder, v: int, mtime_ms: int | None = None, conf: dict[str, str] | None = None, proto: dict | None = None) -> None:
    log.checkpoint(v, [proto or protocol(), metadata(conf if conf is not None else RET), *[add(f"f{i}") for i in range(v + 1)]], mtime_ms=mtime_ms)


def plan(**kw):
    store = open_table_storage(ROOT)
    return store, plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW, **kw)


def test_cleanup_never_deletes_without_an_anchor_checkpoint(log: LogBuilder) -> None:
    daily_log(log, 30)
    _, p = plan()
    assert p.skip_reason == "no complete checkpoint at or before the cutoff commit" and p.paths == []


def test_protocol_algorithm_keeps_the_cutoff_checkpoint_and_its_commit(log: LogBuilder) -> None:
    daily_log(log, 30)  # versions 0..29, version v is (30 - v) days old
    for cp in (5, 15, 25):
        checkpoint_at(log, cp)
    log.write("00000000000000000003.crc", b"{}")
    log.write("00000000000000000015.crc", b"{}")
    log.write("00000000000000000001.00000000000000000004.compacted.json", ndjson([add("f1")]))
    log.write("00000000000000000015.00000000000000000018.compacted.json", ndjson([add("f16")]))
    log.write("_last_checkpoint", LastCheckpointHint(version=25, size=1).to_json_bytes())
    store, p = plan()
    # cutoff = midnight of NOW - 10 days; version 20 is exactly 10 days old at 15:00 → after the cutoff
    assert p.cutoff_timestamp == utc_midnight(NOW - 10 * DAY)
    assert p.cutoff_commit == 19 and p.cutoff_checkpoint == 15
    deleted = set(p.paths)
    assert {f"{v:020d}.json" for v in range(15)} <= deleted and f"{15:020d}.json" not in deleted
    assert f"{5:020d}.checkpoint.parquet" in deleted and f"{15:020d}.checkpoint.parquet" not in deleted
    assert "00000000000000000003.crc" in deleted and "00000000000000000015.crc" not in deleted
    assert "00000000000000000001.00000000000000000004.compacted.json" in deleted
    assert "00000000000000000015.00000000000000000018.compacted.json" in deleted  # start <= cutOffCheckpoint
    kinds = [d.kind for d in p.deletions]
    assert kinds.index("checkpoint_classic") > max(i for i, k in enumerate(kinds) if k == "commit")  # commits first
    before = {v: load_snapshot(store, v, now_ms=NOW).active_file_keys() for v in range(15, 30)}
    dry = execute_cleanup(store, p)
    assert dry.dry_run and dry.deleted == 0 and len(list_log_files(store).commits) == 30
    done = execute_cleanup(store, p, dry_run=False)
    assert done.deleted == len(p.deletions)
    for v, keys in before.items():  # every version inside retention still reads the same
        assert load_snapshot(store, v, now_ms=NOW).active_file_keys() == keys
    # re-running converges: nothing left to delete below the anchor
    _, again = plan()
    assert again.paths == [] and again.cutoff_checkpoint == 15


def test_buffering_iterator_example_adjusts_mtimes() -> None:
    commits = [parse_log_path(f"{v:020d}.json", 1, mtime) for v, mtime in enumerate([0, 5, 10, 7, 8, 14])]
    assert list(adjusted_commit_timestamps(commits).values()) == [0, 5, 10, 11, 12, 14]


def test_non_monotonic_mtimes_never_move_the_cutoff_past_a_newer_version(log: LogBuilder) -> None:
    daily_log(log, 30)
    checkpoint_at(log, 5)
    checkpoint_at(log, 15)
    # version 12 got an old mtime (e.g. copied): adjusted, it cannot be older than version 11
    log.set_mtime(f"{12:020d}.json", NOW - 40 * DAY)
    _, p = plan()
    assert p.cutoff_commit == 19 and p.cutoff_checkpoint == 15


def test_in_commit_timestamps_decide_for_ict_era_versions(log: LogBuilder, memfs: MemoryFileSystem) -> None:
    conf = dict(RET, **{"delta.enableInCommitTimestamps": "true"})
    proto = protocol(1, 7, None, ["inCommitTimestamp"])
    daily_log(log, 30, conf=conf, proto=proto, ict=True)
    checkpoint_at(log, 15, conf=conf, proto=proto)
    for v in range(30):  # publishing rewrote every mtime to "now": only ICT tells the real age
        log.set_mtime(f"{v:020d}.json", NOW - 1000)
    _, p = plan()
    assert p.cutoff_commit == 19 and p.cutoff_checkpoint == 15


def test_incomplete_multipart_checkpoint_is_not_an_anchor(log: LogBuilder) -> None:
    daily_log(log, 30)
    checkpoint_at(log, 5)
    log.checkpoint(15, [protocol(), metadata(RET), *[add(f"f{i}") for i in range(16)]], parts=2, write_parts=[1])
    _, p = plan()
    assert p.cutoff_checkpoint == 5


@pytest.mark.parametrize(
    ("conf", "proto", "reason"),
    [
        (dict(RET, **{"delta.enableExpiredLogCleanup": "false"}), None, "enableExpiredLogCleanup"),
        (RET, protocol(3, 7, ["catalogManaged"], ["catalogManaged", "inCommitTimestamp"]), "catalog-managed"),
        (dict(RET, **{"delta.requireCheckpointProtectionBeforeVersion": "3"}), protocol(1, 7, None, ["checkpointProtection"]), "checkpointProtection"),
    ],
)
def test_gates_skip_with_a_reason(log: LogBuilder, conf: dict, proto: dict | None, reason: str) -> None:
    daily_log(log, 30, conf=conf, proto=proto)
    checkpoint_at(log, 15, conf=conf, proto=proto)
    _, p = plan()
    assert p.skipped and reason in p.skip_reason and p.paths == []


def test_catalog_permission_lifts_the_catalog_gate(log: LogBuilder) -> None:
    proto = protocol(3, 7, ["catalogManaged"], ["catalogManaged", "inCommitTimestamp"])
    daily_log(log, 30, proto=proto)
    checkpoint_at(log, 15, proto=proto)
    _, p = plan(catalog_permits_cleanup=True)
    assert p.cutoff_checkpoint == 15


def test_staged_commits_above_the_published_version_are_never_deleted(log: LogBuilder) -> None:
    daily_log(log, 30)
    checkpoint_at(log, 15)
    log.write("_staged_commits/00000000000000000010.a.json", b"{}\n", mtime_ms=NOW - 20 * DAY)
    log.write("_commits/00000000000000000011.b.json", b"{}\n", mtime_ms=NOW - 20 * DAY)
    log.write("_staged_commits/00000000000000000030.c.json", b"{}\n", mtime_ms=NOW - 20 * DAY)
    _, p = plan(latest_published_version=12)
    assert "_staged_commits/00000000000000000010.a.json" in p.paths
    assert "_commits/00000000000000000011.b.json" in p.paths
    assert all("00000000000000000030" not in n for n in p.paths)
    _, p = plan(latest_published_version=10)
    assert "_commits/00000000000000000011.b.json" not in p.paths


def test_only_unreferenced_old_sidecars_are_deleted(log: LogBuilder) -> None:
    v2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
    conf = dict(RET, **{"delta.checkpointPolicy": "v2"})
    daily_log(log, 30, conf=conf, proto=v2)
    used = log.sidecar("used.parquet", [add(f"f{i}") for i in range(16)])
    log.checkpoint(15, [{"checkpointMetadata": {"version": 15}}, v2, metadata(conf), used], uuid="u15")
    log.checkpoint(15, [{"checkpointMetadata": {"version": 15}}, v2, metadata(conf), *[add(f"f{i}") for i in range(16)]])  # classic-named V2
    log.sidecar("orphan-old.parquet", [add("x")])
    log.sidecar("orphan-new.parquet", [add("y")])
    real = int(time.time() * 1000)  # sidecar ages are storage mtimes against the real clock, never `now`
    log.set_mtime("_sidecars/orphan-old.parquet", real - 3 * DAY)
    log.set_mtime("_sidecars/orphan-new.parquet", real - 1000)  # younger than a day: may belong to a checkpoint in progress
    log.set_mtime("_sidecars/used.parquet", real - 3 * DAY)
    _, p = plan()
    sidecars = [n for n in p.paths if n.startswith("_sidecars/")]
    assert sidecars == ["_sidecars/orphan-old.parquet"]
