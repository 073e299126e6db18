"""Every operation sees the table as its catalog does — driven through the CLI and the operators
with only what a user configures (a coordinator spec), on the embedded coordinator.

Each test names the defect it guards against; each failed on the code before the table identity.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

DAY_MS = 86_400_000
BIG = "x" * 70_000  # above the embedded coordinator's inline limit: the staged file is the only copy


def add(path: str, big: bool = False) -> dict[str, Any]:
    action: dict[str, Any] = {"path": path, "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}
    if big:
        action["tags"] = {"padding": BIG}
    return {"add": action}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, _printed_json(out), err


def _printed_json(out: str) -> Any:
    """The JSON the command printed. In this process Airflow may have configured logging already
    (Airflow 3.0 sends warnings to stdout, ahead of it): a standalone command's stdout is the JSON alone."""
    lines = out.splitlines(keepends=True)
    for i in range(len(lines)):
        try:
            return json.loads("".join(lines[i:]))
        except ValueError:
            continue
    return out if out.strip() else None


@pytest.fixture
def table(tmp_path: Path) -> tuple[str, str]:
    """Version 0 and commits 1..5 ratified on the embedded coordinator (no ICT: mtimes date commits)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri


def published(uri: str) -> list[int]:
    return [c.version for c in list_log_files(open_table_storage(uri)).commits]


def age_log(uri: str, days: int = 60) -> None:
    past = time.time() - days * 86400
    log = Path(uri) / "_delta_log"
    for p in log.iterdir():
        if p.is_file():
            os.utime(p, (past, past))


def ratify_property(spec: str, uri: str, version: int, key: str, value: str) -> None:
    meta = load_snapshot(uri).metadata.to_dict()
    meta["configuration"] = {**meta["configuration"], key: value}
    open_coordinator(spec).commit(uri, version, [{"metaData": meta}])


# --- gates in the ratified tail -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "skipped"),
    [
        ("delta.enableExpiredLogCleanup", "false", "enableExpiredLogCleanup"),
        ("delta.logRetentionDuration", "interval 365 days", None),
        ("delta.requireCheckpointProtectionBeforeVersion", "5", "checkpointProtection"),
    ],
)
def test_cleanup_obeys_gates_set_in_the_unpublished_ratified_tail(
    table: tuple[str, str], capsys: pytest.CaptureFixture[str], key: str, value: str, skipped: str | None
) -> None:
    spec, uri = table
    assert run(capsys, "publish", uri, "--coordinator", spec)[0] == 0
    assert run(capsys, "checkpoint", uri, "--force", "--coordinator", spec)[0] == 0
    age_log(uri)
    if key == "delta.requireCheckpointProtectionBeforeVersion":
        meta = load_snapshot(uri)
        proto = meta.protocol.to_dict()
        proto = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": sorted({*(proto.get("writerFeatures") or []), "checkpointProtection", "appendOnly", "invariants"})}
        m = meta.metadata.to_dict()
        m["configuration"] = {**m["configuration"], key: value}
        open_coordinator(spec).commit(uri, 6, [{"protocol": proto}, {"metaData": m}])
    else:
        ratify_property(spec, uri, 6, key, value)  # ratified, not yet published
    code, plan, err = run(capsys, "cleanup", uri, "--coordinator", spec, "--execute", "--json")
    assert code == 0, err
    if skipped:
        assert skipped in (plan["reason"] or "")
    else:
        assert plan["reason"] == "no commit is older than the retention cutoff" or plan["counts"].get("commits", 0) == 0
    assert published(uri) == [0, 1, 2, 3, 4, 5]  # nothing deleted


def test_the_cleanup_operator_sees_the_ratified_tail_too(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_delta_maintenance.operators.log_cleanup import DeltaLogCleanupOperator

    spec, uri = table
    run(capsys, "publish", uri, "--coordinator", spec)
    run(capsys, "checkpoint", uri, "--force", "--coordinator", spec)
    age_log(uri)
    ratify_property(spec, uri, 6, "delta.enableExpiredLogCleanup", "false")
    op = DeltaLogCleanupOperator(task_id="cleanup", table_uri=uri, coordinator_spec=spec, dry_run=False)
    summary = op.execute({})
    assert "enableExpiredLogCleanup" in summary["reason"] and summary["skipped"] and published(uri) == [0, 1, 2, 3, 4, 5]


# --- files above the catalog's head -------------------------------------------------------------


def test_a_file_written_around_the_coordinator_is_never_acted_on(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = table
    run(capsys, "publish", uri, "--coordinator", spec)
    rogue = Path(uri) / "_delta_log" / f"{6:020d}.json"
    rogue.write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(add("rogue")) + "\n")

    code, out, _ = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["latest_ratified_version"] == 5 and out["latest_published_version"] == 5
    code, out, _ = run(capsys, "compact-log", uri, "--coordinator", spec, "--interval", "3", "--json")
    assert code == 0 and out["windows"] and out["to_version"] <= 5
    code, out, _ = run(capsys, "checkpoint", uri, "--force", "--coordinator", spec, "--json")
    assert code == 0 and out["version"] == 5
    code, out, _ = run(capsys, "status", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["latest_published_version"] == 5 and any(f"{6:020d}.json" in p for p in out["problems"])
    assert run(capsys, "status", uri, "--coordinator", spec, "--strict")[0] == 4
    # the catalog ratifies its own version 6: the rogue file is a fork, never served through our checkpoint
    open_coordinator(spec).commit(uri, 6, [add("real6")])
    code, _, err = run(capsys, "publish", uri, "--coordinator", spec)
    assert code == 2 and "PublishForkError" in err and "00000000000000000006.json" in err
    assert [g.version for g in list_log_files(open_table_storage(uri)).complete_checkpoints()] == [5]


# --- publishing: reporting and convergence ------------------------------------------------------


def test_up_to_never_reports_a_version_whose_predecessors_are_not_durable(table: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = table
    client = open_coordinator(spec)
    four = next(c for c in client.get_commits(uri).commits if c.version == 4)
    # another client published 4 before 3
    (Path(uri) / "_delta_log" / f"{4:020d}.json").write_bytes((Path(uri) / "_delta_log" / four.file_name).read_bytes())
    code, out, _ = run(capsys, "publish", uri, "--coordinator", spec, "--up-to", "2", "--json")
    assert code == 0 and out["reported_version"] == 2 and out["latest_published_version"] == 2
    assert [c.version for c in client.get_commits(uri).commits] == [3, 4, 5]  # 3 is not forgotten
    code, out, _ = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0 and (out["from_version"], out["to_version"], out["count"]) == (3, 5, 2) and out["already_published"] == 1 and out["reported_version"] == 5


def test_publishing_converges_after_a_cleanup_removed_published_staged_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}", big=True)])  # staged files only, no inline copies
    store = open_table_storage(uri)
    for c in client.get_commits(uri).commits:  # published by a writer that died before reporting
        store.put_if_absent(f"{c.version:020d}.json", (Path(uri) / "_delta_log" / c.file_name).read_bytes())
    run(capsys, "checkpoint", uri, "--force")
    # a protocol-compliant cleanup removed the staged files (and commit 1) at or below the checkpoint
    for c in client.get_commits(uri).commits:
        (Path(uri) / "_delta_log" / c.file_name).unlink()
    (Path(uri) / "_delta_log" / f"{1:020d}.json").unlink()
    code, out, err = run(capsys, "publish", uri, "--coordinator", spec, "--json")
    assert code == 0, err
    assert out["reported_version"] == 5 and out["already_published"] == 5
    assert client.get_commits(uri).commits == ()


# --- staged files altered after ratification ----------------------------------------------------


def _staged(spec: str, uri: str, version: int) -> Path:
    commit = next(c for c in open_coordinator(spec).get_commits(uri).commits if c.version == version)
    return Path(uri) / "_delta_log" / commit.file_name


@pytest.fixture
def big_table(tmp_path: Path) -> tuple[str, str]:
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in (1, 2, 3):
        client.commit(uri, v, [add(f"f{v}", big=True), add(f"g{v}", big=True)])
    return spec, uri


def _rewritten(path: Path, tmp: Path) -> None:
    data = path.read_bytes()
    time.sleep(0.02)
    path.write_bytes(data.replace(b'"g2"', b'"h2"'))  # same size, other content


def _truncated(path: Path, tmp: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))  # at a line boundary: still valid NDJSON


def _swapped(path: Path, tmp: Path) -> None:
    other = path.with_name(f"{2:020d}.00000000-0000-0000-0000-000000000000.json")
    other.write_bytes(path.read_bytes().replace(b'"f2"', b'"zz"'))
    os.replace(other, path)  # another attempt's file of the same version in its place


def _symlinked(path: Path, tmp: Path) -> None:
    outside = tmp / "outside.json"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)


def _symlinked_dir(path: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere"
    os.replace(path.parent, outside)
    path.parent.symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize("alter", [_rewritten, _truncated, _swapped, _symlinked, _symlinked_dir], ids=lambda f: f.__name__.strip("_"))
def test_an_altered_staged_commit_is_never_published_or_reported(
    big_table: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], alter: Any
) -> None:
    spec, uri = big_table
    alter(_staged(spec, uri, 2), tmp_path)
    code, _, err = run(capsys, "publish", uri, "--coordinator", spec)
    assert code == 2 and ("StagedCommitError" in err or "SymlinkInLogError" in err) and ("version 2" in err or "_staged_commits" in err), err
    log = sorted(n for n in os.listdir(Path(uri) / "_delta_log") if n.endswith(".json"))
    assert log == [f"{0:020d}.json"]  # every commit is verified before the first copy
    assert [c.version for c in open_coordinator(spec).get_commits(uri).commits] == [1, 2, 3]  # nothing reported


# --- an inconsistent coordinator ----------------------------------------------------------------


def _set_latest(tmp_path: Path, uri: str, latest: int) -> None:
    with sqlite3.connect(tmp_path / "c.db") as db:
        db.execute("UPDATE tables SET latest_version = ? WHERE table_uri = ?", (latest, uri))


def test_status_and_versions_report_an_inconsistent_coordinator(table: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, uri = table
    run(capsys, "publish", uri, "--coordinator", spec)
    _set_latest(tmp_path, uri, 2**63 - 1)  # a head with nothing pending
    code, out, _ = run(capsys, "versions", uri, "--coordinator", spec, "--json")
    assert code == 0 and any("beyond anything published or pending" in p for p in out["problems"])
    code, _, err = run(capsys, "versions", uri, "--coordinator", spec, "--strict")
    assert code == 4 and "warning:" in err
    code, out, _ = run(capsys, "status", uri, "--coordinator", spec, "--json")
    assert code == 0 and out["problems"] and out["cleanup_candidates"] == 0
    code, _, err = run(capsys, "cleanup", uri, "--coordinator", spec, "--execute")
    assert code == 4 and "InconsistentCoordinatorError" in err


def _log_state(uri: str) -> dict[str, bytes]:
    log = Path(uri) / "_delta_log"
    return {str(p.relative_to(log)): p.read_bytes() for p in sorted(log.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        ("UPDATE tables SET latest_version = 2", "version 3 is listed above the latest ratified version 2"),
        ("DELETE FROM commits WHERE version = 4", "versions 3 and 5 are listed, version 4 is not"),
        ("DELETE FROM commits WHERE version = 5", "stop at version 4, but the latest ratified version is 5"),
    ],
    ids=["above-the-head", "a-gap", "short-of-the-head"],
)
def test_inconsistent_tracked_commits_stop_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: str, named: str) -> None:
    """Tracked commits above the head, with a gap, or stopping short of the head: every command
    refuses with one typed line and exit 4 (before: a warning, or a green run on a wedged table)."""
    spec, uri = f"local://{tmp_path}/c.db", str(tmp_path / "t")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions())
    for v in range(1, 6):
        client.commit(uri, v, [add(f"f{v}")])
    run(capsys, "publish", uri, "--coordinator", spec, "--up-to", "2")
    with sqlite3.connect(tmp_path / "c.db") as db:
        db.execute(tamper)
    before = _log_state(uri)
    for argv in (["versions", "--json"], ["status", "--json"], ["publish"], ["cleanup", "--execute"], ["checkpoint"]):
        code, out, err = run(capsys, argv[0], uri, "--coordinator", spec, *argv[1:])
        assert code == 4 and out is None, (argv, code, out, err)
        assert err.count("\n") == 1 and "InconsistentCommitsError" in err and named in err and uri in err, (argv, err)
    assert _log_state(uri) == before  # nothing written, nothing deleted


def test_the_identity_read_serves_the_ratified_state_when_nothing_is_pending(
    table: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the identity read protocol and metadata, then ``ratified_state`` read the same files
    again (two reads of every task's table); with nothing pending one read serves both. A pending
    commit, or a listing that changed, still gets its own read."""
    from airflow_delta_maintenance.deltalog.replay.table_state import load_table_state
    from airflow_delta_maintenance.maintenance.table import catalog_view, maintained as table_module

    spec, uri = table
    assert run(capsys, "publish", uri, "--coordinator", spec)[0] == 0
    reads: list[int | None] = []
    real = table_module.read_table_state

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[2] if len(args) > 2 else kwargs.get("version"))
        return real(*args, **kwargs)

    monkeypatch.setattr(table_module, "read_table_state", counting)  # the identity's read
    monkeypatch.setattr(catalog_view, "read_table_state", counting)  # the view's
    with table_module.open_table(uri, coordinator=spec) as t:
        state = catalog_view.ratified_state(t, t.catalog_view(), now_ms=123)
        fresh = load_table_state(uri)
        assert len(reads) == 1
        assert (state.version, state.protocol, state.metadata, state.timestamp, state.now_ms) == (
            fresh.version, fresh.protocol, fresh.metadata, fresh.timestamp, 123
        )
        ratify_property(spec, uri, 6, "delta.logRetentionDuration", "interval 90 days")  # pending now
        pending = catalog_view.ratified_state(t, t.catalog_view())
        assert len(reads) == 2 and pending.version == 6
        assert pending.properties.log_retention_ms == 90 * DAY_MS
