"""``DeltaRatifiedVersionTrigger``: polls the coordinator asynchronously until the condition holds."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..coordinators.errors import CoordinatorError
from ..maintenance.sensing import observe_ratified_versions
from ..maintenance.table import restore_table

__all__ = ["DeltaRatifiedVersionTrigger", "poll_once"]


def poll_once(
    table_uri: str,
    *,
    delta_coordinator_conn_id: str | None,
    coordinator_spec: str | None,
    delta_storage_conn_id: str | None,
    target_version: int | None,
    min_new_commits: int | None,
    baseline_version: int | None,
    table_conf: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One coordinator call; shared by the sensor's ``poke`` and the trigger (in a thread).

    ``coordinator_spec`` and ``table_conf`` are the table identity resolved once by the sensor
    (``MaintainedTable.identity()``); the connection only supplies credentials here.
    """
    from ..hooks.coordinator import DeltaCoordinatorHook
    from ..hooks.storage import DeltaStorageHook

    if not coordinator_spec:
        raise ValueError(f"{table_uri}: the ratified-version poll needs the table's resolved coordinator spec")
    options = DeltaStorageHook(delta_storage_conn_id).get_storage_options(table_uri)
    _, credentials = DeltaCoordinatorHook(delta_coordinator_conn_id).connection_spec()
    table = restore_table(table_uri, coordinator_spec, table_conf or {}, options, credentials=credentials)
    try:
        return observe_ratified_versions(
            table, target_version=target_version, min_new_commits=min_new_commits, baseline_version=baseline_version
        ).to_dict()
    finally:
        table.close()


class DeltaRatifiedVersionTrigger(BaseTrigger):
    """Fires ``success`` when the ratified version reaches the target (or enough new commits),
    ``timeout`` at ``end_time`` (epoch seconds), ``error`` on a permanent coordinator error.
    Transient errors are logged and polled again. Only JSON primitives are serialised."""

    def __init__(
        self,
        table_uri: str,
        *,
        delta_coordinator_conn_id: str | None = None,
        coordinator_spec: str | None = None,
        delta_storage_conn_id: str | None = None,
        target_version: int | None = None,
        min_new_commits: int | None = None,
        baseline_version: int | None = None,
        poll_interval: float = 30.0,
        end_time: float | None = None,
        table_conf: str | Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.table_uri = table_uri
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.coordinator_spec = coordinator_spec
        self.delta_storage_conn_id = delta_storage_conn_id
        self.target_version = target_version
        self.min_new_commits = min_new_commits
        self.baseline_version = baseline_version
        self.poll_interval = poll_interval
        self.end_time = end_time
        # the per-table coordinator conf read from the table by the sensor, kept as a JSON string
        # so that every serialised kwarg is a primitive
        self.table_conf = table_conf if isinstance(table_conf, str) else json.dumps(dict(table_conf or {}), sort_keys=True)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_delta_maintenance.triggers.ratified_version.DeltaRatifiedVersionTrigger",
            {
                "table_uri": self.table_uri,
                "delta_coordinator_conn_id": self.delta_coordinator_conn_id,
                "coordinator_spec": self.coordinator_spec,
                "delta_storage_conn_id": self.delta_storage_conn_id,
                "target_version": self.target_version,
                "min_new_commits": self.min_new_commits,
                "baseline_version": self.baseline_version,
                "poll_interval": self.poll_interval,
                "end_time": self.end_time,
                "table_conf": self.table_conf,
            },
        )

    def _poll_once(self) -> dict[str, Any]:
        return poll_once(
            self.table_uri,
            delta_coordinator_conn_id=self.delta_coordinator_conn_id,
            coordinator_spec=self.coordinator_spec,
            delta_storage_conn_id=self.delta_storage_conn_id,
            target_version=self.target_version,
            min_new_commits=self.min_new_commits,
            baseline_version=self.baseline_version,
            table_conf=json.loads(self.table_conf),
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            if self.end_time is not None and time.time() >= self.end_time:
                yield TriggerEvent({"status": "timeout", "message": f"{self.table_uri}: ratified version not reached before the timeout"})
                return
            try:
                observation = await sync_to_async(self._poll_once)()
            except CoordinatorError as exc:
                if not exc.retryable:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                self.log.warning("transient coordinator error, polling again: %s", exc)
            except (OSError, ConnectionError, TimeoutError) as exc:
                self.log.warning("transient error, polling again: %s", exc)
            except Exception as exc:  # noqa: BLE001 - a broken configuration is permanent
                yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            else:
                if observation["satisfied"]:
                    yield TriggerEvent({"status": "success", "message": observation["reason"], **observation})
                    return
                self.log.info("%s", observation["reason"])
            await asyncio.sleep(self.poll_interval)
