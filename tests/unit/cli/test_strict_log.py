"""Nothing acted on that cannot be read: every command, driven as a user types it, on a
table whose newest commits are damaged — a typed one-line error naming the file, and nothing
deleted or written; malformed metadata is never rewritten into different metadata; damaged input
that used to end in a traceback ends in a typed error. The ``deltalake`` wheel is the independent
reader where a command succeeds."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import deltalake
import fsspec
import pyarrow as pa
import pytest

from airflow_delta_maintenance.cli import main

from ..deltalog.logbuilder import LogBuilder, add, commit_info, metadata, protocol

DAY = 86_400_000
ADD = {"path": "z", "size": 3, "partitionValues": {}, "modificationTime": 1, "dataChange": True}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def listing(root: Path) -> dict[str, float]:
    base = root / "_delta_log"
    return {str(p.relative_to(base)): p.stat().st_mtime for p in base.rglob("*")}


def old_table(tmp_path: Path, meta: dict | None = None) -> Path:
    """Commits 0..11 thirty to nineteen days old, one-day retention, a checkpoint at 11: cleanup
    would delete eleven commits."""
    root = tmp_path / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    now = int(time.time() * 1000)
    for v in range(12):
        actions = [commit_info()]
        if v == 0:
            actions += [protocol(), meta or metadata({"delta.logRetentionDuration": "interval 1 days"})]
        actions.append(add(f"f{v}", 100 + v))
        log.commit(v, actions, mtime_ms=now - (30 - v) * DAY)
    rc, _, err = run("checkpoint", str(root), "--force")
    assert rc == 0, err
    return root


def line(**fields: object) -> bytes:
    return json.dumps({"add": {**ADD, **fields}}).encode()


LATEST = {
    "truncated": b'{"commitInfo":{}}\n' + line()[:-15] + b"\n",
    "empty": b"",
    "invalid-utf8": b'{"commitInfo":{"x":"\xff\xfe"}}\n' + line() + b"\n",
    "add-without-path": b'{"commitInfo":{}}\n{"add":{"size":2,"partitionValues":{},"modificationTime":1,"dataChange":true}}\n',
    "string-size": b'{"commitInfo":{}}\n' + line(size="3") + b"\n",
    "two-adds-of-one-path": b'{"commitInfo":{}}\n' + line() + b"\n" + line(size=4) + b"\n",
    "add-and-remove-of-one-path": b'{"commitInfo":{}}\n' + line() + b'\n{"remove":{"path":"z","dataChange":true}}\n',
    "directory": None,
}
NEEDLES = {
    "truncated": "line 2 is not valid JSON",
    "empty": "the commit is empty",
    "invalid-utf8": "not valid UTF-8",
    "add-without-path": "add action: add.path: is required (a file action without a path)",
    "string-size": "add.size: must be an integer",
    "two-adds-of-one-path": "adds path 'z' twice",
    "add-and-remove-of-one-path": "adds and removes the same file 'z'",
    "directory": "is a directory, not a log file",
}
COMMANDS = [["status", "--strict"], ["inspect"], ["checkpoint", "--force"], ["compact-log", "--interval", "2"], ["cleanup"], ["cleanup", "--execute"]]


@pytest.mark.parametrize("case", sorted(LATEST))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_damaged_latest_commit_stops_every_command_and_nothing_is_deleted(tmp_path: Path, case: str, command: list[str]) -> None:
    root = old_table(tmp_path)
    path = root / "_delta_log" / f"{12:020d}.json"
    if LATEST[case] is None:
        path.mkdir()
    else:
        path.write_bytes(LATEST[case])
    before = listing(root)
    rc, out, err = run(command[0], str(root), *command[1:])
    assert listing(root) == before, "nothing is written or deleted"
    if command[0] == "status" and rc == 4:  # a damaged file action is shown as a problem; --strict fails on it
        assert "cannot be read" in out and NEEDLES[case] in out, (rc, out, err)
        return
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (rc, out, err)
    assert "CorruptLogError" in err and "00000000000000000012.json" in err and NEEDLES[case] in err, err


def test_cleanup_of_the_same_table_undamaged_deletes_what_the_damaged_one_kept(tmp_path: Path) -> None:
    root = old_table(tmp_path)
    (root / "_delta_log" / f"{12:020d}.json").write_bytes(b'{"commitInfo":{}}\n' + line() + b"\n")
    rc, out, err = run("cleanup", str(root), "--execute")
    assert rc == 0 and "deleted 11 files" in out, (out, err)


BAD_METADATA = {
    "partitionColumns-a-string": ({"partitionColumns": "region"}, "metaData.partitionColumns: must be a list of strings"),
    "schema-field-without-type": ({"schemaString": json.dumps({"type": "struct", "fields": [{"name": "x", "nullable": True}]})}, 'has no "type"'),
    "schemaString-not-json": ({"schemaString": "{not json"}, "metaData.schemaString: is not valid JSON"),
    "schemaString-too-deep": ({"schemaString": '{"type":' * 5000 + '"long"' + "}" * 5000}, "nests deeper"),
    "partition-column-not-in-schema": ({"partitionColumns": ["region"]}, "are not columns of the schema"),
    "configuration-value-a-number": ({"configuration": {"delta.logRetentionDuration": 7}}, "configuration.delta.logRetentionDuration: must be a string"),
}
WHEEL_READS = {"configuration-value-a-number"}  # it takes the number for its text; the protocol says Map[String, String]


@pytest.mark.parametrize("case", sorted(BAD_METADATA))
@pytest.mark.parametrize("command", [["checkpoint", "--force"], ["inspect"], ["compact-log", "--interval", "2"], ["cleanup", "--execute"], ["status"]], ids=lambda c: c[0])
def test_malformed_metadata_is_a_typed_error_naming_file_and_version_never_rewritten(tmp_path: Path, case: str, command: list[str]) -> None:
    change, needle = BAD_METADATA[case]
    meta = metadata({"delta.logRetentionDuration": "interval 1 days"})
    root = old_table(tmp_path)
    meta["metaData"].update(change)
    (root / "_delta_log" / f"{12:020d}.json").write_bytes(json.dumps(commit_info()).encode() + b"\n" + json.dumps(meta).encode() + b"\n")
    before = listing(root)
    rc, out, err = run(command[0], str(root), *command[1:])
    assert listing(root) == before
    assert rc == 2 and err.count("\n") == 1, (rc, out, err)  # status too: the protocol and metadata cannot be read
    assert "00000000000000000012.json: line 2" in err and needle in err and "Traceback" not in err, err
    if case not in WHEEL_READS:
        with pytest.raises(Exception):  # noqa: B017 - the wheel refuses such a table too, in its own words
            deltalake.DeltaTable(str(root)).get_add_actions()


BAD_LINES = {  # lines compaction used to copy verbatim while checkpoint and inspect refused them
    "partitionValues-a-list": (line(partitionValues=["a"]), "add.partitionValues: must be an object of strings"),
    "stats-an-object": (line(stats={"numRecords": 1}), "add.stats: must be a string"),
    "dataChange-a-string": (line(dataChange="true"), "add.dataChange: must be true or false"),
    "nested-tags": (line(tags={"a": {"b": "c"}}), "add.tags.a: must be a string"),
    "remove-size-negative": (b'{"remove":{"path":"f3","dataChange":true,"size":-1}}', "remove.size: -1 is out of range"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_compact_log_never_copies_a_line_the_reader_refuses(tmp_path: Path, case: str) -> None:
    root = old_table(tmp_path)
    bad, needle = BAD_LINES[case]
    (root / "_delta_log" / f"{12:020d}.json").write_bytes(b'{"commitInfo":{}}\n' + bad + b"\n")
    (root / "_delta_log" / f"{13:020d}.json").write_bytes(b'{"commitInfo":{}}\n' + line(path="y") + b"\n")
    for command in (["compact-log", "--start", "12", "--end", "13"], ["compact-log", "--interval", "2"], ["checkpoint", "--force"], ["inspect"]):
        before = listing(root)
        rc, out, err = run(command[0], str(root), *command[1:])
        assert rc == 2 and "00000000000000000012.json: line 2" in err and needle in err, (command, rc, out, err)
        assert listing(root) == before


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("deep-commit-line", b'{"commitInfo":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n", "nests deeper than 64 levels"),
        ("deep-add-tags", line(tags={"a": "b"})[:-2] + b',"zz":' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n", "nests deeper than 64 levels"),
        ("nan-in-commitInfo", b'{"commitInfo":{"x":NaN}}\n', "is not valid JSON"),
        ("duplicate-key", b'{"add":{"path":"a","path":"b","size":1,"partitionValues":{},"modificationTime":1,"dataChange":true}}\n', "appears twice"),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["inspect"], ["checkpoint", "--force"], ["compact-log", "--interval", "2"], ["cleanup", "--execute"]], ids=lambda c: c[0])
def test_input_that_ended_in_a_traceback_is_a_typed_error(tmp_path: Path, name: str, data: bytes, needle: str, command: list[str]) -> None:
    root = old_table(tmp_path)
    (root / "_delta_log" / f"{12:020d}.json").write_bytes(data)
    before = listing(root)
    rc, out, err = run(command[0], str(root), *command[1:])
    assert listing(root) == before
    text = out + err  # status shows a damaged file action as a problem (exit 0 without --strict)
    assert rc in ((0, 2) if command[0] == "status" else (2,)) and "Traceback" not in err, (rc, out, err)
    assert needle in text and "00000000000000000012.json" in text, (rc, out, err)


@pytest.mark.parametrize("value", [b"1e400", b'"11"', b"true", b"-1", b"11.0", b"[" * 5000 + b"]" * 5000])
def test_a_malformed_last_checkpoint_is_ignored_and_rewritten_not_a_traceback(tmp_path: Path, value: bytes) -> None:
    """``_last_checkpoint`` is a hint (PROTOCOL; delta-spark's "corrupted-last-checkpoint" golden
    table): a bad one is ignored — cleanup and checkpoint list the log instead — and the next
    checkpoint replaces it with a good one."""
    root = old_table(tmp_path)
    hint = root / "_delta_log" / "_last_checkpoint"
    hint.write_bytes(b'{"version":' + value + b',"size":14}')
    rc, out, err = run("cleanup", str(root), "--execute")
    assert rc == 0 and "deleted 11 files" in out, (out, err)
    (root / "_delta_log" / f"{12:020d}.json").write_bytes(b'{"commitInfo":{}}\n' + line() + b"\n")
    rc, out, err = run("checkpoint", str(root), "--force")
    assert rc == 0, err
    assert json.loads(hint.read_bytes())["version"] == 12
    assert {p for p in pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=True)).column("path").to_pylist()} == {
        *(f"f{v}" for v in range(12)),
        "z",
    }


def test_publish_refuses_a_ratified_commit_that_cannot_be_read_and_copies_nothing(tmp_path: Path) -> None:
    from airflow_delta_maintenance.demo.sample_table import create_actions
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    spec, uri = f"local://{tmp_path}/c.db?create=true", str(tmp_path / "t")
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 4):
        partition = {"region": "x"}
        actions = [{"add": {**ADD, "path": f"f{v}", "partitionValues": partition}}]
        if v == 2:  # two adds of one path: every reader would refuse version 2
            actions.append({"add": {**ADD, "path": "f2", "partitionValues": partition, "size": 9}})
        client.commit(uri, v, actions)
    rc, out, err = run("publish", uri, "--coordinator", spec)
    assert rc == 2 and "adds path 'f2' twice" in err and err.count("\n") == 1, (rc, out, err)
    published = [n for n in os.listdir(Path(uri) / "_delta_log") if n.endswith(".json") and n[:-5].isdigit()]
    assert published == [f"{0:020d}.json"], published  # every commit is checked before the first copy
    assert [c.version for c in client.get_commits(uri).commits] == [1, 2, 3]
