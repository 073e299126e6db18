"""AWS access for both hooks through the Amazon provider's session machinery.

A Delta connection's own fields (keys, region, S3 endpoint, ``role_arn``) are laid over the
Airflow ``aws`` connection it names (``aws_conn_id``), and the result is handed to the provider
as one ``aws`` connection: its ``SessionFactory`` (or the one the deployment configured) builds the
session, with everything the ``aws`` connection type supports — ``role_arn`` with
``assume_role_kwargs``, ``assume_role_with_web_identity``, SAML, ``profile_name``, botocore
``config_kwargs``. Assumed-role credentials are *refreshable*: boto3/aiobotocore assume the role
again before the keys expire, so a task, a Spark submission or a 7-day deferral never holds keys
that run out.

Sessions are cached per process by a digest of the merged connection (secrets included, hashed):
the triggerer's many sensors on one connection share one session (one STS call per key lifetime,
not per poll), while a connection whose keys or role changed gets a new session at the next poll.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

__all__ = ["AwsAccess", "aws_access"]

_MAX_SESSIONS = 64
_sessions: OrderedDict[tuple[str, str], Any] = OrderedDict()
_lock = threading.Lock()


class LockedSession:
    """A boto3 session whose ``client()`` may be called from several threads (boto3's is not
    thread-safe); the clients themselves are."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._lock = threading.Lock()

    def client(self, service_name: str, **kwargs: Any) -> Any:
        with self._lock:
            return self._session.client(service_name, **kwargs)

    def get_credentials(self) -> Any:
        return self._session.get_credentials()

    def frozen_credentials(self) -> dict[str, str]:
        """The current keys (refreshed first when they near their expiry) in AWS's
        ``credential_process`` JSON shape: ``AccessKeyId``, ``SecretAccessKey``, ``SessionToken``
        and ``Expiration`` (ISO 8601; absent for keys that do not expire)."""
        creds = self._session.get_credentials()
        if creds is None:
            raise PermissionError("the AWS connection resolved to no credentials")
        frozen = creds.get_frozen_credentials()  # a refreshable set refreshes here when due
        out = {"AccessKeyId": frozen.access_key, "SecretAccessKey": frozen.secret_key}
        if frozen.token:
            out["SessionToken"] = frozen.token
        expiry = getattr(creds, "_expiry_time", None)  # botocore keeps no public accessor
        if expiry is not None:
            out["Expiration"] = expiry.isoformat()
        return out

    def __repr__(self) -> str:  # never show a secret
        return "LockedSession(<refreshable AWS session>)"


