"""Azure and Google Cloud credentials for the storage hook: from a Delta storage connection's own
fields, or from an existing Airflow ``wasb`` / ``google_cloud_platform`` connection, read by its
documented fields as the Azure and Google providers' hooks read them (as ``_aws`` reads an ``aws``
connection): neither provider has to be installed. The result is adlfs / gcsfs storage options.

Azure (adlfs), by ``azure_auth`` or, for a reused ``wasb`` connection, as ``WasbHook`` decides:

- ``account_key``: account name + key (the password);
- ``sas``: account name + SAS token (the password);
- ``service_principal``: tenant id, client id, client secret (the password);
- ``managed_identity`` / ``default``: azure-identity's DefaultAzureCredential (managed identity,
  workload identity, environment, Azure CLI), with an optional user-assigned identity's client id.

Google Cloud (gcsfs): a service-account key (JSON in the password, or a key file path), else the
application default credentials.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["AZURE_AUTH_KINDS", "azure_options", "wasb_connection_options", "gcs_options", "google_connection_options"]

AZURE_AUTH_KINDS = ("account_key", "sas", "service_principal", "managed_identity", "default")


class ConnectionFieldError(ValueError):
    """A connection's fields do not describe a usable credential (names the connection and field)."""


def _field(extra: Mapping[str, Any], name: str, conn_type: str) -> Any:
    """A provider connection's extra field, plain or with the ``extra__<type>__`` prefix of old connections."""
    value = extra.get(name)
    if value in (None, ""):
        value = extra.get(f"extra__{conn_type}__{name}")
    return None if value in (None, "") else value


