from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.demo.sample_table import append_batch, create_sample_table


@pytest.fixture
def table(tmp_path: Path) -> str:
    root = str(tmp_path / "t")
    store = create_sample_table(root, commits=4)
    append_batch(store, 4, "emea")
    return root


def test_inspect_json_is_exactly_one_object_with_the_documented_keys(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", table, "--json", "--files"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    obj = json.loads(out)
    for key in ("version", "protocol", "metadata", "num_files", "size_bytes", "latest_checkpoint_version", "files"):
        assert key in obj
    assert obj["version"] == 4 and obj["num_files"] == 4 and obj["latest_checkpoint_version"] == -1
    assert [f["path"] for f in obj["files"]] == sorted(f["path"] for f in obj["files"])
    assert obj["size_bytes"] == sum(f["size"] for f in obj["files"])


def test_inspect_at_a_version_and_human_output(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", table, "--version", "2"]) == 0
    out = capsys.readouterr().out
    assert "version:            2" in out and "active files:       2" in out and "partition columns:  region" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["inspect", "/definitely/not/here"], "TableNotFoundError"),
        (["inspect", "{table}", "--version", "99"], "VersionNotFoundError"),
        (["inspect", "{table}", "-o", "novalue"], "KEY=VALUE"),
    ],
)
def test_bad_input_exits_non_zero_with_the_error_on_stderr(table: str, capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    rc = main([a.format(table=table) for a in args])
    captured = capsys.readouterr()
    assert rc == 2 and needle in captured.err and captured.out == ""


def test_console_script_runs(table: str) -> None:
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("delta-maintenance")
    out = subprocess.run([str(exe), "inspect", table, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["version"] == 4
