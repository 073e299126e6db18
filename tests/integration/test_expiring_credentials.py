"""Credentials that outlive their keys: a role whose keys expire during a deferred sensor.

moto serves S3, DynamoDB and STS; ``ExpiringCredentialsProxy`` in front of it makes the role's keys
expire a few seconds after they are issued and refuses them afterwards exactly as AWS does. The
connections are what a user configures: an ``aws`` connection with a role, a storage and a
coordinator connection that reuse it. The real sensor defers, and the real trigger's run loop (as
the triggerer runs it, rebuilt from its serialised form) polls across several expiries until a
new commit is ratified.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.expiring_sts import ExpiringCredentialsProxy
from tests._infra.servers import FAKE_AWS, s3_storage_options

pytestmark = pytest.mark.integration

LIFETIME = 4.0  # seconds an assumed key lives behind the proxy
ROLE = "arn:aws:iam::123456789012:role/delta-maintenance"


@pytest.fixture
def expiring(s3_endpoint: str, dynamodb_endpoint: str) -> Iterator[ExpiringCredentialsProxy]:
    """moto's S3 and STS, DynamoDB Local, behind one proxy whose assumed keys live ``LIFETIME``."""
    proxy = ExpiringCredentialsProxy(s3_endpoint, LIFETIME, routes={"dynamodb": dynamodb_endpoint}).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def role_connections(monkeypatch: pytest.MonkeyPatch, endpoint: str, spec: str) -> None:
    """An ``aws`` connection with long-lived keys and a role; Delta connections that reuse it. No
    credentials in the environment: only the connections may provide them."""
    for key in [k for k in list(__import__("os").environ) if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", endpoint)  # no STS call may ever leave this machine
    aws = {"conn_type": "aws", "login": FAKE_AWS["AWS_ACCESS_KEY_ID"], "password": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
           "extra": {"region_name": "us-east-1", "role_arn": ROLE, "endpoint_url": endpoint,
                     "service_config": {"sts": {"endpoint_url": endpoint}, "s3": {"endpoint_url": endpoint}}}}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_LAKE", json.dumps(aws))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "delta_storage", "extra": {"aws_conn_id": "aws_lake", "endpoint_url": endpoint}}))
    monkeypatch.setenv("AIRFLOW_CONN_COMMITS", json.dumps({"conn_type": "delta_coordinator", "host": spec, "extra": {"aws_conn_id": "aws_lake"}}))


def dynamodb_table(dynamodb_endpoint: str, s3_bucket: tuple[str, dict[str, Any]]) -> tuple[str, str, Any]:
    """A table on moto's S3 coordinated through DynamoDB Local, version 0 committed (fixed test
    keys, straight to the servers: the writer is not what is under test)."""
    from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator

    bucket, options = s3_bucket
    name = f"commits_{uuid.uuid4().hex[:8]}"
    DynamoDBCoordinator(name, region="us-east-1", endpoint=dynamodb_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing").create_dynamodb_table()
    uri = f"s3://{bucket}/tables/orders"
    writer = open_coordinator(f"dynamodb://{name}?region=us-east-1&endpoint={dynamodb_endpoint}", options)
    writer.commit(uri, 0, create_actions(ict=True))
    return name, uri, writer


def test_a_deferred_sensor_keeps_polling_across_expiring_role_keys(
    dynamodb_endpoint: str, s3_bucket: tuple[str, dict[str, Any]], expiring: ExpiringCredentialsProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers.common.compat.sdk import TaskDeferred

    from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor
    from airflow_delta_maintenance.triggers.ratified_version import DeltaRatifiedVersionTrigger

    name, uri, writer = dynamodb_table(dynamodb_endpoint, s3_bucket)
    role_connections(monkeypatch, expiring.endpoint, f"dynamodb://{name}?region=us-east-1&endpoint={expiring.endpoint}")
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, delta_coordinator_conn_id="commits", delta_storage_conn_id="lake",
                                        min_new_commits=1, deferrable=True, poke_interval=0.5, timeout=300)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    _, kwargs = deferred.value.trigger.serialize()
    trigger = DeltaRatifiedVersionTrigger(**kwargs)  # as the triggerer rebuilds it

    failed: list[BaseException] = []

    def commit_later() -> None:
        # once the trigger has polled DynamoDB with fresh keys after the first ones expired, with two
        # keys or more (what is asserted below): an event, not a fixed three lifetimes
        deadline = time.monotonic() + 8 * LIFETIME
        while time.monotonic() < deadline and not (expiring.served_after_first_expiry("dynamodb") and len(expiring.keys_used("dynamodb")) >= 2):
            time.sleep(0.1)
        try:
            writer.commit(uri, 1, [{"add": {"path": "part-1.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}])
        except BaseException as exc:
            failed.append(exc)
            raise

    committer = threading.Thread(target=commit_later)
    committer.start()
    try:
        event = asyncio.run(asyncio.wait_for(trigger.run().asend(None), timeout=40))
    finally:
        committer.join()
    assert not failed, failed
    assert event.payload["status"] == "success", event.payload
    assert event.payload["latest_ratified_version"] == 1
    assert sensor.execute_complete({}, event.payload)["version"] == 1
    # the run crossed expiries: DynamoDB was polled with fresh keys after the first ones expired,
    # with several keys in turn, and no request was ever refused
    assert expiring.served_after_first_expiry("dynamodb"), expiring.log
    assert len(expiring.keys_used("dynamodb")) >= 2
    assert not expiring.refused()


def test_expired_keys_are_a_transient_error_for_the_sensor_and_dynamodb(s3_endpoint: str, dynamodb_endpoint: str, s3_bucket: tuple[str, dict[str, Any]],
                                                                         expiring: ExpiringCredentialsProxy) -> None:
    """Keys that expired anyway (fixed temporary keys from a connection): DynamoDB's
    ``ExpiredTokenException`` and S3's ``ExpiredToken`` are transient — polled again, not a failure."""
    import boto3

    from airflow_delta_maintenance.coordinators.errors import CoordinatorError
    from airflow_delta_maintenance.deltalog.storage import open_table_storage
    from airflow_delta_maintenance.maintenance.operations.sensing import is_transient

    name, uri, _ = dynamodb_table(dynamodb_endpoint, s3_bucket)
    sts = boto3.client("sts", endpoint_url=expiring.endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    keys = sts.assume_role(RoleArn=ROLE, RoleSessionName="test", DurationSeconds=900)["Credentials"]
    time.sleep(LIFETIME + 0.5)
    creds = {"login": keys["AccessKeyId"], "password": keys["SecretAccessKey"], "token": keys["SessionToken"]}
    client = open_coordinator(f"dynamodb://{name}?region=us-east-1&endpoint={expiring.endpoint}", s3_storage_options(s3_endpoint), credentials=creds)
    with pytest.raises(CoordinatorError) as refused:
        client.check()  # DescribeTable
    assert refused.value.retryable and is_transient(refused.value), refused.value
    options = {"key": keys["AccessKeyId"], "secret": keys["SecretAccessKey"], "token": keys["SessionToken"],
               "client_kwargs": {"endpoint_url": expiring.endpoint, "region_name": "us-east-1"}}
    # the sensor's storage call (is there a _delta_log?): S3 answers a listing with ExpiredToken
    # (a HEAD's 400 has no body, on AWS as here: it cannot be told from another bad request)
    with pytest.raises(PermissionError) as storage:
        open_table_storage(uri, options).has_log_dir()
    assert is_transient(storage.value), repr(storage.value)
    assert len(expiring.refused()) >= 2
