"""Coordinator spec strings: what parses, what is refused (naming the bad part), and wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_delta_maintenance.coordinators.dynamodb import DynamoDBCoordinator
from airflow_delta_maintenance.coordinators.errors import InvalidCoordinatorSpecError
from airflow_delta_maintenance.coordinators.local import LocalCoordinator
from airflow_delta_maintenance.coordinators.registry import parse_coordinator_spec, redact_spec
from airflow_delta_maintenance.coordinators.unity_catalog import UnityCatalogCoordinator
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator


@pytest.mark.parametrize(
    ("spec", "kind", "target", "name", "params"),
    [
        ("local:///var/lib/c.db", "local", "/var/lib/c.db", "", {}),
        ("local:///var/lib/c.db?create=true", "local", "/var/lib/c.db", "", {"create": "true"}),
        ("dynamodb://delta_commits?region=eu-west-1", "dynamodb", "delta_commits", "", {"region": "eu-west-1"}),
        ("dynamodb://t?region=us-east-1&endpoint=http://127.0.0.1:8000&table_id=abc", "dynamodb", "t", "",
         {"region": "us-east-1", "endpoint": "http://127.0.0.1:8000", "table_id": "abc"}),
        ("unity-catalog://uc.example.com:8080/main.sales.orders", "unity-catalog", "uc.example.com:8080", "main.sales.orders", {}),
        ("unity-catalog://127.0.0.1:8080/a.b.c?api=preview&tls=false&table_id=x", "unity-catalog", "127.0.0.1:8080", "a.b.c",
         {"api": "preview", "tls": "false", "table_id": "x"}),
    ],
)
def test_specs_parse(spec: str, kind: str, target: str, name: str, params: dict[str, str]) -> None:
    parsed = parse_coordinator_spec(spec)
    assert (parsed.kind, parsed.target, parsed.name, parsed.params) == (kind, target, name, params)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nope", "must look like"),
        ("ftp://x", "unknown kind 'ftp'"),
        ("local://", "database path is missing"),
        ("local:///var/lib/", "database path is missing"),
        ("local:///c.db?mode=ro", "unknown parameter 'mode' for local"),
        ("local://rel/c.db", "must be absolute: local:///rel/c.db"),
        ("local://tmp/coordinator.db?create=true", "must be absolute"),
        ("local:///c.db?create=yes", "create must be true or false"),
        ("dynamodb://t", "region parameter is required"),
        ("dynamodb://?region=x", "expected dynamodb://<dynamodb-table>"),
        ("dynamodb://t/extra?region=x", "expected dynamodb://<dynamodb-table>"),
        ("dynamodb://t?region=x&colour=blue", "unknown parameter 'colour'"),
        ("dynamodb://t?region=x&region=y", "parameter 'region' needs exactly one value"),
        ("dynamodb://t?region=", "parameter 'region' needs exactly one value"),
        ("dynamodb://t?region=x&endpoint=localhost:8000", "endpoint must be an http"),
        ("unity-catalog:///a.b.c", "host is missing"),
        ("unity-catalog://h:1/main.orders", "table name 'main.orders' is not <catalog>.<schema>.<table>"),
        ("unity-catalog://h:1/a..c", "is not <catalog>.<schema>.<table>"),
        ("unity-catalog://h:1/a.b.c?api=v9", "api must be v1 or preview"),
        ("unity-catalog://h:1/a.b.c?tls=yes", "tls must be true or false"),
    ],
)
def test_bad_specs_name_the_problem(spec: str, needle: str) -> None:
    with pytest.raises(InvalidCoordinatorSpecError) as err:
        parse_coordinator_spec(spec)
    assert needle in str(err.value)
    assert isinstance(err.value, ValueError)  # config validation catches ValueError


@pytest.mark.parametrize(
    "spec",
    ["unity-catalog://h:1/a.b.c?token=s3cr3t-value", "unity-catalog://admin:s3cr3t-value@h:1/a.b.c", "dynamodb://t?region=x&secret=s3cr3t-value"],
)
def test_secrets_in_a_spec_are_refused_and_never_echoed(spec: str) -> None:
    with pytest.raises(InvalidCoordinatorSpecError) as err:
        open_coordinator(spec)
    assert "s3cr3t-value" not in str(err.value)
    assert "s3cr3t-value" not in redact_spec(spec)


def test_open_coordinator_builds_each_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = open_coordinator(f"local://{tmp_path}/c.db?create=true")
    assert isinstance(local, LocalCoordinator) and local.database == f"{tmp_path}/c.db"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidCoordinatorSpecError, match="must be absolute"):
        open_coordinator("local://state/c.db?create=true")  # never a database in a worker's working directory
    assert not (tmp_path / "state").exists()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    ddb = open_coordinator("dynamodb://commits?region=eu-west-1&endpoint=http://127.0.0.1:1")
    assert isinstance(ddb, DynamoDBCoordinator) and ddb.describe() == "DynamoDB coordinator (table commits, eu-west-1 at http://127.0.0.1:1)"
    monkeypatch.setenv(UC_TOKEN_ENV, "tok-from-env")
    uc = open_coordinator("unity-catalog://uc:8080/a.b.c?api=preview")
    assert isinstance(uc, UnityCatalogCoordinator) and uc.describe() == "Unity Catalog preview API at https://uc:8080 for a.b.c"
    assert "tok-from-env" not in repr(uc) and "tok-from-env" not in uc.describe()
