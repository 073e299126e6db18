"""Spark submission of the maintenance jobs, without Airflow: what to submit, where, and how to verify it.

A ``SparkJobSpec`` says what runs (application, arguments, the storage's Spark conf); a
``SparkSettings`` says where and how (master, deploy mode, network, dependencies) — from the Spark
connection's extras, operator arguments or CLI flags. ``plan_submission`` turns both into what
``spark-submit`` gets, the same way for the Airflow hook and the CLI:

- **Network**: a driver on this machine (client mode) listens on an address taken from the
  settings; without one it is 127.0.0.1 for ``local`` masters and masters on a loopback address,
  and Spark's own choice (this host's address, never the wildcard) otherwise. The UI is off unless
  enabled; the driver's UI binds where ``SPARK_LOCAL_IP`` says, which is set to that address.
- **Shipping**: for masters other than ``local`` the package's ``deltalog`` and ``spark_jobs``
  modules are zipped (cached by content hash) and passed with ``--py-files``; jars, packages and
  extra Python files come from the settings.
- **Launcher**: ``spark-submit`` by absolute path (``$SPARK_HOME``'s, else the installed
  ``pyspark``'s, whose ``SPARK_HOME`` is the package), and the client-mode driver runs this
  interpreter: nothing has to be on ``PATH``.

Secrets (storage keys, secret, session token) never travel in argv nor in environment values:
YARN and Kubernetes render driver environment variables as ``--conf`` arguments. They are written
to a private file (mode 0600) whose *path* is passed in ``DELTA_MAINTENANCE_CREDENTIALS_FILE``; when
the driver runs in the cluster the file is also shipped with ``--files`` (YARN localizes it into the
driver's working directory; on Kubernetes ``--files`` needs ``spark.kubernetes.file.upload.path``),
and the job looks for it by name there.

Success is decided by reading the log afterwards — a zero exit code alone is not success.
"""

from __future__ import annotations

import hashlib
import importlib.util
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from ...deltalog.log_segment.listing import CheckpointGroup, list_log_files
from ...deltalog.model.paths import ParsedLogPath
from ...deltalog.storage import LogStore
from ..errors import MaintenanceError
from ..operations.summary import Progress
from .progress import SparkOutput, heartbeats, quiet_spark_conf

__all__ = [
    "STORAGE_OPTIONS_ENV",
    "CREDENTIALS_FILE_ENV",
    "SECRET_OPTION_KEYS",
    "credentials_file",
    "write_credentials_file",
    "remove_credentials_file",
    "SparkJobSpec",
    "SparkJobError",
    "SparkSettings",
    "SubmitPlan",
    "plan_submission",
    "spark_submit_binary",
    "job_application",
    "package_zip",
    "checkpoint_job",
    "compaction_job",
    "environment_credentials",
    "run_spark_submit",
    "spark_compaction_writer",
    "verify_checkpoint",
    "verify_compaction",
    "local_spark_conf",
]

STORAGE_OPTIONS_ENV = "DELTA_MAINTENANCE_STORAGE_OPTIONS"  # same name as spark_jobs._common (no import: pyspark)
CREDENTIALS_FILE_ENV = "DELTA_MAINTENANCE_CREDENTIALS_FILE"  # ditto; its value is a path, never a secret
# fsspec/s3fs option names that hold secrets; they go to the credentials file only
SECRET_OPTION_KEYS = frozenset({"key", "secret", "token", "password", "session_token", "aws_secret_access_key", "aws_session_token"})
LOOPBACK = "127.0.0.1"
DEPLOY_MODES = ("client", "cluster")


class SparkJobError(MaintenanceError):
    """The Spark job failed, or finished without the expected files in the log."""


# --- what runs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkJobSpec:
    name: str
    application: str
    application_args: list[str]
    conf: dict[str, str] = field(default_factory=dict)
    jars: str | None = None
    packages: str | None = None
    py_files: str | None = None
    env_vars: dict[str, str] = field(default_factory=dict)  # the driver's; no secrets: YARN/k8s render these into argv
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

    def command(self, master: str | SparkSettings = "local[*]") -> list[str]:
        """The ``spark-submit`` argv (without a credentials file: for jobs that need none)."""
        settings = master if isinstance(master, SparkSettings) else SparkSettings(master=master)
        return plan_submission(settings, self).command(self)


