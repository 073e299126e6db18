"""``delta-maintenance create-table``: the supported way to make a coordinated table for a trial,
driven as a user runs it (the installed command), then maintained by the CLI and read by delta-rs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CLI = str(Path(sys.executable).with_name("delta-maintenance"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # three command processes (2.2 s CPU): make test runs it, the fast tier does not
def test_create_table_then_its_tables_yaml_entry_and_publish(tmp_path: Path) -> None:
    spec = f"local://{tmp_path}/state/coordinator.db"  # neither the database nor its folder exists yet
    out = run("create-table", str(tmp_path / "orders"), "--coordinator", spec, "--sample-commits", "5", "--checkpoint-interval", "4")
    assert out.returncode == 0, out.stderr
    assert f"created {tmp_path / 'orders'} on {spec}: version 0 published; versions 1-5 ratified, not yet published" in out.stdout
    entry = yaml.safe_load(out.stdout.split("tables: in tables.yaml:\n", 1)[1])  # the printed entry, pasted under tables:
    assert entry == [{"name": "orders", "uri": str(tmp_path / "orders"), "coordinator": spec}]
    config = tmp_path / "tables.yaml"
    config.write_text(yaml.safe_dump({"defaults": {"schedule": None}, "tables": entry}))
    assert run("validate-config", str(config), "--check-tables").returncode == 0

    status = json.loads(run("status", str(tmp_path / "orders"), "--coordinator", spec, "--json").stdout)
    assert (status["latest_ratified_version"], status["latest_published_version"]) == (5, 0), status
    assert run("publish", str(tmp_path / "orders"), "--coordinator", spec).returncode == 0

    from deltalake import DeltaTable  # an independent reader

    dt = DeltaTable(str(tmp_path / "orders"))
    assert dt.version() == 5 and dt.to_pyarrow_table().num_rows == 500
    assert dt.metadata().configuration["delta.checkpointInterval"] == "4"


@pytest.mark.slow  # 1.8 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_create_table_refuses_what_exists_and_other_coordinators(tmp_path: Path) -> None:
    spec = f"local://{tmp_path}/coordinator.db"
    assert run("create-table", str(tmp_path / "t"), "--coordinator", spec).returncode == 0
    again = run("create-table", str(tmp_path / "t"), "--coordinator", spec)
    assert again.returncode == 2 and "already exists" in again.stderr and again.stderr.count("\n") == 1, again.stderr
    other = run("create-table", str(tmp_path / "u"), "--coordinator", "dynamodb://commits?region=eu-west-1")
    assert other.returncode == 2 and "embedded coordinator" in other.stderr, other.stderr
    relative = run("create-table", str(tmp_path / "v"), "--coordinator", "local://coordinator.db")
    assert relative.returncode == 2 and "absolute" in relative.stderr, relative.stderr
    assert not (tmp_path / "u").exists() and not (tmp_path / "v").exists()
