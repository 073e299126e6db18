"""What counts as published comes from ``<v>.json`` files and the coordinator, never from a
checkpoint's name: a checkpoint another engine left above the published commits is listed as a
problem and is never the basis of publishing, reporting, reading, checkpointing or cleanup.

Driven through the CLI as users run it, on the embedded coordinator; the ``deltalake`` wheel reads
every version afterwards. Each test failed before the prefix was decided from commit files.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.catalog_view import durable_prefix
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    try:
        parsed = json.loads(out) if out.strip() else None
    except ValueError:
        parsed = out
    return code, parsed, err


def commit_path(uri: str, version: int) -> Path:
    return Path(uri) / "_delta_log" / f"{version:020d}.json"


def staged_bytes(spec: str, uri: str) -> dict[int, bytes]:
    return {c.version: (Path(uri) / "_delta_log" / c.file_name).read_bytes() for c in open_coordinator(spec).get_commits(uri).commits}


def ratified_table(tmp_path: Path, versions: int = 8, *, ict: bool = True) -> tuple[str, str]:
    """Version 0 published, 1..``versions`` ratified on the embedded coordinator and not published
    (without in-commit timestamps the files' modification times date the commits)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=ict))
    for v in range(1, versions + 1):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri


def foreign_checkpoint(spec: str, uri: str, version: int, tmp_path: Path) -> str:
    """A valid ``<version>.checkpoint.parquet`` as a misbehaving engine leaves it: the wheel
    checkpoints a copy of the table whose ratified commits up to ``version`` it published itself."""
    clone = tmp_path / "engine-copy"
    shutil.copytree(uri, clone)
    for v, data in staged_bytes(spec, uri).items():
        if v <= version:
            commit_path(str(clone), v).write_bytes(data)
    DeltaTable(str(clone), version=version).create_checkpoint()
    name = f"{version:020d}.checkpoint.parquet"
    shutil.copy2(clone / "_delta_log" / name, Path(uri) / "_delta_log" / name)
    return name


def wheel_files(uri: str, version: int) -> list[str]:
    return sorted(DeltaTable(uri, version=version).file_uris())


def age_log(uri: str, days: int = 60) -> None:
    past = time.time() - days * 86400
    for p in (Path(uri) / "_delta_log").iterdir():
        if p.is_file():
            os.utime(p, (past, past))


def test_a_foreign_checkpoint_above_the_published_commits_never_makes_publish_skip_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: 1..8 ratified, only 0 published, a valid 5.checkpoint.parquet appears.
    Before: publish listed 1..5 as already published, wrote 6..8, reported 8; the coordinator forgot
    1..5 and versions 1..4 no longer read in the wheel."""
    spec, uri = ratified_table(tmp_path)
    name = foreign_checkpoint(spec, uri, 5, tmp_path)

    code, out, _ = run(capsys, "versions", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["latest_published_version"] == 0 and out["pending"] == list(range(1, 9)), out
    assert any(name in p and "above the published version 0" in p for p in out["problems"]), out["problems"]
    code, out, _ = run(capsys, "status", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["pending_versions"] == list(range(1, 9)) and out["checkpoint_version"] == -1
    assert any(name in p for p in out["problems"])

    code, out, err = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0, err
    assert (out["from_version"], out["to_version"], out["count"]) == (1, 8, 8) and out["already_published"] == 0 and out["reported_version"] == 8
    assert open_coordinator(spec).get_commits(uri).commits == ()
    for v in range(9):  # every version reads in the reference reader, with exactly its files
        assert [u.rsplit("/", 1)[-1] for u in wheel_files(uri, v)] == sorted(f"f{i}" for i in range(1, v + 1)), v


def test_cleanup_never_anchors_on_a_foreign_checkpoint_above_the_published_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0..3 published and old; 4..8 ratified; another engine published 5 out of order and
    checkpointed it. Before: cleanup anchored on that checkpoint and deleted 0..3 while 4 was only
    in its staged file; the next publish then counted 4 as covered and the coordinator forgot it."""
    spec, uri = ratified_table(tmp_path, ict=False)
    run(capsys, "publish", uri, "--coordinator", spec, "--up-to", "3")
    commit_path(uri, 5).write_bytes(staged_bytes(spec, uri)[5])  # out of order, identical bytes
    foreign_checkpoint(spec, uri, 5, tmp_path)
    age_log(uri)

    code, out, err = run(capsys, "cleanup", uri, "--coordinator", spec, "--execute", "--json")
    assert code == 0, err
    assert out["deleted"] == 0 and out["version"] is None, out
    assert [c.version for c in list_log_files(open_table_storage(uri)).commits] == [0, 1, 2, 3, 5]

    code, out, err = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0, err
    assert (out["from_version"], out["to_version"], out["count"]) == (4, 8, 4) and out["already_published"] == 1 and out["reported_version"] == 8
    for v in range(9):
        assert len(wheel_files(uri, v)) == v


def test_checkpoint_and_compaction_never_build_on_a_foreign_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0..3 published; another engine published copies of 5 and 6 out of order and checkpointed 5.
    Before: the durable prefix ran from that checkpoint to 6, and `checkpoint` wrote version 6 while
    4 was unpublished."""
    spec, uri = ratified_table(tmp_path)
    run(capsys, "publish", uri, "--coordinator", spec, "--up-to", "3")
    staged = staged_bytes(spec, uri)
    commit_path(uri, 5).write_bytes(staged[5])
    commit_path(uri, 6).write_bytes(staged[6])
    foreign_checkpoint(spec, uri, 5, tmp_path)

    code, out, err = run(capsys, "checkpoint", uri, "--force", "--coordinator", spec, "--json")
    assert code == 0 and out["version"] == 3 and not out["skipped"], (out, err)
    code, out, err = run(capsys, "compact-log", uri, "--coordinator", spec, "--interval", "2", "--json")
    assert code == 0 and out["published_version"] == 3 and (out["to_version"] or 0) <= 3, (out, err)
    names = {p.name for p in (Path(uri) / "_delta_log").iterdir()}
    assert f"{6:020d}.checkpoint.parquet" not in names


def test_a_log_cleaned_up_below_its_checkpoint_stays_published(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What every cleanup leaves (commits below the anchor checkpoint deleted, its own commit kept),
    or a log holding only a checkpoint: published through its last contiguous commit. Commits
    below the checkpoint whose coordinator entry and staged files a cleanup removed with them are
    published too (their content lives only in the checkpoint now)."""
    spec, uri = ratified_table(tmp_path, versions=6)
    run(capsys, "publish", uri, "--coordinator", spec, "--up-to", "4")
    run(capsys, "checkpoint", uri, "--force", "--coordinator", spec)
    for v in (0, 1, 2, 3):
        commit_path(uri, v).unlink()
    code, out, _ = run(capsys, "versions", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["latest_published_version"] == 4 and out["pending"] == [5, 6] and out["problems"] == []
    code, out, err = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0 and (out["from_version"], out["to_version"], out["count"]) == (5, 6, 2) and out["reported_version"] == 6, err

    store = open_table_storage(uri)
    files = list_log_files(store)
    assert durable_prefix(files) == 6
    only_checkpoint = dataclass_replace_commits(files, ())
    assert durable_prefix(only_checkpoint) == 4  # a log holding nothing but its checkpoint


def dataclass_replace_commits(files: Any, commits: tuple[Any, ...]) -> Any:
    import dataclasses

    return dataclasses.replace(files, commits=commits)
