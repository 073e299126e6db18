"""What the real Unity Catalog OSS server does that the stand-in never did.

Each test runs on the real servers (0.6.0 and 0.5.1, authorization off and on; the id names the
server). Lost answers are made on the client side: the request reaches the real server and is
applied, then the connection "drops" before the answer is read, so the server's own replay and
conflict semantics decide what the resend gets.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.coordinators.errors import (
    AuthenticationError,
    CommitConflictError,
    PermissionDeniedError,
    TableNotFoundError,
)
from airflow_delta_maintenance.coordinators.unity_catalog import UnityCatalogCoordinator
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.coordinator_client import UC_TOKEN_ENV, open_coordinator
from tests._infra.uc_oss import OSSServer, OSSServers, server_id
from tests.helpers.tables import bind_table
from tests.integration.coordinators._targets import UC_OSS_KINDS, UC_OSS_PAIRWISE_KINDS, Target, add, make_spec, new_target, uc_server_of

pytestmark = pytest.mark.integration

PLAIN_KINDS = [k for k in UC_OSS_KINDS if "-auth-" not in k]  # the race needs no second principal


def _target(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Target:
    return new_target(request, kind, tmp_path)


@pytest.fixture(params=UC_OSS_PAIRWISE_KINDS)
def uc(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target(request, str(request.param), tmp_path)


def server_of(request: pytest.FixtureRequest, target: Target) -> OSSServer:
    servers: OSSServers = request.getfixturevalue("uc_oss_servers")
    return servers.get(*uc_server_of(target.kind))  # type: ignore[misc]


def is_commit(req: urllib.request.Request) -> bool:
    body = json.loads(req.data or b"{}") if req.get_method() == "POST" else {}
    return "commit_info" in body or any(u.get("action") == "add-commit" for u in body.get("updates") or [])


def requests_seen(monkeypatch: pytest.MonkeyPatch, *, lose_first: Callable[[urllib.request.Request], bool] | None = None,
                  between: Callable[[], None] = lambda: None, gate: threading.Barrier | None = None) -> list[tuple[str, int]]:
    """Record (method, status) of every UC request; optionally lose the answer of the first request
    matching ``lose_first`` after the server applied it (running ``between`` before the resend),
    and hold every commit POST at ``gate`` so that concurrent writers reach the server together."""
    real = urllib.request.urlopen
    seen: list[tuple[str, int]] = []
    lost = threading.Event()

    def urlopen(req: urllib.request.Request, *args: Any, **kwargs: Any) -> Any:
        commit = is_commit(req)
        if gate is not None and commit:
            gate.wait(timeout=60)
        try:
            resp = real(req, *args, **kwargs)
        except urllib.error.HTTPError as exc:
            seen.append((req.get_method() + (" commit" if commit else ""), exc.code))
            raise
        seen.append((req.get_method() + (" commit" if commit else ""), resp.status))
        if lose_first is not None and not lost.is_set() and lose_first(req):
            lost.set()
            resp.read()
            resp.close()
            between()
            raise ConnectionResetError("injected: the answer was lost after the server applied the request")
        return resp

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return seen


# ---- 2xx answers that are not JSON ---------------------------------------------------------------


def test_a_commit_answered_200_text_plain_is_success_at_once(uc: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Preview commits are answered ``200 text/plain "200 OK"``: one request, no retry, no recovery."""
    seen = requests_seen(monkeypatch)
    ratified = uc.table.commit(1, [add("a")])
    assert [s for s in seen if s[0] == "POST commit"] == [("POST commit", 200)]
    listed = uc.table.get_commits(0, None).commits
    assert [(c.version, c.file_name) for c in listed] == [(1, ratified.file_name)]


