"""State and commit semantics of the UC OpenAPI test server (NOT the Unity Catalog OSS server).

Behaviour follows the OSS server's ``DeltaCommitRepository`` (unitycatalog/unitycatalog at
c9ed6b14), re-expressed from its documented rules, not copied:

- the first commit of a table's commit log (the onboarding commit) is accepted at any version > 0;
  after it, a commit must be exactly ``last + 1`` (a gap is 400 ``INVALID_ARGUMENT``);
- a commit at a taken version is an idempotent no-op when it carries the same staged file name,
  409 otherwise; for a version already backfilled and purged, the staged file is compared with the
  published ``<v>.json`` (same bytes: no-op; different: 409; unreadable: 500 commit-state-unknown);
- at most ``MAX_NUM_COMMITS_PER_TABLE`` (10) un-backfilled commits after the request, else 429
  resource-exhausted;
- a backfill report deletes the covered rows but never the newest one, which a backfill-only
  request flags as backfilled instead, so the latest version is remembered; reporting a version
  above the last commit is 400; a backfill-only request on an empty commit log is 400;
- the preview ``getCommits`` returns newest first and pages: at most 10 versions from
  ``max(start_version, oldest tracked version)``; ``latest_table_version`` is 0 with no commits.

Errors are raised as ``ApiError(code, message)`` with the OSS server's ``ErrorCode`` names; the
HTTP layer renders them in the shape of the API that was called.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MAX_NUM_COMMITS_PER_TABLE = 10

# ErrorCode name -> (legacy UC HTTP status, Delta API error type, Delta API HTTP status)
ERRORS: dict[str, tuple[int, str, int]] = {
    "INVALID_ARGUMENT": (400, "InvalidParameterValueException", 400),
    "TABLE_NOT_FOUND": (404, "NoSuchTableException", 404),
    "NOT_FOUND": (404, "NotFoundException", 404),
    "TABLE_ALREADY_EXISTS": (400, "AlreadyExistsException", 409),
    "UNAUTHENTICATED": (401, "NotAuthorizedException", 401),
    "RESOURCE_EXHAUSTED": (429, "ResourceExhaustedException", 429),
    "COMMIT_VERSION_CONFLICT": (409, "CommitVersionConflictException", 409),
    "UPDATE_REQUIREMENT_CONFLICT": (409, "UpdateRequirementConflictException", 409),
    "COMMIT_STATE_UNKNOWN": (500, "CommitStateUnknownException", 500),
    "UNIMPLEMENTED": (501, "NotImplementedException", 501),
    "INTERNAL": (500, "InternalServerErrorException", 500),
}

REQUIRED_FEATURES = ["catalogManaged", "deletionVectors", "inCommitTimestamp", "v2Checkpoint", "vacuumProtocolCheck"]
REQUIRED_READER_FEATURES = ["catalogManaged", "deletionVectors", "v2Checkpoint", "vacuumProtocolCheck"]
REQUIRED_PROPERTIES = {
    "delta.checkpointPolicy": "v2",
    "delta.enableDeletionVectors": "true",
    "delta.enableInCommitTimestamps": "true",
    "delta.checkpoint.writeStatsAsStruct": "true",
    "delta.checkpoint.writeStatsAsJson": "true",
}
UC_TABLE_ID = "io.unitycatalog.tableId"


class ApiError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check(condition: bool, message: str, code: str = "INVALID_ARGUMENT") -> None:
    if not condition:
        raise ApiError(code, message)


def normalize_url(url: str) -> str:
    """Compare locations the way the OSS server's ``NormalizedURL`` does, for local paths and URLs."""
    url = url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        return "file://" + os.path.abspath(parts.path)
    return url


def local_path(url: str) -> str | None:
    parts = urlsplit(url)
    return os.path.abspath(parts.path) if parts.scheme in ("", "file") else None


@dataclass
class Commit:
    version: int
    timestamp: int
    file_name: str
    file_size: int
    file_modification_timestamp: int
    backfilled_latest: bool = False


@dataclass
class Table:
    id: str
    catalog: str
    schema: str
    name: str
    location: str
    properties: dict[str, str]
    columns: Any = None
    protocol: dict[str, Any] | None = None
    created_ms: int = 0
    commits: dict[int, Commit] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name}"


