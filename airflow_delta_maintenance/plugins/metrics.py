"""Per-table health gauges through Airflow's metrics (StatsD, Datadog or OpenTelemetry, as the
``[metrics]`` section configures; Airflow adds its ``statsd_prefix``, ``airflow`` by default).

Names (``<table>`` is the configured table name, a ``.`` in it written ``__`` so that it stays one
StatsD path segment); every gauge also carries the tag ``table=<name>`` for backends with tags:

    delta_maintenance.table.<table>.pending_commits           ratified commits not yet published
    delta_maintenance.table.<table>.commits_since_checkpoint  published commits after the newest checkpoint
    delta_maintenance.table.<table>.log_files                 files in _delta_log (with staged commits, sidecars)
    delta_maintenance.table.<table>.log_bytes                 their bytes
    delta_maintenance.table.<table>.cleanup_candidates        files the cleanup would delete now
    delta_maintenance.table.<table>.cleanup_bytes             their bytes
    delta_maintenance.table.<table>.compaction_coverage       share of commits after the checkpoint covered by compaction files
    delta_maintenance.table.<table>.lag_score                 the largest figure/threshold ratio (> 1: lagging)
    delta_maintenance.table.<table>.readable                  1 measured, 0 the table could not be read
    delta_maintenance.fleet.tables | .lagging | .unreadable   fleet totals
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..fleet.status import TableHealth

__all__ = ["PREFIX", "TABLE_GAUGES", "emit_fleet_gauges", "gauge_values", "metric_table_name"]

PREFIX = "delta_maintenance"
TABLE_GAUGES = (
    "pending_commits",
    "commits_since_checkpoint",
    "log_files",
    "log_bytes",
    "cleanup_candidates",
    "cleanup_bytes",
    "compaction_coverage",
    "lag_score",
    "readable",
)


def metric_table_name(name: str) -> str:
    return name.replace(".", "__")


def gauge_values(h: TableHealth) -> dict[str, float]:
    """The gauges of one table (only ``lag_score`` and ``readable`` when it could not be read)."""
    out: dict[str, float] = {"lag_score": h.lag_score, "readable": 0.0 if h.status is None else 1.0}
    s = h.status
    if s is not None:
        covered, total = h.compaction_coverage
        out.update(
            pending_commits=len(s.pending_versions),
            commits_since_checkpoint=s.commits_since_checkpoint,
            log_files=s.log_files,
            log_bytes=s.log_bytes,
            cleanup_candidates=s.cleanup_candidates,
            cleanup_bytes=s.cleanup_bytes,
            compaction_coverage=round(covered / total, 4) if total else 1.0,
        )
    return out


def _stats() -> Any:
    """Airflow's metrics module, set up from ``[metrics]`` when this process runs ``dag.test()``:
    its tasks run in-process, where no task runner initialised the metrics backend (a task runner
    always does, before the task starts). Only public calls: ``stats.initialize`` with the
    factory ``[metrics]`` names, once per process."""
    try:
        from airflow.sdk.observability import stats  # Airflow ≥ 3.2
    except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1
        from airflow.stats import Stats

        return Stats
    global _initialised_in
    if _initialised_in != os.getpid() and _in_process_test_run():
        from airflow.sdk.configuration import conf
        from airflow.sdk.observability.metrics import stats_utils

        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=conf.getboolean("metrics", "legacy_names_on", fallback=False))
        _initialised_in = os.getpid()
    return stats


_initialised_in: int | None = None  # the process that initialised the backend for dag.test()


def _in_process_test_run() -> bool:
    """Is this task run in-process by ``dag.test()``? Its supervisor installs in-process comms
    where a task runner has a channel to its supervisor process (Airflow's own ``Variable.get``
    looks at the same attribute)."""
    try:
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms
    except ImportError:  # pragma: no cover - a layout this code does not know: leave the backend as it is
        return False
    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), InProcessSupervisorComms)


def emit_fleet_gauges(healths: Sequence[TableHealth]) -> int:
    """Send every table's gauges and the fleet totals; returns the number of gauges sent."""
    stats = _stats()
    gauge = stats.gauge
    sent = 0
    for h in healths:
        name = metric_table_name(h.name)
        for figure, value in gauge_values(h).items():
            gauge(f"{PREFIX}.table.{name}.{figure}", value, tags={"table": h.name})
            sent += 1
    totals = {
        "tables": len(healths),
        "lagging": sum(1 for h in healths if h.breaches),
        "unreadable": sum(1 for h in healths if h.status is None),
    }
    for figure, value in totals.items():
        gauge(f"{PREFIX}.fleet.{figure}", value)
        sent += 1
    return sent
