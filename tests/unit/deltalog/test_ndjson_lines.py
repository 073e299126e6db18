"""The numpy line scanner agrees with the obvious ``bytes.split`` loop on every shape of file."""

from __future__ import annotations

import random

import pytest

from airflow_delta_maintenance.deltalog.replay.ndjson_lines import FILE_ACTION_PREFIXES, non_file_action_lines, split_non_file_action_lines


def _reference(data: bytes) -> list[tuple[int, bytes]]:
    return [(i, raw) for i, raw in enumerate(data.split(b"\n"), start=1) if not raw.startswith(FILE_ACTION_PREFIXES) and raw.strip()]


PIECES = [b'{"add":{"path":"a"}}', b'{"remove":{"path":"a"}}', b'{"commitInfo":{}}', b'{"protocol":{}}', b"", b"   ", b"\r",
          b'{"ad', b'{"add"', b'{"remov', b' {"add":{}}', b'{"metaData":{"id":"{\\"add\\":"}}', b"garbage", b'{"add":{}}\r']


@pytest.mark.parametrize("seed", range(60))
def test_non_file_lines_match_the_split_loop(seed: int) -> None:
    rng = random.Random(seed)
    data = b"\n".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.5:
        data += b"\n"
    assert non_file_action_lines(data) == _reference(data)
    assert non_file_action_lines(memoryview(data)) == _reference(data)
    assert split_non_file_action_lines(memoryview(data)) == _reference(data)  # the path without numpy


@pytest.mark.parametrize("data", [b"", b"\n", b"\n\n", b'{"add":', b'{"remove":', b"{", b'{"add":{}}'])
def test_edge_files(data: bytes) -> None:
    assert non_file_action_lines(data) == _reference(data)
    assert split_non_file_action_lines(data) == _reference(data)