@dataclass
class Staging:
    id: str
    catalog: str
    schema: str
    name: str
    location: str


class Catalog:
    """All tables of the test server; one lock serialises mutations (the OSS server row-locks)."""

    def __init__(self, storage_root: str) -> None:
        self.storage_root = os.path.abspath(storage_root)
        self.lock = threading.RLock()
        self.tables: dict[str, Table] = {}  # full name -> table
        self.by_id: dict[str, Table] = {}
        self.staging: dict[str, Staging] = {}  # normalized location -> staging table

    # ---- tables ----------------------------------------------------------------------------

    def create_staging(self, catalog: str, schema: str, name: str) -> Staging:
        check(bool(name), "Field can not be empty: name")
        if f"{catalog}.{schema}.{name}" in self.tables:
            raise ApiError("TABLE_ALREADY_EXISTS", f"Table already exists: {catalog}.{schema}.{name}")
        sid = str(uuid.uuid4())
        location = f"file://{self.storage_root}/__unitystorage/catalogs/{catalog}/tables/{sid}"
        staging = Staging(sid, catalog, schema, name, location)
        self.staging[normalize_url(location)] = staging
        return staging

    def create_managed(
        self, catalog: str, schema: str, name: str, location: str, properties: dict[str, str],
        columns: Any, protocol: dict[str, Any] | None, now_ms: int,
    ) -> Table:
        full = f"{catalog}.{schema}.{name}"
        if full in self.tables:
            raise ApiError("TABLE_ALREADY_EXISTS", f"Table already exists: {full}")
        staging = self.staging.get(normalize_url(location or ""))
        if staging is None:
            raise ApiError("NOT_FOUND", f"Staging table not found at location {location}")
        check(properties.get(UC_TABLE_ID) == staging.id, f"Property {UC_TABLE_ID} must be the staging table id {staging.id}")
        del self.staging[normalize_url(location)]
        table = Table(staging.id, catalog, schema, name, staging.location, dict(properties), columns, protocol, now_ms)
        self.tables[full] = table
        self.by_id[table.id] = table
        return table

    def get(self, full_name: str) -> Table:
        table = self.tables.get(full_name)
        if table is None:
            raise ApiError("TABLE_NOT_FOUND", f"Table not found: {full_name}")
        return table

    def get_by_id(self, table_id: Any) -> Table:
        check(bool(table_id), "Field can not be null: table_id")
        table = self.by_id.get(str(table_id))
        if table is None:
            raise ApiError("TABLE_NOT_FOUND", f"Table not found: {table_id}")
        return table

    # ---- commits ---------------------------------------------------------------------------

    @staticmethod
    def unbackfilled(table: Table) -> tuple[list[Commit], int, int]:
        """(un-backfilled commits newest first, latest version, oldest tracked version)."""
        rows = sorted(table.commits.values(), key=lambda c: c.version, reverse=True)
        if not rows:
            return [], 0, 0
        if rows[0].backfilled_latest:
            return [], rows[0].version, rows[-1].version
        return [c for c in rows if not c.backfilled_latest], rows[0].version, rows[-1].version

    def get_commits(self, table: Table, start: Any, end: Any) -> tuple[list[Commit], int]:
        check(start is not None, "Field can not be null: start_version")
        start = int(start)
        check(start >= 0, "Field must be >=0: start_version")
        check(end is None or int(end) >= start, "end_version must be >=start_version if set")
        commits, latest, oldest = self.unbackfilled(table)
        paginated_end = max(start, oldest) + MAX_NUM_COMMITS_PER_TABLE - 1
        effective_end = min(int(end) if end is not None else 2**63, paginated_end)
        return [c for c in commits if start <= c.version <= effective_end], latest

    def post_commit(self, table: Table, info: dict[str, Any] | None, backfilled: Any) -> None:
        """One commit and/or backfill report; raises ``Replay`` for an idempotent resend."""
        if info is not None:
            info = _validate_commit_info(info)
        rows = sorted(table.commits)
        if not rows:
            check(info is not None, "Backfill request requires a prior commit; the table's commit log is empty.")
            table.commits[info["version"]] = Commit(**info)  # onboarding: any version > 0
            return
        first, last = table.commits[rows[0]], table.commits[rows[-1]]
        if info is None:
            bf = int(backfilled)
            check(bf <= last.version, f"Should not backfill version {bf} while the last version committed is {last.version}")
            self._backfill(table, bf, first.version, last.version, None)
            return
        v = info["version"]
        if v <= last.version:
            self._already_taken(table, v, info["file_name"], first.version)
        check(v == last.version + 1, f"Commit version must be the next version after the latest commit {last.version}, but got {v}")
        bf = int(backfilled) if backfilled is not None else None
        check(bf is None or bf <= last.version, f"Latest backfilled version {bf} cannot be greater than the last commit version = {last.version}")
        effective = self._effective_backfilled(bf, first, last)
        if v - effective > MAX_NUM_COMMITS_PER_TABLE:
            raise ApiError("RESOURCE_EXHAUSTED", f"Max number of commits per table reached: {table.id}")
        table.commits[v] = Commit(**info)
        if bf is not None:
            self._backfill(table, bf, first.version, last.version, v)

    @staticmethod
    def _effective_backfilled(bf: int | None, first: Commit, last: Commit) -> int:
        if last.backfilled_latest:
            return last.version
        if bf is not None and bf >= first.version:
            return bf
        if first.backfilled_latest:
            return first.version
        return first.version - 1

    @staticmethod
    def _backfill(table: Table, bf: int, first: int, last: int, new: int | None) -> None:
        if bf < first:
            return  # already backfilled: a no-op
        highest = new if new is not None else last
        delete_up_to = min(bf, highest - 1)  # the newest commit is never deleted
        if new is None and bf == last:
            table.commits[last].backfilled_latest = True
        for v in [v for v in table.commits if v <= delete_up_to]:
            del table.commits[v]

    def _already_taken(self, table: Table, v: int, file_name: str, first: int) -> None:
        existing = table.commits.get(v)
        if existing is not None:
            if existing.file_name == file_name:
                raise Replay()
            raise ApiError("COMMIT_VERSION_CONFLICT", f"Commit version already accepted. Version {v} was accepted with commit file {existing.file_name}, but the request carried {file_name}.")
        if v < first:
            raise ContentCheck(table.location, v, file_name)
        raise ApiError("INTERNAL", f"no row tracked at in-range commit version {v}")


