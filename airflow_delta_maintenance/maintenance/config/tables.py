"""Per-table maintenance configuration: a YAML file with ``defaults`` and ``tables``.

Validation is strict: an unknown key or a bad value is an error naming the file, the table and
the key; schedules are checked here (a cron expression, a preset such as ``@hourly``, or a
duration such as ``30m``/``2h``/``1d``), not when Airflow first schedules. Every mistake is
reported, not just the first: each table is validated on its own (``load_config_entries``: one
bad table does not hide the others) and lists all of its mistakes; the file's own mistakes
(unknown top-level keys, ``defaults``) are listed together. Loading never touches tables or
coordinators (DAG files call it at parse time); checks that need the table (its ``_delta_log``, a
retention shorter than its ``delta.logRetentionDuration``) run in the tasks, or with
``delta-maintenance validate-config FILE --check-tables``.

The keys and their types are the models of ``models`` and ``sections`` (their JSON schema:
``delta-maintenance config-schema``; every key: the docs' ``tables.yaml`` reference).

.. code-block:: yaml

    defaults:
      schedule: "@hourly"
      coordinator: local:///data/coordinator.db     # or coordinator_conn_id: delta_coordinator_default
      sensor: {min_new_commits: 1, timeout_minutes: 60, poke_interval_seconds: 30, mode: reschedule}
      checkpoint: {interval: 10, engine: auto}
      compaction: {interval: 10}
      cleanup: {mode: dry-run}
      # fleet scheduling
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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .errors import ConfigError, TableConfigError
from .messages import key_path, mistakes
from .models import NAME_PATTERN, POOL_AUTO, RULES_APART, TableConfig, given, table_rules
from .optimize import OptimizeConfig
from .schedule import SCHEDULE_ASSET, SCHEDULE_WATCH, parse_schedule
from .sections import CheckpointConfig, CleanupConfig, CompactionConfig, HealthConfig, RateLimitConfig, SensorConfig

__all__ = [
    "ConfigCheck",
    "ConfigError",
    "TableConfig",
    "TableConfigError",
    "SensorConfig",
    "CheckpointConfig",
    "CompactionConfig",
    "CleanupConfig",
    "OptimizeConfig",
    "HealthConfig",
    "RateLimitConfig",
    "FILE_KEYS",
    "POOL_AUTO",
    "SCHEDULE_ASSET",
    "SCHEDULE_WATCH",
    "check_config",
    "load_config",
    "load_config_entries",
    "merge",
    "read_yaml",
    "parse_config",
    "parse_config_entries",
    "parse_discovered_table",
    "parse_schedule",
    "validate_table",
]

FILE_KEYS = ("defaults", "tables", "discovery")  # the top level of the file (discovery: fleet.config)


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested mappings (sections) merge key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def validate_table(raw: Any, defaults: Mapping[str, Any], path: str, index: int, *, discovered: bool = False) -> TableConfig:
    """One table with ``defaults`` merged in, or a ``ConfigError`` with every mistake of it. A
    mistake the table inherits is named where it is written (``defaults.checkpoint.engine``)."""
    name = raw.get("name") if isinstance(raw, Mapping) else None
    label: str | None
    if discovered:
        label, prefix = str(name), ""
    elif not isinstance(raw, Mapping):
        raise ConfigError(path, None, f"tables[{index}]", f"expected a mapping, got {raw!r}")
    else:  # a bad name cannot label the table: its keys are named by its position
        label, prefix = (name, "") if isinstance(name, str) and NAME_PATTERN.match(name) else (None, f"tables[{index}].")
    merged = merge(defaults, raw)
    problems: list[ConfigError] = []
    wrong: set[str] = set()
    try:
        table: TableConfig | None = TableConfig.model_validate(merged, context=RULES_APART)
    except ValidationError as exc:
        table = None
        for parts, message in mistakes(exc, TableConfig):
            inherited = not discovered and not _sets(raw, parts) and _sets(defaults, parts)
            problems.append(ConfigError(path, label, ("defaults." if inherited else prefix) + key_path(parts), message))
            wrong.add(str(parts[0]) if parts else "")
    # the rules between keys, but those that read a key that is itself wrong
    for key, message in table_rules(given(merged), discovered=discovered, unknown=frozenset(wrong)):
        problems.append(ConfigError(path, label, prefix + key, message))
    if problems or table is None:
        raise ConfigError.several(problems)
    return table


def _sets(values: Any, parts: list[str | int]) -> bool:
    """Whether ``values`` gives the key at ``parts`` (or the section above it as a scalar)."""
    for part in parts:
        if not isinstance(values, Mapping) or part not in values:
            return False
        values = values[part]
        if not isinstance(values, Mapping):
            return True
    return True


@dataclass(frozen=True)
class ConfigCheck:
    """A file's tables checked: the valid ones, an entry per invalid one, the mistakes of the file
    itself (``problems``: each makes the file unusable), and its ``defaults``."""

    tables: list[TableConfig]
    invalid: list[TableConfigError]
    problems: list[ConfigError] = field(default_factory=list)
    defaults: Mapping[str, Any] = field(default_factory=dict)


def check_config(data: Any, path: str = "<config>") -> ConfigCheck:
    """Every table checked, and every mistake of the file itself. A document that is not a
    mapping stops here (``ConfigError``): nothing else can be read from it."""
    if not isinstance(data, Mapping):
        raise ConfigError(path, None, "<root>", "expected a mapping with 'defaults' and 'tables'")
    problems = [
        ConfigError(path, None, str(key), f"unknown top-level key (allowed: {', '.join(sorted(FILE_KEYS))})") for key in data if key not in FILE_KEYS
    ]
    # a mistake inside defaults is one of every table that inherits it (reported with the table)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        problems.append(ConfigError(path, None, "defaults", f"expected a mapping, got {defaults!r}"))
        defaults = {}
    elif "name" in defaults or "uri" in defaults:
        problems.append(ConfigError(path, None, "defaults", "name and uri belong to each table"))
        defaults = {k: v for k, v in defaults.items() if k not in ("name", "uri")}
    tables = data.get("tables")
    if "discovery" in data and tables is None:  # every table may come from discovery (fleet.config)
        tables = []
    if not isinstance(tables, list) or (not tables and "discovery" not in data):
        problems.append(ConfigError(path, None, "tables", "expected a non-empty list of tables (or a discovery section)"))
        tables = []
    good: list[TableConfig] = []
    bad: list[TableConfigError] = []
    seen: set[str] = set()
    for index, raw in enumerate(tables):
        raw_name = raw.get("name") if isinstance(raw, Mapping) else None
        label = raw_name if isinstance(raw_name, str) and NAME_PATTERN.match(raw_name) else f"tables[{index}]"
        try:
            table = validate_table(raw, defaults, path, index)
            if table.name in seen:
                raise ConfigError(path, table.name, "name", "duplicate table name")
        except ConfigError as exc:
            dag_id = f"delta_maintenance__{label}" if label == raw_name and label not in seen else f"delta_maintenance__invalid_{index}"
            bad.append(TableConfigError(label, dag_id, exc, *_owner_and_tags(raw, defaults)))
            continue
        seen.add(table.name)
        good.append(table)
    return ConfigCheck(good, bad, problems, defaults)


def _owner_and_tags(raw: Any, defaults: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """An invalid table's owner and tags as its DAG would have had them, where they are well formed."""
    merged = {**defaults, **(raw if isinstance(raw, Mapping) else {})}
    owner, tags = merged.get("owner"), merged.get("tags")
    good_tags = tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()
    return (owner if isinstance(owner, str) and owner else None), good_tags


