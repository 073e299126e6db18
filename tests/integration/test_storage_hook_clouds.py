"""``DeltaStorageHook`` for Azure and Google Cloud Storage tables, driven as a user configures it
(an Airflow connection in the environment): each Azure authentication against Azurite where
Azurite can check it (account key, SAS, a reused wasb connection), the adlfs options of the others,
the gcsfs options of a key, a key file, the default credentials and a reused Google connection.
No secret in the Test button's answer."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.errors import LogFileExistsError
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.hooks.storage import DeltaStorageHook
from tests._infra.store_servers import AZURITE_ACCOUNT, AZURITE_KEY, Bucket

pytestmark = pytest.mark.integration

SA_KEY = {"type": "service_account", "project_id": "lake-project", "private_key_id": "k1", "private_key": "-----BEGIN PRIVATE KEY-----\nFAKE\n-----END PRIVATE KEY-----\n",
          "client_email": "delta@lake-project.iam.gserviceaccount.com", "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def lake(monkeypatch: pytest.MonkeyPatch, password: str | None = None, login: str | None = None, **extra: Any) -> DeltaStorageHook:
    connection(monkeypatch, "lake", conn_type="delta_storage", login=login, password=password, extra=extra)
    return DeltaStorageHook("lake")


def blob_endpoint(container: Bucket) -> str:
    return f"{container.store.endpoint}/{AZURITE_ACCOUNT}"


def creates_atomically(hook: DeltaStorageHook, uri: str) -> None:
    store = open_table_storage(uri, hook.get_storage_options(uri))
    store.put_if_absent(f"{0:020d}.json", b"{}\n")
    with pytest.raises(LogFileExistsError):
        store.put_if_absent(f"{0:020d}.json", b"{}\n")


def test_account_key_connection_on_azurite_and_its_test_button(azurite_container: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"abfss://{azurite_container.name}@{AZURITE_ACCOUNT}.dfs.core.windows.net/tables/orders"
    hook = lake(monkeypatch, AZURITE_KEY, azure_auth="account_key", azure_account_name=AZURITE_ACCOUNT, endpoint_url=blob_endpoint(azurite_container),
                test_location=uri)
    creates_atomically(hook, uri)
    ok, message = hook.test_connection()
    assert (ok and message.endswith("/t/tables/orders/_delta_log: 1 entry")) or (ok and "_delta_log: 1 entry" in message), message
    bad = lake(monkeypatch, "d3Jvbmcta2V5" * 7, azure_account_name=AZURITE_ACCOUNT, endpoint_url=blob_endpoint(azurite_container), test_location=uri)
    ok, message = bad.test_connection()
    assert not ok and "d3Jvbmcta2V5" not in message and AZURITE_KEY not in message, message


def test_sas_connection_on_azurite(azurite_container: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    sas = generate_account_sas(AZURITE_ACCOUNT, AZURITE_KEY, ResourceTypes(service=True, container=True, object=True),
                               AccountSasPermissions(read=True, write=True, list=True, delete=True, create=True),
                               datetime.now(timezone.utc) + timedelta(hours=1))
    hook = lake(monkeypatch, sas, azure_auth="sas", azure_account_name=AZURITE_ACCOUNT, endpoint_url=blob_endpoint(azurite_container))
    creates_atomically(hook, f"az://{azurite_container.name}/t")


@pytest.mark.parametrize("style", ["account key", "shared_access_key", "connection string"])
def test_a_wasb_connection_is_reused(style: str, azurite_container: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    if style == "connection string":
        extra = {"connection_string": azurite_container.storage_options["connection_string"]}
        connection(monkeypatch, "wasb_default", conn_type="wasb", extra=extra)
    elif style == "account key":  # login = account, password = key, host = the account URL
        connection(monkeypatch, "wasb_default", conn_type="wasb", login=AZURITE_ACCOUNT, password=AZURITE_KEY, host=blob_endpoint(azurite_container))
    else:  # the old prefixed extra spelling
        connection(monkeypatch, "wasb_default", conn_type="wasb", login=AZURITE_ACCOUNT, host=blob_endpoint(azurite_container),
                   extra={"extra__wasb__shared_access_key": AZURITE_KEY})
    hook = lake(monkeypatch, azure_conn_id="wasb_default")
    creates_atomically(hook, f"abfss://{azurite_container.name}@{AZURITE_ACCOUNT}.dfs.core.windows.net/t")


def test_azure_token_credentials_become_adlfs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Azurite checks keys and SAS only: the options of the token credentials are checked here."""
    uri = "abfss://lake@acct.dfs.core.windows.net/t"
    sp = lake(monkeypatch, "client-secret-value", azure_auth="service_principal", azure_account_name="acct", azure_tenant_id="tenant", azure_client_id="app")
    assert sp.get_storage_options(uri) == {"account_name": "acct", "tenant_id": "tenant", "client_id": "app", "client_secret": "client-secret-value"}
    mi = lake(monkeypatch, azure_auth="managed_identity", azure_account_name="acct", azure_client_id="mi-client")
    assert mi.get_storage_options(uri) == {"account_name": "acct", "anon": False, "managed_identity_client_id": "mi-client"}
    assert lake(monkeypatch, azure_account_name="acct").get_storage_options(uri) == {"account_name": "acct", "anon": False}
    with pytest.raises(ValueError, match="service_principal needs the tenant id"):
        lake(monkeypatch, "s", azure_auth="service_principal", azure_account_name="acct", azure_client_id="app").get_storage_options(uri)
    with pytest.raises(ValueError, match="azure_auth must be one of"):
        lake(monkeypatch, "s", azure_auth="password", azure_account_name="acct").get_storage_options(uri)
    # a wasb connection with a tenant: a service principal (login = client id), as WasbHook does
    connection(monkeypatch, "wasb_sp", conn_type="wasb", login="app", password="secret", host="https://acct.blob.core.windows.net/",
               extra={"tenant_id": "tenant"})
    assert lake(monkeypatch, azure_conn_id="wasb_sp").get_storage_options(uri) == {
        "account_name": "acct", "tenant_id": "tenant", "client_id": "app", "client_secret": "secret"}
    connection(monkeypatch, "wasb_mi", conn_type="wasb", host="https://acct.blob.core.windows.net", extra={"managed_identity_client_id": "mi"})
    assert lake(monkeypatch, azure_conn_id="wasb_mi").get_storage_options(uri) == {"account_name": "acct", "anon": False, "managed_identity_client_id": "mi"}
    # an S3 table on the same connection gets no Azure option
    assert "account_name" not in sp.get_storage_options("s3://b/t")


