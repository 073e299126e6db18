"""Triggers that poll the coordinator asynchronously, one call per poll and no listing.

``DeltaRatifiedVersionTrigger`` resumes the deferred sensor when its condition holds.
``DeltaRatifiedVersionWatchTrigger`` is the ``AssetWatcher`` trigger of ``schedule: watch``: it runs
for as long as the DAG is deployed and emits an event on the table's asset whenever enough new
commits are ratified, which starts a maintenance run with no sensor task holding a slot. Both
draw their polls from the endpoint's token bucket (``fleet.rate_limit``) when a rate limit
is configured.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from ..hooks.coordinator import DeltaCoordinatorHook
from ..hooks.storage import DeltaStorageHook
from ..maintenance.operations.sensing import is_transient, poll_ratified_versions

__all__ = ["DeltaRatifiedVersionTrigger", "DeltaRatifiedVersionWatchTrigger", "wait_for_call_budget"]


async def wait_for_call_budget(endpoint: str | None, calls_per_second: float | None, burst: int | None) -> None:
    """Wait for a token of the endpoint's bucket (no limit configured: return at once)."""
    from ..fleet.rate_limit import bucket_for

    bucket = bucket_for(endpoint or "default", calls_per_second, burst)
    if bucket is not None and (wait := bucket.reserve()) > 0:
        await asyncio.sleep(wait)


