"""``prefetched``: the same items in the same order, errors where they happened, no thread left."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from airflow_delta_maintenance.deltalog._runtime.pipeline import prefetched


def test_items_come_in_order_and_production_overlaps_consumption() -> None:
    produced: list[int] = []

    def items() -> Iterator[int]:
        for i in range(5):
            produced.append(i)
            yield i

    out = []
    for item in prefetched(items()):
        time.sleep(0.05)  # while the consumer works, the next item is produced
        out.append((item, len(produced)))
    assert [i for i, _ in out] == [0, 1, 2, 3, 4]
    assert out[0][1] >= 2  # item 1 was produced while item 0 was consumed


def test_a_producer_error_reaches_the_consumer_at_its_place_in_the_stream() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("row group 2 is corrupt")

    got = []
    with pytest.raises(ValueError, match="row group 2"):
        for item in prefetched(items()):
            got.append(item)
    assert got == [1]


def test_stopping_early_stops_the_producer_thread() -> None:
    produced = 0

    def items() -> Iterator[int]:
        nonlocal produced
        for i in range(1_000):
            produced += 1
            yield i

    before = {t for t in threading.enumerate() if t.name == "delta-prefetch"}
    stream = prefetched(items(), depth=2)
    assert next(stream) == 0
    stream.close()
    assert {t for t in threading.enumerate() if t.name == "delta-prefetch"} == before
    assert produced <= 4  # bounded read-ahead: one item consumed, at most depth + 1 more made
