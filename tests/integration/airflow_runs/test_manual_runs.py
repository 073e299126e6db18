"""Manual runs of the generated DAG (dag.test(), a manual run) whose Params ask for work do it
without waiting for new commits: every ratified commit is already published (as when the scheduled
run Airflow creates on "Unpause on trigger" got there first), and the sensor would wait in vain."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from ..fleet.fleet import build_table
from .test_maintenance_dag import run_dag

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@pytest.fixture
def published_table(tmp_path: Path) -> tuple[str, Path]:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    open_coordinator(spec + "?create=true").close()
    build_table(spec, uri, ratified=7, published=7)  # nothing pending: the sensor has nothing to see
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  schedule: '@hourly'\n"
        "  sensor: {min_new_commits: 1, timeout_minutes: 0.3, poke_interval_seconds: 2, mode: poke}\n"
        "  checkpoint: {interval: 100, engine: local}\n  compaction: false\n  cleanup: {mode: dry-run}\n"
        f"tables:\n  - name: orders\n    uri: {uri}\n"
    )
    return uri, config


def test_force_checkpoint_writes_its_checkpoint_without_new_commits(airflow_home: Path, published_table: tuple[str, Path]) -> None:
    uri, config = published_table
    run, logs = run_dag(airflow_home, config, {"force_checkpoint": True})
    assert run["state"] == "success" and run["tasks"]["checkpoint"] == "success", run  # old code: the wait timed out, checkpoint skipped
    assert "wait: skipped — skip requested" in logs, logs[-3000:]
    assert run["xcom"]["checkpoint"]["version"] == 7 and not run["xcom"]["checkpoint"]["skipped"]
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [7]


def test_a_manual_cleanup_that_deletes_runs_and_a_plain_manual_run_still_waits(airflow_home: Path, published_table: tuple[str, Path]) -> None:
    _, config = published_table
    run, _ = run_dag(airflow_home, config, {"dry_run": False})
    assert run["tasks"]["cleanup"] == "success" and run["xcom"]["cleanup"]["dry_run"] is False, run
    plain, logs = run_dag(airflow_home, config)  # asks for nothing: waits for new commits as a scheduled run does
    assert plain["tasks"]["wait_for_ratified_commits"] == "skipped" and plain["tasks"]["checkpoint"] == "skipped", plain
    assert "nothing new before the timeout" in logs, logs[-3000:]


def test_engine_auto_in_tables_yaml_checkpoints_on_the_worker(airflow_home: Path, published_table: tuple[str, Path]) -> None:
    uri, config = published_table
    config.write_text(config.read_text().replace("engine: local", "engine: auto"))
    run, logs = run_dag(airflow_home, config, {"force_checkpoint": True})
    assert run["tasks"]["checkpoint"] == "success", run  # old code: "parameter engine must be spark or local, got 'auto'"
    assert run["xcom"]["checkpoint"]["engine"] == "local" and run["xcom"]["checkpoint"]["version"] == 7
    assert "engine auto: local (the log to replay is" in logs, logs[-3000:]
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [7]
