"""Publish verifies and copies a backlog in memory bounded whatever its size, with the same order,
verification and durability as before: every commit verified before the first copy, each copy
proven to hold the verified bytes, nothing reported early. Before: the whole backlog was held in
memory (~1 MiB of RSS per MiB pending), so a multi-GB backlog could never be published.

The limits are made small here so that a few MiB exercise every path; ``benchmarks/publish_backlog.py``
measures the real process at 50 MiB, 400 MiB and 2 GiB."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.replay import tail_check
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.errors import StagedCommitError
from airflow_delta_maintenance.maintenance.operations import publish_copy
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table import staged_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table

KIB = 1024


def actions(version: int, size: int) -> list[dict[str, Any]]:
    """About ``size`` bytes of add actions (lines of ~300 bytes, as a writer's adds with stats)."""
    stats = json.dumps({"numRecords": 100, "minValues": {"id": 1}, "maxValues": {"id": 100}, "nullCount": {"id": 0}})

    def one(i: int) -> dict[str, Any]:
        return {"add": {"path": f"v{version}/part-{i:06d}.parquet", "partitionValues": {"region": "x"}, "size": 1000 + i,
                        "modificationTime": 1, "dataChange": True, "stats": stats}}

    line = len(json.dumps(one(0), separators=(",", ":"))) + 1
    return [one(i) for i in range(max(1, size // line))]


def backlog(tmp_path: Path, sizes: list[int]) -> tuple[str, str, dict[int, bytes]]:
    """Version 0 and one ratified commit of each size (above the embedded coordinator's inline
    limit: the staged files are the only copies); returns the staged bytes by version."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    for v, size in enumerate(sizes, start=1):
        client.commit(uri, v, actions(v, size))
    staged = {c.version: (Path(uri) / "_delta_log" / c.file_name).read_bytes() for c in client.get_commits(uri).commits}
    return spec, uri, staged


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publish_copy, "KEEP_BYTES", 512 * KIB)
    monkeypatch.setattr(publish_copy, "WINDOW_BYTES", 256 * KIB)
    monkeypatch.setattr(publish_copy, "WHOLE_FILE_LIMIT", 384 * KIB)
    monkeypatch.setattr(staged_commits, "WHOLE_FILE_LIMIT", 384 * KIB)
    monkeypatch.setattr(staged_commits, "CHUNK", 64 * KIB)
    monkeypatch.setattr(tail_check, "_BATCH_BYTES", 256 * KIB)  # the strict validation's columnar batches, scaled down alike


def published_bytes(uri: str, version: int) -> bytes:
    return (Path(uri) / "_delta_log" / f"{version:020d}.json").read_bytes()


@pytest.mark.slow  # 18 MiB under tracemalloc (12 s CPU): make test runs it, the fast tier does not
def test_a_backlog_many_times_the_memory_budget_is_published_in_bounded_memory(tmp_path: Path, small_limits: None) -> None:
    """18 MiB pending: 40 commits of 300 KiB (read whole, most not kept) and 4 of 1.5 MiB (streamed);
    Python's allocations peak far below the backlog (before: above it)."""
    sizes = [300 * KIB] * 40 + [1536 * KIB] * 4
    spec, uri, staged = backlog(tmp_path, sizes)
    pending = sum(len(b) for b in staged.values())
    assert pending > 16 << 20
    with open_table(uri, coordinator=spec) as table:
        tracemalloc.start()
        try:
            result = publish_ratified_commits(table)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.published == list(range(1, 45)) and result.reported_version == 44 and result.bytes == pending
    assert all(published_bytes(uri, v) == data for v, data in staged.items())
    assert peak < 6 << 20, f"peak {peak / 2**20:.1f} MiB for {pending / 2**20:.1f} MiB pending"


@pytest.mark.parametrize("where", ["first", "kept", "re-read", "streamed"])
def test_an_altered_commit_anywhere_in_the_backlog_publishes_nothing(tmp_path: Path, small_limits: None, where: str) -> None:
    """Verified before the first copy: a bad line in the last commit still publishes nothing."""
    sizes = [300 * KIB] * 6 + [1536 * KIB]
    spec, uri, _ = backlog(tmp_path, sizes)
    version = {"first": 1, "kept": 2, "re-read": 5, "streamed": 7}[where]
    commit = next(c for c in open_coordinator(spec).get_commits(uri).commits if c.version == version)
    path = Path(uri) / "_delta_log" / commit.file_name
    data = bytearray(path.read_bytes())
    cut = data.index(b"\n", len(data) - 2000)
    data[cut + 1 : cut + 5] = b"!!!!"  # same size; the modification time is restored too
    stat = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with open_table(uri, coordinator=spec) as table, pytest.raises(StagedCommitError, match=f"ratified commit {version} is not JSON"):
        publish_ratified_commits(table)
    assert sorted(p.name for p in (Path(uri) / "_delta_log").glob("*.json")) == [f"{0:020d}.json"]
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == list(range(1, 8))


@pytest.mark.parametrize("version", [5, 7], ids=["re-read", "streamed"])
def test_a_staged_file_changed_between_verification_and_copy_is_never_published(
    tmp_path: Path, small_limits: None, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """The copy proves it copies the verified bytes: a file rewritten after the check stops the run
    at that version (the earlier ones are published and reported by the next run, as after a crash)."""
    sizes = [300 * KIB] * 6 + [1536 * KIB]
    spec, uri, staged = backlog(tmp_path, sizes)
    commit = next(c for c in open_coordinator(spec).get_commits(uri).commits if c.version == version)
    path = Path(uri) / "_delta_log" / commit.file_name
    real = publish_copy.verify_backlog

    tampered: list[bool] = []

    def verify_then_tamper(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if not tampered:  # once: the run after the repair publishes
            tampered.append(True)
            path.write_bytes(path.read_bytes().replace(b"part-000000", b"part-X00000", 1))
        return out

    monkeypatch.setattr("airflow_delta_maintenance.maintenance.operations.publish.verify_backlog", verify_then_tamper)
    with open_table(uri, coordinator=spec) as table, pytest.raises(StagedCommitError, match=f"version {version} changed"):
        publish_ratified_commits(table)
    log = sorted(int(p.name[:20]) for p in (Path(uri) / "_delta_log").glob("*.json"))
    assert log == list(range(version))  # nothing of the changed version, nothing after it
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == list(range(1, 8))  # nothing reported
    stat = path.stat()
    path.write_bytes(staged[version])  # repaired, with the time the coordinator recorded
    os.utime(path, ns=(stat.st_atime_ns, commit.file_modification_time * 1_000_000))
    with open_table(uri, coordinator=spec) as table:
        result = publish_ratified_commits(table)
    assert result.already_published == list(range(1, version)) and result.published[0] == version and result.reported_version == 7
    assert all(published_bytes(uri, v) == data for v, data in staged.items())


def test_a_streamed_commit_meeting_a_different_published_file_is_a_fork(tmp_path: Path, small_limits: None) -> None:
    spec, uri, staged = backlog(tmp_path, [300 * KIB, 1536 * KIB])
    (Path(uri) / "_delta_log" / f"{2:020d}.json").write_bytes(staged[2][:-10] + b"\n")
    with open_table(uri, coordinator=spec) as table, pytest.raises(Exception, match="forked at version 2"):
        publish_ratified_commits(table)
    (Path(uri) / "_delta_log" / f"{2:020d}.json").write_bytes(staged[2])  # identical: published by someone else
    with open_table(uri, coordinator=spec) as table:
        result = publish_ratified_commits(table)
    assert result.already_published == [1, 2] and result.reported_version == 2


def _accepts_as_json_loads_did(data: bytes) -> tuple[bool, Any]:
    """The rule before: every non-blank line parsed by ``json.loads`` on its bytes."""
    first = None
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except (ValueError, RecursionError):
            return False, None
        if not isinstance(action, dict) or len(action) != 1:
            return False, None
        first = first if first is not None else action
    return first is not None, first


LINES = [
    b'{"add":{"path":"a","size":1}}', b' {"add":{}}', b'{"add":{}} ', b'{"add":{}}\r', b'{"add":{}} x', b'{"a":1}{"b":2}',
    b"\xef\xbb\xbf{\"a\":1}", b'{"a":"\xff"}', b'{"a":"\xc3\xa9"}', b"[1]", b'{"a":1,"b":2}', b"", b"   ", b"\xc2\xa0",
    b'{"a":NaN}', b'{"a":Infinity}', b'{"a":1e400}', b'{"a":' * 3000 + b"1" + b"}" * 3000, b"\x00{}", b'{"a":"\\ud800"}',
    b'{"commitInfo":{"inCommitTimestamp":5}}', b'{"commitInfo":{"inCommitTimestamp":"5"}}', b"\t", b"\x0b", b'{"a":1}\x0c',
]


@pytest.mark.slow  # 1.6 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_line_rules_accept_exactly_what_json_loads_did() -> None:
    """The faster line parser (UTF-8 decoded once, ``raw_decode``) accepts and refuses what
    ``json.loads`` per line did, whole or fed in chunks of any size."""
    import itertools

    from airflow_delta_maintenance.coordinators.base import RatifiedCommit
    from airflow_delta_maintenance.deltalog.storage import open_table_storage
    from airflow_delta_maintenance.maintenance.table.staged_commits import _CommitLines

    store = open_table_storage("memory://lines")
    commit = RatifiedCommit(version=1, commit_timestamp=-1, file_name="x")
    for a, b in itertools.product(LINES, repeat=2):
        for data in (a + b"\n" + b, a + b"\n" + b + b"\n", a + b"\r\n" + b):
            ok, first = _accepts_as_json_loads_did(data)
            for chunk in (len(data) + 1, 1, 7):
                lines = _CommitLines(store, commit, "x")
                try:
                    if chunk > len(data):
                        lines.check(data)
                    else:
                        for i in range(0, len(data), chunk):
                            lines.feed(data[i : i + chunk])
                    lines.finish()
                    got = True
                except StagedCommitError:
                    got = False
                assert got == ok and (not ok or lines.first == first), (data[:80], chunk)


@pytest.mark.slow  # a large backlog under tracemalloc (5.6 s CPU): make test runs it, the fast tier does not
def test_status_and_cleanup_of_a_large_backlog_read_the_ratified_tail_in_bounded_memory(
    tmp_path: Path, small_limits: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ratified state (gates, retention, protocol) reads every pending commit: beyond a budget
    they are verified and handed to the reader by name, one in memory at a time. Before, a status
    or cleanup held the whole backlog too. A gate in the last commit is still obeyed."""
    from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
    from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
    from airflow_delta_maintenance.maintenance.operations.status import table_status
    from airflow_delta_maintenance.maintenance.table import catalog_view

    monkeypatch.setattr(catalog_view, "TAIL_KEEP_BYTES", 512 * KIB)
    spec, uri, staged = backlog(tmp_path, [300 * KIB] * 40 + [1536 * KIB] * 4)
    meta = load_snapshot(uri).metadata.to_dict()
    meta["configuration"] = {**meta["configuration"], "delta.enableExpiredLogCleanup": "false"}
    open_coordinator(spec).commit(uri, 45, [{"metaData": meta}])
    with open_table(uri, coordinator=spec) as table:
        tracemalloc.start()
        try:
            status = table_status(table)
            cleanup = run_metadata_cleanup(table, dry_run=False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert status.pending_versions == list(range(1, 46)) and status.cleanup_skipped_reason == "delta.enableExpiredLogCleanup is false"
    assert cleanup.plan.skip_reason == "delta.enableExpiredLogCleanup is false"
    assert peak < 6 << 20, f"peak {peak / 2**20:.1f} MiB for {sum(map(len, staged.values())) / 2**20:.1f} MiB pending"


@pytest.mark.parametrize(("where", "version"), [("kept", 2), ("re-read", 5), ("streamed", 7)])
def test_a_commit_no_reader_could_load_publishes_nothing_wherever_it_sits(tmp_path: Path, small_limits: None, where: str, version: int) -> None:
    """The one strict validation of log actions runs on every commit of the backlog before the first
    copy — from the bytes that were verified, and for a commit too large to hold from the chunks it
    is verified from: valid JSON whose last line adds the first line's path again (every reader
    refuses that version) is a typed error naming the file and line, and nothing is published."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    lines = 0
    for v, size in enumerate([300 * KIB] * 6 + [1536 * KIB], start=1):
        body = actions(v, size)
        if v == version:
            body.append({"add": {**body[0]["add"], "size": 7}})
            lines = len(body) + 1  # after the commitInfo line the coordinator adds
        client.commit(uri, v, body)
    with open_table(uri, coordinator=spec) as table, pytest.raises(CorruptLogError, match=f"adds path 'v{version}/part-000000.parquet' twice") as refused:
        publish_ratified_commits(table)
    assert "_staged_commits/" in str(refused.value) and f"line {lines}" in str(refused.value), str(refused.value)
    assert sorted(p.name for p in (Path(uri) / "_delta_log").glob("*.json")) == [f"{0:020d}.json"]
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == list(range(1, 8))


def test_a_staged_file_touched_after_ratification_is_named_with_its_times_for_a_person(tmp_path: Path) -> None:
    """The error gives both file times as ISO-8601 UTC (old code: raw epoch milliseconds)."""
    from airflow_delta_maintenance.coordinators.base import RatifiedCommit
    from airflow_delta_maintenance.deltalog.storage import FileStat, open_table_storage
    from airflow_delta_maintenance.maintenance.table.staged_commits import _check_recorded

    commit = RatifiedCommit(version=3, commit_timestamp=1, file_name="x.json", file_size=10, file_modification_time=1_795_000_000_000)
    stat = FileStat("x.json", 10, 1_795_000_000_000 + 3_600_000)
    store = open_table_storage(str(tmp_path))
    with pytest.raises(StagedCommitError, match=r"modified at 2026-11-18T\d\d:\d\d:\d\d\.000Z, but the coordinator recorded 2026-11-18T"):
        _check_recorded(store, commit, "_delta_log/_staged_commits/x.json", 10, stat)
