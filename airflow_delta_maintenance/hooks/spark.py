"""``DeltaSparkSubmitHook``: ``SparkSubmitHook`` for the maintenance jobs.

- The Spark connection says where the jobs run: master, ``deploy-mode``, ``queue``, ``namespace``
  as the Spark provider reads them, and in its extra JSON the settings of
  ``maintenance.spark.settings.SparkSettings`` (``driver-host``, ``driver-bind-address``, ports,
  ``ui-enabled``, ``jars``, ``packages``, ``py-files``, ``conf``, ``python``, ``container-image``…).
  Operator arguments override them. ``plan_submission`` derives the rest (loopback driver and no UI
  by default, the package zipped for ``--py-files`` on clusters) exactly as for the CLI.
- Without the named connection (``spark_default``) the jobs run ``local[*]`` so that a fresh
  installation works; Airflow's hook would fall back to ``yarn``. This goes through public means
  only: a connection defined in this process's environment.
- ``spark-submit`` is the installed pyspark's, by absolute path, unless the connection names a
  ``spark-binary``: the worker's ``PATH`` does not matter.
- ``credentials`` (the job's storage secrets) are written to a private file whose path, not
  content, reaches the job; when the driver runs in the cluster the file is also shipped with
  ``--files``. No secret is ever an argument or an environment value, which YARN and Kubernetes
  masters would render into argv.
- Spark's own log stays at WARN (``maintenance.spark.progress``: a log4j2 configuration for the
  driver) and the scheduler's lines become a throttled progress line in the task log;
  ``show_spark_logs=True`` passes every line through with Spark's own configuration. The lines are
  read where the upstream hook logs them (its public ``log``), so no upstream method is replaced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from ..maintenance.operations.summary import Throttled
from ..maintenance.spark.credentials import job_credentials, remove_credentials_file, write_credentials_file
from ..maintenance.spark.progress import SparkOutput, heartbeats, quiet_spark_conf
from ..maintenance.spark.settings import SparkSettings, executors_here
from ..maintenance.spark.submit import SparkJobSpec, plan_submission, spark_submit_binary
from ..version_compat import AirflowException, BaseHook

__all__ = ["DeltaSparkSubmitHook", "LOCAL_SPARK_CONN_ID", "connection_settings"]

LOCAL_SPARK_CONN_ID = "delta_maintenance_local_spark"


def _master(conn: Any) -> str:
    """The master a connection selects, as the Spark provider reads it."""
    host = conn.host or ""
    master = host if conn.conn_type == "spark" and host and ("://" in host or not conn.port) else f"{conn.conn_type}://{host}"
    return f"{master}:{conn.port}" if conn.port else master


def connection_settings(conn_id: str) -> tuple[SparkSettings, dict[str, Any]] | None:
    """The settings a Spark connection holds and its extra, or None without the connection."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowException:  # not found (the provider treats any lookup failure the same way)
        return None
    extra = conn.extra_dejson or {}
    try:
        return SparkSettings.from_extras(_master(conn), extra.get("deploy-mode"), extra), extra
    except ValueError as exc:
        raise AirflowException(f"Spark connection {conn_id}: {exc}") from None


