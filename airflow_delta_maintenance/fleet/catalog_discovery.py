"""Fleet discovery: ask each source which tables it coordinates, write the fleet file atomically.

Runs in a task (``delta-maintenance discover`` or the discovery DAG), never at DAG parse time.

- **Unity Catalog** (UC REST ``GET /schemas``, ``GET /tables``, paginated): a table joins the fleet
  when it is ``MANAGED`` with ``data_source_format`` ``DELTA`` and carries the catalog's
  ``io.unitycatalog.tableId`` property equal to its ``table_id`` — what UC 0.5.x/0.6.0 require of
  every catalog-managed table they create. External tables, views, other formats and managed tables
  without the property (created by older servers, not coordinated by the catalog) are listed as
  skipped with the reason. The fleet entry's coordinator spec names the table
  (``unity-catalog://host/<catalog>.<schema>.<table>?api=…&tls=…&table_id=<id>``): the Delta API v1
  needs the name, and ``table_id`` is checked against the table's own property when it is opened.
- **DynamoDB** (delta-spark's commits table: one item per Delta table, key ``tableId``, attribute
  ``path``): one paginated ``Scan`` projecting ``tableId`` and ``path``. The spec is the source's
  with ``table_id`` added, again only checked against the table's own ``tableConf``.

The per-table coordinator conf is never written to the fleet file: the identity build reads it from
each table's own metadata when the table is maintained (``maintenance.table.maintained.open_table``).

A source that fails (unreachable, refused, missing) fails the whole run and leaves the previous
fleet file untouched: a partial fleet would silently drop the failing source's tables. The file is
written to a temporary name in the same directory, flushed and fsynced, then renamed over the old
one, so a DAG parse reads either the old fleet or the new one, never a mixture.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..coordinators.dynamodb import DynamoDBCoordinator
from ..coordinators.errors import TableNotFoundError
from ..coordinators.unity_catalog_listing import UCTableInfo, UnityCatalogBrowser
from ..deltalog.storage import normalize_table_uri
from ..maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from .config import (
    FLEET_FORMAT,
    DiscoveredTable,
    DiscoveryConfig,
    DynamoDBSource,
    UnityCatalogSource,
    spec_with,
)

__all__ = ["DiscoveryResult", "SourceResult", "discover_fleet", "uri_from_hadoop_path", "write_fleet_file"]

UC_TABLE_ID = "io.unitycatalog.tableId"
Credentials = Mapping[str, str | None]


@dataclass(frozen=True)
class SourceResult:
    name: str
    kind: str
    tables: list[DiscoveredTable]
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"table", "reason"}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "tables": len(self.tables), "skipped": self.skipped}


@dataclass(frozen=True)
class DiscoveryResult:
    sources: list[SourceResult]
    written_at: str

    @property
    def tables(self) -> list[DiscoveredTable]:
        return [t for s in self.sources for t in s.tables]

    def document(self, discovery: DiscoveryConfig) -> dict[str, Any]:
        return {
            "format": FLEET_FORMAT,
            "written_at": self.written_at,
            "config": discovery.path,
            "sources_digest": discovery.digest(),
            "sources": [s.to_dict() for s in self.sources],
            "tables": [t.to_dict() for t in self.tables],
        }

    def summary(self) -> dict[str, Any]:
        """What a task returns (XCom) or the CLI prints: counts and names, no secrets."""
        return {"tables": len(self.tables), "sources": [s.to_dict() for s in self.sources], "written_at": self.written_at}


def uri_from_hadoop_path(path: str) -> str:
    """A table location as Hadoop prints it (delta-spark's ``path``; catalogs' locations):
    ``file:/abs`` or ``file:///abs``, ``s3a://…`` → the URI the log library names the table by."""
    if path.startswith("file:") and not path.startswith("file://"):
        return normalize_table_uri("file://" + path[len("file:"):])
    return normalize_table_uri(path)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _uc_source(source: UnityCatalogSource, credentials: Credentials) -> SourceResult:
    token = credentials.get("password") or os.environ.get(UC_TOKEN_ENV)
    browser = UnityCatalogBrowser(source.host, tls=source.tls, token=token)
    whole_catalog = source.schemas is None
    schemas = browser.list_schemas(source.catalog) if whole_catalog else list(source.schemas or ())
    found: list[DiscoveredTable] = []
    skipped: list[dict[str, str]] = []
    for schema in schemas:
        try:
            listed = browser.list_tables(source.catalog, schema)
        except TableNotFoundError as exc:
            if not (whole_catalog and exc.missing == "schema"):
                raise  # a configured schema that does not exist is a mistake to report
            # dropped between the two listings: it has no tables any more
            skipped.append({"table": f"{source.catalog}.{schema}.*", "reason": "the schema was dropped while listing"})
            continue
        for info in listed:
            reason = _not_coordinated(info)
            if reason:
                skipped.append({"table": info.full_name, "reason": reason})
                continue
            spec = f"unity-catalog://{source.host}/{info.full_name}?" + f"api={source.api}&tls={'true' if source.tls else 'false'}"
            found.append(DiscoveredTable(
                source=source.name,
                name=source.name_prefix + info.full_name,
                uri=uri_from_hadoop_path(info.storage_location),  # file:/x, file:///x, s3a://… alike
                coordinator=spec_with(spec, table_id=info.table_id),
                properties=dict(info.properties),
            ))
    return SourceResult(source.name, source.kind, found, skipped)