# --- where and how it runs ----------------------------------------------------------------------


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"Spark setting {name} must be true or false, got {value!r}")


def _port(value: Any, name: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"Spark setting {name} must be a port number, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"Spark setting {name} must be a port number, got {value!r}")
    return port


def _conf_mapping(value: Any, name: str) -> dict[str, str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"Spark setting {name} is not a JSON object ({exc})") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"Spark setting {name} must be an object of Spark conf keys to values, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


def _csv(*parts: str | None) -> str | None:
    items = [p.strip() for part in parts if part for p in part.split(",") if p.strip()]
    return ",".join(dict.fromkeys(items)) or None


@dataclass(frozen=True)
class SparkSettings:
    """Where and how the jobs are submitted: what a user configures, once per cluster.

    Read from the Spark connection (``from_extras``: master and deploy mode as the Spark provider
    reads them, the rest from the extra JSON under the keys in ``EXTRA_KEYS``), then overridden by
    operator arguments or CLI flags (``override``).
    """

    master: str = "local[*]"
    deploy_mode: str = "client"
    # network of a driver on this machine (client mode)
    driver_host: str | None = None  # the address executors reach the driver at
    bind_address: str | None = None  # the local address the driver listens on
    driver_port: int | None = None
    block_manager_port: int | None = None
    ui_enabled: bool = False
    ui_port: int | None = None
    # dependencies and extra conf
    conf: Mapping[str, str] = field(default_factory=dict)
    jars: str | None = None
    packages: str | None = None
    repositories: str | None = None
    py_files: str | None = None
    ship_package: bool | None = None  # None: ship for every master but local
    python: str | None = None  # the executors' (and a cluster driver's) Python
    # Kubernetes
    container_image: str | None = None
    namespace: str | None = None
    service_account: str | None = None
    file_upload_path: str | None = None

    # extra key → field (keys as spark-submit spells its options)
    EXTRA_KEYS: ClassVar[dict[str, str]] = {
        "driver-host": "driver_host",
        "driver-bind-address": "bind_address",
        "driver-port": "driver_port",
        "block-manager-port": "block_manager_port",
        "ui-enabled": "ui_enabled",
        "ui-port": "ui_port",
        "conf": "conf",
        "jars": "jars",
        "packages": "packages",
        "repositories": "repositories",
        "py-files": "py_files",
        "ship-package": "ship_package",
        "python": "python",
        "container-image": "container_image",
        "namespace": "namespace",
        "service-account": "service_account",
        "file-upload-path": "file_upload_path",
    }

    def __post_init__(self) -> None:
        if self.deploy_mode not in DEPLOY_MODES:
            raise ValueError(f"Spark deploy mode must be client or cluster, got {self.deploy_mode!r}")

    @classmethod
    def from_extras(cls, master: str, deploy_mode: str | None, extra: Mapping[str, Any]) -> SparkSettings:
        return cls(master=master, deploy_mode=deploy_mode or "client").override(
            **{name: extra[key] for key, name in cls.EXTRA_KEYS.items() if key in extra}
        )

    def override(self, **values: Any) -> SparkSettings:
        """These settings with every value that is not None replaced (validated and typed)."""
        known = {f.name for f in fields(self)}
        out: dict[str, Any] = {}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"unknown Spark setting {name!r}")
            if value is None:
                continue
            if name in ("driver_port", "block_manager_port", "ui_port"):
                value = _port(value, name)
            elif name in ("ui_enabled", "ship_package"):
                value = _flag(value, name)
            elif name == "conf":
                value = {**self.conf, **_conf_mapping(value, name)}
            else:
                value = str(value)
            out[name] = value
        return replace(self, **out)

    @property
    def kind(self) -> str:
        """local, standalone, yarn, k8s or other."""
        m = self.master
        if m.startswith("local"):
            return "local"
        if m.startswith("spark://"):
            return "standalone"
        if m.startswith("yarn"):
            return "yarn"
        if m.startswith("k8s://"):
            return "k8s"
        return "other"

    def master_host(self) -> str | None:
        """The first master's host for standalone and k8s masters (None for local and yarn)."""
        rest = self.master.split("://", 1)[1] if "://" in self.master else ""
        if self.kind == "k8s":
            rest = rest.split("://", 1)[-1]
        host = rest.split(",")[0].split("/")[0]
        if host.startswith("["):
            return host[1 : host.find("]")]
        return host.rsplit(":", 1)[0] if ":" in host else (host or None)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _executors_here(settings: SparkSettings) -> bool:
    """Executors run on this machine: a local master, or a standalone master on a loopback address."""
    return settings.kind == "local" or (settings.kind == "standalone" and _is_loopback(settings.master_host()))


