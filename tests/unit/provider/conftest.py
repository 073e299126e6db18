from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_delta_maintenance.demo.sample_table import create_actions
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {"region": "x"}, "size": 10, "modificationTime": 1, "dataChange": True}}


@pytest.fixture
def coordinated_table(tmp_path: Path) -> tuple[str, str]:
    """A table on the embedded coordinator with versions 1..12 ratified and unpublished."""
    spec, uri = f"local://{tmp_path}/coordinator.db?create=true", str(tmp_path / "table")
    client = open_coordinator(spec)
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, 13):
        client.commit(uri, v, [add(f"f{v}")])
    return spec, uri
