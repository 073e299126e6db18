"""The embedded default coordinator: a SQLite file with a catalog's semantics.

- ratifies version v at most once and only right after v-1 (one ``BEGIN IMMEDIATE`` transaction);
- keeps each ratified commit's staged-file location (and small commits inline) until it is
  reported published, then forgets it while remembering the latest version and timestamp;
- version 0 is published directly with create-if-absent, as the protocol says, and registers the
  table; ``register_table`` takes over a filesystem table at its current version.

Tables are keyed by the normalised table URI (``maintenance`` injects the log library's
normaliser, so ``s3a://b/t/`` and ``s3://b/t`` are one table). ``latest_ratified_version`` is -1
for an unknown table and 0 right after version 0. The database carries a schema version in
``meta``; an unknown version is refused rather than misread.

The database is created only when asked (``create=True``, the spec's ``?create=true``): a
mistyped path must fail loudly instead of coordinating an empty table set.

Safe across threads and processes: every call opens its own connection (WAL, busy timeout), and
ratification is one ``BEGIN IMMEDIATE`` transaction that re-checks ``latest == v-1``. A database
failure is a typed ``CoordinatorError`` (retryable when SQLite says busy, locked or I/O); when it
strikes a ratification, or the version turns out taken, the client re-reads and decides by the
staged file it ratified whether the version is ours (``decide_owner``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from .answers import Answer, checked_commits
from .base import CommitsResponse, LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .commit_file import CommittingClient, decide_owner, previous_in_commit_timestamp, publish_version_zero, reread_failed, stage_commit
from .errors import CommitConflictError, CoordinatorError, CoordinatorNotFoundError, PermissionDeniedError, TableNotFoundError

__all__ = ["LocalCoordinator", "CoordinatorDatabaseError", "INLINE_LIMIT", "EMBEDDED_COORDINATOR_PROPERTY"]

# Version 0 of a table created here names its coordinator, so `coordinator: auto` finds it (not a
# delta.* key: delta-spark refuses unknown delta.* properties). The database path is no secret.
EMBEDDED_COORDINATOR_PROPERTY = "airflow_delta_maintenance.coordinator"
INLINE_LIMIT = 64 * 1024  # commits up to this size are also kept in the database
SCHEMA_VERSION = 1
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS tables (
        table_uri TEXT PRIMARY KEY,
        latest_version INTEGER NOT NULL,
        latest_timestamp INTEGER,
        published_version INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS commits (
        table_uri TEXT NOT NULL,
        version INTEGER NOT NULL,
        commit_timestamp INTEGER NOT NULL,
        file_name TEXT NOT NULL,
        file_size INTEGER NOT NULL,
        file_modification_time INTEGER NOT NULL,
        inline_content BLOB,
        PRIMARY KEY (table_uri, version)
    )""",
]


class CoordinatorDatabaseError(CoordinatorError):
    """SQLite failed under a call (busy, locked, I/O, not a database)."""


