"""A real Airflow 3 deployment (api-server, scheduler, dag-processor, triggerer on 127.0.0.1) whose
DAGs folder holds the generated maintenance DAGs and a writer DAG: one table on ``schedule: asset``,
one on ``schedule: watch``, both in their coordinator endpoint's pool (created by
``delta-maintenance pools --apply``). Stopped by PID at the end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._infra.servers import free_port
from tests.integration.ui.conftest import EXAMPLE_DAGS, PASSWORD, USER, Deployment, deployment_env, make_table, migrate, running_components

from ..airflow_runs.conftest import airflow_home  # noqa: F401 - the migrated Airflow home fixture (the fleet health tests)

HERE = Path(__file__).resolve().parent
ASSET_DAG, WATCH_DAG = "delta_maintenance__asset_orders", "delta_maintenance__watch_orders"


@pytest.fixture(scope="session")
def fleet_deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("fleet")
    home, dags = root / "airflow", root / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(EXAMPLE_DAGS / "delta_maintenance.py", dags / "delta_maintenance.py")
    shutil.copy(HERE / "writer_dag.py", dags / "fleet_writer.py")
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    tables = {}
    for name in ("asset_orders", "watch_orders"):
        tables[f"delta_maintenance__{name}"] = make_table(root, name, 0)  # version 0 only
    spec = tables[ASSET_DAG][1]
    config = root / "tables.yaml"
    config.write_text(
        "defaults:\n"
        f"  coordinator: {spec}\n"
        "  checkpoint: {interval: 2, engine: local}\n"
        "  compaction: false\n"
        "  cleanup: {mode: dry-run}\n"
        "  pool: auto\n"
        "  pool_slots: 4\n"
        "  rate_limit: {calls_per_second: 5}\n"
        "tables:\n"
        f"  - {{name: asset_orders, uri: '{tables[ASSET_DAG][0]}', schedule: asset}}\n"
        f"  - {{name: watch_orders, uri: '{tables[WATCH_DAG][0]}', schedule: watch, sensor: {{min_new_commits: 2, poke_interval_seconds: 3}}}}\n"
    )
    port = free_port()
    env = deployment_env(
        home, dags, port, "fleet-test-only-secret",
        DELTA_MAINTENANCE_CONFIG=str(config),
        FLEET_E2E_ASSET_TABLE=tables[ASSET_DAG][0],
        FLEET_E2E_SPEC=spec,
    )
    migrate(env)
    # the pools of the tables' coordinator endpoint, as a user creates them before deploying
    created = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "pools", str(config), "--apply", "--json"],
                             env=env, capture_output=True, text=True, timeout=600)
    assert created.returncode == 0, created.stdout + created.stderr
    with running_components(env, port, root) as url:
        deployment = Deployment(url, home, tables, root)
        for dag_id in [*tables, "fleet_writer"]:
            deployment.wait_for_dag(dag_id)
        yield deployment
