from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    PokeReturnValue,
    TaskDeferred,
)
from airflow.triggers.base import TriggerEvent

from airflow_delta_maintenance.coordinators.errors import CoordinatorError, TableNotFoundError
from airflow_delta_maintenance.dag_builders.maintenance_dag import build_maintenance_dag
from airflow_delta_maintenance.maintenance.config.tables import parse_config
from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor
from airflow_delta_maintenance.triggers.ratified_version import DeltaRatifiedVersionTrigger

TRIGGER = "airflow_delta_maintenance.triggers.ratified_version.DeltaRatifiedVersionTrigger"


def test_poke_is_one_coordinator_call_and_pushes_the_versions(coordinated_table: tuple[str, str]) -> None:
    """One call per poke; the first poke of a try also checks the coordinator against the log once."""
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=12)
    with mock.patch("airflow_delta_maintenance.coordinators.local.LocalCoordinator.get_commits", autospec=True,
                    side_effect=__import__("airflow_delta_maintenance.coordinators.local", fromlist=["x"]).LocalCoordinator.get_commits) as calls:
        result = sensor.poke({})
        assert calls.call_count == 2
        sensor.poke({})
    assert calls.call_count == 3
    assert isinstance(result, PokeReturnValue) and result.is_done
    assert result.xcom_value["latest_ratified_version"] == 12 and result.xcom_value["latest_published_version"] == 0
    assert DeltaRatifiedVersionSensor(task_id="w2", table_uri=uri, coordinator_spec=spec, target_version=13).poke({}) is False
    enough = DeltaRatifiedVersionSensor(task_id="w3", table_uri=uri, coordinator_spec=spec, min_new_commits=12).poke({})
    assert isinstance(enough, PokeReturnValue) and enough.xcom_value["new_commits"] == 12


def test_permanent_errors_fail_and_transient_ones_poke_again(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=1)
    target = "airflow_delta_maintenance.sensors.ratified_version.poll_ratified_versions"
    with mock.patch(target, side_effect=CoordinatorError("throttled", retryable=True)):
        assert sensor.poke({}) is False
    with mock.patch(target, side_effect=TableNotFoundError("gone")), pytest.raises(AirflowException, match="gone"):
        sensor.poke({})


def test_deferrable_sensor_defers_with_a_serialisable_trigger(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=20, deferrable=True, poke_interval=5, timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert deferred.value.method_name == "execute_complete"
    path, kwargs = trigger.serialize()
    assert path == TRIGGER and kwargs["target_version"] == 20 and kwargs["poll_interval"] == 5.0
    assert all(isinstance(v, (str, int, float, type(None))) for v in kwargs.values())
    assert DeltaRatifiedVersionTrigger(**kwargs).serialize() == (path, kwargs)
    # already satisfied: no deferral at all
    done = DeltaRatifiedVersionSensor(task_id="w", table_uri=uri, coordinator_spec=spec, target_version=3, deferrable=True)
    assert done.execute({})["latest_ratified_version"] == 12


def test_execute_complete(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=2)
    observation = {"latest_ratified_version": 3, "latest_published_version": 0, "unpublished": 3, "baseline_version": 0,
                   "new_commits": 3, "satisfied": True, "reason": "ratified version 3 >= 2"}
    done = sensor.execute_complete({}, {"status": "success", "message": "ratified version 3 >= 2", **observation})
    assert done["latest_ratified_version"] == 3 and done["version"] == 3 and done["operation"] == "wait" and not done["skipped"]
    for event in ({"status": "error", "message": "bad"}, None):
        with pytest.raises(AirflowFailException):
            sensor.execute_complete({}, event)
    with pytest.raises(AirflowSensorTimeout, match="latest ratified 3"):
        sensor.execute_complete({}, {"status": "timeout", "message": "late", "reason": "latest ratified 3; waiting"})


def _run(trigger: DeltaRatifiedVersionTrigger) -> TriggerEvent:
    async def first() -> TriggerEvent:
        return await trigger.run().asend(None)

    return asyncio.run(asyncio.wait_for(first(), timeout=30))


def test_trigger_success(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    event = _run(DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=12, poll_interval=0.01, end_time=time.time() + 30))
    assert event.payload["status"] == "success" and event.payload["latest_ratified_version"] == 12


def test_trigger_timeout(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    event = _run(DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=99, poll_interval=0.01, end_time=time.time() - 1))
    assert event.payload["status"] == "timeout"


def test_the_trigger_sleeps_no_longer_than_its_deadline(coordinated_table: tuple[str, str]) -> None:
    """An hour between polls and a deadline 1.5 s away: the timeout fires at the deadline, not an
    hour later (the deferred sensor's ``timeout`` is ``end_time``)."""
    spec, uri = coordinated_table
    started = time.monotonic()
    trigger = DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=99, poll_interval=3600, end_time=time.time() + 1.5)
    event = _run(trigger)
    waited = time.monotonic() - started
    assert event.payload["status"] == "timeout" and event.payload["latest_ratified_version"] == 12
    assert 1.4 <= waited < 20, waited


