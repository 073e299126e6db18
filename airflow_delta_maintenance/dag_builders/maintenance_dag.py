"""One maintenance DAG per configured table: wait → publish → compaction → checkpoint → cleanup.

Building a DAG does no I/O to tables or coordinators: everything is resolved inside the tasks.
``schedule: asset`` and ``schedule: watch`` DAGs run on the table's asset (a writer's outlet, or the
``AssetWatcher`` over ``DeltaRatifiedVersionWatchTrigger``) and have no sensor task; time schedules
are jittered per table and tasks go to the table's pool (``fleet.scheduling``). Publish and
checkpoint emit events on the table's published-log asset (``assets``).
Manual runs take Params (validated by JSON schema): ``dry_run``, ``force_checkpoint``,
``target_version`` and ``skip_wait``.

``build_dags`` isolates tables: a table whose configuration is invalid (or whose DAG cannot be
built) becomes a placeholder DAG under its own id, tagged ``invalid-config``, whose description
and only task state the error — every other table's DAG still loads.
"""

from __future__ import annotations

import functools
import itertools
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import AssetWatcher

from ..assets.table import published_log_asset, table_asset
from ..fleet.config import load_fleet
from ..fleet.scheduling import jitter_cron, jitter_duration
from ..maintenance.config.tables import ConfigError, TableConfig, TableConfigError
from ..operators.checkpoint import DeltaCheckpointOperator
from ..operators.checksums import DeltaChecksumsOperator
from ..operators.log_cleanup import DeltaLogCleanupOperator
from ..operators.log_compaction import DeltaLogCompactionOperator
from ..operators.optimize import DeltaOptimizeOperator
from ..operators.publish import DeltaPublishCommitsOperator
from ..operators.vacuum import DeltaVacuumOperator
from ..sensors.ratified_version import DeltaRatifiedVersionSensor
from ..triggers.ratified_version import DeltaRatifiedVersionWatchTrigger
from ..version_compat import DAG, AirflowFailException, BaseOperator, Param, TriggerRule, conf
from .discovery_dag import DISCOVERY_DAG_ID, build_discovery_dag

__all__ = ["build_maintenance_dag", "build_invalid_table_dag", "build_dags"]

log = logging.getLogger(__name__)

_START = datetime(2024, 1, 1, tzinfo=timezone.utc)

_DOC = """
### Delta log maintenance for `{name}`

Table `{uri}` — coordinator `{coordinator}`.

1. **wait** for ratified commits (or `target_version`),
2. **publish** them to `_delta_log/<v>.json` in order,
3. **compact** the log in aligned windows of {compaction}, then **checkpoint** (engine `{engine}`) when {interval} commits have passed,
4. **cleanup** of expired log files ({cleanup}; a manual run can override with `dry_run`),
5. **vacuum** of unreferenced data files when the table has a `vacuum:` section (its own interval, weekly by default).

Manual runs: `dry_run`, `force_checkpoint`, `target_version`, `skip_wait`.
"""


# Param definitions shared by every generated DAG: (default, description, JSON schema). The
# schemas are shared, never mutated (Airflow only reads them), and each (schema, default) pair is
# validated once per process by _validated_params instead of once per DAG.
_PARAM_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "dry_run": ("plan the cleanup without deleting", {"type": "boolean", "title": "Dry run"}),
    "force_checkpoint": ("write a checkpoint even if not due", {"type": "boolean", "title": "Force a checkpoint"}),
    "target_version": ("wait for and publish up to this version", {"type": ["null", "integer"], "minimum": 0, "title": "Target version"}),
    "skip_wait": ("do not wait for new ratified commits", {"type": "boolean", "title": "Skip the wait"}),
}


@functools.lru_cache(maxsize=4)
def _validated_params(dry_run_default: bool) -> tuple[tuple[str, Any, str, dict[str, Any]], ...]:
    """(name, default, description, schema) of the Params, each default checked against its
    schema here, once — what ``DAG(params=...)`` would otherwise repeat for every table's DAG."""
    defaults = {"dry_run": dry_run_default, "force_checkpoint": False, "target_version": None, "skip_wait": False}
    out = []
    for name, (description, schema) in _PARAM_SPECS.items():
        Param(defaults[name], description=description, **schema).resolve()  # raises on a bad default
        out.append((name, defaults[name], description, schema))
    return tuple(out)