def local_spark_conf() -> dict[str, str]:
    """For ``local[*]``: keep the driver and its UI off the network."""
    return {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK, "spark.ui.enabled": "false"}


def _network(settings: SparkSettings) -> tuple[dict[str, str], dict[str, str]]:
    """(Spark conf, spark-submit process env) for the driver's network."""
    conf = {"spark.ui.enabled": str(settings.ui_enabled).lower()}
    if settings.ui_port is not None:
        conf["spark.ui.port"] = str(settings.ui_port)
    if settings.deploy_mode == "cluster":
        # the cluster places the driver (Kubernetes refuses these settings outright)
        if settings.driver_host or settings.bind_address:
            raise ValueError("driver-host / driver-bind-address apply to client deploy mode only: in cluster mode the cluster places the driver")
        return conf, {}
    host = settings.driver_host or (LOOPBACK if _executors_here(settings) else None)
    bind = settings.bind_address or (host if _is_loopback(host) else None)
    if host:
        conf["spark.driver.host"] = host
    if bind:
        conf["spark.driver.bindAddress"] = bind
    if settings.driver_port is not None:
        conf["spark.driver.port"] = str(settings.driver_port)
    if settings.block_manager_port is not None:
        conf["spark.driver.blockManager.port"] = str(settings.block_manager_port)
    # the UI (when on) binds where SPARK_LOCAL_IP says, else on every interface
    local_ip = bind or host
    return conf, ({"SPARK_LOCAL_IP": local_ip} if local_ip else {})


def _driver_env_conf(settings: SparkSettings, env: Mapping[str, str]) -> dict[str, str]:
    prefix = {"yarn": "spark.yarn.appMasterEnv.", "k8s": "spark.kubernetes.driverEnv."}.get(settings.kind)
    if prefix is None:
        raise ValueError(f"cluster deploy mode of master {settings.master} cannot run a Python driver; use client mode")
    return {prefix + k: v for k, v in env.items()}


@dataclass(frozen=True)
class SubmitPlan:
    """Everything ``spark-submit`` gets besides the application and its arguments."""

    settings: SparkSettings
    conf: dict[str, str]
    py_files: str | None
    jars: str | None
    packages: str | None
    repositories: str | None
    files: str | None  # the credentials file when the driver runs in the cluster
    launcher_env: dict[str, str]  # the spark-submit process (and a client-mode driver)

    def command(self, spec: SparkJobSpec, binary: str | None = None) -> list[str]:
        s = self.settings
        cmd = [binary or spark_submit_binary(), "--master", s.master, "--deploy-mode", s.deploy_mode, "--name", spec.name]
        for k, v in self.conf.items():
            cmd += ["--conf", f"{k}={v}"]
        for flag, value in (("--files", self.files), ("--py-files", self.py_files), ("--jars", self.jars),
                            ("--packages", self.packages), ("--repositories", self.repositories)):
            if value:
                cmd += [flag, value]
        return [*cmd, spec.application, *spec.application_args]


