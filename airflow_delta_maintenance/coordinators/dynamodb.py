"""A client of delta-spark's DynamoDB commit coordinator (``io.delta.dynamodbcommitcoordinator``).

It reads and writes exactly delta-spark's item schema and conditional updates, so tables committed
by delta-spark through that coordinator can be maintained here, and the reverse:

one item per Delta table, hash key ``tableId`` (S): ``path`` (S), ``acceptingCommits`` (BOOL),
``tableVersion`` (N), ``tableTimestamp`` (N), ``schemaVersion`` (N = 1), ``hasAcceptedCommits``
(BOOL), ``commits`` (L of M: ``version``, ``timestamp``, ``fsName``, ``fsLength``, ``fsTimestamp``).

Choices (delta-spark's client is the reference; departures are marked):

- ``register_table(uri, current_version)``: delta-spark's ``registerTable`` (``PutItem`` with
  ``attribute_not_exists(tableId)``, ``tableVersion = current_version + 1``, ``hasAcceptedCommits =
  false``); returns the tableConf ``{"tableId": <uuid>}``. ``commit(uri, 0, …)`` registers with
  ``current_version = -1`` and writes ``<0>.json`` (create-if-absent) with the coordinator
  properties in its metadata, as delta-spark does for a new coordinated table.
- ``commit(v)``: stage ``_staged_commits/<v>.<uuid>.json``, then ``UpdateItem`` with delta-spark's
  legacy ``Expected`` conditions (``tableVersion == v-1``, ``acceptingCommits``, ``path``,
  ``schemaVersion``) and updates. A failed condition or a lost answer (botocore resends an
  ``UpdateItem`` whose answer was lost; the resend then fails its condition) re-reads the item and
  decides by the staged file it ratified (departure: delta-spark classifies by ``tableVersion``
  alone, so its own commit comes back as a conflict): the entry for ``v`` names our file → ours;
  another file → retryable ``CommitConflictError``; ``v`` published and forgotten → ours iff
  ``<v>.json`` holds our bytes; otherwise, like delta-spark, a gap, a path or schema mismatch, or a
  table no longer accepting commits → non-retryable. Before staging, the item's ``path`` must be
  this table's path (delta-spark's path check), so a wrong ``tableId`` never stages or ratifies
  anything.
- Every item read is checked field by field against delta-spark's schema (``dynamodb_item``): a
  malformed or inconsistent item is a typed error naming the table, the version and the field.
- ``get_commits``/``latest_ratified_version``: one ``GetItem``, strongly consistent (departure:
  delta-spark reads eventually consistently). ``latest = -1`` until ``hasAcceptedCommits``.
  File names come back as ``_staged_commits/<fsName>``; tables staged by delta-spark 3.x into the
  legacy ``_commits/`` are found by the publishing layer, which falls back to ``_commits/<fsName>``.
- ``check_may_report``: an ``UpdateItem`` whose condition can never hold (nothing is written) —
  IAM authorizes it exactly as the report, so ``AccessDeniedException`` means "may not report".
- ``report_published(v)``: when ``v >= tableVersion`` exactly delta-spark's update (PUT
  ``commits = []`` with ``Expected tableVersion ==`` the value read, ``path``, ``schemaVersion``);
  otherwise (departure: delta-spark always clears the whole list) PUT the entries above ``v`` with
  the same conditions plus ``commits ==`` the list read, so an entry is only ever dropped if it
  was in the list this client checked. A failed condition re-reads and retries (bounded).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .answers import Answer
from .base import CommitsResponse, LogFileWriter, LogFileWriterFactory, RatifiedCommit
from .commit_file import Attempt, CommittingClient, decide_owner, previous_in_commit_timestamp, publish_version_zero, reread_failed, stage_commit, upgrade_protocol
from .dynamodb_item import SCHEMA_VERSION, DynamoItem, parse_item
from .errors import EXPIRED_CREDENTIAL_CODES, CommitConflictError, CoordinatorError, PermissionDeniedError, TableNotFoundError

__all__ = ["DynamoDBCoordinator", "SCHEMA_VERSION", "hadoop_table_path"]

_REQUIRED_WRITER = ["coordinatedCommits-preview", "inCommitTimestamp", "vacuumProtocolCheck"]  # delta-spark's requirements
COORDINATOR_NAME = "dynamodb"
_CONF_PROPS = (
    "delta.coordinatedCommits.commitCoordinator-preview",
    "delta.coordinatedCommits.commitCoordinatorConf-preview",
    "delta.coordinatedCommits.tableConf-preview",
)


def hadoop_table_path(table_uri: str) -> str:
    """The table path as delta-spark stores it in ``path`` (Hadoop ``Path.toString``)."""
    if table_uri.startswith("s3://"):
        return "s3a://" + table_uri[len("s3://") :]
    if "://" not in table_uri:
        return "file:" + os.path.abspath(table_uri)
    return table_uri


def _path_key(path: str) -> str:
    """Compare table paths across spellings: ``file:/x``, ``file:///x`` and ``/x``; s3/s3a/s3n."""
    p = path.rstrip("/")
    for prefix in ("file://", "file:"):
        if p.startswith(prefix):
            return os.path.abspath(p[len(prefix) :])
    for alias in ("s3a://", "s3n://"):
        if p.startswith(alias):
            return "s3://" + p[len(alias) :]
    return p if "://" in p else os.path.abspath(p)