def _params(dry_run_default: bool) -> dict[str, Param]:
    return {name: Param(default, description, schema=schema) for name, default, description, schema in _validated_params(dry_run_default)}


@functools.lru_cache(maxsize=1)
def _dag_config_defaults() -> dict[str, Any]:
    """The DAG arguments whose defaults Airflow reads from its configuration, read once per
    process: ``DAG()`` reads them again for every DAG (four configuration lookups per table)."""
    import attrs

    fields = attrs.fields_dict(DAG)
    wanted = {
        "max_active_tasks": lambda: conf.getint("core", "max_active_tasks_per_dag"),
        "max_consecutive_failed_dag_runs": lambda: conf.getint("core", "max_consecutive_failed_dag_runs_per_dag"),
        "disable_bundle_versioning": lambda: conf.getboolean("dag_processor", "disable_bundle_versioning"),
    }
    return {name: read() for name, read in wanted.items() if name in fields}


@functools.lru_cache(maxsize=512)
def _timetable(schedule: str | timedelta) -> Any:
    """The timetable Airflow would build for a cron expression or a duration (honouring
    ``[scheduler] create_cron_data_intervals``), once per distinct schedule: a fleet has at most
    ~60 after jitter. Timetables are immutable; presets such as ``@once`` stay strings."""
    try:
        from airflow.sdk import CronDataIntervalTimetable, CronTriggerTimetable, DeltaDataIntervalTimetable, DeltaTriggerTimetable
    except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1 keep the timetables in core
        from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable  # type: ignore[assignment]
        from airflow.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable  # type: ignore[assignment]

    intervals = _create_cron_data_intervals()
    if isinstance(schedule, timedelta):
        return DeltaDataIntervalTimetable(schedule) if intervals else DeltaTriggerTimetable(schedule)
    if schedule.startswith("@") and schedule not in _PRESET_CRON_FORMS:
        return schedule
    return CronDataIntervalTimetable(schedule, timezone="UTC") if intervals else CronTriggerTimetable(schedule, timezone="UTC")


# A manual run whose Params ask for work (force_checkpoint; dry_run=false on a dry-run table) does
# it at once: waiting for new commits would stall it, e.g. behind the scheduled run Airflow creates
# when "Unpause on trigger" unpauses the DAG, which publishes the pending commits first.
_SKIP_WAIT = "{{ params.skip_wait or (dag_run.run_type == 'manual' and params.force_checkpoint) }}"
_SKIP_WAIT_DRY_RUN = "{{ params.skip_wait or (dag_run.run_type == 'manual' and (params.force_checkpoint or not params.dry_run)) }}"

_PRESET_CRON_FORMS = {"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@quarterly", "@yearly", "@annually"}


@functools.lru_cache(maxsize=1)
def _create_cron_data_intervals() -> bool:
    return conf.getboolean("scheduler", "create_cron_data_intervals")


def _schedule(table: TableConfig, start_date: Any) -> tuple[Any, Any]:
    """(DAG schedule, start date): the table's asset, its watcher's asset, or a time schedule with
    the table's jitter (``fleet.scheduling``)."""
    kind = table.schedule_kind
    if kind == "asset":
        return table_asset(table.uri), start_date
    if kind == "watch":
        trigger = DeltaRatifiedVersionWatchTrigger(
            table.uri,
            coordinator_spec=table.coordinator,
            delta_coordinator_conn_id=table.coordinator_conn_id,
            delta_storage_conn_id=table.storage_conn_id,
            min_new_commits=table.sensor.min_new_commits,
            poll_interval=table.sensor.poke_interval_seconds,
            **_call_budget(table),
        )
        return table_asset(table.uri, watchers=[AssetWatcher(name=f"{table.dag_id}__watch", trigger=trigger)]), start_date
    schedule = table.airflow_schedule
    if schedule is None:
        return None, start_date
    if table.jitter:
        if isinstance(schedule, timedelta):  # relative to first sight unless it can be a cron expression
            schedule = jitter_duration(schedule, table.uri) or schedule
        else:
            schedule = jitter_cron(schedule, table.uri)
    return _timetable(schedule), start_date


