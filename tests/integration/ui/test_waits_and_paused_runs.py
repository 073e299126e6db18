"""What a new user meets in the first week, in the real deployment: a reschedule-mode sensor logs a
change once (not once per poke), and a manual run with Params on a paused, scheduled DAG —
triggered from the form with "Unpause on trigger" left as Airflow shows it — does its work although
the scheduled run Airflow creates on unpausing publishes the pending commits first."""

from __future__ import annotations

import json
import time

import pytest

from airflow_delta_maintenance.deltalog.log_segment.listing import list_log_files
from airflow_delta_maintenance.deltalog.storage import open_table_storage
from airflow_delta_maintenance.demo.sample_table import add_action_for, data_batch
from airflow_delta_maintenance.maintenance.table.coordinator_client import open_coordinator

from .browser import UI_DEADLINE_MS, new_page, sign_in, submit_the_trigger_form
from .conftest import Deployment

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

RESCHEDULED = "Rescheduling task, marking task as UP_FOR_RESCHEDULE"


def test_a_reschedule_mode_sensor_logs_a_change_once(airflow_deployment: Deployment) -> None:
    dag_id = "delta_maintenance__quiet_orders"
    uri, spec = airflow_deployment.tables[dag_id]
    airflow_deployment.unpause(dag_id)
    run = airflow_deployment.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}})
    deadline = time.monotonic() + 900
    # two pokes, each in a new process, that saw nothing new: old code logged its observation at each
    # (a third proved nothing more and cost 20 s)
    while airflow_deployment.task_log(dag_id, run["dag_run_id"], "wait_for_ratified_commits").count(RESCHEDULED) < 2:
        assert time.monotonic() < deadline, "the sensor was not rescheduled twice"
        time.sleep(3)
    client = open_coordinator(spec)
    client.commit(uri, 1, [add_action_for(uri, data_batch(10, 10, "emea"), "emea")])  # the change it waits for
    client.close()
    done = airflow_deployment.wait_for_run(dag_id, run["dag_run_id"])
    assert done["state"] == "success", done
    log = airflow_deployment.task_log(dag_id, run["dag_run_id"], "wait_for_ratified_commits")
    assert log.count(RESCHEDULED) >= 2, log[-3000:]
    assert log.count("latest ratified 0; waiting for 1 new commits beyond 0") == 1, log[-5000:]  # old code: once per poke
    assert log.count("1 commits ratified beyond 0") == 2, log[-5000:]  # the change, then the task's summary line ("wait: …")


def test_a_manual_force_checkpoint_on_a_paused_scheduled_dag_is_not_overtaken(airflow_deployment: Deployment) -> None:
    from playwright.sync_api import expect, sync_playwright

    dag_id = "delta_maintenance__scheduled_orders"
    uri, _ = airflow_deployment.tables[dag_id]
    assert airflow_deployment.api("GET", f"/dags/{dag_id}")["is_paused"] is True
    with sync_playwright() as p:
        browser, page = new_page(p)
        try:
            sign_in(page, airflow_deployment.url)
            page.goto(f"{airflow_deployment.url}/dags/{dag_id}")
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.get_by_role("dialog")
            expect(dialog).to_be_visible()
            control = dialog.locator('label:has(input[name="element_force_checkpoint"])')
            control.scroll_into_view_if_needed()
            control.click()
            expect(dialog.locator('input[name="element_force_checkpoint"]')).to_be_checked()
            submit_the_trigger_form(page, airflow_deployment, dag_id)  # "Unpause on trigger" as Airflow shows it
        except Exception:
            page.screenshot(path=str(airflow_deployment.artifacts / "ui-paused-trigger-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    deadline = time.monotonic() + UI_DEADLINE_MS / 1000
    manual: list[dict] = []
    while not manual and time.monotonic() < deadline:
        manual = [r for r in airflow_deployment.api("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"] if r["run_type"] == "manual"]
        time.sleep(1)
    assert len(manual) == 1, manual
    done = airflow_deployment.wait_for_run(dag_id, manual[0]["dag_run_id"])
    assert done["state"] == "success" and done["conf"]["force_checkpoint"] is True, done
    xcom = airflow_deployment.api("GET", f"/dags/{dag_id}/dagRuns/{manual[0]['dag_run_id']}/taskInstances/checkpoint/xcomEntries/return_value?deserialize=true")
    record = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert record["skipped"] is False and record["version"] == 8, record  # old code: skipped, its wait timed out
    files = list_log_files(open_table_storage(uri))
    assert [c.version for c in files.commits] == list(range(9)) and [g.version for g in files.complete_checkpoints()] == [8]
    runs = airflow_deployment.api("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"]
    (airflow_deployment.artifacts / "ui-paused-trigger-runs.json").write_text(json.dumps(
        [{k: r[k] for k in ("dag_run_id", "run_type", "state", "run_after")} for r in runs], indent=1))
