"""The Spark engine of the operators: one submission through ``DeltaSparkSubmitHook``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..maintenance.spark.submit import SparkJobSpec

__all__ = ["SparkEngineMixin"]


class SparkEngineMixin:
    """Arguments of ``engine="spark"`` (set by the operator's ``__init__``) and the submission.

    ``spark_settings`` overrides the Spark connection's settings (``SparkSettings`` field names:
    ``driver_host``, ``bind_address``, ``ui_enabled``, ``ui_port``, ``deploy_mode``, ``python``…).
    """

    task_id: str
    spark_conn_id: str
    spark_conf: dict[str, Any]
    spark_jars: str | None
    spark_packages: str | None
    spark_settings: Mapping[str, Any]
    show_spark_logs: bool = False
    _hook: Any = None

    def set_spark_options(self, spark_conn_id: str, spark_conf: dict[str, Any] | None, spark_jars: str | None,
                          spark_packages: str | None, spark_settings: Mapping[str, Any] | None, show_spark_logs: bool) -> None:
        """The operator's ``spark_*`` arguments, as its ``__init__`` received them."""
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf or {}
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.spark_settings = spark_settings or {}
        self.show_spark_logs = show_spark_logs
        self._hook = None

    def submit_spark_job(self, job: SparkJobSpec) -> Mapping[str, Any] | None:
        """Submit ``job`` and return its result line (JSON), when the job printed one."""
        from ..hooks.spark import DeltaSparkSubmitHook

        kwargs = job.hook_kwargs()
        self._hook = DeltaSparkSubmitHook(conn_id=self.spark_conn_id, name=f"{job.name}-{self.task_id}", settings=self.spark_settings,
                                          show_spark_logs=self.show_spark_logs, **kwargs)
        self._hook.submit(job.application)
        result: Mapping[str, Any] | None = self._hook.job_result
        return result

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
