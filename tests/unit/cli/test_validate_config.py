"""``delta-maintenance validate-config`` through the installed console script, on files a user writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions, create_sample_table
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

CLI = str(Path(sys.executable).with_name("delta-maintenance"))


def validate(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "validate-config", str(config), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # 1.6 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_each_invalid_table_is_reported_and_the_exit_code_is_non_zero(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {coordinator: 'local:///data/c.db'}\n"
        "tables:\n  - {name: good, uri: /t/a}\n  - {name: hourly, uri: /t/b, schedule: every hour}\n"
        "  - {name: rel, uri: /t/c, coordinator: 'local://tmp/c.db'}\n"
    )
    out = validate(config)
    assert out.returncode == 2, out
    lines = out.stdout.splitlines()
    assert lines[0] == "ok       good: DAG delta_maintenance__good"
    assert lines[1].startswith("INVALID  hourly: schedule: 'every hour' is not a cron expression")
    assert lines[2].startswith("INVALID  rel: coordinator: coordinator spec 'local://tmp/c.db': the database path must be absolute")
    assert lines[3] == f"{config}: 3 table(s), 2 with problems; 2 problem(s) in all"
    config.write_text("tables:\n  - {name: good, uri: /t/a, publish: false, schedule: 30m}\n")
    assert validate(config).returncode == 0


@pytest.mark.slow  # 1.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_five_mistakes_in_three_tables_are_all_listed_in_one_run(tmp_path: Path) -> None:
    """Two mistakes in one table, two in another (one a rule between keys), one in a third: one
    run of the command lists all five, a line each naming the table and the key path."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {coordinator: 'local:///data/c.db'}\n"
        "tables:\n"
        "  - {name: a, uri: /t/a, retries: '3', cleanup: {mode: wipe}}\n"
        "  - {name: b, uri: /t/b, schedule: every hour, sensor: {min_new_commit: 2}}\n"
        "  - {name: good, uri: /t/good}\n"
        "  - {name: c, uri: /t/c, coordinator_conn_id: coord}\n"
    )
    out = validate(config)
    assert out.returncode == 2, out
    invalid = [line for line in out.stdout.splitlines() if line.startswith("INVALID")]
    assert invalid == [
        "INVALID  a: cleanup.mode: expected dry-run or delete, got 'wipe'",
        "INVALID  a: retries: expected an integer, got '3'",
        "INVALID  b: schedule: 'every hour' is not a cron expression (e.g. '0 * * * *'), a preset (@annually, @continuous, @daily, @hourly, "
        "@midnight, @monthly, @once, @quarterly, @weekly, @yearly) or a duration (e.g. 30m, 2h, 1d)",
        "INVALID  b: sensor.min_new_commit: unknown key (allowed: deferrable, enabled, min_new_commits, mode, poke_interval_seconds, timeout_minutes)",
        "INVALID  c: coordinator: give coordinator or coordinator_conn_id, not both (coordinator: auto may take a connection for the endpoint)",
    ], out.stdout
    assert out.stdout.splitlines()[-1] == f"{config}: 4 table(s), 3 with problems; 5 problem(s) in all"
    doc = json.loads(validate(config, "--json").stdout)
    assert sum(len(r["problems"]) for r in doc["tables"]) == 5 and not doc["ok"]


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_files_own_mistakes_are_listed_with_the_tables(tmp_path: Path) -> None:
    """An unknown top-level key and a mistake inherited from defaults, beside a table's own: all
    listed, the inherited one named where it is written."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {coordinator: 'local:///data/c.db', checkpoint: {engine: flink}}\n"
        "table: []\n"
        "tables:\n  - {name: a, uri: /t/a, owner: 7}\n  - {name: b, uri: /t/b, checkpoint: {engine: local}}\n"
    )
    out = validate(config)
    assert out.returncode == 2, out
    assert out.stdout.splitlines() == [
        f"INVALID  {config}: table: unknown top-level key (allowed: defaults, discovery, tables)",
        "ok       b: DAG delta_maintenance__b",
        "INVALID  a: defaults.checkpoint.engine: expected spark, local or auto, got 'flink'",
        "INVALID  a: owner: expected a string, got 7",
        f"{config}: 2 table(s), 1 with problems; 3 problem(s) in all",
    ], out.stdout


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_a_file_that_is_not_yaml_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "tables.yaml"
    config.write_text("tables: [\n")
    out = validate(config)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "not valid YAML" in out.stderr, out


@pytest.mark.slow  # 1.4 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_check_tables_reads_each_table(tmp_path: Path) -> None:
    spec, coordinated = f"local://{tmp_path}/c.db", str(tmp_path / "coordinated")
    open_coordinator(spec + "?create=true").commit(coordinated, 0, create_actions(ict=True))
    plain = str(tmp_path / "plain")
    create_sample_table(plain, commits=2)
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"tables:\n  - {{name: coordinated, uri: '{coordinated}', coordinator: 'local://{tmp_path}/c.db'}}\n"
        f"  - {{name: plain, uri: '{plain}', publish: false, cleanup: {{retention_days: 40}}}}\n"
    )
    out = validate(config, "--check-tables")
    assert out.returncode == 0, out
    config.write_text(
        f"tables:\n  - {{name: typo, uri: '{tmp_path}/coordinatd', coordinator: 'local://{tmp_path}/c.db'}}\n"
        f"  - {{name: nodb, uri: '{coordinated}', coordinator: 'local://{tmp_path}/other.db'}}\n"
        f"  - {{name: short, uri: '{plain}', publish: false, cleanup: {{retention_days: 2}}}}\n"
        f"  - {{name: shortvac, uri: '{plain}', publish: false, vacuum: {{retention_hours: 1}}}}\n"
        f"  - {{name: allowedvac, uri: '{plain}', publish: false, vacuum: {{retention_hours: 1, allow_shorter_retention: true}}}}\n"
    )
    out = validate(config, "--check-tables", "--json")
    assert out.returncode == 2, out
    rows = {r["name"]: r for r in json.loads(out.stdout)["tables"]}
    assert rows["typo"]["problems"] == [f"no _delta_log at {tmp_path}/coordinatd/_delta_log and unknown to the coordinator"]
    assert "coordinator database does not exist" in rows["nodb"]["problems"][0]
    assert "shorter than the table's delta.logRetentionDuration (30 days)" in rows["short"]["problems"][0]
    assert rows["shortvac"]["problems"] == [
        "vacuum.retention_hours 1 is shorter than the table's delta.deletedFileRetentionDuration (7 days); set vacuum.allow_shorter_retention: true to accept it"]
    assert rows["allowedvac"]["problems"] == []
    assert not (tmp_path / "other.db").exists()


@pytest.mark.slow  # 0.7 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_every_mistake_of_an_optimize_section_is_listed_and_a_good_one_passes(tmp_path: Path) -> None:
    """The ``optimize:`` section as a user writes it: off when absent, on when given; its sizes,
    engine and interval checked at validation, not when the task first runs."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {publish: false}\n"
        "tables:\n  - {name: a, uri: /t/a, optimize: {engine: flink, target_file_size: 12XB, interval: '@daily', max_bytes: 0}}\n"
        "  - {name: b, uri: /t/b, optimize: {target_file_size: 128MB, predicate: \"day >= '2026-01-01'\"}}\n"
    )
    out = validate(config)
    assert out.returncode == 2, out
    text = out.stdout
    for key, words in [
        ("optimize.engine", "local or spark"),
        ("optimize.target_file_size", "128MB or 1GiB, got '12XB'"),
        ("optimize.interval", "a duration such as 12h or 1d, got '@daily'"),
        ("optimize.max_bytes", "must be positive"),
    ]:
        assert any(key in line and words in line for line in text.splitlines()), (key, text)
    assert "ok       b: DAG delta_maintenance__b" in text and "4 problem(s) in all" in text, text
