"""Airflow UI plugin: the fleet health report under ``/delta-maintenance/`` in the api-server, a
"Delta fleet health" entry in the navigation, and the listener that records task successes.

The page is the report the fleet DAG last wrote (``report.html``, ``report.json``) in the report
directory (``report_dir.report_dir()``): read-only,
served as files, nothing computed per request. Only users the auth manager allows to see the
plugins view get it (the UI's session cookie or a bearer token), like Airflow's own pages.
"""

from __future__ import annotations

from typing import Any

from . import run_recorder
from .report_dir import report_dir

try:
    from airflow.sdk.plugins_manager import AirflowPlugin
except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1
    from airflow.plugins_manager import AirflowPlugin  # type: ignore[assignment]  # 3.3 has two classes of this name

__all__ = ["URL_PREFIX", "DeltaFleetHealthPlugin", "create_app"]

URL_PREFIX = "/delta-maintenance"


def _file(name: str, media_type: str) -> Any:
    from fastapi import HTTPException
    from fastapi.responses import FileResponse

    path = report_dir() / name
    if not path.is_file():
        raise HTTPException(404, f"no {name} yet: the fleet health DAG has not written a report")
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": "no-store"})


def _access_dependencies() -> list[Any]:
    """Airflow's own check: an authenticated user allowed to see the plugins view."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view
    from fastapi import Depends

    return [Depends(requires_access_view(AccessView.PLUGINS))]


def create_app(*, require_auth: bool = True) -> Any:
    """The report pages (a FastAPI app); ``require_auth=False`` only for tests without an api-server."""
    from fastapi import FastAPI

    app = FastAPI(
        title="Delta maintenance fleet health", docs_url=None, redoc_url=None, openapi_url=None,
        dependencies=_access_dependencies() if require_auth else [],
    )

    @app.get("/")
    @app.get("/report")
    def report_html() -> Any:
        return _file("report.html", "text/html; charset=utf-8")  # fleet_history.REPORT_HTML (not imported: it loads pyarrow)

    @app.get("/report.json")
    def report_json() -> Any:
        return _file("report.json", "application/json")  # fleet_history.REPORT_JSON

    return app


class _LazyApps:
    """``fastapi_apps``, built on first access: every task process loads the plugins (for the
    listener), and building the app imports the api-server's security module (seconds); only the
    api-server reads this attribute."""

    def __init__(self) -> None:
        self._apps: list[dict[str, Any]] | None = None

    def __get__(self, obj: object, owner: type | None = None) -> list[dict[str, Any]]:
        if self._apps is None:
            self._apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Delta fleet health"}]
        return self._apps


class DeltaFleetHealthPlugin(AirflowPlugin):
    name = "delta_maintenance_fleet_health"
    fastapi_apps = _LazyApps()
    external_views = [  # noqa: RUF012 - AirflowPlugin's own attribute style
        {"name": "Delta fleet health", "href": f"{URL_PREFIX}/report", "destination": "nav", "url_route": "delta-fleet-health"}
    ]
    listeners = [run_recorder]  # noqa: RUF012
