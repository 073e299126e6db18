"""The Spark engine on Azure and GCS tables: the checkpoint job through spark-submit, as the
operators and the CLI run it, on Azurite (abfs://, hadoop-azure's ABFS driver in its Blob-endpoint
mode) and fake-gcs-server (the Cloud Storage connector), read back by our reader and by the
``deltalake`` wheel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.spark.jobs import checkpoint_job, verify_checkpoint
from airflow_delta_maintenance.maintenance.spark.submit import run_spark_submit
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.jars import DELTA_SPARK, GCS_CONNECTOR, HADOOP_AZURE, jar_list
from tests._infra.store_servers import AZURITE_ACCOUNT, AZURITE_KEY, Bucket
from tests.helpers.tables import bind_table

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


def published_table(uri: str, options: dict[str, Any], tmp_path: Path, versions: int = 6) -> Any:
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true", options)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, versions):
        client.commit(uri, v, [add(f"f{v}")])
    store = open_table_storage(uri, options)
    publish_ratified_commits(bind_table(store, client))
    return store


def wheel_options_azurite(container: Bucket) -> dict[str, str]:
    """The wheel (object_store) on Azurite: its endpoint (the account URL) and plain HTTP."""
    return {"azure_storage_account_name": AZURITE_ACCOUNT, "azure_storage_account_key": AZURITE_KEY,
            "azure_storage_endpoint": f"{container.store.endpoint}/{AZURITE_ACCOUNT}", "azure_allow_http": "true"}


def test_spark_checkpoint_on_azurite_reads_back_in_the_wheel(azurite_container: Bucket, tmp_path: Path) -> None:
    import deltalake

    uri = f"abfss://{azurite_container.name}@{AZURITE_ACCOUNT}.dfs.core.windows.net/tables/spark"
    options = azurite_container.storage_options  # a connection string with Azurite's key: the credentials file carries it
    store = published_table(uri, options, tmp_path)
    job = checkpoint_job(uri, 5, options, jars=",".join(jar_list(DELTA_SPARK) + jar_list(HADOOP_AZURE)))
    assert "connection_string" in job.credentials["storage_options"] and "connection_string" not in json.dumps(job.env_vars)
    out = run_spark_submit(job, "local[2]")
    assert json.loads(out.strip().splitlines()[-1])["version"] == 5
    assert verify_checkpoint(store, 5).version == 5
    expected = {f"f{v}" for v in range(1, 6)}
    assert load_snapshot(uri, storage_options=options).active_file_keys() == {(p, None) for p in expected}
    dt = deltalake.DeltaTable(f"az://{azurite_container.name}/tables/spark", storage_options=wheel_options_azurite(azurite_container))
    assert dt.version() == 5 and set(dt.get_add_actions(flatten=True).column("path").to_pylist()) == expected
    # the wheel starts from our checkpoint: the commits before it are gone and it still reads
    for v in range(5):
        store.delete(f"{v:020d}.json")
    dt = deltalake.DeltaTable(f"az://{azurite_container.name}/tables/spark", storage_options=wheel_options_azurite(azurite_container))
    assert set(dt.get_add_actions(flatten=True).column("path").to_pylist()) == expected


def test_spark_checkpoint_on_fake_gcs(fake_gcs_bucket: Bucket, tmp_path: Path) -> None:
    uri = f"gs://{fake_gcs_bucket.name}/tables/spark"
    options = fake_gcs_bucket.storage_options
    store = published_table(uri, options, tmp_path)
    out = run_spark_submit(checkpoint_job(uri, 5, options, jars=",".join(jar_list(DELTA_SPARK) + jar_list(GCS_CONNECTOR))), "local[2]")
    assert json.loads(out.strip().splitlines()[-1])["version"] == 5
    assert verify_checkpoint(store, 5).version == 5
    assert load_snapshot(uri, storage_options=options).active_file_keys() == {(f"f{v}", None) for v in range(1, 6)}
