"""Our checkpoints are read by the deltalake wheel (delta-rs) with the same state."""

from __future__ import annotations

import datetime as dt
import os
import random
from pathlib import Path

import deltalake  # the independent oracle: a test dependency, never skipped
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage

pytestmark = pytest.mark.interop


def _batch(i: int) -> pa.Table:
    return pa.table(
        {
            "x": [i, i + 1, None],
            "s": ["a", None, "c"],
            "d": [dt.date(2020, 1, 1 + i % 28)] * 3,
            "t": [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)] * 3,
            "p": [f"p{i % 3}"] * 3,
        }
    )


def _wheel_files(path: str, version: int | None = None) -> set[tuple[str, int]]:
    table = deltalake.DeltaTable(path, version=version) if version is not None else deltalake.DeltaTable(path)
    actions = table.get_add_actions(flatten=True)
    return set(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))


@pytest.mark.parametrize("partitioned", [True, False])
def test_wheel_reads_our_checkpoint_alone(tmp_path: Path, partitioned: bool) -> None:
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    for i in range(rng.randint(4, 9)):
        deltalake.write_deltalake(path, _batch(i), mode="append", partition_by=["p"] if partitioned else None)
        if rng.random() < 0.3:
            deltalake.DeltaTable(path).delete(f"x = {i}")
    store = open_table_storage(path)
    snap = load_snapshot(store)
    result = write_checkpoint(store, snap)
    assert not result.existed and result.stats_parsed, (seed, result)
    before = _wheel_files(path)
    # Hide every commit at or before the checkpoint: the wheel must rebuild the state from our file alone.
    log = Path(path) / "_delta_log"
    for v in range(snap.version + 1):
        os.rename(log / f"{v:020d}.json", tmp_path / f"{v}.json.bak")
    assert _wheel_files(path) == before == {(f["path"], f["size"]) for f in snap.file_list()}, f"seed={seed}"
    ours = load_snapshot(path)
    assert ours.checkpoint_version == snap.version and ours.active_file_keys() == snap.active_file_keys()
    # one more commit on top of our checkpoint, by the wheel
    for v in range(snap.version + 1):
        os.rename(tmp_path / f"{v}.json.bak", log / f"{v:020d}.json")
    deltalake.write_deltalake(path, _batch(99), mode="append", partition_by=["p"] if partitioned else None)
    assert _wheel_files(path) == {(f["path"], f["size"]) for f in load_snapshot(path).file_list()}
