"""``delta-maintenance vacuum`` as users run it: no flags (dry run, the table's retention, the
coordinator the table declares), --execute, --lite, and its errors as one line and an exit code."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_delta_maintenance.cli import main
from airflow_delta_maintenance.coordinators.local import EMBEDDED_COORDINATOR_PROPERTY
from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests.unit.maintenance.test_vacuum import age_data, wheel_table


def test_no_flags_is_a_dry_run_on_the_tables_retention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "t"
    wheel_table(root)
    (root / "stray.parquet").write_bytes(b"x")
    age_data(root, 10)
    assert main(["vacuum", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vacuum: would delete 1 file (1 bytes); FULL, retention 168 h, v2 (dry run)") and "  stray.parquet" in out
    assert (root / "stray.parquet").exists()
    assert main(["vacuum", str(root), "--retention-hours", "0", "--allow-shorter-retention", "--json", "--list"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["dry_run"] and record["planned_files"] == 5 and "stray.parquet" in record["files"]
    assert main(["vacuum", str(root), "--execute"]) == 0
    assert "deleted 1 file" in capsys.readouterr().out and not (root / "stray.parquet").exists()


def test_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "t"
    wheel_table(root, versions=4)
    assert main(["vacuum", str(root), "--retention-hours", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RetentionTooShortError" in err and "to accept it pass --allow-shorter-retention (" in err
    deltalake.DeltaTable(str(root)).create_checkpoint()
    (root / "_delta_log" / f"{0:020d}.json").unlink()  # metadata cleanup took the first commit
    assert main(["vacuum", str(root), "--lite", "--retention-hours", "0", "--allow-shorter-retention"]) == 2
    err = capsys.readouterr().err
    assert "LiteVacuumUnavailableError" in err and "commit 0 is gone" in err and "FULL" in err
    assert main(["vacuum", str(root), "--retention-hours", "0", "--allow-shorter-retention"]) == 0  # FULL still plans


def test_a_table_that_declares_its_coordinator_is_vacuumed_through_it_without_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "c.db"
    root = tmp_path / "t"
    (root / "region=x").mkdir(parents=True)
    client = open_coordinator(f"local://{db}?create=true")
    client.commit(str(root), 0, create_actions({EMBEDDED_COORDINATOR_PROPERTY: f"local://{db}"}, ict=True))
    (root / "region=x" / "a.parquet").write_bytes(b"data")
    client.commit(str(root), 1, [{"add": {"path": "region=x/a.parquet", "partitionValues": {"region": "x"}, "size": 4,
                                          "modificationTime": 1, "dataChange": True}}])
    age_data(root, 30)
    assert main(["vacuum", str(root), "--retention-hours", "0", "--allow-shorter-retention", "--execute", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["pending_versions"] >= 1 and record["deleted"] == 0
    assert (root / "region=x" / "a.parquet").exists()
    assert main(["vacuum", str(root), "--retention-hours", "0", "--allow-shorter-retention", "--coordinator", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["planned_files"] == 0  # still the catalog's view: the table's own coordinator


def test_lite_after_metadata_cleanup_the_cleanup_plan_says_full_and_lite_refuses_until_a_vacuum_horizon_covers_the_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time
    from datetime import datetime, timezone

    root = tmp_path / "t"
    wheel_table(root, versions=6)  # overwrites: each commit removes the previous version's files
    deltalake.DeltaTable(str(root)).create_checkpoint()  # at v5
    later = datetime.fromtimestamp(time.time() + 60 * 86_400, timezone.utc).isoformat()
    cleanup = ["cleanup", str(root), "--now", later, "--allow-future-now"]
    assert main(cleanup) == 0 and "VACUUM" not in capsys.readouterr().out  # a table never vacuumed: nothing to say
    (root / "_delta_log" / "_last_vacuum_info").write_text("{}")  # what delta-spark's FULL VACUUM records
    assert main(cleanup) == 0
    out = capsys.readouterr().out
    assert "note: VACUUM LITE needs every commit after commit 0 (_last_vacuum_info records no horizon); this cleanup deletes commits 0..4: the next VACUUM must be FULL" in out
    assert main([*cleanup, "--execute", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["deleted"] >= 5 and "must be FULL" in record["note"] and not (root / "_delta_log" / f"{0:020d}.json").exists()

    lite = ["vacuum", str(root), "--lite", "--retention-hours", "0", "--allow-shorter-retention", "--json"]
    assert main(lite) == 2  # as delta-spark's DELTA_CANNOT_VACUUM_LITE: the removes of commits 0..4 are gone
    assert "commits 0..5" in capsys.readouterr().err
    # A VACUUM that recorded horizon 4 (delta-spark writes this file too) saw those removes: LITE
    # needs commit 5 on only, which is there. delta-spark still refuses (it wants the horizon's own
    # commit, v4, to exist); docs/operators/vacuum.md explains the difference.
    (root / "_delta_log" / "_last_vacuum_info").write_text('{"latestCommitVersionOutsideOfRetentionWindow":4}')
    assert main(lite) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["lite_range"] == [5, 5] and plan["planned_files"] == 2  # the two files v5's overwrite removed
    # a cleanup that deletes only commits the horizon covers says nothing
    (root / "_delta_log" / "_last_vacuum_info").write_text('{"latestCommitVersionOutsideOfRetentionWindow":5}')
    deltalake.write_deltalake(str(root), pa.table({"id": [9], "p": ["a"]}), partition_by=["p"], mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()  # at v6: commit 5 may go, the horizon covers it
    assert main(cleanup) == 0
    out = capsys.readouterr().out
    assert "would delete" in out and "VACUUM LITE" not in out, out


def test_an_inventory_file_plans_what_the_listing_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--inventory`` with a listing file in delta-spark's schema (JSON lines, paths as Spark writes them):
    hidden names at any depth, the log, checksum shadows and directory rows go as a listing takes them."""
    root = tmp_path / "t"
    wheel_table(root)
    for rel in ["stray.parquet", ".stray.parquet.crc", "_tmp/hidden.parquet", ".x.parquet", "sub/_h/z.parquet", "sub/keep.parquet", "sub/.k.parquet"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"stray")
    age_data(root, 10)
    rows = [{"path": f"file:{p}", "length": 0 if p.is_dir() else p.stat().st_size, "isDir": p.is_dir(), "modificationTime": int(p.stat().st_mtime * 1000)}
            for p in sorted(root.rglob("*"))]
    inventory = tmp_path / "inventory.json"
    inventory.write_text("".join(json.dumps(r) + "\n" for r in rows))
    flags = ["--retention-hours", "0", "--allow-shorter-retention", "--json", "--list"]
    assert main(["vacuum", str(root), *flags]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["vacuum", str(root), "--inventory", str(inventory), *flags]) == 0
    from_inventory = json.loads(capsys.readouterr().out)
    assert {"stray.parquet", "sub/keep.parquet"} <= set(listed["files"])
    assert not {"_tmp/hidden.parquet", ".x.parquet", "sub/_h/z.parquet", "sub/.k.parquet"} & set(listed["files"])
    assert sorted(from_inventory["files"]) == sorted(listed["files"]) and from_inventory["planned_files"] == listed["planned_files"]
