"""Coordinator contract targets: each kind opened through ``open_coordinator`` on a real server.

- ``local``: the embedded SQLite coordinator;
- ``dynamodb``: DynamoDB Local (official jar), one fresh coordinator table per test;
- ``uc-oss-<version>[-auth]-<api>``: the real Unity Catalog OSS server (0.6.0, 0.5.1; authorization
  off, or on with the admin's token), Delta API v1 and preview commits API (``tests/_infra/uc_oss``);
- ``uc-standin-<api>``: the UC OpenAPI stand-in (``tests/uc_openapi_server``), only for the faults
  the real server cannot be made to produce (lost answers, 5xx, throttling).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.coordinators.base import CommitCoordinatorClient
from airflow_delta_maintenance.deltalog.storage import normalize_table_uri, open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import MaintainedTable
from tests._infra.uc_oss import SERVERS, server_id
from tests.helpers.tables import bind_table

APIS = ("v1", "preview")
UC_OSS_KINDS = [f"uc-{server_id(v, auth)}-{api}" for v, auth in SERVERS for api in APIS]
# The contract on the real server: each of the four servers once, each with one API, so that every
# pair of (version, authorization, API) values meets once (an orthogonal array over three two-valued
# factors). The whole cross product (8) repeated each test on the same server with the same client
# path; tests whose answer depends on the version and authorization together (missing objects,
# 401/403, privileges) keep their own lists over every server.
UC_OSS_PAIRWISE_KINDS = ["uc-oss-0.6.0-v1", "uc-oss-0.6.0-auth-preview", "uc-oss-0.5.1-preview", "uc-oss-0.5.1-auth-v1"]
assert set(UC_OSS_PAIRWISE_KINDS) <= set(UC_OSS_KINDS), UC_OSS_PAIRWISE_KINDS
UC_STANDIN_KINDS = [f"uc-standin-{api}" for api in APIS]
KINDS = ["local", "dynamodb", *UC_OSS_PAIRWISE_KINDS]


def uc_server_of(kind: str) -> tuple[str, bool] | None:
    """(version, authorization) of an ``uc-oss-…`` kind; ``None`` for the stand-in."""
    middle = kind.removeprefix("uc-").rsplit("-", 1)[0]
    return next(((v, auth) for v, auth in SERVERS if server_id(v, auth) == middle), None)


@dataclass
class Target:
    kind: str
    spec: str
    table_uri: str
    client: CommitCoordinatorClient
    opened: list[CommitCoordinatorClient]
    table: MaintainedTable = field(init=False)

    def __post_init__(self) -> None:
        # the table's identity as production builds it: the per-table conf read from the table
        self.table = self.bound(self.client)

    def bound(self, client: CommitCoordinatorClient) -> MaintainedTable:
        """The table's identity over ``client`` (the conf is read from the table, never typed)."""
        return bind_table(open_table_storage(self.table_uri), client)

    def open(self) -> CommitCoordinatorClient:
        """Another client of the same coordinator (as another process would have)."""
        client = open_coordinator(self.spec)
        self.opened.append(client)
        return client


def add(path: str, size: int = 1) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": size, "modificationTime": 1, "dataChange": True}}


def make_spec(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> str:
    if kind == "local":
        return f"local://{tmp_path}/coordinator.db?create=true"
    if kind == "dynamodb":
        endpoint = request.getfixturevalue("dynamodb_endpoint")
        request.getfixturevalue("aws_env")
        return f"dynamodb://{request.getfixturevalue('dynamodb_table_name')}?region=us-east-1&endpoint={endpoint}"
    api = kind.rsplit("-", 1)[1]
    monkeypatch = request.getfixturevalue("monkeypatch")
    real = uc_server_of(kind)
    server = request.getfixturevalue("uc_oss_servers").get(*real) if real else request.getfixturevalue("uc_server")
    if server.token:  # what a user configures: the token in the environment (or the connection's password)
        monkeypatch.setenv(UC_TOKEN_ENV, server.token)
    else:
        monkeypatch.delenv(UC_TOKEN_ENV, raising=False)
    return f"unity-catalog://{server.host}/main.default.t{uuid.uuid4().hex[:10]}?api={api}&tls=false"


def create_table(kind: str, client: Any, tmp_path: Path) -> str:
    """A new table with version 0 committed through ``client``; returns its URI."""
    if kind == "dynamodb":
        client.create_dynamodb_table()
    if kind.startswith("uc"):
        table_uri = normalize_table_uri(client.create_staging_table())  # UC chooses managed locations
    else:
        table_uri = str(tmp_path / "table")
    client.commit(table_uri, 0, create_actions(ict=True))
    return table_uri




def new_target(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Target:
    """A new table with version 0 on a coordinator of ``kind``, and its identity."""
    spec = make_spec(request, kind, tmp_path)
    client = open_coordinator(spec)
    table_uri = create_table(kind, client, tmp_path)
    return Target(kind, spec, table_uri, client, [client])