def test_trigger_permanent_error(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    with mock.patch.object(DeltaRatifiedVersionTrigger, "_poll_once", side_effect=TableNotFoundError("no such table")):
        event = _run(DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=1, poll_interval=0.01, end_time=time.time() + 30))
    assert event.payload["status"] == "error" and "no such table" in event.payload["message"]


def test_trigger_transient_then_success(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    real = DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=5)._poll_once()
    with mock.patch.object(DeltaRatifiedVersionTrigger, "_poll_once", side_effect=[CoordinatorError("503", retryable=True), ConnectionError("reset"), real]):
        event = _run(DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=5, poll_interval=0.01, end_time=time.time() + 30))
    assert event.payload["status"] == "success"


# ---- loud misconfiguration: errors fail in every mode, "nothing new" is the sensor's own skip ----


def _sensor(spec: str, uri: str, **kwargs: Any) -> DeltaRatifiedVersionSensor:
    return DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, **kwargs)


def _generated_sensor(spec: str, uri: str, **sensor: Any) -> DeltaRatifiedVersionSensor:
    """The sensor exactly as the YAML-generated DAG builds it."""
    config = {"defaults": {"coordinator": spec, "sensor": {"poke_interval_seconds": 1, "timeout_minutes": 0, **sensor}}, "tables": [{"name": "t", "uri": uri}]}
    dag = build_maintenance_dag(parse_config(config)[0])
    task = dag.get_task("wait_for_ratified_commits")
    task.target_version, task.skip = None, False  # rendered from the Params' defaults
    return task


def test_a_table_in_neither_the_coordinator_nor_storage_is_an_error_not_a_wait(coordinated_table: tuple[str, str], tmp_path: Path) -> None:
    spec, _ = coordinated_table
    typo = str(tmp_path / "tabel")  # a typo in the table URI
    with pytest.raises(AirflowFailException, match=r"tabel(/_delta_log does not exist| is unknown to local coordinator .* and has no _delta_log)"):
        _sensor(spec, typo, min_new_commits=1).poke({})
    event = _run(DeltaRatifiedVersionTrigger(typo, coordinator_spec=spec, min_new_commits=1, poll_interval=0.01, end_time=time.time() + 30))
    assert event.payload["status"] == "error" and "has no _delta_log" in event.payload["message"]


def test_a_missing_coordinator_database_fails_the_generated_sensor_in_every_mode(tmp_path: Path) -> None:
    spec, uri = f"local://{tmp_path}/nope.db", str(tmp_path / "t")
    for mode in ("poke", "reschedule"):
        sensor = _generated_sensor(spec, uri, mode=mode)
        with pytest.raises(AirflowFailException, match="does not exist"):  # the table or the database: both are wrong
            sensor.poke({})
    deferrable = _generated_sensor(spec, uri, deferrable=True)
    with pytest.raises(AirflowFailException, match="does not exist"):
        deferrable.execute({})  # the first poke, before deferring
    event = _run(DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, min_new_commits=1, poll_interval=0.01, end_time=time.time() + 30))
    assert event.payload["status"] == "error"
    # an error event from the trigger fails the generated task: it is not turned into a skip
    with pytest.raises(AirflowFailException, match="does not exist"):
        deferrable.execute_complete({}, event.payload)
    assert not (tmp_path / "nope.db").exists()


