"""``delta-maintenance pools``: the pools a tables.yaml needs, in ``airflow pools import`` format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("delta-maintenance"))


def test_one_pool_per_coordinator_endpoint_written_for_airflow_pools_import(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {coordinator: 'dynamodb://commits?region=eu-west-1', pool: auto, pool_slots: 8}\n"
        "tables:\n"
        "  - {name: a, uri: 's3://lake/a'}\n"
        "  - {name: b, uri: 's3://lake/b', pool_slots: 4}\n"
        "  - {name: c, uri: 's3://lake/c', coordinator: 'unity-catalog://uc.example.com:8080/main.s.c'}\n"
        "  - {name: d, uri: 's3://lake/d', pool: etl}\n"
    )
    out = subprocess.run([CLI, "pools", str(config), "--output", str(tmp_path / "pools.json"), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    written = json.loads((tmp_path / "pools.json").read_text())
    assert json.loads(out.stdout)["pools"] == written
    assert {k: v["slots"] for k, v in written.items()} == {
        "delta_coordinator__dynamodb_eu-west-1_commits": 4, "delta_coordinator__uc_uc.example.com_8080": 8, "etl": 8}
    assert all(v["include_deferred"] is False and v["description"] for v in written.values())
    assert "2 table(s) on coordinator endpoint dynamodb:eu-west-1:commits" in written["delta_coordinator__dynamodb_eu-west-1_commits"]["description"]
