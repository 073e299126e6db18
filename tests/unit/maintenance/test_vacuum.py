"""VACUUM on the catalog's view, adversarially: young uncommitted files, ratified unpublished
commits, deletion vectors and change data of retained versions, symlinks out of the table, a
writer committing during execute, a kill during execute, and the gates (retention, coordinator)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_delta_maintenance.coordinators.local import EMBEDDED_COORDINATOR_PROPERTY
from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.operations.log_cleanup import RetentionTooShortError
from airflow_delta_maintenance.maintenance.operations.vacuum import HOUR_MS, run_vacuum
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table

DAY = 86_400


def age(path: Path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def age_data(root: Path, days: float) -> None:
    """Every data file and directory ``days`` old by mtime (the log keeps its own times)."""
    for dirpath, dirs, names in os.walk(root):
        if "_delta_log" in dirpath:
            continue
        for n in names + dirs:
            p = Path(dirpath) / n
            if not p.is_symlink():
                age(p, days)


def wheel_table(root: Path, versions: int = 3) -> None:
    for i in range(versions):
        batch = pa.table({"id": [i, i + 100], "p": ["a", "b"]})
        deltalake.write_deltalake(str(root), batch, partition_by=["p"], mode="overwrite" if i else "append")


def every_version(root: Path, start: int = 0, end: int | None = None) -> dict[int, list[Any]]:
    """Each version's ids, read by the wheel (VACUUM START/END commits read as their predecessor)."""
    head = deltalake.DeltaTable(str(root)).version() if end is None else end
    out = {}
    for v in range(start, head + 1):
        t = deltalake.DeltaTable(str(root), version=v).to_pyarrow_table()
        out[v] = sorted(t.column("id").to_pylist())
    return out


def plan_paths(uri: str, **kwargs: Any) -> set[str]:
    with open_table(uri, coordinator=kwargs.pop("coordinator", None)) as table:
        result = run_vacuum(table, **kwargs)
    assert result.plan is not None
    return set(result.plan.paths())


def data_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts}


def test_young_uncommitted_file_survives_old_stray_goes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root)
    (root / "p=a" / "in-flight.parquet").write_bytes(b"a writer's file, not committed yet")
    (root / "old-stray.parquet").write_bytes(b"x")
    age_data(root, 10)
    age(root / "p=a" / "in-flight.parquet", 0.01)
    before = every_version(root)
    with open_table(str(root)) as table:
        result = run_vacuum(table, dry_run=False)
    assert result.plan is not None and set(result.plan.paths()) == {"old-stray.parquet"}
    assert (root / "p=a" / "in-flight.parquet").exists() and not (root / "old-stray.parquet").exists()
    assert every_version(root, end=max(before)) == before  # the default retention (7 days) keeps every version's files


def test_retention_below_the_tables_is_an_error_unless_forced(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root)
    with open_table(str(root)) as table:
        with pytest.raises(RetentionTooShortError, match=r"retention of 1 hour is shorter than the table's delta.deletedFileRetentionDuration \(7 days\)"):
            run_vacuum(table, retention_ms=HOUR_MS)
        assert run_vacuum(table, retention_ms=HOUR_MS, allow_shorter_retention=True).plan is not None
        assert run_vacuum(table, retention_ms=200 * HOUR_MS).plan is not None  # longer: no override needed


def _coordinated(tmp_path: Path, declare: bool = True) -> tuple[str, str, Path]:
    db = tmp_path / "c.db"
    spec = f"local://{db}?create=true"
    root = tmp_path / "t"
    root.mkdir()
    client = open_coordinator(spec)
    conf = {EMBEDDED_COORDINATOR_PROPERTY: f"local://{db}"} if declare else {}
    client.commit(str(root), 0, create_actions(conf, ict=True))
    return spec, str(root), root


def _add(path: str, **extra: Any) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True, **extra}}


def _remove(path: str, **extra: Any) -> dict[str, Any]:
    return {"remove": {"path": path, "deletionTimestamp": int(time.time() * 1000), "dataChange": True, **extra}}


