"""Several tables written by delta-spark 4.4 through its DynamoDB commit coordinator (on DynamoDB
Local), maintained with only what a user configures: one shared ``dynamodb://`` spec without any
per-table id in the YAML, or ``coordinator: auto``. Each table's ``tableId`` comes from its own
``delta.coordinatedCommits.tableConf-preview``; no test code hands a table conf to production code.

delta-spark's DynamoDB coordinator backfills each commit right after ratifying it (its batch size is
fixed at 1), so an unpublished tail exists only when a writer died in between. The tests produce
that state as it happens: delta-spark ratifies, then its backfilled copies are removed and the
item's commit entries restored exactly as delta-spark wrote them (same staged files, sizes, times).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROWS = 8  # versions 0 (create) .. 8


def delta_spark_table(spark: Any, uri: str, dynamodb_table: str, endpoint: str) -> None:
    conf = json.dumps({"dynamoDBTableName": dynamodb_table, "dynamoDBEndpoint": endpoint})
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id LONG, region STRING) USING delta TBLPROPERTIES ("
        f"'delta.coordinatedCommits.commitCoordinator-preview' = 'dynamodb', "
        f"'delta.coordinatedCommits.commitCoordinatorConf-preview' = '{conf}', 'delta.checkpointInterval' = '100')"
    )
    for i in range(1, ROWS + 1):
        spark.sql(f"INSERT INTO delta.`{uri}` VALUES ({i}, 'r{i % 2}')")


def table_id_of(uri: str) -> str:
    """Read by the test only, to inspect the coordinator's item."""
    return json.loads(load_snapshot(uri).metadata.configuration["delta.coordinatedCommits.tableConf-preview"])["tableId"]


def undo_backfill(uri: str, endpoint: str, dynamodb_table: str, versions: range) -> dict[int, bytes]:
    """The state after delta-spark ratified ``versions`` and died before backfilling them."""
    log = Path(uri) / "_delta_log"
    staged = {int(n.split(".")[0]): n for n in os.listdir(log / "_staged_commits") if not n.startswith(".")}
    entries, published = [], {}
    for v in versions:
        path = log / "_staged_commits" / staged[v]
        data = path.read_bytes()
        published[v] = (log / f"{v:020d}.json").read_bytes()
        assert data == published[v]
        ict = json.loads(data.splitlines()[0])["commitInfo"]["inCommitTimestamp"]
        entries.append({"M": {"version": {"N": str(v)}, "timestamp": {"N": str(ict)}, "fsName": {"S": staged[v]},
                              "fsLength": {"N": str(len(data))}, "fsTimestamp": {"N": str(int(path.stat().st_mtime * 1000))}}})
        (log / f"{v:020d}.json").unlink()
        (log / f".{v:020d}.json.crc").unlink(missing_ok=True)
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    ddb.update_item(TableName=dynamodb_table, Key={"tableId": {"S": table_id_of(uri)}},
                    AttributeUpdates={"commits": {"Value": {"L": entries}, "Action": "PUT"}})
    return published


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``delta-maintenance`` command's ``main`` in this process, with ``env`` as its whole
    environment (the installed command's own process is proven by tests/integration/test_packaging.py
    and the CLI tests; here each start would cost more than the command)."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env, clear=True), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def spark_files(spark: Any, uri: str, version: int | None = None) -> set[str]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return {Path(f.replace("file:", "")).name for f in reader.load(uri).inputFiles()}


def our_files(uri: str) -> set[str]:
    return {Path(f["path"]).name for f in load_snapshot(uri).file_list()}


