"""The ``discovery:`` section of the YAML configuration: its models (the keys, their types, the
JSON schema and the docs' reference) and its check, which turns the section into the
``DiscoveryConfig`` discovery and DAG parsing use, or lists every mistake of it.

What the keys do together: ``fleet.config``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, ValidationError, WithJsonSchema, create_model, model_validator
from pydantic_core import ErrorDetails

from ..coordinators.errors import InvalidCoordinatorSpecError
from ..coordinators.registry import CoordinatorSpec, parse_coordinator_spec
from ..maintenance.config.base import ConfigModel
from ..maintenance.config.errors import ConfigError
from ..maintenance.config.messages import key_path, mistakes
from ..maintenance.config.models import ENABLED, IDENTITY_KEYS, TableSettings, settings_fields
from ..maintenance.config.schedule import parse_schedule

__all__ = [
    "DiscoveryConfig",
    "DiscoverySection",
    "DynamoDBSource",
    "DynamoDBSourceEntry",
    "MatchEntry",
    "OverrideEntry",
    "OverrideRule",
    "Source",
    "UnityCatalogSource",
    "UnityCatalogSourceEntry",
    "check_discovery",
]


# ---- the section as the file writes it (models) ------------------------------------------------------


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


Text = Annotated[str, AfterValidator(_text)]


def _one_or_more(expected: str, *, empty_strings: bool) -> Callable[[Any], Any]:
    """A check of a string or a non-empty list of strings (kept as a tuple), as YAML lets one
    write either."""

    def check(value: Any) -> Any:
        values = [value] if isinstance(value, str) else value
        if isinstance(values, list | tuple) and values and all(isinstance(v, str) and (v or empty_strings) for v in values):
            return tuple(values)
        raise ValueError(f"expected {expected}, got {value!r}")

    return check


_ONE_OR_MORE = WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]})
Globs = Annotated[tuple[str, ...], BeforeValidator(_one_or_more("a glob or a non-empty list of globs", empty_strings=True)), _ONE_OR_MORE]
Schemas = Annotated[tuple[str, ...], BeforeValidator(_one_or_more("a schema name or a non-empty list of them", empty_strings=False)), _ONE_OR_MORE]


def _spec(value: str) -> CoordinatorSpec:
    try:
        return parse_coordinator_spec(value)
    except InvalidCoordinatorSpecError as exc:
        raise ValueError(str(exc)) from None


def _uc_endpoint(value: str) -> str:
    parsed = _spec(_text(value))
    if parsed.kind != "unity-catalog" or parsed.name or "table_id" in parsed.params:
        raise ValueError("expected the endpoint only: unity-catalog://host:port[?api=v1|preview][&tls=true|false]")
    return value.strip()


def _dynamodb_spec(value: str) -> str:
    parsed = _spec(_text(value))
    if parsed.kind != "dynamodb":
        raise ValueError("expected dynamodb://<commits table>?region=...")
    if "table_id" in parsed.params:
        raise ValueError("a source lists every table of the commits table: no table_id")
    return value.strip()


def _schedule(value: str | None) -> str | None:
    if value is not None:
        parse_schedule(_text(value))
    return value.strip() if value is not None else None


class _SourceEntry(ConfigModel):
    tag: ClassVar[str]
    name: Text = Field(description="the source's name, unique")
    conn_id: Text | None = Field(default=None, description="a `delta_coordinator` connection for the source's credentials (UC: the token; DynamoDB: AWS keys)")
    name_prefix: str = Field(default="", description="prefix of the discovered tables' names")
    settings: TableSettings | None = Field(default=None, description="table settings for the source's tables (the keys an override may set)")


class UnityCatalogSourceEntry(_SourceEntry):
    """Every managed Delta table of a Unity Catalog catalog, or of some of its schemas."""

    tag: ClassVar[str] = "unity-catalog-source"
    unity_catalog: Annotated[str, AfterValidator(_uc_endpoint)] = Field(
        description="a UC endpoint spec without a table: `unity-catalog://host:port[?api=v1|preview][&tls=…]`"
    )
    catalog: Text = Field(description="the UC catalog")
    schemas: Schemas | None = Field(default=None, description="UC schemas to list; null: every schema of the catalog")


class DynamoDBSourceEntry(_SourceEntry):
    """Every table of a DynamoDB commits table."""

    tag: ClassVar[str] = "dynamodb-source"
    dynamodb: Annotated[str, AfterValidator(_dynamodb_spec)] = Field(
        description="a DynamoDB commits table spec without `table_id`: `dynamodb://<table>?region=…`"
    )


_KIND_KEYS = {"unity_catalog": UnityCatalogSourceEntry.tag, "dynamodb": DynamoDBSourceEntry.tag}
_ONE_KIND = "give exactly one of unity_catalog: <endpoint spec> or dynamodb: <spec>"


def _source_kind(value: Any) -> str | None:
    if isinstance(value, _SourceEntry):
        return value.tag
    if not isinstance(value, Mapping):
        return UnityCatalogSourceEntry.tag  # validated as a mapping: "expected a mapping, got ..."
    kinds = [tag for key, tag in _KIND_KEYS.items() if key in value]
    return kinds[0] if len(kinds) == 1 else None


SourceEntry = Annotated[
    Annotated[UnityCatalogSourceEntry, Tag(UnityCatalogSourceEntry.tag)] | Annotated[DynamoDBSourceEntry, Tag(DynamoDBSourceEntry.tag)],
    Discriminator(_source_kind, custom_error_type="source_kind", custom_error_message=_ONE_KIND),
]


class MatchEntry(ConfigModel):
    """Which discovered tables an override applies to: every key given must match; a list of
    globs matches if any does (``fnmatch``, case-sensitive)."""

    name: Globs | None = Field(default=None, description="the discovered name (`catalog.schema.table` for UC); null: any")
    uri: Globs | None = Field(default=None, description="the normalised URI; null: any")
    source: Globs | None = Field(default=None, description="the source's name; null: any")
    properties: Annotated[dict[str, Globs], Field(min_length=1)] | None = Field(default=None, description="UC table properties: a mapping of property to glob(s); null: any")

    @model_validator(mode="after")
    def _not_empty(self) -> MatchEntry:
        if self.name is None and self.uri is None and self.source is None and self.properties is None:
            raise ValueError(_MATCH_NEEDED)
        return self


_MATCH_NEEDED = "expected a non-empty mapping of name, uri, source and/or properties globs"

if TYPE_CHECKING:

    class OverrideEntry(ConfigModel):
        match: MatchEntry

else:
    OverrideEntry = create_model(
        "OverrideEntry",
        __base__=ConfigModel,
        __doc__="Settings for the discovered tables it matches, in file order (a later match wins).",
        match=(MatchEntry, Field(description="which discovered tables")),
        enabled=ENABLED,
        **settings_fields(),
    )
    OverrideEntry.missing_messages = {"match": _MATCH_NEEDED}


class DiscoverySection(ConfigModel):
    """Tables from catalogs: ``discovery:``."""

    missing_messages: ClassVar[dict[str, str]] = {"sources": "expected a non-empty list of sources"}

    fleet_file: Text | None = Field(default=None, description="the fleet file discovery writes, relative to the YAML")
    schedule: Annotated[str | None, AfterValidator(_schedule)] = Field(default="@hourly", description="the schedule of the DAG `delta_maintenance__discovery`")
    sources: Annotated[list[SourceEntry], Field(min_length=1)] = Field(description="where tables come from")
    overrides: list[OverrideEntry] | None = Field(default=None, description="settings for matching discovered tables, in file order (later wins)")


# ---- the section resolved (what discovery and DAG parsing use) ----------------------------------------


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

    def matches(self, table: Any) -> bool:
        """Whether the discovered table (``fleet.config.DiscoveredTable``) is one of this rule's."""
        import fnmatch

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


