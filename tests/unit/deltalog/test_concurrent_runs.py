"""Runs of the same job at once: leftovers of killed runs go, a live run's private files never do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from tests.unit.deltalog.logbuilder import LogBuilder, add, commit_info, metadata, protocol

DAY_S = 24 * 3600


def table(root: Path, *, v2: bool = False, files: int = 300) -> str:
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    if v2:
        log.commit(0, [commit_info(), protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"]), metadata({"delta.checkpointPolicy": "v2"})])
    else:
        log.commit(0, [commit_info(), protocol(), metadata()])
    log.commit(1, [commit_info(), *[add(f"part-{i:05d}-{'x' * 40}.parquet", 1000 + i) for i in range(files)]])
    return str(root)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def cleanup_cli(uri: str) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["cleanup", uri, "--execute", "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.slow  # 1.0 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_temp_file_of_a_killed_checkpoint_writer_is_removed_by_cleanup(tmp_path: Path) -> None:
    """Why: "Temp files of killed writers (checkpoint-sized) are never removed"."""
    uri = table(tmp_path / "t")
    killed = textwrap.dedent(
        """
        import os, signal, sys
        from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
        from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
        from airflow_delta_maintenance.deltalog.storage import open_table_storage
        os.link = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # killed right before the file becomes visible
        store = open_table_storage(sys.argv[1])
        write_checkpoint(store, load_snapshot(store))
        """
    )
    proc = subprocess.run([sys.executable, "-c", killed, uri], cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == -9
    log = Path(uri) / "_delta_log"
    temps = [p for p in log.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].stat().st_size > 10_000, temps
    assert not list_log_files(open_table_storage(uri)).checkpoints

    result = cleanup_cli(uri)
    assert not temps[0].exists(), "the killed writer's temp file is still there"
    assert result["leftovers"] == 1  # the record counts them
    assert load_snapshot(uri).version == 1


def test_a_live_writers_temp_file_is_kept_and_only_old_unknown_ones_go(tmp_path: Path) -> None:
    from airflow_delta_maintenance.deltalog.storage import temp_path_for
    from airflow_delta_maintenance.deltalog.storage.run_identity import RunIdentity, new_run

    uri = table(tmp_path / "t", files=3)
    log = Path(uri) / "_delta_log"
    live = Path(temp_path_for(str(log / "00000000000000000001.checkpoint.parquet")))  # this process: alive
    me = new_run()
    elsewhere_new = RunIdentity(me.created_ms, "0badc0de", 4242, "a" * 16)  # another host: liveness unknown
    elsewhere_old = RunIdentity(me.created_ms - 2 * DAY_S * 1000, "0badc0de", 4242, "b" * 16)
    dead = RunIdentity(me.created_ms, me.host, dead_pid(), "c" * 16)
    paths = {
        "live": live,
        "elsewhere_new": log / f".00000000000000000001.json.{elsewhere_new.tag}.tmp",
        "elsewhere_old": log / f".00000000000000000001.json.{elsewhere_old.tag}.tmp",
        "dead": log / "_sidecars" / f".x.parquet.{dead.tag}.tmp",
        "untagged_old": log / f".00000000000000000002.json.{'d' * 32}.tmp",
        "untagged_new": log / f".00000000000000000003.json.{'e' * 32}.tmp",
    }
    old = time.time() - 2 * DAY_S
    for name, p in paths.items():
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"partial")
        if name in ("live", "elsewhere_old", "untagged_old"):
            os.utime(p, (old, old))  # even a day-old file of a live run stays
    cleanup_cli(uri)
    assert {n for n, p in paths.items() if p.exists()} == {"live", "elsewhere_new", "untagged_new"}


def test_sidecars_and_staging_of_live_runs_are_never_leftovers(tmp_path: Path) -> None:
    from airflow_delta_maintenance.deltalog.cleanup.abandoned import abandoned_sidecars, find_abandoned
    from airflow_delta_maintenance.deltalog.storage.run_identity import RunIdentity, new_run

    uri = table(tmp_path / "t", v2=True, files=5)
    store = open_table_storage(uri)
    write_checkpoint(store, load_snapshot(store), sidecar_max_actions=2)
    referenced = {p.name for p in (Path(uri) / "_delta_log" / "_sidecars").iterdir()}
    me = new_run()
    dead = RunIdentity(me.created_ms, me.host, dead_pid(), "c" * 16)
    side = Path(uri) / "_delta_log" / "_sidecars"
    (side / f"{1:020d}.checkpoint.{1:010d}.{1:010d}.{me.tag}.parquet").write_bytes(b"live")
    (side / f"{1:020d}.checkpoint.{1:010d}.{1:010d}.{dead.tag}.parquet").write_bytes(b"dead")
    staging = Path(uri) / "_delta_log" / "_spark_staging"
    (staging / me.tag).mkdir(parents=True)
    (staging / me.tag / "part-00000.parquet").write_bytes(b"live")
    (staging / dead.tag).mkdir()
    (staging / dead.tag / "part-00000.parquet").write_bytes(b"dead")
    assert [x.path.rsplit("/", 1)[-1] for x in abandoned_sidecars(store)] == [f"{1:020d}.checkpoint.{1:010d}.{1:010d}.{dead.tag}.parquet"]
    assert [x.path for x in find_abandoned(store)] == [f"_spark_staging/{dead.tag}"]
    cleanup_cli(uri)
    assert {p.name for p in side.iterdir()} == referenced | {f"{1:020d}.checkpoint.{1:010d}.{1:010d}.{me.tag}.parquet"}
    assert [p.name for p in staging.iterdir()] == [me.tag]


class _StrayCleanerStore(LogStore):
    """Another run's old stray cleanup (every unreferenced sidecar of the version) striking between
    this writer's sidecars and its top-level file."""

    def put_if_absent_stream(self, name, write):  # type: ignore[no-untyped-def]
        if not name.startswith("_sidecars/"):
            for s in self.list_log("_sidecars"):
                self.delete(s.name)
        return super().put_if_absent_stream(name, write)


