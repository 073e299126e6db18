"""dag.test() of a generated DAG with a ``vacuum:`` section, as a user configures it: the task
deletes what no retained version needs, logs its summary line, returns its record, and the next
run skips it (not due: weekly by default)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import deltalake
import pytest

from tests.unit.maintenance.test_vacuum import age_data, every_version, wheel_table

from .dag_runner import DagRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_the_vacuum_task_deletes_unreferenced_files_then_is_not_due(dag_runner: Callable[[Path], DagRunner], tmp_path: Path) -> None:
    root = tmp_path / "table"
    wheel_table(root)
    (root / "stray.parquet").write_bytes(b"x")
    (root / "p=a" / "in-flight.parquet").write_bytes(b"young")
    age_data(root, 10)
    (root / "p=a" / "in-flight.parquet").touch()
    before = every_version(root)
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"tables:\n  - name: events\n    uri: {root}\n    publish: false\n    checkpoint: false\n    compaction: false\n"
        "    vacuum: {dry_run: false}\n"
    )
    runner = dag_runner(config)  # both runs in one Airflow process
    first, logs = runner.run()
    assert first["state"] == "success" and first["tasks"]["vacuum"] == "success", first
    record = first["xcom"]["vacuum"]
    assert record["count"] == 1 and record["executed"] and not record["dry_run"] and record["version"] == 2, record
    assert "vacuum: deleted 1 file (1 bytes); FULL, retention 168 h, v2" in logs, logs[-5000:]
    assert not (root / "stray.parquet").exists() and (root / "p=a" / "in-flight.parquet").exists()
    assert every_version(root, end=2) == before
    head = deltalake.DeltaTable(str(root)).version()
    second, logs = runner.run()
    assert second["tasks"]["vacuum"] == "skipped" and "min_interval is 168.0 h" in logs, second
    assert deltalake.DeltaTable(str(root)).version() == head
