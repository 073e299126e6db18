"""Shared plumbing of the maintenance operators: storage, coordinator, error translation, lineage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from ..coordinators.errors import CoordinatorError
from ..deltalog.errors import (
    AtomicWriteUnsupportedError,
    DeltaLogError,
    InvalidLogPathError,
    InvalidOptionError,
    ProtocolViolationError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from ..hooks.coordinator import DeltaCoordinatorHook
from ..hooks.storage import DeltaStorageHook
from ..maintenance.errors import ChecksumMismatchError, CoordinatorMismatchError, InconsistentCoordinatorError, PublishForkError, StagedCommitError
from ..maintenance.operations.summary import Progress, TaskReport, Throttled
from ..maintenance.table.maintained import MaintainedTable
from ..version_compat import AirflowException, AirflowFailException, BaseOperator

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

__all__ = ["DeltaTableOperator", "translate_errors"]

T = TypeVar("T")

# Errors a retry cannot fix: fail the task at once with the message (no retries burned).
PERMANENT = (
    TableNotFoundError,
    UnsupportedFeatureError,
    ProtocolViolationError,
    InvalidLogPathError,
    InvalidOptionError,
    AtomicWriteUnsupportedError,
    PublishForkError,
    StagedCommitError,
    CoordinatorMismatchError,
    InconsistentCoordinatorError,
    ChecksumMismatchError,
)


def translate_errors(action: str, table_uri: str, fn: Callable[[], T]) -> T:
    """Run ``fn``; library errors become Airflow exceptions that say what to do."""
    try:
        return fn()
    except PERMANENT as exc:
        raise AirflowFailException(f"{action} of {table_uri} failed permanently: {type(exc).__name__}: {exc}") from exc
    except CoordinatorError as exc:
        if exc.retryable:
            raise AirflowException(f"{action} of {table_uri}: transient coordinator error, will retry: {exc}") from exc
        raise AirflowFailException(f"{action} of {table_uri}: coordinator refused: {type(exc).__name__}: {exc}") from exc
    except DeltaLogError as exc:
        raise AirflowException(f"{action} of {table_uri} failed: {type(exc).__name__}: {exc}") from exc


class DeltaTableOperator(BaseOperator):
    """Base of the maintenance operators: one table, its storage connection and its coordinator.

    :param table_uri: table root URI (templated)
    :param delta_storage_conn_id: storage connection (``None``: environment credentials)
    :param delta_coordinator_conn_id: coordinator connection (its host holds a spec, or ``auto``)
    :param coordinator_spec: a coordinator spec, or ``auto`` to discover the coordinator from the
        table (the connection then supplies the endpoint); overrides the connection's spec (templated)

    The table's identity (storage, coordinator, per-table conf read from the table) is built once
    per task by ``open_table()``; every operation acts on the catalog's view of the table.
    """

    template_fields: Sequence[str] = ("table_uri", "coordinator_spec")
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        table_uri: str,
        delta_storage_conn_id: str | None = None,
        delta_coordinator_conn_id: str | None = None,
        coordinator_spec: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_uri = table_uri
        self.delta_storage_conn_id = delta_storage_conn_id
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.coordinator_spec = coordinator_spec

    @cached_property
    def storage_hook(self) -> DeltaStorageHook:
        return DeltaStorageHook(self.delta_storage_conn_id)

    @cached_property
    def coordinator_hook(self) -> DeltaCoordinatorHook:
        return DeltaCoordinatorHook(self.delta_coordinator_conn_id, spec=self.coordinator_spec or None)

    def open_table(self, *, allow_unsafe_writes: bool = False) -> MaintainedTable:
        """The table's identity for this task: storage, coordinator and per-table conf, once
        (connections and credentials are resolved once per task by the cached hooks)."""
        options = self.storage_hook.get_storage_options(self.table_uri)
        return self.coordinator_hook.open_table(self.table_uri, options, allow_unsafe_writes=allow_unsafe_writes)

    def emit_log_event(self, context: Context | None, **extra: Any) -> None:
        """Put what this run did (``published_version``, ``checkpoint_version`` …) into the extra
        of the event this task emits on the table's published-log asset, when it is an outlet
        (the generated DAGs make it one: ``assets.published_log_asset``)."""
        self.coordinator_hook.record_lineage(self.table_uri, output=True)
        events = context.get("outlet_events") if context else None
        if events is None:
            return
        from ..maintenance.table.lineage import published_log_asset_uri

        uri = published_log_asset_uri(self.table_uri)
        for outlet in self.outlets or ():
            if getattr(outlet, "uri", None) == uri:
                events[outlet].extra.update(extra)

    def progress(self) -> Progress:
        """A sink for a long step's progress: at most one task-log line every few seconds."""
        return Throttled(self.log.info)

    def finish(self, report: TaskReport) -> dict[str, Any]:
        """Log the task's one summary line; its small record is the task's XCom (docs: operators/results.md)."""
        self.log.info("%s", report.summary())
        return report.to_dict()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The maintained table as both input and output dataset (lazy OpenLineage import)."""
        try:
            from airflow.providers.common.compat.openlineage.facet import Dataset
            from airflow.providers.openlineage.extractors import OperatorLineage
        except ImportError:
            return None
        from ..maintenance.table.lineage import openlineage_dataset_name

        namespace, name = openlineage_dataset_name(self.table_uri)
        dataset = Dataset(namespace=namespace, name=name)
        return OperatorLineage(inputs=[dataset], outputs=[dataset])

    def execute(self, context: Context) -> Any:  # pragma: no cover - subclasses implement
        raise NotImplementedError
