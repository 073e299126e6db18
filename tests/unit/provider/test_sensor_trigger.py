from __future__ import annotations

import asyncio
import time
from unittest import mock

import pytest
from airflow.providers.common.compat.sdk import AirflowException, PokeReturnValue, TaskDeferred
from airflow.triggers.base import TriggerEvent

from airflow_delta_maintenance.coordinators.errors import CoordinatorError, TableNotFoundError
from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor
from airflow_delta_maintenance.triggers.ratified_version import DeltaRatifiedVersionTrigger

TRIGGER = "airflow_delta_maintenance.triggers.ratified_version.DeltaRatifiedVersionTrigger"


def test_poke_is_one_coordinator_call_and_pushes_the_versions(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=12)
    with mock.patch("airflow_delta_maintenance.coordinators.local.LocalCoordinator.get_commits", autospec=True,
                    side_effect=__import__("airflow_delta_maintenance.coordinators.local", fromlist=["x"]).LocalCoordinator.get_commits) as calls:
        result = sensor.poke({})
    assert calls.call_count == 1
    assert isinstance(result, PokeReturnValue) and result.is_done
    assert result.xcom_value["latest_ratified_version"] == 12 and result.xcom_value["latest_published_version"] == 0
    assert DeltaRatifiedVersionSensor(task_id="w2", table_uri=uri, coordinator_spec=spec, target_version=13).poke({}) is False
    enough = DeltaRatifiedVersionSensor(task_id="w3", table_uri=uri, coordinator_spec=spec, min_new_commits=12).poke({})
    assert isinstance(enough, PokeReturnValue) and enough.xcom_value["new_commits"] == 12


def test_permanent_errors_fail_and_transient_ones_poke_again(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, coordinator_spec=spec, target_version=1)
    target = "airflow_delta_maintenance.sensors.ratified_version.poll_once"
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
    assert sensor.execute_complete({}, {"status": "success", "message": "ok", "latest_ratified_version": 3}) == {"latest_ratified_version": 3}
    for event in ({"status": "timeout", "message": "late"}, {"status": "error", "message": "bad"}, None):
        with pytest.raises(AirflowException):
            sensor.execute_complete({}, event)


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