class Replay(Exception):
    """An accepted commit was sent again: the whole request is a no-op success."""


class ContentCheck(Exception):
    """A purged version: decide replay vs conflict by comparing files, outside the lock."""

    def __init__(self, location: str, version: int, file_name: str) -> None:
        super().__init__(f"{location} v{version}")
        self.location, self.version, self.file_name = location, version, file_name

    def settle(self) -> None:
        root = local_path(self.location)
        try:
            if root is None:
                raise OSError("only local table locations can be read by the test server")
            log = os.path.join(root, "_delta_log")
            with open(os.path.join(log, f"{self.version:020d}.json"), "rb") as a, open(os.path.join(log, "_staged_commits", self.file_name), "rb") as b:
                same = a.read() == b.read()
        except OSError as exc:
            raise ApiError("COMMIT_STATE_UNKNOWN", f"Could not determine whether commit version {self.version} is a replay: {exc}") from None
        if not same:
            raise ApiError("COMMIT_VERSION_CONFLICT", f"Commit version already accepted. Version {self.version} is already published.")


def _validate_commit_info(info: dict[str, Any]) -> dict[str, Any]:
    def positive(key: str) -> int:
        value = info.get(key)
        check(isinstance(value, int) and value > 0, f"Field must be positive: {key}")
        return int(value)

    name = info.get("file_name")
    check(isinstance(name, str) and bool(name), "Field can not be empty: file_name")
    check("/" not in name and "\\" not in name and name not in (".", ".."), "Field must be a single file name without path separators: file_name")
    return {
        "version": positive("version"),
        "timestamp": positive("timestamp"),
        "file_name": name,
        "file_size": positive("file_size"),
        "file_modification_timestamp": positive("file_modification_timestamp"),
    }
