"""The ``discovery:`` section of the YAML configuration, the fleet file, and how settings merge.

Tables come from the YAML's ``tables:`` and from *discovery sources* (every managed Delta table of
a Unity Catalog schema or catalog, every table of a DynamoDB commits table). Discovery talks to the
catalogs in a task (``delta-maintenance discover`` or the discovery DAG, ``fleet_discovery``) and
writes the tables found to the *fleet file*; parsing DAGs reads only that file — no network I/O.

.. code-block:: yaml

    discovery:
      fleet_file: fleet.json          # relative to this YAML file; default <yaml name>.fleet.json
      schedule: "@hourly"             # of the discovery DAG (delta_maintenance__discovery)
      sources:
        - name: uc_sales
          unity_catalog: unity-catalog://uc.example.com:8080?api=v1
          catalog: main
          schemas: [sales]            # omit: every schema of the catalog
          conn_id: uc_prod            # optional: a delta_coordinator connection for the token
          settings: {schedule: "@daily"}
        - name: ddb
          dynamodb: dynamodb://delta_commits?region=us-east-1
      overrides:
        - match: {name: "main.sales.orders_*", properties: {tier: gold}}
          schedule: "*/15 * * * *"
          cleanup: {retention_days: 7}
        - match: {uri: "s3://lake/scratch/*"}
          enabled: false

Precedence for a discovered table, lowest first: the built-in defaults, ``defaults:``, its source's
``settings:``, then every matching ``overrides`` entry in file order (a later match wins, nested
sections merge key by key). The discovered identity (name, URI, coordinator spec, the source's
connection) is never overridden. A table in ``tables:`` with the same URI or name *replaces* the
discovered one entirely (explicit YAML wins). ``enabled: false`` leaves a table out of the fleet.

``match`` keys (all given keys must match; a list of globs matches if any does; globs are
``fnmatch`` patterns, case-sensitive): ``name`` (the fleet name: ``catalog.schema.table`` for Unity
Catalog, ``<dir>_<tableId prefix>`` for DynamoDB), ``uri`` (the normalised table URI), ``source``,
and ``properties`` (a mapping of Unity Catalog table property → glob; Unity Catalog OSS has no
tags, so properties stand in for them; DynamoDB tables have none).

A missing, unreadable, malformed or stale fleet file (written for other sources) is an error of the
discovery part only: the YAML tables still load, and the DAG factory shows the error in a
placeholder DAG.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from ..deltalog.storage import normalize_table_uri
from ..maintenance.config.tables import (
    ConfigError,
    TableConfig,
    TableConfigError,
    check_config,
    merge,
    parse_discovered_table,
    read_yaml,
)
from .discovery_section import DiscoveryConfig, DynamoDBSource, OverrideRule, Source, UnityCatalogSource, check_discovery

__all__ = [
    "DISCOVERY_DAG_ID",
    "FLEET_FORMAT",
    "DiscoveredTable",
    "DiscoveryConfig",
    "DynamoDBSource",
    "FleetFileError",
    "FleetTables",
    "OverrideRule",
    "Source",
    "UnityCatalogSource",
    "check_fleet",
    "fleet_entries",
    "load_fleet",
    "parse_discovery",
    "read_fleet_file",
    "resolve_discovered",
    "spec_with",
]

FLEET_FORMAT = "delta-maintenance-fleet/1"
DISCOVERY_DAG_ID = "delta_maintenance__discovery"
_FLEET_ERROR_ID = "delta_maintenance__discovered_fleet"


class FleetFileError(ValueError):
    """The fleet file is missing, unreadable, malformed or stale; the message names the file.
    ``missing``: it does not exist yet (no discovery has run)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class DiscoveredTable:
    """One table as discovery found it: what the fleet file holds per table."""

    source: str
    name: str
    uri: str
    coordinator: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "name": self.name, "uri": self.uri, "coordinator": self.coordinator, "properties": dict(self.properties)}


@dataclass(frozen=True)
class FleetTables:
    """Every table to maintain (YAML and discovered), the invalid ones, and the discovery part."""

    tables: list[TableConfig]
    invalid: list[TableConfigError]
    discovery: DiscoveryConfig | None = None
    discovered: list[TableConfig] = field(default_factory=list)  # the subset of ``tables`` from the fleet file
    disabled: list[str] = field(default_factory=list)  # discovered tables left out by enabled: false
    shadowed: list[str] = field(default_factory=list)  # discovered tables replaced by a YAML table
    fleet_error: TableConfigError | None = None  # the fleet file could not be used
    fleet_missing: bool = False  # ... because no discovery has written it yet


