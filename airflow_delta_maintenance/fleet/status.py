"""The health of every configured table, worst first: what `status --config` and the fleet report show.

Each table is measured by ``table_status`` (one coordinator call, one LIST, the light table state:
no file action is replayed). A table that cannot be measured (no log, coordinator down, bad
credentials) carries its one-line error instead of figures; the others are measured regardless.

Lag score: each watched figure divided by its threshold (``health`` section of the table's
configuration); the score is the largest ratio, so a score above 1 means a threshold is exceeded.
A table that could not be measured scores exactly 1: above every healthy table, below every table
measured beyond a threshold. Inconsistencies the coordinator shows (``problems``) count as 1 too.
A table whose configuration is invalid is shown the same way, marked ``invalid``
(``invalid_table_health``): a report must never leave a configured table out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..maintenance.config.errors import TableConfigError
from ..maintenance.config.tables import HealthConfig, TableConfig
from ..maintenance.operations.status import TableStatus, table_status
from ..maintenance.table.maintained import MaintainedTable

__all__ = ["MAINTENANCE_TASKS", "WATCHED", "TableHealth", "expected_tasks", "fleet_status", "invalid_table_health", "measure_table"]

# The tasks of a table's maintenance DAG whose last success the health view shows.
MAINTENANCE_TASKS = ("wait_for_ratified_commits", "publish", "compact_log", "checkpoint", "cleanup", "optimize")
# The figures with a threshold: name in the report and alerts → HealthConfig field.
WATCHED = {"pending_commits": "max_pending_commits", "commits_since_checkpoint": "max_commits_since_checkpoint", "small_files": "max_small_files"}

Opener = Callable[[TableConfig], MaintainedTable]


@dataclass(frozen=True)
class TableHealth:
    """One table's figures (``status``), or why they could not be read (``error``)."""

    name: str
    uri: str
    thresholds: HealthConfig
    status: TableStatus | None = None
    error: str | None = None
    last_success: Mapping[str, str | None] = field(default_factory=dict)  # task id → ISO time, None: unknown
    small_files: tuple[int, int] | None = None  # (count, bytes) below OPTIMIZE's minimum size, when measured
    invalid: bool = False  # the table's configuration is invalid: ``error`` lists its mistakes

    @property
    def figures(self) -> dict[str, int]:
        """The watched figures (empty when the table could not be measured)."""
        s = self.status
        if s is None:
            return {}
        out = {"pending_commits": len(s.pending_versions), "commits_since_checkpoint": s.commits_since_checkpoint}
        if self.small_files is not None:
            out["small_files"], out["small_file_bytes"] = self.small_files
        return out

    def _threshold(self, name: str) -> int | None:
        field_name = WATCHED.get(name)
        value = getattr(self.thresholds, field_name) if field_name else None
        return None if value is None else int(value)

    @property
    def breaches(self) -> list[str]:
        """The watched figures above their thresholds (none when health checks are disabled)."""
        if not self.thresholds.enabled:
            return []
        return [name for name, value in self.figures.items() if (t := self._threshold(name)) is not None and value > t]

    @property
    def lag_score(self) -> float:
        if self.status is None:
            return 1.0
        if not self.thresholds.enabled:
            return 0.0
        ratios = [value / t for name, value in self.figures.items() if (t := self._threshold(name)) is not None]
        if self.status.problems:
            ratios.append(1.0)
        return round(max(ratios, default=0.0), 4)

    @property
    def compaction_coverage(self) -> tuple[int, int]:
        """(commits after the checkpoint covered by a compaction file, commits after the checkpoint)."""
        s = self.status
        if s is None or s.commits_since_checkpoint <= 0:
            return 0, 0
        first, last = s.checkpoint_version + 1, s.latest_published_version
        covered: set[int] = set()
        for start, end in s.compactions:
            covered.update(range(max(start, first), min(end, last) + 1))
        return len(covered), s.commits_since_checkpoint

    def to_dict(self) -> dict[str, Any]:
        covered, total = self.compaction_coverage
        out: dict[str, Any] = {
            "name": self.name,
            "table_uri": self.uri,
            "lag_score": self.lag_score,
            "breaches": self.breaches,
            "thresholds": {"max_pending_commits": self.thresholds.max_pending_commits,
                           "max_commits_since_checkpoint": self.thresholds.max_commits_since_checkpoint,
                           "max_small_files": self.thresholds.max_small_files,
                           "enabled": self.thresholds.enabled},
            "error": self.error,
            "invalid": self.invalid,
            "last_success": dict(self.last_success),
        }
        if self.status is not None:
            s = self.status.to_dict()
            s.pop("table_uri", None)
            out.update(s)
            out.update(self.figures)
            out["compaction_covered_commits"] = covered
            out["compaction_coverage"] = round(covered / total, 4) if total else 1.0
        return out


