"""A real Airflow 3 deployment for UI and REST tests: api-server, scheduler, dag-processor and
triggerer started separately on 127.0.0.1 (not ``airflow standalone``, which listens on all
interfaces), SimpleAuthManager with a known password, stopped by PID at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from tests._infra.servers import free_port, stop, wait_for_port
from tests.integration.airflow_runs.conftest import EXAMPLE_DAGS, REPO, airflow_env  # noqa: F401 - EXAMPLE_DAGS: the fleet tests import it from here

USER, PASSWORD = "admin", "ui-test-password"
INVALID_DAG = "delta_maintenance__broken"
FLEET_DAG = "delta_maintenance_fleet_health"


def deployment_env(home: Path, dags: Path, port: int, secret: str, *, paused_at_creation: bool = False, **extra: str) -> dict[str, str]:
    """The environment of an Airflow deployment on 127.0.0.1:``port`` (LocalExecutor, simple auth
    manager, DAGs unpaused unless ``paused_at_creation`` (Airflow's default), quick DAG-file
    refresh) for the components a test starts."""
    return airflow_env(
        home,
        dags,
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=str(paused_at_creation).lower(),
        AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"),
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}",
        AIRFLOW__API_AUTH__JWT_SECRET=secret,
        AIRFLOW__API__SECRET_KEY=secret,
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
        **extra,
    )


def migrate(env: dict[str, str]) -> None:
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], env=env, check=True, capture_output=True, timeout=900)


@contextmanager
def running_components(env: dict[str, str], port: int, logs: Path) -> Iterator[str]:
    """api-server (on 127.0.0.1:``port``), scheduler, dag-processor and triggerer, each logging to
    ``logs/<name>.log``; yields the api-server's URL once it listens, stops them all by PID after."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    commands = {
        "api-server": [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port)],
        "scheduler": [airflow, "scheduler", "--skip-serve-logs"],
        "dag-processor": [airflow, "dag-processor"],
        "triggerer": [airflow, "triggerer", "--skip-serve-logs"],
    }
    procs = []
    try:
        for name, cmd in commands.items():
            with open(logs / f"{name}.log", "wb") as log:  # the process holds its own descriptor
                procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        wait_for_port(port, procs[0], 600, logs / "api-server.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        for proc in procs:
            stop(proc)

@dataclass
class Deployment:
    url: str
    home: Path
    tables: dict[str, tuple[str, str]]  # DAG id -> (table URI, coordinator spec)
    artifacts: Path

    def token(self) -> str:
        req = urllib.request.Request(f"{self.url}/auth/token", data=json.dumps({"username": USER, "password": PASSWORD}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())["access_token"]

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(f"{self.url}/api/v2{path}", data=json.dumps(body).encode() if body is not None else None, method=method,
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token()}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read() or b"{}")

    # Deadlines are generous (the machine may be busy); polling stops as soon as the condition holds.
    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(2)
        raise AssertionError(f"{dag_id}/{run_id} did not finish in {timeout}s")

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def wait_for_dag(self, dag_id: str, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api("GET", f"/dags/{dag_id}")
                return
            except urllib.error.HTTPError:
                time.sleep(2)
        raise AssertionError(f"{dag_id} was not parsed in {timeout}s")


def make_table(root: Path, name: str, commits: int) -> tuple[str, str]:
    spec, uri = f"local://{root}/coordinator.db", str(root / "tables" / name)
    client = open_coordinator(spec + "?create=true")  # the DAGs' spec requires it to exist
    client.commit(uri, 0, create_actions(ict=True))
    for v in range(1, commits + 1):
        client.commit(uri, v, [add_action_for(uri, data_batch(v * 10, 10, "emea"), "emea")])
    return uri, spec


def init_dags(directory: Path) -> Path:
    """The DAGs folder as a new user makes it: ``delta-maintenance init-dags DIR``, deployed as is."""
    cli = Path(sys.executable).with_name("delta-maintenance")
    subprocess.run([str(cli), "init-dags", str(directory)], check=True, capture_output=True, timeout=300)
    return directory


@pytest.fixture(scope="session")
def airflow_deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("ui")
    home = root / "airflow"
    home.mkdir()
    dags = init_dags(root / "dags")
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    tables = {}
    lines = ["defaults:", "  schedule: null  # manual runs only", "  sensor: {min_new_commits: 1, timeout_minutes: 2, poke_interval_seconds: 5}", "  checkpoint: {interval: 5, engine: local}",
             "  compaction: {interval: 5}", "tables:"]
    for name, commits, extra in (
        ("ui_orders", 12, []),
        ("api_orders", 12, []),
        # nothing to wait for: its reschedule-mode sensor pokes on (every 20 s: with 5 s, a busy machine's
        # scheduler may queue the next poke before it has processed the last one's end, and Airflow retries it)
        ("quiet_orders", 0, ["    sensor: {poke_interval_seconds: 20}"]),
        # on a schedule, paused: a manual run is triggered as the form offers it ("Unpause on trigger" ticked)
        ("scheduled_orders", 8, ["    schedule: '@hourly'", "    checkpoint: {interval: 100, engine: local}"]),
    ):
        uri, spec = make_table(root, name, commits)
        tables[f"delta_maintenance__{name}"] = (uri, spec)
        lines += [f"  - name: {name}", f"    uri: {uri}", f"    coordinator: {spec}", *extra]
    # an invalid table: it must get its own failing placeholder DAG and hide nothing else
    lines += ["  - name: broken", "    uri: /nowhere/broken", "    schedule: every hour"]
    (root / "tables.yaml").write_text("\n".join(lines) + "\n")
    port = free_port()
    env = deployment_env(
        home, dags, port, "ui-test-only-secret", paused_at_creation=True,  # Airflow's default
        AIRFLOW__CORE__TEST_CONNECTION="Enabled",  # the connection form's Test button
        DELTA_MAINTENANCE_CONFIG=str(root / "tables.yaml"),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    migrate(env)
    with running_components(env, port, root) as url:
        deployment = Deployment(url, home, tables, REPO / "test-artifacts")
        deployment.artifacts.mkdir(exist_ok=True)
        for dag_id in [*tables, INVALID_DAG, FLEET_DAG]:
            deployment.wait_for_dag(dag_id)
        yield deployment
