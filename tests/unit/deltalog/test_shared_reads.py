"""Two threads reading a bin's slices: the order, the bound on reading ahead, errors in order, and
no helper left behind."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_delta_maintenance.deltalog.datafiles.shared_reads import AHEAD, read_in_slices, slices_by_size


def helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "delta-read-helper"]  # only read_in_slices starts these


def test_slices_are_cut_after_the_size_limit() -> None:
    assert slices_by_size([3, 1, 4, 1, 5], lambda x: x, 4) == [[3, 1], [4], [1, 5]]
    assert slices_by_size([], lambda x: x, 4) == []


def test_both_threads_read_and_the_items_come_in_order_never_far_ahead() -> None:
    readers: dict[int, str] = {}
    taken = -1
    ahead: list[int] = []

    def read(i: int) -> list[int]:
        readers[i] = threading.current_thread().name
        ahead.append(i - taken)
        time.sleep(0.004)  # reading is the larger share of a bin's work
        return [10 * i, 10 * i + 1]

    out = []
    for item in read_in_slices(40, read, lambda: True):
        out.append(item)
        taken = item // 10
        time.sleep(0.001)  # the writing between: the helper reads meanwhile
    assert out == [x for i in range(40) for x in (10 * i, 10 * i + 1)]
    assert set(readers.values()) == {"MainThread", "delta-read-helper"}
    assert max(ahead) <= AHEAD + 1
    assert not helpers()


def test_without_a_grant_one_thread_reads_everything() -> None:
    names = set()

    def read(i: int) -> list[int]:
        names.add(threading.current_thread().name)
        return [i]

    asked = []
    assert list(read_in_slices(5, read, lambda: asked.append(1) or False)) == [0, 1, 2, 3, 4]
    assert names == {"MainThread"} and len(asked) == 4  # asked before each slice but the last


def test_a_slice_that_fails_is_raised_in_order_and_the_helper_stops() -> None:
    def read(i: int) -> list[int]:
        if i == 7:
            raise OSError(f"slice {i} unreadable")
        time.sleep(0.001)
        return [i]

    got = []
    with pytest.raises(OSError, match="slice 7 unreadable"):
        for item in read_in_slices(20, read, lambda: True):
            got.append(item)
            time.sleep(0.002)
    assert got == list(range(7))
    assert not helpers()


def test_a_consumer_that_stops_early_stops_the_helper() -> None:
    stream = read_in_slices(1000, lambda i: [i], lambda: True)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert not helpers()


def test_a_conformer_shared_by_two_threads_never_pairs_a_schema_with_anothers_plan() -> None:
    """The interleaving made deterministic: while one thread checks its file's schema against the
    conformer's cached one (equal), the other conforms a file of another schema and replaces the
    cache. The first must still use the plan of its own schema."""
    import pyarrow as pa

    from airflow_delta_maintenance.deltalog.datafiles.schema import TableConformer

    target = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    old_files = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    new_files = pa.table({"b": pa.array(["y"]), "a": pa.array([2], pa.int32())})  # reordered, narrower
    conformer = TableConformer(target, False)
    conformer(old_files, "f0.parquet")

    class OtherThreadRunsDuringTheCheck:
        def __init__(self, table: pa.Table) -> None:
            self.table, self.num_rows = table, table.num_rows

        @property
        def schema(self) -> OtherThreadRunsDuringTheCheck:
            return self

        def equals(self, other: pa.Schema, check_metadata: bool = False) -> bool:
            assert conformer(new_files, "f1.parquet").to_pydict() == {"a": [2], "b": ["y"]}
            return self.table.schema.equals(other, check_metadata=check_metadata)

        def column(self, i: int) -> pa.ChunkedArray:
            return self.table.column(i)

    assert conformer(OtherThreadRunsDuringTheCheck(old_files), "f2.parquet").to_pydict() == {"a": [1], "b": ["x"]}  # type: ignore[arg-type]
