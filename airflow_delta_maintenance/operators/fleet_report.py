"""``DeltaFleetReportOperator``: one health report of every configured table.

Measures each table of the YAML configuration (one coordinator call and one LIST per table, no
file action replayed; a table that cannot be read is reported with its error, never fatal for the
fleet; a table whose configuration is invalid is reported as an error, marked invalid, and
fails the task once the report is written), writes report.json and report.html atomically to the report directory with the history
that feeds the charts and the alert state, sends the per-table gauges (``metrics``), and calls the
notifiers with the thresholds crossed since the previous report.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..fleet.config import fleet_entries
from ..fleet.history import DEFAULT_MAX_SAMPLES, Alert, read_last_success
from ..fleet.report import publish_fleet_report
from ..fleet.status import fleet_status, invalid_table_health
from ..hooks.coordinator import DeltaCoordinatorHook
from ..hooks.storage import DeltaStorageHook
from ..maintenance.config.tables import TableConfig
from ..maintenance.table.maintained import MaintainedTable, open_table
from ..notifications.health import ALERTS_KEY
from ..plugins.metrics import emit_fleet_gauges
from ..plugins.report_dir import report_dir
from ..version_compat import AirflowFailException, BaseOperator

__all__ = ["ConfiguredTableOpener", "DeltaFleetReportOperator", "resolve_report_dir"]


def resolve_report_dir(explicit: str | None = None) -> Path:
    """See ``report_dir.report_dir``."""
    return report_dir(explicit)


class ConfiguredTableOpener:
    """Each table's identity as its maintenance DAG builds it (its storage and coordinator
    connections), with one hook per connection for the whole fleet: a connection is read, and a
    role assumed, once per run rather than once per table. Connections are resolved under a lock
    (tables are measured from several threads); opening and measuring run outside it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._storage: dict[str | None, DeltaStorageHook] = {}
        self._coordinators: dict[tuple[str | None, str | None], DeltaCoordinatorHook] = {}

    def __call__(self, table: TableConfig) -> MaintainedTable:
        with self._lock:
            storage = self._storage.get(table.storage_conn_id)
            if storage is None:
                storage = self._storage[table.storage_conn_id] = DeltaStorageHook(table.storage_conn_id)
            options = storage.get_storage_options(table.uri)
            if not table.has_coordinator:
                coordinator = None
            else:
                key = (table.coordinator_conn_id, table.coordinator)
                coordinator = self._coordinators.get(key)
                if coordinator is None:
                    coordinator = self._coordinators[key] = DeltaCoordinatorHook(table.coordinator_conn_id, spec=table.coordinator)
                if table.coordinator_conn_id:
                    coordinator.resolve_spec()  # reads the connection now, under the lock (cached by the hook)
        if coordinator is None:
            return open_table(table.uri, options)
        return coordinator.open_table(table.uri, options)


class DeltaFleetReportOperator(BaseOperator):
    """Write the fleet health report, send gauges, and notify threshold crossings.

    :param config_path: the maintenance YAML configuration (templated)
    :param report_dir: local directory of the report and its history (templated; default: ``report_dir.report_dir()``)
    :param notifiers: called with the context plus ``delta_health_alerts`` when a figure crossed its threshold
    :param max_history_samples: history samples kept (one per run)
    :param emit_metrics: send the gauges through Airflow's metrics
    :param parallelism: tables measured at once
    """

    template_fields: Sequence[str] = ("config_path", "report_dir")
    ui_color = "#c6e5f0"

    def __init__(
        self,
        *,
        config_path: str,
        report_dir: str | None = None,
        notifiers: Sequence[Any] = (),
        max_history_samples: int = DEFAULT_MAX_SAMPLES,
        emit_metrics: bool = True,
        parallelism: int = 8,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.report_dir = report_dir
        self.notifiers = list(notifiers)
        self.max_history_samples = max_history_samples
        self.emit_metrics = emit_metrics
        self.parallelism = parallelism

    def execute(self, context: Any) -> dict[str, Any]:
        directory = resolve_report_dir(self.report_dir)
        tables, invalid = fleet_entries(self.config_path)
        healths = fleet_status(tables, ConfiguredTableOpener(), last_success=read_last_success(directory), parallelism=self.parallelism)
        if invalid:  # reported beside the measured tables, worst first (an invalid table scores 1 like an unreadable one)
            healths = sorted([*healths, *map(invalid_table_health, invalid)], key=lambda h: (-h.lag_score, h.name))
        generated = datetime.now(timezone.utc).isoformat(timespec="seconds")

        def notify(alerts: list[Alert]) -> None:
            for notifier in self.notifiers:
                notifier({**context, ALERTS_KEY: [a.to_dict() for a in alerts]})

        published = publish_fleet_report(healths, directory, generated, notify=notify, max_samples=self.max_history_samples)
        for h in healths:
            if h.invalid:
                self.log.error("table %s: %s", h.name, h.error)
            elif h.error:
                self.log.warning("table %s could not be read: %s", h.name, h.error)
            elif h.breaches:
                self.log.warning("table %s is lagging (score %.2f): %s", h.name, h.lag_score, ", ".join(h.breaches))
        gauges = emit_fleet_gauges(healths) if self.emit_metrics else 0
        self.log.info("fleet report of %d table(s) written to %s (%d gauge(s) sent)", len(healths), published.html_path, gauges)
        if invalid:  # the report is written (the page shows them); the run is not green
            names = ", ".join(e.name for e in invalid)
            raise AirflowFailException(
                f"{len(invalid)} table(s) with an invalid configuration, reported as errors: {names}; "
                f"list every mistake with `delta-maintenance validate-config {self.config_path}`"
            )
        return {
            "report_html": str(published.html_path),
            "report_json": str(published.json_path),
            "order": [h.name for h in healths],
            "lagging": published.document["lagging"],
            "errors": published.document["errors"],
            "alerts": published.document["alerts"],
            "invalid": published.document["invalid"],
        }
