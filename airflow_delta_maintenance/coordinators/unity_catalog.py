"""Unity Catalog commit coordination over REST: the Delta API v1 and the preview commits API.

- ``api=v1`` (``/api/2.1/unity-catalog/delta/v1``, Managed Tables spec 1.0): ``getConfig`` once
  per client negotiates protocol 1.x (a server without v1 is a clear error); ``loadTable`` gives
  the un-backfilled ratified commits (newest first, complete) and ``latest-table-version``;
  ``updateTable`` carries ``add-commit`` or ``set-latest-backfilled-version`` under an
  ``assert-table-uuid`` requirement. Tables are created with ``createStagingTable`` → ``<0>.json``
  at the allocated location → ``createTable``.
- ``api=preview`` (``/api/2.1/unity-catalog/delta/preview/commits``): ``POST`` a ``DeltaCommit``
  (without ``commit_info`` it is a pure backfill report), ``GET`` with a ``DeltaGetCommits`` body;
  the server pages (at most 10 versions per answer), so ``get_commits`` follows the pages. Tables
  are created through the UC REST ``/staging-tables`` and ``/tables``.

The UC table id (the preview API's key, and v1's ``assert-table-uuid``) comes from
``table_conf['io.unitycatalog.tableId']`` (the table property), else the spec's ``table_id``, else
it is looked up once by name and cached.

Managed locations are chosen by the catalog: call ``create_staging_table()`` and commit version 0
at the location it returns. Every read checks that the catalog's table still lives at the table URI
(and has the expected id), so a renamed or re-created table is never mistaken for ours.

Whose commit is it? A ratification whose answer was lost (5xx, connection reset) is resent with the
same staged file name. Releases answer such a replay differently: 0.6.0 says ``200`` while UC still
tracks the version; 0.5.x says ``409 COMMIT_VERSION_CONFLICT``, as every release does once the
version was backfilled and purged (≤ 0.4: ``ALREADY_EXISTS``); and under concurrent commits 0.5.x
may answer ``500`` (a unique-index violation) where another writer won. So a 409, or retries that
ran out, is never taken at its word: like delta-spark's ``UCCommitCoordinatorClient`` the client
re-reads the table and decides by the staged file it ratified (``decide_owner``, shared by the
three clients): ours when UC tracks the version under our staged file name, or when its published
``<v>.json`` holds exactly our bytes; another writer's when UC has it otherwise; "unknown"
(retryable, not a conflict) while the version is not ratified at all.

Answers are input: every field of a ``loadTable``/``getCommits`` response and of a staging answer
is type-checked (``answers``); a malformed one is a ``MalformedAnswerError`` naming the table, the
version and the field, and the ratified commits are checked as a set (``InconsistentCommitsError``).
``check_may_report`` asks before publishing whether the principal may report: a backfill report of
version 0 (always true: version 0 is published directly, so the catalog never tracks it), which
the server authorizes exactly as every report (MODIFY) and otherwise ignores.

Error mapping and retries live in ``_uc_http``, the payloads in ``_uc_payloads``; 403 messages name
the privilege each call needs.
The bearer token is never logged, shown or put in an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._uc_http import HttpConflict, HttpRefused, HttpUnknown, UCTransport, body_too_long
from ._uc_payloads import UC_TABLE_ID, _as_url, _column_infos, _commit, _location_key, _managed_actions, _Staging
from .answers import Answer, checked_commits
from .base import CommitsResponse, LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .commit_file import Attempt, CommittingClient, decide_owner, previous_in_commit_timestamp, publish_version_zero, reread_failed, stage_commit
from .errors import CommitConflictError, CommitLimitReachedError, CoordinatorError, TableNotFoundError

__all__ = ["UnityCatalogCoordinator", "UC_TABLE_ID"]

API = "/api/2.1/unity-catalog"
# The catalog-managed contract (Managed Tables spec 1.0); v1 staging responses are authoritative.
_REQUIRED_READER = ["catalogManaged", "deletionVectors", "v2Checkpoint", "vacuumProtocolCheck"]
_REQUIRED_WRITER = [*_REQUIRED_READER, "inCommitTimestamp"]
_REQUIRED_PROPERTIES = {
    "delta.enableInCommitTimestamps": "true",
    "delta.checkpointPolicy": "v2",
    "delta.enableDeletionVectors": "true",
    "delta.checkpoint.writeStatsAsStruct": "true",
    "delta.checkpoint.writeStatsAsJson": "true",
}


@dataclass(frozen=True)
class _State:
    latest: int
    commits: tuple[RatifiedCommit, ...]  # ascending
    table_id: str


class UnityCatalogCoordinator(CommittingClient):
    """``unity-catalog://host:port/<catalog>.<schema>.<table>?api=v1|preview&tls=true|false``."""

    def __init__(
        self,
        host: str,
        full_name: str,
        *,
        api: str = "v1",
        tls: bool = True,
        table_id: str | None = None,
        token: str | None = None,
        writer_factory: LogFileWriterFactory | None = None,
        normalize_uri: Callable[[str], str] = lambda u: u,
        max_attempts: int = 5,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        timeout_s: float = 30.0,
        negotiate: bool = True,
    ) -> None:
        if api not in ("v1", "preview"):
            raise ValueError(f"api must be v1 or preview, not {api!r}")
        self.server = f"{'https' if tls else 'http'}://{host}"
        self.full_name = full_name
        self.catalog, self.schema, self.table = full_name.split(".") if full_name else ("", "", "")
        self.api = api
        self.table_id = table_id
        self.writer_factory = writer_factory
        self.normalize_uri = normalize_uri
        self._resolved_id: str | None = None
        self._negotiated = api != "v1" or not negotiate
        self._staging: dict[str, _Staging] = {}
        self._http = UCTransport(self.server + API, token, describe=self.describe, max_attempts=max_attempts,
                                 backoff_s=backoff_s, max_backoff_s=max_backoff_s, timeout_s=timeout_s)

    def __repr__(self) -> str:
        return f"UnityCatalogCoordinator({self.describe()!r})"

    def describe(self) -> str:
        return f"Unity Catalog {self.api} API at {self.server} for {self.full_name or (self.table_id or 'the table by id')}"

    def close(self) -> None:
        pass

    def check(self) -> str:
        """Read-only health check (a connection's Test button), one attempt per request: v1
        ``GET config`` then the table; preview ``GET`` the table by name."""
        attempts, self._http.max_attempts = self._http.max_attempts, 1
        try:
            answer = Answer(self.describe(), self.full_name)
            if self.api == "v1":
                body = self._http.request("GET", self._v1_table())
                found = answer.json_str(answer.json_object(body.get("metadata"), "metadata"), "table-uuid")
            else:
                found = answer.json_str(self._http.request("GET", f"/tables/{self.full_name}"), "table_id")
        finally:
            self._http.max_attempts = attempts
        return f"{self.describe()}: table found (id {found})"

    # ---- privileges (what a 403 tells the operator to grant) ------------------------------------

    def _needs(self, on_table: str) -> str:
        return (f"USE CATALOG on catalog {self.catalog}, USE SCHEMA on schema {self.catalog}.{self.schema} "
                f"and {on_table} on table {self.full_name} (or ownership)")

    @property
    def _read_needs(self) -> str:
        # loadTable (v1) accepts SELECT or MODIFY; the preview getCommits only SELECT
        return self._needs("SELECT or MODIFY" if self.api == "v1" else "SELECT")

    @property
    def _write_needs(self) -> str:
        return self._needs("MODIFY")

    @property
    def _create_needs(self) -> str:
        return (f"USE CATALOG on catalog {self.catalog}, USE SCHEMA and CREATE TABLE on schema "
                f"{self.catalog}.{self.schema} (or ownership)")

    # ---- identity ----------------------------------------------------------------------------

    def _expected_id(self, table_conf: Mapping[str, str] | None) -> str | None:
        return (table_conf or {}).get(UC_TABLE_ID) or self.table_id

    def _uc_table_id(self, table_conf: Mapping[str, str] | None) -> str:
        tid = self._expected_id(table_conf) or self._resolved_id
        if tid:
            return tid
        answer = Answer(self.describe(), self.full_name)
        if self.api == "v1":
            body = self._http.request("GET", self._v1_table(), privilege=self._read_needs)
            tid = answer.json_str(answer.json_object(body.get("metadata"), "metadata"), "table-uuid")
        else:
            tid = answer.json_str(self._http.request("GET", f"/tables/{self.full_name}", privilege=self._read_needs), "table_id")
        self._resolved_id = tid
        return tid

    def _check_identity(self, uri: str, table_id: str | None, location: str | None, table_conf: Mapping[str, str] | None) -> None:
        expected = self._expected_id(table_conf)
        if expected and table_id and expected != table_id:
            raise TableNotFoundError(f"{self.describe()}: the name now belongs to table {table_id}, not {expected}")
        if location and _location_key(location) != _location_key(uri):
            raise CoordinatorError(f"{self.describe()}: the catalog's table lives at {location}, not {uri}", retryable=False)

    def _v1_table(self) -> str:
        if not self.full_name:
            raise CoordinatorError(f"{self.describe()}: the Delta API v1 needs the table's name (unity-catalog://host:port/<catalog>.<schema>.<table>)", retryable=False)
        self._negotiate()
        return f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/tables/{self.table}"

    def _negotiate(self) -> None:
        """``getConfig`` once per client (the spec's first call): fail clearly on servers without v1."""
        if self._negotiated:
            return
        try:
            body = self._http.request("GET", "/delta/v1/config", query={"catalog": self.catalog, "protocol-versions": "1.0"},
                                      privilege=f"USE CATALOG on catalog {self.catalog} (or ownership)")
        except TableNotFoundError as exc:
            if exc.missing:  # 0.5+ answers 404 CATALOG_NOT_FOUND / NoSuchCatalogException for an unknown catalog
                raise TableNotFoundError(f"{self.describe()}: the catalog {self.catalog!r} does not exist on this server "
                                         "(GET /delta/v1/config answered 404 for it)", missing=exc.missing) from None
            raise CoordinatorError(f"{self.describe()}: the server does not serve the Delta API v1 (GET /delta/v1/config has no route: "
                                   "Unity Catalog ≤ 0.4); use api=preview", retryable=False) from None
        version = str(body.get("protocol-version", ""))
        if not version.startswith("1."):
            raise CoordinatorError(f"{self.describe()}: the server negotiated Delta API protocol {version!r}, not 1.x", retryable=False)
        self._negotiated = True

    # ---- reads -------------------------------------------------------------------------------

    def latest_ratified_version(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> int:
        uri = self.normalize_uri(table_uri)
        if self.api == "v1":
            return self._read(uri, table_conf, 0, None).latest  # one loadTable, checked
        latest, _ = self._preview_page(Answer(self.describe(), uri), uri, self._uc_table_id(table_conf), 0, None)
        return latest

    def get_commits(
        self,
        table_uri: str,
        start_version: int | None = None,
        end_version: int | None = None,
        table_conf: Mapping[str, str] | None = None,
    ) -> CommitsResponse:
        state = self._read(self.normalize_uri(table_uri), table_conf, start_version or 0, end_version)
        return CommitsResponse(state.commits, state.latest)

    def _read(self, uri: str, table_conf: Mapping[str, str] | None, lo: int, hi: int | None) -> _State:
        top = 2**62 if hi is None else hi
        answer = Answer(self.describe(), uri)
        if self.api == "v1":  # loadTable: every tracked commit, newest first
            body = self._http.request("GET", self._v1_table(), privilege=self._read_needs)
            meta = answer.json_object(body.get("metadata"), "metadata")
            table_id = answer.json_str(meta, "table-uuid")
            location = answer.json_str(meta, "location") if meta.get("location") is not None else None  # optional in delta.yaml
            self._check_identity(uri, table_id, location, table_conf)
            latest = answer.json_int(body, "latest-table-version")
            commits = checked_commits(answer, [_commit(answer, c, "-") for c in answer.json_list(body, "commits")], latest,
                                      ordered=False, reaches=latest)
            return _State(latest, tuple(c for c in commits if lo <= c.version <= top), table_id)
        tid = self._uc_table_id(table_conf)
        listed: list[RatifiedCommit] = []
        start = max(lo, 0)
        while True:  # the server answers at most MAX_NUM_COMMITS_PER_TABLE versions per request
            latest, page = self._preview_page(answer, uri, tid, start, hi)
            page = [c for c in page if lo <= c.version <= top]
            listed.extend(page)
            newest = max((c.version for c in page), default=None)
            if newest is None or newest >= min(top, latest):
                return _State(latest, checked_commits(answer, listed, latest, ordered=False, reaches=min(top, latest)), tid)
            start = newest + 1

    def _preview_page(self, answer: Answer, uri: str, tid: str, start: int, hi: int | None) -> tuple[int, list[RatifiedCommit]]:
        """One ``GET delta/preview/commits``: (latest ratified version, the page's commits), typed."""
        req: dict[str, Any] = {"table_id": tid, "table_uri": _as_url(uri), "start_version": start}
        if hi is not None:
            req["end_version"] = hi
        body = self._http.request("GET", "/delta/preview/commits", req, privilege=self._read_needs)
        latest = answer.json_int(body, "latest_table_version")
        page = [_commit(answer, c, "_") for c in answer.json_list(body, "commits")]
        checked_commits(answer, page, latest, ordered=False, reaches=None)  # a page may stop short of the head
        return latest, page

    # ---- writes ------------------------------------------------------------------------------

    def create_staging_table(self) -> str:
        """Ask the catalog for a managed location; commit version 0 there. Returns the location."""
        if self.api == "v1":
            self._negotiate()
            body = self._http.request("POST", f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/staging-tables", {"name": self.table},
                                      privilege=self._create_needs)
            answer = Answer(self.describe(), self.full_name)
            proto = answer.json_object(body.get("required-protocol") or {}, "required-protocol")
            props = answer.json_object(body.get("required-properties") or {}, "required-properties")
            bad = next((k for k, v in props.items() if v is not None and not isinstance(v, str)), None)
            if bad is not None:
                raise answer.malformed(f"required-properties.{bad}", f"is {props[bad]!r}, not a string")
            staging = _Staging(answer.json_str(body, "table-id"), answer.json_str(body, "location"),
                               tuple(answer.json_strings(proto, "reader-features") or _REQUIRED_READER),
                               tuple(answer.json_strings(proto, "writer-features") or _REQUIRED_WRITER),
                               tuple(sorted((k, v) for k, v in props.items() if v is not None)))
        else:
            body = self._http.request("POST", "/staging-tables", {"name": self.table, "catalog_name": self.catalog, "schema_name": self.schema},
                                      privilege=self._create_needs)
            answer = Answer(self.describe(), self.full_name)
            staging = _Staging(answer.json_str(body, "id"), answer.json_str(body, "staging_location"), tuple(_REQUIRED_READER),
                               tuple(_REQUIRED_WRITER), tuple(sorted(_REQUIRED_PROPERTIES.items())))
        self._staging[_location_key(staging.location)] = staging
        return staging.location

    def _commit_next(self, uri: str, writer: LogFileWriter, version: int, actions: Sequence[Mapping[str, Any]],
                     table_conf: Mapping[str, str] | None) -> RatifiedCommit:
        state = self._read(uri, table_conf, version - 1, None)
        if state.latest >= version:
            raise CommitConflictError(f"{self.describe()}: version {version} is already ratified (latest {state.latest})", version=version)
        if version > state.latest + 1:
            raise CoordinatorError(f"{self.describe()}: cannot ratify version {version} before {state.latest + 1}", retryable=False, version=version)
        previous = next((c.commit_timestamp for c in state.commits if c.version == version - 1), None)
        attempt = stage_commit(writer, version, actions, previous if previous is not None else previous_in_commit_timestamp(writer, version - 1))
        if not attempt.written.modification_time:  # UC requires > 0: what we send is what we record
            attempt = replace(attempt, written=replace(attempt.written, modification_time=int(time.time() * 1000)))
        mtime = attempt.written.modification_time
        sent = attempt.ratified()
        try:
            if self.api == "v1":
                commit = {"version": version, "timestamp": attempt.ict, "file-name": attempt.bare_name, "file-size": attempt.written.size,
                          "file-modification-timestamp": mtime}
                self._http.request("POST", self._v1_table(), {
                    "requirements": [{"type": "assert-table-uuid", "uuid": state.table_id}],
                    "updates": [{"action": "add-commit", "commit": commit}],
                }, answer=False, privilege=self._write_needs)
            else:
                info = {"version": version, "timestamp": attempt.ict, "file_name": attempt.bare_name, "file_size": attempt.written.size,
                        "file_modification_timestamp": mtime}
                self._http.request("POST", "/delta/preview/commits", {"table_id": state.table_id, "table_uri": _as_url(uri), "commit_info": info},
                                   answer=False, privilege=self._write_needs)
        except HttpConflict as exc:  # a replay of ours (0.5.x, purged versions, ≤ 0.4) or another writer's version
            return self._settle(uri, table_conf, attempt, writer, f"{exc.failure.error_type}: {exc.failure.message}")
        except CommitLimitReachedError as exc:
            exc.version = version
            raise
        except HttpUnknown as exc:  # retries ran out (5xx such as 0.5.x's unique-index race, lost answers)
            return self._settle(uri, table_conf, attempt, writer, str(exc))
        return sent

    def _settle(self, uri: str, table_conf: Mapping[str, str] | None, attempt: Attempt, writer: LogFileWriter, cause: str) -> RatifiedCommit:
        """After a refused or unanswered ratification: re-read the table, decide by our staged file."""
        try:
            state = self._read(uri, table_conf, attempt.version, attempt.version)
        except CoordinatorError as exc:
            raise reread_failed(self.describe(), attempt.version, cause, exc) from None
        tracked = next((c for c in state.commits if c.version == attempt.version), None)
        return decide_owner(self.describe(), attempt, state.latest, tracked, writer, cause)

    def _create(self, uri: str, writer: LogFileWriter, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        staging = self._staging.get(_location_key(uri))
        if staging is None:
            try:
                location = self.create_staging_table()
            except HttpConflict as exc:
                raise CommitConflictError(f"{self.describe()}: the table already exists ({exc.failure.error_type})", version=0, retryable=False) from None
            staging = self._staging[_location_key(location)]
            if _location_key(location) != _location_key(uri):
                raise CoordinatorError(
                    f"{self.describe()}: Unity Catalog chooses managed locations; it allocated {location}, "
                    f"not {uri}: commit version 0 at the location create_staging_table() returns",
                    retryable=False, version=0)
        managed, meta = _managed_actions(actions, staging)
        created = publish_version_zero(writer, uri, managed)
        conf = dict(meta.get("configuration") or {})
        try:
            if self.api == "v1":
                self._create_v1(staging, managed, meta, conf, created.commit_timestamp)
            else:
                try:
                    self._http.request("POST", "/tables", {
                        "name": self.table, "catalog_name": self.catalog, "schema_name": self.schema, "table_type": "MANAGED",
                        "data_source_format": "DELTA", "storage_location": staging.location, "properties": conf,
                        "columns": _column_infos(meta.get("schemaString")),
                    }, privilege=self._create_needs)
                except HttpRefused as exc:
                    if not body_too_long(exc.failure):
                        raise
                    # UC 0.5.x with authorization cannot authorize this body (the columns make it long);
                    # the same server's Delta API v1 takes the names from the URL and creates the same table
                    try:
                        self._create_v1(staging, managed, meta, conf, created.commit_timestamp)
                    except CoordinatorError as v1:
                        raise CoordinatorError(f"{exc} (the Delta API v1 create also failed: {v1})", retryable=False, version=0) from None
        except HttpConflict as exc:
            raise CommitConflictError(f"{self.describe()}: the table already exists ({exc.failure.error_type})", version=0, retryable=False) from None
        self._staging.pop(_location_key(uri), None)
        self._resolved_id = staging.table_id
        return created

    def _create_v1(self, staging: _Staging, managed: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], conf: Mapping[str, str],
                   commit_timestamp: int) -> None:
        self._negotiate()
        proto = next(a["protocol"] for a in managed if "protocol" in a)
        self._http.request("POST", f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/tables", {
            "name": self.table, "location": staging.location, "table-type": "MANAGED",
            "columns": json.loads(meta.get("schemaString") or '{"type":"struct","fields":[]}'),
            "partition-columns": list(meta.get("partitionColumns") or []),
            "protocol": {"min-reader-version": proto["minReaderVersion"], "min-writer-version": proto["minWriterVersion"],
                         "reader-features": proto["readerFeatures"], "writer-features": proto["writerFeatures"]},
            "properties": dict(conf), "last-commit-timestamp-ms": commit_timestamp,
        }, privilege=self._create_needs)

    def report_published(self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None) -> None:
        if version <= 0:
            return  # version 0 is published directly and never tracked by the catalog
        try:
            self._report(self.normalize_uri(table_uri), self._uc_table_id(table_conf), version)
        except HttpConflict as exc:
            raise CoordinatorError(f"{self.describe()}: backfill report of {version} refused ({exc.failure.error_type}: {exc.failure.message})",
                                   retryable=True, version=version) from None

    def check_may_report(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> str:
        """Before publishing: report version 0 published (always true, never tracked, so the server
        changes nothing), which it authorizes exactly as every report: a 403 names MODIFY."""
        try:
            self._report(self.normalize_uri(table_uri), self._uc_table_id(table_conf), 0)
        except HttpRefused as exc:  # authorized, but the catalog holds no commit yet to report against
            if exc.failure.status != 400 or "prior commit" not in exc.failure.message:
                raise
        return f"{self.describe()}: may report published versions"

    def _report(self, uri: str, tid: str, version: int) -> None:
        if self.api == "v1":
            self._http.request("POST", self._v1_table(), {
                "requirements": [{"type": "assert-table-uuid", "uuid": tid}],
                "updates": [{"action": "set-latest-backfilled-version", "latest-published-version": version}],
            }, answer=False, privilege=self._write_needs)
        else:
            self._http.request("POST", "/delta/preview/commits", {"table_id": tid, "table_uri": _as_url(uri), "latest_backfilled_version": version},
                               answer=False, privilege=self._write_needs)
