"""Per-table maintenance configuration: a YAML file with ``defaults`` and ``tables``.

Validation is strict: an unknown key or a bad value is an error naming the file, the table and
the key; schedules are checked here (a cron expression, a preset such as ``@hourly``, or a
duration such as ``30m``/``2h``/``1d``), not when Airflow first schedules. Each table is validated
on its own (``load_config_entries``): one bad table does not hide the others. Loading never
touches tables or coordinators (DAG files call it at parse time); checks that need the table (its
``_delta_log``, a retention shorter than its ``delta.logRetentionDuration``) run in the tasks, or
with ``delta-maintenance validate-config FILE --check-tables``.

.. code-block:: yaml

    defaults:
      schedule: "@hourly"
      coordinator: local:///data/coordinator.db     # or coordinator_conn_id: delta_coordinator_default
      sensor: {min_new_commits: 1, timeout_minutes: 60, poke_interval_seconds: 30, mode: reschedule}
      checkpoint: {interval: 10, engine: spark}
      compaction: {interval: 10}
      cleanup: {mode: dry-run}
      # fleet scheduling (see "Fleet scheduling" below)
      jitter: true                  # spread cron/preset start minutes per table
      pool: auto                    # one pool per coordinator endpoint
      pool_slots: 16
      rate_limit: {calls_per_second: 20, burst: 20}
    tables:
      - name: orders
        uri: s3://lake/orders
        storage_conn_id: lake_s3
        cleanup: {mode: delete, retention_days: 30}
      - name: events
        uri: s3://lake/events
        schedule: watch             # or: asset (a writer DAG's outlet), or a cron/preset/duration

Fleet scheduling: ``schedule: asset`` runs maintenance when a task emits the table's asset (its
URI); ``schedule: watch`` has an ``AssetWatcher`` poll the coordinator (``sensor.min_new_commits``
and ``sensor.poke_interval_seconds`` drive it) and no sensor task. ``jitter`` moves a time-based
schedule's minute by a per-table offset (``fleet.scheduling``); ``pool: auto`` names the pool of
the coordinator endpoint, of ``pool_slots`` slots; ``rate_limit`` caps the coordinator calls per
second of the pollers sharing an endpoint in one process (``fleet.rate_limit``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from ...coordinators.errors import InvalidCoordinatorSpecError
from ...coordinators.registry import AUTO, parse_coordinator_spec

__all__ = [
    "ConfigError",
    "TableConfig",
    "TableConfigError",
    "SensorConfig",
    "CheckpointConfig",
    "CompactionConfig",
    "CleanupConfig",
    "HealthConfig",
    "RateLimitConfig",
    "SCHEDULE_ASSET",
    "SCHEDULE_WATCH",
    "load_config",
    "load_config_entries",
    "read_yaml",
    "parse_config",
    "parse_config_entries",
    "parse_discovered_table",
    "parse_schedule",
]


class ConfigError(ValueError):
    """A configuration mistake; the message names the file, the table and the key."""

    def __init__(self, path: str, table: str | None, key: str, message: str) -> None:
        where = f"{path}: " + (f"table {table!r}: " if table else "") + f"{key}: "
        super().__init__(where + message)
        self.path, self.table, self.key, self.detail = path, table, key, message


@dataclass(frozen=True)
class SensorConfig:
    enabled: bool = True
    min_new_commits: int = 1
    timeout_minutes: float = 60.0
    poke_interval_seconds: float = 30.0
    mode: str = "reschedule"
    deferrable: bool | None = None  # None: Airflow's [operators] default_deferrable


@dataclass(frozen=True)
class CheckpointConfig:
    enabled: bool = True
    interval: int | None = None  # None: the table's delta.checkpointInterval
    engine: str = "spark"
    spark_conn_id: str = "spark_default"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    spark_jars: str | None = None
    spark_packages: str | None = None


@dataclass(frozen=True)
class CompactionConfig:
    enabled: bool = True
    interval: int = 10
    max_window_bytes: int = 0


@dataclass(frozen=True)
class CleanupConfig:
    enabled: bool = True
    mode: str = "dry-run"  # dry-run | delete
    retention_days: float | None = None
    allow_shorter_retention: bool = False
    catalog_permits_cleanup: bool = False


# --- health thresholds (the fleet health view: status --config, the fleet report, alerts) ---
@dataclass(frozen=True)
class HealthConfig:
    """A table lags when a figure exceeds its threshold (``value / threshold`` is its lag score)."""

    enabled: bool = True
    max_pending_commits: int = 20  # ratified commits not yet published
    max_commits_since_checkpoint: int = 100  # published commits after the newest complete checkpoint


@dataclass(frozen=True)
class RateLimitConfig:
    """Coordinator calls per second (and the burst) of the pollers of one endpoint; None: no cap."""

    enabled: bool = True
    calls_per_second: float | None = None
    burst: int | None = None


@dataclass(frozen=True)
class TableConfig:
    name: str
    uri: str
    schedule: str | None = "@hourly"
    coordinator: str | None = None
    coordinator_conn_id: str | None = None
    storage_conn_id: str | None = None
    publish: bool = True
    sensor: SensorConfig = field(default_factory=SensorConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    cleanup: CleanupConfig = field(default_factory=CleanupConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    pool: str | None = None
    tags: tuple[str, ...] = ()
    owner: str = "airflow"
    retries: int = 1
    retry_delay_minutes: float = 5.0
    # fleet scheduling (no stampede): see _fleet_checks
    jitter: bool = True
    pool_slots: int = 16
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)

    @property
    def dag_id(self) -> str:
        return f"delta_maintenance__{self.name}"

    @property
    def has_coordinator(self) -> bool:
        return bool(self.coordinator or self.coordinator_conn_id)

    @property
    def schedule_kind(self) -> str:
        """``none``, ``asset``, ``watch`` or ``time`` (a cron expression, preset or duration)."""
        if self.schedule is None:
            return "none"
        return self.schedule if self.schedule in (SCHEDULE_ASSET, SCHEDULE_WATCH) else "time"

    @property
    def airflow_schedule(self) -> str | timedelta | None:
        """A time-based schedule as ``DAG(schedule=...)`` takes it, before jitter (a duration
        becomes a ``timedelta``); None for manual, asset and watch schedules."""
        return parse_schedule(self.schedule) if self.schedule_kind == "time" and self.schedule is not None else None

    @property
    def coordinator_endpoint(self) -> str:
        from .endpoint import coordinator_endpoint

        return coordinator_endpoint(self.coordinator, self.coordinator_conn_id)

    @property
    def resolved_pool(self) -> str | None:
        """The Airflow pool of the table's tasks: ``pool: auto`` → its coordinator endpoint's."""
        if self.pool != POOL_AUTO:
            return self.pool
        from .endpoint import pool_name_for_endpoint

        return pool_name_for_endpoint(self.coordinator_endpoint)


@dataclass(frozen=True)
class TableConfigError:
    """A table that failed validation: its name (``tables[<i>]`` when the name itself is bad),
    the DAG id it would have had, and the error."""

    name: str
    dag_id: str
    error: ConfigError


# Airflow's schedule presets (airflow.utils.dates / timetables), checked without importing Airflow
SCHEDULE_ASSET = "asset"  # run when a task emits the table's asset (a writer DAG's outlet)
SCHEDULE_WATCH = "watch"  # run when the AssetWatcher over the ratified-version trigger fires
POOL_AUTO = "auto"  # pool: the table's coordinator endpoint's (config.endpoint)
_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@quarterly", "@yearly", "@annually"}
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@functools.lru_cache(maxsize=256)  # a fleet repeats a handful of schedules: check each once
def parse_schedule(value: str) -> str | timedelta:
    """A cron expression or preset (returned as is), or a duration ``<n>s|m|h|d`` (a ``timedelta``);
    ``ValueError`` naming the accepted forms otherwise."""
    text = value.strip()
    if text in _PRESETS:
        return text
    match = _DURATION.match(text)
    if match:
        if int(match.group(1)) <= 0:
            raise ValueError(f"{value!r}: a duration must be positive")
        return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    from croniter import croniter  # an Airflow dependency; imported only for cron strings

    if text.startswith("@") or not croniter.is_valid(text):
        raise ValueError(
            f"{value!r} is not a cron expression (e.g. '0 * * * *'), a preset "
            f"({', '.join(sorted(_PRESETS))}) or a duration (e.g. 30m, 2h, 1d)"
        )
    return text


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
_Section = SensorConfig | CheckpointConfig | CompactionConfig | CleanupConfig | HealthConfig | RateLimitConfig
_SECTIONS: dict[str, type[_Section]] = {
    "sensor": SensorConfig, "checkpoint": CheckpointConfig, "compaction": CompactionConfig, "cleanup": CleanupConfig, "health": HealthConfig,
    "rate_limit": RateLimitConfig,
}
_TOP = {
    "name", "uri", "schedule", "coordinator", "coordinator_conn_id", "storage_conn_id", "publish",
    "sensor", "checkpoint", "compaction", "cleanup", "health", "pool", "tags", "owner", "retries", "retry_delay_minutes",
    # fleet scheduling
    "jitter", "pool_slots", "rate_limit",
}


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _typed(path: str, table: str | None, key: str, value: Any, kind: type | tuple[type, ...], *, minimum: float | None = None) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ConfigError(path, table, key, f"expected a number, got {value!r}")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(path, table, key, f"expected {names}, got {value!r}")
    if minimum is not None and isinstance(value, (int, float)) and value < minimum:
        raise ConfigError(path, table, key, f"must be >= {minimum}, got {value!r}")
    return value


def _section(path: str, table: str, name: str, raw: Any) -> Any:
    cls = _SECTIONS[name]
    if raw is False:
        return cls(enabled=False)
    if raw is None or raw is True:
        return cls()
    if not isinstance(raw, Mapping):
        raise ConfigError(path, table, name, f"expected a mapping or false, got {raw!r}")
    allowed = set(cls.__dataclass_fields__)
    for key in raw:
        if key not in allowed:
            raise ConfigError(path, table, f"{name}.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def k(key: str) -> str:
        return f"{name}.{key}"

    v = dict(raw)
    if "enabled" in v:
        _typed(path, table, k("enabled"), v["enabled"], bool)
    if name == "sensor":
        for key, minimum in (("min_new_commits", 1), ("timeout_minutes", 0), ("poke_interval_seconds", 1)):
            if key in v:
                _typed(path, table, k(key), v[key], (int, float), minimum=minimum)
        if "mode" in v and v["mode"] not in ("poke", "reschedule"):
            raise ConfigError(path, table, k("mode"), f"expected poke or reschedule, got {v['mode']!r}")
        if v.get("deferrable") is not None:
            _typed(path, table, k("deferrable"), v["deferrable"], bool)
    elif name == "checkpoint":
        if v.get("interval") is not None:
            _typed(path, table, k("interval"), v["interval"], int, minimum=1)
        if "engine" in v and v["engine"] not in ("spark", "local"):
            raise ConfigError(path, table, k("engine"), f"expected spark or local, got {v['engine']!r}")
        if "spark_conf" in v:
            if not isinstance(v["spark_conf"], Mapping):
                raise ConfigError(path, table, k("spark_conf"), "expected a mapping of Spark conf keys to values")
            v["spark_conf"] = {str(a): str(b) for a, b in v["spark_conf"].items()}
    elif name == "compaction":
        if "interval" in v:
            _typed(path, table, k("interval"), v["interval"], int, minimum=2)
        if "max_window_bytes" in v:
            _typed(path, table, k("max_window_bytes"), v["max_window_bytes"], int, minimum=0)
    elif name == "cleanup":
        if "mode" in v and v["mode"] not in ("dry-run", "delete"):
            raise ConfigError(path, table, k("mode"), f"expected dry-run or delete, got {v['mode']!r}")
        if v.get("retention_days") is not None:
            _typed(path, table, k("retention_days"), v["retention_days"], (int, float), minimum=0)
        for key in ("allow_shorter_retention", "catalog_permits_cleanup"):
            if key in v:
                _typed(path, table, k(key), v[key], bool)
    elif name == "health":
        for key in ("max_pending_commits", "max_commits_since_checkpoint"):
            if key in v:
                _typed(path, table, k(key), v[key], int, minimum=1)
    elif name == "rate_limit":
        _rate_limit_checks(path, table, v)
    return cls(**v)


# --- fleet scheduling (schedule kinds, jitter, pools, rate limits) -------------------------------


def _rate_limit_checks(path: str, table: str, v: Mapping[str, Any]) -> None:
    if v.get("calls_per_second") is not None:
        _typed(path, table, "rate_limit.calls_per_second", v["calls_per_second"], (int, float))
        if v["calls_per_second"] <= 0:
            raise ConfigError(path, table, "rate_limit.calls_per_second", f"must be > 0, got {v['calls_per_second']!r}")
    if v.get("burst") is not None:
        _typed(path, table, "rate_limit.burst", v["burst"], int, minimum=1)


def _fleet_checks(path: str, name: str, merged: Mapping[str, Any]) -> None:
    """Schedule kinds, jitter and pool sizing of one table (the rate limit is a section)."""
    if "jitter" in merged:
        _typed(path, name, "jitter", merged["jitter"], bool)
    if "pool_slots" in merged:
        _typed(path, name, "pool_slots", merged["pool_slots"], int, minimum=1)
    if merged.get("schedule") in (SCHEDULE_ASSET, SCHEDULE_WATCH):
        has_coordinator = merged.get("coordinator") or merged.get("coordinator_conn_id")
        if merged["schedule"] == SCHEDULE_WATCH and not has_coordinator:
            raise ConfigError(path, name, "schedule", "watch polls the table's coordinator: give coordinator or coordinator_conn_id")
    if merged.get("pool") == POOL_AUTO and not (merged.get("coordinator") or merged.get("coordinator_conn_id")):
        raise ConfigError(path, name, "pool", "auto names the pool of the coordinator endpoint: the table has no coordinator")


def _table(path: str, raw: Any, defaults: Mapping[str, Any], index: int, *, discovered: bool = False) -> TableConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, None, f"tables[{index}]", f"expected a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(path, None, f"tables[{index}].name", f"a name of letters, digits, '_', '.', '-' is required, got {name!r}")
    merged = _merge(defaults, raw)
    for key in merged:
        if key not in _TOP:
            raise ConfigError(path, name, key, f"unknown key (allowed: {', '.join(sorted(_TOP))})")
    uri = merged.get("uri")
    if not isinstance(uri, str) or not uri:
        raise ConfigError(path, name, "uri", "a table URI is required")
    auto = isinstance(merged.get("coordinator"), str) and merged["coordinator"].strip().lower() == AUTO
    if merged.get("coordinator") is not None and not auto:
        try:
            parse_coordinator_spec(merged["coordinator"])
        except InvalidCoordinatorSpecError as exc:
            raise ConfigError(path, name, "coordinator", str(exc)) from None
    # a discovered table carries its own spec; its source's connection then supplies only credentials
    if merged.get("coordinator") and merged.get("coordinator_conn_id") and not auto and not discovered:
        raise ConfigError(path, name, "coordinator", "give coordinator or coordinator_conn_id, not both (coordinator: auto may take a connection for the endpoint)")
    for key in ("schedule", "coordinator_conn_id", "storage_conn_id", "pool", "owner"):
        if merged.get(key) is not None:
            _typed(path, name, key, merged[key], str)
    _fleet_checks(path, name, merged)
    if merged.get("schedule") is not None and merged["schedule"] not in (SCHEDULE_ASSET, SCHEDULE_WATCH):
        try:
            parse_schedule(merged["schedule"])
        except ValueError as exc:
            raise ConfigError(path, name, "schedule", str(exc)) from None
    if "publish" in merged:
        _typed(path, name, "publish", merged["publish"], bool)
    if "retries" in merged:
        _typed(path, name, "retries", merged["retries"], int, minimum=0)
    if "retry_delay_minutes" in merged:
        _typed(path, name, "retry_delay_minutes", merged["retry_delay_minutes"], (int, float), minimum=0)
    tags = merged.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ConfigError(path, name, "tags", f"expected a list of strings, got {tags!r}")
    kwargs = {k: v for k, v in merged.items() if k in _TOP and k not in _SECTIONS}
    kwargs["tags"] = tuple(tags)
    sections = {s: _section(path, name, s, merged.get(s)) for s in _SECTIONS}
    config = TableConfig(**kwargs, **sections)
    if config.publish and not config.has_coordinator:
        raise ConfigError(path, name, "publish", "publishing needs a coordinator (coordinator or coordinator_conn_id), or set publish: false")
    return config


def _root(data: Any, path: str) -> tuple[Mapping[str, Any], list[Any]]:
    """File-level checks: a mistake here concerns every table, so it stays fatal."""
    if not isinstance(data, Mapping):
        raise ConfigError(path, None, "<root>", "expected a mapping with 'defaults' and 'tables'")
    for key in data:
        if key not in ("defaults", "tables", "discovery"):
            raise ConfigError(path, None, key, "unknown top-level key (allowed: defaults, tables, discovery)")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ConfigError(path, None, "defaults", "expected a mapping")
    if "name" in defaults or "uri" in defaults:
        raise ConfigError(path, None, "defaults", "name and uri belong to each table")
    tables = data.get("tables")
    if "discovery" in data and tables is None:  # every table may come from discovery (maintenance.fleet_config)
        tables = []
    if not isinstance(tables, list) or (not tables and "discovery" not in data):
        raise ConfigError(path, None, "tables", "expected a non-empty list of tables (or a discovery section)")
    return defaults, tables


def parse_config_entries(data: Any, path: str = "<config>") -> tuple[list[TableConfig], list[TableConfigError]]:
    """Every valid table, and an error per invalid one (a later duplicate of a name is invalid).
    File-level mistakes (not YAML, bad ``defaults``, no ``tables``) still raise ``ConfigError``."""
    defaults, tables = _root(data, path)
    good: list[TableConfig] = []
    bad: list[TableConfigError] = []
    seen: set[str] = set()
    for index, raw in enumerate(tables):
        raw_name = raw.get("name") if isinstance(raw, Mapping) else None
        label = raw_name if isinstance(raw_name, str) and _NAME.match(raw_name) else f"tables[{index}]"
        try:
            table = _table(path, raw, defaults, index)
            if table.name in seen:
                raise ConfigError(path, table.name, "name", "duplicate table name")
        except ConfigError as exc:
            dag_id = f"delta_maintenance__{label}" if label == raw_name and label not in seen else f"delta_maintenance__invalid_{index}"
            bad.append(TableConfigError(label, dag_id, exc))
            continue
        seen.add(table.name)
        good.append(table)
    return good, bad


def parse_discovered_table(path: str, identity: Mapping[str, Any], settings: Mapping[str, Any]) -> TableConfig:
    """A discovered table (``identity``: name, uri, coordinator[, coordinator_conn_id]) with its
    merged ``settings`` (see ``fleet.config`` for the precedence), validated like a
    YAML table; ``ConfigError`` otherwise."""
    return _table(path, identity, settings, 0, discovered=True)


def parse_config(data: Any, path: str = "<config>") -> list[TableConfig]:
    """Every table, or the first ``ConfigError`` (strict: for tools that need the whole file)."""
    good, bad = parse_config_entries(data, path)
    if bad:
        raise bad[0].error
    return good


# libyaml's safe loader when PyYAML was built with it: the same documents, ~10x faster on a
# 10,000-table file (parsed at every DAG-file parse).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: str | Path) -> Any:
    text = Path(path).read_text()
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:  # one line: the position and the problem
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(str(path), None, "<yaml>", f"not valid YAML{where}: {problem}") from None


read_yaml = _read_yaml  # the YAML of a configuration file, with one-line errors (for maintenance.fleet_config)


def load_config(path: str | Path) -> list[TableConfig]:
    return parse_config(_read_yaml(path), str(path))


def load_config_entries(path: str | Path) -> tuple[list[TableConfig], list[TableConfigError]]:
    return parse_config_entries(_read_yaml(path), str(path))
