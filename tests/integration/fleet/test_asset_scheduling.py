"""``schedule: asset`` and ``schedule: watch`` end to end in a real Airflow deployment: a commit leads
to a maintenance run with no sensor task, asserted on ``_delta_log`` and on the asset events."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.demo.sample_table import add_action_for, data_batch
from airflow_delta_maintenance.maintenance.config.endpoint import pool_name_for_endpoint
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests.integration.ui.conftest import Deployment

from .conftest import ASSET_DAG, WATCH_DAG

pytestmark = pytest.mark.integration


def _published(uri: str) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in Path(uri, "_delta_log").glob("*.json") if p.name.split(".")[0].isdigit())


def _events(deployment: Deployment, uri: str) -> list[dict[str, Any]]:
    events = deployment.api("GET", "/assets/events?limit=100&order_by=timestamp")["asset_events"]
    return [e for e in events if e["uri"] == uri]


def _wait(what: str, condition: Any, timeout: float = 900) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _finished_runs(deployment: Deployment, dag_id: str) -> list[dict[str, Any]]:
    runs = deployment.api("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"]
    return [r for r in runs if r["state"] in ("success", "failed")]


def _tasks(deployment: Deployment, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    return {t["task_id"]: t for t in deployment.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]}


def test_a_writer_dags_outlet_runs_the_maintenance_dag_without_a_sensor(fleet_deployment: Deployment) -> None:
    uri, spec = fleet_deployment.tables[ASSET_DAG]
    assert _published(uri) == [0]
    assert fleet_deployment.api("GET", f"/dags/{ASSET_DAG}/dagRuns")["dag_runs"] == []  # nothing runs before the writer
    writer = fleet_deployment.api("POST", "/dags/fleet_writer/dagRuns", {"logical_date": None})
    assert fleet_deployment.wait_for_run("fleet_writer", writer["dag_run_id"])["state"] == "success"
    (run,) = _wait("the asset-triggered maintenance run", lambda: _finished_runs(fleet_deployment, ASSET_DAG))
    assert run["run_type"] == "asset_triggered" and run["state"] == "success", run
    tasks = _tasks(fleet_deployment, ASSET_DAG, run["dag_run_id"])
    assert "wait_for_ratified_commits" not in tasks and tasks["publish"]["state"] == "success", tasks
    assert {t["pool"] for t in tasks.values()} == {pool_name_for_endpoint(f"local:{spec.split('://', 1)[1].split('?')[0]}")}
    assert _published(uri) == [0, 1, 2, 3] and Path(uri, "_delta_log", "00000000000000000003.checkpoint.parquet").exists()
    # the writer's event on the table's asset, and the maintenance's on the published log
    (written,) = _events(fleet_deployment, f"file://{uri}")
    assert written["source_dag_id"] == "fleet_writer" and [r["dag_id"] for r in written["created_dagruns"]] == [ASSET_DAG]
    log_events = {e["source_task_id"]: e for e in _events(fleet_deployment, f"file://{uri}/_delta_log")}
    assert log_events["publish"]["extra"] == {"published_version": 3, "latest_ratified_version": 3, "published": 3}
    assert log_events["checkpoint"]["extra"] == {"checkpoint_version": 3, "checkpoint_due": True}
    assert all(e["source_dag_id"] == ASSET_DAG and e["created_dagruns"] == [] for e in log_events.values())  # no self-trigger
    time.sleep(15)  # and no second run follows from the maintenance's own events
    assert len(fleet_deployment.api("GET", f"/dags/{ASSET_DAG}/dagRuns")["dag_runs"]) == 1


def test_an_external_commit_fires_the_watcher_and_the_run_publishes(fleet_deployment: Deployment) -> None:
    uri, spec = fleet_deployment.tables[WATCH_DAG]
    assert _published(uri) == [0]
    with open_table(uri, coordinator=spec) as table:  # a writer outside Airflow (Spark, a service)
        table.commit(1, [add_action_for(uri, data_batch(10, 10, "emea"), "emea")])
    time.sleep(12)  # polled several times: one commit is below min_new_commits (2)
    assert fleet_deployment.api("GET", f"/dags/{WATCH_DAG}/dagRuns")["dag_runs"] == [] and _published(uri) == [0]
    with open_table(uri, coordinator=spec) as table:
        table.commit(2, [add_action_for(uri, data_batch(20, 10, "emea"), "emea")])
    (run,) = _wait("the watcher-triggered maintenance run", lambda: _finished_runs(fleet_deployment, WATCH_DAG))
    assert run["run_type"] == "asset_triggered" and run["state"] == "success", run
    tasks = _tasks(fleet_deployment, WATCH_DAG, run["dag_run_id"])
    assert "wait_for_ratified_commits" not in tasks and tasks["publish"]["state"] == "success", tasks
    assert _published(uri) == [0, 1, 2]
    (fired,) = _events(fleet_deployment, f"file://{uri}")
    assert fired["source_dag_id"] is None and [r["dag_id"] for r in fired["created_dagruns"]] == [WATCH_DAG]
    assert json.dumps(fired["extra"]).count('"latest_ratified_version": 2') == 1, fired["extra"]
    log_events = {e["source_task_id"]: e for e in _events(fleet_deployment, f"file://{uri}/_delta_log")}
    assert log_events["publish"]["extra"]["published_version"] == 2
    assert log_events["checkpoint"]["extra"] == {"checkpoint_version": 2, "checkpoint_due": True}
