"""``engine: auto`` is the checkpoint engine a user gets without choosing one: in ``tables.yaml``,
in the generated DAG, on ``DeltaCheckpointOperator`` and on the command line — and for a small
table that means the worker, no Spark needed (old default: ``spark``, a JVM for 43 actions)."""

from __future__ import annotations

from pathlib import Path

from airflow_delta_maintenance.cli import build_parser
from airflow_delta_maintenance.dag_builders.maintenance_dag import build_maintenance_dag
from airflow_delta_maintenance.fleet.config import load_fleet
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator


def test_auto_is_the_default_checkpoint_engine_everywhere(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text("defaults:\n  coordinator: local:///data/c.db\ntables:\n  - {name: orders, uri: /t/orders}\n")
    [table] = load_fleet(config).tables
    assert table.checkpoint.engine == "auto"
    assert build_maintenance_dag(table).get_task("checkpoint").engine == "auto"
    assert DeltaCheckpointOperator(task_id="checkpoint", table_uri="/t/orders").engine == "auto"
    assert build_parser().parse_args(["checkpoint", "/t/orders"]).engine == "auto"


def test_the_default_engine_checkpoints_a_small_table_on_the_worker(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec).execute({})
    record = DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, coordinator_spec=spec, force=True).execute({})
    assert record["engine"] == "local" and record["version"] == 12 and not record["skipped"], record
