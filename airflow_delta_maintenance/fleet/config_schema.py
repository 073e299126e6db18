"""The whole configuration file as one model (``ConfigFile``): its JSON schema, for editors and
for ``delta-maintenance config-schema``, and the docs' ``tables.yaml`` reference, generated from
the models at docs build time (``docs/conf.py``) so that the reference lists exactly the keys the
validator accepts, with their types, defaults and meanings.

The file is validated part by part (``maintenance.config.tables.check_config`` and
``fleet.discovery_section.check_discovery``), so that every mistake is listed; ``ConfigFile`` only
assembles the parts' models for the schema.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..maintenance.config.base import ConfigModel
from ..maintenance.config.models import TableConfig, TableDefaults, settings_fields
from .discovery_section import _KIND_KEYS, DiscoverySection, DynamoDBSourceEntry, MatchEntry, OverrideEntry, UnityCatalogSourceEntry

__all__ = ["ConfigFile", "json_schema", "markdown_reference"]

class ConfigFile(ConfigModel):
    """A ``tables.yaml``: the tables to maintain, their defaults, and tables from catalogs."""

    defaults: TableDefaults | None = Field(
        default=None, description="any table key except `name` and `uri`, applied to every table (and to discovered tables, below their source's and overrides' settings)"
    )
    tables: list[TableConfig] | None = Field(default=None, description="the tables, each a mapping of the keys below; required unless `discovery` is given")
    discovery: DiscoverySection | None = Field(default=None, description="tables from catalogs: see [Discovery](#discovery)")


def json_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a ``tables.yaml``: what editors check while typing (the
    rules between keys, such as a coordinator for ``publish``, are the validator's alone)."""
    schema = ConfigFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "tables.yaml of airflow-delta-maintenance"}


# ---- the Markdown reference ------------------------------------------------------------------------

_SCHEMA: dict[str, Any] = {}


def _defs() -> dict[str, Any]:
    if not _SCHEMA:
        _SCHEMA.update(ConfigFile.model_json_schema())
    defs: dict[str, Any] = _SCHEMA.get("$defs", {})
    return defs


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return _defs()[ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else schema


def _noun(schema: dict[str, Any]) -> str:
    """A type as the reference says it: ``integer ≥ 1 or null``, ``mapping or `false```."""
    schema = _resolve(schema)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        kinds = [_resolve(o) for o in options]
        if any(k.get("type") == "object" for k in kinds) and any(k.get("type") == "boolean" for k in kinds):
            return "mapping or `false`"  # a section
        nouns = list(dict.fromkeys(_noun(o) for o in options))
        return " or ".join(nouns)
    if "enum" in schema:
        values = [f"`{v}`" for v in schema["enum"]]
        return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        bound = next(((sign, schema[k]) for k, sign in (("minimum", "≥"), ("exclusiveMinimum", ">")) if k in schema), None)
        return kind + (f" {bound[0]} {bound[1]:g}" if bound else "")
    if kind == "array":
        items = _resolve(schema.get("items", {}))
        if items.get("type") == "string":
            return "list of strings"
        return "list of " + _plural(items)
    if kind == "object":
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(kind)
    return str(kind or "any")


def _plural(schema: dict[str, Any]) -> str:
    title = str(schema.get("title", "")).removesuffix("Entry").removesuffix("Config")
    if "oneOf" in schema or "anyOf" in schema:
        title = "Source"
    return {"Table": "tables", "Source": "sources", "Override": "overrides"}.get(title, "mappings")


def _default(info: FieldInfo, section_anchor: str | None = None) -> str:
    if section_anchor:
        return f"see [{section_anchor}](#{section_anchor})"
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)}`"


def _row(key: str, noun: str, default: str, meaning: str) -> str:
    cells = [f"`{key}`", noun, default, meaning]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _table(model: type[BaseModel], prefix: str = "", only: list[str] | None = None, defaults: dict[str, str] | None = None) -> list[str]:
    properties = model.model_json_schema(ref_template="#/$defs/{model}").get("properties", {})
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if only is not None and name not in only:
            continue
        section = name if _is_section(info) else None
        default = (defaults or {}).get(name) or _default(info, section)
        lines.append(_row(prefix + name, _noun(properties.get(name, {})), default, info.description or ""))
    return lines


def _is_section(info: FieldInfo) -> bool:
    annotation = info.annotation
    return isinstance(annotation, type) and issubclass(annotation, ConfigModel) and "enabled" in annotation.model_fields


def markdown_reference() -> str:
    """The reference of every key a ``tables.yaml`` accepts (MyST Markdown, headings from ``##``)."""
    out = ["## Top level", "", *_table(ConfigFile, defaults={"defaults": "`{}`", "tables": "`[]`", "discovery": "none"}), ""]
    out += ["## Table", "", *_table(TableConfig), "", "A section given as `true` or null takes its defaults; `false` disables it.", ""]
    for name, info in TableConfig.model_fields.items():
        if _is_section(info):
            section = info.annotation
            assert isinstance(section, type) and issubclass(section, BaseModel)
            out += [f"### {name}", "", *_table(section, prefix=f"{name}."), ""]
    out += ["## Discovery", "", *_table(DiscoverySection, prefix="discovery.", defaults={"fleet_file": "`<yaml name>.fleet.json`"}), ""]
    out += ["### source", "", *_source_table(), ""]
    settings = ", ".join(f"`{key}`" for key in settings_fields())
    out += [
        "### override",
        "",
        *_table(MatchEntry, prefix="match."),
        *_table(OverrideEntry, only=["enabled"])[2:],
        f"| any of {settings} | as for a table | | applied to the matching tables |",
        "",
    ]
    return "\n".join(out)


def _source_table() -> list[str]:
    """The keys of both kinds of source in one table: the kind's own keys say which kind takes them."""
    kinds: dict[type[BaseModel], str] = {UnityCatalogSourceEntry: "unity_catalog", DynamoDBSourceEntry: "dynamodb"}
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    seen: set[str] = set()
    for model, kind in kinds.items():
        properties = model.model_json_schema().get("properties", {})
        for name, info in model.model_fields.items():
            if name in seen:
                continue
            seen.add(name)
            if name in _KIND_KEYS:
                default = "one of " + " and ".join(f"`{k}`" for k in _KIND_KEYS)
            elif all(name in other.model_fields for other in kinds):
                default = _default(info)
            else:
                default = _default(info) + f" (`{kind}` sources)"
            lines.append(_row(name, _noun(properties.get(name, {})), default, info.description or ""))
    return lines