def test_files_of_ratified_unpublished_commits_survive_at_any_age(tmp_path: Path) -> None:
    spec, uri, root = _coordinated(tmp_path)
    client = open_coordinator(spec)
    (root / "region=x").mkdir()
    for v, name in ((1, "a.parquet"), (2, "b.parquet")):
        (root / "region=x" / name).write_bytes(b"data")
        client.commit(uri, v, [_add(f"region=x/{name}")])
    client.commit(uri, 3, [_remove("region=x/a.parquet")])  # removed again, still unpublished
    (root / "stray.parquet").write_bytes(b"x")
    age_data(root, 400)
    assert not (root / "_delta_log" / f"{1:020d}.json").exists()  # nothing published
    planned = plan_paths(uri, coordinator=spec, retention_ms=0, allow_shorter_retention=True)
    assert planned == {"stray.parquet"}
    # The table declares its coordinator: given none, VACUUM still acts through it (never on v0 alone).
    assert plan_paths(uri, retention_ms=0, allow_shorter_retention=True) == {"stray.parquet"}
    with open_table(uri, coordinator=spec) as table:
        result = run_vacuum(table, dry_run=False, retention_ms=0, allow_shorter_retention=True)
    assert result.deleted == 1 and data_files(root) >= {"region=x/a.parquet", "region=x/b.parquet"}
    assert result.commits and all(v > 3 for v in result.commits)  # START/END went through the coordinator
    assert max(c.version for c in client.get_commits(uri).commits) == result.commits[-1]


def test_deletion_vectors_and_change_data_of_retained_versions_survive(tmp_path: Path) -> None:
    spec, uri, root = _coordinated(tmp_path)
    client = open_coordinator(spec)
    (root / "region=x").mkdir()
    (root / "_change_data").mkdir()
    dv = {"storageType": "u", "pathOrInlineDv": "ab" + "0" * 20, "offset": 1, "sizeInBytes": 40, "cardinality": 1}
    from airflow_delta_maintenance.deltalog.vacuum.paths import dv_file_path

    dv_name = dv_file_path(dv)
    assert dv_name is not None and dv_name.startswith("ab/deletion_vector_")
    (root / "ab").mkdir()
    for name in ("region=x/f1.parquet", "region=x/f2.parquet", dv_name, "_change_data/cdc-1.parquet", "stray.parquet"):
        (root / name).write_bytes(b"bytes")
    client.commit(uri, 1, [_add("region=x/f1.parquet")])
    client.commit(uri, 2, [_remove("region=x/f1.parquet"), _add("region=x/f1.parquet", deletionVector=dv),
                           {"cdc": {"path": "_change_data/cdc-1.parquet", "partitionValues": {}, "size": 5, "dataChange": False}}])
    client.commit(uri, 3, [_add("region=x/f2.parquet")])
    age_data(root, 30)
    # Default retention: every version is inside it; only the stray goes.
    assert plan_paths(uri, coordinator=spec) == {"stray.parquet"}
    # LITE reads the retained log's removes: f1 (re-added with its vector) stays.
    assert plan_paths(uri, coordinator=spec, mode="lite", retention_ms=0, allow_shorter_retention=True) == set()


