"""Unity Catalog commit coordination over REST: the Managed Tables v1 API and the preview API.

- v1 (``/api/2.1/unity-catalog/delta/v1``): ``loadTable`` returns the unpublished ratified commits
  (newest first) and ``latest-table-version``; ``updateTable`` carries ``add-commit`` and
  ``set-latest-backfilled-version`` with an ``assert-table-uuid`` requirement.
- preview (``/api/2.1/unity-catalog/delta/preview/commits``): ``POST`` a ``DeltaCommit`` (a commit
  without ``commit_info`` is a pure backfill report), ``GET`` with a ``DeltaGetCommits`` body.

Errors: 409 → ``CommitConflictError``; 429 ``ResourceExhausted`` (too many unpublished commits) →
``CommitLimitReachedError``; 429 throttling, 5xx and connection errors are retried with
exponential backoff and jitter; 404 → ``TableNotFoundError``; other 4xx are fatal. The bearer
token is sent in a header only: never logged, never in ``describe()`` or an error message.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._commit_file import commit_bytes, next_in_commit_timestamp, publish_version_zero, staged_name, writer_for
from .base import CommitsResponse, LogFileWriterFactory, RatifiedCommit
from .errors import CommitConflictError, CommitLimitReachedError, CoordinatorError, TableNotFoundError

__all__ = ["UnityCatalogCoordinator"]

API = "/api/2.1/unity-catalog"


class _HttpError(Exception):
    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type


class UnityCatalogCoordinator:
    """``unity-catalog://host:port/<catalog>.<schema>.<table>?api=v1|preview``."""

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
        timeout_s: float = 30.0,
    ) -> None:
        self.base = f"{'https' if tls else 'http'}://{host}{API}"
        self.full_name = full_name
        self.catalog, self.schema, self.table = full_name.split(".")
        self.api = api
        self.table_id = table_id
        self._token = token
        self.writer_factory = writer_factory
        self.normalize_uri = normalize_uri
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"UnityCatalogCoordinator({self.describe()!r})"

    def describe(self) -> str:
        return f"Unity Catalog {self.api} API at {self.base.split(API)[0]} for {self.full_name}"

    def close(self) -> None:
        pass

    # ---- HTTP --------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        last: Exception | None = None
        for attempt in range(self.max_attempts):
            req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                    return json.loads(raw) if raw else {}
            except urllib.error.HTTPError as exc:
                err = _parse_error(exc)
                if err.status == 429 and "ResourceExhausted" in err.error_type:
                    raise CommitLimitReachedError(f"{self.describe()}: too many unpublished commits ({err.error_type}): publish, then retry") from None
                if err.status == 409:
                    raise _Conflict(err) from None
                if err.status == 404:
                    raise TableNotFoundError(f"{self.describe()}: not found ({err.error_type}): {err}") from None
                if err.status != 429 and err.status < 500:
                    raise CoordinatorError(f"{self.describe()}: {method} {path} failed with {err.status} {err.error_type}: {err}") from None
                last = CoordinatorError(f"{self.describe()}: {method} {path} failed with {err.status} {err.error_type}", retryable=True)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = CoordinatorError(f"{self.describe()}: {method} {path}: {getattr(exc, 'reason', exc)}", retryable=True)
            if attempt + 1 < self.max_attempts:
                time.sleep(self.backoff_s * (2**attempt) * (0.5 + random.random()))
        assert last is not None
        raise last

    def _table_path(self) -> str:
        return f"/delta/v1/catalogs/{self.catalog}/schemas/{self.schema}/tables/{self.table}"

    def _uc_table_id(self, table_conf: Mapping[str, str] | None) -> str:
        tid = (table_conf or {}).get("io.unitycatalog.tableId") or (table_conf or {}).get("tableId") or self.table_id
        if tid:
            return tid
        if self.api == "v1":
            return str(self._load()["metadata"]["table-uuid"])
        raise CoordinatorError(f"{self.describe()}: the preview API needs the UC table id (table_id= or io.unitycatalog.tableId)")

    def _load(self) -> dict[str, Any]:
        return self._request("GET", self._table_path())

    # ---- reads -------------------------------------------------------------------------------

    def latest_ratified_version(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> int:
        return self.get_commits(table_uri, 0, None, table_conf).latest_table_version

    def get_commits(
        self,
        table_uri: str,
        start_version: int | None = None,
        end_version: int | None = None,
        table_conf: Mapping[str, str] | None = None,
    ) -> CommitsResponse:
        lo = 0 if start_version is None else start_version
        hi = 2**62 if end_version is None else end_version
        if self.api == "v1":
            body = self._load()
            latest = int(body.get("latest-table-version", -1))
            raw = [(c["version"], c["timestamp"], c["file-name"], c["file-size"], c["file-modification-timestamp"]) for c in body.get("commits") or []]
        else:
            req = {"table_id": self._uc_table_id(table_conf), "table_uri": self.normalize_uri(table_uri), "start_version": lo}
            if end_version is not None:
                req["end_version"] = end_version
            body = self._request("GET", "/delta/preview/commits", req)
            latest = int(body.get("latest_table_version", -1))
            raw = [(c["version"], c["timestamp"], c["file_name"], c["file_size"], c["file_modification_timestamp"]) for c in body.get("commits") or []]
        commits = sorted(
            (RatifiedCommit(int(v), int(ts), _staged(name), int(size), int(mtime)) for v, ts, name, size, mtime in raw if lo <= int(v) <= hi),
            key=lambda c: c.version,
        )
        return CommitsResponse(tuple(commits), latest)

    # ---- writes ------------------------------------------------------------------------------

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
        current = self.get_commits(uri, version - 1, None, table_conf)
        if current.latest_table_version >= version:
            raise CommitConflictError(f"{self.describe()}: version {version} is already ratified", version=version)
        previous = max((c.commit_timestamp for c in current.commits), default=None)
        ict = next_in_commit_timestamp(previous)
        data = commit_bytes(actions, ict)
        written = writer.write_new(staged_name(version), data)
        bare = written.file_name.rsplit("/", 1)[-1]
        try:
            if self.api == "v1":
                commit = {"version": version, "timestamp": ict, "file-name": bare, "file-size": written.size, "file-modification-timestamp": written.modification_time}
                uuid_ = self._uc_table_id(table_conf)
                self._request("POST", self._table_path(), {
                    "requirements": [{"type": "assert-table-uuid", "uuid": uuid_}],
                    "updates": [{"action": "add-commit", "commit": commit}],
                })
            else:
                info = {"version": version, "timestamp": ict, "file_name": bare, "file_size": written.size, "file_modification_timestamp": written.modification_time}
                self._request("POST", "/delta/preview/commits", {"table_id": self._uc_table_id(table_conf), "table_uri": uri, "commit_info": info})
        except _Conflict as exc:
            raise CommitConflictError(f"{self.describe()}: version {version} conflicts ({exc.error.error_type})", version=version) from None
        return RatifiedCommit(version, ict, written.file_name, written.size, written.modification_time)

    def _create(self, uri: str, writer: Any, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        created = publish_version_zero(writer, uri, actions)
        try:
            body = self._request("POST", "/tables", {
                "name": self.table, "catalog_name": self.catalog, "schema_name": self.schema,
                "table_type": "MANAGED", "data_source_format": "DELTA", "storage_location": uri,
            })
        except _Conflict as exc:
            raise CommitConflictError(f"{self.describe()}: table already exists ({exc.error.error_type})", version=0, retryable=False) from None
        self.table_id = self.table_id or body.get("table_id")
        return created

    def report_published(self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None) -> None:
        uri = self.normalize_uri(table_uri)
        try:
            if self.api == "v1":
                self._request("POST", self._table_path(), {
                    "requirements": [{"type": "assert-table-uuid", "uuid": self._uc_table_id(table_conf)}],
                    "updates": [{"action": "set-latest-backfilled-version", "latest-published-version": version}],
                })
            else:
                self._request("POST", "/delta/preview/commits", {"table_id": self._uc_table_id(table_conf), "table_uri": uri, "latest_backfilled_version": version})
        except _Conflict as exc:
            raise CoordinatorError(f"{self.describe()}: backfill report of {version} refused ({exc.error.error_type})", version=version) from None


class _Conflict(Exception):
    def __init__(self, error: _HttpError) -> None:
        super().__init__(str(error))
        self.error = error


def _staged(name: str) -> str:
    return name if "/" in name else f"_staged_commits/{name}"


def _parse_error(exc: urllib.error.HTTPError) -> _HttpError:
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        body = {}
    err = body.get("error") if isinstance(body.get("error"), dict) else {}
    error_type = str(err.get("type") or body.get("error_code") or "")
    message = str(err.get("message") or body.get("message") or exc.reason)
    return _HttpError(exc.code, error_type, message)
