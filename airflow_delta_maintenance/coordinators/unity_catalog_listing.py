"""Listing a Unity Catalog's schemas and tables (UC REST ``GET /schemas`` and ``GET /tables``).

Used by fleet discovery only; commits go through ``UnityCatalogCoordinator``.

What the OSS servers (0.5.1, 0.6.0) answer, read from their sources: both list in ascending name
order, at most 100 entries per page whatever ``max_results`` asks; ``next_page_token`` is the last
name of a full page (so the page after a full last page is empty) and absent at the end. With
authorization on, entries the principal may not see are filtered out of a page *after* paging, so a
page can be short and still have a next page: the listing follows ``next_page_token``, never the
page size. ``omit_columns=true`` keeps answers small; properties are kept (they carry
``io.unitycatalog.tableId``). Listing a schema needs ``USE CATALOG`` and ``USE SCHEMA`` (or
ownership), and a table is only listed to a principal with ``SELECT``/``MODIFY`` on it (or owner).

Only the server URL and the token (``Authorization`` header, never logged) are needed; errors are
the typed ``CoordinatorError`` family of ``_uc_http``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._uc_http import UCTransport
from .errors import CoordinatorError

__all__ = ["UCTableInfo", "UnityCatalogBrowser"]

API = "/api/2.1/unity-catalog"
_MAX_PAGES = 100_000  # a server that keeps answering the same token must not loop forever


@dataclass(frozen=True)
class UCTableInfo:
    """The fields of a UC REST ``TableInfo`` that discovery uses."""

    catalog: str
    schema: str
    name: str
    table_type: str  # MANAGED | EXTERNAL | VIEW | …
    data_source_format: str  # DELTA | PARQUET | …
    storage_location: str
    table_id: str
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name}"


class UnityCatalogBrowser:
    """Read-only listing of a Unity Catalog server: ``http[s]://host`` plus the UC REST API."""

    def __init__(self, host: str, *, tls: bool = True, token: str | None = None, page_size: int = 100,
                 max_attempts: int = 5, timeout_s: float = 30.0) -> None:
        self.page_size = page_size  # the OSS servers cap it at 100
        self.server = f"{'https' if tls else 'http'}://{host}"
        self._http = UCTransport(self.server + API, token, describe=self.describe, max_attempts=max_attempts, timeout_s=timeout_s)

    def __repr__(self) -> str:
        return f"UnityCatalogBrowser({self.server!r})"

    def describe(self) -> str:
        return f"Unity Catalog at {self.server}"

    def _pages(self, path: str, query: Mapping[str, str], key: str, privilege: str) -> Iterator[dict[str, Any]]:
        token: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            q = dict(query, max_results=str(self.page_size))
            if token:
                q["page_token"] = token
            body = self._http.request("GET", path, query=q, privilege=privilege)
            items = body.get(key) or []
            if not isinstance(items, list):
                raise CoordinatorError(f"{self.describe()}: GET {path} answered {key!r} that is not a list", retryable=False)
            for item in items:
                if isinstance(item, dict):
                    yield item
            token = body.get("next_page_token") or None
            if token is None:
                return
            if token in seen:
                raise CoordinatorError(f"{self.describe()}: GET {path} repeated the page token {token!r}", retryable=False)
            seen.add(token)
        raise CoordinatorError(f"{self.describe()}: GET {path} did not end after {_MAX_PAGES} pages", retryable=False)

    def list_schemas(self, catalog: str) -> list[str]:
        """The names of the schemas of ``catalog`` that the principal may see, in the server's order."""
        items = self._pages("/schemas", {"catalog_name": catalog}, "schemas", f"USE CATALOG on catalog {catalog} (or ownership)")
        return [str(s["name"]) for s in items if s.get("name")]

    def list_tables(self, catalog: str, schema: str) -> list[UCTableInfo]:
        """Every table of ``catalog.schema`` that the principal may see (all types; the caller filters)."""
        privilege = f"USE CATALOG on catalog {catalog}, USE SCHEMA on schema {catalog}.{schema} and SELECT or MODIFY on its tables"
        out = []
        for t in self._pages("/tables", {"catalog_name": catalog, "schema_name": schema, "omit_columns": "true"}, "tables", privilege):
            props = t.get("properties") or {}
            out.append(UCTableInfo(
                catalog=str(t.get("catalog_name") or catalog),
                schema=str(t.get("schema_name") or schema),
                name=str(t.get("name") or ""),
                table_type=str(t.get("table_type") or ""),
                data_source_format=str(t.get("data_source_format") or ""),
                storage_location=str(t.get("storage_location") or ""),
                table_id=str(t.get("table_id") or ""),
                properties={str(k): str(v) for k, v in props.items()} if isinstance(props, dict) else {},
            ))
        return out