class DeltaRatifiedVersionTrigger(BaseTrigger):
    """Fires ``success`` when the ratified version reaches the target (or enough new commits),
    ``timeout`` at ``end_time`` (epoch seconds, with the last observation's reason and the last
    ratified version seen), ``error`` on
    a permanent error. Transient errors are logged and polled again; an observation is logged only
    when it changes. Connections are read at every poll (credentials that outlive the deferral);
    the sleep between polls ends at ``end_time``. Only JSON primitives are serialised."""

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
        endpoint: str | None = None,
        calls_per_second: float | None = None,
        burst: int | None = None,
    ) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.calls_per_second = calls_per_second
        self.burst = burst
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
                "endpoint": self.endpoint,
                "calls_per_second": self.calls_per_second,
                "burst": self.burst,
            },
        )

    def _hooks(self) -> tuple[DeltaCoordinatorHook, dict[str, Any]]:
        """The connections, read again at every poll: a deferral may last days, longer than any
        temporary key, and a connection may be rotated meanwhile. Sessions (a role's refreshable
        credentials) are shared by the process per connection content (``hooks._aws``)."""
        coordinator = DeltaCoordinatorHook(self.delta_coordinator_conn_id, spec=self.coordinator_spec)
        return coordinator, DeltaStorageHook(self.delta_storage_conn_id).get_storage_options(self.table_uri)

    def _poll_once(self) -> dict[str, Any]:
        coordinator, options = self._hooks()
        return poll_ratified_versions(
            coordinator.get_credentials(),
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
            await wait_for_call_budget(self.endpoint, self.calls_per_second, self.burst)
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
            now = time.time()
            if self.end_time is not None and now >= self.end_time:
                message = f"{self.table_uri}: nothing new before the timeout ({last_reason})"
                yield TriggerEvent({"status": "timeout", "message": message, "reason": last_reason, "latest_ratified_version": last_seen})
                return
            # never sleep past the deadline: the timeout fires on time, after one last poll
            await asyncio.sleep(self.poll_interval if self.end_time is None else min(self.poll_interval, self.end_time - now))


_STATE_KEY = "delta_maintenance.last_fired_version"


class DeltaRatifiedVersionWatchTrigger(BaseEventTrigger):
    """The watcher of ``schedule: watch``: an event each time ``min_new_commits`` commits are
    ratified beyond what it last fired for (and beyond the last published version).

    Polls forever, one coordinator call per poll and no storage listing; the table's identity
    (its coordinator conf, read from the table) is resolved once per trigger run, the connections
    (credentials) at every poll. The first poll
    is delayed by a per-table offset within one ``poll_interval`` so that a triggerer starting
    with 1,000 watchers does not poll them all at once. A failed poll is logged (once per distinct
    error) and retried at the next interval: a watcher has no task to fail, and a table that does
    not exist yet may be created later. The last version fired for is kept in the asset's state
    store where Airflow offers one, so a triggerer restart does not fire again for it.

    Every keyword argument comes from the configuration and is stable across parses: the trigger's
    identity (Airflow hashes its kwargs) does not change from one parse to the next.
    """

    def __init__(
        self,
        table_uri: str,
        *,
        coordinator_spec: str | None = None,
        delta_coordinator_conn_id: str | None = None,
        delta_storage_conn_id: str | None = None,
        min_new_commits: int = 1,
        poll_interval: float = 60.0,
        endpoint: str | None = None,
        calls_per_second: float | None = None,
        burst: int | None = None,
    ) -> None:
        super().__init__()
        self.table_uri = table_uri
        self.coordinator_spec = coordinator_spec
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.delta_storage_conn_id = delta_storage_conn_id
        self.min_new_commits = int(min_new_commits)
        self.poll_interval = float(poll_interval)
        self.endpoint = endpoint
        self.calls_per_second = calls_per_second
        self.burst = burst
        self._table: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_delta_maintenance.triggers.ratified_version.DeltaRatifiedVersionWatchTrigger",
            {
                "table_uri": self.table_uri,
                "coordinator_spec": self.coordinator_spec,
                "delta_coordinator_conn_id": self.delta_coordinator_conn_id,
                "delta_storage_conn_id": self.delta_storage_conn_id,
                "min_new_commits": self.min_new_commits,
                "poll_interval": self.poll_interval,
                "endpoint": self.endpoint,
                "calls_per_second": self.calls_per_second,
                "burst": self.burst,
            },
        )

    def initial_delay(self) -> float:
        """This table's place within one poll interval (stable: the URI's digest)."""
        from datetime import timedelta

        from ..fleet.scheduling import jitter_start_offset

        return jitter_start_offset(timedelta(seconds=self.poll_interval), self.table_uri).total_seconds()

    def _observe(self, last_seen: int | None) -> dict[str, Any]:
        from ..maintenance.operations.sensing import observe_for_watch
        from ..maintenance.table.maintained import restore_table

        hook = DeltaCoordinatorHook(self.delta_coordinator_conn_id, spec=self.coordinator_spec)
        options = DeltaStorageHook(self.delta_storage_conn_id).get_storage_options(self.table_uri)
        if self._table is None:  # the identity, once: the table's coordinator conf is read from the table
            with hook.open_table(self.table_uri, options) as table:
                if table.coordinator is None:
                    raise ValueError(f"{self.table_uri}: the table has no coordinator to watch")
                self._table = table.identity()
        # the connections at every poll: a watcher runs for as long as the DAG is deployed
        table = restore_table(self.table_uri, self._table["coordinator_spec"], self._table["table_conf"], options, credentials=hook.get_credentials())
        try:
            return observe_for_watch(table, min_new_commits=self.min_new_commits, last_seen_version=last_seen).to_dict()
        finally:
            table.close()

    def _drop_table(self) -> None:
        self._table = None

    async def _state(self, value: int | None = None, *, write: bool = False) -> int | None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return value
        try:
            if write:
                await store.aset(_STATE_KEY, value)
                return value
            stored = await store.aget(_STATE_KEY)
            return int(stored) if stored is not None else None
        except Exception as exc:  # noqa: BLE001 - the state store is an optimisation, not a requirement
            self.log.warning("%s: asset state store unavailable (%s); keeping the version in memory", self.table_uri, exc)
            return value

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last_seen = await self._state()
        last_reason = ""
        # computed in a thread: its first call imports the log library, which must not block the triggerer's loop
        await asyncio.sleep(await sync_to_async(self.initial_delay)())
        try:
            while True:
                await wait_for_call_budget(self.endpoint, self.calls_per_second, self.burst)
                try:
                    observation = await sync_to_async(self._observe)(last_seen)
                except Exception as exc:  # noqa: BLE001 - logged, polled again: nothing to fail
                    reason = f"poll failed: {type(exc).__name__}: {exc}"
                    if reason != last_reason:
                        (self.log.warning if is_transient(exc) else self.log.error)("%s: %s", self.table_uri, reason)
                    last_reason = reason
                    self._drop_table()
                else:
                    if observation["satisfied"]:
                        last_seen = int(observation["latest_ratified_version"])
                        await self._state(last_seen, write=True)
                        self.log.info("%s: %s", self.table_uri, observation["reason"])
                        yield TriggerEvent({"table_uri": self.table_uri, **observation})
                    elif observation["reason"] != last_reason:
                        self.log.info("%s: %s", self.table_uri, observation["reason"])
                    last_reason = observation["reason"]
                await asyncio.sleep(self.poll_interval)
        finally:
            self._drop_table()
