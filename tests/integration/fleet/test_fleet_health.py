"""The fleet health view end to end: a fleet of four tables on the embedded coordinator, one
lagging (30 ratified commits unpublished, 41 commits and no checkpoint) and one unreadable.

- ``delta-maintenance status --config`` shows the lagging table first, with exact figures;
- the packaged fleet DAG (dag.test(), twice) writes the report; its notifier posts once to a
  webhook on 127.0.0.1 (the second run is still above the thresholds: no new crossing);
- Airflow's StatsD client sends the gauges to a UDP listener on 127.0.0.1 with the right values;
- headless Chromium renders report.html with the lagging table's row first; screenshot kept.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from airflow_delta_maintenance.cli import main as cli_main
from airflow_delta_maintenance.maintenance.operations.log_cleanup import run_metadata_cleanup
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator
from airflow_delta_maintenance.maintenance.table.maintained import open_table

from ..airflow_runs.conftest import REPO, airflow_env
from .fleet import (
    MAX_PENDING,
    MAX_SINCE_CHECKPOINT,
    Fleet,
    add,
    build_fleet,
    log_dir_size,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

EXAMPLE_DAGS = REPO / "dags"
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


def test_status_config_shows_the_lagging_table_first_with_exact_figures(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["status", "--config", str(fleet.config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    tables = report["tables"]
    assert [t["name"] for t in tables] == ["orders", "missing", "events", "customers"]
    orders = tables[0]
    files, size = log_dir_size(fleet.uris["orders"])
    assert orders["pending_commits"] == 30 and orders["pending_versions"] == list(range(41, 71))
    assert orders["latest_ratified_version"] == 70 and orders["latest_published_version"] == 40
    assert orders["checkpoint_version"] == -1 and orders["commits_since_checkpoint"] == 41  # versions 0..40, none checkpointed
    assert (orders["log_files"], orders["log_bytes"]) == (files, size)
    assert orders["breaches"] == ["pending_commits", "commits_since_checkpoint"]
    assert orders["lag_score"] == pytest.approx(max(30 / MAX_PENDING, 41 / MAX_SINCE_CHECKPOINT))
    assert orders["compaction_covered_commits"] == 0 and orders["problems"] == []
    assert orders["last_success"] == dict.fromkeys(("wait_for_ratified_commits", "publish", "compact_log", "checkpoint", "cleanup"))
    # cleanup candidates come from the planner, nothing deleted
    with open_table(fleet.uris["customers"], coordinator=fleet.spec) as table:
        plan = run_metadata_cleanup(table, dry_run=True).plan
    customers = tables[3]
    assert (customers["cleanup_candidates"], customers["cleanup_bytes"], customers["cleanup_skipped_reason"]) == (
        len(plan.deletions), plan.bytes, plan.skip_reason)
    assert customers["checkpoint_version"] == 10 and customers["commits_since_checkpoint"] == 2 and customers["pending_commits"] == 0
    assert tables[2]["pending_commits"] == 2 and tables[2]["commits_since_checkpoint"] == 7
    # the unreadable table carries its error; the fleet is not failed by it
    assert tables[1]["error"].startswith("TableNotFoundError") and tables[1]["lag_score"] == 1.0
    assert log_dir_size(fleet.uris["orders"]) == (files, size)

    assert cli_main(["status", "--config", str(fleet.config)]) == 0
    text = capsys.readouterr().out
    first_row = text.splitlines()[1].split()
    assert first_row[:4] == ["orders", "3.00", "30", "41"]
    assert cli_main(["status", "--config", str(fleet.config), "--strict"]) == 4
    capsys.readouterr()


class _Webhook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def webhook() -> Iterator[tuple[int, list[dict[str, Any]]]]:
    _Webhook.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], _Webhook.received
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def statsd_listener() -> Iterator[tuple[int, list[str]]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    lines: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                data = sock.recv(65535)
            except OSError:
                continue
            lines.extend(data.decode().splitlines())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    yield sock.getsockname()[1], lines
    stop.set()
    thread.join(timeout=5)
    sock.close()


def _run_fleet_dag(home: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("run_fleet_dag.py")), str(EXAMPLE_DAGS / "delta_fleet_health.py")],
        env=env, capture_output=True, text=True, timeout=900,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def _gauges(lines: list[str]) -> dict[str, float]:
    out = {}
    for line in lines:
        name, _, rest = line.partition(":")
        value, _, kind = rest.partition("|")
        if kind.startswith("g"):
            out[name] = float(value)
    return out


@dataclass
class FleetRuns:
    report_dir: Path
    first: dict[str, Any]
    second: dict[str, Any]
    received_after_first: int
    received: list[dict[str, Any]]
    gauges_after_first: dict[str, float]
    orders_log_after_first: tuple[int, int]  # files, bytes of orders' _delta_log when the first run measured it


@pytest.fixture(scope="module")
def fleet_runs(
    fleet: Fleet, airflow_home: Path, tmp_path_factory: pytest.TempPathFactory,
    webhook: tuple[int, list[dict[str, Any]]], statsd_listener: tuple[int, list[str]],
) -> FleetRuns:
    """The packaged fleet DAG run twice with dag.test(): StatsD on, alerts to a local webhook."""
    port, received = webhook
    statsd_port, lines = statsd_listener
    report_dir = tmp_path_factory.mktemp("report")
    env = airflow_env(
        airflow_home, EXAMPLE_DAGS,
        DELTA_MAINTENANCE_CONFIG=str(fleet.config),
        DELTA_MAINTENANCE_REPORT_DIR=str(report_dir),
        DELTA_MAINTENANCE_ALERT_CONN_ID="delta_alerts",
        AIRFLOW_CONN_DELTA_ALERTS=json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": port, "extra": {"path": "/hooks/fleet"}}),
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=str(statsd_port),
        AIRFLOW__METRICS__STATSD_PREFIX="airflow",
    )
    first = _run_fleet_dag(airflow_home, env)
    deadline = time.monotonic() + 30  # the datagrams were sent before the run ended; the reader may lag behind
    while "airflow.delta_maintenance.fleet.unreadable" not in _gauges(lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    received_after_first, gauges, orders_log = len(received), _gauges(lines), log_dir_size(fleet.uris["orders"])
    client = open_coordinator(fleet.spec)  # the backlog grows: still above the threshold, no new crossing
    for v in range(71, 76):
        client.commit(fleet.uris["orders"], v, [add(v)])
    client.close()
    second = _run_fleet_dag(airflow_home, env)
    return FleetRuns(report_dir, first, second, received_after_first, received, gauges, orders_log)


def test_fleet_dag_writes_the_report_alerts_once_and_sends_gauges(fleet: Fleet, fleet_runs: FleetRuns) -> None:
    first, second, received, report_dir = fleet_runs.first, fleet_runs.second, fleet_runs.received, fleet_runs.report_dir
    assert first["state"] == "success", first
    assert first["xcom"]["order"] == ["orders", "missing", "events", "customers"]
    assert first["xcom"]["lagging"] == ["orders"] and first["xcom"]["errors"] == ["missing"]
    assert fleet_runs.received_after_first == 1, received
    assert sorted((a["table"], a["figure"], a["value"], a["threshold"]) for a in received[0]["alerts"]) == [
        ("orders", "commits_since_checkpoint", 41, MAX_SINCE_CHECKPOINT),
        ("orders", "pending_commits", 30, MAX_PENDING),
    ]
    assert "orders" in received[0]["text"]

    gauges = fleet_runs.gauges_after_first
    files, size = fleet_runs.orders_log_after_first
    assert gauges["airflow.delta_maintenance.table.orders.pending_commits"] == 30
    assert gauges["airflow.delta_maintenance.table.orders.commits_since_checkpoint"] == 41
    assert gauges["airflow.delta_maintenance.table.orders.log_files"] == files
    assert gauges["airflow.delta_maintenance.table.orders.log_bytes"] == size
    assert gauges["airflow.delta_maintenance.table.orders.lag_score"] == pytest.approx(3.0)
    assert gauges["airflow.delta_maintenance.table.customers.pending_commits"] == 0
    assert gauges["airflow.delta_maintenance.table.missing.readable"] == 0
    assert gauges["airflow.delta_maintenance.fleet.lagging"] == 1 and gauges["airflow.delta_maintenance.fleet.tables"] == 4

    assert second["state"] == "success" and second["xcom"]["alerts"] == [] and second["xcom"]["lagging"] == ["orders"]
    assert len(received) == 1, received  # still above: no new crossing, no second notification

    report = json.loads((report_dir / "report.json").read_text())
    assert report["tables"][0]["name"] == "orders"
    history = [json.loads(ln) for ln in (report_dir / "history.jsonl").read_text().splitlines()]
    assert [s["tables"]["orders"]["pending_commits"] for s in history] == [30, 35]
    assert report["tables"][0]["pending_versions"] == list(range(41, 76))

    _screenshot(report_dir / "report.html")


def _screenshot(html: Path) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(html.as_uri())
            rows = page.locator("#fleet tbody tr")
            assert rows.count() == 4
            assert rows.nth(0).get_attribute("data-table") == "orders"
            assert rows.nth(0).get_attribute("class") == "lagging"
            assert rows.nth(0).locator('[data-figure="pending_commits"]').inner_text().startswith("35")
            assert page.locator("svg.chart polyline").count() >= 3
            page.screenshot(path=str(ARTIFACTS / "fleet-report.png"), full_page=True)
        finally:
            browser.close()


def test_maintenance_task_successes_reach_the_health_view(
    airflow_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider's listener (loaded by Airflow from the plugin entry point) records each
    successful task of a table's maintenance DAG; status --config shows when each last succeeded."""
    from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

    from .fleet import build_table

    spec, uri = f"local://{tmp_path}/coordinator.db", str(tmp_path / "tables" / "daily")
    open_coordinator(spec + "?create=true").close()
    build_table(spec, uri, ratified=6, published=2)
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {spec}\n  schedule: null\n  checkpoint: {{interval: 3, engine: local}}\n  compaction: {{interval: 2}}\n"
        f"tables:\n  - name: daily\n    uri: {uri}\n"
    )
    report_dir = tmp_path / "report"
    assert cli_main(["status", "--config", str(config), "--json", "--report-dir", str(report_dir)]) == 0
    before = json.loads(capsys.readouterr().out)["tables"][0]
    assert set(before["last_success"].values()) == {None}
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_delta_maintenance.demo.run_dag", str(EXAMPLE_DAGS / "delta_maintenance.py"), "{}"],
        env=airflow_env(airflow_home, EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config), DELTA_MAINTENANCE_REPORT_DIR=str(report_dir)),
        capture_output=True, text=True, timeout=900,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads(line[len("RESULT "):])
    assert run["state"] == "success" and set(run["tasks"].values()) == {"success"}, run
    assert cli_main(["status", "--config", str(config), "--json", "--report-dir", str(report_dir)]) == 0
    after = json.loads(capsys.readouterr().out)["tables"][0]
    assert after["pending_commits"] == 0 and after["latest_published_version"] == 6
    recorded = {task for task, when in after["last_success"].items() if when}
    assert recorded == set(run["tasks"]) == {"wait_for_ratified_commits", "publish", "compact_log", "checkpoint", "cleanup"}
    monkeypatch.delenv("DELTA_MAINTENANCE_REPORT_DIR", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "no-airflow-home"))
    assert cli_main(["status", "--config", str(config)]) == 0  # without a report directory: "unknown", said so
    assert "publish unknown" in capsys.readouterr().out