class DeltaSparkSubmitHook(SparkSubmitHook):
    """:param settings: ``SparkSettings`` fields overriding the connection's (operator arguments)."""

    def __init__(
        self,
        *,
        conn_id: str = "spark_default",
        name: str = "delta-maintenance",
        conf: dict[str, Any] | None = None,
        application_args: list[Any] | None = None,
        env_vars: dict[str, Any] | None = None,
        files: str | None = None,
        jars: str | None = None,
        packages: str | None = None,
        py_files: str | None = None,
        credentials: Mapping[str, Any] | None = None,
        credential_source: Callable[[], Mapping[str, str]] | None = None,
        show_spark_logs: bool = False,
        settings: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        found = connection_settings(conn_id)
        extra: dict[str, Any]
        if found is None:
            # a connection of this process only (the task's), read by the provider like any other
            os.environ.setdefault(f"AIRFLOW_CONN_{LOCAL_SPARK_CONN_ID.upper()}", json.dumps({"conn_type": "spark", "host": "local[*]"}))
            self.using_local_default = True
            conn_id, base, extra = LOCAL_SPARK_CONN_ID, SparkSettings(), {}
        else:
            self.using_local_default = False
            base, extra = found
        self.settings = base.override(**dict(settings or {}))
        # keys that expire: a file refreshed while the job runs when its executors can read it
        env_vars, conf, credentials, self._refreshing = job_credentials(
            {k: str(v) for k, v in (env_vars or {}).items()}, {k: str(v) for k, v in (conf or {}).items()}, credentials or {},
            credential_source, executors_here=executors_here(self.settings))
        self._fixed_temporary_keys = credential_source is not None and self._refreshing is None
        job_conf = dict(conf)
        if not show_spark_logs:
            job_conf = quiet_spark_conf(job_conf)
        self._delta_output: SparkOutput | None = None
        self._show_spark_logs = show_spark_logs
        job = SparkJobSpec(name, "", list(application_args or []), job_conf, jars, packages, py_files,
                           {k: str(v) for k, v in (env_vars or {}).items()})
        self._credentials_file: str | None = write_credentials_file(credentials) if credentials else None
        try:
            self.plan = plan_submission(self.settings, job, self._credentials_file)
        except ValueError as exc:
            self.remove_credentials()
            raise AirflowException(f"Spark connection {conn_id}: {exc}") from None
        # the spark-submit process's environment (and a client-mode driver's): given to Popen by
        # submit(), never to the provider's env_vars, which YARN/k8s render into --conf arguments
        self.process_env = {**self.plan.launcher_env, **(self._refreshing.launcher_env if self._refreshing else {})}
        plan = self.plan
        super().__init__(
            conn_id=conn_id,
            name=name,
            conf=plan.conf,
            application_args=list(application_args or []),
            files=",".join(f for f in (files, plan.files) if f) or None,
            py_files=plan.py_files,
            jars=plan.jars,
            packages=plan.packages,
            repositories=plan.repositories,
            deploy_mode=self.settings.deploy_mode,
            spark_binary=kwargs.pop("spark_binary", None) or (None if extra.get("spark-binary") else spark_submit_binary()),
            **kwargs,
        )
        self.master = self.settings.master

    @property
    def log(self) -> Any:
        """The upstream hook logs each line of spark-submit's output here: scheduler lines become
        a throttled progress line, the job's result line is kept (``job_result``)."""
        return _SparkOutputLog(super().log, self._spark_output())

    def _spark_output(self) -> SparkOutput:
        """The reader of this submission's output, made on first use (its progress goes to the log)."""
        output = self.__dict__.get("_delta_output")
        if output is None:
            base = super().log
            output = self.__dict__["_delta_output"] = SparkOutput(Throttled(base.info), verbose=self.__dict__.get("_show_spark_logs", False))
        return output

    @property
    def job_result(self) -> dict[str, Any] | None:
        """The job's own result line (JSON), once the job has printed it."""
        output = self.__dict__.get("_delta_output")
        return None if output is None else output.job_result

    def submit(self, application: str = "", **kwargs: Any) -> None:
        if self.using_local_default:
            self.log.info("no Spark connection configured: running the job locally (local[*])")
        if self._fixed_temporary_keys:
            self.log.warning("the executors run elsewhere: they get the storage role's current keys, which expire; a job longer than "
                             "their lifetime needs the executors' own AWS identity (instance profile, web identity)")
        if self.process_env:
            kwargs["env"] = {**os.environ, **kwargs.get("env", {}), **self.process_env}
        try:
            with heartbeats(self._spark_output()):
                super().submit(application, **kwargs)
        finally:
            self.remove_credentials()

    def remove_credentials(self) -> None:
        refreshing = self.__dict__.get("_refreshing")
        if refreshing is not None:
            refreshing.close()
            self._refreshing = None
        if self._credentials_file is not None:
            remove_credentials_file(self._credentials_file)
            self._credentials_file = None

    def on_kill(self) -> None:
        try:
            super().on_kill()
        finally:
            self.remove_credentials()


class _SparkOutputLog:
    """The hook's logger, with output lines (logged without arguments) read by ``SparkOutput``."""

    def __init__(self, logger: Any, output: SparkOutput) -> None:
        self._logger = logger
        self._output = output

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if not args and not kwargs and isinstance(msg, str) and not self._output.feed(msg):
            return
        self._logger.info(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)
