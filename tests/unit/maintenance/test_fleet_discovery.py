"""Which Unity Catalog tables discovery takes, and a listing that would never end."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_delta_maintenance.coordinators.errors import CoordinatorError
from airflow_delta_maintenance.coordinators.unity_catalog_listing import UCTableInfo, UnityCatalogBrowser
from airflow_delta_maintenance.fleet.catalog_discovery import _not_coordinated


def info(**kw: Any) -> UCTableInfo:
    base: dict[str, Any] = {"catalog": "main", "schema": "s", "name": "t", "table_type": "MANAGED", "data_source_format": "DELTA",
                            "storage_location": "s3://b/t", "table_id": "id1", "properties": {"io.unitycatalog.tableId": "id1"}}
    return UCTableInfo(**{**base, **kw})


@pytest.mark.parametrize("kw,reason", [
    ({}, None),
    ({"table_type": "EXTERNAL"}, "EXTERNAL table: not managed by the catalog"),
    ({"table_type": "VIEW"}, "VIEW table: not managed by the catalog"),
    ({"data_source_format": "PARQUET"}, "PARQUET format: not a Delta table"),
    ({"properties": {}}, "no io.unitycatalog.tableId property: the catalog does not coordinate its commits"),
    ({"properties": {"io.unitycatalog.tableId": "other"}}, "io.unitycatalog.tableId other is not the catalog's table id id1"),
    ({"storage_location": ""}, "no storage location"),
])
def test_only_catalog_managed_delta_tables_join_the_fleet(kw: dict[str, Any], reason: str | None) -> None:
    assert _not_coordinated(info(**kw)) == reason


def test_a_listing_whose_page_token_repeats_is_an_error_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    browser = UnityCatalogBrowser("uc.invalid:1", tls=False)
    calls: list[dict[str, str]] = []

    def request(method: str, path: str, body: Any = None, query: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
        calls.append(dict(query or {}))
        return {"tables": [{"name": f"t{len(calls)}"}], "next_page_token": "same"}

    monkeypatch.setattr(browser._http, "request", request)
    with pytest.raises(CoordinatorError, match="repeated the page token 'same'"):
        browser.list_tables("main", "s")
    assert [c.get("page_token") for c in calls] == [None, "same"]
    assert calls[0] == {"catalog_name": "main", "schema_name": "s", "omit_columns": "true", "max_results": "100"}


def _source(schemas: tuple[str, ...] | None) -> Any:
    from airflow_delta_maintenance.fleet.config import UnityCatalogSource

    return UnityCatalogSource("uc", "uc.invalid:1", "v1", False, "main", schemas)


def test_a_schema_dropped_while_listing_a_whole_catalog_is_skipped_but_a_configured_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_delta_maintenance.coordinators.errors import TableNotFoundError
    from airflow_delta_maintenance.fleet.catalog_discovery import _uc_source

    def list_tables(self: UnityCatalogBrowser, catalog: str, schema: str) -> list[UCTableInfo]:
        if schema == "gone":
            raise TableNotFoundError("the schema does not exist", missing="schema")
        return [info(schema=schema, name="t")]

    monkeypatch.setattr(UnityCatalogBrowser, "list_schemas", lambda self, catalog: ["a", "gone", "b"])
    monkeypatch.setattr(UnityCatalogBrowser, "list_tables", list_tables)
    result = _uc_source(_source(None), {})
    assert [t.name for t in result.tables] == ["main.a.t", "main.b.t"]
    assert result.skipped == [{"table": "main.gone.*", "reason": "the schema was dropped while listing"}]
    assert result.tables[0].coordinator == "unity-catalog://uc.invalid:1/main.a.t?api=v1&tls=false&table_id=id1"
    with pytest.raises(TableNotFoundError):
        _uc_source(_source(("a", "gone")), {})


@pytest.mark.parametrize(("tables", "named"), [
    (["t1"], "tables[0] is 't1', not an object"),
    ([{"name": 7}], "name is 7, not a non-empty string"),
    ([{"name": "t", "properties": {"io.unitycatalog.tableId": 1}}], "main.s.t: properties.io.unitycatalog.tableId is 1, not a string"),
    ([{"name": "t", "storage_location": ["s3://b/t"]}], "main.s.t: storage_location is ['s3://b/t'], not a string"),
    ({"name": "t"}, "tables is {'name': 't'}, not a list"),
], ids=["entry-not-an-object", "name-a-number", "property-a-number", "location-a-list", "tables-an-object"])
def test_a_malformed_listing_is_a_typed_error_not_a_table_left_out(monkeypatch: pytest.MonkeyPatch, tables: Any, named: str) -> None:
    """Before: entries that were not objects were skipped and fields coerced with str(), so a
    table could silently leave the fleet (or join it with a made-up table id)."""
    from airflow_delta_maintenance.coordinators.errors import MalformedAnswerError

    browser = UnityCatalogBrowser("uc.invalid:1", tls=False)
    monkeypatch.setattr(browser._http, "request", lambda *a, **k: {"tables": tables})
    with pytest.raises(MalformedAnswerError) as err:
        browser.list_tables("main", "s")
    assert named in str(err.value) and not err.value.retryable
