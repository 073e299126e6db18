"""A table committed through delta-spark's DynamoDB coordinator (on DynamoDB Local) is maintained
through it with no coordinator given: the DynamoDB table and endpoint come from the table's
coordinated-commits properties, the region from the environment. Before, the CLI without
``--coordinator`` saw the published log alone ("pending: 0" while commits waited)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.integration.coordinators._targets import add

pytestmark = pytest.mark.integration


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_without_a_coordinator_acts_through_the_declared_dynamodb_table(
    dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = open_coordinator(f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}")
    assert isinstance(client, DynamoDBCoordinator)
    client.create_dynamodb_table()
    uri = str(tmp_path / "t")
    client.commit(uri, 0, create_actions(ict=True))  # registers the table; its version 0 declares the coordinator
    for v in range(1, 4):
        client.commit(uri, v, [add(f"f{v}")])

    code, out, err = run(capsys, "status", uri)
    assert code == 0 and "unpublished (pending):     3 (1..3)" in out, (out, err)
    code, out, err = run(capsys, "publish", uri, "--json")
    assert code == 0 and (json.loads(out)["from_version"], json.loads(out)["to_version"], json.loads(out)["count"]) == (1, 3, 3) and json.loads(out)["reported_version"] == 3, err
    code, out, _ = run(capsys, "versions", uri, "--json")
    assert code == 0 and json.loads(out)["latest_published_version"] == 3 and json.loads(out)["pending"] == []

    # no region anywhere: a typed line naming the DynamoDB table and what to set
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = run(capsys, "cleanup", uri, "--execute")
    assert code == 2 and err.count("\n") == 1 and "CoordinatorNotConfiguredError" in err, err
    assert f"DynamoDB coordinator table '{dynamodb_table_name}'" in err and "AWS_REGION" in err, err
