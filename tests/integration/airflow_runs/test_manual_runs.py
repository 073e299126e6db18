"""Manual runs of the generated DAG (dag.test(), a manual run) whose Params ask for work do it
without waiting for new commits: every ratified commit is already published (as when the scheduled
run Airflow creates on "Unpause on trigger" got there first), and the sensor would wait in vain.

One tables.yaml with a table per test (each test acts on its own DAG) and one Airflow process for
the module's runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

from ..fleet.fleet import build_table
from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def published_tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """Tables ``forced``, ``cleaned`` and ``auto`` (its checkpoint engine ``auto``), all published."""
    root = tmp_path_factory.mktemp("manual")
    spec = f"local://{root}/coordinator.db"
    open_coordinator(spec + "?create=true").close()
    uris = {name: str(root / name) for name in ("forced", "cleaned", "auto")}
    for uri in uris.values():
        build_table(spec, uri, ratified=7, published=7)  # nothing pending: the sensor has nothing to see
    config = root / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  schedule: '@hourly'\n"
        "  sensor: {min_new_commits: 1, timeout_minutes: 0.3, poke_interval_seconds: 2, mode: poke}\n"
        "  checkpoint: {interval: 100, engine: local}\n  compaction: false\n  cleanup: {mode: dry-run}\n"
        f"tables:\n  - name: forced\n    uri: {uris['forced']}\n  - name: cleaned\n    uri: {uris['cleaned']}\n"
        f"  - name: auto\n    uri: {uris['auto']}\n    checkpoint: {{interval: 100, engine: auto}}\n"
    )
    return uris, config


@pytest.fixture(scope="module")
def runner(airflow_home: Path, published_tables: tuple[dict[str, str], Path]) -> Iterator[DagRunner]:
    with DagRunner(airflow_home, published_tables[1]) as runner:
        yield runner


def test_force_checkpoint_writes_its_checkpoint_without_new_commits(runner: DagRunner, published_tables: tuple[dict[str, str], Path]) -> None:
    uri = published_tables[0]["forced"]
    run, logs = runner.run({"force_checkpoint": True}, "delta_maintenance__forced")
    assert run["state"] == "success" and run["tasks"]["checkpoint"] == "success", run  # old code: the wait timed out, checkpoint skipped
    assert "wait: skipped — skip requested" in logs, logs[-3000:]
    assert run["xcom"]["checkpoint"]["version"] == 7 and not run["xcom"]["checkpoint"]["skipped"]
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [7]


def test_a_manual_cleanup_that_deletes_runs_and_a_plain_manual_run_still_waits(runner: DagRunner) -> None:
    run, _ = runner.run({"dry_run": False}, "delta_maintenance__cleaned")
    assert run["tasks"]["cleanup"] == "success" and run["xcom"]["cleanup"]["dry_run"] is False, run
    plain, logs = runner.run(None, "delta_maintenance__cleaned")  # asks for nothing: waits for new commits as a scheduled run does
    assert plain["tasks"]["wait_for_ratified_commits"] == "skipped" and plain["tasks"]["checkpoint"] == "skipped", plain
    assert "nothing new before the timeout" in logs, logs[-3000:]


def test_engine_auto_in_tables_yaml_checkpoints_on_the_worker(runner: DagRunner, published_tables: tuple[dict[str, str], Path]) -> None:
    uri = published_tables[0]["auto"]
    run, logs = runner.run({"force_checkpoint": True}, "delta_maintenance__auto")
    assert run["tasks"]["checkpoint"] == "success", run  # old code: "parameter engine must be spark or local, got 'auto'"
    assert run["xcom"]["checkpoint"]["engine"] == "local" and run["xcom"]["checkpoint"]["version"] == 7
    assert "engine auto: local (the log to replay is" in logs, logs[-3000:]
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [7]
