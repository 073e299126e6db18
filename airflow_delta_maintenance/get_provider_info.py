"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

Returns a plain dict and imports nothing, as Airflow's provider manager expects.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-delta-maintenance",
        "name": "Delta Lake log maintenance",
        "description": "Delta Lake log maintenance for coordinated and catalog-managed tables: "
        "ratified-version sensor, ordered publishing, checkpoints, log compaction and "
        "retention-gated metadata cleanup.",
        "versions": ["0.1.0"],
    }
