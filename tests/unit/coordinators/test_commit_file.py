"""The bytes every coordinator stages: commitInfo first, in-commit timestamp, txnId; protocol upgrade."""

from __future__ import annotations

import json

import pytest

from airflow_delta_maintenance.coordinators.base import WrittenFile
from airflow_delta_maintenance.coordinators.commit_file import (
    commit_bytes,
    next_in_commit_timestamp,
    previous_in_commit_timestamp,
    staged_name,
    upgrade_protocol,
)


def lines(data: bytes) -> list[dict]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode().splitlines()]


def test_commit_info_is_added_first_with_the_in_commit_timestamp() -> None:
    out = lines(commit_bytes([{"add": {"path": "a"}}], 1234))
    assert list(out[0]) == ["commitInfo"] and out[0]["commitInfo"]["inCommitTimestamp"] == 1234
    assert out[0]["commitInfo"]["timestamp"] == 1234 and out[0]["commitInfo"]["txnId"]
    assert out[1:] == [{"add": {"path": "a"}}]


def test_an_existing_commit_info_is_moved_first_and_keeps_its_fields() -> None:
    out = lines(commit_bytes([{"add": {"path": "a"}}, {"commitInfo": {"operation": "WRITE", "txnId": "t", "inCommitTimestamp": 1}}], 99))
    assert out[0] == {"commitInfo": {"operation": "WRITE", "txnId": "t", "inCommitTimestamp": 99, "timestamp": 99}}
    with pytest.raises(ValueError, match="at most one commitInfo"):
        commit_bytes([{"commitInfo": {}}, {"commitInfo": {}}], 1)


def test_in_commit_timestamps_are_monotonic() -> None:
    assert next_in_commit_timestamp(None, now_ms=500) == 500
    assert next_in_commit_timestamp(100, now_ms=500) == 500
    assert next_in_commit_timestamp(900, now_ms=500) == 901  # the clock went back


class Files:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def write_new(self, file_name: str, data: bytes) -> WrittenFile:
        raise NotImplementedError

    def read(self, file_name: str) -> bytes:
        if file_name not in self.files:
            raise FileNotFoundError(file_name)
        return self.files[file_name]


def test_the_previous_timestamp_is_read_from_the_published_commit() -> None:
    files = Files({"00000000000000000004.json": commit_bytes([], 777), "00000000000000000005.json": b'{"add":{}}\n'})
    assert previous_in_commit_timestamp(files, 4) == 777
    assert previous_in_commit_timestamp(files, 5) is None  # no ICT in the first line
    assert previous_in_commit_timestamp(files, 6) is None  # missing
    assert previous_in_commit_timestamp(files, -1) is None


def test_staged_names_are_unique_per_attempt() -> None:
    a, b = staged_name(7), staged_name(7)
    assert a != b and a.startswith("_staged_commits/00000000000000000007.") and a.endswith(".json")
    assert staged_name(7, legacy=True).startswith("_commits/")


def test_protocol_upgrade_lists_the_implied_features() -> None:
    up = upgrade_protocol({"minReaderVersion": 1, "minWriterVersion": 2}, ["vacuumProtocolCheck"], ["inCommitTimestamp"])
    assert up == {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["vacuumProtocolCheck"],
                  "writerFeatures": ["appendOnly", "inCommitTimestamp", "invariants", "vacuumProtocolCheck"]}
    tf = upgrade_protocol({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                           "writerFeatures": ["deletionVectors", "appendOnly"]}, ["catalogManaged"], [])
    assert tf["readerFeatures"] == ["catalogManaged", "deletionVectors"]
    assert tf["writerFeatures"] == ["appendOnly", "catalogManaged", "deletionVectors"]  # no implied legacy features at writer 7
