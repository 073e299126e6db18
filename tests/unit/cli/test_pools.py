"""``delta-maintenance pools``: the pools a tables.yaml needs, in ``airflow pools import`` format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow  # 1.2 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_an_invalid_table_is_left_out_with_a_warning_and_the_others_pools_are_written(tmp_path: Path) -> None:
    """One invalid table does not stop the command (exit 0): it is named on stderr with each of
    its mistakes; the valid tables' pools are written. A mistake of the file itself still exits 2."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {coordinator: 'dynamodb://commits?region=eu-west-1', pool: auto}\n"
        "tables:\n"
        "  - {name: a, uri: 's3://lake/a'}\n"
        "  - {name: broken, uri: 's3://lake/b', schedule: every hour, retries: -1}\n"
    )
    out = subprocess.run([CLI, "pools", str(config), "--output", str(tmp_path / "pools.json")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert list(json.loads((tmp_path / "pools.json").read_text())) == ["delta_coordinator__dynamodb_eu-west-1_commits"]
    warnings = out.stderr.splitlines()
    assert len(warnings) == 2 and all(w.startswith("delta-maintenance: warning: table broken left out (invalid): ") for w in warnings), out.stderr
    assert "schedule: 'every hour'" in warnings[0] and "retries: must be >= 0, got -1" in warnings[1]
    assert out.stdout.splitlines()[-1] == f"{config}: 1 pool(s); 1 invalid table(s) left out (see the warnings)"
    doc = json.loads(subprocess.run([CLI, "pools", str(config), "--json"], capture_output=True, text=True, timeout=300).stdout)
    assert [s["name"] for s in doc["skipped"]] == ["broken"] and len(doc["skipped"][0]["problems"]) == 2
    config.write_text(config.read_text() + "tabels: []\n")
    out = subprocess.run([CLI, "pools", str(config)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "tabels: unknown top-level key" in out.stderr, out


def test_discovered_tables_get_their_pools(tmp_path: Path) -> None:
    """``pool: auto`` of tables from a discovery source: their endpoint's pool is listed too."""
    from airflow_delta_maintenance.fleet.catalog_discovery import DiscoveryResult, SourceResult, write_fleet_file
    from airflow_delta_maintenance.fleet.config import DiscoveredTable, parse_discovery
    from airflow_delta_maintenance.maintenance.config.tables import read_yaml

    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {pool: auto, pool_slots: 6}\n"
        "discovery:\n  sources:\n    - {name: ddb, dynamodb: 'dynamodb://commits?region=us-east-1'}\n"
    )
    discovery = parse_discovery(read_yaml(config), str(config))
    assert discovery is not None
    found = [DiscoveredTable("ddb", "t_0123abcd", "s3://lake/t", "dynamodb://commits?region=us-east-1&table_id=0123abcd")]
    write_fleet_file(discovery.fleet_file, DiscoveryResult([SourceResult("ddb", "dynamodb", found)], "2026-11-23T00:00:00+00:00").document(discovery))
    out = subprocess.run([CLI, "pools", str(config), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert {k: v["slots"] for k, v in json.loads(out.stdout)["pools"].items()} == {"delta_coordinator__dynamodb_us-east-1_commits": 6}