def measure_table(
    table: TableConfig,
    opener: Opener,
    *,
    last_success: Mapping[str, str | None] | None = None,
    now_ms: int | None = None,
) -> TableHealth:
    """One table's health; any error becomes the table's one-line ``error`` (never raised)."""
    runs = dict(last_success or {})
    try:
        small = None
        with opener(table) as opened:
            status = table_status(opened, now_ms=now_ms)
            if table.optimize.enabled or table.health.max_small_files is not None:
                small = _small_files(opened, table)
    except Exception as exc:  # noqa: BLE001 - one table's failure is shown for that table, never fatal for the fleet
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        return TableHealth(table.name, table.uri, table.health, error=message, last_success=runs)
    return TableHealth(table.name, table.uri, table.health, status=status, last_success=runs, small_files=small)


def _small_files(opened: MaintainedTable, table: TableConfig) -> tuple[int, int]:
    """Live files below the size OPTIMIZE would compact (its config's, else the table's default).
    Replays the table's files: measured only for tables that configure OPTIMIZE or a threshold."""
    from ..deltalog.optimize.plan import parse_size
    from ..maintenance.operations.optimize import small_file_counts

    o = table.optimize
    return small_file_counts(opened, parse_size(o.min_file_size, "min_file_size") if o.min_file_size is not None else None)


def invalid_table_health(entry: TableConfigError) -> TableHealth:
    """The report's row of a table whose configuration is invalid: an error naming every mistake
    (one line), the default thresholds, no figures."""
    mistakes = "; ".join(line.strip() for line in str(entry.error).splitlines() if line.strip())
    return TableHealth(entry.name, "", HealthConfig(), error=f"invalid configuration: {mistakes}", invalid=True)


def expected_tasks(table: TableConfig) -> list[str]:
    """The maintenance tasks the table's configuration enables, in DAG order."""
    enabled = {
        "wait_for_ratified_commits": table.has_coordinator and table.sensor.enabled,
        "publish": table.publish,
        "compact_log": table.compaction.enabled,
        "checkpoint": table.checkpoint.enabled,
        "cleanup": table.cleanup.enabled,
        "optimize": table.optimize.enabled,
    }
    return [task for task in MAINTENANCE_TASKS if enabled[task]]


def fleet_status(
    tables: Iterable[TableConfig],
    opener: Opener,
    *,
    last_success: Mapping[str, Mapping[str, str | None]] | None = None,
    now_ms: int | None = None,
    parallelism: int = 1,
) -> list[TableHealth]:
    """Every table's health, worst first (highest lag score; ties by name). ``parallelism`` tables
    are measured at once (each measurement waits on its coordinator and storage, not the CPU)."""
    runs = last_success or {}

    def measure(t: TableConfig) -> TableHealth:
        recorded = runs.get(t.name, {})
        tasks = [*expected_tasks(t), *sorted(set(recorded) - set(MAINTENANCE_TASKS))]
        return measure_table(t, opener, last_success={task: recorded.get(task) for task in tasks}, now_ms=now_ms)

    if parallelism <= 1:
        measured = [measure(t) for t in tables]
    else:
        with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="fleet-status") as pool:
            measured = list(pool.map(measure, tables))
    return sorted(measured, key=lambda h: (-h.lag_score, h.name))
