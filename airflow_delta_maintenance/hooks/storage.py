"""``DeltaStorageHook``: an Airflow connection → fsspec storage options for a table URI."""

from __future__ import annotations

import json
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

__all__ = ["DeltaStorageHook"]

# Named form fields stored in the connection's extra (Airflow 3 conn-fields).
STORAGE_FIELDS = ("endpoint_url", "region_name", "role_arn", "storage_options")


class DeltaStorageHook(BaseHook):
    """Storage credentials and options for Delta tables (S3 and S3-compatible stores; local needs none).

    ``login``/``password`` are the access key id and secret; extra fields: ``endpoint_url``,
    ``region_name``, ``role_arn`` (assumed with STS when set) and ``storage_options`` (JSON object
    merged last). Secrets are never logged and never returned in XCom.

    :param delta_storage_conn_id: connection id (default ``delta_storage_default``); ``None`` means
        no connection (credentials from the environment).
    """

    conn_name_attr = "delta_storage_conn_id"
    default_conn_name = "delta_storage_default"
    conn_type = "delta_storage"
    hook_name = "Delta Lake storage"

    def __init__(self, delta_storage_conn_id: str | None = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_storage_conn_id = delta_storage_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["host", "schema", "port", "extra"],
            "relabeling": {"login": "Access key ID", "password": "Secret access key"},
            "placeholders": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "us-east-1", "storage_options": '{"anon": false}'},
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import StringField

        return {
            "endpoint_url": StringField(lazy_gettext("Endpoint URL"), widget=BS3TextFieldWidget()),
            "region_name": StringField(lazy_gettext("Region"), widget=BS3TextFieldWidget()),
            "role_arn": StringField(lazy_gettext("Role ARN to assume"), widget=BS3TextFieldWidget()),
            "storage_options": StringField(lazy_gettext("Extra fsspec storage options (JSON)"), widget=BS3TextFieldWidget()),
        }

    def get_storage_options(self, table_uri: str) -> dict[str, Any]:
        """fsspec options for ``table_uri``; empty for local paths or without a connection."""
        scheme = table_uri.split("://", 1)[0].lower() if "://" in table_uri else "file"
        if self.delta_storage_conn_id is None or scheme in ("file", "memory"):
            return {}
        conn = self.get_connection(self.delta_storage_conn_id)
        extra = conn.extra_dejson or {}
        options: dict[str, Any] = {}
        client_kwargs: dict[str, Any] = {}
        if extra.get("endpoint_url"):
            client_kwargs["endpoint_url"] = extra["endpoint_url"]
        if extra.get("region_name"):
            client_kwargs["region_name"] = extra["region_name"]
        if conn.login and conn.password:
            options.update(key=conn.login, secret=conn.password)
        if extra.get("role_arn"):
            options.update(self._assume_role(extra["role_arn"], options, client_kwargs))
        if client_kwargs:
            options["client_kwargs"] = client_kwargs
        raw = extra.get("storage_options")
        if raw:
            more = json.loads(raw) if isinstance(raw, str) else dict(raw)
            if not isinstance(more, dict):
                raise ValueError(f"connection {self.delta_storage_conn_id}: storage_options must be a JSON object")
            options.update(more)
        return options

    def _assume_role(self, role_arn: str, options: dict[str, Any], client_kwargs: dict[str, Any]) -> dict[str, Any]:
        import boto3

        sts = boto3.client(
            "sts",
            aws_access_key_id=options.get("key"),
            aws_secret_access_key=options.get("secret"),
            region_name=client_kwargs.get("region_name"),
            endpoint_url=client_kwargs.get("endpoint_url") if "amazonaws.com" not in str(client_kwargs.get("endpoint_url", "amazonaws.com")) else None,
        )
        creds = sts.assume_role(RoleArn=role_arn, RoleSessionName="airflow-delta-maintenance")["Credentials"]
        return {"key": creds["AccessKeyId"], "secret": creds["SecretAccessKey"], "token": creds["SessionToken"]}

    def test_connection(self) -> tuple[bool, str]:
        try:
            self.get_storage_options("s3://bucket/table")
        except Exception as exc:  # noqa: BLE001 - reported to the UI
            return False, f"{type(exc).__name__}: {exc}"
        return True, "connection fields are valid"
