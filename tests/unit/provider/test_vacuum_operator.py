"""DeltaVacuumOperator as a DAG author writes it: templated retention, dry run by default, the
retention gate as a task failure, and min_interval's not-due skip."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowSkipException

from airflow_delta_maintenance.operators.vacuum import DeltaVacuumOperator
from tests.unit.maintenance.test_vacuum import age_data, wheel_table


def test_dry_run_by_default_then_delete_with_a_templated_retention(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root)
    (root / "stray.parquet").write_bytes(b"x")
    age_data(root, 10)
    op = DeltaVacuumOperator(task_id="vacuum", table_uri=str(root), retention_hours="{{ params.h }}")
    for name in op.template_fields:
        assert hasattr(op, name), name
    op.retention_hours = "0"  # as rendered: hours
    with pytest.raises(AirflowException, match="RetentionTooShortError"):
        op.execute({})
    op.retention_hours, op.allow_shorter_retention = "0", True
    record = op.execute({})
    assert record["dry_run"] and not record["executed"] and record["count"] == 5 and (root / "stray.parquet").exists()
    op.retention_hours, op.dry_run = "200h", "false"  # type: ignore[assignment,method-assign]
    record = op.execute({})
    assert record["executed"] and record["count"] == 1 and record["retention_hours"] == 200
    assert not (root / "stray.parquet").exists()


def test_min_interval_skips_until_due(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root, versions=1)
    op = DeltaVacuumOperator(task_id="vacuum", table_uri=str(root), min_interval="7d")
    recent: Any = {"prev_start_date_success": datetime.now(timezone.utc) - timedelta(days=2)}
    with pytest.raises(AirflowSkipException, match=r"min_interval is 168\.0 h"):
        op.execute(recent)
    due: Any = {"prev_start_date_success": datetime.now(timezone.utc) - timedelta(days=8)}
    assert op.execute(due)["count"] == 0
    assert op.execute({})["count"] == 0  # never ran: due
