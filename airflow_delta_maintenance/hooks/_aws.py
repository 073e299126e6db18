"""AWS credentials from an Airflow ``aws`` connection, and STS AssumeRole, for both hooks.

An existing ``aws_default``-style connection can be reused (``aws_conn_id`` in a Delta
connection's extra) without installing the Amazon provider: its documented fields are read —
login/password (access key id and secret), extra ``aws_session_token``, ``region_name``,
``endpoint_url`` (or ``service_config.<service>.endpoint_url``) and ``role_arn``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["AwsCredentials", "aws_connection_credentials", "assume_role"]


@dataclass(frozen=True)
class AwsCredentials:
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    region_name: str | None = None
    endpoint_url: str | None = None
    role_arn: str | None = None

    def __repr__(self) -> str:  # never show a secret
        return f"AwsCredentials(access_key_id={'***' if self.access_key_id else None}, region_name={self.region_name!r}, endpoint_url={self.endpoint_url!r})"


def aws_connection_credentials(conn: Any, service: str) -> AwsCredentials:
    """The fields of an Airflow ``aws`` connection that matter for ``service`` (``s3``, ``dynamodb``)."""
    extra = conn.extra_dejson or {}
    service_config = (extra.get("service_config") or {}).get(service) or {}
    return AwsCredentials(
        access_key_id=conn.login or extra.get("aws_access_key_id") or None,
        secret_access_key=conn.password or extra.get("aws_secret_access_key") or None,
        session_token=extra.get("aws_session_token") or None,
        region_name=service_config.get("region_name") or extra.get("region_name") or None,
        endpoint_url=service_config.get("endpoint_url") or extra.get("endpoint_url") or None,
        role_arn=extra.get("role_arn") or None,
    )


def assume_role(creds: AwsCredentials, role_arn: str) -> AwsCredentials:
    """Temporary credentials for ``role_arn`` (one STS call), signed with ``creds`` or the boto3 chain."""
    import boto3

    endpoint = creds.endpoint_url if creds.endpoint_url and "amazonaws.com" not in creds.endpoint_url else None
    sts = boto3.client(
        "sts",
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        aws_session_token=creds.session_token,
        region_name=creds.region_name,
        endpoint_url=endpoint,
    )
    got = sts.assume_role(RoleArn=role_arn, RoleSessionName="airflow-delta-maintenance")["Credentials"]
    return replace(creds, access_key_id=got["AccessKeyId"], secret_access_key=got["SecretAccessKey"], session_token=got["SessionToken"], role_arn=None)
