"""Unity Catalog specifics, both APIs. On the real OSS server (0.6.0, 0.5.1, authorization off and
on) unless the test needs a fault the real server cannot be made to produce (5xx, throttling,
a lost answer decided server-side): those run on the UC OpenAPI stand-in, and their ids say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_delta_maintenance.coordinators.base import WrittenFile
from airflow_delta_maintenance.coordinators.commit_file import Attempt
from airflow_delta_maintenance.coordinators.errors import CommitConflictError, CommitLimitReachedError, CoordinatorError
from airflow_delta_maintenance.coordinators.unity_catalog import UnityCatalogCoordinator
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.helpers.tables import bind_table
from tests.integration.coordinators._targets import UC_OSS_PAIRWISE_KINDS, UC_STANDIN_KINDS, Target, add, make_spec, new_target

pytestmark = pytest.mark.integration

MAX_UNPUBLISHED = 10  # the OSS server's MAX_NUM_COMMITS_PER_TABLE


def _target(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Target:
    return new_target(request, kind, tmp_path)


@pytest.fixture(params=UC_OSS_PAIRWISE_KINDS)
def uc(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A new table on a real UC OSS server."""
    return _target(request, str(request.param), tmp_path)


@pytest.fixture(params=UC_STANDIN_KINDS)
def standin(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A new table on the UC OpenAPI stand-in (fault injection only)."""
    return _target(request, str(request.param), tmp_path)


def test_version_zero_carries_the_catalog_managed_contract(uc: Target) -> None:
    snap = load_snapshot(uc.table_uri)
    assert snap.protocol.min_reader_version == 3 and snap.protocol.min_writer_version == 7
    assert {"catalogManaged", "deletionVectors", "v2Checkpoint", "vacuumProtocolCheck"} <= set(snap.protocol.reader_features or ())
    assert "inCommitTimestamp" in (snap.protocol.writer_features or ())
    assert snap.properties.uc_table_id == uc.table.table_conf["io.unitycatalog.tableId"]
    assert snap.properties.raw["delta.enableInCommitTimestamps"] == "true"


def test_the_unpublished_limit_is_a_commit_limit_until_published(uc: Target) -> None:
    for v in range(1, MAX_UNPUBLISHED + 1):
        uc.table.commit(v, [add(f"f{v}")])
    with pytest.raises(CommitLimitReachedError) as err:
        uc.table.commit(MAX_UNPUBLISHED + 1, [add("over")])
    assert err.value.retryable and err.value.version == MAX_UNPUBLISHED + 1
    result = publish_ratified_commits(bind_table(open_table_storage(uc.table_uri), uc.client))
    assert result.published == list(range(1, MAX_UNPUBLISHED + 1)) and result.reported_version == MAX_UNPUBLISHED
    uc.table.commit(MAX_UNPUBLISHED + 1, [add("now")])
    assert uc.table.latest_ratified_version() == MAX_UNPUBLISHED + 1


def test_every_unpublished_commit_is_listed_across_pages(uc: Target) -> None:
    """After a full backfill the server keeps the latest row flagged, so 10 new commits span 11 rows;
    the preview API answers at most 10 versions per request and the client must follow the pages."""
    for v in range(1, 6):
        uc.table.commit(v, [add(f"f{v}")])
    publish_ratified_commits(bind_table(open_table_storage(uc.table_uri), uc.client))
    for v in range(6, 6 + MAX_UNPUBLISHED):
        uc.table.commit(v, [add(f"f{v}")])
    resp = uc.table.get_commits(0, None)
    assert [c.version for c in resp.commits] == list(range(6, 6 + MAX_UNPUBLISHED)) and resp.latest_table_version == 15
    snap = load_ratified_snapshot(bind_table(open_table_storage(uc.table_uri), uc.client))
    assert snap.version == 15 and len(list(snap.active_file_keys())) == 15


def test_recovery_compares_bytes_once_the_commit_was_published_and_forgotten(uc: Target) -> None:
    client: UnityCatalogCoordinator = uc.client  # type: ignore[assignment]
    ratified = uc.bound(client).commit(1, [add("a")])
    uc.bound(client).commit(2, [add("b")])
    store = open_table_storage(uc.table_uri)
    publish_ratified_commits(bind_table(store, client))
    assert 1 not in [c.version for c in uc.bound(client).get_commits(0, None).commits]  # purged
    data = store.read(ratified.file_name)
    written = WrittenFile(ratified.file_name, ratified.file_size, ratified.file_modification_time)
    writer = client.writer_factory(uc.table_uri)  # type: ignore[misc]
    conf = uc.table.table_conf
    assert client._settle(uc.table_uri, conf, Attempt(1, ratified.commit_timestamp, data, written), writer, "lost").version == 1
    with pytest.raises(CommitConflictError, match="another writer"):
        client._settle(uc.table_uri, conf, Attempt(1, ratified.commit_timestamp, data + b"\n", written), writer, "lost")
    with pytest.raises(CoordinatorError, match="version 3 was not ratified") as unknown:
        client._settle(uc.table_uri, conf, Attempt(3, ratified.commit_timestamp, data, written), writer, "lost")
    assert unknown.value.retryable and not unknown.value.conflict


def test_a_table_must_be_created_where_the_catalog_says(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    for api in ("v1", "preview"):
        client = open_coordinator(make_spec(request, f"uc-oss-0.6.0-{api}", tmp_path))
        with pytest.raises(CoordinatorError, match="Unity Catalog chooses managed locations") as err:
            client.commit(str(tmp_path / "mine"), 0, [])
        assert not err.value.retryable and not (tmp_path / "mine" / "_delta_log").exists()


# ---- faults the real server cannot be made to produce: the stand-in ----------------------------


def test_transient_server_errors_are_retried(standin: Target, uc_server) -> None:
    uc_server.inject_fault(count=2, code="INTERNAL", method="POST")
    standin.table.commit(1, [add("a")])
    uc_server.inject_fault(count=1, status=429, error_type="TooManyRequestsException")
    assert standin.table.latest_ratified_version() == 1


def test_a_lost_answer_is_recognised_by_reloading(standin: Target, uc_server) -> None:
    client: UnityCatalogCoordinator = standin.client  # type: ignore[assignment]
    client._http.max_attempts = 1  # no resend: recovery must reload and find its own file name
    uc_server.inject_fault(count=1, after=True, code="COMMIT_STATE_UNKNOWN", method="POST")
    ratified = standin.bound(client).commit(1, [add("a")])
    assert [c.file_name for c in standin.bound(client).get_commits(0, None).commits] == [ratified.file_name]
    uc_server.inject_fault(count=1, code="COMMIT_STATE_UNKNOWN", method="POST")  # refused, not ratified
    with pytest.raises(CoordinatorError) as err:
        standin.bound(client).commit(2, [add("b")])
    assert err.value.retryable and not err.value.conflict
    assert standin.bound(client).latest_ratified_version() == 1
