"""The CLI prints the summary line a task logs (one place formats it): what was done, versions,
files, bytes, seconds; a cleanup plan is summarised (counts per kind) unless ``--list`` asks for
every file; progress of a long step goes to stderr, throttled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.checkpoint import writer as checkpoint_writer
from airflow_delta_maintenance.maintenance.operations import summary as report

from .test_maintain_hostile import run, table


def test_checkpoint_compaction_and_cleanup_print_their_summary_line(tmp_path: Path) -> None:
    root, _ = table(tmp_path, versions=30)
    rc, out, err = run("checkpoint", str(root), "--interval", "100")
    assert rc == 0 and out == "checkpoint: skipped — only 30 commits since the last checkpoint (interval 100)\n", (out, err)
    rc, out, _ = run("checkpoint", str(root), "--force", "--version", "10")
    assert rc == 0 and re.fullmatch(r"checkpoint: wrote v10 \(classic, 1 part, 13 actions, [\d.]+ KiB\) in \d+\.\d s\n", out), out
    rc, out, _ = run("compact-log", str(root), "--interval", "4")
    assert rc == 0 and re.fullmatch(r"compaction: wrote 5 window\(s\) over 11-28 \([\d,.]+ (KiB|bytes)\) in \d+\.\d s\n", out), out
    rc, out, _ = run("cleanup", str(root))  # commits a day apart, 10 days' retention: 0-9 expired, anchored at 10
    lines = out.splitlines()
    assert rc == 0 and re.fullmatch(r"cleanup: would delete 10 files \([\d.]+ KiB\) below v10 \(dry run\) in \d+\.\d s", lines[0]), out
    assert len(lines) == 2 and "commits=10" in lines[1], out  # counts per kind, not the files
    rc, listed, _ = run("cleanup", str(root), "--list")
    assert rc == 0 and len(listed.splitlines()) == 2 + 10 and f"{0:020d}.json" in listed


def test_a_long_checkpoint_shows_progress_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = table(tmp_path, versions=30)
    monkeypatch.setattr(checkpoint_writer, "ROWS_PER_ROW_GROUP", 10)
    monkeypatch.setattr(report, "PROGRESS_EVERY_S", 0.0)  # every line, for the test (the default is 5 s)
    rc, out, err = run("checkpoint", str(root), "--force", "--version", "29")
    assert rc == 0 and out.startswith("checkpoint: wrote v29"), (out, err)
    assert err.splitlines() == [f"checkpoint: v29 {n} of 30 file actions written" for n in (10, 20, 30)]


def test_checkpoint_without_interval_writes_only_when_the_tables_interval_is_due(tmp_path: Path) -> None:
    """``checkpoint`` as its help says: when due by the table's ``delta.checkpointInterval`` (10 by
    default), ``--force`` now. Old code: no ``--interval`` meant "write now", 9 commits after the last."""
    root, _ = table(tmp_path, versions=30)
    assert run("checkpoint", str(root), "--force", "--version", "20")[0] == 0
    rc, out, err = run("checkpoint", str(root))
    assert rc == 0 and out == "checkpoint: skipped — only 9 commits since the last checkpoint (interval 10)\n", (out, err)
    assert not (root / "_delta_log" / f"{29:020d}.checkpoint.parquet").exists()
    rc, out, _ = run("checkpoint", str(root), "--force")
    assert rc == 0 and out.startswith("checkpoint: wrote v29 "), out
    assert run("checkpoint", str(root))[1] == "checkpoint: skipped — a checkpoint already exists at 29\n"
