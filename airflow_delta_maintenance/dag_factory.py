"""One maintenance DAG per configured table: wait → publish → checkpoint and compaction → cleanup.

Building a DAG does no I/O to tables or coordinators: everything is resolved inside the tasks.
Manual runs take Params (validated by JSON schema): ``dry_run``, ``force_checkpoint``,
``target_version`` and ``skip_wait``.

``build_dags`` isolates tables: a table whose configuration is invalid (or whose DAG cannot be
built) becomes a placeholder DAG under its own id, tagged ``invalid-config``, whose description
and only task state the error — every other table's DAG still loads.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from ._airflow_compat import DAG, AirflowFailException, BaseOperator, Param, TriggerRule

from .fleet_dags import DISCOVERY_DAG_ID, build_discovery_dag
from .maintenance.config import ConfigError, TableConfig, TableConfigError
from .maintenance.fleet_config import load_fleet
from .operators.checkpoint import DeltaCheckpointOperator
from .operators.cleanup import DeltaLogCleanupOperator
from .operators.compaction import DeltaLogCompactionOperator
from .operators.publish import DeltaPublishCommitsOperator
from .sensors.ratified_version import DeltaRatifiedVersionSensor

__all__ = ["build_maintenance_dag", "build_invalid_table_dag", "build_dags"]

log = logging.getLogger(__name__)

_DOC = """
### Delta log maintenance for `{name}`

Table `{uri}` — coordinator `{coordinator}`.

1. **wait** for ratified commits (or `target_version`),
2. **publish** them to `_delta_log/<v>.json` in order,
3. **checkpoint** (engine `{engine}`) when {interval} commits have passed, and **compact** the log in aligned windows of {compaction},
4. **cleanup** of expired log files ({cleanup}; a manual run can override with `dry_run`).

