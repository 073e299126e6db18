"""VACUUM's Spark engine as users run it: ``DeltaVacuumOperator(engine="spark")`` with real Airflow
connections, on the Spark standalone cluster over S3 (moto), as ``test_cluster`` sets them up.

One table written by the ``deltalake`` wheel (appends, a delete: removed files), strays planted
beside its files; the Spark engine's listing job and delete job do what the worker engine plans:
the same files, deleted; hidden names and the log untouched; the head still reads as written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.vacuum import run_vacuum
from airflow_delta_maintenance.maintenance.table.maintained import open_table
from tests._infra.servers import FAKE_AWS
from tests._infra.spark import StandaloneCluster
from tests.spark.test_cluster import SMALL_JOB_CONF, deltalake_options, s3a_jars, write_versions

# two spark-submits (the listing, the deletions): ~2 min on a busy 2-core machine
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

STRAYS = ["p=p0/stray-in-partition.parquet", "stray-root.parquet", "deep/a/b.parquet"]
HIDDEN = ["_tmp/x.parquet", ".hidden/y.parquet", "p=p1/.z.parquet"]


def test_the_spark_engine_lists_and_deletes_what_the_worker_plans_on_the_cluster_over_s3(
    spark_standalone: StandaloneCluster, s3_bucket: tuple[str, dict[str, Any]], s3_endpoint: str, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import deltalake

    from airflow_delta_maintenance.operators.vacuum import DeltaVacuumOperator

    bucket, storage_options = s3_bucket
    uri = f"s3://{bucket}/tables/vacuumed"
    ids: dict[int, list[int]] = {}
    write_versions(uri, s3_endpoint, ids, 5)  # appends, a delete at v3 (a removed file)
    fs = open_table_storage(uri, storage_options).fs
    for rel in STRAYS + HIDDEN:
        fs.pipe(f"{bucket}/tables/vacuumed/{rel}", b"stray")
    fs.invalidate_cache()
    with open_table(uri, storage_options) as table:  # the worker engine's plan: what the Spark engine must do
        planned = set(run_vacuum(table, retention_ms=0, allow_shorter_retention=True).plan.paths())  # type: ignore[union-attr]
    assert set(STRAYS) <= planned and len(planned) > len(STRAYS), planned

    host, port = spark_standalone.master_url.removeprefix("spark://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": int(port),
                                                               "extra": {"jars": s3a_jars(), "conf": SMALL_JOB_CONF}}))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "delta_storage", "login": FAKE_AWS["AWS_ACCESS_KEY_ID"],
                                                       "password": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
                                                       "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for key in [k for k in os.environ if k.startswith("AWS_")]:  # credentials from the connection only
        monkeypatch.delenv(key)
    record = DeltaVacuumOperator(task_id="vacuum", table_uri=uri, delta_storage_conn_id="lake", spark_conn_id="spark_cluster", engine="spark",
                                 dry_run=False, retention_hours=0, allow_shorter_retention=True).execute({})
    assert record["engine"] == "spark" and record["executed"], record
    assert record["planned_files"] == len(planned) and record["deleted"] == len(planned), record

    fs.invalidate_cache()
    left = {p.split("/tables/vacuumed/", 1)[1] for p in fs.find(f"{bucket}/tables/vacuumed")}
    assert not planned & left, sorted(planned & left)
    assert set(HIDDEN) <= left and not any("_spark_staging" in p for p in left), sorted(left)
    head = max(ids)
    wheel = deltalake.DeltaTable(uri, storage_options=deltalake_options(s3_endpoint))
    assert wheel.version() == head and sorted(wheel.to_pyarrow_table().column("id").to_pylist()) == ids[head]
