"""What a person sees of a generated DAG before running it: a description and titled Params."""

from __future__ import annotations

from datetime import timedelta

from airflow_delta_maintenance.dag_builders.maintenance_dag import build_maintenance_dag
from airflow_delta_maintenance.maintenance.config.tables import parse_config


def test_generated_dags_have_a_description_titled_params_and_a_validated_schedule() -> None:
    (table,) = parse_config({"defaults": {"coordinator": "local:///data/c.db", "schedule": "90m"}, "tables": [{"name": "orders", "uri": "s3://lake/orders"}]})
    dag = build_maintenance_dag(table)
    assert dag.description == "Delta log maintenance of orders (s3://lake/orders)"
    titles = {name: param.schema.get("title") for name, param in dag.params.items()}
    assert titles == {"dry_run": "Dry run", "force_checkpoint": "Force a checkpoint", "target_version": "Target version", "skip_wait": "Skip the wait"}
    assert all(param.description for param in dag.params.values())
    assert table.airflow_schedule == timedelta(minutes=90)