def test_nothing_new_is_a_skip_with_the_reason_in_every_mode(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = _generated_sensor(spec, uri, mode="poke", min_new_commits=100)
    assert not sensor.soft_fail and not sensor.never_fail, "errors must not be soft-failed"
    with pytest.raises(AirflowSkipException, match=r"nothing new before the timeout: waited for 100 new ratified commit\(s\) beyond the last "
                       r"published version; last ratified version seen v12 \(latest ratified 12; waiting for 100 new commits beyond 0\)"):
        sensor.execute({})
    deferrable = _generated_sensor(spec, uri, deferrable=True, min_new_commits=100)
    with pytest.raises(TaskDeferred) as deferred:
        deferrable.execute({})
    event = _run(deferred.value.trigger)
    assert event.payload["status"] == "timeout"
    # a deferred timeout says what it waited for and the last version seen, not only "Skipping task."
    with pytest.raises(AirflowSkipException, match=r"waited for 100 new ratified commit\(s\).*last ratified version seen v12 \(latest ratified 12; waiting for 100 new commits"):
        deferrable.execute_complete({}, event.payload)
    # a hand-written sensor keeps Airflow's default: a timeout fails
    with pytest.raises(AirflowSensorTimeout, match="nothing new"):
        _sensor(spec, uri, min_new_commits=100, timeout=0, poke_interval=1, mode="poke").execute({})


def test_the_yaml_default_for_deferrable_is_airflows(coordinated_table: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, uri = coordinated_table
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
    import importlib

    from airflow_delta_maintenance.sensors import ratified_version

    importlib.reload(ratified_version)  # the default is read when the class is defined, as upstream operators do
    try:
        from airflow_delta_maintenance.dag_builders import maintenance_dag as dag_factory

        importlib.reload(dag_factory)
        config = {"defaults": {"coordinator": spec}, "tables": [{"name": "t", "uri": uri}, {"name": "u", "uri": uri, "sensor": {"deferrable": False}}]}
        t, u = parse_config(config)
        assert dag_factory.build_maintenance_dag(t).get_task("wait_for_ratified_commits").deferrable is True
        assert dag_factory.build_maintenance_dag(u).get_task("wait_for_ratified_commits").deferrable is False
    finally:
        monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE")
        importlib.reload(ratified_version)
        importlib.reload(dag_factory)


def test_the_trigger_logs_an_observation_only_when_it_changes(coordinated_table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = coordinated_table
    trigger = DeltaRatifiedVersionTrigger(uri, coordinator_spec=spec, target_version=99, poll_interval=0.01, end_time=time.time() + 1.0)
    with mock.patch.object(DeltaRatifiedVersionTrigger, "_poll_once", autospec=True, side_effect=DeltaRatifiedVersionTrigger._poll_once) as polls:
        event = _run(trigger)
    assert event.payload["status"] == "timeout" and event.payload["reason"] == "latest ratified 12; waiting for version 99"
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if "waiting for version 99" in line]
    assert polls.call_count >= 3 and len(lines) == 1, (polls.call_count, lines)


def test_connections_are_read_once_per_poke(coordinated_table: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Once per poke, not once per sensor: a sensor poking for days follows a rotated key."""
    spec, uri = coordinated_table
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_COORDINATOR_DEFAULT", json.dumps({"conn_type": "delta_coordinator", "host": spec}))
    sensor = DeltaRatifiedVersionSensor(task_id="w", table_uri=uri, delta_coordinator_conn_id="delta_coordinator_default", target_version=99)
    from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook

    real = DeltaCoordinatorHook.get_connection
    with mock.patch.object(DeltaCoordinatorHook, "get_connection", side_effect=real) as lookups:
        for _ in range(3):
            assert sensor.poke({}) is False
    assert lookups.call_count == 3
