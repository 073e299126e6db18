"""Coordinator spec strings → parsed specs. The same strings work in the CLI, the YAML config and
Airflow connections (the connection's host field).

``local:///abs/path/coordinator.db`` (or ``local://relative/path.db``)
    The embedded SQLite coordinator.
``dynamodb://<dynamodb-table>?region=us-east-1[&endpoint=http://127.0.0.1:8000][&table_id=<uuid>]``
    delta-spark's DynamoDB commit coordinator schema. ``table_id`` is the Delta table's
    ``tableId`` (normally read from ``delta.coordinatedCommits.tableConf-preview``). Credentials
    come from the environment, the boto3 chain or an Airflow connection — never from the spec.
``unity-catalog://<host>:<port>/<catalog>.<schema>.<table>?api=v1|preview[&tls=true|false][&table_id=<id>]``
    Unity Catalog commit coordination: the Managed Tables v1 API (default) or the preview
    ``delta/preview/commits`` API (which needs ``table_id``). The token comes from
    ``DELTA_MAINTENANCE_UC_TOKEN`` or a connection's password — never from the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from .errors import InvalidCoordinatorSpecError

__all__ = ["CoordinatorSpec", "parse_coordinator_spec"]

_KNOWN_PARAMS = {
    "local": set(),
    "dynamodb": {"region", "endpoint", "table_id"},
    "unity-catalog": {"api", "tls", "table_id"},
}


@dataclass(frozen=True)
class CoordinatorSpec:
    kind: str  # local | dynamodb | unity-catalog
    target: str  # database path | DynamoDB table | host:port
    name: str = ""  # unity-catalog: catalog.schema.table
    params: dict[str, str] = field(default_factory=dict)


def parse_coordinator_spec(spec: str) -> CoordinatorSpec:
    if not isinstance(spec, str) or "://" not in spec:
        raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r} must look like local:///path.db, dynamodb://table?... or unity-catalog://host:port/...")
    parts = urlsplit(spec)
    kind = parts.scheme.lower()
    if kind not in _KNOWN_PARAMS:
        raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: unknown kind {kind!r} (expected local, dynamodb or unity-catalog)")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    params = {}
    for key, values in query.items():
        if key not in _KNOWN_PARAMS[kind]:
            raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: unknown parameter {key!r} for {kind}")
        if len(values) != 1 or not values[0]:
            raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: parameter {key!r} needs exactly one value")
        params[key] = values[0]
    if kind == "local":
        path = (parts.netloc + parts.path) if parts.netloc else parts.path
        if not path:
            raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: the database path is missing")
        return CoordinatorSpec(kind, path)
    if kind == "dynamodb":
        if not parts.netloc or parts.path not in ("", "/"):
            raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: expected dynamodb://<dynamodb-table>?region=...")
        if "region" not in params:
            raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: the region parameter is required")
        return CoordinatorSpec(kind, parts.netloc, params=params)
    name = parts.path.strip("/")
    if not parts.netloc or name.count(".") != 2 or any(not p for p in name.split(".")):
        raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: expected unity-catalog://host:port/<catalog>.<schema>.<table>")
    if params.get("api", "v1") not in ("v1", "preview"):
        raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: api must be v1 or preview")
    if params.get("tls", "true") not in ("true", "false"):
        raise InvalidCoordinatorSpecError(f"coordinator spec {spec!r}: tls must be true or false")
    return CoordinatorSpec(kind, parts.netloc, name, params)