@dataclass(frozen=True)
class AwsAccess:
    """The merged ``aws`` connection (``extra`` in the provider's format) and whether its credentials
    need a refreshing session (an assumed role or a profile) or are fixed keys, or none (the
    environment's credential chain, which refreshes by itself)."""

    conn_id: str
    login: str | None
    password: str | None
    extra: dict[str, Any]

    def __repr__(self) -> str:  # never show a secret
        return f"AwsAccess(conn_id={self.conn_id!r}, role_arn={self.role_arn!r}, region={self.region_name!r})"

    @property
    def role_arn(self) -> str | None:
        return self.extra.get("role_arn") or None

    @property
    def region_name(self) -> str | None:
        return self.extra.get("region_name") or None

    @property
    def refreshable(self) -> bool:
        """Credentials that must be refreshed (a role, a profile): use ``session()``."""
        return bool(self.role_arn or self.extra.get("profile_name"))

    def static_keys(self) -> tuple[str | None, str | None, str | None]:
        """(access key id, secret, session token) of a connection without a role."""
        wrapper = self._wrapper()
        return wrapper.aws_access_key_id, wrapper.aws_secret_access_key, wrapper.aws_session_token

    def endpoint_url(self, service: str) -> str | None:
        return self._wrapper().get_service_endpoint_url(service)

    def _wrapper(self) -> Any:
        """The provider's view of the merged connection, made once per connection content (it logs
        where the credentials came from: once, not at every poll)."""
        from airflow.providers.amazon.aws.utils.connection_wrapper import AwsConnectionWrapper

        return self._cached("wrapper", lambda: AwsConnectionWrapper.from_connection_metadata(
            conn_id=self.conn_id, login=self.login, password=self.password, extra=deepcopy(self.extra)))

    def _digest(self) -> str:
        raw = json.dumps([self.conn_id, self.login, self.password, self.extra], sort_keys=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()

    def session(self) -> LockedSession:
        """A boto3 session (refreshable credentials for a role), shared by this process's callers."""
        return self._cached("sync", lambda: LockedSession(self._factory().create_session()))

    def async_session(self) -> Any:
        """An aiobotocore session for s3fs (its ``session`` option) drawing its keys from
        ``session()``: one refresh stream per connection, and ``frozen_credentials()`` for Spark."""
        return self._cached("async", lambda: refreshing_aio_session(self.session(), self.region_name))

    def _factory(self) -> Any:
        from airflow.providers.amazon.aws.hooks.base_aws import resolve_session_factory

        wrapper = self._wrapper()
        return resolve_session_factory()(conn=wrapper, region_name=wrapper.region_name, config=wrapper.botocore_config)

    def _cached(self, kind: str, make: Callable[[], Any]) -> Any:
        key = (self._digest(), kind)
        with _lock:
            found = _sessions.get(key)
            if found is not None:
                _sessions.move_to_end(key)
                return found
        made = make()  # outside the lock: an STS call for a role
        with _lock:
            found = _sessions.setdefault(key, made)
            _sessions.move_to_end(key)
            while len(_sessions) > _MAX_SESSIONS:
                _sessions.popitem(last=False)
        return found


def refreshing_aio_session(session: LockedSession, region_name: str | None) -> Any:
    """An aiobotocore session whose credentials come from ``session`` (and refresh with it)."""
    from aiobotocore.credentials import AioCredentials, AioRefreshableCredentials
    from aiobotocore.session import get_session

    def metadata() -> dict[str, Any]:
        got = session.frozen_credentials()
        return {"access_key": got["AccessKeyId"], "secret_key": got["SecretAccessKey"], "token": got.get("SessionToken"),
                "expiry_time": got.get("Expiration")}

    first = metadata()
    aio = get_session()
    if first["expiry_time"]:
        aio._credentials = AioRefreshableCredentials.create_from_metadata(metadata=first, refresh_using=metadata, method="airflow-delta-maintenance")
    else:
        aio._credentials = AioCredentials(first["access_key"], first["secret_key"], first["token"], method="airflow-delta-maintenance")
    if region_name:
        aio.set_config_variable("region", region_name)
    aio.frozen_credentials = session.frozen_credentials  # for Spark jobs (maintenance.spark.credentials)
    return aio


def aws_access(
    get_connection: Callable[[str], Any],
    *,
    conn_id: str,
    aws_conn_id: str | None,
    login: str | None = None,
    password: str | None = None,
    region_name: str | None = None,
    role_arn: str | None = None,
    s3_endpoint_url: str | None = None,
) -> AwsAccess:
    """The ``aws`` connection ``aws_conn_id`` (if any) with a Delta connection's own fields on top.

    Own keys replace the base keys and drop the base's session token (it is not theirs). An S3
    endpoint other than AWS's also serves STS when the base names no STS endpoint (MinIO and
    moto answer STS on the S3 port), as before this module used the provider."""
    extra: dict[str, Any] = {}
    base_login = base_password = None
    if aws_conn_id:
        base = get_connection(aws_conn_id)
        extra = deepcopy(base.extra_dejson or {})
        base_login, base_password = base.login, base.password
    if login:
        for key in ("aws_session_token", "aws_access_key_id", "aws_secret_access_key"):
            extra.pop(key, None)
    if region_name:
        extra["region_name"] = region_name
    if role_arn:
        extra["role_arn"] = role_arn
    services = extra.setdefault("service_config", {})
    if s3_endpoint_url:
        services.setdefault("s3", {})["endpoint_url"] = s3_endpoint_url
    if extra.get("role_arn") and not (services.get("sts") or {}).get("endpoint_url"):
        own = s3_endpoint_url or (services.get("s3") or {}).get("endpoint_url") or extra.get("endpoint_url")
        if own and "amazonaws.com" not in own:
            services.setdefault("sts", {})["endpoint_url"] = own
    if not services:
        extra.pop("service_config")
    return AwsAccess(conn_id=conn_id, login=login or base_login, password=password if login else (password or base_password), extra=extra)
