"""Data-aware scheduling: table assets, published-log asset events, the watcher trigger."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from airflow.sdk import Asset
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_delta_maintenance.assets.table import published_log_asset, table_asset
from airflow_delta_maintenance.coordinators.local import LocalCoordinator
from airflow_delta_maintenance.dag_builders.maintenance_dag import build_maintenance_dag
from airflow_delta_maintenance.maintenance.config.tables import parse_config
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator
from airflow_delta_maintenance.triggers.ratified_version import DeltaRatifiedVersionWatchTrigger

from .conftest import add


def _dag(schedule: Any, **table: Any):
    config = {"defaults": {"coordinator": "local:///data/c.db", "schedule": schedule}, "tables": [{"name": "orders", "uri": "s3a://lake/orders/", **table}]}
    return build_maintenance_dag(parse_config(config)[0])


@pytest.mark.parametrize(("uri", "expected"), [("s3a://lake/orders/", "s3://lake/orders"), ("s3://lake/orders", "s3://lake/orders"),
                                               ("/data/t/", "file:///data/t"), ("file:///data/t", "file:///data/t")])
def test_the_table_asset_is_the_normalised_uri_and_equals_a_writers_plain_asset(uri: str, expected: str) -> None:
    assert table_asset(uri) == Asset(expected) and table_asset(uri).uri == expected
    assert published_log_asset(uri).uri == expected + "/_delta_log" != table_asset(uri).uri


def test_schedule_asset_runs_on_the_tables_asset_without_a_sensor_and_emits_on_the_published_log() -> None:
    dag = _dag("asset")
    assert dag.timetable.asset_condition == Asset("s3://lake/orders")
    assert "wait_for_ratified_commits" not in dag.task_ids and dag.task_ids[:1] == ["publish"]
    assert dag.get_task("publish").outlets == dag.get_task("checkpoint").outlets == [published_log_asset("s3://lake/orders")]
    # never its own trigger: what the DAG emits is not what it is scheduled on
    assert Asset("s3://lake/orders") not in dag.get_task("publish").outlets


def test_schedule_watch_is_an_asset_watcher_over_the_event_trigger() -> None:
    dag = _dag("watch", sensor={"min_new_commits": 3, "poke_interval_seconds": 45}, rate_limit={"calls_per_second": 5})
    asset = dag.timetable.asset_condition
    assert asset == table_asset("s3://lake/orders", watchers=asset.watchers) and asset.uri == "s3://lake/orders"
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, BaseEventTrigger) and watcher.name == "delta_maintenance__orders__watch"
    path, kwargs = watcher.trigger.serialize()
    assert path == "airflow_delta_maintenance.triggers.ratified_version.DeltaRatifiedVersionWatchTrigger"
    assert kwargs["min_new_commits"] == 3 and kwargs["poll_interval"] == 45.0 and kwargs["calls_per_second"] == 5.0
    assert kwargs["endpoint"] == "local:/data/c.db" and kwargs["table_uri"] == "s3a://lake/orders/"
    assert "wait_for_ratified_commits" not in dag.task_ids
    # the trigger's identity (Airflow hashes its kwargs) is stable across parses
    assert BaseEventTrigger.hash(path, kwargs) == BaseEventTrigger.hash(*_dag("watch", sensor={"min_new_commits": 3, "poke_interval_seconds": 45},
                                                                        rate_limit={"calls_per_second": 5}).timetable.asset_condition.watchers[0].trigger.serialize())


def _cron(timetable: Any) -> str:
    if hasattr(timetable, "expression"):  # the SDK's timetables
        return str(timetable.expression)
    return str(timetable.serialize()["expression"])  # Airflow 3.0's core timetable (no public ``expression``)


def test_time_schedules_are_jittered_and_pools_follow_the_endpoint() -> None:
    dag = _dag("@hourly", pool="auto")
    assert _cron(dag.timetable).split()[1:] == ["*", "*", "*", "*"]
    from airflow_delta_maintenance.fleet.scheduling import minute_offset

    assert _cron(dag.timetable).split()[0] == str(minute_offset("s3://lake/orders"))
    assert _cron(_dag("@hourly", jitter=False).timetable) == "0 * * * *"
    # a duration runs relative to when Airflow first saw the DAG: it becomes a jittered cron
    assert _cron(_dag("30m").timetable) == f"{minute_offset('s3://lake/orders') % 30}-59/30 * * * *"
    try:
        from airflow.sdk import DeltaTriggerTimetable
    except ImportError:  # Airflow 3.0 keeps it in core
        from airflow.timetables.trigger import DeltaTriggerTimetable  # type: ignore[no-redef]

    plain, expected = _dag("30m", jitter=False).timetable, DeltaTriggerTimetable(timedelta(minutes=30))
    assert type(plain) is DeltaTriggerTimetable
    assert plain.serialize() == expected.serialize() if hasattr(plain, "serialize") else plain == expected  # Airflow 3.0's has no __eq__
    assert {t.pool for t in dag.tasks} == {"delta_coordinator__local_data_c.db"}
    assert "wait_for_ratified_commits" in dag.task_ids  # a time schedule still waits for commits


def test_tasks_do_not_copy_the_dags_params_but_templates_still_see_them() -> None:
    dag = _dag("@hourly")
    assert set(dag.params) == {"dry_run", "force_checkpoint", "target_version", "skip_wait"}
    assert all(not t.params for t in dag.tasks)  # merged by Airflow's task runner at run time (process_params)
    from airflow.sdk.definitions.param import process_params

    # the schedule-time validation Airflow skips for us is done once per process, by us
    assert dag.params.validate() == {"dry_run": True, "force_checkpoint": False, "target_version": None, "skip_wait": False}
    other = _dag("@hourly", name="other")
    assert process_params(dag, dag.get_task("publish"), {"target_version": 7}, suppress_exception=False)["target_version"] == 7
    with pytest.raises(Exception, match="target_version"):
        process_params(dag, dag.get_task("publish"), {"target_version": -1}, suppress_exception=False)
    # Airflow's run-time merge sets values on the DAG's Param objects: each DAG has its own (only
    # the read-only schemas are shared), so one DAG's run never leaks into another's defaults
    assert other.params["target_version"] is None and other.params.get_param("target_version") is not dag.params.get_param("target_version")


@pytest.fixture
def table(tmp_path: Path) -> tuple[str, str, LocalCoordinator]:
    spec, uri = f"local://{tmp_path}/coordinator.db?create=true", str(tmp_path / "table")
    client = open_coordinator(spec)
    from airflow_delta_maintenance.demo.sample_table import create_actions

    client.commit(uri, 0, create_actions(ict=True))
    return spec, uri, client


def test_publish_and_checkpoint_put_their_versions_in_the_asset_event(table: tuple[str, str, Any]) -> None:
    spec, uri, client = table
    for v in (1, 2, 3):
        client.commit(uri, v, [add(f"f{v}")])
    events = OutletEventAccessors()
    log_asset = published_log_asset(uri)
    publish = DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec, outlets=[log_asset])
    publish.execute({"outlet_events": events})
    assert events[log_asset].extra == {"published_version": 3, "latest_ratified_version": 3, "published": 3}
    checkpoint = DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, coordinator_spec=spec, engine="local", force=True, outlets=[log_asset])
    checkpoint.execute({"outlet_events": events})
    assert events[log_asset].extra["checkpoint_version"] == 3 and events[log_asset].extra["checkpoint_due"] is True
    assert Path(uri, "_delta_log", "00000000000000000003.checkpoint.parquet").exists()


async def _events(trigger: DeltaRatifiedVersionWatchTrigger, count: int, between: Any = None, timeout: float = 30) -> list[TriggerEvent]:
    out: list[TriggerEvent] = []
    gen: AsyncIterator[TriggerEvent] = trigger.run()

    async def collect() -> None:
        async for event in gen:
            out.append(event)
            if between is not None:
                between(len(out))
            if len(out) == count:
                return

    try:
        await asyncio.wait_for(collect(), timeout=timeout)
    finally:
        await gen.aclose()
    return out


def test_the_watcher_fires_once_per_batch_of_new_commits_with_one_coordinator_call_per_poll(table: tuple[str, str, Any]) -> None:
    spec, uri, client = table
    for v in (1, 2):
        client.commit(uri, v, [add(f"f{v}")])
    trigger = DeltaRatifiedVersionWatchTrigger(uri, coordinator_spec=spec, min_new_commits=2, poll_interval=0.05)

    def commit_more(n: int) -> None:
        if n == 1:  # fired for 1..2: one more commit is not enough, two are
            client.commit(uri, 3, [add("f3")])
            client.commit(uri, 4, [add("f4")])

    real = LocalCoordinator.get_commits
    with mock.patch.object(LocalCoordinator, "get_commits", autospec=True, side_effect=real) as calls, \
            mock.patch("airflow_delta_maintenance.maintenance.table.maintained.list_log_files", wraps=__import__(
                "airflow_delta_maintenance.maintenance.table.maintained", fromlist=["x"]).list_log_files) as listings:
        events = asyncio.run(_events(trigger, 2, commit_more))
    assert [(e.payload["latest_ratified_version"], e.payload["baseline_version"]) for e in events] == [(2, 0), (4, 2)]
    assert events[0].payload["table_uri"] == uri and events[0].payload["satisfied"] is True
    polls = calls.call_count
    assert listings.call_count == 1  # the identity, read once; every poll after that is one coordinator call
    assert polls >= 2


def test_the_watcher_does_not_fire_again_for_versions_it_already_fired_for(table: tuple[str, str, Any]) -> None:
    spec, uri, client = table
    client.commit(uri, 1, [add("f1")])
    trigger = DeltaRatifiedVersionWatchTrigger(uri, coordinator_spec=spec, min_new_commits=1, poll_interval=0.02)

    async def run() -> list[TriggerEvent]:
        got: list[TriggerEvent] = []
        gen = trigger.run()
        try:
            got.append(await asyncio.wait_for(gen.__anext__(), timeout=30))
            with pytest.raises(asyncio.TimeoutError):  # many polls, nothing new: no second event
                got.append(await asyncio.wait_for(gen.__anext__(), timeout=0.5))
        finally:
            await gen.aclose()
        return got

    events = asyncio.run(run())
    assert [e.payload["latest_ratified_version"] for e in events] == [1]


def test_a_watcher_whose_table_does_not_exist_yet_keeps_polling(table: tuple[str, str, Any], tmp_path: Path) -> None:
    spec, _, client = table
    later = str(tmp_path / "later")
    trigger = DeltaRatifiedVersionWatchTrigger(later, coordinator_spec=spec, min_new_commits=1, poll_interval=0.02)

    async def run() -> TriggerEvent:
        gen = trigger.run()
        first = asyncio.ensure_future(gen.__anext__())
        try:
            with pytest.raises(asyncio.TimeoutError):  # polls fail (no table yet): no event, no exit
                await asyncio.wait_for(asyncio.shield(first), timeout=0.3)
            from airflow_delta_maintenance.demo.sample_table import create_actions

            client.commit(later, 0, create_actions(ict=True))
            client.commit(later, 1, [add("f1")])
            return await asyncio.wait_for(first, timeout=30)
        finally:
            first.cancel()
            await asyncio.sleep(0)
            await gen.aclose()

    assert asyncio.run(run()).payload["latest_ratified_version"] == 1


def test_hook_lineage_reports_the_table_read_and_the_log_written(table: tuple[str, str, Any]) -> None:
    try:
        from airflow.sdk import lineage
    except ImportError:  # Airflow 3.0 keeps it in core
        from airflow.lineage import hook as lineage  # type: ignore[no-redef]

    spec, uri, client = table
    client.commit(uri, 1, [add("f1")])
    collector = lineage.HookLineageCollector()  # what Airflow uses once a lineage reader (OpenLineage) is enabled
    with mock.patch.object(lineage, "get_hook_lineage_collector", return_value=collector):
        DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec).execute({})
    lineage = collector.collected_assets
    assert {a.asset.uri for a in lineage.inputs} == {f"file://{uri}"}
    assert {a.asset.uri for a in lineage.outputs} == {f"file://{uri}/_delta_log"}


@pytest.mark.slow  # Airflow in a process of its own (3.1 s CPU): make test runs it, the fast tier does not
def test_airflows_configured_dag_defaults_still_apply_though_read_once() -> None:
    import os
    import subprocess
    import sys

    code = (
        "from airflow_delta_maintenance.maintenance.config.tables import parse_config\n"
        "from airflow_delta_maintenance.dag_builders.maintenance_dag import build_maintenance_dag\n"
        "t = parse_config({'defaults': {'coordinator': 'local:///c.db'}, 'tables': [{'name': 'x', 'uri': '/x'}, {'name': 'y', 'uri': '/y', 'schedule': '1d'}]})\n"
        "d, e = build_maintenance_dag(t[0]), build_maintenance_dag(t[1])\n"
        "print(d.max_active_tasks, d.max_consecutive_failed_dag_runs, type(d.timetable).__name__, type(e.timetable).__name__)\n"
    )
    env = {**os.environ, "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "7", "AIRFLOW__CORE__MAX_CONSECUTIVE_FAILED_DAG_RUNS_PER_DAG": "3",
           "AIRFLOW__SCHEDULER__CREATE_CRON_DATA_INTERVALS": "True"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    last = out.stdout.strip().splitlines()[-1:]  # the printed line (Airflow 3.0 logs its plugins' setup to stdout before it)
    assert last and last[0].split() == ["7", "3", "CronDataIntervalTimetable", "CronDataIntervalTimetable"], out.stdout[-2000:] + out.stderr[-2000:]
