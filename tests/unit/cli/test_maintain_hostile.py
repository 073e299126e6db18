"""``checkpoint``, ``compact-log``, ``inspect`` and ``cleanup`` on damaged input: typed
one-line errors naming the file, line or option, bounded work, and nothing written from bad input.
Tables live on local disk; the ``deltalake`` wheel is the independent reader."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import deltalake
import fsspec
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.model.paths import compaction_name

from ..deltalog.logbuilder import LogBuilder, add, commit_info, metadata, protocol

DAY = 86_400_000


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def table(tmp_path: Path, versions: int = 12, proto: dict | None = None) -> tuple[Path, LogBuilder]:
    root = tmp_path / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    now = int(time.time() * 1000)
    for v in range(versions):
        actions = [commit_info()]
        if v == 0:
            actions += [proto or protocol(), metadata({"delta.logRetentionDuration": "interval 10 days"})]
        actions.append(add(f"f{v}", 100 + v))
        log.commit(v, actions, mtime_ms=now - (versions - v) * DAY)
    return root, log


def log_names(root: Path) -> set[str]:
    base = root / "_delta_log"
    return {str(p.relative_to(base)) for p in base.rglob("*")}


def wheel_files(root: Path, version: int | None = None) -> set[tuple[str, int]]:
    t = deltalake.DeltaTable(str(root)) if version is None else deltalake.DeltaTable(str(root), version=version)
    actions = t.get_add_actions(flatten=True)
    return set(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))


def _append_raw(root: Path, version: int, lines: list[bytes]) -> Path:
    path = root / "_delta_log" / f"{version:020d}.json"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


ADD_B = b'{"add":{"path":"b","size":2,"partitionValues":{},"modificationTime":1,"dataChange":true}}'


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b'{"remove":{"path":"f1","dataChange":true},"add":{"path":"b","size":2,"partitionValues":{},"modificationTime":1,"dataChange":true}}', "more than one action"),
        (b'{"add":{"path":"b","size":2,"partitionValues":{},"modificationTime":1,"dataChange":true},"remove":{"path":"f1","dataChange":true}}', "more than one action"),
        (b'{"add":{"size":2,"partitionValues":{},"modificationTime":1,"dataChange":true}}', "without a path"),
        (b'{"add":{"path":"b\xff\xfe","size":2,"partitionValues":{},"modificationTime":1,"dataChange":true}}', "UTF-8"),
    ],
    ids=["remove-then-add", "add-then-remove", "add-without-path", "invalid-utf8-path"],
)
@pytest.mark.parametrize("command", ["checkpoint", "compact-log", "inspect"])
def test_a_bad_line_is_a_typed_error_naming_file_and_line_and_nothing_is_written(tmp_path: Path, line: bytes, needle: str, command: str) -> None:
    root, _ = table(tmp_path)
    bad = _append_raw(root, 12, [b'{"commitInfo":{}}', line])
    before = log_names(root)
    args = {"checkpoint": ["checkpoint", str(root), "--force"], "compact-log": ["compact-log", str(root), "--start", "11", "--end", "12"],
            "inspect": ["inspect", str(root)]}[command]
    rc, out, err = run(*args)
    assert rc == 2 and out == "" and err.count("\n") == 1, (rc, out, err)
    assert "CorruptLogError" in err and bad.name in err and "line 2" in err and needle in err, err
    assert log_names(root) == before  # no checkpoint or compaction was written from it


def test_the_wheel_agrees_with_our_checkpoint_when_every_line_holds_one_action(tmp_path: Path) -> None:
    # the same change as the two-action line, written properly: our checkpoint and the wheel agree
    root, _ = table(tmp_path)
    _append_raw(root, 12, [b'{"commitInfo":{}}', b'{"remove":{"path":"f1","dataChange":true}}', ADD_B])
    expected = wheel_files(root)
    rc, _, err = run("checkpoint", str(root), "--force")
    assert rc == 0, err
    for v in range(12):
        (root / "_delta_log" / f"{v:020d}.json").unlink()
    assert wheel_files(root) == expected and ("b", 2) in expected and not any(p == "f1" for p, _ in expected)


@pytest.mark.parametrize("stray", [10**9, 2**63 - 1])
@pytest.mark.parametrize("command", [["inspect"], ["compact-log", "--interval", "10"], ["checkpoint", "--force"], ["cleanup"]])
def test_a_stray_far_future_version_is_a_typed_error_naming_the_file(tmp_path: Path, stray: int, command: list[str]) -> None:
    root, log = table(tmp_path)
    name = f"{stray:020d}.json"
    log.write(name, b'{"commitInfo":{}}\n')
    exe = Path(sys.executable).with_name("delta-maintenance")

    def limit_memory() -> None:  # the old code listed every missing version: keep that from taking the machine
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))  # this checkout's package
    proc = subprocess.run(
        [str(exe), command[0], str(root), *command[1:]], capture_output=True, text=True, timeout=120, preexec_fn=limit_memory, env=env
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "MissingCommitError" in proc.stderr and name in proc.stderr, proc.stderr


def test_compact_log_skips_windows_a_later_checkpoint_covers(tmp_path: Path) -> None:
    root, _log = table(tmp_path, versions=26)
    rc, _, err = run("checkpoint", str(root), "--force", "--version", "17")
    assert rc == 0, err
    rc, out, err = run("compact-log", str(root), "--interval", "5", "--list", "--json")
    assert rc == 0, err
    written = [(w["start"], w["end"]) for w in json.loads(out)["window_list"] if "reason" not in w]
    assert written == [(18, 20), (21, 25)]  # [1, 5] .. [11, 15] are already served by checkpoint 17
    assert not (root / "_delta_log" / compaction_name(1, 5)).exists()
    for v in (20, 25):
        assert wheel_files(root, v) == {(f"f{i}", 100 + i) for i in range(v + 1)}


@pytest.mark.parametrize(
    ("proto", "feature"),
    [
        (protocol(3, 7, ["someFutureReaderFeature"], ["someFutureReaderFeature"]), "someFutureReaderFeature"),
        (protocol(1, 7, None, ["appendOnly", "someFutureWriterFeature"]), "someFutureWriterFeature"),
    ],
)
@pytest.mark.parametrize("command", [["compact-log", "--start", "2", "--end", "5"], ["compact-log", "--interval", "5"], ["checkpoint", "--force"], ["cleanup", "--execute"]])
def test_every_writer_refuses_unknown_features_by_name(tmp_path: Path, proto: dict, feature: str, command: list[str]) -> None:
    root, log = table(tmp_path)
    log.commit(12, [commit_info(), proto])  # a later commit adds the feature
    before = log_names(root)
    rc, out, err = run(command[0], str(root), *command[1:])
    assert rc == 2 and "UnsupportedFeatureError" in err and feature in err and err.count("\n") == 1, (rc, out, err)
    assert log_names(root) == before


def test_a_torn_older_checkpoint_is_a_typed_error_or_ignored_never_a_crash(tmp_path: Path) -> None:
    root, _log = table(tmp_path, versions=30)
    for v in (5, 15, 25):
        rc, _, err = run("checkpoint", str(root), "--force", "--version", str(v))
        assert rc == 0, err
    recorded = {v: wheel_files(root, v) for v in range(20, 30)}
    torn = root / "_delta_log" / f"{15:020d}.checkpoint.parquet"
    torn.write_bytes(torn.read_bytes()[:100])
    rc, out, err = run("cleanup", str(root), "--execute", "--json")
    assert rc == 0, err  # checkpoint 15 is passed over; 5 anchors
    assert json.loads(out)["version"] == 5  # the anchor checkpoint
    rc, out, err = run("checkpoint", str(root), "--force", "--version", "15")  # asked for the torn one itself
    assert rc == 2 and "CorruptLogError" in err and torn.name in err and err.count("\n") == 1, err
    torn.unlink()
    for v, state in recorded.items():
        assert wheel_files(root, v) == state


@pytest.mark.parametrize(
    ("code", "exc"),
    [(errno.ENOSPC, OSError), (errno.EROFS, OSError), (errno.EACCES, PermissionError)],
    ids=["no-space", "read-only", "permission"],
)
def test_storage_errors_have_their_own_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, exc: type[OSError]) -> None:
    root, _ = table(tmp_path)
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):  # the kernel's answer when creating the checkpoint's file
        if flags & os.O_CREAT and "_delta_log" in str(path):
            raise exc(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    before = log_names(root)
    rc, out, err = run("checkpoint", str(root), "--force")
    assert rc == 3 and out == "" and err.count("\n") == 1 and os.strerror(code) in err and "_delta_log" in err, (rc, err)
    assert log_names(root) == before
    rc, _, err = run("inspect", str(root), "--version", "99")
    assert rc == 2  # bad input keeps its own code


def test_a_checkpoint_name_claiming_billions_of_parts_is_reported_without_walking_them(tmp_path: Path) -> None:
    root, log = table(tmp_path, versions=3)
    claimed = f"{5:020d}.checkpoint.{1:010d}.{9_999_999_999:010d}.parquet"
    log.write(claimed, b"part one of many")
    for v in (6, 7):
        log.commit(v, [commit_info(), add(f"g{v}")])
    exe = Path(sys.executable).with_name("delta-maintenance")

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.run([str(exe), "inspect", str(root)], capture_output=True, text=True, timeout=120, preexec_fn=limit_memory, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "IncompleteCheckpointError" in proc.stderr and claimed in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("proto", "feature"),
    [
        (protocol(3, 7, ["someFutureReaderFeature"], ["someFutureReaderFeature"]), "someFutureReaderFeature"),
        (protocol(1, 7, None, ["appendOnly", "someFutureWriterFeature"]), "someFutureWriterFeature"),
    ],
)
def test_the_spark_compaction_job_applies_the_same_gate_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], proto: dict, feature: str
) -> None:
    pytest.importorskip("pyspark")
    from airflow_delta_maintenance.spark_jobs import log_compaction

    root, log = table(tmp_path)
    log.commit(12, [commit_info(), proto])
    before = log_names(root)
    rc = log_compaction.main(["--table-uri", str(root), "--start", "2", "--end", "5"])
    err = capsys.readouterr().err
    assert rc != 0 and "UnsupportedFeatureError" in err and feature in err, err
    assert log_names(root) == before
    # the CLI refuses before submitting anything
    rc, _, err = run("compact-log", str(root), "--start", "2", "--end", "5", "--engine", "spark")
    assert rc == 2 and feature in err


def test_the_spark_compaction_job_checks_a_huge_window_from_the_files_present(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyspark")
    from airflow_delta_maintenance.spark_jobs import log_compaction

    root, _ = table(tmp_path)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.run(
        [sys.executable, log_compaction.__file__, "--table-uri", str(root), "--start", "1", "--end", str(2**62)],
        capture_output=True, text=True, timeout=120, preexec_fn=limit_memory, env=env,
    )
    assert proc.returncode == 2 and "version 12 is not published" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow  # minutes on a busy machine: make test runs it, the fast tier does not
def test_a_stats_string_that_is_null_does_not_kill_the_checkpoint_command(tmp_path: Path) -> None:
    # pyarrow's JSON reader crashed the process (SIGSEGV) on an add whose stats string is `null`:
    # the command, run as a user runs it, in its own process so that a crash fails this test.
    root = tmp_path / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    log.commit(0, [commit_info(), protocol(), metadata()])
    log.commit(1, [commit_info(), add("a", 10, stats="null"), add("b", 20, stats='{"numRecords":3,"minValues":{"x":1},"maxValues":{"x":2},"nullCount":{"x":0}}')])
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("delta-maintenance")), "checkpoint", str(root), "--force", "--version", "1", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert (root / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()
    assert wheel_files(root) == {("a", 10), ("b", 20)}
