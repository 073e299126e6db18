"""The Airflow side of the fleet health view: the notifier's targets, the UI plugin's page and its
registration, the listener that records task successes."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from airflow_delta_maintenance.fleet.history import read_last_success
from airflow_delta_maintenance.notifications.health import ALERTS_KEY, DeltaHealthNotifier


def task_context(alerts: list[Any]) -> dict[str, Any]:
    """What the health task hands its notifiers: Airflow's task context (its DAG among it) and the
    alerts (operators/fleet_report.py)."""
    from airflow_delta_maintenance.version_compat import DAG

    return {"dag": DAG(dag_id="delta_fleet_health", schedule=None), ALERTS_KEY: alerts}


ALERT = {"table": "orders", "table_uri": "s3://lake/orders", "figure": "pending_commits", "value": 30, "threshold": 10}


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[int, list[tuple[str, dict[str, Any]]]]]:
    _Receiver.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], _Receiver.received
    server.shutdown()
    server.server_close()


def test_notifier_posts_to_the_connection_url_and_never_logs_it(
    receiver: tuple[int, list[Any]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    port, received = receiver
    monkeypatch.setenv("AIRFLOW_CONN_ALERTS_PARTS", json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": port, "extra": {"path": "/a/b"}}))
    monkeypatch.setenv("AIRFLOW_CONN_ALERTS_SECRET", json.dumps({"conn_type": "http", "password": f"http://127.0.0.1:{port}/services/T0/SECRET"}))
    DeltaHealthNotifier(webhook_conn_id="alerts_parts")(task_context([ALERT]))
    with caplog.at_level("INFO"):
        DeltaHealthNotifier(webhook_conn_id="alerts_secret")(task_context([ALERT]))
    assert [path for path, _ in received] == ["/a/b", "/services/T0/SECRET"]
    body = received[0][1]
    assert body["alerts"] == [ALERT] and "orders (s3://lake/orders): pending commits is 30, above its threshold 10" in body["text"]
    logged = caplog.text + "".join(capsys.readouterr())  # Airflow's structlog writes to stdout
    assert "SECRET" not in logged and "alerts_secret" in logged and "orders" in logged
    DeltaHealthNotifier(webhook_conn_id="alerts_parts")(task_context([]))  # nothing crossed: nothing sent
    assert len(received) == 2


def test_notifier_without_a_connection_logs_only(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level("WARNING"):
        DeltaHealthNotifier()(task_context([ALERT]))
    assert "1 threshold crossing(s)" in caplog.text + "".join(capsys.readouterr())


@pytest.mark.slow  # 1.1 CPU s: make test runs it; the fast tier (plain pytest) stays under two minutes
def test_plugin_page_serves_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from airflow_delta_maintenance.plugins.fleet_health import (
        DeltaFleetHealthPlugin,
        create_app,
    )

    monkeypatch.setenv("DELTA_MAINTENANCE_REPORT_DIR", str(tmp_path))
    assert TestClient(create_app()).get("/report").status_code == 401  # no session cookie, no token
    client = TestClient(create_app(require_auth=False))
    assert client.get("/report").status_code == 404
    (tmp_path / "report.html").write_text("<html>fleet</html>")
    (tmp_path / "report.json").write_text('{"tables": []}')
    page = client.get("/report")
    assert page.status_code == 200 and page.text == "<html>fleet</html>" and page.headers["content-type"].startswith("text/html")
    assert client.get("/report.json").json() == {"tables": []}
    [app] = DeltaFleetHealthPlugin.fastapi_apps
    [view] = DeltaFleetHealthPlugin.external_views
    assert app["url_prefix"] == "/delta-maintenance" and view["href"] == "/delta-maintenance/report"


def test_plugin_is_found_by_airflow_through_its_entry_point() -> None:
    try:
        from airflow.sdk._shared.plugins_manager import _load_entrypoint_plugins
    except ImportError:  # Airflow 3.0/3.1: the core's plugins manager
        from airflow import plugins_manager

        plugins_manager.ensure_plugins_loaded()
        plugins, errors = plugins_manager.plugins or [], plugins_manager.import_errors
    else:
        plugins, errors = _load_entrypoint_plugins()
    assert "delta_maintenance_fleet_health" in {p.name for p in plugins}, errors


def test_listener_records_maintenance_task_successes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    from airflow_delta_maintenance.plugins import run_recorder

    monkeypatch.setenv("DELTA_MAINTENANCE_REPORT_DIR", str(tmp_path))
    end = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    run_recorder.on_task_instance_success(None, SimpleNamespace(dag_id="delta_maintenance__orders", task_id="publish", run_id="r1", end_date=end))
    run_recorder.on_task_instance_success(None, SimpleNamespace(dag_id="other_dag", task_id="publish", run_id="r1", end_date=end))
    # a hostile task id is refused (logged), never written outside the directory, never raised
    run_recorder.on_task_instance_success(None, SimpleNamespace(dag_id="delta_maintenance__orders", task_id="../../x", run_id="r1", end_date=end))
    assert read_last_success(tmp_path) == {"orders": {"publish": "2026-01-02T03:04:05+00:00"}}


def test_fleet_opener_reads_each_connection_once_for_the_whole_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_delta_maintenance.demo.sample_table import create_actions
    from airflow_delta_maintenance.fleet.status import fleet_status
    from airflow_delta_maintenance.hooks.coordinator import DeltaCoordinatorHook
    from airflow_delta_maintenance.maintenance.config.tables import parse_config
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
    from airflow_delta_maintenance.operators.fleet_report import ConfiguredTableOpener

    spec = f"local://{tmp_path}/c.db"
    client = open_coordinator(spec + "?create=true")
    names = [f"t{i}" for i in range(6)]
    for i, name in enumerate(names):
        uri = str(tmp_path / name)
        client.commit(uri, 0, create_actions(ict=True))
        for v in range(1, i + 1):
            client.commit(uri, v, [{"add": {"path": f"f{v}", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}])
    client.close()
    monkeypatch.setenv("AIRFLOW_CONN_FLEET_COORD", json.dumps({"conn_type": "delta_coordinator", "host": spec}))
    reads: list[str] = []
    original = DeltaCoordinatorHook.get_connection.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, conn_id: str) -> Any:
        reads.append(conn_id)
        return original(cls, conn_id)

    monkeypatch.setattr(DeltaCoordinatorHook, "get_connection", classmethod(counted))
    tables = parse_config({"defaults": {"coordinator_conn_id": "fleet_coord", "health": {"max_pending_commits": 3}},
                           "tables": [{"name": n, "uri": str(tmp_path / n)} for n in names]})
    parallel = fleet_status(tables, ConfiguredTableOpener(), parallelism=4)
    assert reads == ["fleet_coord"]
    assert [h.name for h in parallel] == ["t5", "t4", "t3", "t2", "t1", "t0"]  # 5, 4, 3... pending commits
    assert [len(h.status.pending_versions) for h in parallel if h.status] == [5, 4, 3, 2, 1, 0]
    serial = fleet_status(tables, ConfiguredTableOpener(), parallelism=1)
    assert [h.to_dict() for h in serial] == [h.to_dict() for h in parallel]


@pytest.mark.slow  # an Airflow process of its own (3.6 s CPU): make test runs it, the fast tier does not
def test_loading_the_plugin_in_a_task_process_stays_cheap() -> None:
    """Every task process loads the entry-point plugins (for the listener): the plugin must not
    import the api-server's app (seconds) nor the log library (pyarrow) until they are needed."""
    import subprocess
    import sys

    code = (
        "import sys, airflow.sdk\n"
        "import airflow_delta_maintenance.plugins.fleet_health as m\n"
        "print(sorted(n for n in ('airflow.api_fastapi.app', 'fastapi', 'pyarrow') if n in sys.modules))\n"
        "m.DeltaFleetHealthPlugin().fastapi_apps\n"
        "print('airflow.api_fastapi.core_api.security' in sys.modules)\n"
    )
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    out = [line for line in printed if not re.match(r"\[\d{4}-", line)]  # not Airflow 3.0's log lines (its plugins' setup, to stdout)
    assert out[0] == "[]" and out[1] == "True", out


def test_fleet_dag_builds_without_reading_the_configuration(tmp_path: Path) -> None:
    from airflow_delta_maintenance.dag_builders.health_dag import FLEET_DAG_ID, build_fleet_dag
    from airflow_delta_maintenance.operators.fleet_report import DeltaFleetReportOperator

    notifier = DeltaHealthNotifier()
    dag = build_fleet_dag(tmp_path / "not-there-yet.yaml", report_dir=tmp_path / "r", schedule=None, notifiers=[notifier])
    assert dag.dag_id == FLEET_DAG_ID and dag.max_active_runs == 1 and not dag.catchup
    [task] = dag.tasks
    assert isinstance(task, DeltaFleetReportOperator) and task.notifiers == [notifier] and task.report_dir == str(tmp_path / "r")
