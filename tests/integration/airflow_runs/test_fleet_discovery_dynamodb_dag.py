"""Issue 17, discovery: the discovery DAG lists a DynamoDB commits table with the credentials of an
Airflow connection only (no AWS variables in the Airflow environment), and the generated DAGs of the
discovered tables publish and checkpoint them through the same connection."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.integration.coordinators._targets import add

from .dag_runner import DagRunner

pytestmark = pytest.mark.integration


def test_the_discovery_dag_and_the_discovered_tables_use_the_sources_connection(
    dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], dag_runner: Callable[..., DagRunner], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    client = open_coordinator(spec)
    client.create_dynamodb_table()  # type: ignore[attr-defined]
    uris = [str(tmp_path / "lake" / f"orders_{i}") for i in range(3)]
    for uri in uris:
        client.commit(uri, 0, create_actions(ict=True))
        for v in (1, 2, 3, 4):
            client.commit(uri, v, [add(f"{Path(uri).name}-{v}")])

    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults:\n  checkpoint: {interval: 4, engine: local}\n  compaction: false\n  cleanup: false\n"
        "  sensor: {timeout_minutes: 1, poke_interval_seconds: 1}\n"
        f"discovery:\n  sources:\n    - name: commits\n      dynamodb: \"{spec}\"\n      conn_id: ddb_commits\n"
    )
    connection = json.dumps({"conn_type": "delta_coordinator", "host": spec,
                             "login": aws_env["AWS_ACCESS_KEY_ID"], "password": aws_env["AWS_SECRET_ACCESS_KEY"]})
    for key in [k for k in os.environ if k.startswith("AWS_")]:  # only the connection may supply credentials
        monkeypatch.delenv(key)

    runner = dag_runner(config, AIRFLOW_CONN_DDB_COMMITS=connection)  # discovery and the discovered tables' runs in one Airflow process
    result = runner.run(dag_ids=["delta_maintenance__discovery"])[0]["delta_maintenance__discovery"]
    assert result["state"] == "success", result
    assert result["xcom"]["discover_tables"]["tables"] == len(uris)
    assert aws_env["AWS_SECRET_ACCESS_KEY"] not in (tmp_path / "tables.fleet.json").read_text() + json.dumps(result)

    fleet = json.loads((tmp_path / "tables.fleet.json").read_text())["tables"]
    assert sorted(t["uri"] for t in fleet) == sorted(uris)
    results = runner.run(dag_ids=[f"delta_maintenance__{t['name']}" for t in fleet])[0]
    for t in fleet:
        r = results[f"delta_maintenance__{t['name']}"]
        assert r["state"] == "success" and (r["xcom"]["publish"]["from_version"], r["xcom"]["publish"]["to_version"], r["xcom"]["publish"]["count"]) == (1, 4, 4), r
        files = list_log_files(open_table_storage(t["uri"]))
        assert [c.version for c in files.commits] == [0, 1, 2, 3, 4] and [g.version for g in files.complete_checkpoints()] == [4]