def _call_budget(table: TableConfig) -> dict[str, Any]:
    limit = table.rate_limit
    if not limit.enabled or not limit.calls_per_second:
        return {"endpoint": table.coordinator_endpoint}
    return {"endpoint": table.coordinator_endpoint, "calls_per_second": float(limit.calls_per_second), "burst": limit.burst}


def build_maintenance_dag(table: TableConfig, start_date: Any = None) -> DAG:
    """The table's DAG. Built for a fleet: no table or network I/O, tasks built outside the DAG
    context and then added (Airflow would otherwise deep-copy the DAG's Params into every task; the
    task runner merges the DAG's Params at run time anyway), Params validated once per process."""
    schedule, start = _schedule(table, start_date or _START)
    task_args: dict[str, Any] = {
        "owner": table.owner,
        "retries": table.retries,
        "retry_delay": timedelta(minutes=table.retry_delay_minutes),
    }
    pool = table.resolved_pool
    if pool:
        task_args["pool"] = pool
    dag = DAG(
        dag_id=table.dag_id,
        description=f"Delta log maintenance of {table.name} ({table.uri})",
        schedule=schedule,
        start_date=start,
        catchup=False,
        max_active_runs=1,
        tags=["delta-maintenance", *table.tags],
        default_args=task_args,
        doc_md=_DOC.format(
            name=table.name, uri=table.uri, coordinator=table.coordinator or table.coordinator_conn_id or "none",
            engine=table.checkpoint.engine, interval=table.checkpoint.interval or "delta.checkpointInterval",
            compaction=table.compaction.interval, cleanup=table.cleanup.mode,
        ),
        render_template_as_native_obj=True,
        **_dag_config_defaults(),
    )
    # Validated by _validated_params; added after construction so that DAG() does not validate them again.
    dag.params.update(_params(table.cleanup.mode != "delete"))
    common: dict[str, Any] = {"table_uri": table.uri, "delta_storage_conn_id": table.storage_conn_id, **task_args}
    # Every task sees the table as its catalog does: gates, caps and conf come through the coordinator.
    coord: dict[str, Any] = {"coordinator_spec": table.coordinator, "delta_coordinator_conn_id": table.coordinator_conn_id}
    # unset in the YAML: Airflow's [operators] default_deferrable decides
    deferrable: dict[str, Any] = {} if table.sensor.deferrable is None else {"deferrable": table.sensor.deferrable}
    log_asset = published_log_asset(table.uri)
    chain: list[Any] = []
    # An asset or watch schedule already means "new commits": no sensor task holds a slot.
    if table.has_coordinator and table.sensor.enabled and table.schedule_kind not in ("asset", "watch"):
        budget = _call_budget(table)
        chain.append(
            DeltaRatifiedVersionSensor(
                task_id="wait_for_ratified_commits",
                **common,
                **coord,
                target_version="{{ params.target_version }}",
                min_new_commits=table.sensor.min_new_commits,
                skip=_SKIP_WAIT_DRY_RUN if table.cleanup.mode != "delete" else _SKIP_WAIT,
                poke_interval=table.sensor.poke_interval_seconds,
                timeout=table.sensor.timeout_minutes * 60,
                mode=table.sensor.mode,
                **deferrable,
                # nothing new is not a failure: downstream is skipped, with the reason; errors
                # still fail (no soft_fail, which would hide them as skips)
                skip_when_nothing_new=True,
                coordinator_endpoint=budget["endpoint"],
                coordinator_calls_per_second=budget.get("calls_per_second"),
                coordinator_burst=budget.get("burst"),
            )
        )
    if table.publish:
        chain.append(
            DeltaPublishCommitsOperator(task_id="publish", **common, **coord, up_to_version="{{ params.target_version }}", outlets=[log_asset])
        )
    # Compaction, then the checkpoint: a checkpoint covers every window before it (compaction
    # skips covered windows), so running them side by side would make the outcome depend on
    # which task happens to run first.
    if table.compaction.enabled:
        chain.append(
            DeltaLogCompactionOperator(task_id="compact_log", **common, **coord, interval=table.compaction.interval, max_window_bytes=table.compaction.max_window_bytes)
        )
    if table.checkpoint.enabled:
        chain.append(
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
                outlets=[log_asset],
            )
        )
    if table.cleanup.enabled:
        chain.append(
            DeltaLogCleanupOperator(
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
        )
    if table.optimize.enabled:
        o = table.optimize
        # Last, and whatever ran before it (a sensor that found nothing new only skips): OPTIMIZE
        # is due by its own interval; a skip here (not due) leaves no task behind it skipped.
        chain.append(
            DeltaOptimizeOperator(
                task_id="optimize",
                **common,
                **coord,
                engine=o.engine,
                dry_run=o.dry_run,
                min_file_size=o.min_file_size,
                target_file_size=o.target_file_size,
                predicate=o.predicate,
                max_bytes=o.max_bytes,
                min_interval=o.interval,
                catalog_permits_optimize=o.catalog_permits_optimize,
                spark_conn_id=o.spark_conn_id,
                spark_conf=dict(o.spark_conf),
                spark_jars=o.spark_jars,
                spark_packages=o.spark_packages,
                outlets=[log_asset],
                trigger_rule=TriggerRule.NONE_FAILED,
            )
        )
    if table.vacuum.enabled:
        v = table.vacuum
        # Last, due by its own interval (weekly by default): a skip (not due) leaves nothing skipped behind it.
        chain.append(
            DeltaVacuumOperator(
                task_id="vacuum", **common, **coord, dry_run=v.dry_run, mode=v.mode, retention_hours=v.retention_hours,
                allow_shorter_retention=v.allow_shorter_retention, catalog_permits_vacuum=v.catalog_permits_vacuum,
                inventory=v.inventory, min_interval=v.interval, outlets=[log_asset], trigger_rule=TriggerRule.NONE_FAILED,
                engine=v.engine, spark_conn_id=v.spark_conn_id, spark_conf=dict(v.spark_conf), spark_jars=v.spark_jars, spark_packages=v.spark_packages,
            )
        )
    if table.checksums.enabled:
        # After every writer (publish, checkpoint, OPTIMIZE): each new version gets its checksum
        # in the same run, from the previous one; a checksum that disagrees fails this task.
        chain.append(DeltaChecksumsOperator(task_id="checksums", **common, **coord, trigger_rule=TriggerRule.NONE_FAILED))
    for task in chain:
        dag.add_task(task)
    for upstream, downstream in itertools.pairwise(chain):
        upstream >> downstream
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
    doc = f"### Invalid configuration for `{entry.name}`\n\n```\n{message}\n```\n\nFix the YAML file; the other tables are unaffected."
    dag = DAG(
        dag_id=entry.dag_id,
        description=f"INVALID CONFIGURATION: {entry.error.key}: {entry.error.detail}" + (f" (+{len(entry.error.problems) - 1} more)" if len(entry.error.problems) > 1 else ""),
        schedule=None,
        start_date=start_date or pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
        tags=["delta-maintenance", "invalid-config", *entry.tags],
        default_args={"owner": entry.owner} if entry.owner else {},
        doc_md=doc,
    )
    with dag:
        # the task's doc too: its Details and the graph's task panel show the mistakes, not only the DAG's Details tab
        InvalidTableConfigOperator(task_id="invalid_configuration", error=message, retries=0, doc_md=doc)
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
    # The cyclic collector is left alone: a DAG file is parsed inside Airflow's processes (the DAG
    # processor, workers), where a gc.disable() would reach every thread for the parse's duration.
    for table in tables:
        try:
            dags[table.dag_id] = build_maintenance_dag(table)
        except Exception as exc:  # noqa: BLE001 - one table's DAG must not hide the others
            invalid.append(TableConfigError(table.name, table.dag_id, ConfigError(str(config_path), table.name, "<dag>", f"{type(exc).__name__}: {exc}")))
    for entry in invalid:
        log.error("delta maintenance: table %s: %s", entry.name, entry.error)
        dags[entry.dag_id] = build_invalid_table_dag(entry)
    return dags
