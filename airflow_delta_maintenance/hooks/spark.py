"""``DeltaSparkSubmitHook``: ``SparkSubmitHook`` for the maintenance jobs.

- Without the named connection (``spark_default``) the jobs run ``local[*]`` (on a loopback
  driver, no UI) so that a fresh installation works; Airflow's hook would fall back to ``yarn``.
  This goes through public means only: a connection defined in this process's environment.
- ``credentials`` (the job's storage secrets) are written to a private file whose path, not
  content, reaches the job (``maintenance.spark_submit``); on masters whose driver may run in the
  cluster the file is also shipped with ``--files``. No secret is ever an argument or an
  environment value, which YARN and Kubernetes masters would render into argv.
- Spark's own log stays at WARN (``maintenance.spark_progress``: a log4j2 configuration for the
  driver) and the scheduler's lines become a throttled progress line in the task log;
  ``show_spark_logs=True`` passes every line through with Spark's own configuration. The lines are
  read where the upstream hook logs them (its public ``log``), so no upstream method is replaced.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from .._airflow_compat import AirflowException, BaseHook
from ..maintenance.report import Throttled
from ..maintenance.spark_progress import SparkOutput, quiet_spark_conf
from ..maintenance.spark_submit import CREDENTIALS_FILE_ENV, local_spark_conf, remove_credentials_file, write_credentials_file

__all__ = ["DeltaSparkSubmitHook", "LOCAL_SPARK_CONN_ID"]

LOCAL_SPARK_CONN_ID = "delta_maintenance_local_spark"


def _configured_master(conn_id: str) -> str | None:
    """The master a connection selects (as the Spark provider reads it), or None without one."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowException:  # not found (the provider treats any lookup failure the same way)
        return None
    host = conn.host or ""
    master = host if conn.conn_type == "spark" and host and ("://" in host or not conn.port) else f"{conn.conn_type}://{host}"
    return f"{master}:{conn.port}" if conn.port else master


class DeltaSparkSubmitHook(SparkSubmitHook):
    def __init__(
        self,
        *,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        env_vars: dict[str, Any] | None = None,
        files: str | None = None,
        credentials: Mapping[str, Any] | None = None,
        show_spark_logs: bool = False,
        **kwargs: Any,
    ) -> None:
        master = _configured_master(conn_id)
        if master is None:
            # a connection of this process only (the task's), read by the provider like any other
            os.environ.setdefault(f"AIRFLOW_CONN_{LOCAL_SPARK_CONN_ID.upper()}", json.dumps({"conn_type": "spark", "host": "local[*]"}))
            self.using_local_default = True
            conn_id, master = LOCAL_SPARK_CONN_ID, "local[*]"
        else:
            self.using_local_default = False
        env = dict(env_vars or {})
        if master.startswith("local"):
            conf = {**local_spark_conf(), **(conf or {})}
            env = {"SPARK_LOCAL_IP": "127.0.0.1", **env}
        self._credentials_file: str | None = None
        if credentials:
            path = self._credentials_file = write_credentials_file(credentials)
            env[CREDENTIALS_FILE_ENV] = path  # a path: harmless in argv
            if not master.startswith("local"):  # the driver may run in the cluster: ship the file
                files = ",".join(f for f in (files, path) if f)
        if not show_spark_logs:
            conf = quiet_spark_conf({k: str(v) for k, v in (conf or {}).items()})
        self._delta_output: SparkOutput | None = None
        self._show_spark_logs = show_spark_logs
        super().__init__(conn_id=conn_id, conf=conf, env_vars=env, files=files, **kwargs)
        self.master = master

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
        output = self._spark_output()
        done = threading.Event()

        def beat() -> None:  # the driver's start prints nothing: say the state now and then (throttled)
            while not done.wait(1.0):
                output.heartbeat()

        threading.Thread(target=beat, daemon=True).start()
        try:
            super().submit(application, **kwargs)
        finally:
            done.set()
            self.remove_credentials()

    def remove_credentials(self) -> None:
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
