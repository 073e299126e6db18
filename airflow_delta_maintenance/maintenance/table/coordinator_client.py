"""``open_coordinator``: a spec string → a coordinator client wired to the log library's storage.

This is the only place where coordinators meet the log library: clients stage commits through a
writer that uses ``LogStore`` (verified create-if-absent), and table URIs are normalised the way
the log library names tables, so both sides agree on keys.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...coordinators.base import CommitCoordinatorClient, LogFileWriter, WrittenFile
from ...coordinators.errors import InvalidCoordinatorSpecError
from ...coordinators.local import LocalCoordinator
from ...coordinators.registry import parse_coordinator_spec
from ...deltalog.errors import LogFileExistsError
from ...deltalog.storage import LogStore, normalize_table_uri, open_table_storage

__all__ = ["open_coordinator", "StoreFileWriter", "UC_TOKEN_ENV"]

UC_TOKEN_ENV = "DELTA_MAINTENANCE_UC_TOKEN"


class StoreFileWriter(LogFileWriter):
    """A ``LogFileWriter`` over a ``LogStore``: create-if-absent, reporting size and mtime."""

    def __init__(self, store: LogStore) -> None:
        self.store = store

    def write_new(self, file_name: str, data: bytes) -> WrittenFile:
        try:
            self.store.put_if_absent(file_name, data)
        except LogFileExistsError as exc:
            raise FileExistsError(str(exc)) from exc
        stat = self.store.stat(file_name)
        return WrittenFile(file_name, len(data), stat.modification_time if stat else 0)

    def read(self, file_name: str) -> bytes:
        return self.store.read(file_name)


def open_coordinator(
    spec: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    allow_unsafe_writes: bool = False,
    credentials: Mapping[str, Any] | None = None,
) -> CommitCoordinatorClient:
    """Build the client for ``spec`` (see ``coordinators.registry`` for the syntax).

    ``credentials`` (from an Airflow connection) may hold ``login``/``password`` (and ``token``, a
    session token): AWS keys for DynamoDB, or the token (password) for Unity Catalog; or ``session``:
    an AWS session (boto3's ``client()``) whose credentials refresh themselves, for DynamoDB.
    Otherwise the environment is used.
    """
    parsed = parse_coordinator_spec(spec)

    def writer_factory(table_uri: str) -> LogFileWriter:
        return StoreFileWriter(open_table_storage(table_uri, storage_options, allow_unsafe_writes=allow_unsafe_writes))

    creds = dict(credentials or {})
    if parsed.kind == "local":
        return LocalCoordinator(
            parsed.target, writer_factory, normalize_uri=normalize_table_uri, create=parsed.params.get("create") == "true"
        )
    if parsed.kind == "dynamodb":
        from ...coordinators.dynamodb import DynamoDBCoordinator

        return DynamoDBCoordinator(
            parsed.target,
            region=parsed.params["region"],
            endpoint=parsed.params.get("endpoint"),
            table_id=parsed.params.get("table_id"),
            writer_factory=writer_factory,
            normalize_uri=normalize_table_uri,
            aws_access_key_id=creds.get("login"),
            aws_secret_access_key=creds.get("password"),
            aws_session_token=creds.get("token"),
            session=creds.get("session"),
        )
    if parsed.kind == "unity-catalog":
        from ...coordinators.unity_catalog import UnityCatalogCoordinator

        token = creds.get("password") or os.environ.get(UC_TOKEN_ENV)
        return UnityCatalogCoordinator(
            parsed.target,
            parsed.name,
            api=parsed.params.get("api", "v1"),
            tls=parsed.params.get("tls", "true") == "true",
            table_id=parsed.params.get("table_id"),
            token=token,
            writer_factory=writer_factory,
            normalize_uri=normalize_table_uri,
        )
    raise InvalidCoordinatorSpecError(f"unsupported coordinator kind {parsed.kind!r}")  # pragma: no cover
