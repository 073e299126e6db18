"""Spark submission of the maintenance jobs, without Airflow: what to submit, where, and how to verify it.

A ``SparkJobSpec`` says what runs (application, arguments, the storage's Spark conf; the jobs are
built in ``jobs.py``); a ``SparkSettings`` (``settings.py``) says where and how (master, deploy mode, network, dependencies) — from the Spark
connection's extras, operator arguments or CLI flags. ``plan_submission`` turns both into what
``spark-submit`` gets, the same way for the Airflow hook and the CLI:

- **Network**: a driver on this machine (client mode) listens on an address taken from the
  settings; without one it is 127.0.0.1 for ``local`` masters and masters on a loopback address,
  and Spark's own choice (this host's address, never the wildcard) otherwise. The UI is off unless
  enabled; the driver's UI binds where ``SPARK_LOCAL_IP`` says, which is set to that address.
- **Shipping** (``packaging.py``): for masters other than ``local`` the package's ``deltalog`` and ``spark_jobs``
  modules are zipped (cached by content hash) and passed with ``--py-files``; jars, packages and
  extra Python files come from the settings.
- **Launcher**: ``spark-submit`` by absolute path (``$SPARK_HOME``'s, else the installed
  ``pyspark``'s, whose ``SPARK_HOME`` is the package), and the client-mode driver runs this
  interpreter: nothing has to be on ``PATH``.

Secrets (storage keys, secret, session token; ``credentials.py``) never travel in argv nor in environment values:
YARN and Kubernetes render driver environment variables as ``--conf`` arguments. They are written
to a private file (mode 0600) whose *path* is passed in ``DELTA_MAINTENANCE_CREDENTIALS_FILE``; when
the driver runs in the cluster the file is also shipped with ``--files`` (YARN localizes it into the
driver's working directory; on Kubernetes ``--files`` needs ``spark.kubernetes.file.upload.path``),
and the job looks for it by name there.

Success is decided by reading the log afterwards — a zero exit code alone is not success.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import SparkJobError
from ..operations.summary import Progress
from .credentials import CREDENTIALS_FILE_ENV, credentials_file, job_credentials
from .packaging import package_zip
from .progress import SparkOutput, heartbeats, quiet_spark_conf
from .settings import SparkSettings, driver_env_conf, executors_here, network_conf

__all__ = ["SparkJobSpec", "SubmitPlan", "plan_submission", "spark_submit_binary", "run_spark_submit"]


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
    # keys that expire, refreshed while the job runs (``credentials.RefreshingCredentials``)
    credential_source: Callable[[], Mapping[str, str]] | None = field(default=None, repr=False, compare=False)

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
            "credential_source": self.credential_source,
        }

    def command(self, master: str | SparkSettings = "local[*]") -> list[str]:
        """The ``spark-submit`` argv (without a credentials file: for jobs that need none)."""
        settings = master if isinstance(master, SparkSettings) else SparkSettings(master=master)
        return plan_submission(settings, self).command(self)


# --- the spark-submit command ------------------------------------------------------------------


def _csv(*parts: str | None) -> str | None:
    items = [p.strip() for part in parts if part for p in part.split(",") if p.strip()]
    return ",".join(dict.fromkeys(items)) or None


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
    conf, launcher_env = network_conf(settings)
    driver_env = dict(spec.env_vars)
    if credentials_path:
        driver_env[CREDENTIALS_FILE_ENV] = credentials_path  # a path: harmless in argv
    if client:
        # the driver is spark-submit's child on this machine: this interpreter has the package
        conf["spark.pyspark.driver.python"] = sys.executable
        launcher_env.update(driver_env)
    else:
        conf.update(driver_env_conf(settings, driver_env))
    python = settings.python or (sys.executable if executors_here(settings) else None)
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
    env_vars, conf, secrets, refreshing = job_credentials(spec.env_vars, spec.conf, spec.credentials, spec.credential_source,
                                                          executors_here=executors_here(settings))
    spec = replace(spec, env_vars=env_vars, conf=conf, credentials=secrets)
    # a file only when there is a secret: one a killed run leaves behind holds nothing, or is not there
    with credentials_file(spec.credentials) if spec.credentials else nullcontext(None) as path, refreshing or nullcontext():
        plan = plan_submission(settings, spec, path)
        env = {**os.environ, **plan.launcher_env, **(refreshing.launcher_env if refreshing else {})}
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


