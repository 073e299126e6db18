from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_delta_maintenance.coordinators.errors import CoordinatorError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.errors import PublishForkError
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator
from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator

OPERATORS = [DeltaPublishCommitsOperator, DeltaCheckpointOperator, DeltaLogCompactionOperator, DeltaLogCleanupOperator]


@pytest.mark.parametrize("cls", OPERATORS)
def test_template_fields_are_attributes(cls: type) -> None:
    op = cls(task_id="t", table_uri="/x", coordinator_spec="local:///tmp/c.db")
    for name in cls.template_fields:
        assert hasattr(op, name), name


def test_publish_then_idempotent_retry(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    op = DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec, up_to_version="{{ params.x }}")
    op.up_to_version = "8"  # as rendered
    first = op.execute({})
    assert (first["from_version"], first["to_version"], first["count"]) == (1, 8, 8) and first["latest_published_version"] == 8
    op.up_to_version = None
    second = op.execute({})
    assert (second["from_version"], second["to_version"], second["count"]) == (9, 12, 4)
    third = op.execute({})
    assert third["count"] == 0 and third["skipped"] and third["reason"] == "nothing to publish: latest ratified v12 is published"


def test_publish_fork_fails_permanently(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    op = DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec)
    with mock.patch("airflow_delta_maintenance.operators.publish.publish_ratified_commits", side_effect=PublishForkError("forked at 3", version=3)):
        with pytest.raises(AirflowFailException, match="forked at 3"):
            op.execute({})
    with mock.patch("airflow_delta_maintenance.operators.publish.publish_ratified_commits", side_effect=CoordinatorError("busy", retryable=True)):
        with pytest.raises(AirflowException, match="will retry"):
            op.execute({})


def test_local_checkpoint_compaction_and_dry_run_cleanup(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    coord = {"coordinator_spec": spec}
    compacted = DeltaLogCompactionOperator(task_id="k", table_uri=uri, interval=5, **coord).execute({})
    assert (compacted["from_version"], compacted["to_version"], compacted["count"]) == (1, 10, 2)
    not_due = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="local", interval=20, **coord).execute({})
    assert not_due["skipped"] and "only 13 commits" in not_due["reason"]
    written = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="local", interval=10, **coord).execute({})
    assert written["version"] == 12 and not written["skipped"] and written["kind"] == "classic" and written["count"] == 14
    again = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="local", interval=10, **coord).execute({})
    assert again["skipped"]
    cleanup = DeltaLogCleanupOperator(task_id="d", table_uri=uri, **coord).execute({})
    assert cleanup["dry_run"] and "delete" not in cleanup
    assert len(list_log_files(open_table_storage(uri)).commits) == 13


def test_spark_checkpoint_submits_through_the_spark_provider_and_verifies(coordinated_table: tuple[str, str], tmp_path: Path) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    op = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="spark", interval=5, spark_conf={"spark.executor.memory": "1g"})
    with mock.patch("airflow_delta_maintenance.hooks.spark.DeltaSparkSubmitHook.submit") as submit:
        with pytest.raises(AirflowException, match="no complete checkpoint"):  # exit code 0 but nothing written
            op.execute({})
    app = submit.call_args.args[0]
    assert app.endswith("spark_jobs/checkpoint.py")
    hook = op._hook
    assert hook._application_args == ["--table-uri", uri, "--version", "12"] and hook._conf["spark.executor.memory"] == "1g"
    assert hook._connection["master"] == "local[*]"  # no spark_default connection: local mode
    with mock.patch.object(hook, "on_kill") as kill:
        op.on_kill()
    kill.assert_called_once()


def test_openlineage_facets_name_the_table(coordinated_table: tuple[str, str]) -> None:
    _spec, uri = coordinated_table
    lineage = DeltaLogCompactionOperator(task_id="k", table_uri="s3://lake/tables/orders").get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://lake", "tables/orders")] == [(d.namespace, d.name) for d in lineage.outputs]
    local = DeltaLogCompactionOperator(task_id="k", table_uri=uri).get_openlineage_facets_on_complete(None)
    assert local.outputs[0].namespace == "file" and local.outputs[0].name == uri


def test_auto_engine_checkpoints_a_small_table_on_the_worker(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    with mock.patch("airflow_delta_maintenance.hooks.spark.DeltaSparkSubmitHook.submit") as submit:
        written = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="auto", interval=10, coordinator_spec=spec).execute({})
    submit.assert_not_called()
    assert written["version"] == 12 and not written["skipped"] and written["engine"] == "local" and written["count"] == 14
    assert "engine auto: local (the log to replay is" in capsys.readouterr().out  # the task log


def test_auto_engine_submits_the_spark_job_above_its_limit(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="p", table_uri=uri, coordinator_spec=spec).execute({})
    op = DeltaCheckpointOperator(task_id="c", table_uri=uri, engine="auto", interval=5, coordinator_spec=spec, auto_local_max_log_bytes=100)
    with mock.patch("airflow_delta_maintenance.hooks.spark.DeltaSparkSubmitHook.submit") as submit:
        with pytest.raises(AirflowException, match="no complete checkpoint"):  # the mocked job wrote nothing
            op.execute({})
    assert submit.call_args.args[0].endswith("spark_jobs/checkpoint.py")
    assert re.search(r"engine auto: spark \(the log to replay is [\d.]+ KiB > 100 bytes\)", capsys.readouterr().out)


def test_unknown_engine_is_refused_naming_the_choices() -> None:
    with pytest.raises(AirflowFailException, match="spark, local or auto, got 'flink'"):
        DeltaCheckpointOperator(task_id="c", table_uri="/nowhere", engine="flink").execute({})
