"""The shared deployment keeps its metadata in SQLite, which lets one writer in at a time. On a busy
machine a write can wait longer than sqlite3's default of 5 s, and the API then answers 500
("database is locked"). The UI's "Unpause on trigger" is such a write: it failed that way in CI and
left a run queued for the whole 15 min deadline. The deployment's writers wait instead."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from .conftest import INVALID_DAG, Deployment

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

HELD_S = 8.0  # longer than sqlite3's default busy timeout (5 s)


def test_an_api_write_waits_out_a_writer_holding_the_metadata_db(airflow_deployment: Deployment) -> None:
    db = sqlite3.connect(airflow_deployment.home / "airflow.db", timeout=120, isolation_level=None, check_same_thread=False)
    db.execute("BEGIN IMMEDIATE")  # the write lock, as a long scheduler transaction holds it
    held = threading.Timer(HELD_S, db.rollback)
    held.start()
    started = time.monotonic()
    try:
        # the broken table's DAG stays paused: a write no other test depends on
        answer = airflow_deployment.api("PATCH", f"/dags/{INVALID_DAG}", {"is_paused": True})  # its token: no DB write
    finally:
        held.join()
        db.close()
    waited = time.monotonic() - started
    assert answer["is_paused"] is True
    assert waited >= HELD_S - 1, f"the write did not wait for the lock ({waited:.1f} s): the test proved nothing"
