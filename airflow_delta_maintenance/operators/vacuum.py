"""``DeltaVacuumOperator``: delete data files no retained version references; a dry run unless told."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..maintenance.operations.vacuum import run_vacuum
from ..version_compat import AirflowSkipException
from ._base import DeltaTableOperator, translate_errors
from ._due import not_due, record_work
from ._params import as_bool, as_seconds
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

__all__ = ["DeltaVacuumOperator"]

MODES = ("full", "lite")
ENGINES = ("local", "spark")


class DeltaVacuumOperator(SparkEngineMixin, DeltaTableOperator):
    """Plan (and with ``dry_run=False`` execute) the VACUUM of the table as its catalog sees it:
    every data, deletion-vector and change-data file a version inside the retention needs stays,
    ratified-but-unpublished commits included; the rest older than the retention goes.

    Logs one summary line (``vacuum: deleted 1,204 files (3.1 GiB) in 12 partitions; FULL,
    retention 168 h, v41``) and returns the common record (docs: operators/results.md) with the
    plan's counts, bytes and top partitions — never the file list.

    :param dry_run: only plan (default) (templated)
    :param mode: ``full`` (list the table root) or ``lite`` (the retained log's removes)
    :param retention_hours: override ``delta.deletedFileRetentionDuration`` (shorter needs
        ``allow_shorter_retention``): hours, a ``timedelta`` or ``"12h"``/``"7d"`` (templated)
    :param allow_shorter_retention: accept a retention below the table's own
    :param catalog_permits_vacuum: the table's catalog allows VACUUM (catalog-managed tables)
    :param inventory: an S3 Inventory ``manifest.json`` or a listing file instead of listing the root
    :param engine: ``local`` (the worker's threads) or ``spark``: the listing of the root and the
        deletions run as ``spark_jobs/vacuum.py`` jobs, submitted like the checkpoint job
        (``spark_conn_id``, ``spark_conf``, ``spark_jars``, ``spark_packages``, ``spark_settings``,
        ``show_spark_logs``); planning, re-validation and the records stay in this task
    :param min_interval: skip (not due) when this task last succeeded less than this long ago:
        seconds, a ``timedelta`` or ``"7d"``; None runs every time
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "dry_run", "retention_hours", "inventory")

    def __init__(
        self,
        *,
        dry_run: bool | str = True,
        mode: str = "full",
        retention_hours: float | timedelta | str | None = None,
        allow_shorter_retention: bool = False,
        catalog_permits_vacuum: bool = False,
        inventory: str | None = None,
        min_interval: float | timedelta | str | None = None,
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
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine = engine
        self.set_spark_options(spark_conn_id, spark_conf, spark_jars, spark_packages, spark_settings, show_spark_logs)
        if mode not in MODES:
            raise ValueError(f"mode must be full or lite, got {mode!r}")
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]  # shadows BaseOperator.dry_run(); the argument name is public
        self.mode = mode
        self.retention_hours = retention_hours
        self.allow_shorter_retention = allow_shorter_retention
        self.catalog_permits_vacuum = catalog_permits_vacuum
        self.inventory = inventory
        self.min_interval = min_interval

    def _retention_ms(self) -> int | None:
        value = self.retention_hours
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = value * 3600  # a bare number is hours here (delta-spark's RETAIN n HOURS)
        elif isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
            value = float(value) * 3600
        seconds = as_seconds(value, "retention_hours")
        return None if seconds is None else round(seconds * 1000)

    def execute(self, context: Context) -> dict[str, Any]:
        reason = not_due(context, self.task_id, self.min_interval, "VACUUM")
        if reason is not None:
            self.log.info("vacuum: skipped — %s", reason)
            raise AirflowSkipException(reason)
        dry_run = as_bool(self.dry_run, "dry_run", True)
        retention = self._retention_ms()
        allow_shorter = as_bool(self.allow_shorter_retention, "allow_shorter_retention", False)
        permits = as_bool(self.catalog_permits_vacuum, "catalog_permits_vacuum", False)

        def run() -> dict[str, Any]:
            with self.open_table() as table:
                engine = None
                if self.engine == "spark":
                    from ..maintenance.spark.vacuum_engine import SparkVacuumEngine

                    engine = SparkVacuumEngine(table.store, table.uri, table.storage_options, self.submit_spark_job,
                                               conf=self.spark_conf, jars=self.spark_jars, packages=self.spark_packages)
                result = run_vacuum(
                    table,
                    dry_run=dry_run,
                    mode="lite" if self.mode == "lite" else "full",
                    retention_ms=retention,
                    allow_shorter_retention=allow_shorter,
                    catalog_permits_vacuum=permits,
                    inventory=self.inventory or None,
                    progress=self.progress(),
                    engine=engine,
                )
            record = self.finish(result.report())
            record_work(context)
            if result.commits:
                self.emit_log_event(context, vacuum_version=result.commits[-1])
            return record

        return translate_errors("VACUUM", self.table_uri, run)

