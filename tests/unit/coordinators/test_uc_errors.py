"""Unity Catalog error mapping and retries, against a scripted HTTP server on 127.0.0.1.

Both error shapes are exercised: the Delta API v1's ``{"error": {"type": ...}}`` and the UC REST
API's ``{"error_code": ...}`` used by the preview commits API.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from airflow_delta_maintenance.coordinators.errors import (
    AuthenticationError,
    CommitConflictError,
    CommitLimitReachedError,
    CoordinatorError,
    PermissionDeniedError,
    TableNotFoundError,
)
from airflow_delta_maintenance.coordinators.unity_catalog import UnityCatalogCoordinator
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.table.coordinator_client import StoreFileWriter

SECRET = "dapi-super-secret-token-0123456789"
TID = "11111111-2222-3333-4444-555555555555"
Reply = tuple[int, Any, dict[str, str]]  # a JSON body, or raw bytes


class Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next scripted reply; records method, path, body and auth."""

    protocol_version = "HTTP/1.1"
    script: ClassVar[list[Reply]] = []
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *a: object) -> None:
        pass

    def _reply(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Scripted.seen.append({"method": self.command, "path": self.path, "body": json.loads(raw) if raw else None,
                              "auth": self.headers.get("Authorization", "")})
        status, body, headers = Scripted.script.pop(0)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _reply


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def server(scripted_server: str) -> str:
    Scripted.script, Scripted.seen = [], []
    return scripted_server


def client(host: str, api: str = "v1", tmp_path: Path | None = None) -> UnityCatalogCoordinator:
    return UnityCatalogCoordinator(host, "main.s.t", api=api, tls=False, token=SECRET, table_id=TID, backoff_s=0.001, negotiate=False,
                                   writer_factory=(lambda uri: StoreFileWriter(open_table_storage(uri))) if tmp_path else None)


def ok(body: dict[str, Any]) -> Reply:
    return 200, body, {}


def v1_err(status: int, kind: str, message: str = "m", headers: dict[str, str] | None = None) -> Reply:
    return status, {"error": {"code": status, "type": kind, "message": message}}, headers or {}


def uc_err(status: int, code: str, message: str = "m") -> Reply:
    return status, {"error_code": code, "message": message, "details": [{"reason": code}]}, {}


def load(latest: int = 3, commits: list[dict[str, Any]] | None = None, location: str = "") -> Reply:
    meta = {"table-uuid": TID, "location": location} if location else {"table-uuid": TID}
    return ok({"metadata": meta, "commits": commits or [], "latest-table-version": latest})


PREVIEW_OK = ok({"commits": [], "latest_table_version": 3})


@pytest.mark.parametrize(("api", "transient", "final"), [
    ("v1", v1_err(503, "ServiceUnavailable"), load()),
    ("v1", v1_err(429, "TooManyRequestsException"), load()),
    ("v1", v1_err(500, "InternalServerErrorException"), load()),
    ("preview", uc_err(429, "REQUEST_LIMIT_EXCEEDED"), PREVIEW_OK),
    ("preview", (429, {}, {}), PREVIEW_OK),  # throttled without a body
    ("preview", uc_err(503, "TEMPORARILY_UNAVAILABLE"), PREVIEW_OK),
])
def test_transient_errors_are_retried_then_succeed(server: str, api: str, transient: Reply, final: Reply) -> None:
    Scripted.script = [transient, transient, final]
    assert client(server, api).latest_ratified_version("/t") == 3
    assert [s["auth"] for s in Scripted.seen] == [f"Bearer {SECRET}"] * 3  # the token on every attempt


def test_retry_after_is_honoured(server: str) -> None:
    uc = client(server)
    slept: list[float] = []
    uc._http._sleep = slept.append
    Scripted.script = [v1_err(429, "TooManyRequestsException", headers={"Retry-After": "2"}), load()]
    assert uc.latest_ratified_version("/t") == 3 and slept == [2.0]


@pytest.mark.parametrize(("api", "reply"), [
    ("v1", v1_err(429, "ResourceExhaustedException")),
    ("preview", uc_err(429, "RESOURCE_EXHAUSTED")),
])
def test_resource_exhausted_is_a_commit_limit_not_a_retry(server: str, api: str, reply: Reply) -> None:
    Scripted.script = [reply, PREVIEW_OK]
    with pytest.raises(CommitLimitReachedError) as e:
        client(server, api).latest_ratified_version("/t")
    assert e.value.retryable and not e.value.conflict and len(Scripted.seen) == 1


@pytest.mark.parametrize(("reply", "exc"), [
    (v1_err(404, "NoSuchTableException"), TableNotFoundError),
    (uc_err(404, "TABLE_NOT_FOUND"), TableNotFoundError),
    (v1_err(400, "InvalidParameterValueException"), CoordinatorError),
    (uc_err(400, "INVALID_ARGUMENT"), CoordinatorError),
    (v1_err(401, "NotAuthorizedException"), CoordinatorError),
    (uc_err(403, "PERMISSION_DENIED"), CoordinatorError),
    (v1_err(501, "NotImplementedException"), CoordinatorError),
])
def test_permanent_errors_are_not_retried(server: str, reply: Reply, exc: type[CoordinatorError]) -> None:
    Scripted.script = [reply, load()]
    with pytest.raises(exc) as e:
        client(server).latest_ratified_version("/t")
    assert not e.value.retryable and len(Scripted.seen) == 1
    assert str(reply[0]) in str(e.value)


def test_exhausted_retries_surface_as_retryable(server: str) -> None:
    Scripted.script = [v1_err(500, "CommitStateUnknownException")] * 5
    with pytest.raises(CoordinatorError) as e:
        client(server).latest_ratified_version("/t")
    assert e.value.retryable and len(Scripted.seen) == 5 and "after 5 attempts" in str(e.value)


def test_connection_errors_are_retried_and_bounded() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(CoordinatorError) as e:
        UnityCatalogCoordinator(f"127.0.0.1:{port}", "a.b.c", tls=False, table_id=TID, max_attempts=3, backoff_s=0.001).latest_ratified_version("/t")
    assert e.value.retryable and "after 3 attempts" in str(e.value)


@pytest.mark.parametrize(("api", "conflict"), [
    ("v1", v1_err(409, "CommitVersionConflictException")),
    ("preview", uc_err(409, "COMMIT_VERSION_CONFLICT")),
])
def test_a_commit_conflict_is_typed(server: str, tmp_path: Path, api: str, conflict: Reply) -> None:
    table = tmp_path / "t"
    first = load(0, location=f"file://{table}") if api == "v1" else ok({"commits": [], "latest_table_version": 0})
    theirs = {"version": 1, "timestamp": 5, "file_name": "00000000000000000001.other.json", "file_size": 9, "file_modification_timestamp": 1}
    reload = (load(1, [{k.replace("_", "-"): v for k, v in theirs.items()}], f"file://{table}") if api == "v1"
              else ok({"commits": [theirs], "latest_table_version": 1}))
    Scripted.script = [first, conflict, reload]  # the 409 is judged by content: UC tracks another file as version 1
    with pytest.raises(CommitConflictError) as e:
        client(server, api, tmp_path).commit(str(table), 1, [{"add": {"path": "a"}}])
    assert e.value.retryable and e.value.conflict and e.value.version == 1
    sent = Scripted.seen[1]["body"]
    if api == "v1":
        assert sent["requirements"] == [{"type": "assert-table-uuid", "uuid": TID}]
        assert sent["updates"][0]["action"] == "add-commit" and sent["updates"][0]["commit"]["version"] == 1
    else:
        assert sent["table_id"] == TID and sent["table_uri"] == f"file://{table}" and sent["commit_info"]["version"] == 1


def test_a_lost_commit_answer_is_recovered_by_its_file_name(server: str, tmp_path: Path) -> None:
    table = tmp_path / "t"
    uc = client(server, "v1", tmp_path)
    uc._http.max_attempts = 2
    Scripted.script = [load(0, location=f"file://{table}"), v1_err(500, "CommitStateUnknownException"), v1_err(500, "CommitStateUnknownException")]

    def reload_with_our_commit() -> None:  # the catalog did ratify it: answer the reload with it
        name = Scripted.seen[1]["body"]["updates"][0]["commit"]["file-name"]
        Scripted.script.append(load(1, [{"version": 1, "timestamp": 5, "file-name": name, "file-size": 1, "file-modification-timestamp": 1}], f"file://{table}"))

    original = Scripted._reply

    def hook(self: Scripted) -> None:
        if len(Scripted.seen) == 3:
            reload_with_our_commit()
        original(self)

    Scripted.do_GET = Scripted.do_POST = hook  # type: ignore[method-assign]
    try:
        ratified = uc.commit(str(table), 1, [{"add": {"path": "a"}}])
    finally:
        Scripted.do_GET = Scripted.do_POST = original  # type: ignore[method-assign]
    assert ratified.version == 1 and [s["method"] for s in Scripted.seen] == ["GET", "POST", "POST", "GET"]


def test_a_report_refused_with_409_is_retryable_not_a_commit_conflict(server: str) -> None:
    Scripted.script = [v1_err(409, "UpdateRequirementConflictException")]
    with pytest.raises(CoordinatorError) as e:
        client(server).report_published("/t", 2)
    assert e.value.retryable and not isinstance(e.value, CommitConflictError)
    assert Scripted.seen[0]["body"]["updates"] == [{"action": "set-latest-backfilled-version", "latest-published-version": 2}]


def test_a_table_at_another_location_is_refused(server: str) -> None:
    Scripted.script = [load(3, location="s3://bucket/elsewhere")]
    with pytest.raises(CoordinatorError, match="lives at s3://bucket/elsewhere") as e:
        client(server).get_commits("s3a://bucket/mine")
    assert not e.value.retryable


def test_a_recreated_table_is_not_ours(server: str) -> None:
    Scripted.script = [ok({"metadata": {"table-uuid": "another"}, "commits": [], "latest-table-version": 0})]
    with pytest.raises(TableNotFoundError, match="belongs to table another"):
        client(server).get_commits("/t")


def test_the_token_never_appears_in_descriptions_or_errors(server: str) -> None:
    uc = client(server)
    assert SECRET not in uc.describe() and SECRET not in repr(uc) and SECRET not in repr(uc._http)
    for reply in (v1_err(403, "PermissionDeniedException", f"token {SECRET} lacks MODIFY"),
                  uc_err(429, "RESOURCE_EXHAUSTED", f"echo {SECRET}"),
                  v1_err(409, "CommitVersionConflictException", f"echo {SECRET}")):
        Scripted.script = [reply]
        with pytest.raises(Exception) as e:
            uc.report_published("/t", 2)
        assert SECRET not in str(e.value) and SECRET not in repr(e.value)
    Scripted.script = [v1_err(503, "Unavailable", f"echo {SECRET}")] * 5
    with pytest.raises(CoordinatorError) as e:
        uc.latest_ratified_version("/t")
    assert SECRET not in str(e.value)


def test_v1_negotiates_the_protocol_once(server: str) -> None:
    uc = UnityCatalogCoordinator(server, "main.s.t", tls=False, token=SECRET, table_id=TID)
    Scripted.script = [ok({"endpoints": [], "protocol-version": "1.0"}), load(), load()]
    assert uc.latest_ratified_version("/t") == 3 and uc.latest_ratified_version("/t") == 3
    assert [s["path"] for s in Scripted.seen] == ["/api/2.1/unity-catalog/delta/v1/config?catalog=main&protocol-versions=1.0",
                                                  "/api/2.1/unity-catalog/delta/v1/catalogs/main/schemas/s/tables/t",
                                                  "/api/2.1/unity-catalog/delta/v1/catalogs/main/schemas/s/tables/t"]


@pytest.mark.parametrize(("reply", "needle"), [
    (uc_err(404, "NOT_FOUND"), "does not serve the Delta API v1"),
    (ok({"endpoints": [], "protocol-version": "2.0"}), "negotiated Delta API protocol '2.0'"),
])
def test_a_server_without_v1_is_a_clear_error(server: str, reply: Reply, needle: str) -> None:
    Scripted.script = [reply]
    with pytest.raises(CoordinatorError, match=needle) as e:
        UnityCatalogCoordinator(server, "main.s.t", tls=False, table_id=TID).latest_ratified_version("/t")
    assert not e.value.retryable


TEXT_OK: Reply = (200, b"200 OK", {"Content-Type": "text/plain; charset=utf-8"})  # the OSS server's commit answer


@pytest.mark.parametrize("api", ["v1", "preview"])
def test_a_report_answered_200_text_plain_is_success_in_one_request(server: str, api: str) -> None:
    Scripted.script = [TEXT_OK]
    client(server, api).report_published("/t", 2)
    assert len(Scripted.seen) == 1


def test_a_read_answered_2xx_without_json_is_retried_not_taken_as_empty(server: str) -> None:
    Scripted.script = [TEXT_OK, load(7)]
    assert client(server).latest_ratified_version("/t") == 7 and len(Scripted.seen) == 2


def test_401_and_403_are_typed_and_403_names_the_privilege(server: str) -> None:
    Scripted.script = [uc_err(401, "UNAUTHENTICATED", "Invalid access token.")]
    with pytest.raises(AuthenticationError, match="not valid for this server"):
        client(server).latest_ratified_version("/t")
    Scripted.script = [uc_err(403, "PERMISSION_DENIED", "Access denied.")]
    with pytest.raises(PermissionDeniedError, match=re.escape("needs USE CATALOG on catalog main, USE SCHEMA on schema main.s and MODIFY on table main.s.t")):
        client(server, "preview").report_published("/t", 2)
    Scripted.script = [uc_err(403, "PERMISSION_DENIED", "Access denied.")]
    with pytest.raises(PermissionDeniedError, match=re.escape("SELECT or MODIFY on table main.s.t")):
        client(server).latest_ratified_version("/t")


@pytest.mark.parametrize(("reply", "missing"), [
    (uc_err(404, "CATALOG_NOT_FOUND", "Catalog not found: main"), "catalog"),
    (v1_err(404, "NoSuchCatalogException", "Catalog not found: main"), "catalog"),
])
def test_a_missing_catalog_on_config_is_not_a_missing_v1(server: str, reply: Reply, missing: str) -> None:
    Scripted.script = [reply]
    with pytest.raises(TableNotFoundError, match="the catalog 'main' does not exist") as e:
        UnityCatalogCoordinator(server, "main.s.t", tls=False, table_id=TID).latest_ratified_version("/t")
    assert e.value.missing == missing and "Delta API v1" not in str(e.value)
