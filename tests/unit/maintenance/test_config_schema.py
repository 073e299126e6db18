"""The JSON schema of tables.yaml (``delta-maintenance config-schema``), generated from the same
models the validator uses: what it accepts and refuses agrees with ``validate-config``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.fleet.config_schema import json_schema, markdown_reference

CLI = str(Path(sys.executable).with_name("delta-maintenance"))
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def schema() -> dict:
    out = subprocess.run([CLI, "config-schema"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed == json_schema()
    jsonschema.Draft202012Validator.check_schema(printed)
    return printed


def errors(schema: dict, text: str) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(text))]


@pytest.mark.slow  # 0.8 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_example_tables_yaml_and_a_discovery_file_are_valid(schema: dict) -> None:
    assert errors(schema, (REPO / "dags" / "tables.yaml").read_text()) == []
    assert errors(schema, """
defaults: {coordinator: 'local:///c.db', sensor: false, checkpoint: {engine: auto, spark_conf: {spark.executor.cores: 2}}, tags: [a]}
tables:
  - {name: orders, uri: s3://lake/orders, cleanup: {mode: delete, retention_days: 7.5}, rate_limit: {calls_per_second: 2}}
  - {name: events, uri: s3://lake/events, optimize: {engine: spark, target_file_size: 256MB, max_bytes: 10737418240, interval: 12h}}
  - {name: clicks, uri: s3://lake/clicks, optimize: true, health: {max_small_files: 500}}
discovery:
  fleet_file: fleet.json
  sources:
    - {name: uc, unity_catalog: 'unity-catalog://uc:8080', catalog: main, schemas: sales, settings: {schedule: '@daily'}}
    - {name: ddb, dynamodb: 'dynamodb://commits?region=eu-west-1', conn_id: aws}
  overrides:
    - {match: {name: ['main.*'], properties: {tier: gold}}, health: {max_pending_commits: 5}, enabled: true}
""") == []


@pytest.mark.parametrize("text", [
    "tables: [{name: t, uri: /t, checkpoint: {engine: flink}}]",
    "tables: [{name: t, uri: /t, retries: '3'}]",
    "tables: [{name: t, uri: /t, sensor: {zz: 1}}]",
    "tables: [{name: t, uri: /t, sensor: 'on'}]",
    "tables: [{name: t, uri: /t, optimize: {engine: flink}}]",
    "tables: [{name: t, uri: /t, optimize: {target_file_size: 0}}]",
    "tables: [{name: t, uri: /t, optimize: {interval: '@daily'}}]",
    "tables: [{name: t, uri: /t, optimize: {max_byte: 1}}]",
    "tables: [{name: 'bad name', uri: /t}]",
    "tables: [{uri: /t}]",
    "tabels: []",
    "defaults: {name: x}",
    "discovery: {sources: [{name: s, unity_catalog: 'unity-catalog://h:1', catalog: c, dynamodb: 'dynamodb://t?region=r'}]}",
    "discovery: {sources: [{name: s, dynamodb: 'dynamodb://t?region=r'}], overrides: [{match: {name: a}, uri: /x}]}",
])
def test_what_the_validator_refuses_for_a_key_or_a_type_the_schema_refuses(schema: dict, text: str, tmp_path: Path) -> None:
    assert errors(schema, text), text
    config = tmp_path / "tables.yaml"
    config.write_text(text + "\n")
    # the command's own code (its process is the schema fixture's and the markdown test's: a start-up each, not one per case)
    assert main(["validate-config", str(config)]) == 2


@pytest.mark.slow  # 0.9 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_the_markdown_reference_is_the_docs_block() -> None:
    out = subprocess.run([CLI, "config-schema", "--markdown"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout == markdown_reference() + "\n"
