"""``DeltaCoordinatorHook``: an Airflow connection → a commit coordinator client."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from ..coordinators.base import CommitCoordinatorClient
from ..coordinators.registry import parse_coordinator_spec
from ..maintenance.table.coordinator_client import open_coordinator
from ..maintenance.table.coordinator_discovery import AUTO
from ..maintenance.table.maintained import MaintainedTable, open_table
from ..version_compat import BaseHook
from ._aws import aws_access
from ._forms import connection_form_widgets, declared_hook_name, ui_field_behaviour

__all__ = ["DeltaCoordinatorHook"]


class DeltaCoordinatorHook(BaseHook):
    """A commit coordinator (embedded SQLite, DynamoDB, Unity Catalog) from a connection.

    The connection's ``host`` holds the coordinator spec, e.g. ``local:///data/coordinator.db``,
    ``dynamodb://delta_commits?region=us-east-1`` or
    ``unity-catalog://uc.example.com:8080/main.sales.orders?api=v1``, or ``auto`` (the coordinator is
    discovered from each table; a spec argument of ``auto`` takes the endpoint, e.g.
    ``unity-catalog://uc.example.com:8080``, from the connection); ``password`` holds the Unity
    Catalog token, ``login``/``password`` AWS keys for DynamoDB; or the extra field ``aws_conn_id``
    names an Airflow ``aws`` connection to take DynamoDB credentials from (keys, session token,
    ``role_arn``, web identity: anything the Amazon provider's ``aws`` connection supports, through
    its session factory; a role's keys are refreshed before they expire); otherwise the
    environment is used. A ``spec`` argument overrides the connection (then no connection is
    needed). The connection is read once per hook; the trigger makes new hooks at every poll.
    """

    conn_name_attr = "delta_coordinator_conn_id"
    default_conn_name = "delta_coordinator_default"
    conn_type = "delta_coordinator"
    hook_name = declared_hook_name("delta_coordinator")

    def __init__(self, delta_coordinator_conn_id: str | None = default_conn_name, spec: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_coordinator_conn_id = delta_coordinator_conn_id
        self.spec = spec

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return ui_field_behaviour(cls.conn_type)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        return connection_form_widgets(cls.conn_type)

    @cached_property
    def _connection(self) -> tuple[str | None, dict[str, Any]]:
        """(the connection's spec, its credentials), resolved once per hook; (None, {}) without a
        connection. The host may be ``auto``: the connection then supplies only the endpoint."""
        if not self.delta_coordinator_conn_id:
            return None, {}
        conn = self.get_connection(self.delta_coordinator_conn_id)
        if not conn.host:
            raise ValueError(f"connection {self.delta_coordinator_conn_id}: the host field must hold the coordinator spec (or auto)")
        creds: dict[str, Any] = {"login": conn.login, "password": conn.password}
        aws_conn_id = (conn.extra_dejson or {}).get("aws_conn_id")
        if aws_conn_id and (conn.host.strip().lower() == AUTO or parse_coordinator_spec(conn.host).kind == "dynamodb"):
            access = aws_access(self.get_connection, conn_id=self.delta_coordinator_conn_id, aws_conn_id=aws_conn_id,
                                login=conn.login or None, password=conn.password or None)
            if access.refreshable:  # a role: the provider's session, whose keys are refreshed before they expire
                creds = {"session": access.session()}
            else:
                key, secret, token = access.static_keys()
                creds = {"login": key, "password": secret, "token": token}
        return conn.host, creds

    def get_credentials(self) -> dict[str, Any]:
        """The connection's credentials (``login``/``password``, ``token``; or ``session``: a
        refreshable AWS session for a role), resolved once per hook; empty without a connection."""
        return self._connection[1]

    @property
    def _resolved(self) -> tuple[str, dict[str, Any]]:
        spec, creds = self._connection
        if self.spec:
            return self.spec, creds
        if not spec:
            raise ValueError("a coordinator spec or a delta_coordinator connection is required")
        return spec, creds

    def resolve_spec(self) -> tuple[str, str | None, str | None]:
        """(spec, login, password) from the argument or the connection."""
        spec, creds = self._resolved
        return spec, creds.get("login"), creds.get("password")

    def open_table(self, table_uri: str, storage_options: Mapping[str, Any] | None = None, *, allow_unsafe_writes: bool = False) -> MaintainedTable:
        """The table's identity, built once: its coordinator from the spec argument or the
        connection (``auto``: discovered from the table, the connection supplying the endpoint),
        and its per-table conf from the table's own metadata."""
        connection_spec, creds = self._connection
        self.record_lineage(table_uri)
        return open_table(
            table_uri, storage_options, coordinator=self.spec or None, connection_spec=connection_spec,
            credentials=creds, allow_unsafe_writes=allow_unsafe_writes,
        )

    def record_lineage(self, table_uri: str, *, output: bool = False) -> None:
        """Hook-level lineage: the table read (its asset), or the published log written
        (``output``), reported to Airflow's hook lineage collector (a no-op unless a lineage
        reader such as OpenLineage is enabled)."""
        from ..maintenance.table.lineage import published_log_asset_uri, table_asset_uri
        from ..version_compat import get_hook_lineage_collector

        collector = get_hook_lineage_collector()
        if output:
            collector.add_output_asset(context=self, uri=published_log_asset_uri(table_uri))
        else:
            collector.add_input_asset(context=self, uri=table_asset_uri(table_uri))

    def get_client(self, storage_options: Mapping[str, Any] | None = None) -> CommitCoordinatorClient:
        spec, creds = self._resolved
        return open_coordinator(spec, storage_options, credentials=creds)

    def describe(self) -> str:
        return self._resolved[0].split("?", 1)[0]

    def test_connection(self) -> tuple[bool, str]:
        """One real, read-only call: the embedded database exists and is readable; DynamoDB
        ``DescribeTable``; Unity Catalog ``GET config`` and the table."""
        if self._resolved[0].strip().lower() == AUTO:
            return True, "auto: the coordinator is discovered from each table's own properties; there is no endpoint to contact"
        try:
            client = self.get_client()
            try:
                message = client.check()
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - reported to the UI
            return False, f"{type(exc).__name__}: {exc}"
        return True, message
