"""The real components the suite depends on: up, loopback-only, and behaving as we rely on."""

from __future__ import annotations

from urllib.parse import urlsplit

import boto3
import pytest
from botocore.exceptions import ClientError

from tests._infra.servers import LOOPBACK, listening_addresses

pytestmark = pytest.mark.integration


def _port(endpoint: str) -> int:
    return int(urlsplit(endpoint).port or 0)


def test_dynamodb_local_listens_on_loopback_only_and_honours_legacy_conditions(dynamodb_endpoint: str, aws_env: dict) -> None:
    assert listening_addresses(_port(dynamodb_endpoint)) <= LOOPBACK
    client = boto3.client("dynamodb", endpoint_url=dynamodb_endpoint, region_name="us-east-1")
    client.create_table(
        TableName="infra_check",
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
    )
    client.put_item(TableName="infra_check", Item={"k": {"S": "a"}, "v": {"N": "0"}, "b": {"BOOL": False}})
    update = dict(
        TableName="infra_check",
        Key={"k": {"S": "a"}},
        Expected={"v": {"Value": {"N": "0"}, "ComparisonOperator": "EQ"}},
        AttributeUpdates={"v": {"Value": {"N": "1"}, "Action": "PUT"}, "b": {"Value": {"BOOL": True}, "Action": "PUT"}},
    )
    client.update_item(**update)
    with pytest.raises(ClientError) as err:
        client.update_item(**update)
    assert err.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    item = client.get_item(TableName="infra_check", Key={"k": {"S": "a"}}, ConsistentRead=True)["Item"]
    assert item["b"] == {"BOOL": True}  # moto's in-process mock stores {"S": "True"} here


def test_moto_s3_listens_on_loopback_only_and_enforces_if_none_match(s3_endpoint: str, s3_bucket: tuple) -> None:
    import s3fs

    assert listening_addresses(_port(s3_endpoint)) <= LOOPBACK
    bucket, options = s3_bucket
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    fs = s3fs.S3FileSystem(**options)
    fs.pipe_file(f"{bucket}/x", b"1", mode="create")
    with pytest.raises((FileExistsError, OSError)):
        fs.pipe_file(f"{bucket}/x", b"2", mode="create")
    assert fs.cat_file(f"{bucket}/x") == b"1"