def _not_coordinated(info: UCTableInfo) -> str | None:
    if info.table_type.upper() != "MANAGED":
        return f"{info.table_type or 'unknown type'} table: not managed by the catalog"
    if info.data_source_format.upper() != "DELTA":
        return f"{info.data_source_format or 'unknown'} format: not a Delta table"
    if not info.storage_location:
        return "no storage location"
    declared = info.properties.get(UC_TABLE_ID)
    if not declared:
        return f"no {UC_TABLE_ID} property: the catalog does not coordinate its commits"
    if info.table_id and declared != info.table_id:
        return f"{UC_TABLE_ID} {declared} is not the catalog's table id {info.table_id}"
    return None


def _dynamodb_source(source: DynamoDBSource, credentials: Credentials) -> SourceResult:
    client = open_coordinator(source.spec, credentials=credentials)
    try:
        if not isinstance(client, DynamoDBCoordinator):  # pragma: no cover - parse_discovery checked the kind
            raise TypeError(f"{source.spec}: not a DynamoDB coordinator")
        items = client.list_registered_tables()
    finally:
        client.close()
    found = []
    for table_id, path in items:
        uri = uri_from_hadoop_path(path)
        base = _UNSAFE.sub("_", uri.rstrip("/").rsplit("/", 1)[-1]).strip("._-") or "table"
        found.append(DiscoveredTable(source.name, f"{source.name_prefix}{base}_{table_id[:8]}", uri, spec_with(source.spec, table_id=table_id)))
    return SourceResult(source.name, source.kind, found)


def discover_fleet(
    discovery: DiscoveryConfig,
    credentials: Callable[[str], Credentials] | None = None,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> DiscoveryResult:
    """Every source's tables. ``credentials(conn_id)`` supplies a source's connection credentials
    (the Airflow task passes the connection's); without it, or for a source without ``conn_id``,
    the environment is used (``DELTA_MAINTENANCE_UC_TOKEN``, the AWS credential chain)."""
    results = []
    for source in discovery.sources:
        creds: Credentials = credentials(source.conn_id) if credentials and source.conn_id else {}
        if isinstance(source, UnityCatalogSource):
            results.append(_uc_source(source, creds))
        else:
            results.append(_dynamodb_source(source, creds))
    return DiscoveryResult(results, now().isoformat(timespec="seconds"))


def write_fleet_file(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` as JSON to ``path`` atomically (temporary file, fsync, rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # the fleet file is ours alone: replacing it whole is the point
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
