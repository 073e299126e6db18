"""Issue 17, discovery: every table of a DynamoDB commits table (delta-spark's item schema) on
DynamoDB Local becomes a fleet entry whose coordinator spec maintains it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.fleet.config import load_fleet
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.integration.coordinators._targets import add

pytestmark = pytest.mark.integration

TABLES = 7


def test_every_table_of_a_commits_table_is_discovered_and_its_spec_maintains_it(
    dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    client = open_coordinator(spec)
    assert isinstance(client, DynamoDBCoordinator)
    client.create_dynamodb_table()
    uris = {}
    for i in range(TABLES):
        uri = str(tmp_path / ("lake" if i % 2 else "raw") / f"events_{i}")
        client.commit(uri, 0, create_actions(ict=True))
        for v in (1, 2, 3):
            client.commit(uri, v, [add(f"f{i}-{v}")])
        uris[uri] = i
    # an item that is not delta-spark's (no path) is not a table
    boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1").put_item(
        TableName=dynamodb_table_name, Item={"tableId": {"S": "not-a-table"}, "note": {"S": "x"}})

    # the Scan follows LastEvaluatedKey across pages
    assert len(client.list_registered_tables(page_size=2)) == TABLES

    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults:\n  checkpoint: {interval: 3, engine: local}\n"
        "discovery:\n  sources:\n"
        f"    - name: commits\n      dynamodb: \"{spec}\"\n      name_prefix: ddb_\n"
        "  overrides:\n    - match: {uri: '*/raw/*'}\n      schedule: '@daily'\n"
    )
    exe = str(Path(sys.executable).with_name("delta-maintenance"))
    out = subprocess.run([exe, "discover", "--config", str(config), "--json"], capture_output=True, text=True, timeout=300,
                         env={**aws_env, "PATH": str(Path(sys.executable).parent)})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["tables"] == TABLES and summary["sources"][0]["skipped"] == []
    fleet = load_fleet(config)
    assert fleet.fleet_error is None and fleet.invalid == []
    assert sorted(t.uri for t in fleet.tables) == sorted(uris)
    for t in fleet.tables:
        i = uris[t.uri]
        assert t.name.startswith(f"ddb_events_{i}_") and t.schedule == ("@daily" if i % 2 == 0 else "@hourly")
        assert t.coordinator and t.coordinator.startswith(spec + "&table_id=")
        # the discovered spec is all a user needs: publish and checkpoint through the CLI
        assert cli_main(["publish", t.uri, "--coordinator", t.coordinator, "--json"]) == 0, capsys.readouterr().err
        assert (lambda r: (r["from_version"], r["to_version"], r["count"]))(json.loads(capsys.readouterr().out)) == (1, 3, 3)
        assert cli_main(["checkpoint", t.uri, "--coordinator", t.coordinator, "--interval", "3", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["version"] == 3
        files = list_log_files(open_table_storage(t.uri))
        assert [c.version for c in files.commits] == [0, 1, 2, 3] and [g.version for g in files.complete_checkpoints()] == [3]


def test_a_missing_commits_table_fails_discovery_and_keeps_the_old_fleet_file(
    dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(f"discovery:\n  sources:\n    - name: c\n      dynamodb: \"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}\"\n")
    fleet_file = tmp_path / "tables.fleet.json"
    fleet_file.write_text("previous")
    assert cli_main(["discover", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"DynamoDB table {dynamodb_table_name} does not exist" in err and len(err.strip().splitlines()) == 1
    assert fleet_file.read_text() == "previous"