def test_one_shared_spec_and_auto_maintain_every_delta_spark_table(
    spark: Any, airflow_home: Path, dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path
) -> None:
    uris = {name: str(tmp_path / name) for name in ("orders", "clicks", "events")}
    published: dict[str, dict[int, bytes]] = {}
    for name, uri in uris.items():
        delta_spark_table(spark, uri, dynamodb_table_name, dynamodb_endpoint)
        published[name] = undo_backfill(uri, dynamodb_endpoint, dynamodb_table_name, range(6, ROWS + 1))
    env = {**os.environ, **aws_env, "AWS_REGION": "us-east-1"}

    # `coordinator: auto` finds each table's coordinator from its own properties.
    for uri in uris.values():
        out = cli("versions", uri, "--coordinator", "auto", "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) | {"table_uri": None} == {
            "table_uri": None, "latest_ratified_version": ROWS, "latest_published_version": 5, "pending": [6, 7, 8], "problems": [], "published_only": False}

    # One shared spec for two tables, auto for the third; generated DAGs, dag.test().
    shared = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: \"{shared}\"\n  checkpoint: {{interval: 5, engine: local}}\n  compaction: {{interval: 4}}\n"
        f"  sensor: {{timeout_minutes: 1, poke_interval_seconds: 1}}\n"
        f"tables:\n  - name: orders\n    uri: {uris['orders']}\n  - name: clicks\n    uri: {uris['clicks']}\n"
        f"  - name: events\n    uri: {uris['events']}\n    coordinator: auto\n"
    )
    with DagRunner(airflow_home, config, **(aws_env | {"AWS_REGION": "us-east-1"})) as runner:  # the three runs in one Airflow process
        results = {name: runner.run(dag_id=f"delta_maintenance__{name}")[0] for name in uris}
    for name, uri in uris.items():
        result = results[name]
        assert result["state"] == "success" and set(result["tasks"].values()) == {"success"}, result
        x = result["xcom"]
        assert (x["publish"]["from_version"], x["publish"]["to_version"], x["publish"]["count"]) == (6, 8, 3)
        assert x["publish"]["reported_version"] == ROWS and x["checkpoint"]["version"] == ROWS
        files = list_log_files(open_table_storage(uri))
        # published bytes are exactly what delta-spark ratified; checkpoint and compaction over them
        assert all((Path(uri) / "_delta_log" / f"{v:020d}.json").read_bytes() == data for v, data in published[name].items())
        assert [g.version for g in files.complete_checkpoints()] == [ROWS]
        # the DAG's compaction skips windows the new checkpoint covers; an explicit window is written
        assert {(c.version, c.end_version) for c in files.compactions} <= {(1, 4), (5, 8)}
        out = cli("compact-log", uri, "--coordinator", "auto", "--start", "5", "--end", "8", "--json", env=env)
        assert out.returncode == 0 and json.loads(out.stdout)["file"] == f"{5:020d}.{ROWS:020d}.compacted.json", out.stderr
        # the coordinator forgot nothing it should keep, and delta-spark agrees with us
        out = cli("versions", uri, "--coordinator", shared, "--json", "--strict", env=env)
        assert out.returncode == 0 and json.loads(out.stdout)["pending"] == [], out.stderr
        assert spark.read.format("delta").load(uri).count() == ROWS
        assert spark_files(spark, uri) == our_files(uri)

    # cleanup through the CLI (auto): with the log expired, only files below the anchor go, and
    # delta-spark still reads every version from the anchor on, and commits on top.
    uri = uris["orders"]
    before = {v: spark_files(spark, uri, v) for v in range(ROWS, ROWS + 1)}
    later = "2100-01-01T00:00:00Z"
    out = cli("cleanup", uri, "--coordinator", "auto", "--execute", "--now", later, "--allow-future-now", "--json", env=env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["version"] == ROWS and plan["counts"]["commits"] == ROWS, plan
    assert [c.version for c in list_log_files(open_table_storage(uri)).commits] == [ROWS]
    assert spark_files(spark, uri, ROWS) == before[ROWS]
    spark.sql(f"INSERT INTO delta.`{uri}` VALUES (99, 'r1')")
    assert spark.read.format("delta").load(uri).count() == ROWS + 1


def test_a_spec_that_contradicts_the_table_is_refused_naming_both(
    spark: Any, dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict[str, str], tmp_path: Path
) -> None:
    uri = str(tmp_path / "t")
    delta_spark_table(spark, uri, dynamodb_table_name, dynamodb_endpoint)
    env = {**os.environ, **aws_env}
    other = f"dynamodb://someone_elses_commits?region=us-east-1&endpoint={dynamodb_endpoint}"
    out = cli("publish", uri, "--coordinator", other, env=env)
    assert out.returncode == 2 and "CoordinatorMismatchError" in out.stderr
    assert "someone_elses_commits" in out.stderr and dynamodb_table_name in out.stderr
    wrong_id = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}&table_id=00000000-0000-0000-0000-000000000000"
    out = cli("status", uri, "--coordinator", wrong_id, env=env)
    assert out.returncode == 2 and table_id_of(uri) in out.stderr and "00000000-0000" in out.stderr
