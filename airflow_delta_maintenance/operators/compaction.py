"""``DeltaLogCompactionOperator``: aligned log compaction windows over published versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.compaction import run_log_compaction
from ._base import DeltaTableOperator, translate_errors
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCompactionOperator(SparkEngineMixin, DeltaTableOperator):
    """Write ``<x>.<y>.compacted.json`` for every aligned window not yet compacted.

    ``engine="local"`` (default) writes them here; ``engine="spark"`` runs ``spark_jobs/log_compaction.py``
    for each window through ``SparkSubmitHook`` (connection ``spark_conn_id``, see ``hooks.spark``).
    The gates and the windows are the same either way.

    :param interval: window length; windows end on multiples of it (templated)
    :param max_window_bytes: skip windows whose commits exceed this many bytes (0: no guard)
    :param spark_conf: extra Spark conf; ``spark_jars`` / ``spark_packages``: dependencies
    :param spark_settings: overrides of the Spark connection's settings (``SparkSettings`` fields)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "interval", "engine")

    def __init__(
        self,
        *,
        interval: int | str = 10,
        max_window_bytes: int = 0,
        engine: str = "local",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_jars: str | None = None,
        spark_packages: str | None = None,
        spark_settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.interval = interval
        self.max_window_bytes = max_window_bytes
        self.engine = engine
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf or {}
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.spark_settings = spark_settings or {}
        self._hook: Any = None

    def execute(self, context: Context) -> dict[str, Any]:
        if self.engine not in ("spark", "local"):
            raise ValueError(f"engine must be spark or local, got {self.engine!r}")

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                writer = None
                if self.engine == "spark":
                    from ..maintenance.spark_submit import spark_compaction_writer

                    writer = spark_compaction_writer(table.store, table.uri, table.storage_options, self.submit_spark_job,
                                                     conf=self.spark_conf, jars=self.spark_jars, packages=self.spark_packages)
                return run_log_compaction(table, interval=int(self.interval), max_window_bytes=self.max_window_bytes, writer=writer).to_dict()

        result = translate_errors("log compaction", self.table_uri, run)
        self.log.info("wrote %d compaction file(s); skipped %s", len(result["written"]), result["skipped"])
        return result
