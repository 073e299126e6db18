"""``DeltaRatifiedVersionSensor``: wait until the coordinator has ratified new versions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..hooks.coordinator import DeltaCoordinatorHook
from ..hooks.storage import DeltaStorageHook
from ..maintenance.operations.sensing import is_transient, poll_ratified_versions
from ..maintenance.operations.summary import TaskReport
from ..operators._params import as_bool, as_int, as_seconds, as_version
from ..triggers.ratified_version import DeltaRatifiedVersionTrigger
from ..version_compat import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    BaseSensorOperator,
    PokeReturnValue,
    conf,
)

if TYPE_CHECKING:
    from ..version_compat import Context


def _try_number(context: Context) -> int | None:
    ti = context.get("ti")
    number = getattr(ti, "try_number", None)
    return number if isinstance(number, int) else None


class DeltaRatifiedVersionSensor(BaseSensorOperator):
    """Succeeds when the latest ratified version is ≥ ``target_version``, or when at least
    ``min_new_commits`` are ratified beyond ``baseline_version`` (default: the last published).

    One coordinator call per poke and no storage listing (except one ``_delta_log`` check when the
    coordinator does not know the table: a table in neither place is an error, not a wait), after
    the table's identity and one consistency check per try (one more call, one listing). Works
    in poke and reschedule modes, and deferrable (``deferrable=True``) with
    ``DeltaRatifiedVersionTrigger``. The observed versions go to XCom (``return_value``: latest
    ratified and published versions, pending count).

    Outcomes are decided here, identically in every mode: the condition met → success; the timeout
    reached with nothing new → skipped with the reason when ``skip_when_nothing_new`` (else
    ``AirflowSensorTimeout``); any error that is not transient (a wrong table URI, a missing
    coordinator database, refused credentials, a coordinator inconsistent with the log: checked
    once per try, with one listing) → the task fails. Do not combine with ``soft_fail``,
    which would turn those errors into skips too.

    :param table_uri: the table (templated)
    :param target_version: wait for this ratified version (templated)
    :param min_new_commits: or for this many commits beyond the baseline (templated)
    :param baseline_version: count new commits from here (default: the last published) (templated)
    :param skip: succeed at once without waiting, e.g. ``"{{ params.skip_wait }}"`` (templated)
    :param skip_when_nothing_new: skip (not fail) when the timeout passes without the condition
    :param coordinator_endpoint: the endpoint whose call budget the polls draw from
    :param coordinator_calls_per_second: that budget (``fleet.rate_limit``; None: no cap)
    """

    template_fields: Sequence[str] = ("table_uri", "target_version", "min_new_commits", "baseline_version", "coordinator_spec", "skip")
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        table_uri: str,
        target_version: int | str | None = None,
        min_new_commits: int | str | None = None,
        baseline_version: int | str | None = None,
        delta_coordinator_conn_id: str | None = None,
        coordinator_spec: str | None = None,
        delta_storage_conn_id: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        skip: bool | str = False,
        skip_when_nothing_new: bool = False,
        coordinator_endpoint: str | None = None,
        coordinator_calls_per_second: float | None = None,
        coordinator_burst: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.coordinator_endpoint = coordinator_endpoint
        self.coordinator_calls_per_second = coordinator_calls_per_second
        self.coordinator_burst = coordinator_burst
        self.table_uri = table_uri
        self.target_version = target_version
        self.min_new_commits = min_new_commits
        self.baseline_version = baseline_version
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.coordinator_spec = coordinator_spec
        self.delta_storage_conn_id = delta_storage_conn_id
        self.deferrable = deferrable
        self.skip = skip
        self.skip_when_nothing_new = skip_when_nothing_new
        self._last_reason = "no successful poke"
        self._last_seen: int | None = None
        self._recalled = False
        self._identity_cache: dict[str, Any] | None = None

    # New hooks at every poke: the connections are read again, so a sensor that pokes for days
    # follows a rotated key; a role's refreshable session is shared per connection (hooks._aws).
    @property
    def coordinator_hook(self) -> DeltaCoordinatorHook:
        return DeltaCoordinatorHook(self.delta_coordinator_conn_id, spec=self.coordinator_spec or None)

    @property
    def storage_hook(self) -> DeltaStorageHook:
        return DeltaStorageHook(self.delta_storage_conn_id)

    def _condition(self) -> dict[str, int | None]:
        target = as_version(self.target_version, "target_version")
        new = as_int(self.min_new_commits, "min_new_commits", None, minimum=1)
        if target is None and new is None:
            new = 1  # default: any new ratified commit
        return {"target_version": target, "min_new_commits": new, "baseline_version": as_version(self.baseline_version, "baseline_version")}

    def _wanted(self) -> str:
        """What this sensor waits for, in words (for the timeout and skip messages)."""
        c = self._condition()
        if c["target_version"] is not None:
            return f"ratified version {c['target_version']}"
        base = "the last published version" if c["baseline_version"] is None else f"v{c['baseline_version']}"
        return f"{c['min_new_commits']} new ratified commit(s) beyond {base}"

    @property
    def _skipping(self) -> bool:
        return as_bool(self.skip, "skip", False)

    def _identity(self, coordinator: DeltaCoordinatorHook | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """The table identity, resolved once per task try (the table's metadata is read once; each
        poll after that is one coordinator call)."""
        if self._identity_cache is None:
            options = self.storage_hook.get_storage_options(self.table_uri) if options is None else options
            with (coordinator or self.coordinator_hook).open_table(self.table_uri, options) as table:
                if table.coordinator is None:
                    raise AirflowFailException(f"ratified-version sensor for {self.table_uri}: the table has no coordinator to wait for")
                # A coordinator wedged against the log (a head nothing reaches, pending commits with
                # gaps) fails here, once per try: waiting would skip green run after run.
                table.catalog_view().check_consistent()
                self._identity_cache = table.identity()
        return self._identity_cache

    def poke(self, context: Context) -> PokeReturnValue | bool:
        if self._skipping:
            reason = "skip requested (skip_wait, or a manual run whose Params ask for work): not waiting for ratified versions"
            self.log.info("wait: skipped — %s", reason)
            return PokeReturnValue(is_done=True, xcom_value=TaskReport(self.table_uri, "wait", skipped=True, reason=reason).to_dict())
        self._wait_for_call_budget()
        try:
            coordinator, options = self.coordinator_hook, self.storage_hook.get_storage_options(self.table_uri)
            identity = self._identity(coordinator, options)
            observation = poll_ratified_versions(
                coordinator.get_credentials(), options, self.table_uri,
                coordinator_spec=identity["coordinator_spec"], table_conf=identity["table_conf"], **self._condition()
            )
        except Exception as exc:
            if is_transient(exc):
                self.log.warning("transient error, poking again: %s", exc)
                self._last_reason = f"last poke failed transiently: {type(exc).__name__}: {exc}"
                return False
            raise AirflowFailException(f"ratified-version sensor for {self.table_uri}: {type(exc).__name__}: {exc}") from exc
        self._recall(context)
        if observation["reason"] != self._last_reason:  # a line per change, not per poke
            self.log.info("%s", observation["reason"])
            self._remember(context, observation["reason"], observation["latest_ratified_version"])
        self._last_reason = observation["reason"]
        self._last_seen = observation["latest_ratified_version"]
        if observation["satisfied"]:
            return PokeReturnValue(is_done=True, xcom_value=self._record(observation))
        return False

    # In reschedule mode every poke runs in a new process: the last observation is kept in
    # Airflow's task state store (3.3+, scoped to this task instance), so a change is logged once
    # and the timeout message names the last observation. Without the store each poke logs its line.
    _STATE_KEY = "delta_wait_last_observation"

    def _state_store(self, context: Context) -> Any:
        return context.get("task_state_store") if self.mode == "reschedule" else None

    def _recall(self, context: Context) -> None:
        store = self._state_store(context)
        if store is None or self._recalled:
            return
        self._recalled = True
        try:
            kept = store.get(self._STATE_KEY)
        except Exception as exc:  # noqa: BLE001 - the store only spares log lines: never fail a poke over it
            self.log.debug("task state store unavailable: %s", exc)
            return
        # the store outlives the try (its scope is the task in the run): a new try logs afresh
        if isinstance(kept, dict) and isinstance(kept.get("reason"), str) and kept.get("try") == _try_number(context):
            self._last_reason = kept["reason"]
            seen = kept.get("latest_ratified_version")
            self._last_seen = seen if isinstance(seen, int) else None

    def _remember(self, context: Context, reason: str, seen: int | None) -> None:
        store = self._state_store(context)
        if store is None:
            return
        try:
            store.set(self._STATE_KEY, {"reason": reason, "latest_ratified_version": seen, "try": _try_number(context)})
        except Exception as exc:  # noqa: BLE001 - as in _recall
            self.log.debug("task state store unavailable: %s", exc)

    def _wait_for_call_budget(self) -> None:
        from ..fleet.rate_limit import bucket_for

        bucket = bucket_for(self.coordinator_endpoint or "default", self.coordinator_calls_per_second, self.coordinator_burst)
        if bucket is not None and (wait := bucket.reserve()) > 0:
            time.sleep(wait)

    def _record(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The wait's XCom in the common shape (docs: operators/results.md), plus what was observed."""
        reason = observation.get("reason")
        self.log.info("wait: %s", reason)
        details = {k: v for k, v in observation.items() if k not in ("reason", "satisfied")}
        return TaskReport(self.table_uri, "wait", what=str(reason), reason=reason, version=observation.get("latest_ratified_version"),
                          count=int(observation.get("new_commits") or 0), details=details).to_dict()

    def _nothing_new(self, detail: str, last_seen: int | None) -> AirflowException:
        """The timeout passed: say what was awaited, the last version seen and the last observation
        (the task log shows this line, not only "Skipping task.")."""
        seen = "no version seen" if last_seen is None else f"last ratified version seen v{last_seen}"
        message = f"{self.table_uri}: nothing new before the timeout: waited for {self._wanted()}; {seen} ({detail})"
        if self.skip_when_nothing_new:
            self.log.info("wait: skipped — %s", message)
            return AirflowSkipException(message)
        self.log.error("%s", message)
        return AirflowSensorTimeout(message)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout:  # raised only by the timeout check: poke raises no timeout
                self._recall(context)  # reschedule mode: the timeout may come before this process poked
                raise self._nothing_new(self._last_reason, self._last_seen) from None
        result = self.poke(context)
        if isinstance(result, PokeReturnValue) and result.is_done:
            return result.xcom_value
        timeout = as_seconds(self.timeout, "timeout", 7 * 24 * 3600.0) or 0.0
        self.defer(
            trigger=DeltaRatifiedVersionTrigger(
                self.table_uri,
                delta_coordinator_conn_id=self.delta_coordinator_conn_id,
                coordinator_spec=self._identity()["coordinator_spec"],
                table_conf=self._identity()["table_conf"],
                delta_storage_conn_id=self.delta_storage_conn_id,
                poll_interval=as_seconds(self.poke_interval, "poke_interval", 60.0) or 60.0,
                end_time=time.time() + timeout,
                endpoint=self.coordinator_endpoint,
                calls_per_second=self.coordinator_calls_per_second,
                burst=self.coordinator_burst,
                **self._condition(),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        event = event or {}
        status = event.get("status", "missing event")
        if status == "success":
            return self._record({k: v for k, v in event.items() if k not in ("status", "message")})
        if status == "timeout":
            last_seen = event.get("latest_ratified_version")
            raise self._nothing_new(str(event.get("reason") or event.get("message")), None if last_seen is None else int(last_seen))
        raise AirflowFailException(f"ratified-version sensor for {self.table_uri} ended with {status}: {event.get('message')}")
