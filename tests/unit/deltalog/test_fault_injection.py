"""Writers and cleanup interrupted at every step leave a readable table, and a rerun completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.cleanup.plan import execute_cleanup, plan_log_cleanup, utc_midnight
from airflow_delta_maintenance.deltalog.log_compaction.windows import write_compaction
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

DAY = 86_400_000
NOW = utc_midnight(1_800_000_000_000)


class Crash(Exception):
    pass


class CrashingStore(LogStore):
    """Fails the n-th mutating call (create, overwrite, delete) — a process dying at that point."""

    def __init__(self, base: LogStore, fail_at: int) -> None:
        super().__init__(base.fs, base.table_root, uri=base.uri)
        self.calls = 0
        self.fail_at = fail_at

    def _tick(self) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise Crash(f"killed at mutation {self.calls}")

    def put_if_absent(self, name: str, data: bytes) -> None:
        self._tick()
        super().put_if_absent(name, data)

    def put_if_absent_stream(self, name: str, write: Callable[[Any], None]) -> int:
        self._tick()

        def write_then_die(sink: Any) -> None:
            write(sink)
            self._tick()  # the whole content is in the temp file, not yet linked into place

        return super().put_if_absent_stream(name, write_then_die)

    def put_overwrite(self, name: str, data: bytes) -> None:
        self._tick()
        super().put_overwrite(name, data)

    def delete(self, name: str) -> None:
        self._tick()
        super().delete(name)

    def delete_many(self, names: Sequence[str], progress: Callable[[int], None] | None = None) -> None:
        for name in names:
            self.delete(name)


def make_table(root: Path, v2: bool) -> LogStore:
    log = LogBuilder(__import__("fsspec").filesystem("file"), str(root))
    proto = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"]) if v2 else protocol()
    conf = {"delta.logRetentionDuration": "interval 2 days", "delta.checkpointPolicy": "v2" if v2 else "classic"}
    for v in range(12):
        actions = [commit_info()] + ([proto, metadata(conf)] if v == 0 else []) + [add(f"f{v}-{i}") for i in range(3)]
        if v > 2:
            actions.append(remove(f"f{v - 2}-0", NOW))
        log.commit(v, actions, mtime_ms=NOW - (20 - v) * DAY)
    return open_table_storage(str(root))


@pytest.mark.slow  # a process per kill point (2.7 s CPU): make test runs it, the fast tier does not
@pytest.mark.parametrize("v2", [False, True], ids=["classic", "uuid-v2"])
def test_checkpoint_killed_at_every_step_stays_readable_and_reruns(tmp_path: Path, v2: bool) -> None:
    fail_at = 1
    while True:
        root = tmp_path / f"t{fail_at}"
        store = make_table(root, v2)
        expected = load_snapshot(store, now_ms=NOW).active_file_keys()
        crashing = CrashingStore(store, fail_at)
        try:
            write_checkpoint(crashing, load_snapshot(crashing, now_ms=NOW), sidecar_max_actions=10)
            break  # no more steps to interrupt
        except Crash:
            pass
        after_crash = load_snapshot(store, now_ms=NOW)
        assert after_crash.active_file_keys() == expected
        result = write_checkpoint(store, load_snapshot(store, now_ms=NOW), sidecar_max_actions=10)
        assert load_snapshot(store, now_ms=NOW).checkpoint_version == 11 and load_snapshot(store, now_ms=NOW).active_file_keys() == expected
        assert result.existed or result.last_checkpoint_updated
        fail_at += 1
    # every mutation point was exercised: each streamed file twice (before and mid-write), then _last_checkpoint
    assert fail_at > (7 if v2 else 3)


def test_compaction_killed_leaves_nothing_visible_and_reruns(tmp_path: Path) -> None:
    store = make_table(tmp_path / "t", False)
    expected = load_snapshot(store, now_ms=NOW).active_file_keys()
    with pytest.raises(Crash):
        write_compaction(CrashingStore(store, 1), 3, 6)
    assert not list_log_files(store).compactions
    assert write_compaction(store, 3, 6).existed is False
    assert load_snapshot(store, now_ms=NOW).active_file_keys() == expected


def test_cleanup_killed_mid_way_stays_readable_and_a_rerun_finishes(tmp_path: Path) -> None:
    store = make_table(tmp_path / "t", False)
    write_checkpoint(store, load_snapshot(store, 8, now_ms=NOW))
    retained = {v: load_snapshot(store, v, now_ms=NOW).active_file_keys() for v in range(8, 12)}
    plan = plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW)
    assert plan.cutoff_checkpoint == 8 and len(plan.deletions) == 8
    for fail_at in range(1, len(plan.deletions) + 1):
        try:
            execute_cleanup(CrashingStore(store, fail_at), plan, dry_run=False)
        except Crash:
            pass
        for v, keys in retained.items():
            assert load_snapshot(store, v, now_ms=NOW).active_file_keys() == keys
    rerun = plan_log_cleanup(store, load_snapshot(store, now_ms=NOW), now_ms=NOW)
    execute_cleanup(store, rerun, dry_run=False)
    assert [c.version for c in list_log_files(store).commits] == list(range(8, 12))


KILL_SCRIPT = r"""
import sys
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.storage import open_table_storage
store = open_table_storage(sys.argv[1])
print("ready", flush=True)
write_checkpoint(store, load_snapshot(store), sidecar_max_actions=5000)
"""


@pytest.mark.slow  # racing processes (5.6 s CPU): make test runs it, the fast tier does not
@pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
def test_sigkilled_checkpoint_process_leaves_the_table_readable(tmp_path: Path, delay: float) -> None:
    root = tmp_path / "big"
    log = LogBuilder(__import__("fsspec").filesystem("file"), str(root))
    log.commit(0, [protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"]), metadata({"delta.checkpointPolicy": "v2"})])
    for v in range(1, 6):
        log.commit(v, [add(f"v{v}-{i}", i) for i in range(8000)])
    store = open_table_storage(str(root))
    expected = load_snapshot(store).active_file_keys()
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(root)], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert load_snapshot(store).active_file_keys() == expected
    write_checkpoint(store, load_snapshot(store), sidecar_max_actions=5000)
    snap = load_snapshot(store)
    assert snap.checkpoint_version == 5 and snap.active_file_keys() == expected