Manual runs: `dry_run`, `force_checkpoint`, `target_version`, `skip_wait`.
"""


def build_maintenance_dag(table: TableConfig, start_date: Any = None) -> DAG:
    import pendulum

    default_args = {
        "owner": table.owner,
        "retries": table.retries,
        "retry_delay": timedelta(minutes=table.retry_delay_minutes),
    }
    if table.pool:
        default_args["pool"] = table.pool
    params = {
        "dry_run": Param(table.cleanup.mode != "delete", type="boolean", title="Dry run", description="plan the cleanup without deleting"),
        "force_checkpoint": Param(False, type="boolean", title="Force a checkpoint", description="write a checkpoint even if not due"),
        "target_version": Param(
            None, type=["null", "integer"], minimum=0, title="Target version", description="wait for and publish up to this version"
        ),
        "skip_wait": Param(False, type="boolean", title="Skip the wait", description="do not wait for new ratified commits"),
    }
    dag = DAG(
        dag_id=table.dag_id,
        description=f"Delta log maintenance of {table.name} ({table.uri})",
        schedule=table.airflow_schedule,
        start_date=start_date or pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["delta-maintenance", *table.tags],
        default_args=default_args,
        params=params,
        doc_md=_DOC.format(
            name=table.name, uri=table.uri, coordinator=table.coordinator or table.coordinator_conn_id or "none",
            engine=table.checkpoint.engine, interval=table.checkpoint.interval or "delta.checkpointInterval",
            compaction=table.compaction.interval, cleanup=table.cleanup.mode,
        ),
        render_template_as_native_obj=True,
    )
    common = {"table_uri": table.uri, "delta_storage_conn_id": table.storage_conn_id}
    # Every task sees the table as its catalog does: gates, caps and conf come through the coordinator.
    coord = {"coordinator_spec": table.coordinator, "delta_coordinator_conn_id": table.coordinator_conn_id}
    with dag:
        upstream: list[Any] = []
        if table.has_coordinator and table.sensor.enabled:
            wait = DeltaRatifiedVersionSensor(
                task_id="wait_for_ratified_commits",
                **common,
                **coord,
                target_version="{{ params.target_version }}",
                min_new_commits=table.sensor.min_new_commits,
                skip="{{ params.skip_wait }}",
                poke_interval=table.sensor.poke_interval_seconds,
                timeout=table.sensor.timeout_minutes * 60,
                mode=table.sensor.mode,
                # unset in the YAML: Airflow's [operators] default_deferrable decides
                **({} if table.sensor.deferrable is None else {"deferrable": table.sensor.deferrable}),
                # nothing new is not a failure: downstream is skipped, with the reason; errors
                # still fail (no soft_fail, which would hide them as skips)
                skip_when_nothing_new=True,
            )
            upstream = [wait]
        if table.publish:
            publish = DeltaPublishCommitsOperator(task_id="publish", **common, **coord, up_to_version="{{ params.target_version }}")
            for u in upstream:
                u >> publish
            upstream = [publish]
        # Compaction, then the checkpoint: a checkpoint covers every window before it (compaction
        # skips covered windows), so running them side by side would make the outcome depend on
        # which task happens to run first.
        writers = []
        if table.compaction.enabled:
            writers.append(
                DeltaLogCompactionOperator(task_id="compact_log", **common, **coord, interval=table.compaction.interval, max_window_bytes=table.compaction.max_window_bytes)
            )
        if table.checkpoint.enabled:
            writers.append(
                DeltaCheckpointOperator(
                    task_id="checkpoint",
                    **common,
                    **coord,
                    engine=table.checkpoint.engine,
                    interval=table.checkpoint.interval,
                    force="{{ params.force_checkpoint }}",
                    spark_conn_id=table.checkpoint.spark_conn_id,
                    spark_conf=dict(table.checkpoint.spark_conf),
                    spark_jars=table.checkpoint.spark_jars,
                    spark_packages=table.checkpoint.spark_packages,
                )
            )
        for task in writers:
            for u in upstream:
                u >> task
            upstream = [task]
        if table.cleanup.enabled:
            cleanup = DeltaLogCleanupOperator(
                task_id="cleanup",
                **common,
                **coord,
                dry_run="{{ params.dry_run }}",
                retention_days=table.cleanup.retention_days,
                allow_shorter_retention=table.cleanup.allow_shorter_retention,
                catalog_permits_cleanup=table.cleanup.catalog_permits_cleanup,
                # after the writers whatever they did, but never after a failure upstream
                trigger_rule=TriggerRule.NONE_FAILED,
            )
            for u in upstream:
                u >> cleanup
    return dag


class InvalidTableConfigOperator(BaseOperator):
    """The only task of a placeholder DAG: fails, saying what to fix in the configuration."""

    ui_color = "#f0b4b4"

    def __init__(self, *, error: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def execute(self, context: Any) -> None:
        raise AirflowFailException(f"invalid maintenance configuration: {self.error}")


def build_invalid_table_dag(entry: TableConfigError, start_date: Any = None) -> DAG:
    import pendulum

    message = str(entry.error)
    dag = DAG(
        dag_id=entry.dag_id,
        description=f"INVALID CONFIGURATION: {entry.error.key}: {entry.error.detail}",
        schedule=None,
        start_date=start_date or pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        tags=["delta-maintenance", "invalid-config"],
        doc_md=f"### Invalid configuration for `{entry.name}`\n\n```\n{message}\n```\n\nFix the YAML file; the other tables are unaffected.",
    )
    with dag:
        InvalidTableConfigOperator(task_id="invalid_configuration", error=message, retries=0)
    return dag


def build_dags(config_path: str | Path) -> dict[str, DAG]:
    """One DAG per table of the YAML file at ``config_path``: a placeholder for each invalid one
    (logged as an error), the maintenance DAG for the others. File-level mistakes still raise."""
    # the YAML tables and the discovered ones of the fleet file (read only, no network I/O)
    fleet = load_fleet(config_path)
    tables, invalid = fleet.tables, fleet.invalid + ([fleet.fleet_error] if fleet.fleet_error else [])
    dags: dict[str, DAG] = {}
    if fleet.discovery is not None:
        dags[DISCOVERY_DAG_ID] = build_discovery_dag(config_path, fleet.discovery)
    for table in tables:
        try:
            dags[table.dag_id] = build_maintenance_dag(table)
        except Exception as exc:  # noqa: BLE001 - one table's DAG must not hide the others
            invalid.append(TableConfigError(table.name, table.dag_id, ConfigError(str(config_path), table.name, "<dag>", f"{type(exc).__name__}: {exc}")))
    for entry in invalid:
        log.error("delta maintenance: table %s: %s", entry.name, entry.error)
        dags[entry.dag_id] = build_invalid_table_dag(entry)
    return dags
