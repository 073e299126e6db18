"""What the CLI says to a person: durations in days/hours/seconds, never raw milliseconds, and the
flag to pass, never a Python argument name (driven through the installed command)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_delta_maintenance.deltalog.model.table_properties import human_duration

CLI = str(Path(sys.executable).with_name("delta-maintenance"))


@pytest.mark.parametrize(("ms", "text"), [(0, "0 seconds"), (1000, "1 second"), (90_000, "1.5 minutes"), (3_600_000, "1 hour"),
                                          (2_592_000_000, "30 days"), (4_262_284_368, "49.3 days"), (43_200_000, "12 hours")])
def test_human_duration(ms: int, text: str) -> None:
    assert human_duration(ms) == text


@pytest.mark.slow  # 1.2 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_cleanup_errors_name_durations_and_flags(tmp_path: Path) -> None:
    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "orders")
    assert subprocess.run([CLI, "create-table", uri, "--coordinator", spec], capture_output=True, timeout=300).returncode == 0
    short = subprocess.run([CLI, "cleanup", uri, "--coordinator", spec, "--retention-days", "0"], capture_output=True, text=True, timeout=300)
    assert short.returncode == 2, short.stderr
    assert "retention 0 seconds is shorter than the table's delta.logRetentionDuration (30 days)" in short.stderr, short.stderr
    assert "pass --allow-shorter-retention" in short.stderr and " ms" not in short.stderr, short.stderr
    future = subprocess.run([CLI, "cleanup", uri, "--coordinator", spec, "--now", "2099-01-01T00:00:00Z"], capture_output=True, text=True, timeout=300)
    assert future.returncode == 2 and "days later than the real clock; to plan with it pass --allow-future-now" in future.stderr, future.stderr
    assert " ms " not in future.stderr, future.stderr