def _blob_endpoint_options(account: str | None, endpoint: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """An explicit blob endpoint (Azurite, a sovereign cloud, a private endpoint): adlfs reaches it
    through a connection string; the credentials go in it too when they are a key or a SAS token."""
    if not endpoint:
        return options
    if not account:
        raise ConnectionFieldError("an Azure blob endpoint needs the account name")
    parts = [f"DefaultEndpointsProtocol={urlsplit(endpoint).scheme or 'https'}", f"AccountName={account}", f"BlobEndpoint={endpoint.rstrip('/')}"]
    if options.get("account_key"):
        parts.append(f"AccountKey={options.pop('account_key')}")
    elif options.get("sas_token"):
        parts.append(f"SharedAccessSignature={str(options.pop('sas_token')).lstrip('?')}")
    else:  # a token credential: adlfs reaches https://<account_host>
        parsed = urlsplit(endpoint)
        if parsed.scheme != "https" or parsed.path.strip("/"):
            raise ConnectionFieldError(f"a token credential reaches an Azure blob endpoint over https at its root only, not {endpoint}")
        return {**options, "account_host": parsed.netloc}
    return {**options, "connection_string": ";".join(parts) + ";"}


def azure_options(
    auth: str | None, account: str | None, secret: str | None, *, tenant_id: str | None = None, client_id: str | None = None,
    endpoint: str | None = None, conn_id: str = "",
) -> dict[str, Any]:
    """adlfs options for one of ``AZURE_AUTH_KINDS`` (None: ``account_key`` with a secret, else ``default``)."""
    kind = auth or ("account_key" if secret else "default")
    if kind not in AZURE_AUTH_KINDS:
        raise ConnectionFieldError(f"connection {conn_id}: azure_auth must be one of {', '.join(AZURE_AUTH_KINDS)}, got {kind!r}")
    options: dict[str, Any] = {"account_name": account} if account else {}
    needs = {"account_key": ("account name", account, "account key (password)", secret), "sas": ("account name", account, "SAS token (password)", secret),
             "service_principal": ("tenant id", tenant_id, "client secret (password)", secret)}
    if kind in needs:
        a_name, a, b_name, b = needs[kind]
        missing = [n for n, v in ((a_name, a), (b_name, b)) if not v]
        if kind == "service_principal" and not client_id:
            missing.append("client id")
        if missing:
            raise ConnectionFieldError(f"connection {conn_id}: azure_auth {kind} needs the {' and the '.join(missing)}")
    if kind == "account_key":
        options["account_key"] = secret
    elif kind == "sas":
        options["sas_token"] = str(secret).lstrip("?")
    elif kind == "service_principal":
        options.update(tenant_id=tenant_id, client_id=client_id, client_secret=secret)
    else:  # DefaultAzureCredential: adlfs builds it when anon is False and nothing else is given
        options["anon"] = False
        if client_id:
            options["managed_identity_client_id"] = client_id
    return _blob_endpoint_options(account, endpoint, options)


def wasb_connection_options(conn: Any) -> dict[str, Any]:
    """adlfs options from an Airflow ``wasb`` (Azure Blob Storage) connection, in the order the
    Azure provider's ``WasbHook.get_conn`` tries them: connection string; tenant id (a service
    principal: login = client id, password = secret); shared access key; SAS token; password
    (the account key); else DefaultAzureCredential with the managed identity's client id."""
    extra = conn.extra_dejson or {}
    connection_string = _field(extra, "connection_string", "wasb")
    if connection_string:
        return {"connection_string": connection_string}
    # host: the account URL (https://<account>.blob.core.windows.net, or another endpoint such as
    # Azurite's http://127.0.0.1:10000/<account>, whose account is then the login)
    host = urlsplit(conn.host if "://" in (conn.host or "") else f"https://{conn.host}") if conn.host else None
    in_azure = bool(host and host.hostname and host.hostname.endswith(".core.windows.net"))
    account = (host.hostname or "").split(".")[0] if host and in_azure else (conn.login or None)
    endpoint = f"{host.scheme}://{host.netloc}{host.path}".rstrip("/") if host and host.hostname and not in_azure else None
    cid = conn.conn_id
    tenant = _field(extra, "tenant_id", "wasb")
    if tenant:
        return azure_options("service_principal", account, conn.password, tenant_id=tenant, client_id=conn.login, endpoint=endpoint, conn_id=cid)
    shared_key = _field(extra, "shared_access_key", "wasb")
    if shared_key:
        return azure_options("account_key", account, shared_key, endpoint=endpoint, conn_id=cid)
    sas = _field(extra, "sas_token", "wasb")
    if sas:
        return azure_options("sas", account, sas, endpoint=endpoint, conn_id=cid)
    if conn.password:
        return azure_options("account_key", account, conn.password, endpoint=endpoint, conn_id=cid)
    return azure_options("default", account, None, client_id=_field(extra, "managed_identity_client_id", "wasb"), endpoint=endpoint, conn_id=cid)


def gcs_options(keyfile: str | Mapping[str, Any] | None, key_path: str | None, project: str | None, *, endpoint: str | None = None,
                conn_id: str = "") -> dict[str, Any]:
    """gcsfs options: a service-account key (its JSON, or a key file path), else the application
    default credentials (``google_default``: metadata server, GOOGLE_APPLICATION_CREDENTIALS, gcloud)."""
    if keyfile:
        try:
            info = json.loads(keyfile) if isinstance(keyfile, str) else dict(keyfile)
        except ValueError:
            raise ConnectionFieldError(f"connection {conn_id}: the service-account key is not JSON") from None
        if not isinstance(info, dict) or info.get("type") != "service_account":
            raise ConnectionFieldError(f"connection {conn_id}: the service-account key is not a service_account JSON key")
        token: Any = info
        project = project or info.get("project_id")
    elif key_path:
        token = str(key_path)
    else:
        token = "google_default"
    options: dict[str, Any] = {"token": token}
    if project:
        options["project"] = project
    if endpoint:
        options["endpoint_url"] = endpoint
    return options


def google_connection_options(conn: Any) -> dict[str, Any]:
    """gcsfs options from an Airflow ``google_cloud_platform`` connection's documented fields
    (``keyfile_dict``, ``key_path``, ``project``), as the Google provider's ``GoogleBaseHook``
    reads them; Secret Manager keys and credential configuration files are not supported here."""
    extra = conn.extra_dejson or {}
    kind = "google_cloud_platform"
    for unsupported in ("key_secret_name", "credential_config_file"):
        if _field(extra, unsupported, kind):
            raise ConnectionFieldError(f"connection {conn.conn_id}: {unsupported} is not supported for Delta storage; use keyfile_dict or key_path")
    return gcs_options(_field(extra, "keyfile_dict", kind), _field(extra, "key_path", kind), _field(extra, "project", kind), conn_id=conn.conn_id)
