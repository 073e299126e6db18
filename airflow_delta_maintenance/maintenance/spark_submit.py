"""Spark submission of the maintenance jobs, without Airflow: what to submit and how to verify it.

The Airflow layer turns a ``SparkJobSpec`` into a ``SparkSubmitHook`` call; the CLI runs the same
spec with ``spark-submit``. Either way success is decided by reading the log afterwards — a zero
exit code alone is not success.

Secrets (storage keys, secret, session token) never travel in argv nor in environment values:
the Spark provider renders environment variables as ``--conf spark.yarn.appMasterEnv.*`` /
``spark.kubernetes.driverEnv.*`` arguments on YARN and Kubernetes, and masks only names with
"secret" or "password". They are written to a private file (mode 0600) whose *path* is passed in
``DELTA_MAINTENANCE_CREDENTIALS_FILE``; for masters whose driver may run elsewhere the file is also
shipped with ``--files`` (YARN localizes it into the driver's working directory; on Kubernetes
``--files`` needs ``spark.kubernetes.file.upload.path``), and the job looks for it by name there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..deltalog.listing import CheckpointGroup, list_log_files
from ..deltalog.paths import ParsedLogPath
from ..deltalog.storage import LogStore
from .errors import MaintenanceError
from .report import Progress
from .spark_progress import SparkOutput, quiet_spark_conf

__all__ = [
    "STORAGE_OPTIONS_ENV",
    "CREDENTIALS_FILE_ENV",
    "SECRET_OPTION_KEYS",
    "credentials_file",
    "write_credentials_file",
    "remove_credentials_file",
    "SparkJobSpec",
    "SparkJobError",
    "job_application",
    "package_zip",
    "checkpoint_job",
    "compaction_job",
    "run_spark_submit",
    "verify_checkpoint",
    "verify_compaction",
    "local_spark_conf",
]

STORAGE_OPTIONS_ENV = "DELTA_MAINTENANCE_STORAGE_OPTIONS"  # same name as spark_jobs._common (no import: pyspark)
CREDENTIALS_FILE_ENV = "DELTA_MAINTENANCE_CREDENTIALS_FILE"  # ditto; its value is a path, never a secret
# fsspec/s3fs option names that hold secrets; they go to the credentials file only
SECRET_OPTION_KEYS = frozenset({"key", "secret", "token", "password", "session_token", "aws_secret_access_key", "aws_session_token"})


class SparkJobError(MaintenanceError):
    """The Spark job failed, or finished without the expected files in the log."""


@dataclass(frozen=True)
class SparkJobSpec:
    name: str
    application: str
    application_args: list[str]
    conf: dict[str, str] = field(default_factory=dict)
    jars: str | None = None
    packages: str | None = None
    py_files: str | None = None
    env_vars: dict[str, str] = field(default_factory=dict)  # no secrets: YARN/k8s render these into argv
    credentials: dict[str, Any] = field(default_factory=dict, repr=False)  # only ever written to a 0600 file

    def hook_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``DeltaSparkSubmitHook`` (everything but the connection and name)."""
        return {
            "conf": dict(self.conf),
            "jars": self.jars,
            "packages": self.packages,
            "py_files": self.py_files,
            "application_args": list(self.application_args),
            "env_vars": dict(self.env_vars),
            "credentials": dict(self.credentials),
        }

    def command(self, master: str = "local[*]") -> list[str]:
        cmd = [_spark_submit_binary(), "--master", master, "--name", self.name]
        for k, v in self.conf.items():
            cmd += ["--conf", f"{k}={v}"]
        if self.jars:
            cmd += ["--jars", self.jars]
        if self.packages:
            cmd += ["--packages", self.packages]
        if self.py_files:
            cmd += ["--py-files", self.py_files]
        return [*cmd, self.application, *self.application_args]


def _spark_submit_binary() -> str:
    beside = Path(sys.executable).with_name("spark-submit")  # pip's pyspark puts it next to python
    return str(beside) if beside.exists() else "spark-submit"


def job_application(job: str) -> str:
    """Path of ``spark_jobs/<job>.py`` inside the installed package (located without importing pyspark)."""
    spec = importlib.util.find_spec(f"airflow_delta_maintenance.spark_jobs.{job}")
    if spec is None or spec.origin is None:
        raise SparkJobError(f"Spark job {job!r} is not part of the installed package")
    return spec.origin


