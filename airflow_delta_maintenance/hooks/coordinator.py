"""``DeltaCoordinatorHook``: an Airflow connection → a commit coordinator client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

from ..coordinators.base import CommitCoordinatorClient
from ..maintenance.coordinator import open_coordinator

__all__ = ["DeltaCoordinatorHook"]


class DeltaCoordinatorHook(BaseHook):
    """A commit coordinator (embedded SQLite, DynamoDB, Unity Catalog) from a connection.

    The connection's ``host`` holds the coordinator spec, e.g. ``local:///data/coordinator.db``,
    ``dynamodb://delta_commits?region=us-east-1`` or
    ``unity-catalog://uc.example.com:8080/main.sales.orders?api=v1``; ``password`` holds the Unity
    Catalog token, ``login``/``password`` AWS keys for DynamoDB (otherwise the environment is used).
    A ``spec`` argument overrides the connection (then no connection is needed).
    """

    conn_name_attr = "delta_coordinator_conn_id"
    default_conn_name = "delta_coordinator_default"
    conn_type = "delta_coordinator"
    hook_name = "Delta commit coordinator"

    def __init__(self, delta_coordinator_conn_id: str | None = default_conn_name, spec: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.spec = spec

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "extra"],
            "relabeling": {"host": "Coordinator spec", "login": "AWS access key ID (DynamoDB)", "password": "Token / secret"},
            "placeholders": {"host": "local:///data/coordinator.db | dynamodb://table?region=us-east-1 | unity-catalog://host:8080/cat.sch.tbl"},
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        return {}

    def resolve_spec(self) -> tuple[str, str | None, str | None]:
        """(spec, login, password) from the argument or the connection."""
        if self.spec:
            return self.spec, None, None
        if not self.delta_coordinator_conn_id:
            raise ValueError("a coordinator spec or a delta_coordinator connection is required")
        conn = self.get_connection(self.delta_coordinator_conn_id)
        if not conn.host:
            raise ValueError(f"connection {self.delta_coordinator_conn_id}: the host field must hold the coordinator spec")
        return conn.host, conn.login, conn.password

    def connection_spec(self) -> tuple[str | None, dict[str, str | None]]:
        """(the connection's spec, its credentials); (None, {}) without a connection. With a
        ``spec`` argument of ``auto`` the connection supplies the endpoint."""
        if not self.delta_coordinator_conn_id:
            return None, {}
        conn = self.get_connection(self.delta_coordinator_conn_id)
        return conn.host or None, {"login": conn.login, "password": conn.password}

    def get_client(self, storage_options: Mapping[str, Any] | None = None) -> CommitCoordinatorClient:
        spec, login, password = self.resolve_spec()
        return open_coordinator(spec, storage_options, credentials={"login": login, "password": password})

    def describe(self) -> str:
        return self.resolve_spec()[0].split("?", 1)[0]
