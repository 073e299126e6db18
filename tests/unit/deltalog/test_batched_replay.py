"""Replay parses JSON deltas in batches of bounded size: any batching gives the same state.

Every golden table is loaded with the production batch size and with one file per batch
(orders, partition columns, compaction checks and original lines all cross batch boundaries).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest

from airflow_delta_maintenance.deltalog.errors import DeltaLogError
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.replay import ndjson as reader, reconcile as replay
from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot, load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests.helpers.log_compaction import compaction_actions

from .logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "tables"
TABLES = sorted(p.parent for p in GOLDEN.glob("*/*/_delta_log")) + sorted(p.parent for p in GOLDEN.glob("*/*/*/_delta_log"))
NOW = 1_800_000_000_000


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.drop_columns(["_order"]).to_pylist()
    for r in rows:  # maps compare as maps: JSON key order is not kept by inference across lines
        for m in ("partitionValues", "tags"):
            if r.get(m) is not None:
                r[m] = sorted(r[m])
    return rows


def _state(snap: Snapshot) -> dict[str, Any]:
    files = _rows(snap.files)
    tombstones = _rows(snap.tombstones)
    key = lambda r: (r["path"], json.dumps(r.get("deletionVector"), sort_keys=True))  # noqa: E731
    return {
        "version": snap.version,
        "protocol": snap.protocol,
        "metadata": snap.metadata,
        "files": sorted(files, key=key),
        "tombstones": sorted(tombstones, key=key),
        "txns": dict(snap.txns),
        "domains": dict(snap.domain_metadata),
        "timestamps": dict(snap.commit_timestamps),
    }


def _load(root: Path) -> dict[str, Any] | str:
    try:
        return _state(load_snapshot(str(root), now_ms=NOW))
    except DeltaLogError as exc:
        return type(exc).__name__


def test_there_are_golden_tables_to_compare() -> None:
    assert len(TABLES) > 150


@pytest.mark.parametrize("root", TABLES, ids=[str(p.relative_to(GOLDEN)) for p in TABLES])
def test_one_file_per_batch_gives_the_same_snapshot(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = _load(root)
    monkeypatch.setattr(replay, "DELTA_BATCH_BYTES", 1)
    assert _load(root) == default


@pytest.mark.parametrize("root", TABLES, ids=[str(p.relative_to(GOLDEN)) for p in TABLES])
def test_byte_scans_in_small_slices_give_the_same_snapshot(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Newline search and remove-line gathering work on slices; 61 bytes puts boundaries mid-line."""
    default = _load(root)
    monkeypatch.setattr(reader, "_SCAN_BYTES", 61)
    assert _load(root) == default


def test_compaction_lines_cross_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = LogBuilder(fsspec.filesystem("file"), str(tmp_path))
    log.commit(0, [commit_info(), protocol(), metadata(partition_columns=["a"])])
    for v in range(1, 8):
        log.commit(v, [commit_info(), add(f"a=1/f{v}", partition_values={"a": "1"})] + ([remove(f"a=1/f{v - 2}", NOW)] if v > 2 else []))
    store = open_table_storage(str(tmp_path))
    files = list_log_files(store)
    expected = compaction_actions(store, files, 1, 7)
    monkeypatch.setattr(replay, "DELTA_BATCH_BYTES", 1)
    assert compaction_actions(store, files, 1, 7) == expected
    monkeypatch.setattr(reader, "_SCAN_BYTES", 61)
    assert compaction_actions(store, files, 1, 7) == expected
    assert expected.count(b'"remove"') == 5 and expected.count(b'"add"') == 2


def test_partitioning_changed_in_a_later_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files keep their own partition keys when a later batch changes the table's partitioning."""
    log = LogBuilder(fsspec.filesystem("file"), str(tmp_path))
    log.commit(0, [commit_info(), protocol(), metadata(partition_columns=["a"]), add("a=1/x", partition_values={"a": "2023-12-22"})])
    log.commit(1, [commit_info(), add("a=2/y", partition_values={"a": "7"})])
    log.commit(2, [commit_info(), metadata(partition_columns=["b"]), remove("a=1/x", NOW), add("b=1/z", partition_values={"b": "1"})])
    log.commit(3, [commit_info(), add("b=2/w", partition_values={"b": "2024-01-01"})])
    monkeypatch.setattr(replay, "DELTA_BATCH_BYTES", 1)
    snap = load_snapshot(str(tmp_path), now_ms=NOW)
    values = {r["path"]: dict(r["partitionValues"]) for r in snap.files.select(["path", "partitionValues"]).to_pylist()}
    assert values == {"a=2/y": {"a": "7"}, "b=1/z": {"b": "1"}, "b=2/w": {"b": "2024-01-01"}}


def test_keys_only_reads_a_large_commit_in_blocks_with_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keys-only replay (VACUUM's) parses a large commit's adds and removes block by block (a
    600-byte block here: many blocks, boundaries between lines); the state equals the one-read
    state, and a bad line in a late block is still reported by file and line."""
    from .logbuilder import dv

    log = LogBuilder(fsspec.filesystem("file"), str(tmp_path))
    actions = [commit_info(), protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), metadata(partition_columns=["a"])]
    actions += [add(f"a={i % 3}/f{i}", i, partition_values={"a": str(i % 3)}, dv=dv(f"dv{i}") if i % 4 == 0 else None) for i in range(60)]
    log.commit(0, actions)
    log.commit(1, [commit_info(), *(remove(f"a={i % 3}/f{i}", NOW, dv=dv(f"dv{i}") if i % 4 == 0 else None) for i in range(0, 60, 5)),
                   *(add(f"a=9/g{i}", partition_values={"a": "9"}) for i in range(40))])
    whole = _state(load_snapshot(str(tmp_path), now_ms=NOW, keys_only=True))
    monkeypatch.setattr(reader, "_KEYS_BLOCK_BYTES", 600)
    blocks = []
    real = reader.read_strict
    monkeypatch.setattr(reader, "read_strict", lambda data, *a: blocks.append(len(data)) or real(data, *a))
    assert _state(load_snapshot(str(tmp_path), now_ms=NOW, keys_only=True)) == whole
    assert len(blocks) > 10 and max(blocks) < 1200 and len(whole["files"]) == 88 and len(whole["tombstones"]) == 12

    text = (tmp_path / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    text[-3] = text[-3].replace('"size": ', '"size": -')
    (tmp_path / "_delta_log" / "00000000000000000001.json").write_text("\n".join(text) + "\n")
    with pytest.raises(DeltaLogError, match=r"00000000000000000001\.json: line 51"):
        load_snapshot(str(tmp_path), now_ms=NOW, keys_only=True)
