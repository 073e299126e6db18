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


def test_the_optimize_section_reaches_the_generated_dags_task_spark_engine_included() -> None:
    """What ``optimize:`` says is what the DAG's optimize task runs: the Spark engine with its
    connection, conf and jars, the sizes, the interval; a table without the section has no task."""
    (table, plain) = parse_config({"defaults": {"publish": False}, "tables": [
        {"name": "orders", "uri": "s3://lake/orders", "optimize": {
            "engine": "spark", "spark_conn_id": "spark_cluster", "spark_conf": {"spark.executor.cores": 2}, "spark_jars": "/j/hadoop-aws.jar",
            "target_file_size": "256MB", "max_bytes": "10GiB", "interval": "12h"}},
        {"name": "events", "uri": "/lake/events"},
    ]})
    task = build_maintenance_dag(table).get_task("optimize")
    assert (task.engine, task.spark_conn_id, task.spark_conf, task.spark_jars) == ("spark", "spark_cluster", {"spark.executor.cores": "2"}, "/j/hadoop-aws.jar")
    assert (task.target_file_size, task.max_bytes, task.min_interval) == ("256MB", "10GiB", "12h")
    assert "optimize" not in build_maintenance_dag(plain).task_dict
