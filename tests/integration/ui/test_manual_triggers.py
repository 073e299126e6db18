"""Manual runs of a table's maintenance DAG: through the real UI in headless Chromium, and through
the REST API (/api/v2); each is asserted on the table's _delta_log afterwards, and a task's log in
the UI shows the task's summary line."""

from __future__ import annotations

import json
import re
import urllib.error
from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests._infra.servers import LOOPBACK, listening_addresses

from .browser import new_page, sign_in, submit_the_trigger_form
from .conftest import INVALID_DAG, Deployment

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]  # the deployment fixture may take long on a busy machine


def assert_maintained(uri: str, *, latest: int) -> None:
    files = list_log_files(open_table_storage(uri))
    assert [c.version for c in files.commits] == list(range(latest + 1)), "every ratified version published"
    assert [g.version for g in files.complete_checkpoints()] == [latest], "checkpoint at the latest version"
    assert [(c.version, c.end_version) for c in files.compactions] == [(1, 5), (6, 10)]


def test_servers_listen_on_loopback_only(airflow_deployment: Deployment) -> None:
    port = int(airflow_deployment.url.rsplit(":", 1)[1])
    assert listening_addresses(port) <= LOOPBACK


def test_trigger_with_params_from_the_ui(airflow_deployment: Deployment) -> None:
    from playwright.sync_api import expect, sync_playwright

    dag_id = "delta_maintenance__ui_orders"
    uri, _ = airflow_deployment.tables[dag_id]
    shot = airflow_deployment.artifacts / "ui-trigger.png"
    with sync_playwright() as p:
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/dags/{dag_id}")
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.get_by_role("dialog")
            expect(dialog).to_be_visible()
            switch = dialog.locator('input[name="element_force_checkpoint"]')
            control = dialog.locator('label:has(input[name="element_force_checkpoint"])')
            control.scroll_into_view_if_needed()
            control.click()  # a param changed in the form (a switch), validated by its schema
            expect(switch).to_be_checked()
            submit_the_trigger_form(page, airflow_deployment, dag_id)  # paused at creation: "Unpause on trigger" ticked
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-triggered.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    runs = [r for r in airflow_deployment.api("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"]]
    assert len(runs) == 1 and runs[0]["run_type"] == "manual", runs  # no schedule: only our click
    run = airflow_deployment.wait_for_run(dag_id, runs[0]["dag_run_id"])
    assert run["state"] == "success", run
    assert run["conf"]["force_checkpoint"] is True and run["conf"]["dry_run"] is True
    assert_maintained(uri, latest=12)
    # every task's log has its one summary line; the record in XCom has the common keys
    summaries = {
        "publish": r"publish: published 1-12 \(12 commits, [\d.]+ KiB\), reported v12 in \d+\.\d s",
        "checkpoint": r"checkpoint: wrote v12 \([\w-]+, 1 part, [\d,]+ actions, [\d.]+ KiB\) in \d+\.\d s",
        "cleanup": r"cleanup: skipped — no commit is older than the retention cutoff",
    }
    for task_id, pattern in summaries.items():
        log = airflow_deployment.task_log(dag_id, run["dag_run_id"], task_id)  # the try that succeeded
        assert len(re.findall(pattern, log)) == 1, (task_id, log[-3000:])
    xcom = airflow_deployment.api("GET", f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/publish/xcomEntries/return_value?deserialize=true")
    record = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert (record["operation"], record["from_version"], record["to_version"], record["count"]) == ("publish", 1, 12, 12), record
    log_shot = airflow_deployment.artifacts / "ui-task-log-summary.png"
    with sync_playwright() as p:  # keep a screenshot of the finished run, and of a task log with its summary line
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/dags/{dag_id}/runs/{run['dag_run_id']}")
            expect(page.get_by_text("Success").first).to_be_visible()
            page.screenshot(path=str(shot), full_page=True)
            page.goto(f"{airflow_deployment.url}/dags/{dag_id}/runs/{run['dag_run_id']}/tasks/checkpoint")  # its Logs tab
            expect(page.get_by_text(re.compile(summaries["checkpoint"])).first).to_be_visible()
            page.screenshot(path=str(log_shot), full_page=True)
        except Exception:
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000 and log_shot.stat().st_size > 10_000


def test_trigger_with_params_through_the_rest_api(airflow_deployment: Deployment) -> None:
    dag_id = "delta_maintenance__api_orders"
    uri, _ = airflow_deployment.tables[dag_id]
    airflow_deployment.unpause(dag_id)  # DAGs are paused at creation (Airflow's default); the REST API does not unpause on trigger
    run = airflow_deployment.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"force_checkpoint": True, "skip_wait": False, "target_version": 12}})
    done = airflow_deployment.wait_for_run(dag_id, run["dag_run_id"])
    assert done["state"] == "success", done
    assert_maintained(uri, latest=12)
    with pytest.raises(urllib.error.HTTPError):  # schema validation: a wrong type is refused before any run
        airflow_deployment.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"target_version": "twelve"}})


