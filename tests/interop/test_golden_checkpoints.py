"""Our checkpoint of every golden table the wheel reads is read back by the wheel with the same
active files, from the checkpoint alone (the commits before it are hidden)."""

from __future__ import annotations

import shutil
from pathlib import Path

import deltalake  # the independent oracle: a test dependency, never skipped
import pytest

from airflow_delta_maintenance.deltalog.checkpoint.writer import write_checkpoint
from airflow_delta_maintenance.deltalog.errors import UnsupportedFeatureError
from airflow_delta_maintenance.deltalog.replay.snapshot import load_snapshot
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests.golden.test_golden_tables import CASES, EXPECTED_FAILURES, WHEEL_CANNOT_READ, _table_roots, _unpack

pytestmark = pytest.mark.interop
READABLE = [(k, e) for k, e in CASES if k not in EXPECTED_FAILURES and k not in WHEEL_CANNOT_READ]
# Tables whose writer features our checkpoint writer refuses, by name (listed, never skipped).
REFUSED_WRITERS = {"delta-rs/table_with_liquid_clustering": "writer feature 'liquid' (a pre-release name of clustering)"}


@pytest.mark.parametrize(("key", "entry"), READABLE, ids=[k for k, _ in READABLE])
def test_wheel_reads_our_checkpoint_of_golden_table(key: str, entry: Path, tmp_path: Path) -> None:
    location = _unpack(entry, tmp_path / "src") if entry.name.endswith(".tar.zst") else entry
    for i, root in enumerate(_table_roots(location)):
        table = tmp_path / f"t{i}"
        shutil.copytree(root, table)
        store = open_table_storage(str(table))
        snap = load_snapshot(store)
        expected = set(deltalake.DeltaTable(str(table)).get_add_actions(flatten=True).column("path").to_pylist())
        if key in REFUSED_WRITERS:
            with pytest.raises(UnsupportedFeatureError):
                write_checkpoint(store, snap)
            continue
        for p in (table / "_delta_log").iterdir():
            if ".checkpoint" in p.name or p.name == "_last_checkpoint" or p.name.endswith(".crc"):
                p.unlink()
        write_checkpoint(store, snap)
        for p in (table / "_delta_log").glob("*.json"):
            if p.name[:20].isdigit() and int(p.name[:20]) < snap.version:
                p.unlink()  # only our checkpoint (and the commit at its version) remain
        assert set(deltalake.DeltaTable(str(table)).get_add_actions(flatten=True).column("path").to_pylist()) == expected, key