def parse_discovery(data: Any, path: str = "<config>") -> DiscoveryConfig | None:
    """The ``discovery:`` section of a parsed YAML document (None without one); a ``ConfigError``
    listing every mistake of it, each naming ``discovery.<key>`` (the whole section is one unit)."""
    discovery, problems = check_discovery(data, path)
    if problems:
        raise ConfigError.several(problems)
    return discovery


# ---- the fleet file -----------------------------------------------------------------------------


def read_fleet_file(discovery: DiscoveryConfig) -> list[DiscoveredTable]:
    """The tables of the fleet file; ``FleetFileError`` naming the file when it is missing,
    malformed, or was written for other sources (the sources changed since the last discovery)."""
    path = discovery.fleet_file
    hint = f"run the {DISCOVERY_DAG_ID} DAG or `delta-maintenance discover --config {discovery.path}`"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FleetFileError(f"{path}: the fleet file does not exist yet: {hint}", missing=True) from None
    except OSError as exc:
        raise FleetFileError(f"{path}: the fleet file cannot be read: {type(exc).__name__}: {exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FleetFileError(f"{path}: the fleet file is not JSON ({exc}): {hint}") from None
    if not isinstance(doc, dict) or doc.get("format") != FLEET_FORMAT:
        raise FleetFileError(f"{path}: not a fleet file (format {doc.get('format') if isinstance(doc, dict) else None!r}, expected {FLEET_FORMAT!r})")
    if doc.get("sources_digest") != discovery.digest():
        raise FleetFileError(f"{path}: the fleet file was written for other discovery sources than {discovery.path} now lists: {hint}")
    tables = doc.get("tables")
    if not isinstance(tables, list):
        raise FleetFileError(f"{path}: tables: expected a list")
    out = []
    for i, t in enumerate(tables):
        ok = isinstance(t, dict) and all(isinstance(t.get(k), str) and t.get(k) for k in ("source", "name", "uri", "coordinator"))
        props = t.get("properties", {}) if isinstance(t, dict) else None
        if not ok or not isinstance(props, dict) or discovery.source(str(t["source"])) is None:
            raise FleetFileError(f"{path}: tables[{i}]: expected source (one of the configured), name, uri, coordinator and a properties mapping")
        out.append(DiscoveredTable(t["source"], t["name"], t["uri"], t["coordinator"], {str(k): str(v) for k, v in props.items()}))
    return out


# ---- resolution ----------------------------------------------------------------------------------


def _identity_key(uri: str) -> str:
    try:
        return normalize_table_uri(uri)
    except Exception:  # noqa: BLE001 - an invalid explicit URI cannot shadow anything
        return uri


def resolve_discovered(
    discovery: DiscoveryConfig,
    found: Sequence[DiscoveredTable],
    defaults: Mapping[str, Any],
    explicit_names: set[str],
    explicit_uris: set[str],
) -> tuple[list[TableConfig], list[TableConfigError], list[str], list[str]]:
    """(tables, invalid, disabled names, shadowed names) for the discovered tables, applying the
    precedence of the module docstring. ``explicit_*``: the YAML tables' names and normalised URIs."""
    base = {k: v for k, v in defaults.items() if k not in ("coordinator", "coordinator_conn_id")}
    tables: list[TableConfig] = []
    invalid: list[TableConfigError] = []
    disabled: list[str] = []
    shadowed: list[str] = []
    seen: set[str] = set()
    for index, table in enumerate(found):
        if f"delta_maintenance__{table.name}" == DISCOVERY_DAG_ID:
            invalid.append(TableConfigError(table.name, f"delta_maintenance__invalid_discovered_{index}", ConfigError(
                discovery.path, table.name, "name", f"the name {table.name!r} is reserved for the discovery DAG (give the source a name_prefix)")))
            continue
        if table.name in explicit_names or _identity_key(table.uri) in explicit_uris:
            shadowed.append(table.name)
            continue
        source = discovery.source(table.source)
        settings = merge(base, source.settings if source else {})
        for rule in discovery.overrides:
            if rule.matches(table):
                settings = merge(settings, rule.settings)
        if settings.pop("enabled", True) is False:
            disabled.append(table.name)
            continue
        identity: dict[str, Any] = {"name": table.name, "uri": table.uri, "coordinator": table.coordinator}
        if source is not None and source.conn_id:
            identity["coordinator_conn_id"] = source.conn_id
        duplicate = table.name in seen
        try:
            if duplicate:
                raise ConfigError(discovery.path, table.name, "name", f"duplicate table name (source {table.source}; give the source a name_prefix)")
            config = parse_discovered_table(discovery.path, identity, settings)
        except ConfigError as exc:
            dag_id = f"delta_maintenance__invalid_discovered_{index}" if duplicate else f"delta_maintenance__{table.name}"
            invalid.append(TableConfigError(table.name, dag_id, exc))
            seen.add(table.name)
            continue
        seen.add(table.name)
        tables.append(config)
    return tables, invalid, disabled, shadowed


def fleet_entries(config_path: str | Path) -> tuple[list[TableConfig], list[TableConfigError]]:
    """Every table of the fleet (YAML and discovered) and the entries that cannot be used, the
    fleet file's own error among them: what the health view reports on."""
    fleet = load_fleet(config_path)
    return fleet.tables, fleet.invalid + ([fleet.fleet_error] if fleet.fleet_error else [])


def load_fleet(config_path: str | Path) -> FleetTables:
    """The YAML tables and, when the file has a ``discovery:`` section, the discovered tables of
    its fleet file. No network I/O: this is what DAG parsing calls. Mistakes of the file itself
    (of its top level, ``defaults`` or ``discovery`` section) raise one ``ConfigError`` listing
    all of them; a fleet file that cannot be used is ``fleet_error`` (the YAML tables still load)."""
    fleet, problems = check_fleet(config_path)
    if problems:
        raise ConfigError.several(problems)
    return fleet


def check_fleet(config_path: str | Path) -> tuple[FleetTables, list[ConfigError]]:
    """``load_fleet`` for ``validate-config``: every mistake, the file's own (second) beside the
    tables' (in the first). The tables are checked even when the file has mistakes, so that one
    run lists everything to fix; a ``discovery`` section with mistakes brings no discovered table.
    A file that is not YAML, or not a mapping, raises."""
    path = str(config_path)
    data = read_yaml(config_path)
    checked = check_config(data, path)
    good, bad = checked.tables, checked.invalid
    discovery, discovery_problems = check_discovery(data, path)
    problems = checked.problems + discovery_problems
    if discovery is None:
        return FleetTables(good, bad), problems
    # the discovery DAG's id is reserved: a YAML table (valid or not) must not replace that DAG
    reserved = f"{DISCOVERY_DAG_ID.removeprefix('delta_maintenance__')}"
    taken = ConfigError(path, reserved, "name", f"the name {reserved!r} is reserved for the discovery DAG")
    bad = [TableConfigError(e.name, "delta_maintenance__invalid_discovery_name", taken) if e.dag_id == DISCOVERY_DAG_ID else e for e in bad]
    if any(t.dag_id == DISCOVERY_DAG_ID for t in good):
        bad.append(TableConfigError(reserved, "delta_maintenance__invalid_discovery_name", taken))
        good = [t for t in good if t.dag_id != DISCOVERY_DAG_ID]
    try:
        found = read_fleet_file(discovery)
    except FleetFileError as exc:
        error = TableConfigError("discovered fleet", _FLEET_ERROR_ID, ConfigError(path, None, "discovery.fleet_file", str(exc)))
        return FleetTables(good, bad, discovery, fleet_error=error, fleet_missing=exc.missing), problems
    names = {t.name for t in good} | {e.name for e in bad}
    uris = {_identity_key(t.uri) for t in good}
    tables, invalid, disabled, shadowed = resolve_discovered(discovery, found, checked.defaults, names, uris)
    return FleetTables(good + tables, bad + invalid, discovery, tables, disabled, shadowed), problems


def spec_with(spec: str, **params: str) -> str:
    """``spec`` with query parameters appended, its own query kept as written (a parameter already
    present is replaced)."""
    parts = urlsplit(spec)
    kept = [p for p in parts.query.split("&") if p and p.split("=", 1)[0] not in params]
    return parts._replace(query="&".join([*kept, urlencode(params)])).geturl()
