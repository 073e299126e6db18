"""Coordinator spec strings → parsed specs. The same strings work in the CLI, the YAML config and
Airflow connections (the connection's host field). Secrets never appear in a spec: an unknown
parameter (``token=``, ``secret=`` …) is refused.

``local:///abs/path/coordinator.db[?create=true]``
    The embedded SQLite coordinator (the default). The path must be absolute (three slashes):
    ``local://relative/path.db`` is refused, since every Airflow worker would resolve it against a
    different working directory. The database must already exist — a typo must not silently start
    an empty coordinator — unless ``create=true`` asks for it to be created.
``dynamodb://<dynamodb-table>?region=<aws-region>[&endpoint=<url>][&table_id=<uuid>]``
    delta-spark's DynamoDB commit coordinator (its item schema, in the DynamoDB table
    ``<dynamodb-table>``). ``region`` is required; ``endpoint`` points at DynamoDB Local or a VPC
    endpoint. The Delta table's ``tableId`` comes from its own
    ``delta.coordinatedCommits.tableConf-preview`` property (read by ``maintenance.table.maintained``);
    ``table_id`` is only checked against it. Credentials come from the boto3 chain (environment, profile, instance
    role) or an Airflow connection's login/password.
``unity-catalog://<host>:<port>/<catalog>.<schema>.<table>[?api=v1|preview][&tls=true|false][&table_id=<uuid>]``
    Unity Catalog commit coordination through the Delta API v1 (Managed Tables spec 1.0, the
    default) or the preview ``delta/preview/commits`` API. ``tls`` defaults to ``true`` (https).
    The UC table id comes from the table property ``io.unitycatalog.tableId`` (read by
    ``maintenance.table.maintained``); ``table_id`` is only checked against it. Without a name the table is
    identified by that id (the preview API; v1 needs the name). The bearer token comes from
    ``DELTA_MAINTENANCE_UC_TOKEN`` or an Airflow connection's password.

Errors are ``InvalidCoordinatorSpecError`` naming the offending part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from .errors import InvalidCoordinatorSpecError

__all__ = ["AUTO", "CoordinatorSpec", "parse_coordinator_spec", "redact_spec"]

# Not a spec: "discover the coordinator from the table's own properties" (maintenance.discovery).
AUTO = "auto"

_KNOWN_PARAMS = {
    "local": {"create"},
    "dynamodb": {"region", "endpoint", "table_id"},
    "unity-catalog": {"api", "tls", "table_id"},
}


@dataclass(frozen=True)
class CoordinatorSpec:
    kind: str  # local | dynamodb | unity-catalog
    target: str  # database path | DynamoDB table | host:port
    name: str = ""  # unity-catalog: catalog.schema.table
    params: dict[str, str] = field(default_factory=dict)


def redact_spec(spec: str) -> str:
    """The spec with query values and any ``user:password@`` removed, for messages."""
    if not isinstance(spec, str):
        return repr(spec)
    parts = urlsplit(spec)
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = "&".join(f"{k}=…" for k in parse_qs(parts.query, keep_blank_values=True))
    return f"{parts.scheme}://{'***@' if '@' in parts.netloc else ''}{netloc}{parts.path}{'?' + query if query else ''}"


def _bad(spec: str, problem: str) -> InvalidCoordinatorSpecError:
    return InvalidCoordinatorSpecError(f"coordinator spec {redact_spec(spec)!r}: {problem}")


def parse_coordinator_spec(spec: str) -> CoordinatorSpec:
    if not isinstance(spec, str) or "://" not in spec:
        shown = repr(spec[:60]) if isinstance(spec, str) else f"of type {type(spec).__name__}"
        raise InvalidCoordinatorSpecError(
            f"coordinator spec {shown} must look like local:///path.db, dynamodb://table?region=... or unity-catalog://host:port/catalog.schema.table"
        )
    parts = urlsplit(spec)
    kind = parts.scheme.lower()
    if kind not in _KNOWN_PARAMS:
        raise _bad(spec, f"unknown kind {kind!r} (expected local, dynamodb or unity-catalog)")
    if "@" in parts.netloc:
        raise _bad(spec, "credentials do not belong in a coordinator spec (use the environment or a connection)")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    params = {}
    for key, values in query.items():
        if key not in _KNOWN_PARAMS[kind]:
            known = ", ".join(sorted(_KNOWN_PARAMS[kind])) or "none"
            raise _bad(spec, f"unknown parameter {key!r} for {kind} (known: {known})")
        if len(values) != 1 or not values[0]:
            raise _bad(spec, f"parameter {key!r} needs exactly one value")
        params[key] = values[0]
    if kind == "local":
        if parts.netloc:
            raise _bad(
                spec,
                f"the database path must be absolute: local:///{parts.netloc}{parts.path} (three slashes), "
                f"not a path relative to each worker's working directory",
            )
        if not parts.path or parts.path.endswith("/"):
            raise _bad(spec, "the database path is missing (local:///abs/path/coordinator.db)")
        if params.get("create", "false") not in ("true", "false"):
            raise _bad(spec, "create must be true or false")
        return CoordinatorSpec(kind, parts.path, params=params)
    if kind == "dynamodb":
        if not parts.netloc or parts.path not in ("", "/"):
            raise _bad(spec, "expected dynamodb://<dynamodb-table>?region=...")
        if "region" not in params:
            raise _bad(spec, "the region parameter is required")
        endpoint = params.get("endpoint")
        if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
            raise _bad(spec, "endpoint must be an http:// or https:// URL")
        return CoordinatorSpec(kind, parts.netloc, params=params)
    name = parts.path.strip("/")
    if not parts.netloc:
        raise _bad(spec, "the Unity Catalog host is missing (unity-catalog://host:port/<catalog>.<schema>.<table>)")
    # Without a name the table is identified by its own io.unitycatalog.tableId (coordinator: auto,
    # a connection holding only the endpoint); calls that need the name say so.
    if name and (name.count(".") != 2 or any(not p for p in name.split("."))):
        raise _bad(spec, f"table name {name!r} is not <catalog>.<schema>.<table>")
    if params.get("api", "v1") not in ("v1", "preview"):
        raise _bad(spec, "api must be v1 or preview")
    if params.get("tls", "true") not in ("true", "false"):
        raise _bad(spec, "tls must be true or false")
    return CoordinatorSpec(kind, parts.netloc, name, params)
