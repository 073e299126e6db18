"""Hadoop checksum shadows (``.<name>.crc``, written by delta-spark on local file systems) go with
the file they shadow: replaced ``_last_checkpoint``, created files whose stale shadow remained,
files cleanup deletes (and orphaned shadows of files it would have deleted). Driven through the
CLI on local tables; delta-spark's own read is in ``tests/spark/test_checksum_shadows_spark.py``.
Also: a directory named like a log file is a typed error, never skipped as if absent."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import fsspec
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, protocol

DAY = 86_400_000


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    now = int(time.time() * 1000)
    for v in range(12):
        actions = [commit_info()] + ([protocol(), metadata({"delta.logRetentionDuration": "interval 1 days"})] if v == 0 else []) + [add(f"f{v}")]
        log.commit(v, actions, mtime_ms=now - (30 - v) * DAY)
    return root


def shadow(root: Path, name: str) -> Path:
    path = root / "_delta_log" / name
    return path.with_name(f".{path.name}.crc")


def shadow_everything(root: Path) -> set[str]:
    made = set()
    for p in (root / "_delta_log").rglob("*"):
        if p.is_file() and not p.name.startswith("."):
            s = p.with_name(f".{p.name}.crc")
            s.write_bytes(b"crc\x00\x00\x00\x02\x00stale")
            made.add(str(s.relative_to(root / "_delta_log")))
    return made


def shadows(root: Path) -> set[str]:
    return {str(p.relative_to(root / "_delta_log")) for p in (root / "_delta_log").rglob(".*.crc")}


def test_checkpoint_replaces_last_checkpoint_without_its_stale_shadow(tmp_path: Path) -> None:
    root = table(tmp_path)
    assert run("checkpoint", str(root), "--force", "--version", "5")[0] == 0
    made = shadow_everything(root)
    assert run("checkpoint", str(root), "--force")[0] == 0  # rewrites _last_checkpoint (v11)
    assert json.loads((root / "_delta_log" / "_last_checkpoint").read_bytes())["version"] == 11
    assert not shadow(root, "_last_checkpoint").exists()
    assert shadows(root) == made - {"._last_checkpoint.crc"}  # the other files were not touched


def test_a_new_log_file_never_inherits_the_stale_shadow_of_an_earlier_one(tmp_path: Path) -> None:
    root = table(tmp_path)
    stale = shadow(root, f"{11:020d}.checkpoint.parquet")
    stale.write_bytes(b"crc\x00stale")  # the checkpoint it shadowed was deleted by some other tool
    other = shadow(root, f"{3:020d}.json")
    other.write_bytes(b"crc\x00kept")
    assert run("checkpoint", str(root), "--force")[0] == 0
    assert (root / "_delta_log" / f"{11:020d}.checkpoint.parquet").exists() and not stale.exists() and other.exists()
    store = open_table_storage(str(root))
    store.put_if_absent(f"{12:020d}.json", b'{"commitInfo":{}}\n')  # the same for every create-if-absent
    assert not shadow(root, f"{12:020d}.json").exists()


def test_cleanup_deletes_the_shadows_of_what_it_deletes_and_orphans_below_the_anchor(tmp_path: Path) -> None:
    root = table(tmp_path)
    assert run("checkpoint", str(root), "--force", "--version", "8")[0] == 0
    made = shadow_everything(root)
    orphans = {shadow(root, f"{v:020d}.crc") for v in (2, 3)} | {shadow(root, f"{7:020d}.00000000000000000008.compacted.json")}
    kept_orphan = shadow(root, f"{20:020d}.json")  # above the anchor: not cleanup's to judge
    for p in (*orphans, kept_orphan):
        p.write_bytes(b"crc\x00orphan")
    rc, out, err = run("cleanup", str(root), "--json")
    plan = json.loads(out)
    assert rc == 0 and plan["counts"]["crc_shadows"] == 8 + len(orphans), (out, err)
    rc, out, err = run("cleanup", str(root), "--execute")
    assert rc == 0, err
    left = shadows(root)
    deleted = {f".{v:020d}.json.crc" for v in range(8)}
    assert left == (made - deleted) | {str(kept_orphan.relative_to(root / "_delta_log"))}, sorted(left)
    assert not any(p.exists() for p in orphans)


@pytest.mark.parametrize("name", [f"{12:020d}.json", f"{11:020d}.checkpoint.parquet", "_last_checkpoint", f"{5:020d}.00000000000000000006.compacted.json",
                                  "_sidecars/abc.parquet", f"_staged_commits/{12:020d}.e6b9c5f0-1f0e-4b9e-8f53-3a5d4f3e2a10.json"])
def test_a_directory_named_like_a_log_file_is_a_typed_error(tmp_path: Path, name: str) -> None:
    root = table(tmp_path)
    (root / "_delta_log" / name).mkdir(parents=True)
    store = open_table_storage(str(root))
    with pytest.raises(CorruptLogError, match="is a directory, not a log file") as refused:
        list_log_files(store)
        store.list_dir(name.rpartition("/")[0])
    assert refused.value.path == name
    commands = (["inspect"], ["cleanup", "--execute"], ["checkpoint"], ["status"])
    for command in commands if "/" not in name else (["cleanup", "--execute"], ["status"]):  # the ones that list those directories
        rc, out, err = run(command[0], str(root), *command[1:])
        assert rc == 2 and "is a directory, not a log file" in err and err.count("\n") == 1, (command, out, err)
