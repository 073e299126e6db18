"""DynamoDB specifics on DynamoDB Local: delta-spark's exact item schema and conditional updates."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator, hadoop_table_path
from airflow_delta_maintenance.coordinators.errors import CommitConflictError, CoordinatorError
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.fault_proxy import Exchange, FaultProxy
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


def test_failed_conditions_are_classified(ddb: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    client, raw, table, conf = ddb
    client.commit(table, 1, [add("a")], conf)
    stale = client._item_for(conf, table)  # read before another writer takes version 2
    other = open_coordinator(f"dynamodb://{client.dynamodb_table}?region=us-east-1&endpoint={client.endpoint}")
    other.commit(table, 2, [add("theirs")], conf)
    with monkeypatch.context() as m:
        m.setattr(client, "_item_for", lambda *a: stale)
        with pytest.raises(CommitConflictError, match="ratified for another writer") as conflict:  # decided by the conditional update
            client.commit(table, 2, [add("ours")], conf)
    assert conflict.value.retryable and conflict.value.version == 2
    with pytest.raises(CoordinatorError, match="cannot ratify 5: latest ratified is 2") as gap:
        client.commit(table, 5, [add("c")], conf)
    assert not gap.value.retryable and not gap.value.conflict
    raw.update_item(TableName=client.dynamodb_table, Key={"tableId": {"S": conf["tableId"]}},
                    AttributeUpdates={"acceptingCommits": {"Value": {"BOOL": False}, "Action": "PUT"}})
    with pytest.raises(CoordinatorError, match="no longer accepts commits") as closed:
        client.commit(table, 3, [add("b")], conf)
    assert not closed.value.retryable


def test_an_item_of_another_table_is_refused(ddb: tuple, tmp_path: Path) -> None:
    client, _, _, conf = ddb
    with pytest.raises(CoordinatorError, match="belongs to") as err:
        client.commit(str(tmp_path / "other"), 1, [add("a")], conf)
    assert not err.value.retryable
    assert not (tmp_path / "other").exists()  # nothing staged
    with pytest.raises(CoordinatorError, match="belongs to"):
        client.get_commits(str(tmp_path / "other"), table_conf=conf)


# ---- a lost answer to our ratifying UpdateItem (a fault proxy in front of DynamoDB Local) ---------


def _is_update(exchange: Exchange) -> bool:
    return exchange.headers.get("x-amz-target", "").endswith(".UpdateItem")


@pytest.mark.parametrize("resent", [True, False], ids=["botocore-resends", "never-resent"])
def test_a_lost_answer_to_our_ratification_is_our_commit_not_a_conflict(
    ddb: tuple, fault_proxy: Callable[[str], FaultProxy], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], resent: bool
) -> None:
    """DynamoDB applies our UpdateItem and the answer is lost. botocore resends it and the resend
    fails its condition (``tableVersion`` is already ``v``), or it is not resent at all: either way
    the version is ours by the staged file the item now lists. Before: a retryable
    ``CommitConflictError`` (resent) or "state unknown" (not resent), and a writer that retried
    committed the same actions twice."""
    client, raw, table, conf = ddb
    if not resent:
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore gives up on the first lost answer
    proxy = fault_proxy(client.endpoint.removeprefix("http://"))
    proxied = open_coordinator(f"dynamodb://{client.dynamodb_table}?region=us-east-1&endpoint=http://{proxy.host}")
    proxy.drop_answer(_is_update)
    ratified = proxied.commit(table, 1, [add("ours")], conf)
    updates = [(x.status, x.dropped) for x in proxy.exchanges if _is_update(x)]
    assert updates == ([(200, True), (400, False)] if resent else [(200, True)])  # applied, answer lost; the resend refused
    listed = item(raw, client, conf)
    assert listed["tableVersion"] == {"N": "1"}
    assert [e["M"]["fsName"]["S"] for e in listed["commits"]["L"]] == [ratified.file_name.rsplit("/", 1)[-1]]
    assert ratified.version == 1 and ratified.file_size == len(open_table_storage(table).read(ratified.file_name))
    proxied.commit(table, 2, [add("next")], conf)  # the writer goes on; nothing is committed twice
    code = cli_main(["publish", table, "--coordinator", "auto", "--json"])
    assert code == 0 and (lambda r: (r["from_version"], r["to_version"], r["count"]))(json.loads(capsys.readouterr().out)) == (1, 2, 2)
    assert {p for p, _ in load_snapshot(table).active_file_keys()} == {"ours", "next"}
