from __future__ import annotations

import json

import pytest

from airflow_delta_maintenance.coordinators.local import LocalCoordinator
from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook
from airflow_delta_maintenance.hooks.storage import DeltaStorageHook


def test_storage_connection_becomes_s3fs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1", "storage_options": json.dumps({"anon": False})}
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_STORAGE_DEFAULT", json.dumps({"conn_type": "delta_storage", "login": "AKID", "password": "s3cr3t", "extra": extra}))
    options = DeltaStorageHook().get_storage_options("s3://bucket/table")
    assert options == {"key": "AKID", "secret": "s3cr3t", "anon": False, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}}
    assert DeltaStorageHook().get_storage_options("/local/table") == {}


def test_coordinator_connection_spec_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_COORDINATOR_DEFAULT", json.dumps({"conn_type": "delta_coordinator", "host": f"local://{tmp_path}/c.db?create=true"}))
    client = DeltaCoordinatorHook().get_client()
    assert isinstance(client, LocalCoordinator) and client.database == f"{tmp_path}/c.db"
    other = DeltaCoordinatorHook(spec=f"local://{tmp_path}/d.db?create=true").get_client()
    assert other.database == f"{tmp_path}/d.db"


def test_missing_spec_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_COORDINATOR_DEFAULT", json.dumps({"conn_type": "delta_coordinator"}))
    with pytest.raises(ValueError, match="coordinator spec"):
        DeltaCoordinatorHook().get_client()


def test_the_storage_connection_is_read_once_per_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from unittest import mock

    monkeypatch.setenv("AIRFLOW_CONN_DELTA_STORAGE_DEFAULT", json.dumps({"conn_type": "delta_storage", "login": "AKID", "password": "s3cr3t"}))
    hook = DeltaStorageHook()
    with mock.patch.object(DeltaStorageHook, "get_connection", side_effect=DeltaStorageHook.get_connection) as lookups:
        for i in range(3):
            assert hook.get_storage_options(f"s3://bucket/t{i}")["key"] == "AKID"
    assert lookups.call_count == 1