def plan_submission(settings: SparkSettings, spec: SparkJobSpec, credentials_path: str | None = None) -> SubmitPlan:
    """The conf, files and process environment of one submission of ``spec`` with ``settings``.

    Conf precedence, lowest first: derived defaults (network, Python, Kubernetes), the settings'
    ``conf``, then the job's own conf (storage endpoints, operator ``spark_conf`` / ``--spark-conf``).
    """
    client = settings.deploy_mode == "client"
    conf, launcher_env = _network(settings)
    driver_env = dict(spec.env_vars)
    if credentials_path:
        driver_env[CREDENTIALS_FILE_ENV] = credentials_path  # a path: harmless in argv
    if client:
        # the driver is spark-submit's child on this machine: this interpreter has the package
        conf["spark.pyspark.driver.python"] = sys.executable
        launcher_env.update(driver_env)
    else:
        conf.update(_driver_env_conf(settings, driver_env))
    python = settings.python or (sys.executable if _executors_here(settings) else None)
    if python:
        conf["spark.pyspark.python"] = python
        if not client:
            conf["spark.pyspark.driver.python"] = python
    if settings.kind == "k8s":
        for key, value in (("spark.kubernetes.container.image", settings.container_image),
                           ("spark.kubernetes.namespace", settings.namespace),
                           ("spark.kubernetes.authenticate.driver.serviceAccountName", settings.service_account),
                           ("spark.kubernetes.file.upload.path", settings.file_upload_path)):
            if value:
                conf[key] = value
    conf.update(settings.conf)
    conf.update(spec.conf)
    if settings.kind == "k8s" and "spark.kubernetes.container.image" not in conf:
        raise ValueError(f"master {settings.master}: Kubernetes needs a container image (Spark connection extra `container-image`)")
    ship = settings.kind != "local" if settings.ship_package is None else settings.ship_package
    return SubmitPlan(
        settings=settings,
        conf=conf,
        py_files=_csv(package_zip() if ship else None, settings.py_files, spec.py_files),
        jars=_csv(settings.jars, spec.jars),
        packages=_csv(settings.packages, spec.packages),
        repositories=settings.repositories,
        files=credentials_path if credentials_path and not client else None,
        launcher_env=launcher_env,
    )


def spark_submit_binary() -> str:
    """``spark-submit`` by absolute path, so that nothing has to be on ``PATH``: ``$SPARK_HOME``'s
    (a Spark distribution), else the installed pyspark's (its ``SPARK_HOME`` is the package
    itself; ``pyspark-client`` has none), else the one on ``PATH``."""
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "bin" / "spark-submit")
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / "bin" / "spark-submit")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("spark-submit") or "spark-submit"


def job_application(job: str) -> str:
    """Path of ``spark_jobs/<job>.py`` inside the installed package (located without importing pyspark)."""
    spec = importlib.util.find_spec(f"airflow_delta_maintenance.spark_jobs.{job}")
    if spec is None or spec.origin is None:
        raise SparkJobError(f"Spark job {job!r} is not part of the installed package")
    return spec.origin


# --- the Python executors need --------------------------------------------------------------------

SHIPPED_PACKAGES = ("deltalog", "spark_jobs")  # what the jobs import (import-linter contract)
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _shipped_files() -> list[tuple[str, Path]]:
    root = Path(__file__).resolve().parents[2]  # airflow_delta_maintenance/
    files = [("airflow_delta_maintenance/__init__.py", root / "__init__.py")]
    for package in SHIPPED_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append((f"airflow_delta_maintenance/{path.relative_to(root).as_posix()}", path))
    return files


def _cache_dir() -> Path:
    base = os.environ.get("DELTA_MAINTENANCE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "airflow-delta-maintenance"
    )
    path = Path(base)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise SparkJobError(f"cache directory {path} must be a directory of this user, not writable by others")
    return path


