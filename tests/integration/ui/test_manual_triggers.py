"""Manual runs of a table's maintenance DAG: through the real UI in headless Chromium, and through
the REST API (/api/v2); each is asserted on the table's _delta_log afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_delta_maintenance.deltalog.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from tests._infra.servers import LOOPBACK, listening_addresses

from .conftest import PASSWORD, USER, Deployment

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def assert_maintained(uri: str, *, latest: int) -> None:
    files = list_log_files(open_table_storage(uri))
    assert [c.version for c in files.commits] == list(range(latest + 1)), "every ratified version published"
    assert [g.version for g in files.complete_checkpoints()] == [latest], "checkpoint at the latest version"
    assert [(c.version, c.end_version) for c in files.compactions] == [(1, 5), (6, 10)]


def test_servers_listen_on_loopback_only(airflow_deployment: Deployment) -> None:
    port = int(airflow_deployment.url.rsplit(":", 1)[1])
    assert listening_addresses(port) <= LOOPBACK


def _sign_in(page: Any, url: str) -> None:
    """Log in through SimpleAuthManager's form and wait until its redirect has landed: a goto
    issued while the post-login navigation is under way is aborted (net::ERR_ABORTED)."""
    page.goto(f"{url}/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda current: "login" not in current, timeout=60_000)
    page.wait_for_load_state("networkidle")


def test_trigger_with_params_from_the_ui(airflow_deployment: Deployment) -> None:
    from playwright.sync_api import expect, sync_playwright

    dag_id = "delta_maintenance__ui_orders"
    uri, _ = airflow_deployment.tables[dag_id]
    shot = airflow_deployment.artifacts / "ui-trigger.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            _sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/dags/{dag_id}")
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.get_by_role("dialog")
            expect(dialog).to_be_visible()
            switch = dialog.locator('input[name="element_force_checkpoint"]')
            control = dialog.locator('label:has(input[name="element_force_checkpoint"])')
            control.scroll_into_view_if_needed()
            control.click()  # a param changed in the form (a switch), validated by its schema
            expect(switch).to_be_checked()
            dialog.get_by_role("button", name="Trigger").last.click()
            expect(page.get_by_text("Dag run has been successfully triggered")).to_be_visible()
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
    with sync_playwright() as p:  # keep a screenshot of the finished run
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _sign_in(page, airflow_deployment.url)
        page.goto(f"{airflow_deployment.url}/dags/{dag_id}/runs/{run['dag_run_id']}")
        expect(page.get_by_text("Success").first).to_be_visible()
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert shot.stat().st_size > 10_000


def test_trigger_with_params_through_the_rest_api(airflow_deployment: Deployment) -> None:
    dag_id = "delta_maintenance__api_orders"
    uri, _ = airflow_deployment.tables[dag_id]
    run = airflow_deployment.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"force_checkpoint": True, "skip_wait": False, "target_version": 12}})
    done = airflow_deployment.wait_for_run(dag_id, run["dag_run_id"])
    assert done["state"] == "success", done
    assert_maintained(uri, latest=12)
    with pytest.raises(Exception):  # schema validation: a wrong type is refused before any run
        airflow_deployment.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"target_version": "twelve"}})
