"""``DeltaCheckpointOperator``: a checkpoint when due, on the worker or by Spark as the log's size says (default), or as told."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..deltalog.checkpoint.writer import checkpoint_num_rows
from ..maintenance.operations.checkpoint import CheckpointOutcome, plan_checkpoint, run_local_checkpoint
from ..maintenance.operations.checkpoint_engine import LOCAL_MAX_LOG_BYTES, choose_checkpoint_engine
from ..maintenance.spark.jobs import checkpoint_job, verify_checkpoint
from ..version_compat import AirflowFailException
from ._base import DeltaTableOperator, translate_errors
from ._params import as_bool, as_int, as_version
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaCheckpointOperator(SparkEngineMixin, DeltaTableOperator):
    """Write a checkpoint at the latest published version when ``interval`` commits have passed.

    Logs one summary line (``checkpoint: wrote v120 (classic, 1 part, 210,345 actions, 14.2 MiB)
    in 3.1 s``, or ``checkpoint: skipped — <reason>``) and returns the common record (docs:
    operators/results.md): ``version``, ``count`` (actions), ``bytes``, ``engine``, ``kind``, ``files``.

    ``engine="auto"`` (default) writes it on the worker unless the log the checkpoint replays exceeds
    512 MiB (about 1.2M live files, a worker peak of about 0.85 GiB; measured in benchmarks/RESULTS.md), then submits the Spark job
    (``maintenance.operations.checkpoint_engine``); the task log says which and why.
    ``engine="spark"`` always submits ``spark_jobs/checkpoint.py`` through ``SparkSubmitHook``
    (connection ``spark_conn_id``, ``local[*]`` by default; its extras say where and how, see
    ``hooks.spark``) and then verifies the checkpoint by reading the log: a zero exit code alone
    is not success. ``engine="local"`` always writes it here.

    :param auto_local_max_log_bytes: with ``engine="auto"``, the largest log (bytes) written here
    :param interval: commits between checkpoints (default: the table's ``delta.checkpointInterval``) (templated)
    :param force: write even if not due (templated)
    :param version: published version to checkpoint (default: latest published) (templated)
    :param spark_conf: extra Spark conf; ``spark_jars`` / ``spark_packages``: dependencies
    :param show_spark_logs: pass Spark's own log lines to the task log (default: Spark's warnings
        and errors, and a progress line at most every 5 s from its scheduler)
    :param spark_settings: overrides of the Spark connection's settings (``SparkSettings`` fields)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "interval", "force", "version", "engine")

    def __init__(
        self,
        *,
        engine: str = "auto",
        interval: int | str | None = None,
        force: bool | str = False,
        version: int | str | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_jars: str | None = None,
        spark_packages: str | None = None,
        spark_settings: dict[str, Any] | None = None,
        ship_package: bool | None = None,
        show_spark_logs: bool = False,
        auto_local_max_log_bytes: int = LOCAL_MAX_LOG_BYTES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.auto_local_max_log_bytes = auto_local_max_log_bytes
        self.interval = interval
        self.force = force
        self.version = version
        settings = {**(spark_settings or {}), **({} if ship_package is None else {"ship_package": ship_package})}
        self.set_spark_options(spark_conn_id, spark_conf, spark_jars, spark_packages, settings, show_spark_logs)

    def execute(self, context: Context) -> dict[str, Any]:
        record = self._checkpoint()
        due = not record["skipped"]
        self.emit_log_event(context, checkpoint_version=record["version"] if due else None, checkpoint_due=due)
        return record

    def _checkpoint(self) -> dict[str, Any]:
        force = as_bool(self.force, "force", False)
        version = as_version(self.version, "version")
        interval = as_int(self.interval, "interval", None, minimum=1)
        if self.engine not in ("spark", "local", "auto"):
            raise AirflowFailException(f"parameter engine must be spark, local or auto, got {self.engine!r}")

        table = translate_errors("checkpoint planning", self.table_uri, self.open_table)
        with table:
            plan = translate_errors("checkpoint planning", self.table_uri, lambda: plan_checkpoint(table, interval=interval, version=version, force=force))
            decision = plan.decision
            engine = self.engine
            if not decision.due:
                return self.finish(CheckpointOutcome(table.uri, decision, engine).report())
            if engine == "auto":
                choice = translate_errors("checkpoint planning", self.table_uri, lambda: choose_checkpoint_engine(table.store, plan.state, local_max_log_bytes=self.auto_local_max_log_bytes))
                self.log.info("%s", choice.reason)
                engine = choice.engine
            if engine == "local":
                result = translate_errors("checkpoint", self.table_uri, lambda: run_local_checkpoint(table, plan, progress=self.progress()))
                return self.finish(CheckpointOutcome.local(table.uri, decision, result).report())
            started = time.monotonic()
            translate_errors("checkpoint planning", self.table_uri, lambda: plan.check_tail(table, base_checkpoint=True))
            job = checkpoint_job(table.uri, decision.version, table.storage_options, conf=self.spark_conf, jars=self.spark_jars,
                                 packages=self.spark_packages)
            self.submit_spark_job(job)
            group = translate_errors("checkpoint verification", self.table_uri, lambda: verify_checkpoint(table.store, decision.version))
            reported = self._hook.job_result or {}
            actions = reported.get("num_actions")
            if actions is None:  # the job said nothing we could read: count the rows it wrote
                actions = translate_errors("checkpoint verification", self.table_uri, lambda: checkpoint_num_rows(table.store, group.files))
            outcome = CheckpointOutcome.spark(table.uri, decision, group, existed=bool(reported.get("existed", False)),
                                              num_actions=int(actions), seconds=round(time.monotonic() - started, 6))
        return self.finish(outcome.report())
