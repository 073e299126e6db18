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

import fnmatch
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from ..coordinators.errors import InvalidCoordinatorSpecError
from ..coordinators.registry import parse_coordinator_spec
from ..deltalog.storage import normalize_table_uri
from ..maintenance.config.tables import (
    ConfigError,
    TableConfig,
    TableConfigError,
    parse_config_entries,
    parse_discovered_table,
    parse_schedule,
    read_yaml,
)

__all__ = [
    "DISCOVERY_DAG_ID",
    "FLEET_FORMAT",
    "DiscoveredTable",
    "DiscoveryConfig",
    "DynamoDBSource",
    "FleetFileError",
    "FleetTables",
    "OverrideRule",
    "UnityCatalogSource",
    "load_fleet",
    "parse_discovery",
    "read_fleet_file",
    "resolve_discovered",
    "spec_with",
]

FLEET_FORMAT = "delta-maintenance-fleet/1"
DISCOVERY_DAG_ID = "delta_maintenance__discovery"
_FLEET_ERROR_ID = "delta_maintenance__discovered_fleet"
# settings an override or a source may set: every table key except the discovered identity
_IDENTITY = {"name", "uri", "coordinator", "coordinator_conn_id"}
_SETTINGS = {
    "schedule", "storage_conn_id", "publish", "sensor", "checkpoint", "compaction", "cleanup",
    "pool", "tags", "owner", "retries", "retry_delay_minutes", "enabled",
}
_MATCH_KEYS = {"name", "uri", "source", "properties"}


