"""The table's store as Hadoop sees it: URIs of its files (``s3a://``, ``abfs[s]://``, ``gs://``,
``file://``) and the Hadoop settings (endpoint, credentials) that the job derives from the same
storage options its log library uses. The settings are set on the running session's Hadoop
configuration, in the job's process: secrets never travel in Spark conf (shown in its UI, where
Spark's redaction pattern would not hide an Azure account key) nor in argv.

- Azure: hadoop-azure's ABFS driver. Keys, SAS tokens, service principals (OAuth client
  credentials) and managed identities (MSI). A blob endpoint other than Azure's (Azurite) is
  reached with ``fs.azure.abfs.endpoint`` and the driver's Blob-endpoint mode (Azurite has no dfs
  API); the URI's host stays ``<container>@<account>.dfs.core.windows.net``, as the driver needs.
- GCS: the Cloud Storage connector. A service-account key (written to a private file for the
  connector), a key file path, the application default credentials, or none (``anon``, an
  emulator); ``fs.gs.storage.root.url`` for another endpoint.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from airflow_delta_maintenance.deltalog.storage import LogStore

__all__ = ["hadoop_uri", "hadoop_settings", "UnsupportedStoreError"]


class UnsupportedStoreError(ValueError):
    """The table's store has no Hadoop file system the jobs know."""


def _connection_string(options: Mapping[str, Any]) -> dict[str, str]:
    raw = str(options.get("connection_string") or "")
    return {k: v for k, _, v in (part.partition("=") for part in raw.split(";") if part)}


def _azure_account_and_endpoint(store: LogStore, options: Mapping[str, Any]) -> tuple[str, str | None]:
    """(account name, the blob endpoint URL when it is not Azure's own)."""
    client = getattr(store.fs, "service_client", None)
    account = str(getattr(store.fs, "account_name", None) or getattr(client, "account_name", None) or options.get("account_name") or "")
    url = str(getattr(client, "url", "") or _connection_string(options).get("BlobEndpoint") or "")
    host = urlsplit(url).hostname or ""
    return account, (url if url and not host.endswith(".core.windows.net") else None)


def hadoop_uri(store: LogStore, path: str) -> str:
    """The Hadoop URI of ``path`` (a path of ``store.fs``, without protocol)."""
    backend = store.backend
    if backend == "s3":
        return f"s3a://{path}"
    if backend == "local":
        return f"file://{path}"
    if backend == "gcs":
        return f"gs://{path}"
    if backend == "azure":
        account, endpoint = _azure_account_and_endpoint(store, {})
        container, _, key = path.partition("/")
        scheme = "abfs" if endpoint and endpoint.startswith("http://") else "abfss"
        return f"{scheme}://{container}@{account}.dfs.core.windows.net/{key}"
    raise UnsupportedStoreError(f"{store.uri}: Spark jobs support local paths, s3:// (s3a://), abfss:// (abfs://, az://) and gs:// tables")


def hadoop_settings(store: LogStore, options: Mapping[str, Any]) -> dict[str, str]:
    """Hadoop configuration for the table's store from its storage options (secrets included)."""
    if store.backend == "azure":
        return _azure_settings(store, options)
    if store.backend == "gcs":
        return _gcs_settings(options)
    return {}


def _azure_settings(store: LogStore, options: Mapping[str, Any]) -> dict[str, str]:
    # what adlfs took from the environment (AZURE_STORAGE_*) when the options do not say it
    fs = store.fs
    options = {**{k: v for k in ("account_key", "sas_token", "client_id", "client_secret", "tenant_id", "connection_string")
                  if (v := getattr(fs, k, None))}, **options}
    account, endpoint = _azure_account_and_endpoint(store, options)
    host = f"{account}.dfs.core.windows.net"
    cs = _connection_string(options)
    conf: dict[str, str] = {}
    if endpoint:
        parsed = urlsplit(endpoint)
        conf.update({"fs.azure.abfs.endpoint": parsed.netloc, "fs.azure.always.use.https": str(parsed.scheme == "https").lower(),
                     "fs.azure.fns.account.service.type": "BLOB", "fs.azure.account.hns.enabled": "false"})
        if parsed.scheme == "http":  # the Apache client wants a TLS socket factory, made only for https
            conf["fs.azure.networking.library"] = "JDK_HTTP_URL_CONNECTION"
    key = options.get("account_key") or cs.get("AccountKey")
    sas = options.get("sas_token") or cs.get("SharedAccessSignature")
    if key:
        conf[f"fs.azure.account.auth.type.{host}"] = "SharedKey"
        conf[f"fs.azure.account.key.{host}"] = str(key)
    elif sas:
        conf[f"fs.azure.account.auth.type.{host}"] = "SAS"
        conf[f"fs.azure.sas.token.provider.type.{host}"] = "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider"
        conf[f"fs.azure.sas.fixed.token.{host}"] = str(sas).lstrip("?")
    elif options.get("client_secret"):
        conf.update({
            f"fs.azure.account.auth.type.{host}": "OAuth",
            f"fs.azure.account.oauth.provider.type.{host}": "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
            f"fs.azure.account.oauth2.client.endpoint.{host}": f"https://login.microsoftonline.com/{options['tenant_id']}/oauth2/token",
            f"fs.azure.account.oauth2.client.id.{host}": str(options["client_id"]),
            f"fs.azure.account.oauth2.client.secret.{host}": str(options["client_secret"]),
        })
    elif options.get("anon") is False:  # managed identity (the driver's default chain has no Hadoop twin beyond MSI)
        conf.update({f"fs.azure.account.auth.type.{host}": "OAuth",
                     f"fs.azure.account.oauth.provider.type.{host}": "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider"})
        if options.get("managed_identity_client_id"):
            conf[f"fs.azure.account.oauth2.client.id.{host}"] = str(options["managed_identity_client_id"])
    return conf


def _gcs_settings(options: Mapping[str, Any]) -> dict[str, str]:
    conf: dict[str, str] = {}
    if options.get("endpoint_url"):
        conf["fs.gs.storage.root.url"] = str(options["endpoint_url"]).rstrip("/") + "/"
    token = options.get("token")
    if (token in ("anon", None) and options.get("endpoint_url")) or token == "anon":
        conf["fs.gs.auth.type"] = "UNAUTHENTICATED"
    elif isinstance(token, Mapping):  # a service-account key: the connector reads it from a file
        conf.update({"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.json.keyfile": _private_keyfile(token)})
    elif isinstance(token, str) and token not in ("google_default", "cloud", "browser", "cache"):
        conf.update({"fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.auth.service.account.json.keyfile": token})
    else:
        conf["fs.gs.auth.type"] = "APPLICATION_DEFAULT"
    if options.get("project"):
        conf["fs.gs.project.id"] = str(options["project"])
    return conf


def _private_keyfile(key: Mapping[str, Any]) -> str:
    """The key in a new 0600 file in a 0700 directory of this process's temp dir, removed when
    the job's process exits."""
    directory = tempfile.mkdtemp(prefix="delta-maintenance-gcs-")
    atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, "key.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(key), f)
    return path
