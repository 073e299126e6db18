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


def published_bytes(uri: str, version: int) -> bytes:
    return (Path(uri) / "_delta_log" / f"{version:020d}.json").read_bytes()


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
