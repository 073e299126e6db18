"""``DeltaRatifiedVersionTrigger``: polls the coordinator asynchronously until the condition holds."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from functools import cached_property
from typing import Any

from asgiref.sync import sync_to_async
from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.coordinator import DeltaCoordinatorHook, is_transient, poll_ratified_versions
from ..hooks.storage import DeltaStorageHook

__all__ = ["DeltaRatifiedVersionTrigger"]


class DeltaRatifiedVersionTrigger(BaseTrigger):
    """Fires ``success`` when the ratified version reaches the target (or enough new commits),
    ``timeout`` at ``end_time`` (epoch seconds, with the last observation's reason and the last
    ratified version seen), ``error`` on
    a permanent error. Transient errors are logged and polled again; an observation is logged only
    when it changes. Connections are read once per trigger run. Only JSON primitives are serialised."""

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
        # the sensor resolved the table identity (coordinator_spec, the per-table conf read from
        # the table); the conf travels as a JSON string so that every serialised kwarg is a primitive
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

    @cached_property
    def _hooks(self) -> tuple[DeltaCoordinatorHook, dict[str, Any]]:
        coordinator = DeltaCoordinatorHook(self.delta_coordinator_conn_id, spec=self.coordinator_spec)
        return coordinator, DeltaStorageHook(self.delta_storage_conn_id).get_storage_options(self.table_uri)

    def _poll_once(self) -> dict[str, Any]:
        coordinator, options = self._hooks
        return poll_ratified_versions(
            coordinator,
            options,
            self.table_uri,
            coordinator_spec=coordinator.resolve_spec()[0],
            table_conf=json.loads(self.table_conf),
            target_version=self.target_version,
            min_new_commits=self.min_new_commits,
            baseline_version=self.baseline_version,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last_reason = "no successful poll"
        last_seen: int | None = None
        while True:  # poll before looking at the clock: a timeout always carries an observation
            try:
                observation = await sync_to_async(self._poll_once)()
            except Exception as exc:  # noqa: BLE001 - classified: transient ones poll again, the rest fail the task
                if not is_transient(exc):
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                self.log.warning("%s: transient error, polling again: %s", self.table_uri, exc)
                last_reason = f"last poll failed transiently: {type(exc).__name__}: {exc}"
            else:
                if observation["satisfied"]:
                    yield TriggerEvent({"status": "success", "message": observation["reason"], **observation})
                    return
                if observation["reason"] != last_reason:  # a line per change, not per poll
                    self.log.info("%s: %s", self.table_uri, observation["reason"])
                last_reason = observation["reason"]
                last_seen = observation["latest_ratified_version"]
            if self.end_time is not None and time.time() >= self.end_time:
                message = f"{self.table_uri}: nothing new before the timeout ({last_reason})"
                yield TriggerEvent({"status": "timeout", "message": message, "reason": last_reason, "latest_ratified_version": last_seen})
                return
            await asyncio.sleep(self.poll_interval)
