"""What a table's own metadata says about its commit coordinator, and the spec that follows.

The per-table coordinator conf (DynamoDB ``tableId``, Unity Catalog table id) always comes from the
table itself — delta-spark's coordinated-commits properties or the catalog-managed table's
``io.unitycatalog.tableId`` — never from a user typing it per table. The coordinator's *endpoint*
comes from the spec or connection; with ``auto`` the kind is discovered from the table too.

A spec that contradicts the table (another coordinator kind, another DynamoDB table or table id,
another Unity Catalog table id, another embedded database) is a ``CoordinatorMismatchError``
naming both sides: acting through the wrong coordinator would publish or clean the wrong history.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from ...coordinators.local import EMBEDDED_COORDINATOR_PROPERTY
from ...coordinators.registry import AUTO, CoordinatorSpec, parse_coordinator_spec, redact_spec
from ...deltalog.model.actions import Protocol
from ...deltalog.model.features import CATALOG_MANAGED_FEATURES
from ..errors import CoordinatorMismatchError

__all__ = [
    "AUTO",
    "COORDINATOR_PROPERTY",
    "COORDINATOR_CONF_PROPERTY",
    "TABLE_CONF_PROPERTY",
    "EMBEDDED_COORDINATOR_PROPERTY",
    "UC_TABLE_ID_PROPERTY",
    "TableCoordination",
    "configure_hint",
    "read_table_coordination",
    "resolve_coordinator_spec",
]

# delta-spark's coordinated-commits properties (Delta 3.x/4.x "-preview" names).
COORDINATOR_PROPERTY = "delta.coordinatedCommits.commitCoordinator-preview"
COORDINATOR_CONF_PROPERTY = "delta.coordinatedCommits.commitCoordinatorConf-preview"
TABLE_CONF_PROPERTY = "delta.coordinatedCommits.tableConf-preview"
UC_TABLE_ID_PROPERTY = "io.unitycatalog.tableId"

_KIND_BY_NAME = {"dynamodb": "dynamodb", "unity-catalog": "unity-catalog", "local": "local"}


@dataclass(frozen=True)
class TableCoordination:
    """The table's own statement of its coordinator. ``kind`` is None for a plain filesystem table."""

    kind: str | None = None  # dynamodb | unity-catalog | local | None
    declared_name: str | None = None  # the raw coordinator name (for messages about unsupported ones)
    table_conf: Mapping[str, str] = field(default_factory=dict)  # handed to every coordinator call
    dynamodb_table: str | None = None
    dynamodb_endpoint: str | None = None
    local_database: str | None = None

    def describe(self) -> str:
        if self.kind is None:
            return "no coordinator (a filesystem table)"
        if self.kind == "dynamodb":
            return f"DynamoDB coordinator table {self.dynamodb_table!r} (tableId {self.table_conf.get('tableId')})"
        if self.kind == "unity-catalog":
            return f"Unity Catalog (table id {self.table_conf.get(UC_TABLE_ID_PROPERTY)})"
        if self.kind == "local":
            return f"the embedded coordinator at {self.local_database}"
        return f"coordinator {self.declared_name!r}"


_SPEC_EXAMPLE = {
    "dynamodb": "dynamodb://<coordinator table>?region=<region> (or set AWS_REGION)",
    "unity-catalog": "unity-catalog://<host>:<port> (the catalog's endpoint; the table id comes from the table)",
    "local": "local:///<path>/coordinator.db",
}


def configure_hint(found: TableCoordination) -> str:
    """How a user gives the coordinator a table declares (one clause for an error message)."""
    where = "--coordinator on the command line, coordinator: in tables.yaml, or a delta_coordinator connection's host"
    example = _SPEC_EXAMPLE.get(found.kind or "")
    configure = f"give it as {example} with {where}" if example else "this provider cannot act through it; maintain the table with its own engine"
    return f"{configure}; status, versions and inspect show the published log alone with --published-only"


def _json_object(configuration: Mapping[str, str], key: str, table_uri: str) -> dict[str, str]:
    raw = configuration.get(key)
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise CoordinatorMismatchError(f"{table_uri}: table property {key} is not a JSON object: {raw[:80]!r}", path=key)
    return {str(k): str(v) for k, v in value.items()}


def read_table_coordination(protocol: Protocol, configuration: Mapping[str, str], table_uri: str) -> TableCoordination:
    """Read the coordinator a table declares (delta-spark properties, catalog-managed features, ours)."""
    conf = dict(configuration)
    catalog_managed = any(protocol.has_reader_feature(f) or protocol.has_writer_feature(f) for f in CATALOG_MANAGED_FEATURES)
    name = conf.get(COORDINATOR_PROPERTY)
    if name:
        table_conf = _json_object(conf, TABLE_CONF_PROPERTY, table_uri)
        coordinator_conf = _json_object(conf, COORDINATOR_CONF_PROPERTY, table_uri)
        kind = _KIND_BY_NAME.get(name)
        return TableCoordination(
            kind=kind if kind is not None else "unsupported",
            declared_name=name,
            table_conf=table_conf,
            dynamodb_table=coordinator_conf.get("dynamoDBTableName"),
            dynamodb_endpoint=coordinator_conf.get("dynamoDBEndpoint"),
        )
    embedded = conf.get(EMBEDDED_COORDINATOR_PROPERTY)
    if embedded:
        spec = parse_coordinator_spec(embedded)
        return TableCoordination(kind="local", declared_name="local", local_database=os.path.abspath(spec.target))
    uc_id = conf.get(UC_TABLE_ID_PROPERTY)
    if uc_id:
        return TableCoordination(kind="unity-catalog", declared_name="unity-catalog", table_conf={UC_TABLE_ID_PROPERTY: uc_id})
    if catalog_managed:
        return TableCoordination(kind="unsupported", declared_name="an unknown catalog (catalogManaged without io.unitycatalog.tableId)")
    return TableCoordination()


