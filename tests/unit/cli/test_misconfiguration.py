"""The CLI exits non-zero, with one line naming the mistake, for the misconfigurations that used to
succeed silently; and nothing is created by a mistyped coordinator path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

CLI = [str(Path(sys.executable).with_name("delta-maintenance"))]  # the installed command, as a user runs it


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture
def table(tmp_path: Path) -> tuple[str, str]:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "table")
    client = open_coordinator(spec + "?create=true")
    client.commit(uri, 0, create_actions(ict=True))
    client.commit(uri, 1, [{"add": {"path": "a", "partitionValues": {"region": "x"}, "size": 1, "modificationTime": 1, "dataChange": True}}])
    return spec, uri


@pytest.mark.parametrize("command", ["publish", "versions"])
def test_a_mistyped_database_path_fails_and_creates_nothing(table: tuple[str, str], tmp_path: Path, command: str) -> None:
    _, uri = table
    typo = tmp_path / "coordinater.db"
    out = run(command, uri, "--coordinator", f"local://{typo}", cwd=tmp_path)
    # the table names the database it was created on, so the typo is caught before anything opens it
    named = "CoordinatorMismatchError" in out.stderr and str(typo) in out.stderr and "coordinator.db" in out.stderr
    assert out.returncode == 2 and (named or ("coordinator database does not exist" in out.stderr and "create=true" in out.stderr)), out
    assert out.stderr.count("\n") == 1 and not typo.exists()


def test_a_relative_database_path_is_refused(table: tuple[str, str], tmp_path: Path) -> None:
    _, uri = table
    out = run("publish", uri, "--coordinator", "local://coordinator.db?create=true", cwd=tmp_path / "table")
    assert out.returncode == 2 and "must be absolute" in out.stderr, out
    assert not (tmp_path / "table" / "coordinator.db").exists()


def test_the_correct_spec_still_publishes(table: tuple[str, str], tmp_path: Path) -> None:
    spec, uri = table
    out = run("publish", uri, "--coordinator", spec, cwd=tmp_path)
    assert out.returncode == 0 and "publish: published v1 (1 commit" in out.stdout, out
