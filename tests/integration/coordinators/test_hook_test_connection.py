"""``DeltaCoordinatorHook.test_connection`` makes one real, read-only call per kind and answers
truthfully: a good connection passes, a wrong database / table / token fails with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook
from tests._infra.servers import FAKE_AWS
from tests.integration.coordinators._targets import Target

pytestmark = pytest.mark.integration


def hook(monkeypatch: pytest.MonkeyPatch, spec: str, password: str | None = None, **extra: str) -> DeltaCoordinatorHook:
    monkeypatch.setenv("AIRFLOW_CONN_COORD", json.dumps({"conn_type": "delta_coordinator", "host": spec, "password": password, "extra": extra}))
    return DeltaCoordinatorHook("coord")


def wrong(target: Target, tmp_path: Path) -> tuple[str, str]:
    """The same connection with one mistake, and a word the failure message must contain."""
    if target.kind == "local":
        return f"local://{tmp_path}/typo.db", "does not exist"
    if target.kind == "dynamodb":
        return target.spec.replace("dynamodb://", "dynamodb://missing_", 1), "does not exist"
    return target.spec.replace("/main.default.", "/main.default.missing_", 1), "404"


def test_a_good_and_a_wrong_connection(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = target.spec.replace("?create=true", "")
    ok, message = hook(monkeypatch, spec).test_connection()
    assert ok, message
    assert {"local": "1 table(s) registered", "dynamodb": "DynamoDB table ACTIVE"}.get(target.kind, "table found") in message
    bad_spec, needle = wrong(target, tmp_path)
    ok, message = hook(monkeypatch, bad_spec).test_connection()
    assert not ok and needle in message, message
    assert not (tmp_path / "typo.db").exists()


def test_a_wrong_unity_catalog_token_fails(uc_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELTA_MAINTENANCE_UC_TOKEN", raising=False)
    spec = f"unity-catalog://{uc_server.host}/main.default.t?api=v1&tls=false"
    ok, message = hook(monkeypatch, spec, password="not-the-token").test_connection()
    assert not ok and "not-the-token" not in message, message


def test_dynamodb_credentials_from_a_reused_aws_connection(dynamodb_endpoint: str, dynamodb_table_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator

    for key in FAKE_AWS:  # only the aws connection may provide credentials
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    spec = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    DynamoDBCoordinator(dynamodb_table_name, region="us-east-1", endpoint=dynamodb_endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing").create_dynamodb_table()
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps({"conn_type": "aws", "login": "testing", "password": "testing",
                                                               "extra": {"region_name": "us-east-1", "aws_session_token": "session-tok"}}))
    reused = hook(monkeypatch, spec, aws_conn_id="aws_default")
    assert reused.test_connection() == (True, f"DynamoDB coordinator (table {dynamodb_table_name}, us-east-1 at {dynamodb_endpoint}): DynamoDB table ACTIVE, key tableId")
    creds = reused.get_client().client._request_signer._credentials
    assert (creds.access_key, creds.token) == ("testing", "session-tok")
