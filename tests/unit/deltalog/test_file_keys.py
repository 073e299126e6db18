"""The compiled newest-action-per-path pass (``file_keys`` / the accelerators' ``_file_keys.c``) picks
exactly the winners that pyarrow's dictionary encoding picks, on any mix of chunks, slices, nulls and
keys."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.replay import file_keys, reconcile as replay
from airflow_delta_maintenance.deltalog.replay.parsed_actions import ORDER, PLACEHOLDER_ORDER

# The extension's own contract, checked where it is installed (``make test`` requires it); the
# differential test compares it with the pure path in both modes.
needs_extension = pytest.mark.skipif(not file_keys.AVAILABLE, reason="the accelerators are not installed (or DELTA_MAINTENANCE_ACCEL=off)")


def _tables(rng: random.Random) -> list[pa.Table]:
    vocabulary = ["", "a", "b", "ab", "ba", "é", "x" * 7, "x" * 8, "x" * 9, "y" * 64, "y" * 63 + "z", "day=1/part-0001.parquet", "day=1/part-0001.parquet "]
    spellings = ["/t/f.parquet", "file:/t/f.parquet", "file:///t/f.parquet"]  # one file: the replay rewrites them first
    vocabulary += [f"dir/part-{i:05d}-{rng.getrandbits(64):016x}.parquet" for i in range(rng.randint(0, 400))]
    seed_spellings = rng.random() < 0.5
    order = 0
    tables = []
    for _ in range(2):  # adds and removes
        batches = []
        for _ in range(rng.randint(0, 4)):
            n = rng.choice([0, rng.randint(1, 300)])  # empty batches too: a rewrite of the paths drops their chunks
            paths: list[str | None] = []
            orders = []
            for _ in range(n):
                if rng.random() < 0.1:  # a checkpoint's placeholder row
                    paths.append(None)
                    orders.append(PLACEHOLDER_ORDER)
                else:
                    paths.append(rng.choice(spellings if seed_spellings and rng.random() < 0.05 else vocabulary))
                    orders.append(order)
                    order += 1
            batch = pa.RecordBatch.from_arrays([pa.array(["pad"] * 3 + paths), pa.array([0] * 3 + orders, pa.int64()), pa.nulls(n + 3, pa.string())],
                                               names=["path", ORDER, replay.DV_ID])
            batches.append(batch.slice(3))  # an offset into the buffers, as a slice of a larger read has
        rng.shuffle(batches)
        schema = pa.schema([("path", pa.string()), (ORDER, pa.int64()), (replay.DV_ID, pa.string())])
        tables.append(pa.Table.from_batches(batches, schema))
    return tables


@pytest.mark.parametrize("seed", range(40))
def test_the_same_winners_as_dictionary_encoding(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    tables = _tables(rng)
    native = replay._winners(tables)
    monkeypatch.setattr(file_keys, "_file_keys", None)
    pure = replay._winners(tables)
    if pure is None or native is None:
        assert native is None and pure is None
    else:
        assert np.array_equal(native, pure)


@needs_extension
def test_large_strings_read_alike() -> None:
    paths = ["a", None, "bb", "a", "c" * 100, "bb"]
    orders = np.array([0, PLACEHOLDER_ORDER, 1, 2, 3, 4], dtype=np.int64)
    small = file_keys.newest_orders([pa.array(paths, pa.string())], [orders], 5)
    large = file_keys.newest_orders([pa.array(paths, pa.large_string())], [orders], 5)
    assert small is not None and large is not None
    assert np.array_equal(small[0], large[0]) and small[1] == large[1] == 4


@needs_extension
def test_every_key_once_means_no_reconciliation() -> None:
    paths = pa.array([f"p{i}" for i in range(1000)])
    won, distinct = file_keys.newest_orders([paths], [np.arange(1000, dtype=np.int64)], 1000)  # type: ignore[misc]
    assert distinct == 1000 and won.all()


@needs_extension
def test_the_newest_order_wins_whatever_the_row_order() -> None:
    paths = pa.array(["a", "b", "a", None, "b", None, "a"])
    orders = np.array([5, 1, 9, PLACEHOLDER_ORDER, 0, PLACEHOLDER_ORDER, 2], dtype=np.int64)
    won, distinct = file_keys.newest_orders([paths], [orders], 10)  # type: ignore[misc]
    assert distinct == 3  # a, b and the nulls
    assert np.flatnonzero(won).tolist() == [1, 9]


@needs_extension
def test_an_order_beyond_the_result_is_refused() -> None:
    with pytest.raises(ValueError, match="order 7"):
        file_keys.newest_orders([pa.array(["a", "b"])], [np.array([0, 7], dtype=np.int64)], 5)


def test_other_string_types_are_left_to_pyarrow() -> None:
    assert file_keys.newest_orders([pa.array(["a"], pa.string_view())], [np.zeros(1, dtype=np.int64)], 1) is None
