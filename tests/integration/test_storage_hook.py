"""``DeltaStorageHook`` against moto's S3 and STS server: the Test button makes a real listing and
answers truthfully; an ``aws`` connection can be reused; a role's session is shared and refreshable."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.hooks.storage import DeltaStorageHook
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.servers import FAKE_AWS, free_port

pytestmark = pytest.mark.integration


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def storage_conn(monkeypatch: pytest.MonkeyPatch, endpoint: str, **extra: Any) -> DeltaStorageHook:
    connection(monkeypatch, "lake", conn_type="delta_storage", login=FAKE_AWS["AWS_ACCESS_KEY_ID"], password=FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
               extra={"endpoint_url": endpoint, "region_name": "us-east-1", **extra})
    return DeltaStorageHook("lake")


def test_the_test_button_lists_a_tables_delta_log(s3_bucket: tuple[str, dict], s3_endpoint: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, options = s3_bucket
    uri = f"s3://{bucket}/tables/orders"
    open_coordinator(f"local://{tmp_path}/c.db?create=true", options).commit(uri, 0, create_actions(ict=True))
    ok, message = storage_conn(monkeypatch, s3_endpoint, test_location=uri).test_connection()
    assert ok and message == f"listed s3://{bucket}/tables/orders/_delta_log: 1 entry", message
    ok, message = storage_conn(monkeypatch, s3_endpoint).test_connection()  # no location: the bucket list
    assert ok and message.startswith("listed the bucket list:"), message


def test_the_test_button_reports_an_unreachable_endpoint_or_a_missing_bucket(s3_endpoint: str, aws_env: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    ok, message = storage_conn(monkeypatch, closed, test_location="s3://lake/t", storage_options=json.dumps({"config_kwargs": {"retries": {"max_attempts": 1}}})).test_connection()
    assert not ok and "127.0.0.1" in message, message
    ok, message = storage_conn(monkeypatch, s3_endpoint, test_location="s3://no-such-bucket-here/t").test_connection()
    assert not ok and "no-such-bucket-here" in message, message


def test_an_aws_connection_is_reused_and_a_role_assumed_once(s3_bucket: tuple[str, dict], s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, _ = s3_bucket
    for key in FAKE_AWS:  # only the connections may provide credentials
        monkeypatch.delenv(key, raising=False)
    connection(monkeypatch, "aws_default", conn_type="aws", login=FAKE_AWS["AWS_ACCESS_KEY_ID"], password=FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
               extra={"region_name": "us-east-1", "service_config": {"s3": {"endpoint_url": s3_endpoint}}})
    connection(monkeypatch, "lake", conn_type="delta_storage", extra={"aws_conn_id": "aws_default", "test_location": f"s3://{bucket}/"})
    hook = DeltaStorageHook("lake")
    assert hook.get_storage_options(f"s3://{bucket}/t") == {
        "key": FAKE_AWS["AWS_ACCESS_KEY_ID"], "secret": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    }
    assert hook.test_connection()[0]
    # a role on top: the provider's session assumes it (moto's STS) once for however many
    # hooks and calls, and s3fs gets that refreshable session, never fixed temporary keys
    connection(monkeypatch, "lake", conn_type="delta_storage",
               extra={"aws_conn_id": "aws_default", "role_arn": "arn:aws:iam::123456789012:role/delta", "endpoint_url": s3_endpoint})
    import botocore.client

    real = botocore.client.BaseClient._make_api_call
    calls: list[str] = []

    def counted(client: Any, operation: str, params: Any) -> Any:
        calls.append(operation)
        return real(client, operation, params)

    with mock.patch.object(botocore.client.BaseClient, "_make_api_call", counted):
        options = [DeltaStorageHook("lake").get_storage_options(f"s3://{bucket}/t{i}") for i in range(3)]
        assert DeltaStorageHook("lake").test_connection()[0]
    assert calls.count("AssumeRole") == 1, calls
    assert options[0]["session"] is options[2]["session"] and not {"key", "secret", "token"} & set(options[0])
    frozen = options[0]["session"].frozen_credentials()
    assert frozen["AccessKeyId"] != FAKE_AWS["AWS_ACCESS_KEY_ID"] and frozen["Expiration"], "temporary credentials from STS"
    assert "AKIA" not in repr(options) and frozen["SecretAccessKey"] not in repr(options)