def test_an_invalid_table_is_in_the_report_and_the_run_is_not_green(fleet: Fleet, airflow_home: Path, tmp_path: Path) -> None:
    """The packaged fleet DAG over a file with a valid and an invalid table: the report lists the
    invalid one as an error marked invalid (with its mistakes), and the run fails, naming it."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"defaults:\n  coordinator: {fleet.spec}\n  schedule: null\n"
        f"tables:\n  - {{name: customers, uri: '{fleet.uris['customers']}'}}\n"
        "  - {name: broken, uri: /nowhere/broken, schedule: every hour, checkpoint: {interval: 0}}\n"
    )
    report_dir = tmp_path / "report"
    run = _run_fleet_dag(airflow_home, airflow_env(airflow_home, EXAMPLE_DAGS, DELTA_MAINTENANCE_CONFIG=str(config),
                                                   DELTA_MAINTENANCE_REPORT_DIR=str(report_dir)))
    assert run["state"] == "failed", run  # old code: success, the invalid table left out
    report = json.loads((report_dir / "report.json").read_text())
    assert [t["name"] for t in report["tables"]] == ["broken", "customers"]
    assert report["errors"] == ["broken"] and report["invalid"] == ["broken"]
    broken = report["tables"][0]
    assert broken["invalid"] is True and broken["error"].startswith("invalid configuration: ")
    assert "every hour" in broken["error"] and "interval" in broken["error"], broken["error"]  # both mistakes
    page = (report_dir / "report.html").read_text()
    assert '<tr class="invalid error" data-table="broken">' in page and "1 invalid configuration" in page