def _region(hint: CoordinatorSpec | None, endpoint: str | None) -> str | None:
    if hint is not None and hint.kind == "dynamodb":
        return hint.params.get("region")
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(var):
            return os.environ[var]
    if endpoint and ".amazonaws.com" in endpoint:  # https://dynamodb.<region>.amazonaws.com
        parts = endpoint.split("//", 1)[-1].split(".")
        if len(parts) > 2 and parts[0] == "dynamodb":
            return parts[1]
    return None


def _discovered_spec(table_uri: str, found: TableCoordination, hint_spec: str | None) -> str | None:
    hint = parse_coordinator_spec(hint_spec) if hint_spec and hint_spec != AUTO else None
    if found.kind is None:
        return None
    if found.kind == "unsupported":
        raise CoordinatorMismatchError(f"{table_uri}: the table is coordinated by {found.declared_name}, which this provider does not support")
    if hint is not None and hint.kind != found.kind:
        raise CoordinatorMismatchError(
            f"{table_uri}: the connection points at a {hint.kind} coordinator ({redact_spec(hint_spec or '')}) "
            f"but the table declares {found.describe()}"
        )
    if found.kind == "dynamodb":
        if not found.dynamodb_table:
            raise CoordinatorMismatchError(f"{table_uri}: {COORDINATOR_CONF_PROPERTY} does not name the dynamoDBTableName", path=COORDINATOR_CONF_PROPERTY)
        endpoint = (hint.params.get("endpoint") if hint else None) or found.dynamodb_endpoint
        region = _region(hint, endpoint)
        if not region:
            raise CoordinatorMismatchError(
                f"{table_uri}: the table uses DynamoDB coordinator table {found.dynamodb_table!r} but no AWS region is known "
                "(set AWS_REGION or give dynamodb://<table>?region=... in the coordinator connection)"
            )
        params = {"region": region, **({"endpoint": endpoint} if endpoint else {})}
        return f"dynamodb://{found.dynamodb_table}?{urlencode(params)}"
    if found.kind == "unity-catalog":
        if hint is None:
            raise CoordinatorMismatchError(
                f"{table_uri}: the table is managed by Unity Catalog (table id {found.table_conf.get(UC_TABLE_ID_PROPERTY)}); "
                "give the catalog's endpoint in a coordinator connection (unity-catalog://host:port)"
            )
        return hint_spec
    if hint is not None and os.path.abspath(hint.target) != found.local_database:
        raise CoordinatorMismatchError(
            f"{table_uri}: the connection's embedded coordinator {hint.target} is not the table's {found.local_database}"
        )
    return hint_spec if hint is not None else f"local://{found.local_database}"


def _check_agrees(table_uri: str, spec: str, found: TableCoordination) -> None:
    parsed = parse_coordinator_spec(spec)
    shown = redact_spec(spec)
    if found.kind == "unsupported":
        raise CoordinatorMismatchError(f"{table_uri}: coordinator spec {shown} given, but the table is coordinated by {found.declared_name}")
    if found.kind is not None and parsed.kind != found.kind:
        raise CoordinatorMismatchError(f"{table_uri}: coordinator spec {shown} is {parsed.kind}, but the table declares {found.describe()}")
    if parsed.kind == "dynamodb":
        if found.dynamodb_table and parsed.target != found.dynamodb_table:
            raise CoordinatorMismatchError(
                f"{table_uri}: coordinator spec {shown} names DynamoDB table {parsed.target!r}, but the table is coordinated "
                f"through {found.dynamodb_table!r}"
            )
        spec_id, table_id = parsed.params.get("table_id"), found.table_conf.get("tableId")
        if spec_id and table_id and spec_id != table_id:
            raise CoordinatorMismatchError(f"{table_uri}: coordinator spec {shown} has table_id {spec_id}, but the table's tableId is {table_id}")
    if parsed.kind == "unity-catalog":
        spec_id, table_id = parsed.params.get("table_id"), found.table_conf.get(UC_TABLE_ID_PROPERTY)
        if spec_id and table_id and spec_id != table_id:
            raise CoordinatorMismatchError(
                f"{table_uri}: coordinator spec {shown} has table_id {spec_id}, but the table's {UC_TABLE_ID_PROPERTY} is {table_id}"
            )
    if parsed.kind == "local" and found.local_database and os.path.abspath(parsed.target) != found.local_database:
        raise CoordinatorMismatchError(
            f"{table_uri}: coordinator spec {shown} is the embedded database {os.path.abspath(parsed.target)}, but the table "
            f"was created on {found.local_database}"
        )


def resolve_coordinator_spec(
    table_uri: str, requested: str | None, found: TableCoordination, *, connection_spec: str | None = None
) -> str | None:
    """The spec to open for this table: ``requested`` (a spec, ``auto`` or None) checked against the
    table; with ``auto`` the table's own declaration, with ``connection_spec`` as the endpoint."""
    effective = requested or connection_spec
    if effective is None:
        return None
    if effective.strip().lower() == AUTO:
        hint = connection_spec if requested and connection_spec and connection_spec.strip().lower() != AUTO else None
        return _discovered_spec(table_uri, found, hint)
    _check_agrees(table_uri, effective, found)
    return effective
