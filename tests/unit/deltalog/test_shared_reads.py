"""Idle worker threads read small files ahead for the bins still running (``datafiles.shared_reads``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_maintenance.deltalog.datafiles import shared_reads, writer
from airflow_delta_maintenance.deltalog.datafiles.files import DataFiles
from airflow_delta_maintenance.deltalog.datafiles.reader import SourceFile
from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.optimize.worker import BinFailedError, WorkerEngine
from airflow_delta_maintenance.deltalog.storage import open_table_storage

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "v", "type": "string", "nullable": True, "metadata": {}}]}


def _bins(root: Path, sizes: list[int], rows: int = 50) -> tuple[DataFiles, list[writer.BinTask]]:
    (root / "_delta_log").mkdir(parents=True)
    tasks = []
    n = 0
    for b, count in enumerate(sizes):
        sources = []
        for _ in range(count):
            ids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
            pq.write_table(pa.table({"id": ids, "v": pa.array([f"r{i}" for i in ids.to_pylist()])}), root / f"b{b}-{n:04d}.parquet")
            sources.append(SourceFile(path=f"b{b}-{n:04d}.parquet", size=(root / f"b{b}-{n:04d}.parquet").stat().st_size,
                                      partition_values={}, deletion_vector=None, num_records=rows))
            n += 1
        # chunks of about two files: row_group_bytes // 8 is the chunk size
        tasks.append(writer.BinTask(sources=tuple(sources), partition_values={}, table_schema=SCHEMA, partition_columns=(),
                                    row_group_bytes=16 * sources[0].size))
    return DataFiles(open_table_storage(str(root))), tasks


def _ids(root: Path, add: Any) -> list[int]:
    return sorted(pq.read_table(root / add["path"]).column("id").to_pylist())


def _hold_first_bin_until_helpers_help(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], threading.Event]:
    """The first bin's own thread waits in its first chunk until an idle thread has read a chunk for it."""
    helped = [0]
    first_help = threading.Event()
    real_help = shared_reads.SharedRun.help_once

    def help_once(self: shared_reads.SharedRun) -> bool:
        did = real_help(self)
        if did:
            helped[0] += 1
            first_help.set()
        return did

    real_read = writer.iter_small_files

    def iter_small_files(files: DataFiles, sources: list[SourceFile], *args: Any, **kwargs: Any) -> Iterator[pa.Table]:
        if sources[0].path == "b0-0000.parquet" and threading.current_thread().name.startswith("optimize"):
            assert first_help.wait(timeout=60), "no idle thread helped the running bin"
        return real_read(files, sources, *args, **kwargs)

    monkeypatch.setattr(shared_reads.SharedRun, "help_once", help_once)
    monkeypatch.setattr(writer, "iter_small_files", iter_small_files)
    return helped, first_help


def test_threads_without_a_bin_read_for_the_running_one_and_every_row_is_written_once(tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    files, tasks = _bins(tmp_path, [40, 2, 2])
    helped, _ = _hold_first_bin_until_helpers_help(monkeypatch)
    adds = WorkerEngine(files, max_workers=3).run(tasks)
    assert helped[0] >= 1
    for task, add in zip(tasks, adds, strict=True):
        expected = sorted(i for s in task.sources for i in range(int(s.path[3:7]) * 50, int(s.path[3:7]) * 50 + 50))
        assert _ids(tmp_path, add) == expected  # each row once, none from another bin
        assert add is not None and '"numRecords":' + str(len(expected)) in add["stats"].replace(" ", "")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("part-")) == sorted(a["path"] for a in adds if a)


def test_a_helpers_read_failure_fails_the_bin_with_the_files_own_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper reads chunk 1 or 2 of the first bin (its own thread holds chunk 0): a file there
    that is not Parquet fails that bin with the file's typed error; the other bins' files are named."""
    files, tasks = _bins(tmp_path, [40, 2, 2])
    (tmp_path / "b0-0002.parquet").write_bytes(b"not parquet")
    (tmp_path / "b0-0004.parquet").write_bytes(b"not parquet")
    _hold_first_bin_until_helpers_help(monkeypatch)
    with pytest.raises(BinFailedError) as failed:
        WorkerEngine(files, max_workers=3).run(tasks)
    assert isinstance(failed.value.__cause__, CorruptLogError) and "b0-000" in str(failed.value.__cause__)
    assert len(failed.value.written) == 2  # the two small bins finished; the caller deletes them
    assert not [t for t in threading.enumerate() if t.name.startswith("optimize")]


def test_helpers_stay_at_most_max_ahead_chunks_in_front_of_the_bins_own_thread() -> None:
    reads: list[list[int]] = []

    def read(chunk: list[Any]) -> list[pa.Table]:
        reads.append([s.size for s in chunk])
        return [pa.table({"n": [s.size for s in chunk]})]

    class Src:
        def __init__(self, size: int) -> None:
            self.size = size

    sharing = shared_reads.ReadSharing()
    with sharing.share([Src(1), Src(2), Src(3), Src(4), Src(5)], 1, read, lambda chunk: iter(read(chunk))) as run:
        assert [run.help_once() for _ in range(3)] == [True] * shared_reads.MAX_AHEAD + [False]
        got = [t.column("n").to_pylist() for t in run]
    assert sorted(x for g in got for x in g) == [1, 2, 3, 4, 5]
    assert sorted(reads) == [[1], [2], [3], [4], [5]]
