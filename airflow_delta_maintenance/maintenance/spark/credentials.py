"""Secrets of a Spark job: never in argv nor in environment values (YARN and Kubernetes render
driver environment variables as ``--conf`` arguments). They go to a private file (mode 0600) whose
*path* travels in ``DELTA_MAINTENANCE_CREDENTIALS_FILE``; the storage options without secrets
travel in ``DELTA_MAINTENANCE_STORAGE_OPTIONS``, and s3a settings in the Spark conf."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "STORAGE_OPTIONS_ENV",
    "CREDENTIALS_FILE_ENV",
    "SECRET_OPTION_KEYS",
    "write_credentials_file",
    "remove_credentials_file",
    "credentials_file",
    "environment_credentials",
    "storage_env",
]


STORAGE_OPTIONS_ENV = "DELTA_MAINTENANCE_STORAGE_OPTIONS"  # same name as spark_jobs._common (no import: pyspark)


CREDENTIALS_FILE_ENV = "DELTA_MAINTENANCE_CREDENTIALS_FILE"  # ditto; its value is a path, never a secret


# fsspec/s3fs option names that hold secrets; they go to the credentials file only
SECRET_OPTION_KEYS = frozenset({"key", "secret", "token", "password", "session_token", "aws_secret_access_key", "aws_session_token"})


def write_credentials_file(credentials: Mapping[str, Any]) -> str:
    """A new private file (0600, alone in a 0700 directory) holding ``credentials`` as JSON."""
    directory = tempfile.mkdtemp(prefix="delta-maintenance-")  # mkdtemp: mode 0700
    path = os.path.join(directory, "credentials.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(credentials), f)
    return path


def remove_credentials_file(path: str) -> None:
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


@contextmanager
def credentials_file(credentials: Mapping[str, Any]) -> Iterator[str]:
    """``write_credentials_file``, removed on exit."""
    path = write_credentials_file(credentials)
    try:
        yield path
    finally:
        remove_credentials_file(path)


def environment_credentials(table_uri: str, storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """For an ``s3://`` table without keys in its options: the keys this process would use (the
    AWS credential chain), so that executors elsewhere get them through the job's credentials file
    instead of depending on their own environment. Empty when there are none or they are given."""
    if not table_uri.lower().startswith(("s3://", "s3a://")) or storage_options.get("key") or storage_options.get("anon"):
        return {}
    import botocore.session

    creds = botocore.session.get_session().get_credentials()
    if creds is None:
        return {}
    frozen = creds.get_frozen_credentials()
    if not frozen.access_key or not frozen.secret_key:
        return {}
    out = {"key": frozen.access_key, "secret": frozen.secret_key}
    if frozen.token:
        out["token"] = frozen.token
    return out


def storage_env(storage_options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """(env vars, Spark conf, credentials) for the job's storage: fsspec options without secrets
    for the driver's environment, s3a settings for executors, and the secrets for the file."""
    public = {k: v for k, v in storage_options.items() if k not in SECRET_OPTION_KEYS}
    secret = {k: v for k, v in storage_options.items() if k in SECRET_OPTION_KEYS}
    env = {STORAGE_OPTIONS_ENV: json.dumps(public)} if public else {}
    conf: dict[str, str] = {}
    client = storage_options.get("client_kwargs") or {}
    if client.get("endpoint_url"):
        conf["spark.hadoop.fs.s3a.endpoint"] = str(client["endpoint_url"])
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        if str(client["endpoint_url"]).startswith("http://"):
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if client.get("region_name"):
        conf["spark.hadoop.fs.s3a.endpoint.region"] = str(client["region_name"])
    # the job sets s3a's keys from the same file (spark_jobs._common), in-process
    return env, conf, ({"storage_options": secret} if secret else {})
