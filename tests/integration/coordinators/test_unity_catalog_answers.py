"""Unity Catalog answers are input: the real UC OSS server (0.6.0) behind a fault proxy that makes
its ``loadTable`` (v1) or ``getCommits`` (preview) answer malformed on the wire, met as users meet
it (``delta-maintenance publish|versions``). Each shape is one typed line naming the table and the
version or field, exit 4, and nothing written. Before, a missing ``latest-table-version`` read as
0 (a green "nothing to publish"), a string version or a fractional size was taken as a number,
commits given as a string or a duplicated commit ended in a traceback or went unnoticed.

And the right to report is learned before anything is copied: on a server with authorization, a
principal without MODIFY is told so by ``check_may_report`` and its publish writes no file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.errors import PermissionDeniedError
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from tests._infra.fault_proxy import Exchange, FaultProxy
from tests._infra.uc_oss import OSSServers
from tests.integration.coordinators._targets import UC_OSS_KINDS, Target, add, new_target, uc_server_of

pytestmark = pytest.mark.integration

Body = dict[str, Any]


def log_state(uri: str) -> dict[str, bytes]:
    log = Path(uri) / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


def is_read(exchange: Exchange) -> bool:
    """The answers that carry the ratified commits: v1 ``loadTable``, preview ``getCommits``."""
    return exchange.method == "GET" and ("/delta/v1/catalogs/" in exchange.path or exchange.path.endswith("/delta/preview/commits"))


def commits_key(body: Body) -> str:
    return "latest-table-version" if "latest-table-version" in body else "latest_table_version"


def _latest(value: Any) -> Callable[[Body], None]:
    def apply(body: Body) -> None:
        key = commits_key(body)
        if value is None:
            del body[key]
        else:
            body[key] = value
    return apply


def _field(name: str, value: Any, version: int = 1) -> Callable[[Body], None]:
    """Set ``name`` (its v1 hyphenated or preview underscored spelling) of the commit of ``version``."""
    def apply(body: Body) -> None:
        entry = next(c for c in body["commits"] if c["version"] == version)
        key = name if name in entry else name.replace("_", "-")
        entry[key] = value
    return apply


def _commits(fn: Callable[[list[Body]], Any]) -> Callable[[Body], None]:
    def apply(body: Body) -> None:
        body["commits"] = fn(sorted(body["commits"], key=lambda c: c["version"]))
    return apply


# (id, change to the server's answer, error type, what the one line must name)
SHAPES: list[tuple[str, Callable[[Body], None], str, str]] = [
    ("no-latest-version", _latest(None), "MalformedAnswerError", "table_version is missing"),
    ("latest-version-a-string", _latest("2"), "MalformedAnswerError", "is '2', not a whole number"),
    ("version-a-fraction", _field("version", 1.5), "MalformedAnswerError", "version is 1.5, not a whole number"),
    ("file-size-a-fraction", _field("file_size", 1.5), "MalformedAnswerError", "the commit of version 1: file_size is 1.5, not a whole number"),
    ("timestamp-a-boolean", _field("timestamp", True, version=2), "MalformedAnswerError", "the commit of version 2: timestamp is True"),
    ("file-name-a-path", _field("file_name", "../../../etc/00000000000000000001.x.json"), "MalformedAnswerError",
     "not a staged commit file name"),
    ("commits-a-string", lambda body: body.update(commits=json.dumps(body["commits"])), "MalformedAnswerError", "commits is '["),
    ("commit-not-an-object", _commits(lambda cs: [cs[0], "00000000000000000002.json"]), "MalformedAnswerError",
     "commits[] is '00000000000000000002.json', not an object"),
    ("duplicated-commit", _commits(lambda cs: [*cs, cs[-1]]), "InconsistentCommitsError", "version 2 is listed twice"),
    ("short-of-the-head", _latest(3), "InconsistentCommitsError", "stop at version 2, but the latest ratified version is 3"),
    ("above-the-head", _latest(1), "InconsistentCommitsError", "version 2 is listed above the latest ratified version 1"),
]
KINDS = [k for k in UC_OSS_KINDS if k.startswith("uc-oss-0.6.0-") and "-auth-" not in k]


@pytest.fixture(params=KINDS)
def proxied(request: pytest.FixtureRequest, tmp_path: Path, fault_proxy: Callable[[str], FaultProxy]) -> tuple[Target, FaultProxy, str]:
    """A UC table with versions 1 and 2 ratified, and the table's spec through the proxy."""
    target = new_target(request, str(request.param), tmp_path)
    for v in (1, 2):
        target.table.commit(v, [add(f"f{v}")])
    host = target.spec.split("/")[2]
    proxy = fault_proxy(host)
    return target, proxy, target.spec.replace(host, proxy.host, 1)