def parse_config_entries(data: Any, path: str = "<config>") -> tuple[list[TableConfig], list[TableConfigError]]:
    """Every valid table, and an error per invalid one (a later duplicate of a name is invalid).
    Mistakes of the file itself (not a mapping, an unknown top-level key, ``defaults`` not a
    mapping or naming a table, no ``tables``) raise one ``ConfigError`` listing all of them."""
    checked = check_config(data, path)
    if checked.problems:
        raise ConfigError.several(checked.problems)
    return checked.tables, checked.invalid


def parse_discovered_table(path: str, identity: Mapping[str, Any], settings: Mapping[str, Any]) -> TableConfig:
    """A discovered table (``identity``: name, uri, coordinator[, coordinator_conn_id]) with its
    merged ``settings`` (see ``fleet.config`` for the precedence), validated like a YAML table;
    ``ConfigError`` with every mistake otherwise."""
    return validate_table(identity, settings, path, 0, discovered=True)


def parse_config(data: Any, path: str = "<config>") -> list[TableConfig]:
    """Every table, or the first invalid table's ``ConfigError`` (strict: for tools that need the
    whole file)."""
    good, bad = parse_config_entries(data, path)
    if bad:
        raise bad[0].error
    return good


# libyaml's safe loader when PyYAML was built with it: the same documents, ~10x faster on a
# 10,000-table file (parsed at every DAG-file parse).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: str | Path) -> Any:
    """The YAML of a configuration file, with one-line errors."""
    text = Path(path).read_text()
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:  # one line: the position and the problem
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(str(path), None, "<yaml>", f"not valid YAML{where}: {problem}") from None


def load_config(path: str | Path) -> list[TableConfig]:
    return parse_config(read_yaml(path), str(path))


def load_config_entries(path: str | Path) -> tuple[list[TableConfig], list[TableConfigError]]:
    return parse_config_entries(read_yaml(path), str(path))