def package_zip() -> str:
    """The package zipped for ``--py-files`` (clusters without it installed); built once per process."""
    global _ZIP
    if _ZIP and os.path.exists(_ZIP):
        return _ZIP
    root = Path(__file__).resolve().parents[1]
    fd, path = tempfile.mkstemp(prefix="airflow_delta_maintenance-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in root.rglob("*.py"):
            zf.write(file, file.relative_to(root.parent))
    _ZIP = path
    return path


_ZIP: str | None = None


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


def _storage_env(storage_options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
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


def local_spark_conf() -> dict[str, str]:
    """For ``local[*]``: keep the driver and its UI off the network."""
    return {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false"}


def _job(
    name: str,
    job: str,
    table_uri: str,
    args: list[str],
    storage_options: Mapping[str, Any] | None,
    conf: Mapping[str, Any] | None,
    jars: str | None,
    packages: str | None,
    ship_package: bool,
) -> SparkJobSpec:
    env, storage_conf, credentials = _storage_env(storage_options or {})
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    merged = {**storage_conf, **{k: str(v) for k, v in (conf or {}).items()}}
    return SparkJobSpec(
        name=name,
        application=job_application(job),
        application_args=["--table-uri", table_uri, *args],
        conf=merged,
        jars=jars,
        packages=packages,
        py_files=package_zip() if ship_package else None,
        env_vars=env,
        credentials=credentials,
    )


def checkpoint_job(
    table_uri: str,
    version: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
    ship_package: bool = False,
    sidecars: int = 0,
) -> SparkJobSpec:
    args = ["--version", str(version)] + (["--sidecars", str(sidecars)] if sidecars else [])
    return _job(f"delta-checkpoint-{version}", "checkpoint", table_uri, args, storage_options, conf, jars, packages, ship_package)


def compaction_job(
    table_uri: str,
    start: int,
    end: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
    ship_package: bool = False,
) -> SparkJobSpec:
    args = ["--start", str(start), "--end", str(end)]
    return _job(f"delta-compaction-{start}-{end}", "log_compaction", table_uri, args, storage_options, conf, jars, packages, ship_package)


def run_spark_submit(
    spec: SparkJobSpec,
    master: str = "local[*]",
    *,
    timeout: float | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> str:
    """Run the job with ``spark-submit`` (the CLI's Spark engine); returns its stdout.

    Spark's stderr is read as it comes: stage progress goes to ``progress`` (the caller throttles);
    Spark's own log stays at WARN unless ``verbose``, when its lines are echoed to our stderr."""
    conf = {**(local_spark_conf() if master.startswith("local") else {}), **spec.conf}
    if not verbose:
        conf = quiet_spark_conf(conf)
    spec = SparkJobSpec(spec.name, spec.application, spec.application_args, conf, spec.jars, spec.packages, spec.py_files, spec.env_vars, spec.credentials)
    env = {**os.environ, **spec.env_vars}
    if master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    output = SparkOutput(progress, verbose=verbose)
    tail: deque[str] = deque(maxlen=200)
    with credentials_file(spec.credentials) as path:
        if spec.credentials:
            env[CREDENTIALS_FILE_ENV] = path
        proc = subprocess.Popen(spec.command(master), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read() if proc.stdout else ""), daemon=True)
        reader.start()
        timer = threading.Timer(timeout, proc.kill) if timeout is not None else None
        if timer is not None:
            timer.start()
        done = threading.Event()

        def beat() -> None:  # the driver's start prints nothing: say the state now and then (throttled)
            while not done.wait(1.0):
                output.heartbeat()

        threading.Thread(target=beat, daemon=True).start()
        try:
            for line in proc.stderr or ():
                tail.append(line.rstrip("\n"))
                if output.feed(line) and verbose:
                    sys.stderr.write(line)
            returncode = proc.wait()
            reader.join()
        finally:
            done.set()
            if timer is not None:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
    out = "".join(stdout)
    if timer is not None and returncode < 0:
        raise subprocess.TimeoutExpired(spec.command(master), timeout or 0)
    if returncode != 0:
        lines = out.splitlines() + list(tail)
        failed = "\n".join(line for line in lines if "delta-maintenance spark job failed" in line) or "\n".join(tail)[-2000:]
        raise SparkJobError(f"Spark job {spec.name} exited with {returncode}: {failed}")
    return out


def verify_checkpoint(store: LogStore, version: int) -> CheckpointGroup:
    """The complete checkpoint at ``version`` that the job must have made visible."""
    groups = [g for g in list_log_files(store).complete_checkpoints() if g.version == version]
    if not groups:
        raise SparkJobError(f"{store.uri}: the Spark job finished but no complete checkpoint exists at version {version}", version=version)
    return groups[-1]


def verify_compaction(store: LogStore, start: int, end: int) -> ParsedLogPath:
    found = [c for c in list_log_files(store).compactions if c.version == start and c.end_version == end]
    if not found:
        raise SparkJobError(f"{store.uri}: the Spark job finished but {start}.{end}.compacted.json is missing", version=end)
    return found[0]
