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
the typed ``CoordinatorError`` family of ``_uc_http``. Answers are typed like every coordinator
answer (``answers``): an entry that is not an object, a name that is not a string, properties that
are not strings are a ``MalformedAnswerError`` naming the listing and the field, never a table
silently left out of the fleet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._uc_http import UCTransport
from .answers import Answer
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
            answer = Answer(self.describe(), f"GET {path} {dict(query)}")
            for i, item in enumerate(answer.json_list(body, key)):
                yield dict(answer.json_object(item, f"{key}[{i}]"))
            token = answer.json_str(body, "next_page_token") if body.get("next_page_token") else None
            if token is None:
                return
            if token in seen:
                raise CoordinatorError(f"{self.describe()}: GET {path} repeated the page token {token!r}", retryable=False)
            seen.add(token)
        raise CoordinatorError(f"{self.describe()}: GET {path} did not end after {_MAX_PAGES} pages", retryable=False)

    def list_schemas(self, catalog: str) -> list[str]:
        """The names of the schemas of ``catalog`` that the principal may see, in the server's order."""
        answer = Answer(self.describe(), f"catalog {catalog}")
        items = self._pages("/schemas", {"catalog_name": catalog}, "schemas", f"USE CATALOG on catalog {catalog} (or ownership)")
        return [answer.json_str(s, "name") for s in items]

    def list_tables(self, catalog: str, schema: str) -> list[UCTableInfo]:
        """Every table of ``catalog.schema`` that the principal may see (all types; the caller filters)."""
        privilege = f"USE CATALOG on catalog {catalog}, USE SCHEMA on schema {catalog}.{schema} and SELECT or MODIFY on its tables"
        out = []
        for t in self._pages("/tables", {"catalog_name": catalog, "schema_name": schema, "omit_columns": "true"}, "tables", privilege):
            name = Answer(self.describe(), f"schema {catalog}.{schema}").json_str(t, "name")
            answer = Answer(self.describe(), f"{catalog}.{schema}.{name}")
            props = answer.json_object(t.get("properties") or {}, "properties")
            bad = next((k for k, v in props.items() if not isinstance(v, str)), None)
            if bad is not None:
                raise answer.malformed(f"properties.{bad}", f"is {props[bad]!r}, not a string")

            def text(key: str, default: str = "", t: dict[str, Any] = t, answer: Answer = answer) -> str:
                value = t.get(key)
                if value is not None and not isinstance(value, str):
                    raise answer.malformed(key, f"is {value!r}, not a string")
                return value or default  # absent or empty: optional in the API

            out.append(UCTableInfo(
                catalog=text("catalog_name", catalog),
                schema=text("schema_name", schema),
                name=name,
                table_type=text("table_type"),
                data_source_format=text("data_source_format"),
                storage_location=text("storage_location"),
                table_id=text("table_id"),
                properties=dict(props),
            ))
        return out
