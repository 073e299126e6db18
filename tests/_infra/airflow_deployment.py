"""One real Airflow 3 deployment per session for the UI and fleet tests (tests/integration/ui,
tests/integration/fleet): api-server, scheduler, dag-processor and triggerer started separately on
127.0.0.1 (not ``airflow standalone``, which listens on all interfaces), SimpleAuthManager with a
known password, stopped by PID at the end; and the migrated Airflow home of the ``dag.test()`` runs.

Each Airflow start costs a DB migration and four components' start-up (about a minute of CPU on a
busy machine, more in wall): the UI tests and the fleet tests (``schedule: asset`` / ``watch``)
share one deployment, each on DAGs of their own (their own tables, coordinators and DAG ids), and
the tests that use it run one after the other (``pytest_collection_modifyitems``) and it is stopped
after the last of them, not kept running while unrelated tests run. A plugin (not a conftest) so that there is one instance of
each fixture in the session: a fixture imported into two conftests is two fixtures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._infra.servers import free_port, stop, wait_for_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "dags"  # the deployable DAG files: what the wheel ships and `delta-maintenance init-dags` copies
FLEET_DIR = REPO / "tests" / "integration" / "fleet"
DEPLOYMENT_FIXTURES = ("airflow_deployment", "fleet_deployment")


def airflow_env(home: Path, dags: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="false",
        AIRFLOW__CORE__UNIT_TEST_MODE="false",
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated Airflow home (SQLite metadata DB) for dag.test() runs in subprocesses."""
    home = tmp_path_factory.mktemp("airflow-home")
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], env=airflow_env(home, EXAMPLE_DAGS), check=True, capture_output=True, timeout=900)
    return home


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
        # SQLite lets one writer in at a time; four components and the UI write. With sqlite3's
        # default busy timeout (5 s) a write that waits longer on a busy machine fails ("database is
        # locked"): the UI's unpause on trigger did, and its run stayed queued.
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db?timeout=60",
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
        deadline, run = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(2)
        raise AssertionError(f"{dag_id}/{run_id} did not finish in {timeout}s: {run.get('state')}; {self.task_states(dag_id, run_id)}; "
                             f"component logs kept in {self.keep_logs()}")

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> str:
        """The log of the task's current try (reschedules stay in one try; a retry logs afresh), as
        JSON text; "" while the task has not started."""
        try:
            tries = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")["try_number"] or 1
            return json.dumps(self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{tries}?full_content=true"),
                              ensure_ascii=False)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return ""
            raise

    def task_states(self, dag_id: str, run_id: str) -> str:
        """The run's task instances, one ``task=state#try (start..end)`` each: what a stuck run waits on."""
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100")["task_instances"]
        return ", ".join(f"{ti['task_id']}={ti['state']}#{ti['try_number']} ({ti.get('start_date')}..{ti.get('end_date')})" for ti in tis)

    def keep_logs(self) -> Path:
        """The components' logs and the task logs, copied where a CI run keeps its artifacts."""
        kept = self.artifacts / "airflow-deployment-logs"
        for log in self.home.parent.glob("*.log"):
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, kept / log.name)
        if (self.home / "logs").is_dir():
            shutil.copytree(self.home / "logs", kept / "task-logs", dirs_exist_ok=True)
        return kept

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

    def wait_for_watcher(self, uri: str, timeout: float = 600) -> None:
        """Until the asset ``uri`` has its watcher (a trigger the triggerer runs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(a["uri"] == uri and a["watchers"] for a in self.api("GET", "/assets?limit=100")["assets"]):
                return
            time.sleep(2)
        raise AssertionError(f"the asset {uri} had no watcher after {timeout}s")


def make_table(root: Path, name: str, commits: int) -> tuple[str, str]:
    from airflow_delta_maintenance.demo.sample_table import add_action_for, create_actions, data_batch
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

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



UI_TABLES: tuple[tuple[str, int, list[str]], ...] = (
    ("ui_orders", 12, []),
    ("api_orders", 12, []),
    # nothing to wait for: its reschedule-mode sensor pokes on (every 20 s: with 5 s, a busy machine's
    # scheduler may queue the next poke before it has processed the last one's end, and Airflow retries it)
    ("quiet_orders", 0, ["    sensor: {poke_interval_seconds: 20}"]),
    # on a schedule, paused: a manual run is triggered as the form offers it ("Unpause on trigger" ticked)
    ("scheduled_orders", 8, ["    schedule: '@hourly'", "    checkpoint: {interval: 100, engine: local}"]),
)
ASSET_DAG, WATCH_DAG, WRITER_DAG = "delta_maintenance__asset_orders", "delta_maintenance__watch_orders", "fleet_writer"
# The fleet tables' settings (what their own deployment's defaults were): their own coordinator, in its
# endpoint's pool (created by `delta-maintenance pools --apply`), one on `schedule: asset`, one on `watch`.
FLEET_TABLE = ("    checkpoint: {interval: 2, engine: local}\n    compaction: false\n    cleanup: {mode: dry-run}\n"
               "    pool: auto\n    pool_slots: 4\n    rate_limit: {calls_per_second: 5}\n")


@contextmanager
def _deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The DAGs folder as a new user makes it (``delta-maintenance init-dags``) plus a writer DAG;
    tables.yaml: the UI tests' tables (manual runs only, Airflow's default of DAGs paused at
    creation), an invalid table (its own failing placeholder DAG that hides nothing else), and the
    fleet tests' two tables (unpaused here, as the fleet tests' deployment created them)."""
    root = tmp_path_factory.mktemp("airflow-deployment")
    home = root / "airflow"
    home.mkdir()
    dags = init_dags(root / "dags")
    shutil.copy(FLEET_DIR / "writer_dag.py", dags / "fleet_writer.py")
    (home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
    tables = {}
    # A task Airflow loses on a busy machine (its LocalExecutor's worker reporting a queued task
    # failed, or never starting it) comes back by a retry; with the defaults (5 min delay, 10 min
    # task_queued_timeout below) that recovery alone took a test's whole 15 min deadline.
    lines = ["defaults:", "  schedule: null  # manual runs only", "  sensor: {min_new_commits: 1, timeout_minutes: 2, poke_interval_seconds: 5}", "  checkpoint: {interval: 5, engine: local}",
             "  compaction: {interval: 5}", "  retry_delay_minutes: 0.5", "tables:"]
    for name, commits, extra in UI_TABLES:
        uri, spec = make_table(root, name, commits)
        tables[f"delta_maintenance__{name}"] = (uri, spec)
        lines += [f"  - name: {name}", f"    uri: {uri}", f"    coordinator: {spec}", *extra]
    lines += ["  - name: broken", "    uri: /nowhere/broken", "    schedule: every hour"]
    fleet_root = root / "fleet"
    for name, schedule in (("asset_orders", "schedule: asset"), ("watch_orders", "schedule: watch\n    sensor: {min_new_commits: 2, poke_interval_seconds: 3}")):
        uri, spec = make_table(fleet_root, name, 0)  # version 0 only
        tables[f"delta_maintenance__{name}"] = (uri, spec)
        lines += [f"  - name: {name}", f"    uri: '{uri}'", f"    coordinator: {spec}", f"    {schedule}", FLEET_TABLE.rstrip("\n")]
    config = root / "tables.yaml"
    config.write_text("\n".join(lines) + "\n")
    port = free_port()
    env = deployment_env(
        home, dags, port, "ui-test-only-secret", paused_at_creation=True,  # Airflow's default
        AIRFLOW__CORE__TEST_CONNECTION="Enabled",  # the connection form's Test button
        AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT="240",  # a queued task no worker took is queued again (see the defaults above)
        DELTA_MAINTENANCE_CONFIG=str(config),
        FLEET_E2E_ASSET_TABLE=tables[ASSET_DAG][0],  # the writer DAG's table
        FLEET_E2E_SPEC=tables[ASSET_DAG][1],
    )
    migrate(env)
    # the pools of the fleet tables' coordinator endpoint, as a user creates them before deploying
    created = subprocess.run([str(Path(sys.executable).with_name("delta-maintenance")), "pools", str(config), "--apply", "--json"],
                             env=env, capture_output=True, text=True, timeout=600)
    assert created.returncode == 0, created.stdout + created.stderr
    with running_components(env, port, root) as url:
        deployment = Deployment(url, home, tables, REPO / "test-artifacts")
        deployment.artifacts.mkdir(exist_ok=True)
        for dag_id in [*tables, INVALID_DAG, FLEET_DAG, WRITER_DAG]:
            deployment.wait_for_dag(dag_id)
        for dag_id in (ASSET_DAG, WATCH_DAG, WRITER_DAG):
            deployment.unpause(dag_id)
        # a paused DAG's asset has no watcher: the dag-processor adds it at its next parse after the unpause
        deployment.wait_for_watcher(f"file://{tables[WATCH_DAG][0]}")
        # and its first poll done, so that the fleet test's "one commit fires nothing" is polled
        deadline, started = time.monotonic() + 600, f"{tables[WATCH_DAG][0]}: latest ratified 0"
        while started not in (root / "triggerer.log").read_text(errors="replace"):
            assert time.monotonic() < deadline, "the watcher did not poll the table"
            time.sleep(1)
        yield deployment


class _Running:
    """The shared deployment while it runs: started by the first test that asks for it, stopped
    right after the last one of the run of tests that use it (``pytest_runtest_teardown``), not at
    the end of the session: its four components would otherwise keep running (and burn CPU)
    through every later test of ``make test``."""

    stack: ExitStack | None = None
    deployment: Deployment | None = None
    failed: BaseException | None = None  # a start that failed fails the other tests too, not started again

    @classmethod
    def get(cls, tmp_path_factory: pytest.TempPathFactory) -> Deployment:
        if cls.failed is not None:
            raise cls.failed
        if cls.deployment is None:
            cls.stack = ExitStack()
            try:
                cls.deployment = cls.stack.enter_context(_deployment(tmp_path_factory))
            except BaseException as exc:
                cls.failed = exc
                cls.stop()
                raise
        return cls.deployment

    @classmethod
    def stop(cls) -> None:
        stack, cls.stack, cls.deployment = cls.stack, None, None
        if stack is not None:
            stack.close()


@pytest.fixture
def airflow_deployment(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return _Running.get(tmp_path_factory)


@pytest.fixture
def fleet_deployment(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return _Running.get(tmp_path_factory)


def _uses_deployment(item: pytest.Item | None) -> bool:
    return item is not None and any(f in getattr(item, "fixturenames", ()) for f in DEPLOYMENT_FIXTURES)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _uses_deployment(item) and not _uses_deployment(nextitem):
        _Running.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _Running.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests on the shared deployment run one after the other, where the first of them is."""
    users = [i for i in items if _uses_deployment(i)]
    if len(users) < 2:
        return
    first = items.index(users[0])
    chosen = set(map(id, users))
    rest = [i for i in items if id(i) not in chosen]
    items[:] = rest[:first] + users + rest[first:]