# ---- the check ---------------------------------------------------------------------------------------


def _identity_problems(path: str, key: str, settings: Any) -> tuple[Any, list[ConfigError]]:
    """``settings`` without the discovered identity's keys, and a problem for each one given."""
    if not isinstance(settings, Mapping):
        return settings, []
    given = [k for k in IDENTITY_KEYS if k in settings]
    message = "the name, URI and coordinator of a discovered table come from discovery (list the table under tables: to set them)"
    return {k: v for k, v in settings.items() if k not in given}, [ConfigError(path, None, f"{key}.{k}", message) for k in given]


def _prepared(raw: Mapping[str, Any], path: str) -> tuple[dict[str, Any], list[ConfigError]]:
    """The section with the mistakes pydantic would word worse taken out and reported here: the
    identity keys in settings and overrides, an override with nothing but ``match``."""
    section: dict[str, Any] = dict(raw)
    problems: list[ConfigError] = []
    if isinstance(section.get("sources"), list):
        sources = []
        for i, source in enumerate(section["sources"]):
            if isinstance(source, Mapping) and "settings" in source:
                settings, found = _identity_problems(path, f"discovery.sources[{i}].settings", source["settings"])
                source, problems = {**source, "settings": settings}, problems + found
            sources.append(source)
        section["sources"] = sources
    if isinstance(section.get("overrides"), list):
        overrides = []
        for i, override in enumerate(section["overrides"]):
            if isinstance(override, Mapping):
                if not set(override) - {"match"}:
                    problems.append(ConfigError(path, None, f"discovery.overrides[{i}]", "an override needs at least one setting besides match"))
                override, found = _identity_problems(path, f"discovery.overrides[{i}]", override)
                problems += found
            overrides.append(override)
        section["overrides"] = overrides
    return section, problems


