"""``DeltaCheckpointOperator``: a checkpoint when due, by Spark (default) or on the worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..maintenance.checkpoint import plan_checkpoint, run_local_checkpoint
from ..maintenance.spark_submit import checkpoint_job, verify_checkpoint
from ._base import DeltaTableOperator, translate_errors
from ._spark import SparkEngineMixin

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context


class DeltaCheckpointOperator(SparkEngineMixin, DeltaTableOperator):
    """Write a checkpoint at the latest published version when ``interval`` commits have passed.

    ``engine="spark"`` submits ``spark_jobs/checkpoint.py`` through ``SparkSubmitHook``
    (connection ``spark_conn_id``, ``local[*]`` by default; its extras say where and how, see
    ``hooks.spark``) and then verifies the checkpoint by reading the log: a zero exit code alone
    is not success. ``engine="local"`` writes it here.

    :param interval: commits between checkpoints (default: the table's ``delta.checkpointInterval``) (templated)
    :param force: write even if not due (templated)
    :param version: published version to checkpoint (default: latest published) (templated)
    :param spark_conf: extra Spark conf; ``spark_jars`` / ``spark_packages``: dependencies
    :param spark_settings: overrides of the Spark connection's settings (``SparkSettings`` fields)
    """

    template_fields: Sequence[str] = (*DeltaTableOperator.template_fields, "interval", "force", "version", "engine")

    def __init__(
        self,
        *,
        engine: str = "spark",
        interval: int | str | None = None,
        force: bool | str = False,
        version: int | str | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_jars: str | None = None,
        spark_packages: str | None = None,
        spark_settings: dict[str, Any] | None = None,
        ship_package: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.interval = interval
        self.force = force
        self.version = version
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf or {}
        self.spark_jars = spark_jars
        self.spark_packages = spark_packages
        self.spark_settings = {**(spark_settings or {}), **({} if ship_package is None else {"ship_package": ship_package})}
        self._hook: Any = None

    def execute(self, context: Context) -> dict[str, Any]:
        force = self.force if isinstance(self.force, bool) else str(self.force).strip().lower() in ("true", "1", "yes")
        version = None if self.version in (None, "", "None") else int(self.version)  # type: ignore[arg-type]
        if self.engine not in ("spark", "local"):
            raise ValueError(f"engine must be spark or local, got {self.engine!r}")

        interval = None if self.interval in (None, "", "None") else int(self.interval)  # type: ignore[arg-type]
        table = translate_errors("checkpoint planning", self.table_uri, self.open_table)
        with table:
            plan = translate_errors("checkpoint planning", self.table_uri, lambda: plan_checkpoint(table, interval=interval, version=version, force=force))
            decision = plan.decision
            summary: dict[str, Any] = {"engine": self.engine, **decision.to_dict(), "skipped": not decision.due}
            if not decision.due:
                self.log.info("checkpoint not due: %s", decision.reason)
                return summary
            if self.engine == "local":
                result = translate_errors("checkpoint", self.table_uri, lambda: run_local_checkpoint(table, plan))
                summary.update(checkpoint_version=result.version, kind=result.kind, num_actions=result.num_actions, size_bytes=result.size_in_bytes, existed=result.existed)
                return summary
            job = checkpoint_job(table.uri, decision.version, table.storage_options, conf=self.spark_conf, jars=self.spark_jars,
                                 packages=self.spark_packages)
            self.submit_spark_job(job)
            group = translate_errors("checkpoint verification", self.table_uri, lambda: verify_checkpoint(table.store, decision.version))
        summary.update(checkpoint_version=group.version, files=len(group.files), size_bytes=group.size_in_bytes)
        return summary