def test_an_invalid_table_leaves_the_other_dags_visible(airflow_deployment: Deployment) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert airflow_deployment.api("GET", "/importErrors")["total_entries"] == 0, "one bad table is not an import error of the file"
    broken = airflow_deployment.api("GET", f"/dags/{INVALID_DAG}")
    assert "invalid-config" in [t["name"] for t in broken["tags"]]
    assert broken["description"].startswith("INVALID CONFIGURATION: schedule: 'every hour' is not a cron expression")
    with sync_playwright() as p:
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/dags")
            for dag_id in [*airflow_deployment.tables, INVALID_DAG]:
                expect(page.get_by_text(dag_id, exact=True).first).to_be_visible()
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-dag-list-with-invalid-table.png"), full_page=True)
        finally:
            browser.close()


def _add_connection_in_the_form(page: Any, url: str, conn_id: str, type_name: str, fields: dict[str, str]) -> None:
    """Admin → Connections → Add Connection, filled as a user does: the type picked from the list,
    the standard fields (``port`` as the form asks: 0) and our extra fields (``element_<key>``)."""
    from playwright.sync_api import expect

    page.goto(f"{url}/connections")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    dialog.locator('input[name="connection_id"]').fill(conn_id)
    picker = dialog.get_by_role("combobox").first  # react-select: open it, type, pick the option
    picker.click()
    picker.press_sequentially(type_name)
    page.get_by_role("option", name=type_name, exact=True).click()
    expect(dialog.get_by_text(type_name, exact=True).first).to_be_visible()
    standard = {"host", "port", "login", "password", "schema", "description"}
    # the standard fields first (their section is open); then our extra fields, in the section the
    # form shows collapsed (opening it closes the other)
    ordered = sorted(fields.items(), key=lambda kv: kv[0] not in standard)
    opened = False
    for name, value in ordered:
        if name not in standard and not opened:
            dialog.get_by_role("button", name="Extra Fields", exact=True).click()
            opened = True
        field = dialog.locator(f'input[name="{name}"]' if name in standard else f'input[name="element_{name}"]').first
        field.scroll_into_view_if_needed()
        field.fill(value)
    dialog.get_by_role("button", name="Save").click()
    expect(page.get_by_role("row").filter(has_text=conn_id)).to_be_visible()


def test_the_connection_test_button_answers_truthfully(airflow_deployment: Deployment) -> None:
    """Good and wrong connections of both types, created through the UI's form as a user fills it
    in (the port as the form asks: 0), tested with each row's Test button; the answer is our hooks'
    real, read-only call."""
    from playwright.sync_api import expect, sync_playwright

    uri, spec = airflow_deployment.tables["delta_maintenance__ui_orders"]
    coordinator, storage = "Delta Lake commit coordinator", "Delta Lake storage"
    cases = {
        "coordinator_good": (coordinator, {"host": spec, "port": "0"}, True, re.compile(r"readable, \d+ table\(s\) registered")),
        "coordinator_typo": (coordinator, {"host": spec.replace("coordinator.db", "coordinatr.db"), "port": "0"}, False,
                             "the coordinator database does not exist"),
        "storage_good": (storage, {"port": "0", "test_location": f"file://{uri}"}, True, "/_delta_log: "),
        "storage_missing": (storage, {"port": "0", "test_location": "file:///nowhere/orders"}, False, "listing file:///nowhere/orders: FileNotFoundError"),
    }
    answers: dict[str, dict] = {}
    with sync_playwright() as p:
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            for conn_id, (type_name, fields, _, _) in cases.items():
                _add_connection_in_the_form(page, airflow_deployment.url, conn_id, type_name, fields)
            page.goto(f"{airflow_deployment.url}/connections")
            for conn_id, (_, _, ok, needle) in cases.items():
                with page.expect_response(lambda r: r.url.endswith("/connections/test")) as response:
                    page.get_by_role("row").filter(has_text=conn_id).get_by_role("button", name="Test Connection").click()
                answers[conn_id] = response.value.json()
                expect(page.get_by_text(needle).last).to_be_visible()
                expect(page.get_by_text("Test Connection Successful" if ok else "Test Connection Failed").last).to_be_visible()
                page.screenshot(path=str(airflow_deployment.artifacts / f"ui-connection-test-{conn_id}.png"), full_page=True)
                page.mouse.move(5, 5)  # away from the row's tooltip
        except Exception:
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-connection-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert {k: v["status"] for k, v in answers.items()} == {k: ok for k, (_, _, ok, _) in cases.items()}, answers
    stored = {c["connection_id"]: c for c in airflow_deployment.api("GET", "/connections")["connections"]}
    assert stored["storage_good"]["conn_type"] == "delta_storage" and stored["coordinator_good"]["conn_type"] == "delta_coordinator"
