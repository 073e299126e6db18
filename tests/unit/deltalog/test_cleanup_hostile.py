"""Cleanup on damaged or hostile logs, driven through the CLI on local disk and checked
against the ``deltalake`` wheel: every version inside retention reads exactly as it was recorded.

Ages are real: commits get storage mtimes days before the real clock, because the CLI plans with
the real clock unless ``--now`` (itself checked against the real clock) is given.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import deltalake  # the independent reader
import fsspec
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import LastCheckpointHint
from airflow_delta_maintenance.deltalog.model.paths import multipart_checkpoint_name
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

DAY = 86_400_000
N = 30  # versions 0..29; version v is (N - v) days old
RET = {"delta.logRetentionDuration": "interval 10 days"}
V2 = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
V2_CONF = dict(RET, **{"delta.checkpointPolicy": "v2"})


def real_now() -> int:
    return int(time.time() * 1000)


def build(root: Path, *, proto: dict | None = None, conf: dict | None = None, ict_from: int | None = None) -> LogBuilder:
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    now = real_now()
    conf = dict(conf if conf is not None else RET)
    if ict_from is not None:
        proto = protocol(1, 7, None, ["inCommitTimestamp"])
        conf.update({"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": str(ict_from)})
    for v in range(N):
        ts = now - (N - v) * DAY
        actions = [commit_info(ts if ict_from is not None and v >= ict_from else None)]
        if v == 0:
            actions += [proto or protocol(), metadata(conf)]
        actions.append(add(f"f{v}", 100 + v))
        if v % 4 == 3:
            actions.append(remove(f"f{v - 2}", ts))
        log.commit(v, actions, mtime_ms=ts)
    return log


def wheel_state(root: Path, version: int) -> set[tuple[str, int]]:
    actions = deltalake.DeltaTable(str(root), version=version).get_add_actions(flatten=True)
    return set(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))


def record(root: Path) -> dict[int, set[tuple[str, int]]]:
    return {v: wheel_state(root, v) for v in range(N - 10, N)}  # always inside a 10-day retention


def checkpoint(root: Path, version: int) -> list[str]:
    store = open_table_storage(str(root))
    return write_checkpoint(store, load_snapshot(store, version)).files


def cleanup(root: Path, *extra: str) -> tuple[int, dict | None, str]:
    import contextlib

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["cleanup", str(root), "--execute", "--json", *extra])
    return rc, (json.loads(out.getvalue()) if out.getvalue() else None), err.getvalue()


def log_names(root: Path) -> set[str]:
    base = root / "_delta_log"
    return {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file() or p.is_symlink()}


def assert_retained_versions_read(root: Path, recorded: dict[int, set[tuple[str, int]]], damaged: list[Path], *, unreadable: bool = True) -> None:
    # our reader never loads from an unreadable checkpoint: it falls back to an older one (a
    # readable one that lost rows fools every reader; only cleanup checks counts against the hint)
    for v, state in recorded.items() if unreadable else ():
        ours = load_snapshot(str(root), v)
        assert {(f["path"], f["size"]) for f in ours.file_list()} == state, v
    # the wheel trusts whatever checkpoint is newest: remove the damage (as an operator would),
    # and every retained version must still be reconstructible from what cleanup left
    for p in damaged:
        p.unlink(missing_ok=True)
    (root / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    for v, state in recorded.items():
        assert wheel_state(root, v) == state, v


def _split_into_parts(root: Path, version: int, classic: str) -> list[Path]:
    """Turn our classic checkpoint into a 2-part one (as a multi-part writer would have written)."""
    log = root / "_delta_log"
    table = pq.read_table(log / classic)
    half = table.num_rows // 2
    parts = []
    for i, chunk in enumerate((table.slice(0, half), table.slice(half)), start=1):
        p = log / multipart_checkpoint_name(version, i, 2)
        pq.write_table(chunk, p)
        parts.append(p)
    (log / classic).unlink()
    adds = table.num_rows - table.column("add").null_count
    hint = LastCheckpointHint(version=version, size=table.num_rows, parts=2, num_of_add_files=adds)
    (log / "_last_checkpoint").write_bytes(hint.to_json_bytes())
    return parts


def _tear(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["torn part", "empty part", "missing part rows"])
def test_a_damaged_multipart_checkpoint_is_never_the_anchor(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "t"
    build(root)
    recorded = record(root)
    checkpoint(root, 5)
    parts = _split_into_parts(root, 15, checkpoint(root, 15)[0])
    if damage != "missing part rows":  # (that damage is only visible against _last_checkpoint, which names 15)
        checkpoint(root, 25)  # readers of the latest version never open checkpoint 15: only cleanup relies on it
    if damage == "torn part":
        _tear(parts[1])
    elif damage == "empty part":
        parts[1].write_bytes(b"")
    else:  # a readable part that lost its rows: the footer is fine, the counts are not
        pq.write_table(pq.read_table(parts[1]).slice(0, 0), parts[1])
    rc, out, err = cleanup(root)
    assert rc == 0, err
    assert out["version"] == 5 and out["unreadable_checkpoints"], out
    assert_retained_versions_read(root, recorded, parts, unreadable=damage != "missing part rows")


@pytest.mark.parametrize("damage", ["missing sidecar", "torn sidecar", "empty sidecar"])
def test_a_v2_checkpoint_with_a_damaged_sidecar_is_never_the_anchor(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "t"
    build(root, proto=V2, conf=V2_CONF)
    recorded = record(root)
    written = checkpoint(root, 15)
    checkpoint(root, 25)
    sidecar = root / "_delta_log" / next(f for f in written if f.startswith("_sidecars/"))
    top = root / "_delta_log" / next(f for f in written if not f.startswith("_sidecars/"))
    if damage == "missing sidecar":
        sidecar.unlink()
    elif damage == "torn sidecar":
        _tear(sidecar)
    else:
        sidecar.write_bytes(b"")
    before = log_names(root)
    rc, out, err = cleanup(root)
    # no older checkpoint can serve: cleanup stops, naming the sidecar, and deletes nothing
    assert rc == 2 and out is None and sidecar.name in err and err.count("\n") == 1, (rc, out, err)
    assert log_names(root) == before
    assert_retained_versions_read(root, recorded, [top])


def test_no_readable_anchor_stops_cleanup_with_a_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "t"
    build(root)
    parts = _split_into_parts(root, 15, checkpoint(root, 15)[0])
    _tear(parts[0])
    before = log_names(root)
    rc, out, err = cleanup(root)
    assert rc == 2 and out is None and "CorruptLogError" in err and parts[0].name in err and err.count("\n") == 1
    assert log_names(root) == before


@pytest.mark.parametrize("linked", ["_sidecars", "_staged_commits", "_commits", "file"])
def test_cleanup_never_follows_a_symlink_out_of_the_table(tmp_path: Path, linked: str) -> None:
    root = tmp_path / "t"
    build(root)
    checkpoint(root, 15)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / ("old.parquet" if linked in ("_sidecars", "file") else f"{3:020d}.abc.json")
    victim.write_bytes(b"not ours")
    old = (real_now() - 5 * DAY) / 1000
    os.utime(victim, (old, old))
    log = root / "_delta_log"
    if linked == "file":  # a commit that is a link to a file outside the table
        (log / f"{2:020d}.json").rename(tmp_path / "v2.json")
        (log / f"{2:020d}.json").symlink_to(tmp_path / "v2.json")
    else:
        (log / linked).symlink_to(elsewhere, target_is_directory=True)
    before = log_names(root)
    rc, out, err = cleanup(root)
    assert rc == 2 and "SymlinkInLogError" in err, (rc, out, err)
    assert (f"{2:020d}.json" if linked == "file" else linked) in err
    assert victim.read_bytes() == b"not ours" and log_names(root) == before
    assert (linked != "file") or (tmp_path / "v2.json").exists()


def test_one_bad_in_commit_timestamp_is_a_corrupt_log_and_nothing_is_deleted(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log = build(root, ict_from=0)
    checkpoint(root, 5)
    checkpoint(root, 25)
    recorded = record(root)
    # version 26 claims an ICT of 1000 (1970): a binary search would take it as old and move the cutoff to 26
    path = root / "_delta_log" / f"{26:020d}.json"
    lines = path.read_bytes().split(b"\n")
    info = json.loads(lines[0])
    info["commitInfo"]["inCommitTimestamp"] = 1000
    lines[0] = json.dumps(info).encode()
    mtime = os.stat(path).st_mtime
    path.write_bytes(b"\n".join(lines))
    os.utime(path, (mtime, mtime))
    del log
    before = log_names(root)
    rc, _out, err = cleanup(root)
    assert rc == 2 and "NonMonotonicTimestampError" in err and "25" in err and "26" in err, err
    assert log_names(root) == before
    for v, state in recorded.items():
        assert wheel_state(root, v) == state


def test_a_future_now_needs_an_override_and_never_ages_a_fresh_sidecar(tmp_path: Path) -> None:
    root = tmp_path / "t"
    build(root, proto=V2, conf=V2_CONF)
    checkpoint(root, 15)
    fresh = root / "_delta_log" / "_sidecars" / "being-written.parquet"
    fresh.write_bytes((root / "_delta_log" / next(iter(sorted((root / "_delta_log" / "_sidecars").iterdir())))).read_bytes())
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 40 * 86400))
    before = log_names(root)
    rc, _out, err = cleanup(root, "--now", future)
    assert rc == 2 and "--now" in err and "--allow-future-now" in err and log_names(root) == before
    rc, _out, err = cleanup(root, "--now", future, "--allow-future-now")
    assert rc == 0, err
    assert fresh.exists(), "a sidecar written minutes ago was deleted because --now was in the future"


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e308"])
def test_bad_retention_days_is_a_typed_one_line_error(tmp_path: Path, value: str) -> None:
    root = tmp_path / "t"
    build(root)
    checkpoint(root, 15)
    before = log_names(root)
    rc, _out, err = cleanup(root, f"--retention-days={value}", "--allow-shorter-retention")
    assert rc == 2 and "--retention-days" in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert log_names(root) == before


def test_cleanup_refuses_a_table_with_an_unknown_writer_feature(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log = build(root)
    checkpoint(root, 15)
    log.commit(N, [commit_info(), protocol(1, 7, None, ["appendOnly", "someFutureFeature"])], mtime_ms=real_now())
    before = log_names(root)
    rc, _out, err = cleanup(root)
    assert rc == 2 and "UnsupportedFeatureError" in err and "someFutureFeature" in err, err
    assert log_names(root) == before
