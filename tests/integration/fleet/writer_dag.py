"""A writer DAG as a user writes one: its task commits to the table through the embedded
coordinator and declares the table's asset as an outlet (copied into the test's DAGs folder)."""

from __future__ import annotations

import os
from datetime import datetime, timezone

from airflow.sdk import DAG, task

from airflow_delta_maintenance.assets.table import table_asset

URI = os.environ.get("FLEET_E2E_ASSET_TABLE")
SPEC = os.environ.get("FLEET_E2E_SPEC")

if URI and SPEC:
    with DAG("fleet_writer", schedule=None, start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), catchup=False, tags=["e2e"]):

        @task(outlets=[table_asset(URI)])
        def commit_orders() -> int:
            from airflow_delta_maintenance.demo.sample_table import add_action_for, data_batch
            from airflow_delta_maintenance.maintenance.table.maintained import open_table

            with open_table(URI, coordinator=SPEC) as table:
                latest = table.latest_ratified_version()
                for v in range(latest + 1, latest + 4):
                    table.commit(v, [add_action_for(URI, data_batch(v * 10, 10, "emea"), "emea")])
            return latest + 3

        commit_orders()