def _of_the_section(error: ErrorDetails) -> bool:
    """Whether a mistake voids the section. A wrong value of a table setting (an override's
    ``retries: -1``) does not: it is a mistake of each table it applies to, reported with them
    (the other discovered tables load); an unknown key or a wrong ``enabled`` does."""
    loc = error["loc"]
    if loc[:1] == ("sources",) and len(loc) > 4 and loc[3] == "settings":
        key = loc[4]
    elif loc[:1] == ("overrides",) and len(loc) > 2 and loc[2] != "match":
        key = loc[2]
    else:
        return True
    return error["type"] == "extra_forbidden" or key == "enabled"


def check_discovery(data: Any, path: str = "<config>") -> tuple[DiscoveryConfig | None, list[ConfigError]]:
    """The ``discovery:`` section of a parsed YAML document (None without one), or every mistake
    of it, each naming ``discovery.<key path>`` (the section is one unit: any mistake voids it)."""
    if not isinstance(data, Mapping) or data.get("discovery") is None:
        return None, []
    raw = data["discovery"]
    if not isinstance(raw, Mapping):
        return None, [ConfigError(path, None, "discovery", f"expected a mapping, got {raw!r}")]
    prepared, problems = _prepared(raw, path)
    section: DiscoverySection | None = None
    try:
        section = DiscoverySection.model_validate(prepared)
    except ValidationError as exc:
        found = mistakes(exc, DiscoverySection, keep=_of_the_section)
        problems += [ConfigError(path, None, key_path(["discovery", *parts]), message) for parts, message in found]
        if not problems:  # only the tables' mistakes: the section itself stands without those values
            section = DiscoverySection.model_validate(_without(prepared, [error["loc"] for error in exc.errors()]))
    names = [s.get("name") for s in raw.get("sources") or [] if isinstance(s, Mapping)] if isinstance(raw.get("sources"), list) else []
    if len(set(map(str, names))) != len(names):
        problems.append(ConfigError(path, None, "discovery.sources", f"source names must be unique, got {names}"))
    if problems or section is None:
        return None, problems
    return _resolved(section, prepared, path), []


def _without(section: Mapping[str, Any], locs: list[tuple[str | int, ...]]) -> dict[str, Any]:
    """A copy of ``section`` without the values at ``locs`` (a tagged union's tag skipped)."""
    copy: dict[str, Any] = json.loads(json.dumps(section, default=str))
    for loc in locs:
        node: Any = copy
        for depth, part in enumerate(loc):
            if isinstance(node, Mapping) and isinstance(part, str) and part not in node:
                continue  # the tag
            last = depth == len(loc) - 1
            if isinstance(node, dict) and part in node:
                if last:
                    del node[part]
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
    return copy


def _resolved(section: DiscoverySection, prepared: Mapping[str, Any], path: str) -> DiscoveryConfig:
    sources: list[Source] = []
    for entry, raw in zip(section.sources, prepared["sources"], strict=True):
        settings = dict(raw.get("settings") or {})  # as written: only what is given merges
        if isinstance(entry, DynamoDBSourceEntry):
            sources.append(DynamoDBSource(entry.name, entry.dynamodb, entry.conn_id, entry.name_prefix, settings))
            continue
        assert isinstance(entry, UnityCatalogSourceEntry)
        spec = parse_coordinator_spec(entry.unity_catalog)
        sources.append(UnityCatalogSource(entry.name, spec.target, spec.params.get("api", "v1"), spec.params.get("tls", "true") == "true",
                                          entry.catalog, entry.schemas, entry.conn_id, entry.name_prefix, settings))
    overrides = []
    for index, (rule, raw_rule) in enumerate(zip(section.overrides or [], prepared.get("overrides") or [], strict=True)):
        match = rule.match
        overrides.append(OverrideRule(index, match.name or (), match.uri or (), match.source or (), dict(match.properties or {}),
                                      {k: v for k, v in raw_rule.items() if k != "match"}))
    base = Path(path).parent if path != "<config>" else Path.cwd()
    if section.fleet_file is None:
        fleet = base / f"{Path(path).stem}.fleet.json"
    else:
        fleet = Path(section.fleet_file).expanduser()
        fleet = fleet if fleet.is_absolute() else base / fleet
    return DiscoveryConfig(path, fleet.resolve(), section.schedule, tuple(sources), tuple(overrides))
