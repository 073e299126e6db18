"""Interop with delta-spark's DynamoDB commit coordinator, on DynamoDB Local.

- Our client ratifies commits; delta-spark (configured with its DynamoDB coordinator) reads the
  table including the unpublished versions, then commits on top through the same coordinator.
- delta-spark commits through the coordinator; we read its item, publish from its staged files
  with identical bytes, and read the table with the same state as delta-spark.
- delta-spark writes small files through the coordinator; our OPTIMIZE commits through it; delta-spark
  reads the same rows and writes on top.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.maintenance.operations.publish import publish_ratified_commits
from airflow_delta_maintenance.maintenance.table.catalog_view import load_ratified_snapshot
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.helpers.tables import bind_table

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def spark_files(spark: Any, uri: str) -> set[str]:
    return {Path(f.replace("file:", "")).relative_to(uri).as_posix().replace("%3D", "=") for f in spark.read.format("delta").load(uri).inputFiles()}


def test_delta_spark_reads_our_unpublished_commits_and_commits_on_top(spark: Any, dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict, tmp_path: Path) -> None:
    uri = str(tmp_path / "ours")
    client = open_coordinator(f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}")
    client.create_dynamodb_table()  # type: ignore[attr-defined]
    client.commit(uri, 0, create_actions(ict=True))
    table = bind_table(open_table_storage(uri), client)  # the tableId version 0 recorded in the table
    for v in range(1, 4):
        table.commit(v, [add_action_for(uri, data_batch(v * 10, 10, "emea"), "emea")])
    assert [c.version for c in list_log_files(open_table_storage(uri)).commits] == [0]  # nothing published
    ours = load_ratified_snapshot(table)
    assert ours.version == 3
    # delta-spark, through its DynamoDB coordinator, sees the three unpublished versions
    assert spark.read.format("delta").load(uri).count() == 30
    assert spark_files(spark, uri) == {f["path"] for f in ours.file_list()}
    spark.sql(f"INSERT INTO delta.`{uri}` VALUES (999, 1.0, 'amer')")
    # delta-spark ratified version 4 with our client's conditions and backfilled everything
    assert table.latest_ratified_version() == 4
    after = load_ratified_snapshot(bind_table(open_table_storage(uri), client))
    assert after.version == 4 and spark_files(spark, uri) == {f["path"] for f in after.file_list()}


def test_we_publish_what_delta_spark_ratified(spark: Any, dynamodb_endpoint: str, dynamodb_table_name: str, aws_env: dict, tmp_path: Path) -> None:
    uri = str(tmp_path / "theirs")
    conf = json.dumps({"dynamoDBTableName": dynamodb_table_name, "dynamoDBEndpoint": dynamodb_endpoint})
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id LONG, region STRING) USING delta PARTITIONED BY (region) TBLPROPERTIES ("
        f"'delta.coordinatedCommits.commitCoordinator-preview' = 'dynamodb', 'delta.coordinatedCommits.commitCoordinatorConf-preview' = '{conf}')"
    )
    for i in range(1, 5):
        spark.sql(f"INSERT INTO delta.`{uri}` VALUES ({i}, 'r{i % 2}')")
    store = open_table_storage(uri)
    client = open_coordinator(f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}")
    table = bind_table(store, client)  # the tableId comes from delta-spark's table properties
    assert table.latest_ratified_version() == 4
    # delta-spark backfills right after ratifying (batch size 1). Rewind to the moment before its
    # backfill of 2..4: put its staged commits back into the item and remove the published copies.
    ddb = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1")
    published = {v: (Path(uri) / "_delta_log" / f"{v:020d}.json").read_bytes() for v in (2, 3, 4)}
    staged = {int(n.split(".")[0]): n for n in os.listdir(Path(uri) / "_delta_log" / "_staged_commits") if not n.startswith(".")}
    entries = []
    for v in (2, 3, 4):
        data = (Path(uri) / "_delta_log" / "_staged_commits" / staged[v]).read_bytes()
        assert data == published[v]
        ict = json.loads(data.splitlines()[0])["commitInfo"]["inCommitTimestamp"]
        entries.append({"M": {"version": {"N": str(v)}, "timestamp": {"N": str(ict)}, "fsName": {"S": staged[v]},
                              "fsLength": {"N": str(len(data))},
                              "fsTimestamp": {"N": str(int((Path(uri) / "_delta_log" / "_staged_commits" / staged[v]).stat().st_mtime * 1000))}}})
        (Path(uri) / "_delta_log" / f"{v:020d}.json").unlink()
    ddb.update_item(TableName=dynamodb_table_name, Key={"tableId": {"S": table.table_conf["tableId"]}},
                    AttributeUpdates={"commits": {"Value": {"L": entries}, "Action": "PUT"}})
    result = publish_ratified_commits(table)
    assert result.published == [2, 3, 4] and result.reported_version == 4
    assert all((Path(uri) / "_delta_log" / f"{v:020d}.json").read_bytes() == published[v] for v in (2, 3, 4))
    assert table.get_commits().commits == ()
    assert {f["path"] for f in load_snapshot(uri).file_list()} == spark_files(spark, uri)
    assert spark.read.format("delta").load(uri).count() == 4


def test_we_optimize_a_table_delta_spark_writes_through_its_coordinator(spark: Any, dynamodb_endpoint: str, dynamodb_table_name: str,
                                                                       aws_env: dict, tmp_path: Path) -> None:
    """delta-spark writes small files through its DynamoDB coordinator; OPTIMIZE (run as the CLI
    runs it: the table's own coordinator) commits through the same coordinator; delta-spark reads
    the same rows from fewer files, then writes and deletes on top."""
    from airflow_delta_maintenance.maintenance.operations.optimize import run_optimize
    from airflow_delta_maintenance.maintenance.table.maintained import open_table

    uri = str(tmp_path / "spark_written")
    conf = json.dumps({"dynamoDBTableName": dynamodb_table_name, "dynamoDBEndpoint": dynamodb_endpoint})
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id LONG, region STRING) USING delta PARTITIONED BY (region) TBLPROPERTIES ("
        f"'delta.coordinatedCommits.commitCoordinator-preview' = 'dynamodb', 'delta.coordinatedCommits.commitCoordinatorConf-preview' = '{conf}')"
    )
    for i in range(1, 7):
        spark.sql(f"INSERT INTO delta.`{uri}` VALUES ({i}, 'r{i % 2}'), ({i + 100}, 'r{i % 2}')")
    before = sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect())
    files_before = spark_files(spark, uri)
    spec = f"dynamodb://{dynamodb_table_name}?region=us-east-1&endpoint={dynamodb_endpoint}"
    result = run_optimize(open_table(uri, coordinator=spec))
    assert result.commits == [7] and result.files_removed == len(files_before) and result.files_added == 2, result.report().what
    client = open_coordinator(spec)
    table = bind_table(open_table_storage(uri), client)
    assert table.latest_ratified_version() == 7  # ratified by the coordinator, not written around it
    history = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("version", "operation").collect()
    assert (7, "OPTIMIZE") in {(r[0], r[1]) for r in history}
    assert sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect()) == before
    after = spark_files(spark, uri)
    assert len(after) == 2 and not after & files_before
    assert sorted(tuple(r) for r in spark.read.format("delta").option("versionAsOf", 6).load(uri).collect()) == before
    spark.sql(f"INSERT INTO delta.`{uri}` VALUES (999, 'r1')")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id = 101")
    assert table.latest_ratified_version() == 9
    expected = sorted([r for r in before if r[0] != 101] + [(999, "r1")])
    assert sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect()) == expected
    assert {f["path"] for f in load_ratified_snapshot(table).file_list()} == spark_files(spark, uri)  # the same files as delta-spark