class FleetFileError(ValueError):
    """The fleet file is missing, unreadable, malformed or stale; the message names the file.
    ``missing``: it does not exist yet (no discovery has run)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class UnityCatalogSource:
    name: str
    host: str
    api: str  # v1 | preview
    tls: bool
    catalog: str
    schemas: tuple[str, ...] | None  # None: every schema of the catalog
    conn_id: str | None = None
    name_prefix: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)

    kind = "unity-catalog"

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "host": self.host, "api": self.api, "tls": self.tls, "catalog": self.catalog,
                "schemas": list(self.schemas) if self.schemas is not None else None, "conn_id": self.conn_id, "name_prefix": self.name_prefix}


@dataclass(frozen=True)
class DynamoDBSource:
    name: str
    spec: str  # dynamodb://<commits table>?region=...[&endpoint=...]
    conn_id: str | None = None
    name_prefix: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)

    kind = "dynamodb"

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "spec": self.spec, "conn_id": self.conn_id, "name_prefix": self.name_prefix}


Source = UnityCatalogSource | DynamoDBSource


@dataclass(frozen=True)
class OverrideRule:
    index: int
    names: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    properties: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, table: DiscoveredTable) -> bool:
        def any_glob(value: str, globs: tuple[str, ...]) -> bool:
            return not globs or any(fnmatch.fnmatchcase(value, g) for g in globs)

        if not (any_glob(table.name, self.names) and any_glob(table.uri, self.uris) and any_glob(table.source, self.sources)):
            return False
        return all(key in table.properties and any_glob(table.properties[key], globs) for key, globs in self.properties.items())


@dataclass(frozen=True)
class DiscoveryConfig:
    path: str  # the YAML file (for messages)
    fleet_file: Path
    schedule: str | None
    sources: tuple[Source, ...]
    overrides: tuple[OverrideRule, ...]

    def source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)

    def digest(self) -> str:
        """Identifies the sources a fleet file was written for (settings and overrides excluded:
        they are applied at parse time, so editing them needs no new discovery run)."""
        canonical = json.dumps([s.fingerprint() for s in self.sources], sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


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


# ---- parsing the discovery section -----------------------------------------------------------------


def _err(path: str, key: str, message: str) -> ConfigError:
    return ConfigError(path, None, key, message)


def _str(path: str, key: str, value: Any, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _err(path, key, f"expected a non-empty string, got {value!r}")
    return value.strip()


def _globs(path: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _err(path, key, f"expected a glob or a non-empty list of globs, got {value!r}")


def _settings(path: str, key: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise _err(path, key, f"expected a mapping, got {raw!r}")
    for k in raw:
        if k in _IDENTITY:
            raise _err(path, f"{key}.{k}", "the name, URI and coordinator of a discovered table come from discovery (list the table under tables: to set them)")
        if k not in _SETTINGS:
            raise _err(path, f"{key}.{k}", f"unknown key (allowed: {', '.join(sorted(_SETTINGS))})")
    if "enabled" in raw and not isinstance(raw["enabled"], bool):
        raise _err(path, f"{key}.enabled", f"expected true or false, got {raw['enabled']!r}")
    return dict(raw)


def _source(path: str, i: int, raw: Any) -> Source:
    key = f"discovery.sources[{i}]"
    if not isinstance(raw, Mapping):
        raise _err(path, key, f"expected a mapping, got {raw!r}")
    kinds = [k for k in ("unity_catalog", "dynamodb") if k in raw]
    if len(kinds) != 1:
        raise _err(path, key, "give exactly one of unity_catalog: <endpoint spec> or dynamodb: <spec>")
    name = _str(path, f"{key}.name", raw.get("name")) or ""
    conn_id = _str(path, f"{key}.conn_id", raw.get("conn_id"), required=False)
    prefix = raw.get("name_prefix", "")
    if not isinstance(prefix, str):
        raise _err(path, f"{key}.name_prefix", f"expected a string, got {prefix!r}")
    settings = _settings(path, f"{key}.settings", raw.get("settings") or {})
    allowed = {"name", "conn_id", "name_prefix", "settings", kinds[0], *(("catalog", "schemas") if kinds[0] == "unity_catalog" else ())}
    for k in raw:
        if k not in allowed:
            raise _err(path, f"{key}.{k}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    spec = _str(path, f"{key}.{kinds[0]}", raw[kinds[0]]) or ""
    try:
        parsed = parse_coordinator_spec(spec)
    except InvalidCoordinatorSpecError as exc:
        raise _err(path, f"{key}.{kinds[0]}", str(exc)) from None
    if kinds[0] == "dynamodb":
        if parsed.kind != "dynamodb":
            raise _err(path, f"{key}.dynamodb", "expected dynamodb://<commits table>?region=...")
        if "table_id" in parsed.params:
            raise _err(path, f"{key}.dynamodb", "a source lists every table of the commits table: no table_id")
        return DynamoDBSource(name, spec, conn_id, prefix, settings)
    if parsed.kind != "unity-catalog" or parsed.name or "table_id" in parsed.params:
        raise _err(path, f"{key}.unity_catalog", "expected the endpoint only: unity-catalog://host:port[?api=v1|preview][&tls=true|false]")
    catalog = _str(path, f"{key}.catalog", raw.get("catalog")) or ""
    schemas_raw = raw.get("schemas")
    schemas: tuple[str, ...] | None = None
    if schemas_raw is not None:
        if isinstance(schemas_raw, str):
            schemas_raw = [schemas_raw]
        if not isinstance(schemas_raw, list) or not schemas_raw or not all(isinstance(s, str) and s for s in schemas_raw):
            raise _err(path, f"{key}.schemas", f"expected a schema name or a non-empty list of them, got {raw.get('schemas')!r}")
        schemas = tuple(schemas_raw)
    return UnityCatalogSource(name, parsed.target, parsed.params.get("api", "v1"), parsed.params.get("tls", "true") == "true",
                              catalog, schemas, conn_id, prefix, settings)


def _override(path: str, i: int, raw: Any) -> OverrideRule:
    key = f"discovery.overrides[{i}]"
    if not isinstance(raw, Mapping):
        raise _err(path, key, f"expected a mapping, got {raw!r}")
    match = raw.get("match")
    if not isinstance(match, Mapping) or not match:
        raise _err(path, f"{key}.match", "expected a non-empty mapping of name, uri, source and/or properties globs")
    for k in match:
        if k not in _MATCH_KEYS:
            raise _err(path, f"{key}.match.{k}", f"unknown key (allowed: {', '.join(sorted(_MATCH_KEYS))})")
    props: dict[str, tuple[str, ...]] = {}
    if "properties" in match:
        if not isinstance(match["properties"], Mapping) or not match["properties"]:
            raise _err(path, f"{key}.match.properties", "expected a mapping of property name to glob")
        props = {str(p): _globs(path, f"{key}.match.properties.{p}", g) for p, g in match["properties"].items()}
    settings = _settings(path, key, {k: v for k, v in raw.items() if k != "match"})
    if not settings:
        raise _err(path, key, "an override needs at least one setting besides match")
    return OverrideRule(
        index=i,
        names=_globs(path, f"{key}.match.name", match["name"]) if "name" in match else (),
        uris=_globs(path, f"{key}.match.uri", match["uri"]) if "uri" in match else (),
        sources=_globs(path, f"{key}.match.source", match["source"]) if "source" in match else (),
        properties=props,
        settings=settings,
    )


def parse_discovery(data: Any, path: str = "<config>") -> DiscoveryConfig | None:
    """The ``discovery:`` section of a parsed YAML document (None without one); ``ConfigError``
    naming ``discovery.<key>`` for any mistake (the whole section is one unit)."""
    if not isinstance(data, Mapping) or data.get("discovery") is None:
        return None
    raw = data["discovery"]
    if not isinstance(raw, Mapping):
        raise _err(path, "discovery", f"expected a mapping, got {raw!r}")
    for k in raw:
        if k not in ("fleet_file", "schedule", "sources", "overrides"):
            raise _err(path, f"discovery.{k}", "unknown key (allowed: fleet_file, overrides, schedule, sources)")
    sources_raw = raw.get("sources")
    if not isinstance(sources_raw, list) or not sources_raw:
        raise _err(path, "discovery.sources", "expected a non-empty list of sources")
    sources = tuple(_source(path, i, s) for i, s in enumerate(sources_raw))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise _err(path, "discovery.sources", f"source names must be unique, got {names}")
    overrides_raw = raw.get("overrides") or []
    if not isinstance(overrides_raw, list):
        raise _err(path, "discovery.overrides", f"expected a list, got {overrides_raw!r}")
    schedule = raw.get("schedule", "@hourly")
    if schedule is not None:
        schedule = _str(path, "discovery.schedule", schedule)
        try:
            parse_schedule(str(schedule))
        except ValueError as exc:
            raise _err(path, "discovery.schedule", str(exc)) from None
    base = Path(path).parent if path != "<config>" else Path.cwd()
    fleet_raw = raw.get("fleet_file")
    if fleet_raw is None:
        fleet = base / f"{Path(path).stem}.fleet.json"
    else:
        fleet = Path(_str(path, "discovery.fleet_file", fleet_raw) or "").expanduser()
        fleet = fleet if fleet.is_absolute() else base / fleet
    return DiscoveryConfig(path, fleet.resolve(), schedule, sources, tuple(_override(path, i, o) for i, o in enumerate(overrides_raw)))


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


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


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
        settings = _merge(base, source.settings if source else {})
        for rule in discovery.overrides:
            if rule.matches(table):
                settings = _merge(settings, rule.settings)
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
    its fleet file. No network I/O: this is what DAG parsing calls. File-level mistakes of the
    YAML (and of its discovery section) raise ``ConfigError``; a fleet file that cannot be used is
    ``fleet_error`` (the YAML tables still load)."""
    path = str(config_path)
    data = read_yaml(config_path)
    good, bad = parse_config_entries(data, path)
    discovery = parse_discovery(data, path)
    if discovery is None:
        return FleetTables(good, bad)
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
        return FleetTables(good, bad, discovery, fleet_error=error, fleet_missing=exc.missing)
    defaults = data.get("defaults") or {}
    names = {t.name for t in good} | {e.name for e in bad}
    uris = {_identity_key(t.uri) for t in good}
    tables, invalid, disabled, shadowed = resolve_discovered(discovery, found, defaults, names, uris)
    return FleetTables(good + tables, bad + invalid, discovery, tables, disabled, shadowed)


def spec_with(spec: str, **params: str) -> str:
    """``spec`` with query parameters appended, its own query kept as written (a parameter already
    present is replaced)."""
    parts = urlsplit(spec)
    kept = [p for p in parts.query.split("&") if p and p.split("=", 1)[0] not in params]
    return parts._replace(query="&".join([*kept, urlencode(params)])).geturl()
