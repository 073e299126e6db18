"""parse_ndjson refuses a line holding two actions, wherever it sits among many add lines and
whatever the second key is: the JSON reader parses the file actions in blocks (in parallel), so a
line in a later block, or one whose second key no other line has, must be found too."""

from __future__ import annotations

import functools
import json

import pytest

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.replay.ndjson import parse_ndjson


@functools.cache
def _base() -> tuple[str, ...]:
    return tuple(_add(i) for i in range(12_000))


def _add(i: int) -> str:
    stats = json.dumps({"numRecords": i, "minValues": {"id": i}, "maxValues": {"id": i}, "nullCount": {"id": 0}})
    return json.dumps({"add": {"path": f"day=1/part-{i:06d}.parquet", "partitionValues": {"day": "1"}, "size": 10 + i, "modificationTime": 1, "dataChange": True, "stats": stats}})


SECOND_KEYS = [
    ('"remove":{"path":"x","dataChange":true}', "remove"),
    ('"commitInfo":{"operation":"WRITE"}', "commitInfo"),
    ('"metaData":{}', "metaData"),
    ('"txn":[1,2]', "txn"),  # not even an object
]


AT = [0, 3, 7_000, 11_999]  # 12,000 lines ≈ 3 MiB: several reader blocks
FLAGS = [(False, False), (False, True), (True, False), (True, True)]  # (keys_only, keep_lines)


def _cases() -> list:
    """Every (second key, line, flags) case; the fast tier runs a Latin square of them (every pair
    of second key, line and flags once: 16 of 64), ``make test`` all of them."""
    out = []
    for i, (second, name) in enumerate(SECOND_KEYS):
        for j, at in enumerate(AT):
            for k, (keys_only, keep_lines) in enumerate(FLAGS):
                marks = () if k == (i + j) % len(FLAGS) else (pytest.mark.slow,)
                out.append(pytest.param(second, at, keys_only, keep_lines, marks=marks, id=f"{keep_lines}-{keys_only}-{at}-{name}"))
    return out


@pytest.mark.parametrize(("second", "at", "keys_only", "keep_lines"), _cases())
def test_a_second_action_on_an_add_line_names_file_and_line(second: str, at: int, keys_only: bool, keep_lines: bool) -> None:
    lines = list(_base())
    lines[at] = lines[at][:-1] + "," + second + "}"
    lines.insert(5_000, json.dumps({"remove": {"path": "day=1/part-000001.parquet", "deletionTimestamp": 2, "dataChange": True}}))
    data = ("\n".join(lines) + "\n").encode()
    number = at + 1 if at < 5_000 else at + 2
    with pytest.raises(CorruptLogError, match=rf"00000000000000000001\.json: line {number} holds more than one action") as err:
        parse_ndjson([("00000000000000000001.json", data)], keys_only=keys_only, partition_columns=["day"], keep_lines=keep_lines)
    assert err.value.line == number


@pytest.mark.parametrize("keys_only", [False, True])
def test_a_null_second_key_is_not_a_second_action(keys_only: bool) -> None:
    lines = [_add(i) for i in range(12_000)]
    lines[9_000] = lines[9_000][:-1] + ',"remove":null}'
    parsed = parse_ndjson([("00000000000000000001.json", ("\n".join(lines) + "\n").encode())], keys_only=keys_only, partition_columns=["day"])
    assert parsed.adds.num_rows == 12_000 and parsed.removes.num_rows == 0