def test_cli_publish_exits_0_after_the_server_applied_the_report(uc: Target, capsys: pytest.CaptureFixture[str]) -> None:
    """The backfill report is answered ``200 text/plain`` too: ``delta-maintenance publish`` must succeed."""
    for v in (1, 2):
        uc.table.commit(v, [add(f"f{v}")])
    code = cli_main(["publish", uc.table_uri, "--coordinator", uc.spec, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert (result["from_version"], result["to_version"], result["count"]) == (1, 2, 2) and result["reported_version"] == 2
    assert load_snapshot(uc.table_uri).version == 2
    assert [c.version for c in uc.table.get_commits(0, None).commits] in ([], [2])


# ---- replays after a lost answer, per release ---------------------------------------------------


def test_a_lost_commit_answer_is_resent_and_recognised_as_ours(uc: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.6.0 answers the resend 200 (still tracked); 0.5.1 answers 409 COMMIT_VERSION_CONFLICT,
    which is ours by its tracked file name. The returned commit is what the server recorded."""
    seen = requests_seen(monkeypatch, lose_first=is_commit)
    ratified = uc.table.commit(1, [add("a")])
    resend = [s for s in seen if s[0] == "POST commit"][1]
    assert resend == ("POST commit", 409 if "0.5.1" in uc.kind else 200)
    listed = uc.table.get_commits(0, None)
    assert listed.latest_table_version == 1
    assert [(c.version, c.file_name, c.file_size, c.file_modification_time) for c in listed.commits] == [
        (1, ratified.file_name, ratified.file_size, ratified.file_modification_time)]
    assert ratified.file_size == len(open_table_storage(uc.table_uri).read(ratified.file_name))


def test_a_lost_commit_answer_is_ours_after_another_process_published_and_purged_it(uc: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both releases answer 409 for a purged version: only the published bytes can tell it is ours."""
    other = uc.open()
    store = open_table_storage(uc.table_uri)

    def meanwhile() -> None:  # another process commits 2 and publishes 1..2: UC forgets version 1
        uc.bound(other).commit(2, [add("theirs")])
        assert publish_ratified_commits(bind_table(store, other)).reported_version == 2

    seen = requests_seen(monkeypatch, lose_first=is_commit, between=meanwhile)
    ratified = uc.table.commit(1, [add("ours")])
    assert ratified.version == 1
    assert [s for s in seen if s[0] == "POST commit"][-1] == ("POST commit", 409)  # the resend of 1
    assert store.read("00000000000000000001.json") == store.read(ratified.file_name)
    assert uc.table.latest_ratified_version() == 2  # nothing committed twice
    assert {p for p, _ in load_snapshot(store).active_file_keys()} == {"ours", "theirs"}


def test_a_409_for_a_version_another_writer_won_is_a_conflict(uc: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer took the version between our read and our post: by content, not ours."""
    other = uc.open()
    real = urllib.request.urlopen
    raced = threading.Event()

    def urlopen(req: urllib.request.Request, *args: Any, **kwargs: Any) -> Any:
        if is_commit(req) and not raced.is_set():
            raced.set()
            uc.bound(other).commit(1, [add("theirs")])  # wins version 1 first
        return real(req, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(CommitConflictError) as err:
        uc.table.commit(1, [add("ours")])
    assert err.value.retryable and err.value.version == 1 and "another writer" in str(err.value)


@pytest.mark.parametrize("kind", PLAIN_KINDS)
def test_concurrent_commits_lose_with_a_conflict_even_when_0_5_answers_500(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """8 writers post version N at once, without resends. 0.6.0 answers the losers 409; 0.5.1's preview
    endpoint answers some of them 500 (a unique-index violation): only the content (another file
    tracked as N) proves that such a loser lost, so it gets a conflict, not an unknown outcome."""
    target = _target(request, kind, tmp_path)
    writers = 8
    clients: list[UnityCatalogCoordinator] = [target.open() for _ in range(writers)]  # type: ignore[misc]
    for c in clients:
        c._http.max_attempts = 1  # a 500 must be decided, not hidden by a resend
    tables = [target.bound(c) for c in clients]
    seen = requests_seen(monkeypatch, gate=threading.Barrier(writers))
    outcomes: dict[int, list[str]] = {}
    race_500 = kind == "uc-oss-0.5.1-preview"  # 0.5.1's preview commits have no table lock (its v1 path did not 500 here)
    # 0.5.1 answers 500 only when two inserts meet inside its transaction: on a busy machine that
    # can take more rounds (6 were not enough once), so rounds go on until it happened (or 24)
    for version in range(1, 7 if not race_500 else 25):
        results: list[str] = []

        def write(i: int, v: int = version, results: list[str] = results) -> None:
            try:
                tables[i].commit(v, [add(f"w{i}-{v}")])
                results.append("won")
            except CommitConflictError:
                results.append("conflict")
            except Exception as exc:  # noqa: BLE001 - anything else is the failure under test
                results.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        outcomes[version] = sorted(results)
        if race_500 and ("POST commit", 500) in seen and version >= 2:
            break
    assert all(o == ["conflict"] * (writers - 1) + ["won"] for o in outcomes.values()), outcomes
    statuses = {s for m, s in seen if m == "POST commit"}
    assert statuses <= {200, 409, 500}
    if race_500:
        assert 500 in statuses, f"0.5.1 never answered 500 in {len(outcomes)} rounds: the race under test did not happen"
    elif "0.6.0" in kind:
        assert 500 not in statuses  # 0.6.0 locks the table row: losers get a clean 409
    latest = target.table.get_commits(0, None).latest_table_version
    assert latest == len(outcomes)


# ---- missing catalog, schema, table -------------------------------------------------------------


@pytest.mark.parametrize("kind", UC_OSS_KINDS)
def test_a_missing_catalog_schema_or_table_is_named(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> None:
    spec = make_spec(request, kind, tmp_path)
    api = kind.rsplit("-", 1)[1]
    host = spec.split("//", 1)[1].split("/", 1)[0]
    for name, missing in (("nosuch.default.t", "catalog"), ("main.nosuch.t", "schema"), ("main.default.nosuch", "table")):
        client = open_coordinator(f"unity-catalog://{host}/{name}?api={api}&tls=false")
        with pytest.raises(TableNotFoundError) as err:
            client.latest_ratified_version(str(tmp_path / "t"))
        text = str(err.value)
        assert err.value.missing == missing and f"the {missing}" in text and "does not exist" in text, text
        assert "does not serve the Delta API v1" not in text


# ---- 401 vs 403 ----------------------------------------------------------------------------------

AUTH_KINDS = [k for k in UC_OSS_KINDS if "-auth-" in k]


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_401_and_403_say_what_is_wrong_and_which_privilege_is_missing(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target(request, kind, tmp_path)
    server = server_of(request, target)
    api = kind.rsplit("-", 1)[1]
    table = target.spec.split("/")[3].split("?")[0]
    monkeypatch.delenv(UC_TOKEN_ENV)
    with pytest.raises(AuthenticationError, match="no token was configured") as err:
        open_coordinator(target.spec).latest_ratified_version(target.table_uri)
    assert "401" in str(err.value) and not err.value.retryable
    monkeypatch.setenv(UC_TOKEN_ENV, "not-a-uc-token")
    with pytest.raises(AuthenticationError, match="not valid for this server"):
        open_coordinator(target.spec).latest_ratified_version(target.table_uri)

    email = f"maint-{tmp_path.name[-8:]}-{api}@example.com"
    token = server.user_token(email)
    monkeypatch.setenv(UC_TOKEN_ENV, token)
    with pytest.raises(PermissionDeniedError) as denied:
        open_coordinator(target.spec).latest_ratified_version(target.table_uri)
    assert "403" in str(denied.value) and "USE CATALOG on catalog main" in str(denied.value) and token not in str(denied.value)
    server.grant("catalog", "main", email, "USE CATALOG")
    server.grant("schema", "main.default", email, "USE SCHEMA")
    server.grant("table", table, email, "SELECT")
    reader = open_coordinator(target.spec)
    assert reader.latest_ratified_version(target.table_uri) == 0  # reads need no more than SELECT
    with pytest.raises(PermissionDeniedError) as no_modify:
        target.bound(reader).commit(1, [add("a")])
    assert f"MODIFY on table {table}" in str(no_modify.value)
    server.grant("table", table, email, "MODIFY")
    target.bound(open_coordinator(target.spec)).commit(1, [add("a")])
    assert target.table.latest_ratified_version() == 1


WIDE_KINDS = ["uc-oss-0.5.1-auth-preview", "uc-oss-0.5.1-auth-v1", "uc-oss-0.6.0-auth-preview"]


@pytest.mark.parametrize("kind", WIDE_KINDS)
def test_a_wide_table_is_created_on_every_server_despite_0_5_1s_body_limit(
        request: pytest.FixtureRequest, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """UC 0.5.x with authorization on authorizes a JSON request on the first chunk of its body it
    reads (about 2 KB, less the headers when the server reads late) and answers 500 "EL1023E ...
    resource is null" for a longer body (fixed in 0.6.0). The preview API's create carries the
    columns in the body: on 0.5.1 it is refused once, not resent, and the table is created through
    the same server's Delta API v1 (names in the URL); the preview client then commits to it."""
    from airflow_delta_maintenance.demo.sample_table import create_actions

    spec = make_spec(request, kind, tmp_path)
    client = open_coordinator(spec)
    uri = client.create_staging_table()  # type: ignore[attr-defined]
    actions = create_actions(ict=True)
    meta = actions[1]["metaData"]
    meta["schemaString"] = json.dumps({"type": "struct", "fields": [
        {"name": f"column_{i:03d}", "type": "string", "nullable": True, "metadata": {}} for i in range(40)]})
    meta["partitionColumns"] = []
    seen = requests_seen(monkeypatch)
    client.commit(uri, 0, actions)
    posts = [s for s in seen if s[0] == "POST"]
    assert posts == ([("POST", 500), ("POST", 200)] if kind == "uc-oss-0.5.1-auth-preview" else [("POST", 200)]), posts
    server = request.getfixturevalue("uc_oss_servers").get(*uc_server_of(kind))
    name = spec.split("/")[3].split("?")[0]
    assert [c["name"] for c in server.json("GET", f"/tables/{name}")["columns"]] == [f"column_{i:03d}" for i in range(40)]
    table = bind_table(open_table_storage(uri), open_coordinator(spec))
    table.commit(1, [{"add": {"path": "a", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}])
    assert table.latest_ratified_version() == 1


def test_a_body_0_5_1_cannot_authorize_is_refused_at_once_naming_the_limit_and_the_remedies(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other request 0.5.1 with authorization cannot authorize (here a staging table of a very
    long name): one request, no resend, a one-line non-retryable error with the server's words, the
    body's size and what to do."""
    from airflow_delta_maintenance.coordinators.errors import CoordinatorError

    spec = make_spec(request, "uc-oss-0.5.1-auth-preview", tmp_path).replace("/main.default.t", "/main.default.t" + "x" * 3000)
    seen = requests_seen(monkeypatch)
    with pytest.raises(CoordinatorError) as refused:
        open_coordinator(spec).create_staging_table()  # type: ignore[attr-defined]
    text = str(refused.value)
    assert seen == [("POST", 500)], seen
    assert not refused.value.retryable and "\n" not in text
    assert "POST /staging-tables" in text and "EL1023E" in text and "bytes" in text and "0.6.0" in text and "api=v1" in text, text


def test_every_server_ran(uc_oss_servers: OSSServers) -> None:
    """The servers these tests name are the ones that ran (a guard against a silently reused stand-in)."""
    for version, auth in [("0.6.0", False), ("0.5.1", True)]:
        server = uc_oss_servers.get(version, auth)
        status, _ctype, body = server.call("GET", "/catalogs/main")
        assert status == 200 and json.loads(body)["name"] == "main", (server_id(version, auth), status, body)
        assert (server.run_dir / "uc.version").read_text().strip() == version


# ---- OPTIMIZE on a managed table ------------------------------------------------------------------


@pytest.mark.parametrize("kind", PLAIN_KINDS[:1])
def test_optimize_of_a_managed_table_is_refused_by_default_and_runs_with_the_permission(
        request: pytest.FixtureRequest, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A UC managed table (catalogManaged at version 0) with small data files: ``delta-maintenance
    optimize`` without flags skips it naming the protocol's rule, and commits nothing; with
    ``--allow-catalog-managed`` it commits through the server, and the rows read the same."""
    from airflow_delta_maintenance.demo.sample_table import add_action_for, data_batch
    from airflow_delta_maintenance.maintenance.operations.optimize import CATALOG_MANAGED_RULE
    from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot

    uc = _target(request, kind, tmp_path)
    for v in range(1, 4):
        uc.table.commit(v, [add_action_for(uc.table_uri, data_batch(v * 10, 10, "us"), "us")])

    def ids() -> list[int]:
        from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
        from airflow_delta_maintenance.deltalog.datafiles.reader import iter_live_rows, source_file
        from airflow_delta_maintenance.deltalog.datafiles.schema import data_schema
        from airflow_delta_maintenance.deltalog.optimize.tasks import live_adds

        snap = load_ratified_snapshot(uc.table)
        target = data_schema(snap.metadata.schema, snap.metadata.partition_columns, "none").without_partitions()
        return sorted(i for a in live_adds(snap.files)
                      for live in iter_live_rows(DataFiles(uc.table.store), source_file(a), target, match_by_id=False)
                      for i in live.table.column("id").to_pylist())

    before = ids()
    assert cli_main(["optimize", uc.table_uri, "--coordinator", uc.spec, "--json"]) == 0
    refused = json.loads(capsys.readouterr().out)
    assert refused["skipped"] and refused["reason"] == CATALOG_MANAGED_RULE
    assert "Maintenance Operations on Catalog-managed Tables" in refused["reason"]
    assert uc.table.latest_ratified_version() == 3
    assert cli_main(["optimize", uc.table_uri, "--coordinator", uc.spec, "--allow-catalog-managed", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert not done["skipped"] and done["version"] == 4 and done["files_removed"] == 3 and done["files_added"] == 1
    assert uc.table.latest_ratified_version() == 4  # ratified by the server
    assert ids() == before and load_ratified_snapshot(uc.table).num_files == 1
