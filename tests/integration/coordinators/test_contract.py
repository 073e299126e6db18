"""One coordinator contract, run unchanged against every coordinator (see ``_targets``):
embedded SQLite, DynamoDB Local, and Unity Catalog's v1 and preview APIs on the real UC OSS
server, 0.6.0 and 0.5.1, each with authorization off and on (the test id names the server)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.coordinators.errors import CommitConflictError, CoordinatorError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from tests.helpers.tables import bind_table
from tests.integration.coordinators._targets import Target, add

pytestmark = pytest.mark.integration


def versions(target: Target, start: int | None = 0, end: int | None = None) -> list[int]:
    return [c.version for c in target.table.get_commits(start, end).commits]


def commit_info(target: Target, file_name: str) -> dict:
    first = open_table_storage(target.table_uri).read(file_name).split(b"\n", 1)[0]
    return json.loads(first)["commitInfo"]


def test_a_new_table_has_version_zero_published_and_nothing_ratified(target: Target) -> None:
    latest = target.table.latest_ratified_version()
    # -1 until the first coordinated commit (delta-spark's DynamoDB semantics); 0 for the catalogs
    assert latest == (-1 if target.kind == "dynamodb" else 0)
    resp = target.table.get_commits(0, None)
    assert resp.commits == () and resp.latest_table_version == latest
    assert load_snapshot(target.table_uri).version == 0
    assert "inCommitTimestamp" in commit_info(target, "00000000000000000000.json")


def test_version_zero_is_created_once(target: Target) -> None:
    with pytest.raises(CommitConflictError) as err:
        target.table.commit(0, create_actions(ict=True))
    assert err.value.version == 0 and not err.value.retryable


def test_commits_are_ratified_in_order_and_listed_until_published(target: Target) -> None:
    for v in range(1, 5):
        ratified = target.table.commit(v, [add(f"f{v}")])
        assert ratified.version == v and ratified.file_name.startswith(f"_staged_commits/{v:020d}.")
        info = commit_info(target, ratified.file_name)  # commitInfo first, carrying the ICT
        assert info["inCommitTimestamp"] == ratified.commit_timestamp and info["txnId"]
    resp = target.table.get_commits(0, None)
    assert resp.latest_table_version == 4 and [c.version for c in resp.commits] == [1, 2, 3, 4]
    assert all(c.file_size > 0 and c.file_modification_time > 0 for c in resp.commits)
    assert target.table.latest_ratified_version() == 4
    assert versions(target, 2, 3) == [2, 3]
    assert versions(target, 3, None) == [3, 4]
    assert versions(target, None, 1) == [1]
    assert versions(target, 5, None) == []
    assert load_snapshot(target.table_uri).version == 0  # ratified is not published


def test_a_taken_version_is_a_conflict_and_a_gap_is_refused(target: Target) -> None:
    target.table.commit(1, [add("a")])
    with pytest.raises(CommitConflictError) as err:
        target.table.commit(1, [add("b")])
    assert err.value.conflict and err.value.retryable and err.value.version == 1
    with pytest.raises(CoordinatorError) as gap:
        target.table.commit(3, [add("c")])
    assert not gap.value.conflict and not gap.value.retryable
    assert versions(target) == [1]  # neither attempt was ratified


def test_in_commit_timestamps_increase_even_when_the_clock_goes_back(target: Target, frozen_clock: Callable[[int], None]) -> None:
    first = target.table.commit(1, [add("a")])
    frozen_clock(1_000)  # far in the past
    second = target.table.commit(2, [add("b")])
    assert second.commit_timestamp == first.commit_timestamp + 1
    publish_ratified_commits(bind_table(open_table_storage(target.table_uri), target.client))
    assert versions(target) == []  # forgotten by the coordinator: the next ICT comes from <2>.json
    third = target.table.commit(3, [add("c")])
    assert third.commit_timestamp == second.commit_timestamp + 1


def test_report_published_drops_rows_keeps_the_latest_version_and_is_idempotent(target: Target) -> None:
    for v in range(1, 4):
        target.table.commit(v, [add(f"f{v}")])
    store = open_table_storage(target.table_uri)
    result = publish_ratified_commits(bind_table(store, target.client), up_to=2)
    assert result.published == [1, 2] and result.reported_version == 2
    resp = target.table.get_commits(0, None)
    assert [c.version for c in resp.commits] == [3] and resp.latest_table_version == 3
    target.table.report_published(2)  # again: a no-op
    target.table.report_published(1)  # older: a no-op
    assert versions(target) == [3]
    result = publish_ratified_commits(bind_table(store, target.client))
    assert result.published == [3] and result.latest_published_version == 3
    target.table.report_published(3)
    resp = target.table.get_commits(0, None)
    assert resp.commits == () and resp.latest_table_version == 3  # the latest version is remembered
    assert load_snapshot(store).version == 3 and load_snapshot(store).num_files == 3
    with pytest.raises(CoordinatorError):
        target.table.report_published(4)  # nothing ratified there
    target.table.commit(4, [add("f4")])
    assert versions(target) == [4]


def test_check_may_report_answers_before_publishing_and_changes_nothing(target: Target) -> None:
    """The principal that commits may report; asking changes nothing: with nothing ratified yet,
    with commits pending, and once everything is published and reported."""
    conf = target.table.table_conf
    assert target.client.check_may_report(target.table_uri, conf)
    assert target.table.get_commits(0, None).commits == ()
    for v in (1, 2):
        target.table.commit(v, [add(f"f{v}")])
    pending = target.table.get_commits(0, None)
    assert target.client.check_may_report(target.table_uri, conf)
    assert target.table.get_commits(0, None) == pending
    assert publish_ratified_commits(target.table).reported_version == 2
    reported = target.table.get_commits(0, None)
    assert target.client.check_may_report(target.table_uri, conf)
    assert target.table.get_commits(0, None) == reported and reported.latest_table_version == 2


def test_snapshot_includes_the_unpublished_tail(target: Target) -> None:
    for v in range(1, 4):
        target.table.commit(v, [add(f"f{v}")])
    store = open_table_storage(target.table_uri)
    snap = load_ratified_snapshot(bind_table(store, target.client))
    assert snap.version == 3 and {p for p, _ in snap.active_file_keys()} == {"f1", "f2", "f3"}
    assert load_snapshot(store).version == 0


def test_another_client_sees_the_same_state(target: Target) -> None:
    target.table.commit(1, [add("a")])
    other = target.open()
    assert target.bound(other).latest_ratified_version() == 1
    target.bound(other).commit(2, [add("b")])
    assert versions(target) == [1, 2]


def test_concurrent_committers_get_each_version_exactly_once(target: Target) -> None:
    writers, rounds = 3, 4
    clients = [target.open() for _ in range(writers)]
    tables = [target.bound(c) for c in clients]  # each writer process knows its table
    outcomes: dict[int, list[str]] = {}
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def writer(i: int) -> None:
        for r in range(rounds):
            start.wait()  # every writer proposes version r + 1 at the same moment
            try:
                tables[i].commit(r + 1, [add(f"w{i}-{r}")])
                result = "won"
            except CommitConflictError:
                result = "conflict"
            with lock:
                outcomes.setdefault(r + 1, []).append(result)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert {v: sorted(o) for v, o in outcomes.items()} == {v: ["conflict"] * (writers - 1) + ["won"] for v in range(1, rounds + 1)}
    resp = target.table.get_commits(0, None)
    assert [c.version for c in resp.commits] == list(range(1, rounds + 1)) and resp.latest_table_version == rounds
    snap = load_ratified_snapshot(bind_table(open_table_storage(target.table_uri), target.client))
    assert snap.version == rounds and len(list(snap.active_file_keys())) == rounds


def _rewrite_same_size(path: Path) -> None:
    data = path.read_bytes()
    time.sleep(0.02)
    path.write_bytes(data.replace(b'"g2"', b'"h2"'))


def _truncate_at_line(path: Path) -> None:
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))


def _swap_with_other_attempt(path: Path) -> None:
    other = path.with_name(path.name.split(".")[0] + ".00000000-0000-0000-0000-000000000000.json")
    other.write_bytes(path.read_bytes().replace(b'"f2"', b'"zz"'))
    os.replace(other, path)


def _symlink(path: Path) -> None:
    outside = path.parents[3] / f"outside-{path.name}"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)


@pytest.mark.parametrize("alter", [_rewrite_same_size, _truncate_at_line, _swap_with_other_attempt, _symlink], ids=lambda f: f.__name__.strip("_"))
def test_a_staged_commit_altered_after_ratification_is_never_published(
    target: Target, alter: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_delta_maintenance.cli import main

    padding = {"padding": "x" * 70_000}  # no coordinator keeps it inline: the staged file is the only copy
    for v in (1, 2, 3):
        target.table.commit(v, [{"add": {**add(f"f{v}")["add"], "tags": padding}}, add(f"g{v}")])
    two = next(c for c in target.table.get_commits(0, None).commits if c.version == 2)
    alter(Path(target.table_uri) / "_delta_log" / two.file_name)
    code = main(["publish", target.table_uri, "--coordinator", target.spec])
    err = capsys.readouterr().err
    assert code == 2 and ("StagedCommitError" in err or "SymlinkInLogError" in err) and two.file_name.rsplit("/", 1)[-1] in err, err
    assert [c.version for c in list_log_files(open_table_storage(target.table_uri)).commits] == [0]
    assert versions(target) == [1, 2, 3]
