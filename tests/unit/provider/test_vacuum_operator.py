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


class _TaskXComs:
    """A task instance's XComs across runs, as include_prior_dates sees them (newest wins)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.values[key] = value

    def xcom_pull(self, task_ids: str, key: str, include_prior_dates: bool = False) -> Any:
        assert include_prior_dates and task_ids == "vacuum"
        return self.values.get(key)


def test_min_interval_measures_from_this_tasks_last_work_not_the_last_dag_run(tmp_path: Path) -> None:
    root = tmp_path / "t"
    wheel_table(root, versions=1)
    op = DeltaVacuumOperator(task_id="vacuum", table_uri=str(root), min_interval="7d")
    ti = _TaskXComs()
    assert op.execute({"ti": ti})["count"] == 0  # never ran: due, and the work is recorded
    # an hour later: the previous DAG run succeeded an hour ago and so did this task's work
    with pytest.raises(AirflowSkipException, match=r"min_interval is 168\.0 h"):
        op.execute({"ti": ti, "prev_start_date_success": datetime.now(timezone.utc) - timedelta(hours=1)})
    # eight days on, hourly DAG runs all succeeded (the previous one an hour ago; old code: skipped
    # forever), but this task last worked eight days ago: due
    ti.values["last_work_at"] = (datetime.now(timezone.utc) - timedelta(days=8)).isoformat()
    assert op.execute({"ti": ti, "prev_start_date_success": datetime.now(timezone.utc) - timedelta(hours=1)})["count"] == 0
    assert op.execute({})["count"] == 0  # no task instance (a direct call): due