@pytest.mark.parametrize(("change", "error", "named"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_a_malformed_answer_stops_publish_and_versions_with_one_typed_line(
    proxied: tuple[Target, FaultProxy, str], capsys: pytest.CaptureFixture[str], change: Callable[[Body], None], error: str, named: str
) -> None:
    target, proxy, spec = proxied

    def rewrite(raw: bytes) -> bytes:
        body = json.loads(raw)
        change(body)
        return json.dumps(body).encode()

    proxy.rewrite_answer(is_read, rewrite)
    before = log_state(target.table_uri)
    for command in ("publish", "versions"):
        code = main([command, target.table_uri, "--coordinator", spec])
        out, err = capsys.readouterr()
        assert (code, out) == (4, ""), (command, code, out, err)
        assert err.count("\n") == 1 and err.startswith(f"delta-maintenance: error: {error}: "), (command, err)
        assert named in err.replace("-", "_") and target.table_uri in err, (command, err)  # v1 spells fields with hyphens
    assert any(x.status == 200 and is_read(x) for x in proxy.exchanges)  # the real server answered; the wire changed it
    assert log_state(target.table_uri) == before
    assert [c.version for c in target.table.get_commits(0, None).commits] == [1, 2]  # nothing reported


def test_the_same_table_publishes_through_the_proxy_unchanged(proxied: tuple[Target, FaultProxy, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The control: without a rewrite the same command publishes and reports."""
    target, _, spec = proxied
    assert main(["publish", target.table_uri, "--coordinator", spec, "--json"]) == 0
    assert (lambda r: (r["from_version"], r["to_version"], r["count"]))(json.loads(capsys.readouterr().out)) == (1, 2, 2)


# ---- the right to report, learned before copying ------------------------------------------------

AUTH_KINDS = [k for k in UC_OSS_KINDS if "-auth-" in k]


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_a_principal_without_modify_learns_it_before_publishing_and_publishes_no_file(
    request: pytest.FixtureRequest, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = new_target(request, kind, tmp_path)
    for v in (1, 2):
        target.table.commit(v, [add(f"f{v}")])
    server = request.getfixturevalue("uc_oss_servers")
    assert isinstance(server, OSSServers)
    oss = server.get(*uc_server_of(kind))  # type: ignore[misc]
    table = target.spec.split("/")[3].split("?")[0]
    email = f"reader-{tmp_path.name[-8:]}-{kind.rsplit('-', 1)[1]}@example.com"
    token = oss.user_token(email)
    oss.grant("catalog", "main", email, "USE CATALOG")
    oss.grant("schema", "main.default", email, "USE SCHEMA")
    oss.grant("table", table, email, "SELECT")
    monkeypatch.setenv(UC_TOKEN_ENV, token)
    reader = open_coordinator(target.spec)
    pending = target.bound(reader).get_commits(0, None)  # SELECT is enough to read
    assert [c.version for c in pending.commits] == [1, 2]
    with pytest.raises(PermissionDeniedError) as denied:
        reader.check_may_report(target.table_uri, target.table.table_conf)
    assert "403" in str(denied.value) and f"MODIFY on table {table}" in str(denied.value) and token not in str(denied.value)
    assert not denied.value.retryable
    assert target.bound(reader).get_commits(0, None) == pending  # asking changed nothing
    before = log_state(target.table_uri)
    code = main(["publish", target.table_uri, "--coordinator", target.spec])  # as the user runs it, with that token
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "PermissionDeniedError" in err and f"MODIFY on table {table}" in err, err
    assert log_state(target.table_uri) == before  # before: <v>.json copied, then the 403 on the report
    oss.grant("table", table, email, "MODIFY")
    assert open_coordinator(target.spec).check_may_report(target.table_uri, target.table.table_conf)
    assert main(["publish", target.table_uri, "--coordinator", target.spec, "--json"]) == 0
    assert (lambda r: (r["from_version"], r["to_version"], r["count"]))(json.loads(capsys.readouterr().out)) == (1, 2, 2)