def test_symlinks_and_files_outside_the_root_are_untouched(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.parquet").write_bytes(b"outside")
    (outside / "f.parquet").write_bytes(b"outside file")
    os.symlink(outside, root / "linked_dir")
    os.symlink(outside / "f.parquet", root / "linked_file.parquet")
    os.symlink(outside, root / "p=a" / "nested_link")
    age_data(root, 10)
    age(outside / "o.parquet", 10)
    age(outside / "f.parquet", 10)
    with open_table(str(root)) as table:
        result = run_vacuum(table, dry_run=False, retention_ms=0, allow_shorter_retention=True)
    assert result.plan is not None and len(result.plan.links) == 3
    assert not any("link" in p for p in result.plan.paths())
    assert (outside / "o.parquet").read_bytes() == b"outside" and (outside / "f.parquet").exists()
    assert (root / "linked_dir").is_symlink() and (root / "linked_file.parquet").is_symlink() and (root / "p=a" / "nested_link").is_symlink()
    assert every_version(root, 2, 2) == {2: [2, 102]}


def test_a_writer_committing_during_execute_loses_nothing(tmp_path: Path) -> None:
    """Between the plan and the deletes a writer re-adds an old unreferenced file (a RESTORE, a
    CONVERT) and writes a new one: re-validation against a fresh view keeps both."""
    root = tmp_path / "t"
    wheel_table(root)
    age_data(root, 10)
    first = sorted(deltalake.DeltaTable(str(root), version=0).file_uris())
    restored = [os.path.relpath(u.removeprefix("file://"), root) for u in first]

    from airflow_delta_maintenance.deltalog.vacuum.listing import list_table_files
    from airflow_delta_maintenance.deltalog.vacuum.plan import hidden_names_for

    def list_then_commit(table: Any, snapshot: Any) -> Any:
        listing = list_table_files(table.store, hidden_names_for(snapshot))
        deltalake.DeltaTable(str(root)).restore(0)  # the writer, after the listing and the plan's view
        return listing

    with open_table(str(root)) as table:
        result = run_vacuum(table, dry_run=False, retention_ms=0, allow_shorter_retention=True, lister=list_then_commit)
    assert result.plan is not None and set(restored) <= set(result.plan.paths())  # planned at v2 …
    assert result.dropped >= len(restored)  # … kept by re-validation
    assert all((root / p).exists() for p in restored)
    head = deltalake.DeltaTable(str(root))
    assert sorted(head.to_pyarrow_table().column("id").to_pylist()) == [0, 100]


_KILLER = """
import os, signal, sys
from airflow_delta_maintenance.deltalog.vacuum import execute
from airflow_delta_maintenance.maintenance.operations.vacuum import run_vacuum
from airflow_delta_maintenance.maintenance.table.maintained import open_table
execute.BATCH = 7
seen = [0]
def progress(message):
    seen[0] += 1
    if seen[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
with open_table(sys.argv[1]) as table:
    run_vacuum(table, dry_run=False, workers=1, progress=progress)
"""


@pytest.mark.slow  # 1.1 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_a_kill_during_execute_leaves_every_retained_version_readable_and_a_rerun_converges(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root, versions=6)
    for i in range(40):
        (root / "p=a" / f"stray-{i}.parquet").write_bytes(b"x")
    age_data(root, 10)
    log = root / "_delta_log"
    for v in range(3):  # v0..v2 are older than the retention; v2 is the version live at the cutoff
        age(log / f"{v:020d}.json", 10)
    before = every_version(root, 2)
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(root)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = data_files(root)
    assert every_version(root, 2, max(before)) == before
    with open_table(str(root)) as table:
        again = run_vacuum(table, dry_run=False)
    assert again.deleted > 0 and again.plan is not None and set(again.plan.paths()) <= left
    assert every_version(root, 2, max(before)) == before
    assert not any("stray" in p for p in data_files(root))
    info = json.loads((log / "_last_vacuum_info").read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": 2}


def test_the_listing_overlapping_the_snapshot_waits_for_it_on_names_only_the_table_can_judge(tmp_path: Path) -> None:
    """The root is listed while the snapshot loads; ``_p=a`` (a partition of column ``_p``) is
    hidden by name alone, visible once the table says ``_p`` partitions it; ``_tmp`` stays hidden."""
    import threading

    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"id": [1, 2], "_p": ["a", "b"]}), partition_by=["_p"])
    (root / "_p=a" / "old-stray.parquet").write_bytes(b"x")
    (root / "_p=a" / ".old-stray.parquet.crc").write_bytes(b"c")
    (root / "_tmp").mkdir()
    (root / "_tmp" / "staged.parquet").write_bytes(b"y")
    age_data(root, 10)
    threads = threading.active_count()
    assert plan_paths(str(root), retention_ms=7 * 24 * HOUR_MS) == {"_p=a/old-stray.parquet"}
    with open_table(str(root)) as table:
        result = run_vacuum(table, retention_ms=7 * 24 * HOUR_MS)
    assert result.plan is not None and result.plan.shadows == ("_p=a/.old-stray.parquet.crc",) and result.plan.listed == 3
    with open_table(str(root)) as table, pytest.raises(RetentionTooShortError):
        run_vacuum(table, retention_ms=HOUR_MS)  # refused after the listing started: it is stopped, not left running
    assert threading.active_count() == threads
    with open_table(str(root)) as table:
        (root / "_delta_log" / "00000000000000000000.json").write_text("{not json\n")
        with pytest.raises(DeltaLogError, match=r"00000000000000000000\.json"):
            run_vacuum(table, retention_ms=7 * 24 * HOUR_MS)  # the snapshot's error, the listing stopped
    assert threading.active_count() == threads and (root / "_p=a" / "old-stray.parquet").exists()
