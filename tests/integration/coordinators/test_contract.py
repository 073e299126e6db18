"""One contract, run unchanged against the three coordinators (embedded SQLite, DynamoDB Local,
Unity Catalog v1 and preview APIs on the UC OpenAPI test server)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.coordinators.base import CommitCoordinatorClient
from airflow_delta_maintenance.coordinators.errors import CommitConflictError, CoordinatorError
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.deltalog.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.coordinated_snapshot import load_coordinated_snapshot
from airflow_delta_maintenance.maintenance.coordinator import open_coordinator
from airflow_delta_maintenance.maintenance.publish import publish_ratified_commits

pytestmark = pytest.mark.integration
KINDS = ["local", "dynamodb", "uc-v1", "uc-preview"]


@dataclass
class Target:
    kind: str
    spec: str
    table_uri: str
    client: CommitCoordinatorClient
    table_conf: dict[str, str]


def add(path: str, size: int = 1) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": size, "modificationTime": 1, "dataChange": True}}


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    kind = request.param
    table_uri = str(tmp_path / "table")
    if kind == "local":
        spec = f"local://{tmp_path}/coordinator.db"
    elif kind == "dynamodb":
        endpoint = request.getfixturevalue("dynamodb_endpoint")
        request.getfixturevalue("aws_env")
        spec = f"dynamodb://{request.getfixturevalue('dynamodb_table_name')}?region=us-east-1&endpoint={endpoint}"
    else:
        host = request.getfixturevalue("uc_endpoint")
        spec = f"unity-catalog://{host}/main.default.t{uuid.uuid4().hex[:10]}?api={kind.split('-')[1]}&tls=false"
    client = open_coordinator(spec)
    if kind == "dynamodb":
        client.create_dynamodb_table()  # type: ignore[attr-defined]
    client.commit(table_uri, 0, create_actions(ict=True))
    snapshot = load_snapshot(table_uri)
    conf = dict(snapshot.properties.coordinator_table_conf)
    if kind.startswith("uc"):
        conf = {"io.unitycatalog.tableId": client.table_id}  # type: ignore[attr-defined]
    yield Target(kind, spec, table_uri, client, conf)
    client.close()


def test_new_table_reports_its_latest_version(target: Target) -> None:
    latest = target.client.latest_ratified_version(target.table_uri, target.table_conf)
    # -1 until the first coordinated commit (DynamoDB, delta-spark semantics); 0 for catalogs
    assert latest == (-1 if target.kind == "dynamodb" else 0)
    assert target.client.get_commits(target.table_uri, 0, None, target.table_conf).commits == ()


def test_commits_are_ratified_in_order_and_listed_until_published(target: Target) -> None:
    for v in range(1, 5):
        ratified = target.client.commit(target.table_uri, v, [add(f"f{v}")], target.table_conf)
        assert ratified.version == v and ratified.file_name.startswith("_staged_commits/")
    resp = target.client.get_commits(target.table_uri, 0, None, target.table_conf)
    assert resp.latest_table_version == 4 and [c.version for c in resp.commits] == [1, 2, 3, 4]
    timestamps = [c.commit_timestamp for c in resp.commits]
    assert timestamps == sorted(set(timestamps))  # in-commit timestamps strictly increase
    assert [c.version for c in target.client.get_commits(target.table_uri, 2, 3, target.table_conf).commits] == [2, 3]
    assert target.client.latest_ratified_version(target.table_uri, target.table_conf) == 4


def test_a_taken_version_is_a_conflict_and_a_gap_is_refused(target: Target) -> None:
    target.client.commit(target.table_uri, 1, [add("a")], target.table_conf)
    with pytest.raises(CommitConflictError) as err:
        target.client.commit(target.table_uri, 1, [add("b")], target.table_conf)
    assert err.value.conflict and err.value.version == 1
    with pytest.raises(CoordinatorError):
        target.client.commit(target.table_uri, 3, [add("c")], target.table_conf)
    with pytest.raises(CommitConflictError):
        target.client.commit(target.table_uri, 0, create_actions(), target.table_conf)


def test_report_published_drops_rows_and_is_idempotent(target: Target) -> None:
    for v in range(1, 4):
        target.client.commit(target.table_uri, v, [add(f"f{v}")], target.table_conf)
    store = open_table_storage(target.table_uri)
    result = publish_ratified_commits(store, target.client, up_to=2, table_conf=target.table_conf)
    assert result.published == [1, 2] and result.reported_version == 2
    resp = target.client.get_commits(target.table_uri, 0, None, target.table_conf)
    assert [c.version for c in resp.commits] == [3] and resp.latest_table_version == 3
    target.client.report_published(target.table_uri, 2, target.table_conf)  # again: no-op
    assert [c.version for c in target.client.get_commits(target.table_uri, 0, None, target.table_conf).commits] == [3]
    result = publish_ratified_commits(store, target.client, table_conf=target.table_conf)
    assert result.published == [3] and result.latest_published_version == 3
    assert target.client.get_commits(target.table_uri, 0, None, target.table_conf).commits == ()
    assert load_snapshot(store).version == 3 and load_snapshot(store).num_files == 3


def test_snapshot_includes_the_unpublished_tail(target: Target) -> None:
    for v in range(1, 4):
        target.client.commit(target.table_uri, v, [add(f"f{v}")], target.table_conf)
    store = open_table_storage(target.table_uri)
    snap = load_coordinated_snapshot(store, target.client, table_conf=target.table_conf)
    assert snap.version == 3 and {p for p, _ in snap.active_file_keys()} == {"f1", "f2", "f3"}
    assert load_snapshot(store).version == 0  # nothing published yet


def test_concurrent_committers_get_each_version_exactly_once(target: Target) -> None:
    winners: dict[int, list[str]] = {}
    lock = threading.Lock()

    def writer(name: str) -> None:
        client = open_coordinator(target.spec)
        for _ in range(12):
            v = max(client.latest_ratified_version(target.table_uri, target.table_conf), 0) + 1
            try:
                client.commit(target.table_uri, v, [add(f"{name}-{v}")], target.table_conf)
            except (CommitConflictError, CoordinatorError):
                continue
            with lock:
                winners.setdefault(v, []).append(name)

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert winners and all(len(names) == 1 for names in winners.values())
    assert sorted(winners) == list(range(1, max(winners) + 1))
