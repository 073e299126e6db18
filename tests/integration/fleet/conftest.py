from __future__ import annotations

from ..airflow_runs.conftest import airflow_home  # noqa: F401 - the migrated Airflow home fixture
