"""``load_table_state`` equals ``load_snapshot`` on every golden table at every version: the same
version, protocol, metadata, properties, timestamp and segment, or the same error class; and
``segment_non_file_actions`` folds to the snapshot's protocol, metadata, txns and domains. The
load that stops at the newest version checksum (delta-spark's, delta-kernel-rs's) gives the same.

The one kind of difference allowed is listed: the light state never reads file actions or
sidecars, so a log whose only defect lies there loads as a state but not as a snapshot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog import errors as E
from airflow_delta_maintenance.deltalog.checksum.protocol_metadata import load_table_state_from_checksum
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.log_segment.segment import build_log_segment
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.replay.table_state import load_table_state
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests.golden.test_golden_tables import CASES, _location, _table_roots
from tests.unit.deltalog.test_table_state import non_file_state

pytestmark = pytest.mark.interop

NOW = 1_800_000_000_000

# {table: reason}: tables whose snapshot fails only in file actions the state never reads.
STATE_READS_WHAT_SNAPSHOT_REFUSES: dict[str, str] = {}


def _compare(root: Path, key: str) -> int:
    store = open_table_storage(str(root))
    try:
        latest = build_log_segment(list_log_files(store), table=store.uri).latest_version
    except E.DeltaLogError as exc:
        with pytest.raises(type(exc)):
            load_table_state(store)
        return 1
    compared = 0
    for v in [None, *range(latest + 1)]:
        why = f"{key}@{v}"
        try:
            snap = load_snapshot(store, v, now_ms=NOW)
        except E.DeltaLogError as exc:
            if key in STATE_READS_WHAT_SNAPSHOT_REFUSES:
                continue
            with pytest.raises(E.DeltaLogError) as refused:
                load_table_state(store, v, now_ms=NOW)
            assert refused.type is type(exc), f"{why}: snapshot raised {type(exc).__name__}: {exc}; state raised {refused.type.__name__}"
            try:  # the same error, unless a checksum spared the read of the part that fails
                assert load_table_state_from_checksum(store, v, now_ms=NOW).checksum_version is not None, why
            except E.DeltaLogError as again:
                assert type(again) is type(exc), why
            compared += 1
            continue
        state = load_table_state(store, v, now_ms=NOW)
        assert (state.version, state.protocol, state.metadata) == (snap.version, snap.protocol, snap.metadata), why
        # the Spark checkpoint job's non-file state: checkpoint columns plus the commits' non-file lines
        non_file, replayed = non_file_state(store, v)
        assert non_file == replayed, why
        assert state.properties == snap.properties, why
        assert state.timestamp == snap.timestamp, why
        # A compaction the snapshot rejects as unreconciled (it repeats a logical file) still
        # carries the right protocol and metadata: the state keeps it, the snapshot falls back.
        assert (state.segment.version, state.segment.checkpoint) == (snap.segment.version, snap.segment.checkpoint), why
        if state.segment != snap.segment:
            assert snap.segment == build_log_segment(snap.segment.files, v, use_compactions=False, table=store.uri), why
        assert state.in_commit_timestamps_enabled == snap.in_commit_timestamps_enabled, why
        crc = load_table_state_from_checksum(store, v, now_ms=NOW)
        assert (crc.version, crc.protocol, crc.metadata, crc.properties, crc.timestamp) == (snap.version, snap.protocol, snap.metadata, snap.properties, snap.timestamp), why
        compared += 1
    return compared


@pytest.mark.parametrize(("key", "entry"), CASES, ids=[k for k, _ in CASES])
def test_state_equals_snapshot(key: str, entry: Path, tmp_path: Path) -> None:
    location = _location(entry, tmp_path)
    roots = _table_roots(location) or [location]
    assert sum(_compare(root, key) for root in roots), key


def test_the_checksum_load_stops_at_the_checksums_of_spark_tables(tmp_path: Path) -> None:
    """Not vacuous: on many golden tables with a checksum the load above does stop at one."""
    with_crc = [(k, e) for k, e in CASES if not e.name.endswith(".tar.zst") and any(e.glob("**/_delta_log/[0-9]*.crc"))]
    used = 0
    for key, entry in with_crc:
        for root in _table_roots(_location(entry, tmp_path / key)) or [entry]:
            try:
                used += load_table_state_from_checksum(open_table_storage(str(root))).checksum_version is not None
            except E.DeltaLogError:
                continue
    assert used >= 10, (used, len(with_crc))  # 12 of 21: the rest below a checkpoint, or older formats ignored