def test_gcs_connections_become_gcsfs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    uri = "gs://lake/t"
    key = lake(monkeypatch, json.dumps(SA_KEY))
    assert key.get_storage_options(uri) == {"token": SA_KEY, "project": "lake-project"}
    assert lake(monkeypatch, gcp_key_path="/secrets/sa.json", gcp_project="p").get_storage_options(uri) == {"token": "/secrets/sa.json", "project": "p"}
    assert lake(monkeypatch).get_storage_options("gcs://lake/t") == {"token": "google_default"}
    with pytest.raises(ValueError, match="not a service_account JSON key"):
        lake(monkeypatch, json.dumps({"type": "authorized_user"})).get_storage_options(uri)
    connection(monkeypatch, "google_cloud_default", conn_type="google_cloud_platform",
               extra={"keyfile_dict": json.dumps(SA_KEY), "project": "other-project"})
    assert lake(monkeypatch, gcp_conn_id="google_cloud_default").get_storage_options(uri) == {"token": SA_KEY, "project": "other-project"}
    connection(monkeypatch, "google_old", conn_type="google_cloud_platform", extra={"extra__google_cloud_platform__key_path": "/k.json"})
    assert lake(monkeypatch, gcp_conn_id="google_old").get_storage_options(uri) == {"token": "/k.json"}
    connection(monkeypatch, "google_sm", conn_type="google_cloud_platform", extra={"key_secret_name": "sa"})
    with pytest.raises(ValueError, match="key_secret_name is not supported"):
        lake(monkeypatch, gcp_conn_id="google_sm").get_storage_options(uri)


def test_a_gcs_connection_on_fake_gcs(fake_gcs_bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """An emulator takes no credentials: the endpoint and storage_options {"token": "anon"}."""
    uri = f"gs://{fake_gcs_bucket.name}/t"
    hook = lake(monkeypatch, endpoint_url=fake_gcs_bucket.store.endpoint, storage_options=json.dumps({"token": "anon"}), test_location=uri)
    creates_atomically(hook, uri)
    ok, message = hook.test_connection()
    assert ok and message == f"listed gs://{fake_gcs_bucket.name}/t/_delta_log: 1 entry", message
