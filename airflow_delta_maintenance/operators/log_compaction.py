"""``DeltaLogCompactionOperator``: aligned log compaction windows over published versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.operations.log_compaction import run_log_compaction
from ..version_compat import AirflowFailException
from ._base import DeltaTableOperator, translate_errors
from ._params import as_int
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaLogCompactionOperator(SparkEngineMixin, DeltaTableOperator):
    """Write ``<x>.<y>.compacted.json`` for every aligned window not yet compacted.

    Logs one summary line (``compaction: wrote 2 window(s) over 1-20 (3.1 KiB) in 0.2 s``, or the
    skip with its reason) and returns the common record (docs: operators/results.md): ``from_version`` /
    ``to_version`` span the windows written, ``count`` is their number; ``skipped_windows`` counts
    the skipped ones by reason.

    ``engine="local"`` (default) writes them here; ``engine="spark"`` runs ``spark_jobs/log_compaction.py``
    for each window through ``SparkSubmitHook`` (connection ``spark_conn_id``, see ``hooks.spark``).
    The gates and the windows are the same either way.

    :param interval: window length; windows end on multiples of it (templated)
    :param max_window_bytes: skip windows whose commits exceed this many bytes (0: no guard)
    :param spark_conf: extra Spark conf; ``spark_jars`` / ``spark_packages``: dependencies
    :param spark_settings: overrides of the Spark connection's settings (``SparkSettings`` fields)
    :param show_spark_logs: pass Spark's own log lines to the task log (default: warnings, and progress)
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
        show_spark_logs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.interval = interval
        self.max_window_bytes = max_window_bytes
        self.engine = engine
        self.set_spark_options(spark_conn_id, spark_conf, spark_jars, spark_packages, spark_settings, show_spark_logs)

    def execute(self, context: Context) -> dict[str, Any]:
        interval = as_int(self.interval, "interval", 10, minimum=2) or 10
        max_bytes = as_int(self.max_window_bytes, "max_window_bytes", 0, minimum=0) or 0
        if self.engine not in ("spark", "local"):
            raise AirflowFailException(f"parameter engine must be spark or local, got {self.engine!r}")

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                writer = None
                if self.engine == "spark":
                    from ..maintenance.spark.compaction_engine import SparkCompactionWriter

                    writer = SparkCompactionWriter(table.store, table.uri, table.storage_options, self.submit_spark_job,
                                                   conf=self.spark_conf, jars=self.spark_jars, packages=self.spark_packages)
                return self.finish(run_log_compaction(table, interval=interval, max_window_bytes=max_bytes, writer=writer).report())

        return translate_errors("log compaction", self.table_uri, run)
