"""``DeltaSparkSubmitHook``: ``SparkSubmitHook`` for the maintenance jobs.

- Without the named connection (``spark_default``) the jobs run ``local[*]`` (on a loopback
  driver, no UI) so that a fresh installation works; Airflow's hook would fall back to ``yarn``.
  This goes through public means only: a connection defined in this process's environment.
- ``credentials`` (the job's storage secrets) are written to a private file whose path, not
  content, reaches the job (``maintenance.spark_submit``); on masters whose driver may run in the
  cluster the file is also shipped with ``--files``. No secret is ever an argument or an
  environment value, which YARN and Kubernetes masters would render into argv.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from .._airflow_compat import AirflowException, BaseHook
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
        super().__init__(conn_id=conn_id, conf=conf, env_vars=env, files=files, **kwargs)
        self.master = master

    def submit(self, application: str = "", **kwargs: Any) -> None:
        if self.using_local_default:
            self.log.info("no Spark connection configured: running the job locally (local[*])")
        try:
            super().submit(application, **kwargs)
        finally:
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