class _Unsettled(Exception):
    """Our ratifying UpdateItem failed its condition or lost its answer: whose is the version?"""

    def __init__(self, cause: str, condition_failed: bool) -> None:
        super().__init__(cause)
        self.cause, self.condition_failed = cause, condition_failed


class DynamoDBCoordinator(CommittingClient):
    """``dynamodb://<dynamodb-table>?region=...&endpoint=...&table_id=...``."""

    needs_table_conf = True

    def __init__(
        self,
        dynamodb_table: str,
        *,
        region: str,
        endpoint: str | None = None,
        table_id: str | None = None,
        writer_factory: LogFileWriterFactory | None = None,
        normalize_uri: Callable[[str], str] = lambda u: u,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        client: Any = None,
        session: Any = None,
    ) -> None:
        import boto3

        self.dynamodb_table = dynamodb_table
        self.region = region
        self.endpoint = endpoint
        self.table_id = table_id
        self.writer_factory = writer_factory
        self.normalize_uri = normalize_uri
        self._created: dict[str, str] = {}  # tables this client created: normalised URI -> tableId
        # ``session``: e.g. the Amazon provider's, whose assumed-role keys refresh before they expire
        self.client = client or (session.client("dynamodb", region_name=region, endpoint_url=endpoint) if session is not None else None) or boto3.client(
            "dynamodb",
            region_name=region,
            endpoint_url=endpoint,
            aws_access_key_id=aws_access_key_id or None,
            aws_secret_access_key=aws_secret_access_key or None,
            aws_session_token=aws_session_token or None,
        )

    def describe(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"DynamoDB coordinator (table {self.dynamodb_table}, {self.region}{where})"

    def close(self) -> None:
        pass

    def check(self) -> str:
        """Read-only health check (a connection's Test button): one ``DescribeTable``."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            table = self.client.describe_table(TableName=self.dynamodb_table)["Table"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ResourceNotFoundException":
                raise TableNotFoundError(f"{self.describe()}: DynamoDB table {self.dynamodb_table} does not exist") from None
            raise CoordinatorError(f"{self.describe()}: DescribeTable failed: {code}", retryable=_transient(code)) from None
        except BotoCoreError as exc:
            raise CoordinatorError(f"{self.describe()}: DescribeTable failed: {type(exc).__name__}: {exc}", retryable=True) from None
        keys = sorted(k["AttributeName"] for k in table.get("KeySchema", []))
        if keys != ["tableId"]:
            raise CoordinatorError(f"{self.describe()}: DynamoDB table {self.dynamodb_table} has key {keys}, not delta-spark's [tableId]")
        return f"{self.describe()}: DynamoDB table {table.get('TableStatus', '?')}, key tableId"

    # ---- helpers -----------------------------------------------------------------------------

    def _table_id(self, table_conf: Mapping[str, str] | None, uri: str | None = None) -> str:
        tid = (table_conf or {}).get("tableId") or self.table_id or self._created.get(self.normalize_uri(uri) if uri else "")
        if not tid:
            raise CoordinatorError(
                f"{self.describe()}: the Delta table's tableId is unknown; pass the table's "
                "delta.coordinatedCommits.tableConf-preview or table_id= in the coordinator spec"
            )
        return tid

    def _get_item(self, table_id: str, uri: str) -> DynamoItem:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            resp = self.client.get_item(TableName=self.dynamodb_table, Key={"tableId": {"S": table_id}}, ConsistentRead=True)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ResourceNotFoundException":
                raise TableNotFoundError(f"{self.describe()}: DynamoDB table {self.dynamodb_table} does not exist") from None
            raise CoordinatorError(f"{self.describe()}: GetItem failed: {code}", retryable=_transient(code)) from None
        except BotoCoreError as exc:  # connection errors, timeouts
            raise CoordinatorError(f"{self.describe()}: GetItem failed: {type(exc).__name__}", retryable=True) from None
        raw = resp.get("Item")
        if raw is None:
            raise TableNotFoundError(f"{self.describe()}: no item for Delta table {table_id}")
        item = parse_item(raw, Answer(self.describe(), f"{uri} (item {table_id})"))
        if item.table_id != table_id:
            raise Answer(self.describe(), uri).malformed("tableId", f"is {item.table_id!r}, not the key {table_id!r} it was read by")
        if _path_key(item.path) != _path_key(uri):  # delta-spark's path check
            raise CoordinatorError(f"{self.describe()}: item {table_id} belongs to {item.path}, not {uri}")
        return item

    def _item_for(self, table_conf: Mapping[str, str] | None, table_uri: str) -> tuple[str, DynamoItem]:
        """(tableId, the checked item) after checking that the item is this table's."""
        uri = self.normalize_uri(table_uri)
        table_id = self._table_id(table_conf, uri)
        return table_id, self._get_item(table_id, uri)

    def create_dynamodb_table(self, read_capacity: int = 5, write_capacity: int = 5) -> None:
        """Create the coordinator's DynamoDB table as delta-spark does (hash key ``tableId``), if missing."""
        from botocore.exceptions import ClientError

        try:
            self.client.create_table(
                TableName=self.dynamodb_table,
                AttributeDefinitions=[{"AttributeName": "tableId", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "tableId", "KeyType": "HASH"}],
                ProvisionedThroughput={"ReadCapacityUnits": read_capacity, "WriteCapacityUnits": write_capacity},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
                raise
        for _ in range(120):
            status = self.client.describe_table(TableName=self.dynamodb_table)["Table"]["TableStatus"]
            if status == "ACTIVE":
                return
            time.sleep(0.5)
        raise CoordinatorError(f"{self.describe()}: table did not become ACTIVE", retryable=True)

    def list_registered_tables(self, page_size: int = 1000) -> list[tuple[str, str]]:
        """Every Delta table the coordinator table holds: ``(tableId, path)`` sorted by path.

        One paginated ``Scan`` projecting only ``tableId`` and ``path`` (a reserved word, hence the
        placeholder), following ``LastEvaluatedKey``; items without a string ``path`` are not
        delta-spark's and are left out. Used by fleet discovery; the per-table conf is still read
        from each table's own metadata when it is maintained.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        found: list[tuple[str, str]] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.dynamodb_table, "ProjectionExpression": "tableId, #p",
                "ExpressionAttributeNames": {"#p": "path"}, "Limit": page_size,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            try:
                resp = self.client.scan(**kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "ResourceNotFoundException":
                    raise TableNotFoundError(f"{self.describe()}: DynamoDB table {self.dynamodb_table} does not exist") from None
                raise CoordinatorError(f"{self.describe()}: Scan failed: {code}", retryable=_transient(code)) from None
            except BotoCoreError as exc:
                raise CoordinatorError(f"{self.describe()}: Scan failed: {type(exc).__name__}", retryable=True) from None
            for item in resp.get("Items", []):
                table_id, path = item.get("tableId", {}).get("S"), item.get("path", {}).get("S")
                if table_id and path:
                    found.append((table_id, path))
            start = resp.get("LastEvaluatedKey") or None
            if not start:
                return sorted(found, key=lambda t: (t[1], t[0]))

    # ---- reads -------------------------------------------------------------------------------

    def latest_ratified_version(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> int:
        _, item = self._item_for(table_conf, table_uri)  # one GetItem
        return item.latest

    def get_commits(
        self,
        table_uri: str,
        start_version: int | None = None,
        end_version: int | None = None,
        table_conf: Mapping[str, str] | None = None,
    ) -> CommitsResponse:
        _, item = self._item_for(table_conf, table_uri)  # the whole item is checked, then the window taken
        lo = 0 if start_version is None else start_version
        hi = 2**62 if end_version is None else end_version
        return CommitsResponse(tuple(c for c in item.commits if lo <= c.version <= hi), item.latest)

    # ---- writes ------------------------------------------------------------------------------

    def register_table(self, table_uri: str, current_version: int) -> dict[str, str]:
        """delta-spark's ``registerTable``: a new item with ``tableVersion = current_version + 1``
        (the conversion commit, written to the filesystem by the caller). Returns the tableConf."""
        from botocore.exceptions import ClientError

        table_id = str(uuid.uuid4())
        try:
            self.client.put_item(
                TableName=self.dynamodb_table,
                Item={
                    "tableId": {"S": table_id},
                    "tableVersion": {"N": str(current_version + 1)},
                    "hasAcceptedCommits": {"BOOL": False},
                    "path": {"S": hadoop_table_path(self.normalize_uri(table_uri))},
                    "commits": {"L": []},
                    "acceptingCommits": {"BOOL": True},
                    "schemaVersion": {"N": str(SCHEMA_VERSION)},
                },
                ConditionExpression="attribute_not_exists(tableId)",
            )
        except ClientError as exc:
            raise CoordinatorError(f"{self.describe()}: registerTable failed: {exc.response.get('Error', {}).get('Code')}") from None
        return {"tableId": table_id}

    def coordinator_properties(self, table_conf: Mapping[str, str]) -> dict[str, str]:
        """The table properties that point delta-spark at this coordinator."""
        conf = {"dynamoDBTableName": self.dynamodb_table}
        if self.endpoint:
            conf["dynamoDBEndpoint"] = self.endpoint
        return {
            _CONF_PROPS[0]: COORDINATOR_NAME,
            _CONF_PROPS[1]: json.dumps(conf, separators=(",", ":")),
            _CONF_PROPS[2]: json.dumps(dict(table_conf), separators=(",", ":")),
            "delta.enableInCommitTimestamps": "true",
        }

    def _commit_next(self, uri: str, writer: LogFileWriter, version: int, actions: Sequence[Mapping[str, Any]],
                     table_conf: Mapping[str, str] | None) -> RatifiedCommit:
        table_id, item = self._item_for(table_conf, uri)
        if version <= item.table_version:  # cheap early answer, before staging; the conditional update decides
            raise CommitConflictError(f"{self.describe()}: version {version} is already ratified (latest {item.table_version})", version=version)
        # tableTimestamp is the ICT of tableVersion (= v-1 unless this attempt fails anyway); a freshly
        # registered item has none, so read the published <v-1>.json
        previous = item.table_timestamp if item.table_timestamp is not None else previous_in_commit_timestamp(writer, version - 1)
        attempt = stage_commit(writer, version, actions, previous)
        try:
            self._ratify(table_id, item.path, attempt)
        except _Unsettled as unsettled:
            return self._settle(table_id, uri, item.path, attempt, writer, unsettled)
        return attempt.ratified()

    def _ratify(self, table_id: str, path: str, attempt: Attempt) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        version = attempt.version
        entry = {
            "M": {
                "version": {"N": str(version)},
                "timestamp": {"N": str(attempt.ict)},
                "fsName": {"S": attempt.bare_name},
                "fsLength": {"N": str(attempt.written.size)},
                "fsTimestamp": {"N": str(attempt.written.modification_time)},
            }
        }
        try:
            self.client.update_item(
                TableName=self.dynamodb_table,
                Key={"tableId": {"S": table_id}},
                Expected={
                    "tableVersion": {"Value": {"N": str(version - 1)}, "ComparisonOperator": "EQ"},
                    "acceptingCommits": {"Value": {"BOOL": True}, "ComparisonOperator": "EQ"},
                    "path": {"Value": {"S": path}, "ComparisonOperator": "EQ"},
                    "schemaVersion": {"Value": {"N": str(SCHEMA_VERSION)}, "ComparisonOperator": "EQ"},
                },
                AttributeUpdates={
                    "tableVersion": {"Value": {"N": str(version)}, "Action": "PUT"},
                    "hasAcceptedCommits": {"Value": {"BOOL": True}, "Action": "PUT"},
                    "tableTimestamp": {"Value": {"N": str(attempt.ict)}, "Action": "PUT"},
                    "commits": {"Value": {"L": [entry]}, "Action": "ADD"},
                },
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code != "ConditionalCheckFailedException":
                raise CoordinatorError(f"{self.describe()}: UpdateItem failed: {code}", retryable=_transient(code), version=version) from None
            raise _Unsettled("the conditional update failed", condition_failed=True) from None
        except BotoCoreError as exc:  # the answer is lost: the commit may or may not have landed
            raise _Unsettled(f"UpdateItem failed: {type(exc).__name__}", condition_failed=False) from None

    def _settle(self, table_id: str, uri: str, path: str, attempt: Attempt, writer: LogFileWriter, unsettled: _Unsettled) -> RatifiedCommit:
        """Re-read the item after a failed condition or a lost answer and decide by our staged file
        whose the version is; refusals are classified as delta-spark classifies them."""
        version = attempt.version
        try:
            item = self._get_item(table_id, uri)
        except CoordinatorError as exc:
            raise reread_failed(self.describe(), version, unsettled.cause, exc) from None
        entry = item.entry(version)
        if unsettled.condition_failed and item.table_version < version:  # not ratified: why was it refused?
            if item.path != path:
                raise CoordinatorError(f"{self.describe()}: {table_id} belongs to {item.path}, not {path}", version=version)
            if not item.accepting_commits:
                raise CoordinatorError(f"{self.describe()}: {table_id} no longer accepts commits", version=version)
            if item.table_version < version - 1:
                raise CoordinatorError(f"{self.describe()}: cannot ratify {version}: latest ratified is {item.table_version}", version=version)
        return decide_owner(self.describe(), attempt, item.table_version, entry, writer, unsettled.cause)

    def _create(self, uri: str, writer: LogFileWriter, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        table_conf = self.register_table(uri, -1)
        props = self.coordinator_properties(table_conf)
        out: list[dict[str, Any]] = []
        for action in actions:
            if "metaData" in action:
                meta = dict(action["metaData"])
                meta["configuration"] = {**dict(meta.get("configuration") or {}), **props}
                out.append({"metaData": meta})
            elif "protocol" in action:
                out.append({"protocol": upgrade_protocol(action["protocol"], ["vacuumProtocolCheck"], _REQUIRED_WRITER)})
            else:
                out.append(dict(action))
        created = publish_version_zero(writer, uri, out)  # version 0 goes through the filesystem
        self._created[uri] = table_conf["tableId"]
        return created

    def report_published(self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None) -> None:
        """Forget the listed commits ≤ ``version`` (they are published); see the module docstring."""
        from botocore.exceptions import BotoCoreError, ClientError

        for _ in range(10):
            table_id, item = self._item_for(table_conf, table_uri)
            current = item.table_version
            if version > current:
                raise CoordinatorError(f"{self.describe()}: cannot report {version} published; latest ratified is {current}", version=version)
            listed = item.raw_commits  # in the checked order: raw entry i is item.commits[i]
            keep = [raw for raw, c in zip(listed, item.commits, strict=True) if c.version > version]
            if len(keep) == len(listed):
                return  # nothing listed at or below version: already reported
            expected: dict[str, Any] = {
                "tableVersion": {"Value": {"N": str(current)}, "ComparisonOperator": "EQ"},
                "path": {"Value": {"S": item.path}, "ComparisonOperator": "EQ"},
                "schemaVersion": {"Value": {"N": str(SCHEMA_VERSION)}, "ComparisonOperator": "EQ"},
            }
            if keep:  # partial: the list must still be the one we filtered
                expected["commits"] = {"Value": {"L": listed}, "ComparisonOperator": "EQ"}
            try:
                self.client.update_item(
                    TableName=self.dynamodb_table,
                    Key={"tableId": {"S": table_id}},
                    Expected=expected,
                    AttributeUpdates={"commits": {"Value": {"L": keep}, "Action": "PUT"}},
                )
                return
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code != "ConditionalCheckFailedException":
                    raise CoordinatorError(f"{self.describe()}: report failed: {code}", retryable=_transient(code), version=version) from None
            except BotoCoreError as exc:
                raise CoordinatorError(f"{self.describe()}: report failed: {type(exc).__name__}", retryable=True, version=version) from None
        raise CoordinatorError(f"{self.describe()}: the item kept changing while reporting {version}", retryable=True, version=version)

    def check_may_report(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> str:
        """Before publishing: an ``UpdateItem`` of the table's item under a condition that can never
        hold, so nothing is written. IAM authorizes it like the report (``dynamodb:UpdateItem``):
        the failed condition says "allowed", ``AccessDeniedException`` says "may not report"."""
        from botocore.exceptions import BotoCoreError, ClientError

        table_id = self._table_id(table_conf, self.normalize_uri(table_uri))
        try:
            self.client.update_item(
                TableName=self.dynamodb_table, Key={"tableId": {"S": table_id}},
                ConditionExpression="attribute_exists(tableId) AND attribute_not_exists(tableId)",
                UpdateExpression="REMOVE #probe", ExpressionAttributeNames={"#probe": "checkMayReport"},
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                return f"{self.describe()}: UpdateItem on {table_id} is allowed"
            if code in ("AccessDeniedException", "UnrecognizedClientException"):
                raise PermissionDeniedError(f"{self.describe()}: reporting published versions needs dynamodb:UpdateItem on table "
                                            f"{self.dynamodb_table} ({code})") from None
            if code == "ResourceNotFoundException":
                raise TableNotFoundError(f"{self.describe()}: DynamoDB table {self.dynamodb_table} does not exist") from None
            raise CoordinatorError(f"{self.describe()}: UpdateItem failed: {code}", retryable=_transient(code)) from None
        except BotoCoreError as exc:
            raise CoordinatorError(f"{self.describe()}: UpdateItem failed: {type(exc).__name__}", retryable=True) from None
        raise CoordinatorError(f"{self.describe()}: an UpdateItem whose condition cannot hold succeeded; this is not DynamoDB's behaviour")


def _transient(code: str) -> bool:
    """Throttling and server errors; and expired credentials: the next call signs with refreshed
    keys (a refreshable session, or a connection read again), so waiting is the cure."""
    return code in {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "InternalServerError",
                    "ServiceUnavailable"} or code in EXPIRED_CREDENTIAL_CODES
