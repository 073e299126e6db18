"""Compaction streams its winning lines: the output equals the one built from every line held in
memory (``replay_actions(keep_lines=True)`` + ``original_lines``, in log order), for any batch
size, with deletion vectors, odd line forms, CRLF and missing final newlines; lines are read and
written batch by batch, never all held; commits that change between the passes fail the write."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.log_compaction import lines as compaction_lines
from airflow_delta_maintenance.deltalog.log_compaction.windows import compaction_head, write_compaction
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment.segment import LogSegment
from airflow_delta_maintenance.deltalog.model.paths import commit_name
from airflow_delta_maintenance.deltalog.replay.parsed_actions import ORDER
from airflow_delta_maintenance.deltalog.replay.reconcile import replay_actions
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage
from tests.helpers.log_compaction import compaction_actions

from .logbuilder import LogBuilder, add, commit_info, dv, metadata, ndjson, protocol, remove

NOW = 1_800_000_000_000


def held_in_memory(store: LogStore, start: int, end: int) -> bytes:
    """The former implementation: every line of the window kept, winners taken by position."""
    files = list_log_files(store)
    commits = {c.version: c for c in files.commits}
    segment = LogSegment(end, None, tuple(commits[v] for v in range(start, end + 1)), end, end, files)
    result = replay_actions(store, segment, include_checkpoint=False, keys_only=True, keep_lines=True)
    head = compaction_head(result.protocol, result.metadata, result.txns.values(), result.domains.values())
    assert result.deltas is not None
    orders = pa.chunked_array([*result.adds.column(ORDER).chunks, *result.removes.column(ORDER).chunks], pa.int64())
    return head + bytes(result.deltas.original_lines(pc.take(orders, pc.sort_indices(orders))))


@pytest.fixture
def table(tmp_path: Path) -> LogStore:
    log = LogBuilder(fsspec.filesystem("file"), str(tmp_path))
    log.commit(0, [commit_info(), protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), metadata(partition_columns=["p"])])
    for v in range(1, 12):
        actions = [commit_info(), add(f"p={v % 3}/f{v}", v, partition_values={"p": str(v % 3)})]
        if v > 2:
            actions.append(remove(f"p={(v - 2) % 3}/f{v - 2}", NOW))
        if v % 4 == 0:
            actions += [remove("p=0/dv", NOW), add("p=0/dv", 5, dv=dv(f"d{v}", v))]
        log.commit(v, actions)
    # odd forms: spaces after the key, CRLF line ends, a blank line, no final newline
    odd = json.dumps({"add": {"path": "p=1/odd", "size": 3, "partitionValues": {"p": "1"}, "modificationTime": 1, "dataChange": True}}, separators=(", ", " : "))
    log.write(commit_name(12), (json.dumps(commit_info()) + "\r\n" + odd + "\r\n\n" + json.dumps(add("p=2/crlf", 4, partition_values={"p": "2"})) + "\r\n").encode())
    log.write(commit_name(13), ndjson([commit_info(), remove("p=1/f10", NOW)]).rstrip(b"\n"))
    log.commit(14, [commit_info(), add("p=1/last", 1, partition_values={"p": "1"})])
    return open_table_storage(str(tmp_path))


@pytest.mark.parametrize("batch", [None, 1, 300, 2000])
def test_streamed_output_equals_the_in_memory_one(table: LogStore, monkeypatch: pytest.MonkeyPatch, batch: int | None) -> None:
    expected = held_in_memory(table, 1, 14)
    assert b"\r\n" in expected and b'"p=1/odd"' in expected and expected.count(b"\n") > 10
    if batch:
        monkeypatch.setattr(compaction_lines, "BATCH_BYTES", batch)
    assert compaction_actions(table, list_log_files(table), 1, 14) == expected
    assert compaction_actions(table, list_log_files(table), 3, 9) == held_in_memory(table, 3, 9)
    written = write_compaction(table, 1, 14)
    assert table.read(written.file) == expected and written.size_in_bytes == len(expected)
    assert written.num_actions == expected.count(b"\n")


def _winners(table: LogStore) -> tuple[LogSegment, np.ndarray]:
    files = list_log_files(table)
    commits = {c.version: c for c in files.commits}
    segment = LogSegment(14, None, tuple(commits[v] for v in range(1, 15)), 14, 14, files)
    result = replay_actions(table, segment, include_checkpoint=False, keys_only=True)
    return segment, np.sort(np.concatenate([t.column(ORDER).to_numpy() for t in (result.adds, result.removes)]))


def test_lines_are_read_and_handed_on_batch_by_batch(table: LogStore, monkeypatch: pytest.MonkeyPatch) -> None:
    segment, wanted = _winners(table)
    reads: list[str] = []
    real = LogStore.read_into
    monkeypatch.setattr(LogStore, "read_into", lambda self, name, scratch: reads.append(name) or real(self, name, scratch))
    chunks = compaction_lines.winning_lines(table, segment.deltas, wanted, batch_bytes=500)
    first = bytes(next(chunks))
    assert 0 < len(reads) < len(segment.deltas)  # the first batch is out before the last commit is read
    rest = [bytes(c) for c in chunks]
    assert len(reads) == len(segment.deltas) and len(rest) > 1
    body = first + b"".join(rest)
    assert body.count(b"\n") == len(wanted)
    assert sum(c.size for c in segment.deltas) > len(body)  # the losers' lines and the other actions are gone


def test_commits_that_change_between_the_passes_fail_the_write_and_leave_nothing(table: LogStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import airflow_delta_maintenance.deltalog.log_compaction.windows as compaction

    real = compaction._compaction_plan

    def then_shrink(store: LogStore, files: object, start: int, end: int) -> object:
        planned = real(store, files, start, end)  # type: ignore[arg-type]
        data = (Path(store.log_dir) / commit_name(14)).read_bytes()
        (Path(store.log_dir) / commit_name(14)).write_bytes(data.split(b"\n", 1)[0] + b"\n")  # its add line is gone
        return planned

    monkeypatch.setattr(compaction, "_compaction_plan", then_shrink)
    with pytest.raises(CorruptLogError, match="changed while they were compacted"):
        write_compaction(table, 1, 14)
    assert not [f for f in list_log_files(table).compactions]
    assert not [p for p in Path(table.log_dir).iterdir() if p.name.startswith(".")]  # no temporary file left
