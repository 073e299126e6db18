"""Secrets of a Spark job: never in argv nor in environment values (YARN and Kubernetes render
driver environment variables as ``--conf`` arguments). They go to a private file (mode 0600) whose
*path* travels in ``DELTA_MAINTENANCE_CREDENTIALS_FILE``; the storage options without secrets
travel in ``DELTA_MAINTENANCE_STORAGE_OPTIONS``, and s3a settings in the Spark conf. Azure and GCS
settings are made by the job itself from the same options (``spark_jobs._hadoop_stores``).

Credentials that expire (an assumed role's) are never handed over as fixed keys when the job
runs on this machine: the storage options' ``session`` then offers ``frozen_credentials()`` (see
``hooks._aws``), and ``RefreshingCredentials`` keeps a private file in AWS's ``credential_process``
format fresh for as long as the job runs. The job reads it through a private AWS config profile
whose ``credential_process`` prints the file: the Python side (s3fs/aiobotocore, option
``profile``) and s3a (the AWS SDK's ``ProfileCredentialsProvider``) run it again whenever the keys
they hold near their expiry. Neither keys nor the file's content reach argv, the environment or
the Spark UI: only the config file's path and the profile name do."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
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
    "JOB_PROFILE",
    "RefreshingCredentials",
    "job_credentials",
]


STORAGE_OPTIONS_ENV = "DELTA_MAINTENANCE_STORAGE_OPTIONS"  # same name as spark_jobs._common (no import: pyspark)


CREDENTIALS_FILE_ENV = "DELTA_MAINTENANCE_CREDENTIALS_FILE"  # ditto; its value is a path, never a secret


# fsspec option names that hold secrets (s3fs; adlfs: account key, SAS token, client secret, a
# connection string with a key in it, a credential; gcsfs: the token, a key or a key file path);
# they go to the credentials file only
SECRET_OPTION_KEYS = frozenset({"key", "secret", "token", "password", "session_token", "aws_secret_access_key", "aws_session_token",
                                "account_key", "sas_token", "client_secret", "connection_string", "credential"})


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
    for the driver's environment, s3a settings for executors, and the secrets for the file. A
    refreshing ``session`` is not among them: ``credential_source`` hands it to the submission."""
    public = {k: v for k, v in storage_options.items() if k not in SECRET_OPTION_KEYS and k != "session"}
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


# --- credentials that outlive the job ---------------------------------------------------------

JOB_PROFILE = "delta-maintenance-job"
# s3a's provider for the profile (hadoop-aws 3.4+ accepts AWS SDK v2 providers by class name)
PROFILE_PROVIDER = "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider"
_S3A_PROVIDER = "spark.hadoop.fs.s3a.aws.credentials.provider"


def credential_source(storage_options: Mapping[str, Any]) -> Callable[[], Mapping[str, str]] | None:
    """The refreshing source of the options' ``session``, if it has one: a callable returning
    ``credential_process`` JSON (``AccessKeyId``, ``SecretAccessKey``, ``SessionToken``,
    ``Expiration``), the keys refreshed by the session before they expire."""
    source = getattr(storage_options.get("session"), "frozen_credentials", None)
    return source if callable(source) else None


def _write_private(path: str, text: str) -> None:
    """Replace ``path`` atomically with a new 0600 file: a reader sees the old or the new content."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class RefreshingCredentials:
    """A private directory with the job's keys (``credential_process`` JSON, rewritten by a
    thread while the job runs) and an AWS config file whose profile prints them.

    The thread rewrites the file a quarter of the keys' remaining lifetime after each write (at
    least every second, at most every minute), so a reader always finds keys with about three
    quarters of a lifetime left. Keys without ``Expiration`` are fixed: written once."""

    def __init__(self, source: Callable[[], Mapping[str, str]]) -> None:
        self._source = source
        self.directory = tempfile.mkdtemp(prefix="delta-maintenance-")  # 0700
        self.credentials_path = os.path.join(self.directory, "credentials.json")
        self.config_path = os.path.join(self.directory, "config")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        try:
            expiry = self._write()
            _write_private(self.config_path, f"[profile {JOB_PROFILE}]\ncredential_process = cat {shlex.quote(self.credentials_path)}\n")
        except BaseException:
            self.close()
            raise
        if expiry is not None:
            self._thread = threading.Thread(target=self._run, name="delta-maintenance-credentials", daemon=True)
            self._thread.start()

    @property
    def launcher_env(self) -> dict[str, str]:
        """For spark-submit's process (and a client-mode driver): paths and a name, no secret."""
        return {"AWS_CONFIG_FILE": self.config_path, "AWS_PROFILE": JOB_PROFILE}

    def _write(self) -> float | None:
        creds = dict(self._source())
        _write_private(self.credentials_path, json.dumps({"Version": 1, **creds}))
        expiration = creds.get("Expiration")
        return None if not expiration else datetime.fromisoformat(str(expiration).replace("Z", "+00:00")).timestamp()

    def _run(self) -> None:
        wait = 1.0
        while not self._stop.wait(wait):
            try:
                expiry = self._write()
            except Exception as exc:  # noqa: BLE001 - kept and retried: the keys written last are still valid for a while
                self.error = f"{type(exc).__name__}: {exc}"
                wait = 1.0
                continue
            if expiry is None:
                return
            wait = min(60.0, max(1.0, (expiry - time.time()) / 4))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RefreshingCredentials:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def job_credentials(
    env_vars: Mapping[str, str], conf: Mapping[str, str], credentials: Mapping[str, Any],
    source: Callable[[], Mapping[str, str]] | None, *, executors_here: bool,
) -> tuple[dict[str, str], dict[str, str], dict[str, Any], RefreshingCredentials | None]:
    """(driver env, Spark conf, fixed secrets, refreshing file) for a job whose storage has a
    refreshing credential ``source``. Executors on this machine read the refreshed file through
    the job profile (s3fs's ``profile`` option, s3a's profile provider); executors elsewhere cannot
    read a file of this machine, so they get the keys of now, which expire (the caller warns)."""
    env, conf_out, secrets = dict(env_vars), dict(conf), dict(credentials)
    if source is None:
        return env, conf_out, secrets, None
    if not executors_here:
        frozen = source()
        keys = {"key": frozen["AccessKeyId"], "secret": frozen["SecretAccessKey"]}
        if frozen.get("SessionToken"):
            keys["token"] = frozen["SessionToken"]
        secrets["storage_options"] = {**secrets.get("storage_options", {}), **keys}
        return env, conf_out, secrets, None
    public = json.loads(env.get(STORAGE_OPTIONS_ENV) or "{}")
    env[STORAGE_OPTIONS_ENV] = json.dumps({**public, "profile": JOB_PROFILE})
    conf_out.setdefault(_S3A_PROVIDER, PROFILE_PROVIDER)
    return env, conf_out, secrets, RefreshingCredentials(source)
