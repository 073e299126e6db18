"""Operators and the sensor with no coordinator set act through the one the table declares, and an
inconsistent coordinator fails the task (never a green skip). Before: an operator without
``coordinator_spec`` or a connection acted on the published log alone (a rogue file above the
head checkpointed, gates taken from a stale log), and publish on a wedged coordinator succeeded
with "nothing to publish" run after run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.operators.checkpoint import DeltaCheckpointOperator
from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator
from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator
from airflow_delta_maintenance.operators.publish import DeltaPublishCommitsOperator
from airflow_delta_maintenance.sensors.ratified_version import DeltaRatifiedVersionSensor

from .conftest import add


def _rogue(uri: str, version: int) -> Path:
    """A commit file written around the coordinator."""
    rogue = Path(uri) / "_delta_log" / f"{version:020d}.json"
    rogue.write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(add("rogue")) + "\n")
    return rogue


def test_operators_without_a_coordinator_act_through_the_declared_one(coordinated_table: tuple[str, str]) -> None:
    spec, uri = coordinated_table
    published = DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, up_to_version=8).execute({})
    assert (published["from_version"], published["to_version"], published["reported_version"]) == (1, 8, 8)
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == [9, 10, 11, 12]
    # a rogue 9 where the catalog ratified another 9: a fork, never checkpointed or published over
    rogue = _rogue(uri, 9)
    for op in (DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, force=True, engine="local"), DeltaPublishCommitsOperator(task_id="publish", table_uri=uri)):
        with pytest.raises(AirflowFailException, match=r"PublishForkError: .* forked at version 9"):
            op.execute({})
    rogue.unlink()
    assert DeltaPublishCommitsOperator(task_id="publish", table_uri=uri).execute({})["to_version"] == 12
    _rogue(uri, 13)  # above the catalog's head (12)
    checkpoint = DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, force=True, engine="local").execute({})
    assert checkpoint["version"] == 12 and not checkpoint["skipped"], checkpoint
    compaction = DeltaLogCompactionOperator(task_id="compact", table_uri=uri, interval=3).execute({})
    assert compaction["published_version"] == 12
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [12]


def test_an_undeclared_coordinator_that_cannot_be_opened_fails_the_task(coordinated_table: tuple[str, str], tmp_path: Path) -> None:
    _, uri = coordinated_table
    (tmp_path / "coordinator.db").rename(tmp_path / "moved.db")
    for op in (
        DeltaPublishCommitsOperator(task_id="publish", table_uri=uri),
        DeltaCheckpointOperator(task_id="checkpoint", table_uri=uri, engine="local"),
        DeltaLogCleanupOperator(task_id="cleanup", table_uri=uri, dry_run=False),
    ):
        with pytest.raises(AirflowFailException, match=r"CoordinatorNotConfiguredError: .* declares the embedded coordinator"):
            op.execute({})


def _wedge(tmp_path: Path, uri: str, latest: int) -> None:
    """The coordinator's head jumps beyond anything published or pending."""
    with sqlite3.connect(tmp_path / "coordinator.db") as db:
        db.execute("UPDATE tables SET latest_version = ? WHERE table_uri = ?", (latest, uri))


def test_an_inconsistent_coordinator_fails_publish_and_the_sensor(coordinated_table: tuple[str, str], tmp_path: Path) -> None:
    spec, uri = coordinated_table
    DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, coordinator_spec=spec).execute({})
    _wedge(tmp_path, uri, 40)
    for with_spec in ({"coordinator_spec": spec}, {}):
        with pytest.raises(AirflowFailException, match=r"InconsistentCoordinatorError: .*latest ratified version 40 is beyond"):
            DeltaPublishCommitsOperator(task_id="publish", table_uri=uri, **with_spec).execute({})
    sensor = DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, min_new_commits=1, skip_when_nothing_new=True)
    with pytest.raises(AirflowFailException, match="InconsistentCoordinatorError"):
        sensor.poke({})


def test_a_declared_coordinator_that_does_not_answer_is_transient(coordinated_table: tuple[str, str]) -> None:
    """Taken from the table, a coordinator that does not answer says so with what the table
    declares; the sensor pokes again and operators retry (a permanent failure would hide an outage)."""
    from unittest import mock

    from airflow.providers.common.compat.sdk import AirflowException

    from airflow_delta_maintenance.coordinators.errors import CoordinatorError

    _, uri = coordinated_table
    busy = CoordinatorError("database is locked", retryable=True)
    with mock.patch("airflow_delta_maintenance.coordinators.local.LocalCoordinator.get_commits", side_effect=busy):
        assert DeltaRatifiedVersionSensor(task_id="wait", table_uri=uri, min_new_commits=1).poke({}) is False
        with pytest.raises(AirflowException, match=r"CoordinatorUnreachableError: .* declares the embedded coordinator .* did not answer") as err:
            DeltaPublishCommitsOperator(task_id="publish", table_uri=uri).execute({})
    assert not isinstance(err.value, AirflowFailException)
