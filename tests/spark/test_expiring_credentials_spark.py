"""A Spark checkpoint job that outlives its role's keys.

The table lives on moto's S3 behind ``ExpiringCredentialsProxy``, whose assumed-role keys expire
``LIFETIME`` seconds after they are issued — less than a local Spark job takes to start. The
operator runs as a user configures it: an ``aws`` connection with a role, a storage connection
reusing it, a Spark connection to ``local[2]`` with the hadoop-aws jars. The job reads the log
(Python, s3fs) and writes the checkpoint (the JVM, s3a) long after the first keys expired, and
must succeed without a single refused request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests._infra.expiring_sts import ExpiringCredentialsProxy
from tests._infra.jars import jar_list
from tests.integration.test_expiring_credentials import ROLE
from tests.spark.test_cluster import SMALL_JOB_CONF, check_checkpoint_selected, write_versions

pytestmark = [pytest.mark.spark, pytest.mark.integration]

LIFETIME = 8.0


def test_a_spark_checkpoint_job_outlives_its_role_keys(s3_endpoint: str, s3_bucket: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator

    bucket, storage_options = s3_bucket
    uri = f"s3://{bucket}/tables/events"
    ids: dict[int, list[int]] = {}
    write_versions(uri, s3_endpoint, ids, 6)  # versions 0..5, by the deltalake wheel straight to moto
    proxy = ExpiringCredentialsProxy(s3_endpoint, LIFETIME).start()
    try:
        endpoint = proxy.endpoint
        for key in [k for k in os.environ if k.startswith("AWS_")]:  # credentials come from the connections only
            monkeypatch.delenv(key)
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", endpoint)  # no STS call may leave this machine
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        aws = {"conn_type": "aws", "login": "testing", "password": "testing",
               "extra": {"region_name": "us-east-1", "role_arn": ROLE, "endpoint_url": endpoint, "service_config": {"sts": {"endpoint_url": endpoint}}}}
        monkeypatch.setenv("AIRFLOW_CONN_AWS_LAKE", json.dumps(aws))
        monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "delta_storage", "extra": {"aws_conn_id": "aws_lake", "endpoint_url": endpoint,
                                                                                                      "region_name": "us-east-1"}}))
        jars = ",".join(j for j in jar_list("delta-spark") if not Path(j).name.startswith(("delta-", "aws-java-sdk-")))
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"jars": jars, "conf": SMALL_JOB_CONF}}))
        operator = DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, delta_storage_conn_id="lake", spark_conn_id="spark_local",
                                           engine="spark", interval=1)
        result = operator.execute({})
        assert result["version"] == 5 and not result["skipped"], result
        # the job ran across expiries: S3 served requests signed with keys issued after the first
        # ones had expired, by several keys in turn, and refused none
        after = proxy.served_after_first_expiry("s3")
        assert after and len(proxy.keys_used("s3")) >= 3, proxy.log
        assert [s for s in after if "aws-sdk-java" in s.agent], "the JVM (s3a) made no request after the first keys expired"
        assert not proxy.refused(), proxy.refused()
        # no key in the job's command line, its environment or the Spark conf it was given
        hook = operator._hook
        shown = json.dumps([hook._build_spark_submit_command(""), hook.plan.conf, hook.process_env])
        assert proxy.issued and not [k for k in proxy.issued if k in shown]
        assert hook.plan.conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("ProfileCredentialsProvider")
    finally:
        proxy.stop()
    check_checkpoint_selected(uri, storage_options, s3_endpoint, 5, ids)
