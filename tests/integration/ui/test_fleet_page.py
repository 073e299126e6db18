"""The fleet health page of a deployment made with `delta-maintenance init-dags` and nothing else:
the fleet DAG it copied runs, and the UI's "Delta fleet health" page shows every configured table,
the invalid one included (marked invalid); the run that found it is not green. The provider's plugin
(loaded from its entry point) serves the report to signed-in users only and is listed with its
navigation entry."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from .browser import new_page, sign_in
from .conftest import FLEET_DAG, INVALID_DAG, Deployment

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]


def test_the_fleet_page_shows_every_table_after_the_fleet_dags_run(airflow_deployment: Deployment) -> None:
    from playwright.sync_api import expect, sync_playwright

    airflow_deployment.unpause(FLEET_DAG)  # paused at creation, as Airflow leaves a new DAG
    run = airflow_deployment.api("POST", f"/dags/{FLEET_DAG}/dagRuns", {"logical_date": None})
    done = airflow_deployment.wait_for_run(FLEET_DAG, run["dag_run_id"])
    assert done["state"] == "failed", done  # an invalid table is an error of the fleet, not a silent omission
    log = airflow_deployment.task_log(FLEET_DAG, run["dag_run_id"], "fleet_report")
    assert "1 table(s) with an invalid configuration, reported as errors: broken" in log, log[-3000:]
    # the plugin's routes: refused without a token, the report's JSON with one; listed with its entry
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{airflow_deployment.url}/delta-maintenance/report", timeout=120)
    assert refused.value.code in (401, 403)
    req = urllib.request.Request(f"{airflow_deployment.url}/delta-maintenance/report.json", headers={"Authorization": f"Bearer {airflow_deployment.token()}"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        served = json.loads(resp.read())
    assert {t["name"] for t in served["tables"]} == {d.removeprefix("delta_maintenance__") for d in [*airflow_deployment.tables, INVALID_DAG]}
    listed = {p["name"]: p for p in airflow_deployment.api("GET", "/plugins")["plugins"]}
    assert listed["delta_maintenance_fleet_health"]["external_views"][0]["href"] == "/delta-maintenance/report"
    shot = airflow_deployment.artifacts / "ui-fleet-health-page.png"
    with sync_playwright() as p:
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/delta-maintenance/report")  # the page the navigation entry opens
            rows = page.locator("#fleet tbody tr")
            wanted = {d.removeprefix("delta_maintenance__") for d in [*airflow_deployment.tables, INVALID_DAG]}
            expect(rows).to_have_count(len(wanted))
            names = {rows.nth(i).get_attribute("data-table") for i in range(len(wanted))}
            assert names == wanted, names
            broken = page.locator('#fleet tr[data-table="broken"]')
            assert broken.get_attribute("class") == "invalid error"
            expect(broken).to_contain_text("invalid configuration: ")
            expect(broken).to_contain_text("every hour")
            page.screenshot(path=str(shot), full_page=True)
        except Exception:
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-fleet-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
