"""dag.test() of a generated DAG whose table has an ``optimize:`` section: the run compacts the
table's small files through the embedded coordinator; the next run finds OPTIMIZE not due yet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.optimize.tasks import live_adds
from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table

from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_the_generated_dag_optimizes_and_then_waits_for_the_interval(dag_runner: Callable[[Path], DagRunner], tmp_path: Path) -> None:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 9):
        region = "us" if v % 2 else "eu"
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 100, 50, region), region)])
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  checkpoint: {{engine: local}}\n"
        f"tables:\n  - name: optimized\n    uri: {uri}\n    optimize: {{interval: 1d}}\n"  # its own DAG: min_interval reads this DAG's XComs
    )
    runner = dag_runner(config)  # both runs in one Airflow process
    first, logs = runner.run()
    assert first["state"] == "success" and first["tasks"]["optimize"] == "success", first
    record = first["xcom"]["optimize"]
    assert (record["files_before"], record["files_after"], record["bins"], record["commits"]) == (8, 2, 2, 1), record
    assert "optimize: compacted 8 file(s)" in logs, logs[-4000:]
    with open_table(uri, coordinator=spec) as table:
        snap = load_ratified_snapshot(table)
    assert snap.version == 9 and len(live_adds(snap.files)) == 2

    second, logs = runner.run({"skip_wait": True})
    assert second["state"] == "success" and second["tasks"]["optimize"] == "skipped", second
    assert "min_interval is 24.0 h" in logs, logs[-4000:]
