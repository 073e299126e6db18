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
re-reads the table and decides by content: the version is ours when UC tracks it under our
staged file name, or when its published ``<v>.json`` holds exactly our bytes (each commit carries
a fresh ``txnId``, so equal bytes are ours); it is another writer's when UC has it otherwise; and a
failure stays "unknown" (retryable, not a conflict) while the version is not ratified at all.

Error mapping and retries live in ``_uc_http``, the payloads in ``_uc_payloads``; 403 messages name
the privilege each call needs.
The bearer token is never logged, shown or put in an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._uc_http import HttpConflict, HttpUnknown, UCTransport
from ._uc_payloads import UC_TABLE_ID, _as_url, _column_infos, _commit, _location_key, _managed_actions, _Staging, _window
from .base import CommitsResponse, LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .commit_file import (
    commit_bytes,
    next_in_commit_timestamp,
    previous_in_commit_timestamp,
    publish_version_zero,
    published_name,
    staged_name,
    writer_for,
)
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


class UnityCatalogCoordinator:
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
            if self.api == "v1":
                body = self._http.request("GET", self._v1_table())
                found = (body.get("metadata") or {}).get("table-uuid")
            else:
                found = self._http.request("GET", f"/tables/{self.full_name}").get("table_id")
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
        if self.api == "v1":
            meta = self._http.request("GET", self._v1_table(), privilege=self._read_needs).get("metadata") or {}
            tid = str(meta.get("table-uuid") or "")
        else:
            tid = str(self._http.request("GET", f"/tables/{self.full_name}", privilege=self._read_needs).get("table_id") or "")
        if not tid:
            raise CoordinatorError(f"{self.describe()}: the catalog did not return the table id")
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
            body = self._http.request("GET", self._v1_table(), privilege=self._read_needs)
            meta = body.get("metadata") or {}
            self._check_identity(uri, meta.get("table-uuid"), meta.get("location"), table_conf)
            return int(body.get("latest-table-version", 0))
        body = self._http.request("GET", "/delta/preview/commits", {"table_id": self._uc_table_id(table_conf), "table_uri": _as_url(uri), "start_version": 0},
                                  privilege=self._read_needs)
        return int(body.get("latest_table_version", 0))

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
        if self.api == "v1":
            body = self._http.request("GET", self._v1_table(), privilege=self._read_needs)
            meta = body.get("metadata") or {}
            self._check_identity(uri, meta.get("table-uuid"), meta.get("location"), table_conf)
            commits = [_commit(c, "-") for c in body.get("commits") or []]
            latest = int(body.get("latest-table-version", 0))
            return _State(latest, _window(commits, lo, top), str(meta.get("table-uuid") or self._uc_table_id(table_conf)))
        tid = self._uc_table_id(table_conf)
        found: dict[int, RatifiedCommit] = {}
        start = max(lo, 0)
        while True:  # the server answers at most MAX_NUM_COMMITS_PER_TABLE versions per request
            req: dict[str, Any] = {"table_id": tid, "table_uri": _as_url(uri), "start_version": start}
            if hi is not None:
                req["end_version"] = hi
            body = self._http.request("GET", "/delta/preview/commits", req, privilege=self._read_needs)
            latest = int(body.get("latest_table_version", 0))
            page = [c for c in (_commit(c, "_") for c in body.get("commits") or []) if lo <= c.version <= top]
            found.update((c.version, c) for c in page)
            newest = max((c.version for c in page), default=None)
            if newest is None or newest >= min(top, latest):
                return _State(latest, _window(list(found.values()), lo, top), tid)
            start = newest + 1

    # ---- writes ------------------------------------------------------------------------------

    def create_staging_table(self) -> str:
        """Ask the catalog for a managed location; commit version 0 there. Returns the location."""
        if self.api == "v1":
            self._negotiate()
            body = self._http.request("POST", f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/staging-tables", {"name": self.table},
                                      privilege=self._create_needs)
            proto = body.get("required-protocol") or {}
            props = {k: v for k, v in (body.get("required-properties") or {}).items() if v is not None}
            staging = _Staging(str(body["table-id"]), str(body["location"]), tuple(proto.get("reader-features") or _REQUIRED_READER),
                               tuple(proto.get("writer-features") or _REQUIRED_WRITER), tuple(sorted(props.items())))
        else:
            body = self._http.request("POST", "/staging-tables", {"name": self.table, "catalog_name": self.catalog, "schema_name": self.schema},
                                      privilege=self._create_needs)
            staging = _Staging(str(body["id"]), str(body["staging_location"]), tuple(_REQUIRED_READER), tuple(_REQUIRED_WRITER),
                               tuple(sorted(_REQUIRED_PROPERTIES.items())))
        self._staging[_location_key(staging.location)] = staging
        return staging.location

    def commit(
        self,
        table_uri: str,
        version: int,
        actions: Sequence[Mapping[str, Any]],
        table_conf: Mapping[str, str] | None = None,
    ) -> RatifiedCommit:
        uri, writer = writer_for(self.writer_factory, self.normalize_uri, table_uri)
        if version == 0:
            return self._create(uri, writer, actions)
        if version < 0:
            raise CoordinatorError(f"{self.describe()}: invalid version {version}", version=version)
        state = self._read(uri, table_conf, version - 1, None)
        if state.latest >= version:
            raise CommitConflictError(f"{self.describe()}: version {version} is already ratified (latest {state.latest})", version=version)
        if version > state.latest + 1:
            raise CoordinatorError(f"{self.describe()}: cannot ratify version {version} before {state.latest + 1}", retryable=False, version=version)
        previous = next((c.commit_timestamp for c in state.commits if c.version == version - 1), None)
        if previous is None:
            previous = previous_in_commit_timestamp(writer, version - 1)
        ict = next_in_commit_timestamp(previous)
        data = commit_bytes(actions, ict)
        written = writer.write_new(staged_name(version), data)  # a unique name: an attempt never overwrites
        bare = written.file_name.rsplit("/", 1)[-1]
        mtime = written.modification_time or int(time.time() * 1000)  # UC requires > 0
        sent = RatifiedCommit(version, ict, written.file_name, written.size, mtime)
        try:
            if self.api == "v1":
                commit = {"version": version, "timestamp": ict, "file-name": bare, "file-size": written.size, "file-modification-timestamp": mtime}
                self._http.request("POST", self._v1_table(), {
                    "requirements": [{"type": "assert-table-uuid", "uuid": state.table_id}],
                    "updates": [{"action": "add-commit", "commit": commit}],
                }, answer=False, privilege=self._write_needs)
            else:
                info = {"version": version, "timestamp": ict, "file_name": bare, "file_size": written.size, "file_modification_timestamp": mtime}
                self._http.request("POST", "/delta/preview/commits", {"table_id": state.table_id, "table_uri": _as_url(uri), "commit_info": info},
                                   answer=False, privilege=self._write_needs)
        except HttpConflict as exc:  # a replay of ours (0.5.x, purged versions, ≤ 0.4) or another writer's version
            said = f"{exc.failure.error_type}: {exc.failure.message}"
            owner, ratified = self._whose(uri, table_conf, sent, data, writer)
            if owner == "ours":
                return ratified or sent
            if owner == "theirs":
                raise CommitConflictError(f"{self.describe()}: version {version} was ratified for another writer ({said})", version=version) from None
            raise CoordinatorError(f"{self.describe()}: version {version} was refused without being taken ({said}); retry",
                                   retryable=True, version=version) from None
        except CommitLimitReachedError as exc:
            exc.version = version
            raise
        except HttpUnknown as exc:  # retries ran out (5xx such as 0.5.x's unique-index race, lost answers)
            owner, ratified = self._whose(uri, table_conf, sent, data, writer)
            if owner == "ours":
                return ratified or sent
            if owner == "theirs":
                raise CommitConflictError(f"{self.describe()}: version {version} was ratified for another writer (our attempt: {exc})",
                                          version=version) from None
            exc.version = version
            raise
        return sent

    def _whose(self, uri: str, table_conf: Mapping[str, str] | None, sent: RatifiedCommit, data: bytes,
               writer: LogFileWriter) -> tuple[str, RatifiedCommit | None]:
        """After a refused or unanswered ratification: is ``sent.version`` ours, theirs, or not taken (unknown)?

        Ours when UC tracks it under our staged file name (then UC's record of it is returned) or
        when its published ``<v>.json`` holds exactly our bytes; theirs when UC has ratified it
        otherwise; unknown when it is not ratified or the catalog cannot be read now.
        """
        version = sent.version
        try:
            state = self._read(uri, table_conf, version, version)
        except CoordinatorError:
            return "unknown", None
        tracked = [c for c in state.commits if c.version == version]
        if tracked:
            mine = tracked[0].file_name.rsplit("/", 1)[-1] == sent.file_name.rsplit("/", 1)[-1]
            return ("ours", tracked[0]) if mine else ("theirs", None)
        if state.latest < version:
            return "unknown", None
        try:  # ratified, published and purged since: compare the published bytes (delta-spark's hasSameContent)
            published = writer.read(published_name(version))
        except OSError:
            return "theirs", None
        return ("ours", None) if published == data else ("theirs", None)

    def _was_accepted(self, uri: str, table_conf: Mapping[str, str] | None, version: int, bare: str, data: bytes, writer: LogFileWriter) -> bool:
        """Did the catalog ratify our staged file ``bare`` (holding ``data``) as ``version``?"""
        sent = RatifiedCommit(version, 0, f"_staged_commits/{bare}", len(data), 0)
        return self._whose(uri, table_conf, sent, data, writer)[0] == "ours"

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
                proto = next(a["protocol"] for a in managed if "protocol" in a)
                self._http.request("POST", f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/tables", {
                    "name": self.table, "location": staging.location, "table-type": "MANAGED",
                    "columns": json.loads(meta.get("schemaString") or '{"type":"struct","fields":[]}'),
                    "partition-columns": list(meta.get("partitionColumns") or []),
                    "protocol": {"min-reader-version": proto["minReaderVersion"], "min-writer-version": proto["minWriterVersion"],
                                 "reader-features": proto["readerFeatures"], "writer-features": proto["writerFeatures"]},
                    "properties": conf, "last-commit-timestamp-ms": created.commit_timestamp,
                }, privilege=self._create_needs)
            else:
                self._http.request("POST", "/tables", {
                    "name": self.table, "catalog_name": self.catalog, "schema_name": self.schema, "table_type": "MANAGED",
                    "data_source_format": "DELTA", "storage_location": staging.location, "properties": conf,
                    "columns": _column_infos(meta.get("schemaString")),
                }, privilege=self._create_needs)
        except HttpConflict as exc:
            raise CommitConflictError(f"{self.describe()}: the table already exists ({exc.failure.error_type})", version=0, retryable=False) from None
        self._staging.pop(_location_key(uri), None)
        self._resolved_id = staging.table_id
        return created

    def report_published(self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None) -> None:
        if version <= 0:
            return  # version 0 is published directly and never tracked by the catalog
        uri = self.normalize_uri(table_uri)
        tid = self._uc_table_id(table_conf)
        try:
            if self.api == "v1":
                self._http.request("POST", self._v1_table(), {
                    "requirements": [{"type": "assert-table-uuid", "uuid": tid}],
                    "updates": [{"action": "set-latest-backfilled-version", "latest-published-version": version}],
                }, answer=False, privilege=self._write_needs)
            else:
                self._http.request("POST", "/delta/preview/commits", {"table_id": tid, "table_uri": _as_url(uri), "latest_backfilled_version": version},
                                   answer=False, privilege=self._write_needs)
        except HttpConflict as exc:
            raise CoordinatorError(f"{self.describe()}: backfill report of {version} refused ({exc.failure.error_type}: {exc.failure.message})",
                                   retryable=True, version=version) from None


