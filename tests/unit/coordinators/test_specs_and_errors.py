from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from airflow_delta_maintenance.coordinators.errors import (
    CommitConflictError,
    CommitLimitReachedError,
    CoordinatorError,
    InvalidCoordinatorSpecError,
    TableNotFoundError,
)
from airflow_delta_maintenance.coordinators.registry import parse_coordinator_spec
from airflow_delta_maintenance.coordinators.unity_catalog import UnityCatalogCoordinator

SECRET = "dapi-super-secret-token"


@pytest.mark.parametrize(
    ("spec", "kind", "target"),
    [
        ("local:///var/lib/c.db", "local", "/var/lib/c.db"),
        ("local://rel/c.db", "local", "rel/c.db"),
        ("dynamodb://delta_commits?region=eu-west-1&endpoint=http://127.0.0.1:8000", "dynamodb", "delta_commits"),
        ("unity-catalog://uc.example.com:8080/main.sales.orders?api=preview&tls=false&table_id=x", "unity-catalog", "uc.example.com:8080"),
    ],
)
def test_specs_parse(spec: str, kind: str, target: str) -> None:
    parsed = parse_coordinator_spec(spec)
    assert (parsed.kind, parsed.target) == (kind, target)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nope", "must look like"),
        ("ftp://x", "unknown kind"),
        ("local://", "path is missing"),
        ("dynamodb://t", "region"),
        ("dynamodb://t?region=x&colour=blue", "unknown parameter 'colour'"),
        ("unity-catalog://h:1/main.orders", "catalog>.<schema>.<table>"),
        ("unity-catalog://h:1/a.b.c?api=v9", "api must be"),
        ("unity-catalog://h:1/a.b.c?token=abc", "unknown parameter 'token'"),
    ],
)
def test_bad_specs_name_the_problem(spec: str, needle: str) -> None:
    with pytest.raises(InvalidCoordinatorSpecError) as err:
        parse_coordinator_spec(spec)
    assert needle in str(err.value)


class Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, body); records auth headers."""

    script: list[tuple[int, dict]] = []
    seen_auth: list[str] = []

    def log_message(self, *a: object) -> None:
        pass

    def _reply(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Scripted.seen_auth.append(self.headers.get("Authorization", ""))
        status, body = Scripted.script.pop(0)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _reply


@pytest.fixture
def uc() -> Iterator[UnityCatalogCoordinator]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Scripted.script, Scripted.seen_auth = [], []
    yield UnityCatalogCoordinator(f"127.0.0.1:{server.server_port}", "main.s.t", tls=False, token=SECRET, table_id="tid", backoff_s=0.01)
    server.shutdown()


LOAD = {"metadata": {"table-uuid": "tid"}, "commits": [], "latest-table-version": 3}


def err(status: int, kind: str) -> tuple[int, dict]:
    return status, {"error": {"code": status, "type": kind, "message": "m"}}


def test_transient_errors_are_retried_then_succeed(uc: UnityCatalogCoordinator) -> None:
    Scripted.script = [err(503, "Unavailable"), err(429, "TooManyRequestsException"), (200, LOAD)]
    assert uc.latest_ratified_version("/t") == 3
    assert Scripted.seen_auth == [f"Bearer {SECRET}"] * 3


def test_resource_exhausted_is_a_commit_limit_not_a_retry(uc: UnityCatalogCoordinator) -> None:
    Scripted.script = [err(429, "ResourceExhaustedException")]
    with pytest.raises(CommitLimitReachedError) as e:
        uc.latest_ratified_version("/t")
    assert e.value.retryable and not Scripted.script


@pytest.mark.parametrize(("status", "kind", "exc"), [(404, "NoSuchTableException", TableNotFoundError), (400, "InvalidParameterValueException", CoordinatorError)])
def test_permanent_errors_are_not_retried(uc: UnityCatalogCoordinator, status: int, kind: str, exc: type) -> None:
    Scripted.script = [err(status, kind), (200, LOAD)]
    with pytest.raises(exc) as e:
        uc.latest_ratified_version("/t")
    assert not e.value.retryable and len(Scripted.script) == 1


def test_exhausted_retries_surface_as_retryable(uc: UnityCatalogCoordinator) -> None:
    Scripted.script = [err(500, "CommitStateUnknownException")] * 5
    with pytest.raises(CoordinatorError) as e:
        uc.latest_ratified_version("/t")
    assert e.value.retryable


def test_conflicts_are_typed(uc: UnityCatalogCoordinator, tmp_path) -> None:
    from airflow_delta_maintenance.maintenance.coordinator import StoreFileWriter
    from airflow_delta_maintenance.deltalog.storage import open_table_storage

    uc.writer_factory = lambda uri: StoreFileWriter(open_table_storage(uri))
    Scripted.script = [(200, {"metadata": {"table-uuid": "tid"}, "commits": [], "latest-table-version": 0}), err(409, "CommitVersionConflictException")]
    with pytest.raises(CommitConflictError):
        uc.commit(str(tmp_path / "t"), 1, [{"add": {"path": "a"}}])


def test_the_token_never_appears_in_descriptions_or_errors(uc: UnityCatalogCoordinator) -> None:
    assert SECRET not in uc.describe() and SECRET not in repr(uc)
    Scripted.script = [err(403, "PermissionDenied")]
    with pytest.raises(CoordinatorError) as e:
        uc.latest_ratified_version("/t")
    assert SECRET not in str(e.value) and SECRET not in repr(e.value)
