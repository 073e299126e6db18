"""Every checkpoint of the golden tables (written by delta-spark, delta-rs, kernels) passes the
anchor verification cleanup relies on, with each table's own ``_last_checkpoint``; only the two
tables built to lack a protocol or metaData row are refused. A false refusal would block cleanup."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.checkpoint.check import verify_checkpoint
from airflow_delta_maintenance.deltalog.errors import CorruptLogError
from airflow_delta_maintenance.deltalog.log_segment.last_checkpoint import parse_last_checkpoint
from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage

TABLES = Path(__file__).resolve().parent / "tables"
BROKEN = {
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-protocol",
    "delta-spark/deltalog-state-reconstruction-from-checkpoint-missing-metadata",
}
ROOTS = sorted(str(p.parent.relative_to(TABLES)) for p in TABLES.rglob("_delta_log") if p.is_dir() and any(p.glob("*.checkpoint*")))


@pytest.mark.parametrize("name", ROOTS)
def test_golden_checkpoints_verify(name: str) -> None:
    store = open_table_storage(str(TABLES / name))
    try:
        hint = parse_last_checkpoint(store.read("_last_checkpoint"))
    except FileNotFoundError:
        hint = None
    groups = list_log_files(store).complete_checkpoints()
    assert groups or name in BROKEN
    for group in groups:
        if name in BROKEN:
            with pytest.raises(CorruptLogError, match=r"protocol|metaData"):
                verify_checkpoint(store, group, hint)
        else:
            check = verify_checkpoint(store, group, hint)
            assert check.version == group.version and check.num_rows > 0
