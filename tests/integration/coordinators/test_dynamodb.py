"""DynamoDB specifics on DynamoDB Local: delta-spark's exact item schema and conditional updates."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator, hadoop_table_path
from airflow_delta_maintenance.coordinators.errors import CommitConflictError, CoordinatorError
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.integration.coordinators._targets import add

pytestmark = pytest.mark.integration


@pytest.fixture
def ddb(dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path) -> tuple[DynamoDBCoordinator, Any, str, dict[str, str]]:
    client = open_coordinator(f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}")
    assert isinstance(client, DynamoDBCoordinator)
    client.create_dynamodb_table()
    table = str(tmp_path / "t")
    client.commit(table, 0, create_actions(ict=True))
    conf = dict(load_snapshot(table).properties.coordinator_table_conf)
    raw = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1")
    return client, raw, table, conf


def item(raw: Any, client: DynamoDBCoordinator, conf: dict[str, str]) -> dict[str, Any]:
    return raw.get_item(TableName=client.dynamodb_table, Key={"tableId": {"S": conf["tableId"]}}, ConsistentRead=True)["Item"]


def test_the_table_and_item_have_delta_sparks_schema(ddb: tuple) -> None:
    client, raw, table, conf = ddb
    desc = raw.describe_table(TableName=client.dynamodb_table)["Table"]
    assert desc["KeySchema"] == [{"AttributeName": "tableId", "KeyType": "HASH"}]
    assert desc["ProvisionedThroughput"]["ReadCapacityUnits"] == 5 and desc["ProvisionedThroughput"]["WriteCapacityUnits"] == 5
    registered = item(raw, client, conf)
    assert registered == {
        "tableId": {"S": conf["tableId"]}, "path": {"S": hadoop_table_path(table)}, "acceptingCommits": {"BOOL": True},
        "tableVersion": {"N": "0"}, "schemaVersion": {"N": "1"}, "hasAcceptedCommits": {"BOOL": False}, "commits": {"L": []},
    }
    props = load_snapshot(table).properties.raw
    assert props["delta.coordinatedCommits.commitCoordinator-preview"] == "dynamodb"
    ratified = client.commit(table, 1, [add("a")], conf)
    after = item(raw, client, conf)
    assert after["tableVersion"] == {"N": "1"} and after["hasAcceptedCommits"] == {"BOOL": True}
    assert after["tableTimestamp"] == {"N": str(ratified.commit_timestamp)}
    assert after["commits"] == {"L": [{"M": {
        "version": {"N": "1"}, "timestamp": {"N": str(ratified.commit_timestamp)}, "fsName": {"S": ratified.file_name.split("/")[-1]},
        "fsLength": {"N": str(ratified.file_size)}, "fsTimestamp": {"N": str(ratified.file_modification_time)}}}]}


def test_register_table_converts_a_filesystem_table(ddb: tuple, tmp_path: Path) -> None:
    client, raw, _, _ = ddb
    conf = client.register_table(str(tmp_path / "fs"), 7)  # the caller writes conversion commit 8 to the filesystem
    uuid.UUID(conf["tableId"])
    registered = item(raw, client, conf)
    assert registered["tableVersion"] == {"N": "8"} and registered["hasAcceptedCommits"] == {"BOOL": False}
    assert client.latest_ratified_version(str(tmp_path / "fs"), conf) == -1
    with pytest.raises(CommitConflictError):
        client.commit(str(tmp_path / "fs"), 8, [add("a")], conf)


def test_a_partial_report_keeps_the_commits_above_it(ddb: tuple) -> None:
    client, raw, table, conf = ddb
    for v in (1, 2, 3):
        client.commit(table, v, [add(f"f{v}")], conf)
    client.report_published(table, 2, conf)
    assert [int(e["M"]["version"]["N"]) for e in item(raw, client, conf)["commits"]["L"]] == [3]
    client.report_published(table, 3, conf)
    assert item(raw, client, conf)["commits"] == {"L": []} and item(raw, client, conf)["tableVersion"] == {"N": "3"}


def test_a_report_racing_a_commit_never_drops_the_new_commit(ddb: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    client, raw, table, conf = ddb
    for v in (1, 2):
        client.commit(table, v, [add(f"f{v}")], conf)
    other = open_coordinator(f"dynamodb://{client.dynamodb_table}?region=us-east-1&endpoint={client.endpoint}")
    real = client._item_for
    calls = []

    def stale_then_real(table_conf: Any, uri: str) -> Any:
        got = real(table_conf, uri)
        if not calls:  # between our read and our conditional update, another writer ratifies 3
            other.commit(table, 3, [add("f3")], conf)
        calls.append(1)
        return got

    monkeypatch.setattr(client, "_item_for", stale_then_real)
    client.report_published(table, 2, conf)  # the first update fails its condition; the retry re-reads
    assert len(calls) == 2
    assert [int(e["M"]["version"]["N"]) for e in item(raw, client, conf)["commits"]["L"]] == [3]


def test_failed_conditions_are_classified(ddb: tuple) -> None:
    client, raw, table, conf = ddb
    client.commit(table, 1, [add("a")], conf)
    with pytest.raises(CommitConflictError) as conflict:  # decided by the conditional update, not a pre-check
        client._ratify(conf["tableId"], hadoop_table_path(table), 1, 1, "x.json", 1, 1)
    assert conflict.value.retryable
    with pytest.raises(CoordinatorError) as gap:
        client._ratify(conf["tableId"], hadoop_table_path(table), 5, 1, "x.json", 1, 1)
    assert not gap.value.retryable and not gap.value.conflict
    raw.update_item(TableName=client.dynamodb_table, Key={"tableId": {"S": conf["tableId"]}},
                    AttributeUpdates={"acceptingCommits": {"Value": {"BOOL": False}, "Action": "PUT"}})
    with pytest.raises(CoordinatorError, match="no longer accepts commits") as closed:
        client.commit(table, 2, [add("b")], conf)
    assert not closed.value.retryable


def test_an_item_of_another_table_is_refused(ddb: tuple, tmp_path: Path) -> None:
    client, _, _, conf = ddb
    with pytest.raises(CoordinatorError, match="belongs to") as err:
        client.commit(str(tmp_path / "other"), 1, [add("a")], conf)
    assert not err.value.retryable
    assert not (tmp_path / "other").exists()  # nothing staged
    with pytest.raises(CoordinatorError, match="belongs to"):
        client.get_commits(str(tmp_path / "other"), table_conf=conf)
