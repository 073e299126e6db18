"""Compaction streams its winning lines: the output equals the one built from every line held in
memory (``replay_actions(keep_lines=True)`` + ``original_lines``, the former implementation), for
any batch and window size, with deletion vectors, odd line forms, CRLF and missing final newlines;
and only winning lines are kept between the two passes."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pytest

from airflow_delta_maintenance.deltalog import compaction_lines
from airflow_delta_maintenance.deltalog.compaction import _by_key, compaction_actions, compaction_head, write_compaction
from airflow_delta_maintenance.deltalog.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment import LogSegment
from airflow_delta_maintenance.deltalog.paths import commit_name
from airflow_delta_maintenance.deltalog.reader import ORDER
from airflow_delta_maintenance.deltalog.replay import replay_actions
from airflow_delta_maintenance.deltalog.storage import LogStore, open_table_storage

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
    parts = [bytes(result.deltas.original_lines(t.column(ORDER).take(_by_key(t)))) for t in (result.adds, result.removes)]
    return head + b"".join(parts)


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


@pytest.mark.parametrize(("batch", "window"), [(None, None), (1, 1), (300, 2), (2000, 7)])
def test_streamed_output_equals_the_in_memory_one(table: LogStore, monkeypatch: pytest.MonkeyPatch, batch: int | None, window: int | None) -> None:
    expected = held_in_memory(table, 1, 14)
    assert b"\r\n" in expected and b'"p=1/odd"' in expected and expected.count(b"\n") > 10
    if batch:
        monkeypatch.setattr(compaction_lines, "BATCH_BYTES", batch)
    if window:
        monkeypatch.setattr(compaction_lines, "WINDOW_LINES", window)
    assert compaction_actions(table, list_log_files(table), 1, 14) == expected
    assert compaction_actions(table, list_log_files(table), 3, 9) == held_in_memory(table, 3, 9)


def test_only_winning_lines_are_kept_between_the_passes(table: LogStore) -> None:
    files = list_log_files(table)
    commits = {c.version: c for c in files.commits}
    segment = LogSegment(14, None, tuple(commits[v] for v in range(1, 15)), 14, 14, files)
    result = replay_actions(table, segment, include_checkpoint=False, keys_only=True)
    orders = [t.column(ORDER).take(_by_key(t)).to_numpy() for t in (result.adds, result.removes)]
    import numpy as np

    runs = compaction_lines.collect_winning_lines(table, segment.deltas, np.concatenate(orders), batch_bytes=500)
    held = sum(r.lines.nbytes for r in runs.runs)
    written = write_compaction(table, 1, 14)
    body = table.read(written.file)
    head = body[: body.index(b'{"add"')]
    assert len(runs.runs) > 1 and runs.total == result.adds.num_rows + result.removes.num_rows
    assert sum(len(r.lines) for r in runs.runs) == runs.total
    assert held < sum(c.size for c in segment.deltas)  # the losers' lines and the other actions are gone
    assert written.num_actions == head.count(b"\n") + runs.total and len(body) == written.size_in_bytes
