"""``DeltaStorageHook``: an Airflow connection → fsspec storage options for a table URI."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from ..version_compat import BaseHook
from ._aws import AwsAccess, aws_access
from ._cloud import azure_options, gcs_options, google_connection_options, wasb_connection_options
from ._forms import connection_form_widgets, declared_hook_name, ui_field_behaviour

__all__ = ["DeltaStorageHook"]

_LOCAL_SCHEMES = ("file", "memory")
_AZURE_SCHEMES = ("abfss", "abfs", "az", "adl")
_GCS_SCHEMES = ("gs", "gcs")


class DeltaStorageHook(BaseHook):
    """Storage credentials and options for Delta tables on S3 (and S3-compatible stores), Azure
    Blob Storage / ADLS Gen2 and Google Cloud Storage; local tables need none.

    Which fields count depends on the table's scheme (one connection per store):

    - ``s3://``: ``login``/``password`` are the access key id and secret; extra ``endpoint_url``,
      ``region_name``, ``role_arn`` (assumed with STS when set), ``aws_conn_id`` (an Airflow ``aws``
      connection whose keys, session token, region, endpoint and role are the base the fields above
      override). AWS access goes through the Amazon provider: with a role the options hold a
      refreshable ``session``, so a long task or deferral never runs out of credentials.
    - ``abfss://`` / ``abfs://`` / ``az://``: ``azure_auth`` (``account_key``, ``sas``,
      ``service_principal``, ``managed_identity`` or ``default``), ``azure_account_name``,
      ``azure_tenant_id``, ``azure_client_id``, the secret (account key, SAS token or client
      secret) in ``password``, ``endpoint_url`` (another blob endpoint); or ``azure_conn_id``: an
      Airflow ``wasb`` connection, read as the Azure provider's ``WasbHook`` reads it.
    - ``gs://``: a service-account key (JSON) in ``password`` or ``gcp_key_path``, else the
      application default credentials; ``gcp_project``; ``endpoint_url``; or ``gcp_conn_id``: an
      Airflow ``google_cloud_platform`` connection's key and project.

    ``test_location`` is what the UI's Test button lists and ``storage_options`` (JSON object) is
    merged last. Secrets are never logged nor returned in XCom.

    :param delta_storage_conn_id: connection id (default ``delta_storage_default``); ``None`` means
        no connection (credentials from the environment).
    """

    conn_name_attr = "delta_storage_conn_id"
    default_conn_name = "delta_storage_default"
    conn_type = "delta_storage"
    hook_name = declared_hook_name("delta_storage")

    def __init__(self, delta_storage_conn_id: str | None = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_storage_conn_id = delta_storage_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return ui_field_behaviour(cls.conn_type)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        return connection_form_widgets(cls.conn_type)

    @cached_property
    def _connection(self) -> Any:
        """The connection, looked up once per hook (None without a connection id)."""
        return None if self.delta_storage_conn_id is None else self.get_connection(self.delta_storage_conn_id)

    @cached_property
    def _extra(self) -> dict[str, Any]:
        return {} if self._connection is None else (self._connection.extra_dejson or {})

    def aws_access(self) -> AwsAccess | None:
        """The connection's AWS access (its fields over the ``aws_conn_id`` connection), read now."""
        conn = self._connection
        if conn is None:
            return None
        extra = self._extra
        return aws_access(
            self.get_connection, conn_id=self.delta_storage_conn_id or "", aws_conn_id=extra.get("aws_conn_id") or None,
            login=conn.login or None, password=conn.password or None, region_name=extra.get("region_name") or None,
            role_arn=extra.get("role_arn") or None, s3_endpoint_url=extra.get("endpoint_url") or None,
        )

    @cached_property
    def _remote_options(self) -> dict[str, Any]:
        """s3fs options. A role (or an ``aws`` connection's profile) gives a refreshable aiobotocore
        ``session`` (the provider's), never fixed temporary keys; fixed keys stay ``key``/``secret``."""
        access = self.aws_access()
        if access is None:
            return {}
        options: dict[str, Any] = {}
        if access.refreshable:
            options["session"] = access.async_session()
        else:
            key, secret, token = access.static_keys()
            if key and secret:
                options.update(key=key, secret=secret)
                if token:
                    options["token"] = token
        client_kwargs = {k: v for k, v in (("endpoint_url", access.endpoint_url("s3")), ("region_name", access.region_name)) if v}
        if client_kwargs:
            options["client_kwargs"] = client_kwargs
        return self._with_extra_options(options)

    def _with_extra_options(self, options: dict[str, Any]) -> dict[str, Any]:
        raw = self._extra.get("storage_options")
        if raw:
            try:
                more = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError as exc:
                raise ValueError(f"connection {self.delta_storage_conn_id}: storage_options is not JSON ({exc})") from None
            if not isinstance(more, dict):
                raise ValueError(f"connection {self.delta_storage_conn_id}: storage_options must be a JSON object")
            options.update(more)
        return options

    @cached_property
    def _azure_options(self) -> dict[str, Any]:
        """adlfs options: the connection's own Azure fields, or a reused ``wasb`` connection's."""
        conn, extra = self._connection, self._extra
        if conn is None:
            return {}
        if extra.get("azure_conn_id"):
            options = wasb_connection_options(self.get_connection(extra["azure_conn_id"]))
        else:
            options = azure_options(extra.get("azure_auth") or None, extra.get("azure_account_name") or conn.login or None, conn.password or None,
                                    tenant_id=extra.get("azure_tenant_id") or None, client_id=extra.get("azure_client_id") or None,
                                    endpoint=extra.get("endpoint_url") or None, conn_id=str(self.delta_storage_conn_id))
        return self._with_extra_options(options)

    @cached_property
    def _gcs_options(self) -> dict[str, Any]:
        """gcsfs options: a service-account key or the application default credentials, or a
        reused ``google_cloud_platform`` connection's."""
        conn, extra = self._connection, self._extra
        if conn is None:
            return {}
        if extra.get("gcp_conn_id"):
            options = google_connection_options(self.get_connection(extra["gcp_conn_id"]))
            if extra.get("endpoint_url"):
                options["endpoint_url"] = extra["endpoint_url"]
        else:
            options = gcs_options(conn.password or None, extra.get("gcp_key_path") or None, extra.get("gcp_project") or None,
                                  endpoint=extra.get("endpoint_url") or None, conn_id=str(self.delta_storage_conn_id))
        return self._with_extra_options(options)

    def get_storage_options(self, table_uri: str) -> dict[str, Any]:
        """fsspec options for ``table_uri`` (s3fs, adlfs or gcsfs by its scheme); empty for local
        paths or without a connection."""
        scheme = table_uri.split("://", 1)[0].lower() if "://" in table_uri else "file"
        if scheme in _LOCAL_SCHEMES:
            return {}
        if scheme in _AZURE_SCHEMES:
            return dict(self._azure_options)
        if scheme in _GCS_SCHEMES:
            return dict(self._gcs_options)
        return dict(self._remote_options)

    def test_connection(self) -> tuple[bool, str]:
        """One real, read-only call: list ``test_location`` (its ``_delta_log`` when it is a table),
        else the buckets the credentials can see."""
        import fsspec

        location = "the connection"
        try:
            location = str(self._extra.get("test_location") or "s3://")
            if location.startswith(("gs://", "gcs://")):  # the plain client, as tables use it
                from gcsfs.core import GCSFileSystem

                fs, path = GCSFileSystem(**self.get_storage_options(location)), GCSFileSystem._strip_protocol(location)
            else:
                fs, path = fsspec.core.url_to_fs(location, **self.get_storage_options(location))
            if path.strip("/") and fs.isdir(path.rstrip("/") + "/_delta_log"):
                path = path.rstrip("/") + "/_delta_log"
            entries = fs.ls(path if path.strip("/") else "", detail=False, refresh=True)
        except Exception as exc:  # noqa: BLE001 - reported to the UI
            return False, f"listing {location}: {type(exc).__name__}: {exc}"
        shown = fs.unstrip_protocol(path) if path.strip("/") else "the bucket list"
        return True, f"listed {shown}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
