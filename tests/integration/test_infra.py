"""The real components the suite depends on: up, loopback-only, and behaving as we rely on.

If one of these fails, the interop and integration tests built on it mean nothing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests._infra import jars
from tests._infra.servers import RunningServer, listening_addresses

pytestmark = pytest.mark.integration

IPV4_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp spells it


def _non_loopback_ipv4() -> str | None:
    """An address of this machine other than 127.0.0.1 (the source address of a default route)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1, nothing is sent for UDP connect
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.mark.parametrize("fixture", ["dynamodb_server", "s3_server", "minio", "azurite", "fake_gcs"])
def test_servers_listen_on_127_0_0_1_only(fixture: str, request: pytest.FixtureRequest) -> None:
    value = request.getfixturevalue(fixture)
    server: RunningServer = getattr(value, "server", value)  # the object stores wrap theirs
    assert listening_addresses(server.port) == {IPV4_LOOPBACK}
    if shutil.which("ss"):  # the same seen by iproute2
        ss = subprocess.run(["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True).stdout.split()
        assert ss[3] == f"127.0.0.1:{server.port}", ss  # State Recv-Q Send-Q Local:Port Peer:Port
    other = _non_loopback_ipv4()
    if other is not None:  # the machine has another address: the server must not answer there
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((other, server.port)) != 0


def test_dynamodb_is_the_official_dynamodb_local(dynamodb_server: RunningServer) -> None:
    assert dynamodb_server.implementation.startswith("DynamoDB Local 3.")
    assert "official jar" in dynamodb_server.implementation


def test_dynamodb_local_conditional_put_fails_the_second_time(dynamodb_endpoint: str, aws_env: dict[str, str]) -> None:
    client = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1")
    table = f"infra_{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    put = dict(TableName=table, Item={"k": {"S": "v1"}}, ConditionExpression="attribute_not_exists(k)")
    client.put_item(**put)
    with pytest.raises(ClientError) as err:
        client.put_item(**put)
    assert err.value.response["Error"]["Code"] == "ConditionalCheckFailedException"

    # delta-spark's coordinator (AWS SDK v1) uses the legacy Expected/AttributeUpdates API
    client.put_item(TableName=table, Item={"k": {"S": "a"}, "v": {"N": "0"}, "b": {"BOOL": False}})
    update = dict(
        TableName=table,
        Key={"k": {"S": "a"}},
        Expected={"v": {"Value": {"N": "0"}, "ComparisonOperator": "EQ"}},
        AttributeUpdates={"v": {"Value": {"N": "1"}, "Action": "PUT"}, "b": {"Value": {"BOOL": True}, "Action": "PUT"}},
    )
    client.update_item(**update)
    with pytest.raises(ClientError) as err:
        client.update_item(**update)
    assert err.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    item = client.get_item(TableName=table, Key={"k": {"S": "a"}}, ConsistentRead=True)["Item"]
    assert item == {"k": {"S": "a"}, "v": {"N": "1"}, "b": {"BOOL": True}}  # moto's mock stores {"S": "True"}


def test_dynamodb_local_is_one_database_for_every_region_and_key(dynamodb_endpoint: str, aws_env: dict[str, str]) -> None:
    """``-sharedDb``: delta-spark's JVM client and boto3 must see the same tables."""
    table = f"infra_{uuid.uuid4().hex[:8]}"
    boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1").create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    other = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="eu-west-1",
                         aws_access_key_id="other", aws_secret_access_key="other")
    assert table in other.list_tables()["TableNames"]


def test_moto_s3_rejects_a_second_create_with_412(s3_endpoint: str, s3_bucket: tuple[str, dict[str, Any]]) -> None:
    import s3fs

    bucket, options = s3_bucket
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert err.value.response["Error"]["Code"] == "PreconditionFailed"
    assert err.value.response["Error"]["Condition"] == "If-None-Match"
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"1"

    # s3fs maps PreconditionFailed on If-None-Match to FileExistsError (s3fs.errors.translate_boto_error)
    fs = s3fs.S3FileSystem(**options)
    fs.pipe_file(f"{bucket}/x", b"1", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(f"{bucket}/x", b"2", mode="create")
    assert fs.cat_file(f"{bucket}/x") == b"1"


def test_moto_s3_create_has_exactly_one_winner_under_contention(s3_endpoint: str, s3_bucket: tuple[str, dict[str, Any]]) -> None:
    bucket, _ = s3_bucket
    writers = 8
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", config=Config(max_pool_connections=writers))
    for round_ in range(20):
        winners: list[int] = []
        barrier = threading.Barrier(writers)

        def attempt(i: int, key: str = f"race/{round_}", barrier: threading.Barrier = barrier, winners: list[int] = winners) -> None:
            barrier.wait()
            try:
                client.put_object(Bucket=bucket, Key=key, Body=f"writer {i}".encode(), IfNoneMatch="*")
                winners.append(i)
            except ClientError as err:
                assert err.response["ResponseMetadata"]["HTTPStatusCode"] == 412

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(winners) == 1
        assert client.get_object(Bucket=bucket, Key=f"race/{round_}")["Body"].read() == f"writer {winners[0]}".encode()


@pytest.mark.spark
def test_spark_writes_and_reads_a_delta_table(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spark.range(0, 10).selectExpr("id", "id % 2 AS p").write.format("delta").partitionBy("p").save(uri)
    spark.range(10, 15).selectExpr("id", "id % 2 AS p").write.format("delta").mode("append").save(uri)
    assert spark.read.format("delta").load(uri).count() == 15
    assert sorted(r.id for r in spark.read.format("delta").load(uri).where("p = 1").collect()) == [1, 3, 5, 7, 9, 11, 13]
    assert spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").count() == 2
    assert (tmp_path / "t" / "_delta_log" / "00000000000000000001.json").exists()


@pytest.mark.spark
def test_spark_s3a_writes_and_reads_a_delta_table_on_moto(spark_s3a: Any, s3_bucket: tuple[str, dict[str, Any]]) -> None:
    import s3fs

    bucket, options = s3_bucket
    uri = f"s3a://{bucket}/tables/t"
    spark_s3a.range(0, 20).selectExpr("id", "cast(id % 3 AS string) AS p").write.format("delta").partitionBy("p").save(uri)
    spark_s3a.sql(f"DELETE FROM delta.`{uri}` WHERE id < 5")
    assert spark_s3a.read.format("delta").load(uri).count() == 15
    fs = s3fs.S3FileSystem(**options)
    assert fs.exists(f"{bucket}/tables/t/_delta_log/00000000000000000000.json")
    assert fs.exists(f"{bucket}/tables/t/_delta_log/00000000000000000001.json")


def test_missing_jars_are_an_error_that_says_make_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jars, "ROOT", tmp_path)
    with pytest.raises(jars.JarsMissingError, match="make jars"):
        jars.jar_list(jars.DELTA_SPARK)
    (tmp_path / jars.DELTA_SPARK).mkdir()
    (tmp_path / jars.DELTA_SPARK / "x.jar").touch()  # jars without the stamp of the current pom
    with pytest.raises(jars.JarsMissingError, match="stale"):
        jars.jar_list(jars.DELTA_SPARK)


def test_fetched_jars_are_current_and_include_what_the_fixtures_need() -> None:
    names = {Path(p).name for p in jars.jar_list(jars.DELTA_SPARK)}
    assert {"delta-spark_2.13-4.4.0.jar", "hadoop-aws-3.5.0.jar", "aws-java-sdk-dynamodb-1.12.262.jar", "s3-2.35.4.jar"} <= names
    # Spark's own jars must not be shadowed or doubled by a second copy
    shipped = ("spark-", "hadoop-client", "scala-library", "jackson-", "netty-common", "netty-buffer", "netty-handler", "slf4j-")
    assert not {n for n in names if n.startswith(shipped)}
    assert any(jars.native_dir(jars.DYNAMODB_LOCAL).glob("libsqlite4java-linux-amd64*.so"))
    assert jars.jar_version(jars.DYNAMODB_LOCAL, "DynamoDBLocal").startswith("3.")
