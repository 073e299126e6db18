"""An add's ``partitionValues`` keys are the table's partition columns (by physical name under
column mapping; by logical name too, as older writers wrote them): a key the table does not have
(``region`` flipped to ``begion``, an extra key) makes the ``deltalake`` wheel refuse the table,
so every command stops with a typed one-line error naming the file, line and key, and nothing is
written or deleted. A missing key is a null value (the wheel and delta-spark read it): the table
is read, as the wheel reads it. Driven through the CLI, in-process (both validation paths of the
tail: line by line and columnar) and as the installed command with the accelerators off and
required."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import deltalake
import fsspec
import pyarrow as pa
import pytest

from airflow_delta_maintenance.deltalog.replay import tail_check

from ..deltalog.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from .test_strict_log import DAY, listing, run

ROOT = Path(__file__).resolve().parents[3]
MAPPED_SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "x", "type": "long", "nullable": True, "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-x"}},
    {"name": "region", "type": "string", "nullable": True, "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-r"}},
]})


def partitioned_table(tmp_path: Path, latest: dict[str, str] | None, *, mapped: bool = False) -> Path:
    """Commits 0..11 thirty to nineteen days old, partitioned by ``region``, one-day retention, a
    checkpoint at 11 (cleanup would delete eleven commits); commit 12 adds a file with
    ``latest`` as its partition values (None: no commit 12)."""
    root = tmp_path / "t"
    log = LogBuilder(fsspec.filesystem("file"), str(root))
    now = int(time.time() * 1000)
    key = "col-r" if mapped else "region"
    conf = {"delta.logRetentionDuration": "interval 1 days"}
    meta = metadata(conf, partition_columns=["region"])
    if mapped:
        meta["metaData"]["schemaString"] = MAPPED_SCHEMA
        meta["metaData"]["configuration"] |= {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    for v in range(12):
        actions = [commit_info()]
        if v == 0:
            actions += [protocol(2, 5) if mapped else protocol(), meta]
        actions.append(add(f"region=r{v % 2}/f{v}", 100 + v, partition_values={key: f"r{v % 2}"}))
        log.commit(v, actions, mtime_ms=now - (30 - v) * DAY)
    rc, _, err = run("checkpoint", str(root), "--force")
    assert rc == 0, err
    if latest is not None:
        log.commit(12, [commit_info(), add("region=r0/f12", 112, partition_values=latest)], mtime_ms=now)
    return root


def wheel_reads(root: Path) -> bool:
    try:
        pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=True))
    except Exception:  # noqa: BLE001 - the wheel's refusal, in its words
        return False
    return True


UNKNOWN = {"renamed": ({"begion": "r0"}, "begion"), "extra": ({"region": "r0", "x": "1"}, "'x'")}
COMMANDS = [["inspect"], ["checkpoint", "--force"], ["compact-log", "--interval", "2"], ["cleanup", "--execute"]]


@pytest.mark.parametrize("tail", ["line-by-line", "columnar"])
@pytest.mark.parametrize("case", sorted(UNKNOWN))
def test_a_partition_value_for_a_column_the_table_lacks_stops_every_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, tail: str) -> None:
    if tail == "columnar":
        monkeypatch.setattr(tail_check, "SMALL_TAIL_BYTES", 0)
    values, needle = UNKNOWN[case]
    root = partitioned_table(tmp_path, values)
    assert not wheel_reads(root)
    before = listing(root)
    for command in COMMANDS:
        rc, out, err = run(command[0], str(root), *command[1:])
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (command, rc, out, err)
        assert "CorruptLogError" in err and "00000000000000000012.json: line 2" in err and needle in err, (command, err)
        assert "not a partition column" in err, err
    assert listing(root) == before, "nothing is written or deleted"


def test_a_missing_partition_value_is_null_and_the_table_reads_as_the_wheel_reads_it(tmp_path: Path) -> None:
    root = partitioned_table(tmp_path, {})
    assert wheel_reads(root)
    rc, out, err = run("inspect", str(root), "--json")
    assert rc == 0 and json.loads(out)["version"] == 12, err
    rc, out, err = run("cleanup", str(root), "--execute")
    assert rc == 0 and "deleted 11 files" in out, (out, err)


def test_column_mapping_keys_by_physical_name_and_an_unknown_key_is_refused(tmp_path: Path) -> None:
    root = partitioned_table(tmp_path, {"col-r": "r0"}, mapped=True)
    assert wheel_reads(root)
    rc, out, err = run("inspect", str(root), "--json")
    assert rc == 0 and json.loads(out)["version"] == 12, err
    bad = partitioned_table(tmp_path / "bad", {"col-q": "r0"}, mapped=True)
    assert not wheel_reads(bad)
    for command in (["inspect"], ["cleanup", "--execute"]):
        rc, out, err = run(command[0], str(bad), *command[1:])
        assert rc == 2 and "CorruptLogError" in err and "'col-q'" in err, (command, out, err)


@pytest.mark.parametrize("accel", ["off", "require"])
def test_the_installed_command_refuses_it_with_and_without_the_accelerators(tmp_path: Path, accel: str) -> None:
    root = partitioned_table(tmp_path, {"begion": "r0"})
    before = listing(root)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELTA_MAINTENANCE_ACCEL=accel)
    for command in (["inspect"], ["cleanup", "--execute"]):
        done = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), command[0], str(root), *command[1:]],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (command, done.stdout, done.stderr)
        assert "CorruptLogError" in done.stderr and "begion" in done.stderr, done.stderr
    assert listing(root) == before
