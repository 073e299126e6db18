"""``DeltaOptimizeOperator``: compact small data files, committed through the table's coordinator."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..maintenance.operations.optimize import run_optimize
from ..version_compat import AirflowSkipException
from ._base import DeltaTableOperator, translate_errors
from ._due import not_due, record_work
from ._params import as_bool
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

__all__ = ["DeltaOptimizeOperator"]

ENGINES = ("local", "spark")


class DeltaOptimizeOperator(SparkEngineMixin, DeltaTableOperator):
    """Bin-pack the table's small files into larger ones (delta-spark's ``OPTIMIZE``), planned on
    the catalog's view and committed through the table's coordinator (or put-if-absent on a plain
    table), batch by batch; concurrent writers are handled by Delta's conflict rules.

    Logs one summary line (``optimize: compacted 1,200 file(s) (58.1 MiB) into 20 … v41``) and
    returns the common record with ``files_before``/``files_after``, ``bytes_before``/``bytes_after``,
    ``bins``, ``commits``, ``conflicts`` and the ``plan`` (docs: operators/results.md).

    :param engine: ``local`` (the worker, pyarrow) or ``spark``: each commit batch's bins rewritten by
        ``spark_jobs/optimize.py``, submitted like the checkpoint job (``spark_conn_id``, ``spark_conf``,
        ``spark_jars``, ``spark_packages``, ``spark_settings``, ``show_spark_logs``); planning, conflict
        checks and the commit stay in this task
    :param dry_run: only plan and report (templated); default False, as delta-spark and delta-rs run OPTIMIZE
    :param min_file_size: files below it are compacted (bytes or ``"128MB"``); default
        ``delta.targetFileSize``, else 1 GiB (delta-spark's default)
    :param target_file_size: bins are packed up to it; same default
    :param predicate: a partition predicate, e.g. ``"region = 'us' AND day >= '2024-01-01'"`` (templated)
    :param max_bytes: the run's budget of input bytes; later bins wait for the next run
    :param min_interval: skip (not due) when this task last succeeded less than this long ago:
        seconds, a ``timedelta`` or ``"1d"``/``"12h"``; None runs every time
    :param catalog_permits_optimize: the table's catalog allows OPTIMIZE (catalog-managed tables)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "dry_run", "predicate")

    def __init__(
        self,
        *,
        engine: str = "local",
        dry_run: bool | str = False,
        min_file_size: int | str | None = None,
        target_file_size: int | str | None = None,
        predicate: str | None = None,
        max_bytes: int | str | None = None,
        max_deleted_rows_ratio: float = 0.05,
        commit_batch_bytes: int | str | None = None,
        min_interval: float | timedelta | str | None = None,
        catalog_permits_optimize: bool = False,
        max_workers: int | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_jars: str | None = None,
        spark_packages: str | None = None,
        spark_settings: dict[str, Any] | None = None,
        show_spark_logs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.set_spark_options(spark_conn_id, spark_conf, spark_jars, spark_packages, spark_settings, show_spark_logs)
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine = engine
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]  # shadows BaseOperator.dry_run(); the argument name is public
        self.min_file_size = min_file_size
        self.target_file_size = target_file_size
        self.predicate = predicate
        self.max_bytes = max_bytes
        self.max_deleted_rows_ratio = max_deleted_rows_ratio
        self.commit_batch_bytes = commit_batch_bytes
        self.min_interval = min_interval
        self.catalog_permits_optimize = catalog_permits_optimize
        self.max_workers = max_workers

    def execute(self, context: Context) -> dict[str, Any]:
        reason = not_due(context, self.task_id, self.min_interval, "OPTIMIZE")
        if reason is not None:
            self.log.info("optimize: skipped — %s", reason)
            raise AirflowSkipException(reason)
        from ..deltalog.optimize.plan import OptimizeOptions, parse_size
        from ..deltalog.optimize.predicate import parse_partition_predicate, predicate_types

        dry_run = as_bool(self.dry_run, "dry_run", False)
        permits = as_bool(self.catalog_permits_optimize, "catalog_permits_optimize", False)

        def size(value: Any, name: str) -> int | None:
            return None if value in (None, "") else parse_size(value, name)

        def run() -> dict[str, Any]:
            from ..maintenance.table.catalog_view import ratified_state

            with self.open_table() as table:
                predicate = None
                if self.predicate:
                    state = ratified_state(table, table.catalog_view())
                    meta = state.metadata
                    predicate = parse_partition_predicate(self.predicate, predicate_types(meta.schema, meta.partition_columns))
                options = OptimizeOptions(
                    min_file_size=size(self.min_file_size, "min_file_size"), target_file_size=size(self.target_file_size, "target_file_size"),
                    max_deleted_rows_ratio=float(self.max_deleted_rows_ratio), predicate=predicate, max_bytes=size(self.max_bytes, "max_bytes"),
                )
                extra: dict[str, Any] = {}
                if self.commit_batch_bytes not in (None, ""):
                    extra["commit_batch_bytes"] = parse_size(self.commit_batch_bytes, "commit_batch_bytes")
                if self.engine == "spark":
                    from ..maintenance.spark.optimize_engine import SparkOptimizeEngine

                    extra["engine"] = SparkOptimizeEngine(table.store, table.uri, table.storage_options, self.submit_spark_job,
                                                          conf=self.spark_conf, jars=self.spark_jars, packages=self.spark_packages)
                elif self.max_workers:
                    from ..deltalog.datafiles.files import DataFiles
                    from ..deltalog.optimize.worker import WorkerEngine

                    extra["engine"] = WorkerEngine(DataFiles(table.store), self.max_workers)
                result = run_optimize(table, options, dry_run=dry_run, catalog_permits_optimize=permits, progress=self.progress(), **extra)
            record = self.finish(result.report())
            record_work(context)
            if result.commits:
                self.emit_log_event(context, optimize_version=result.commits[-1], optimize_commits=len(result.commits))
            return record

        return translate_errors("OPTIMIZE", self.table_uri, run)
