"""The embedded SQLite coordinator beyond the shared contract: processes, schema, registration."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.errors import (
    CommitConflictError,
    CoordinatorError,
    CoordinatorNotFoundError,
    PermissionDeniedError,
    TableNotFoundError,
)
from airflow_delta_maintenance.coordinators.local import INLINE_LIMIT, LocalCoordinator
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator


def add(path: str, size: int = 1) -> dict:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": size, "modificationTime": 1, "dataChange": True}}


def _racer(spec: str, table: str, name: str, rounds: int, queue: multiprocessing.Queue) -> None:
    client = open_coordinator(spec)
    won = []
    for _ in range(rounds):
        v = client.latest_ratified_version(table) + 1
        try:
            client.commit(table, v, [add(f"{name}-{v}")])
            won.append(v)
        except CommitConflictError:
            pass
    queue.put(won)


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
def test_processes_racing_on_one_database_ratify_each_version_once(tmp_path: Path) -> None:
    spec, table = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    open_coordinator(spec).commit(table, 0, create_actions(ict=True))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(spec, table, f"p{i}", 8, queue)) for i in range(3)]
    for p in procs:
        p.start()
    won = [v for _ in procs for v in queue.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
    assert sorted(won) == list(range(1, len(won) + 1)) and len(won) >= 8  # no version twice, no gap
    resp = open_coordinator(spec).get_commits(table)
    assert [c.version for c in resp.commits] == sorted(won) and resp.latest_table_version == len(won)


def test_small_commits_are_kept_inline_until_published(tmp_path: Path) -> None:
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true")
    table = str(tmp_path / "t")
    client.commit(table, 0, create_actions(ict=True))
    small = client.commit(table, 1, [add("a")])
    big = client.commit(table, 2, [add("b" * (INLINE_LIMIT + 1))])
    assert small.inline_content is not None and big.inline_content is None
    listed = client.get_commits(table).commits
    assert listed[0].inline_content == small.inline_content and listed[1].inline_content is None
    assert listed[1].file_name == big.file_name and listed[1].file_size == big.file_size


def test_an_existing_table_is_registered_at_its_current_version(tmp_path: Path) -> None:
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true")
    table = str(tmp_path / "t")
    with pytest.raises(TableNotFoundError):
        client.commit(table, 6, [add("a")])
    assert client.register_table(table, 5) == {}
    assert client.latest_ratified_version(table) == 5
    with pytest.raises(CommitConflictError):
        client.register_table(table, 5)
    assert client.commit(table, 6, [add("a")]).version == 6


def test_uris_are_normalised_so_spellings_share_one_table(tmp_path: Path) -> None:
    client = open_coordinator(f"local://{tmp_path}/c.db?create=true")
    client.commit(str(tmp_path / "t"), 0, create_actions(ict=True))
    assert client.latest_ratified_version(f"file://{tmp_path}/t/") == 0


def test_an_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    LocalCoordinator(str(db), create=True)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(CoordinatorError, match="schema version 99"):
        LocalCoordinator(str(db))


def test_the_database_runs_in_wal_mode(tmp_path: Path) -> None:
    LocalCoordinator(str(tmp_path / "c.db"), create=True)
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_missing_database_is_an_error_unless_create_is_asked(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "nope.db"
    with pytest.raises(CoordinatorNotFoundError, match=r"nope.db: the coordinator database does not exist.*\?create=true"):
        open_coordinator(f"local://{missing}")
    assert not missing.parent.exists(), "a mistyped path must not create anything"
    created = open_coordinator(f"local://{missing}?create=true")
    created.commit(str(tmp_path / "t"), 0, create_actions(ict=True))
    assert open_coordinator(f"local://{missing}").latest_ratified_version(str(tmp_path / "t")) == 0


@pytest.mark.parametrize("content", [b"", b"not sqlite at all", None])
def test_a_file_that_is_not_a_coordinator_database_is_refused(tmp_path: Path, content: bytes | None) -> None:
    db = tmp_path / "other.db"
    if content is None:
        with sqlite3.connect(db) as conn:  # a SQLite database of something else
            conn.execute("CREATE TABLE unrelated (x)")
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    with pytest.raises(CoordinatorNotFoundError, match="not a coordinator database"):
        open_coordinator(f"local://{db}")
    assert db.read_bytes() == before, "refusing must not write"


# ---- a failure while ratifying: whose is the version? ---------------------------------------------


class _AnswerLostAfterCommit:
    """A connection whose first ``COMMIT`` of a ratification is applied, then fails (a disk or
    network filesystem error on the way back): the caller cannot tell whether it landed."""

    def __init__(self, conn: sqlite3.Connection, state: dict[str, bool]) -> None:
        self._conn, self._state = conn, state

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith("INSERT INTO commits"):
            self._state["ratifying"] = True
        cursor = self._conn.execute(sql, *args)
        if sql == "COMMIT" and self._state.pop("ratifying", False) and not self._state.get("lost"):
            self._state["lost"] = True
            raise sqlite3.OperationalError("disk I/O error")
        return cursor

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_a_ratification_applied_but_unanswered_is_our_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, table = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    client = open_coordinator(spec)
    client.commit(table, 0, create_actions(ict=True))
    real, state = sqlite3.connect, {}
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: _AnswerLostAfterCommit(real(*a, **k), state))
    ratified = client.commit(table, 1, [add("ours")])  # before: sqlite3.OperationalError
    assert state["lost"] and ratified.version == 1
    tracked = client.get_commits(table)
    assert [(c.version, c.file_name) for c in tracked.commits] == [(1, ratified.file_name)] and tracked.latest_table_version == 1
    client.commit(table, 2, [add("next")])  # the writer goes on: nothing committed twice
    assert [c.version for c in client.get_commits(table).commits] == [1, 2]


def test_a_busy_database_is_a_typed_retryable_error_and_ratifies_nothing(tmp_path: Path) -> None:
    spec, table = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    open_coordinator(spec).commit(table, 0, create_actions(ict=True))
    client = LocalCoordinator(str(tmp_path / "c.db"), open_coordinator(spec).writer_factory, busy_timeout_s=0.2)  # type: ignore[attr-defined]
    holder = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(CoordinatorError, match=r"version 1 was not ratified .*database is locked") as err:  # before: sqlite3.OperationalError
            client.commit(table, 1, [add("a")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert err.value.retryable and not err.value.conflict and err.value.version == 1
    assert client.latest_ratified_version(table) == 0
    assert client.commit(table, 1, [add("a")]).version == 1  # once the lock is free


def test_check_may_report_refuses_a_read_only_database_and_writes_nothing(tmp_path: Path) -> None:
    spec, table = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    client = open_coordinator(spec)
    client.commit(table, 0, create_actions(ict=True))
    client.commit(table, 1, [add("a")])
    assert "writable" in client.check_may_report(table)
    db = tmp_path / "c.db"
    before = db.read_bytes()
    if os.geteuid() == 0:  # root writes through permission bits: make the file immutable instead
        if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not available here to make the database read-only for root")
        undo = ["chattr", "-i", str(db)]
    else:
        db.chmod(0o444)
        undo = ["chmod", "0644", str(db)]
    try:
        with pytest.raises(PermissionDeniedError, match=r"needs write access to .*attempt to write a readonly database") as err:
            open_coordinator(spec.removesuffix("?create=true")).check_may_report(table)
        assert not err.value.retryable
        code = main(["publish", table, "--coordinator", spec.removesuffix("?create=true")])  # before: 1.json copied, then the failed report
        assert code == 2 and not (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").exists()
    finally:
        subprocess.run(undo, check=True)
    assert db.read_bytes() == before
    assert [c.version for c in client.get_commits(table).commits] == [1]