def package_zip() -> str:
    """The package's ``deltalog`` and ``spark_jobs`` zipped for ``--py-files``: built once per
    content (the name carries the hash of every shipped file), reproducibly, atomically."""
    files = _shipped_files()
    digest = hashlib.sha256()
    contents = []
    for name, path in files:
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        contents.append((name, data))
    directory = _cache_dir()
    target = directory / f"airflow_delta_maintenance-{digest.hexdigest()[:16]}.zip"
    if target.is_file() and not target.is_symlink():
        return str(target)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".zip-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in contents:
                info = zipfile.ZipInfo(name, _ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
        os.replace(tmp, target)  # same bytes whoever wins a race
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return str(target)


# --- secrets ---------------------------------------------------------------------------------------


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


# --- the jobs --------------------------------------------------------------------------------------


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


def _job(
    name: str,
    job: str,
    table_uri: str,
    args: list[str],
    storage_options: Mapping[str, Any] | None,
    conf: Mapping[str, Any] | None,
    jars: str | None,
    packages: str | None,
) -> SparkJobSpec:
    env, storage_conf, credentials = _storage_env(storage_options or {})
    merged = {**storage_conf, **{k: str(v) for k, v in (conf or {}).items()}}
    return SparkJobSpec(
        name=name,
        application=job_application(job),
        application_args=["--table-uri", table_uri, *args],
        conf=merged,
        jars=jars,
        packages=packages,
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
    sidecars: int = 0,
) -> SparkJobSpec:
    args = ["--version", str(version)] + (["--sidecars", str(sidecars)] if sidecars else [])
    return _job(f"delta-checkpoint-{version}", "checkpoint", table_uri, args, storage_options, conf, jars, packages)


def compaction_job(
    table_uri: str,
    start: int,
    end: int,
    storage_options: Mapping[str, Any] | None = None,
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
) -> SparkJobSpec:
    args = ["--start", str(start), "--end", str(end)]
    return _job(f"delta-compaction-{start}-{end}", "log_compaction", table_uri, args, storage_options, conf, jars, packages)


def run_spark_submit(
    spec: SparkJobSpec,
    master: str | SparkSettings = "local[*]",
    *,
    timeout: float | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> str:
    """Run the job with ``spark-submit`` (the CLI's Spark engine); returns its stdout.

    Spark's stderr is read as it comes: stage progress goes to ``progress`` (the caller throttles);
    Spark's own log stays at WARN unless ``verbose``, when its lines are echoed to our stderr."""
    settings = master if isinstance(master, SparkSettings) else SparkSettings(master=master)
    if not verbose:
        spec = replace(spec, conf=quiet_spark_conf(spec.conf))
    output = SparkOutput(progress, verbose=verbose)
    tail: deque[str] = deque(maxlen=200)
    with credentials_file(spec.credentials) as path:
        plan = plan_submission(settings, spec, path if spec.credentials else None)
        env = {**os.environ, **plan.launcher_env}
        command = plan.command(spec)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read() if proc.stdout else ""), daemon=True)
        reader.start()
        timer = threading.Timer(timeout, proc.kill) if timeout is not None else None
        if timer is not None:
            timer.start()
        try:
            with heartbeats(output):
                for line in proc.stderr or ():
                    tail.append(line.rstrip("\n"))
                    if output.feed(line) and verbose:
                        sys.stderr.write(line)
                returncode = proc.wait()
                reader.join()
        finally:
            if timer is not None:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
    out = "".join(stdout)
    if timer is not None and returncode < 0:
        raise subprocess.TimeoutExpired(command, timeout or 0)
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


def spark_compaction_writer(
    store: LogStore,
    table_uri: str,
    storage_options: Mapping[str, Any] | None,
    submit: Callable[[SparkJobSpec], Mapping[str, Any] | None],
    *,
    conf: Mapping[str, Any] | None = None,
    jars: str | None = None,
    packages: str | None = None,
) -> Callable[[int, int], dict[str, Any]]:
    """A window writer for ``run_log_compaction``: one Spark job per window through ``submit``,
    then the file read back from the log (a zero exit code alone is not success)."""

    def write(start: int, end: int) -> dict[str, Any]:
        reported = submit(compaction_job(table_uri, start, end, storage_options, conf=conf, jars=jars, packages=packages)) or {}
        found = verify_compaction(store, start, end)
        # whether this job or a concurrent one created it, and its line count, are the job's to say
        # (its result line); the file itself comes from the log
        return {"start": start, "end": end, "file": found.name, "existed": not reported.get("created", True),
                "num_actions": int(reported.get("num_file_actions") or 0), "size_bytes": found.size}

    return write