def test_single_node_v2_checkpoint_whose_sidecars_vanish_is_never_visible(tmp_path: Path) -> None:
    """Why: "the single-node writer's sidecars are exposed to the same cleanup"."""
    uri = table(tmp_path / "t", v2=True, files=50)
    plain = open_table_storage(uri)
    store = _StrayCleanerStore(plain.fs, plain.table_root, uri=plain.uri)
    with pytest.raises(DeltaLogError, match="sidecar"):
        write_checkpoint(store, load_snapshot(plain), sidecar_max_actions=20)
    assert not list_log_files(plain).checkpoints
    assert not (Path(uri) / "_delta_log" / "_last_checkpoint").exists()
    assert load_snapshot(uri).num_files == 50


def test_two_cleanups_at_once_converge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the concurrency test: a cleanup whose listed commits another cleanup deleted
    meanwhile crashed with FileNotFoundError; it must re-plan from a fresh listing and finish."""
    from airflow_delta_maintenance.deltalog.cleanup import plan as deltalog_cleanup
    from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    log = LogBuilder(fsspec.filesystem("file"), str(tmp_path / "t"))
    old = int(time.time() * 1000) - 3 * DAY_S * 1000
    conf = {"delta.enableInCommitTimestamps": "true"}
    log.commit(0, [commit_info(old), protocol(1, 7, None, ["inCommitTimestamp"]), metadata(conf)])
    for v in range(1, 9):
        log.commit(v, [commit_info(old + v), add(f"f{v}.parquet")])
    uri = str(tmp_path / "t")
    write_checkpoint(open_table_storage(uri), load_snapshot(uri))
    original, struck = deltalog_cleanup._ict, []

    def other_cleaner_first(store: LogStore, commit, *rest):  # type: ignore[no-untyped-def]
        if not struck:
            struck.append(True)
            for v in range(8):
                (tmp_path / "t" / "_delta_log" / f"{v:020d}.json").unlink()
        return original(store, commit, *rest)

    monkeypatch.setattr(deltalog_cleanup, "_ict", other_cleaner_first)
    result = run_metadata_cleanup(open_table(uri), dry_run=False, retention_ms=DAY_S * 1000, allow_shorter_retention=True)
    assert struck and not result.dry_run
    assert load_snapshot(uri).num_files == 8 and [c.version for c in list_log_files(open_table_storage(uri)).commits] == [8]


@pytest.mark.parametrize("damage", ["torn", "missing", "empty"])
def test_read_back_refuses_a_damaged_sidecar_by_name(tmp_path: Path, damage: str) -> None:
    from airflow_delta_maintenance.deltalog.checkpoint.readback import read_back_checkpoint
    from airflow_delta_maintenance.deltalog.errors import CorruptLogError, MissingSidecarError

    uri = table(tmp_path / "t", v2=True, files=40)
    store = open_table_storage(uri)
    result = write_checkpoint(store, load_snapshot(store), sidecar_max_actions=15)
    top = result.files[-1]
    assert read_back_checkpoint(store, [top]).num_actions == result.num_actions
    side = Path(uri) / "_delta_log" / result.files[1]
    if damage == "missing":
        side.unlink()
    else:
        side.write_bytes(side.read_bytes()[: side.stat().st_size // 2] if damage == "torn" else b"")
    with pytest.raises(MissingSidecarError if damage == "missing" else CorruptLogError, match=side.name):
        read_back_checkpoint(store, [top])


def test_an_owner_killed_but_not_yet_reaped_is_dead() -> None:
    """After a SIGKILL to a spark-submit's process group the Python driver is a zombie until init
    reaps it: kill(pid, 0) still succeeds, yet it writes nothing more — its staging is a leftover."""
    from airflow_delta_maintenance.deltalog.storage.run_identity import RunIdentity, new_run

    child = subprocess.Popen([sys.executable, "-c", "pass"])  # not waited for: a zombie once it exits
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stat = Path(f"/proc/{child.pid}/stat").read_bytes()
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z":
                break
            time.sleep(0.02)
        me = new_run()
        assert RunIdentity(me.created_ms, me.host, child.pid, "f" * 16).liveness() is False
    finally:
        child.wait()