class LocalCoordinator(CommittingClient):
    """``local:///path/coordinator.db`` — see the module docstring."""

    def __init__(
        self,
        database: str,
        writer_factory: LogFileWriterFactory | None = None,
        *,
        normalize_uri: Callable[[str], str] = lambda u: u,
        busy_timeout_s: float = 60.0,
        create: bool = False,
    ) -> None:
        self.database = database
        self.writer_factory = writer_factory
        self.normalize_uri = normalize_uri
        self.busy_timeout_s = busy_timeout_s
        if database != ":memory:":
            if create:
                os.makedirs(os.path.dirname(os.path.abspath(database)), exist_ok=True)
            else:
                self.check_database()
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise CoordinatorError(f"{database}: coordinator schema version {row[0]} is not supported (expected {SCHEMA_VERSION})")

    def check_database(self) -> int:
        """Read-only: the database exists and is a coordinator database of a known schema version
        (opened ``mode=ro``, so a wrong path is never created). Returns the number of tables."""
        hint = "check the path, or add ?create=true to the coordinator spec to create a new coordinator"
        if not os.path.isfile(self.database):
            raise CoordinatorNotFoundError(f"{self.database}: the coordinator database does not exist; {hint}")
        try:
            conn = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=self.busy_timeout_s)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                tables = conn.execute("SELECT COUNT(*) FROM tables").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise CoordinatorNotFoundError(f"{self.database}: not a coordinator database ({exc}); {hint}") from None
        if row is None:
            raise CoordinatorNotFoundError(f"{self.database}: not a coordinator database (no schema version); {hint}")
        if row[0] != str(SCHEMA_VERSION):
            raise CoordinatorError(f"{self.database}: coordinator schema version {row[0]} is not supported (expected {SCHEMA_VERSION})")
        return int(tables)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.database, timeout=self.busy_timeout_s, isolation_level=None)
            try:
                yield conn
            finally:
                conn.close()
        except sqlite3.Error as exc:
            transient = isinstance(exc, sqlite3.OperationalError)  # busy, locked, I/O: may pass
            raise CoordinatorDatabaseError(f"{self.describe()}: the database failed: {type(exc).__name__}: {exc}", retryable=transient) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")  # one writer at a time across processes
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def describe(self) -> str:
        return f"local coordinator (SQLite {self.database})"

    def close(self) -> None:
        pass

    def check(self) -> str:
        """Read-only health check (a connection's Test button): the database exists and is readable."""
        return f"{self.describe()}: readable, {self.check_database()} table(s) registered"

    # ---- reads -------------------------------------------------------------------------------

    def latest_ratified_version(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> int:
        with self._connect() as conn:
            row = conn.execute("SELECT latest_version FROM tables WHERE table_uri = ?", (self.normalize_uri(table_uri),)).fetchone()
        return -1 if row is None else int(row[0])

    def get_commits(
        self,
        table_uri: str,
        start_version: int | None = None,
        end_version: int | None = None,
        table_conf: Mapping[str, str] | None = None,
    ) -> CommitsResponse:
        uri = self.normalize_uri(table_uri)
        lo, hi = start_version if start_version is not None else 0, end_version if end_version is not None else 2**62
        latest, window = self._tracked(uri, lo, hi)
        return CommitsResponse(window, latest)

    def _tracked(self, uri: str, lo: int = 0, hi: int = 2**62) -> tuple[int, tuple[RatifiedCommit, ...]]:
        """(latest ratified version, the tracked commits in ``[lo, hi]``) in one consistent read;
        every tracked version is checked as a set first (only the window's rows are loaded)."""
        with self._connect() as conn:
            conn.execute("BEGIN")  # one consistent read of both tables
            head = conn.execute("SELECT latest_version FROM tables WHERE table_uri = ?", (uri,)).fetchone()
            versions = [r[0] for r in conn.execute("SELECT version FROM commits WHERE table_uri = ? ORDER BY version", (uri,))]
            rows = conn.execute(
                "SELECT version, commit_timestamp, file_name, file_size, file_modification_time, inline_content "
                "FROM commits WHERE table_uri = ? AND version >= ? AND version <= ? ORDER BY version", (uri, lo, hi)).fetchall()
            conn.execute("COMMIT")
        latest = -1 if head is None else int(head[0])
        checked_commits(Answer(self.describe(), uri), [RatifiedCommit(v, 0) for v in versions], latest, ordered=True, reaches=latest)
        return latest, tuple(RatifiedCommit(r[0], r[1], r[2], r[3], r[4], bytes(r[5]) if r[5] is not None else None) for r in rows)

    # ---- writes ------------------------------------------------------------------------------

    def register_table(self, table_uri: str, current_version: int, current_timestamp: int | None = None) -> dict[str, str]:
        """Take over an existing filesystem table whose log is published up to ``current_version``."""
        uri = self.normalize_uri(table_uri)
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM tables WHERE table_uri = ?", (uri,)).fetchone():
                raise CommitConflictError(f"{uri} is already registered with {self.describe()}", version=current_version, retryable=False)
            conn.execute("INSERT INTO tables VALUES (?, ?, ?, ?)", (uri, current_version, current_timestamp, current_version))
        return {}

    def _commit_next(self, uri: str, writer: LogFileWriter, version: int, actions: Sequence[Mapping[str, Any]],
                     table_conf: Mapping[str, str] | None) -> RatifiedCommit:
        with self._connect() as conn:
            head = conn.execute("SELECT latest_version, latest_timestamp FROM tables WHERE table_uri = ?", (uri,)).fetchone()
        if head is None:
            raise TableNotFoundError(f"{uri} is not registered with {self.describe()}; commit version 0 first", version=version)
        self._check_next(uri, version, head[0])
        # a table registered without a timestamp: take the ICT of the published <v-1>.json
        attempt = stage_commit(writer, version, actions, head[1] if head[1] is not None else previous_in_commit_timestamp(writer, version - 1))
        inline = attempt.data if len(attempt.data) <= INLINE_LIMIT else None
        try:
            with self._transaction() as conn:
                latest, latest_ts = conn.execute("SELECT latest_version, latest_timestamp FROM tables WHERE table_uri = ?", (uri,)).fetchone()
                self._check_next(uri, version, latest)
                if latest_ts is not None and attempt.ict <= latest_ts:  # another commit won meanwhile
                    raise CommitConflictError(f"{uri}: version {version} lost a race", version=version)
                conn.execute(
                    "INSERT INTO commits VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (uri, version, attempt.ict, attempt.written.file_name, attempt.written.size, attempt.written.modification_time, inline),
                )
                conn.execute("UPDATE tables SET latest_version = ?, latest_timestamp = ? WHERE table_uri = ?", (version, attempt.ict, uri))
        except (CommitConflictError, CoordinatorDatabaseError) as exc:  # taken meanwhile, or the answer is unknown: whose is it?
            try:
                latest, tracked = self._tracked(uri, version, version)
            except CoordinatorError as failed:
                raise reread_failed(self.describe(), version, str(exc), failed) from None
            entry = tracked[0] if tracked else None
            return decide_owner(self.describe(), attempt, latest, entry, writer, str(exc))
        return replace(attempt.ratified(), inline_content=inline)

    def _check_next(self, uri: str, version: int, latest: int) -> None:
        if version <= latest:
            raise CommitConflictError(f"{uri}: version {version} is already ratified (latest {latest})", version=version)
        if version > latest + 1:
            raise CoordinatorError(
                f"{uri}: cannot ratify version {version} before {latest + 1} (latest ratified is {latest})",
                retryable=False,
                version=version,
            )

    def _create(self, uri: str, writer: LogFileWriter, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        if self.latest_ratified_version(uri) >= 0:
            raise CommitConflictError(f"{uri}: version 0 already exists", version=0, retryable=False)
        created = publish_version_zero(writer, uri, self._with_marker(actions))
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM tables WHERE table_uri = ?", (uri,)).fetchone():
                raise CommitConflictError(f"{uri}: version 0 already exists", version=0, retryable=False)
            conn.execute("INSERT INTO tables VALUES (?, 0, ?, 0)", (uri, created.commit_timestamp))
        return created

    def _with_marker(self, actions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for action in actions:
            if "metaData" in action:
                meta = dict(action["metaData"])
                meta["configuration"] = {**dict(meta.get("configuration") or {}), EMBEDDED_COORDINATOR_PROPERTY: f"local://{os.path.abspath(self.database)}"}
                action = {"metaData": meta}
            out.append(action)
        return out

    def report_published(self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None) -> None:
        uri = self.normalize_uri(table_uri)
        with self._transaction() as conn:
            row = conn.execute("SELECT latest_version, published_version FROM tables WHERE table_uri = ?", (uri,)).fetchone()
            if row is None:
                raise TableNotFoundError(f"{uri} is not registered with {self.describe()}", version=version)
            if version > row[0]:
                raise CoordinatorError(f"{uri}: cannot report version {version} published; latest ratified is {row[0]}", version=version)
            conn.execute("UPDATE tables SET published_version = MAX(published_version, ?) WHERE table_uri = ?", (version, uri))
            conn.execute("DELETE FROM commits WHERE table_uri = ? AND version <= ?", (uri, version))

    def check_may_report(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> str:
        """Before publishing: can this process write the database (take its write lock)? Nothing is
        written; a read-only database or directory is a ``PermissionDeniedError`` naming it."""
        try:
            with self._connect() as conn:
                conn.execute("BEGIN IMMEDIATE")  # succeeds on a read-only database too; the write below does not
                conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
                conn.execute("ROLLBACK")
        except CoordinatorDatabaseError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc) or "unable to open" in str(exc):
                raise PermissionDeniedError(f"{self.describe()}: reporting published versions needs write access to "
                                            f"{self.database} and its directory ({str(exc).split(' failed: ', 1)[-1]})") from None
            raise
        return f"{self.describe()}: writable"
